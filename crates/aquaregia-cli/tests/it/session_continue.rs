//! Sessions: a `chat` is saved, `run --continue` in a new process goes on with it, `--resume`
//! takes an id, and `aquaregia sessions` lists them.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, run, transcript, use_mock};
use serde_json::Value;

#[tokio::test]
async fn continue_resumes_the_latest_session_of_the_directory_in_a_new_process() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![
        Reply::text_stream(&["Noted: blue."]),
        Reply::text_stream(&["Also noted."]),
        Reply::text_stream(&["Blue."]),
        Reply::text_stream(&["Fresh start."]),
    ])
    .await;
    let mut chat = cli(&scratch);
    chat.arg("chat");
    use_mock(&mut chat, &model);
    let outcome = run(chat, "My favourite colour is blue.\nRemember it.\n").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");

    let mut again = cli(&scratch);
    again.args(["run", "--continue", "What is my favourite colour?"]);
    use_mock(&mut again, &model);
    let outcome = run(again, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Blue.\n");

    let requests = model.bodies();
    let roles: Vec<String> = transcript(&requests[2])
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    assert_eq!(
        transcript(&requests[2])[1].1,
        "Noted: blue.",
        "the earlier turn went to the model"
    );

    let mut list = cli(&scratch);
    list.args(["sessions", "--json"]);
    let listed = run(list, "").await;
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let sessions: Value = serde_json::from_str(&listed.stdout).unwrap();
    let sessions = sessions.as_array().unwrap();
    assert_eq!(sessions.len(), 1, "--continue added to the same session");
    assert_eq!(sessions[0]["turns"], 3);
    assert_eq!(sessions[0]["title"], "My favourite colour is blue.");
    assert_eq!(sessions[0]["model"], "openai-chat:mock");
    let cwd = std::fs::canonicalize(&scratch.path).unwrap();
    assert_eq!(sessions[0]["cwd"], cwd.display().to_string());
    let id = sessions[0]["id"].as_str().unwrap().to_owned();

    let mut table = cli(&scratch);
    table.arg("sessions");
    let table = run(table, "").await;
    assert!(table.stdout.contains(&id), "{table:?}");
    assert!(table.stdout.contains("3 turns"), "{table:?}");

    // A run without --continue starts a session of its own.
    let mut fresh = cli(&scratch);
    fresh.args(["run", "Hello?"]);
    use_mock(&mut fresh, &model);
    assert_eq!(run(fresh, "").await.code, Some(0));
    assert_eq!(transcript(&model.bodies()[3]).len(), 1);
    let mut list = cli(&scratch);
    list.args(["sessions", "--json"]);
    let sessions: Value = serde_json::from_str(&run(list, "").await.stdout).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 2);
    assert_eq!(sessions[0]["title"], "Hello?", "newest first");
}

#[tokio::test]
async fn resume_takes_an_id_and_rejects_unknown_or_unsafe_ones() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![
        Reply::text_stream(&["First."]),
        Reply::text_stream(&["Second."]),
    ])
    .await;
    let mut first = cli(&scratch);
    first.args(["run", "--output", "json", "One."]);
    use_mock(&mut first, &model);
    let outcome = run(first, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let summary: Value = serde_json::from_str(&outcome.stdout).unwrap();
    let id = summary["sessionId"].as_str().unwrap().to_owned();

    let mut resume = cli(&scratch);
    resume.args(["run", "--resume", &id, "Two."]);
    use_mock(&mut resume, &model);
    assert_eq!(run(resume, "").await.code, Some(0));
    assert_eq!(transcript(&model.bodies()[1]).len(), 3);

    for bad in ["../../etc/passwd", "no-such-session"] {
        let mut resume = cli(&scratch);
        resume.args(["run", "--resume", bad, "Three."]);
        use_mock(&mut resume, &model);
        let outcome = run(resume, "").await;
        assert_eq!(outcome.code, Some(1), "{outcome:?}");
        assert!(outcome.stderr.starts_with("error: "), "{outcome:?}");
    }
    let mut nothing = cli(&scratch);
    nothing.current_dir(scratch.data_dir());
    nothing.args(["run", "--continue", "Four."]);
    use_mock(&mut nothing, &model);
    let outcome = run(nothing, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(
        outcome.stderr.contains("no session to continue"),
        "{outcome:?}"
    );
    assert_eq!(model.bodies().len(), 2);
}

/// The one session file in the scratch data directory.
fn session_file(scratch: &Scratch) -> std::path::PathBuf {
    let files: Vec<_> = std::fs::read_dir(scratch.data_dir().join("sessions"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

#[tokio::test]
async fn continue_loads_every_intact_turn_of_a_damaged_session_file() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![
        Reply::text_stream(&["Un."]),
        Reply::text_stream(&["Deux."]),
        Reply::text_stream(&["Quatre."]),
    ])
    .await;
    for args in [
        &["run", "première"][..],
        &["run", "--continue", "deuxième"][..],
    ] {
        let mut command = cli(&scratch);
        command.args(args);
        use_mock(&mut command, &model);
        assert_eq!(run(command, "").await.code, Some(0));
    }
    // A garbled line in the middle, and a crash cut the third turn inside the "è".
    let path = session_file(&scratch);
    let text = std::fs::read(&path).unwrap();
    let first_newline = text.iter().position(|b| *b == b'\n').unwrap();
    let mut bytes = text[..=first_newline].to_vec();
    bytes.extend_from_slice(b"{\"type\":\"turn\",\xff\n");
    bytes.extend_from_slice(&text[first_newline + 1..]);
    bytes.extend_from_slice(
        "{\"type\":\"turn\",\"turn\":{\"messages\":[{\"role\":\"user\",\"content\":\"troisi"
            .as_bytes(),
    );
    bytes.push("è".as_bytes()[0]);
    std::fs::write(&path, bytes).unwrap();

    let mut list = cli(&scratch);
    list.args(["sessions", "--json"]);
    let listed = run(list, "").await;
    let sessions: Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{listed:?}");

    let mut again = cli(&scratch);
    again.args(["run", "--continue", "quatrième"]);
    use_mock(&mut again, &model);
    let outcome = run(again, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Quatre.\n");
    assert!(
        outcome.stderr.contains("2 damaged line(s)"),
        "the user is told: {outcome:?}"
    );
    let sent = transcript(&model.bodies()[2]);
    let texts: Vec<&str> = sent.iter().map(|(_, text)| text.as_str()).collect();
    assert_eq!(texts, ["première", "Un.", "deuxième", "Deux.", "quatrième"]);
}

#[tokio::test]
async fn two_processes_on_one_session_neither_lose_a_turn_nor_diverge() {
    two_processes_race(&Scratch::new()).await;
}

/// A chat and a `run --continue` on one session, in the store `scratch`'s config names: the
/// run appends behind the chat's back, the chat's next save conflicts, reloads, says so and
/// saves on top; its next request carries the run's turn.
pub(crate) async fn two_processes_race(scratch: &Scratch) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let model = MockServer::with_replies(vec![
        Reply::text_stream(&["Zero."]),
        Reply::text_stream(&["One A."]),
        Reply::text_stream(&["Two."]),
        Reply::text_stream(&["One B."]),
        Reply::text_stream(&["One C."]),
    ])
    .await;
    let mut first = cli(scratch);
    first.args(["run", "zero"]);
    use_mock(&mut first, &model);
    assert_eq!(run(first, "").await.code, Some(0));

    // Process one: a chat on the session; its first turn is saved once `/help` answers.
    let mut chat = cli(scratch);
    chat.args(["chat", "--continue"]);
    use_mock(&mut chat, &model);
    let mut chat = tokio::process::Command::from(chat);
    chat.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut chat = chat.spawn().unwrap();
    let mut input = chat.stdin.take().unwrap();
    input.write_all(b"one a\n/help\n").await.unwrap();
    let mut errors = tokio::io::BufReader::new(chat.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("this list") {
        let read = tokio::time::timeout(common::BOUND, errors.read_line(&mut seen))
            .await
            .unwrap()
            .unwrap();
        assert!(read > 0, "the chat ended early: {seen}");
    }

    // Process two adds a turn behind the chat's back.
    let mut other = cli(scratch);
    other.args(["run", "--continue", "two"]);
    use_mock(&mut other, &model);
    let outcome = run(other, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");

    input.write_all(b"one b\none c\n").await.unwrap();
    drop(input);
    let mut rest = String::new();
    tokio::time::timeout(common::BOUND, errors.read_to_string(&mut rest))
        .await
        .unwrap()
        .unwrap();
    let status = tokio::time::timeout(common::BOUND, chat.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{seen}{rest}");
    assert!(
        rest.contains("was changed by another process"),
        "the chat says so: {rest}"
    );

    // The chat's next turn goes on from the latest history, process two's turn included.
    let texts: Vec<String> = transcript(&model.bodies()[4])
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    assert_eq!(
        texts,
        [
            "zero", "Zero.", "one a", "One A.", "two", "Two.", "one b", "One B.", "one c"
        ]
    );
    let mut list = cli(scratch);
    list.args(["sessions", "--json"]);
    let sessions: Value = serde_json::from_str(&run(list, "").await.stdout).unwrap();
    assert_eq!(sessions[0]["turns"], 5, "no turn was lost");
}

/// One byte of a multi-byte character lost inside a middle turn (not at the end of the file):
/// that turn is skipped, every other one loads and the conversation goes on from them, and
/// the warning names the file and the line.
#[tokio::test]
async fn a_torn_character_inside_a_middle_turn_loses_only_that_turn() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![
        Reply::text_stream(&["Un."]),
        Reply::text_stream(&["Deux."]),
        Reply::text_stream(&["Trois."]),
        Reply::text_stream(&["Quatre."]),
    ])
    .await;
    for args in [
        &["run", "première"][..],
        &["run", "--continue", "deuxième"][..],
        &["run", "--continue", "troisième"][..],
    ] {
        let mut command = cli(&scratch);
        command.args(args);
        use_mock(&mut command, &model);
        assert_eq!(run(command, "").await.code, Some(0));
    }
    // The second turn's "è" loses its second byte; its line and every later one stay whole.
    let path = session_file(&scratch);
    let bytes = std::fs::read(&path).unwrap();
    let needle = "deuxi\u{e8}me".as_bytes();
    let at = bytes
        .windows(needle.len())
        .position(|window| window == needle)
        .expect("the second turn is stored");
    let line = 1 + bytes[..at].iter().filter(|b| **b == b'\n').count();
    let mut torn = bytes[..at + 6].to_vec();
    torn.extend_from_slice(&bytes[at + 7..]);
    assert!(
        torn[at + 6..].contains(&b'\n') && std::str::from_utf8(&torn).is_err(),
        "the tear is inside the file, not at its end"
    );
    std::fs::write(&path, torn).unwrap();

    let mut again = cli(&scratch);
    again.args(["run", "--continue", "quatrième"]);
    use_mock(&mut again, &model);
    let outcome = run(again, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Quatre.\n");
    assert!(
        outcome.stderr.contains("1 damaged line(s)"),
        "the user is told: {outcome:?}"
    );
    let warning = outcome
        .stderr
        .lines()
        .find(|l| l.contains("skipping a damaged session line"))
        .unwrap_or_else(|| panic!("no warning for the line: {outcome:?}"));
    assert!(
        warning.contains(&format!("line={line}")) && warning.contains(path.to_str().unwrap()),
        "the warning says which line of which file ({line}): {warning}"
    );
    let sent = transcript(&model.bodies()[3]);
    let texts: Vec<&str> = sent.iter().map(|(_, text)| text.as_str()).collect();
    assert_eq!(
        texts,
        ["première", "Un.", "troisième", "Trois.", "quatrième"]
    );
}
