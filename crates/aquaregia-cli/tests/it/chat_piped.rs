//! `aquaregia chat` with stdin piped: each line is one turn, and each turn sees the ones before.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, run, transcript, use_mock};

#[tokio::test]
async fn two_lines_are_two_turns_and_the_second_request_carries_the_first() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![
        Reply::text_stream(&["Nice to meet you, Ann."]),
        Reply::text_stream(&["Your name is Ann."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.arg("chat");
    use_mock(&mut command, &model);
    let outcome = run(command, "My name is Ann.\n\n/usage\nWhat is my name?\n").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(
        outcome.stdout, "Nice to meet you, Ann.\nYour name is Ann.\n",
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("tokens: "), "{outcome:?}");
    let requests = model.bodies();
    assert_eq!(requests.len(), 2);
    let pair = |role: &str, text: &str| (role.to_owned(), text.to_owned());
    assert_eq!(transcript(&requests[0]), [pair("user", "My name is Ann.")]);
    assert_eq!(
        transcript(&requests[1]),
        [
            pair("user", "My name is Ann."),
            pair("assistant", "Nice to meet you, Ann."),
            pair("user", "What is my name?"),
        ]
    );
}

#[tokio::test]
async fn continuation_lines_and_commands_are_not_turns() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![Reply::text_stream(&["Two lines read."])]).await;
    let mut command = cli(&scratch);
    command.arg("chat");
    use_mock(&mut command, &model);
    let outcome = run(
        command,
        "/help\n/nonsense\nfirst line\\\nsecond line\n/clear\n/exit\nnever sent\n",
    )
    .await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Two lines read.\n");
    assert!(outcome.stderr.contains("/model <spec>"), "{outcome:?}");
    assert!(
        outcome.stderr.contains("unknown command /nonsense"),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("started a new conversation"));
    let requests = model.bodies();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        transcript(&requests[0]),
        [("user".to_owned(), "first line\nsecond line".to_owned())]
    );
}
