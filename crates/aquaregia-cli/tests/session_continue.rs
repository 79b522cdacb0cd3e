//! Sessions: a `chat` is saved, `run --continue` in a new process goes on with it, `--resume`
//! takes an id, and `aquaregia sessions` lists them.

mod common;

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
