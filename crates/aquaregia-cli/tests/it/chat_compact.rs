//! `/compact` in `aquaregia chat`: the model summarises the turns before the latest one, the
//! next request carries the summary instead of them, and the session keeps every turn while
//! `--continue` goes on from the summary. A session compacted by the ACP agent is continued
//! from its compaction too.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text};
use common::{Scratch, cli, run, transcript, use_mock};

#[tokio::test]
async fn compact_replaces_earlier_turns_with_a_summary() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![
        Reply::text_stream(&["Nice to meet you, Ann."]),
        Reply::text_stream(&["Blue is a fine colour."]),
        Reply::json(chat_text("SUMMARY: the user is Ann.")),
        Reply::text_stream(&["You are Ann and like blue."]),
        Reply::text_stream(&["Still Ann."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.arg("chat");
    use_mock(&mut command, &model);
    let outcome = run(
        command,
        "My name is Ann.\nI like blue.\n/compact\nWho am I?\n",
    )
    .await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(
        outcome.stderr.contains("compacted: 2 messages summarised"),
        "{outcome:?}"
    );

    let requests = model.bodies();
    assert_eq!(requests.len(), 4, "{outcome:?}");
    let after = transcript(&requests[3]);
    let texts: Vec<&str> = after.iter().map(|(_, text)| text.as_str()).collect();
    assert!(texts[0].contains("SUMMARY: the user is Ann."), "{after:?}");
    assert!(!texts.contains(&"My name is Ann."), "{after:?}");
    assert!(!texts.contains(&"Nice to meet you, Ann."), "{after:?}");
    // The latest turn before /compact is kept as it was.
    assert_eq!(
        &texts[1..],
        ["I like blue.", "Blue is a fine colour.", "Who am I?"],
        "{after:?}"
    );

    // One session, every turn kept in it (compaction used to save a second session).
    let files: Vec<_> = std::fs::read_dir(scratch.data_dir().join("sessions"))
        .unwrap()
        .filter_map(|entry| {
            let path = entry.unwrap().path();
            (path.extension()? == "jsonl").then_some(path)
        })
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let listed = run(
        {
            let mut command = cli(&scratch);
            command.args(["sessions", "--json"]);
            command
        },
        "",
    )
    .await;
    assert!(listed.stdout.contains("\"turns\": 3"), "{listed:?}");

    // `--continue` goes on from the compacted session.
    let mut command = cli(&scratch);
    command.args(["chat", "--continue"]);
    use_mock(&mut command, &model);
    let outcome = run(command, "Again?\n").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let requests = model.bodies();
    let resumed = transcript(&requests[4]);
    assert!(
        resumed[0].1.contains("SUMMARY: the user is Ann."),
        "{resumed:?}"
    );
    assert!(
        !resumed.iter().any(|(_, text)| text == "My name is Ann."),
        "{resumed:?}"
    );
    assert_eq!(
        resumed.last().map(|(_, text)| text.as_str()),
        Some("Again?")
    );
}

/// A session the ACP agent compacted (its base stored under the key that agent used) is
/// continued by `chat --resume` from the compaction, not from every turn.
#[tokio::test]
async fn resume_continues_from_a_compaction_the_acp_agent_stored() {
    use aquaregia::{FileSessionStore, Message, NewSession, SessionStore, SessionTurn};
    let scratch = Scratch::new();
    let store = FileSessionStore::new(scratch.data_dir().join("sessions"));
    let cwd = std::env::current_dir().unwrap();
    let meta = store
        .create(NewSession::new(cwd).metadata(
            "aquaregia.acp.base",
            serde_json::json!({"turns": 1, "messages": [Message::user("SUMMARY: the user is Ann.")]}),
        ))
        .await
        .unwrap();
    for (prompt, answer) in [("My name is Ann.", "Hi Ann."), ("I like blue.", "Nice.")] {
        store
            .append_turn(
                &meta.id,
                SessionTurn::new(vec![Message::user(prompt), Message::assistant(answer)]),
            )
            .await
            .unwrap();
    }
    let model = MockServer::with_replies(vec![Reply::text_stream(&["You are Ann."])]).await;
    let mut command = cli(&scratch);
    command.args(["chat", "--resume", meta.id.as_str()]);
    use_mock(&mut command, &model);
    let outcome = run(command, "Who am I?\n").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let sent = transcript(&model.bodies()[0]);
    let texts: Vec<&str> = sent.iter().map(|(_, text)| text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "SUMMARY: the user is Ann.",
            "I like blue.",
            "Nice.",
            "Who am I?"
        ],
        "{sent:?}"
    );
}
