//! `/compact` in `aquaregia chat`: the model summarises the turns before the latest one, the
//! next request carries the summary instead of them, and the compacted conversation is saved
//! as the session that `--continue` picks up.

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
