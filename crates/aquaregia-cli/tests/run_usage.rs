//! `aquaregia run --usage`: the tokens the run used, on stderr after the answer.

mod common;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, run, text_with_usage, use_mock};

#[tokio::test]
async fn usage_prints_the_tokens_after_the_answer() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![
        Reply::sse(text_with_usage("Four.", 31, 2)),
        Reply::sse(text_with_usage("Five.", 31, 2)),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args(["run", "--usage", "2 + 2?"]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Four.\n");
    assert_eq!(
        outcome.stderr,
        "tokens: 31 in (0 cached), 2 out (0 reasoning), 33 total\n"
    );

    let mut command = cli(&scratch);
    command.args(["run", "2 + 3?"]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(outcome.stderr.is_empty(), "{outcome:?}");
}
