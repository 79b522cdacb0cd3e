//! `aquaregia run --usage`: the tokens the run used, on stderr after the answer.

use crate::common;

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

/// A price from the config file (USD per million tokens) gives the run's cost, after the tokens
/// with `--usage` and always in `--output json`; a model with no known price has a `null` cost.
#[tokio::test]
async fn a_known_price_gives_the_cost() {
    let scratch = Scratch::new();
    scratch.write(
        "aquaregia.json",
        &serde_json::json!({"prices": {"mock": {"input": 1000, "output": 2000}}}).to_string(),
    );
    let model = MockServer::with_replies(vec![
        Reply::sse(text_with_usage("Four.", 31, 2)),
        Reply::sse(text_with_usage("Four.", 31, 2)),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args(["run", "--usage", "2 + 2?"]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(
        outcome.stderr,
        "tokens: 31 in (0 cached), 2 out (0 reasoning), 33 total; cost $0.0350\n"
    );

    let mut command = cli(&scratch);
    command.args(["run", "--output", "json", "2 + 2?"]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let summary: serde_json::Value = serde_json::from_str(&outcome.stdout).expect("JSON");
    let cost = &summary["cost"];
    assert_eq!(cost["currency"], "USD", "{summary:#}");
    let close = |value: &serde_json::Value, expected: f64| {
        (value.as_f64().expect("a number") - expected).abs() < 1e-9
    };
    assert!(close(&cost["total"], 0.035), "{summary:#}");
    assert!(close(&cost["input"], 0.031), "{summary:#}");
    assert!(close(&cost["output"], 0.004), "{summary:#}");

    let unpriced = Scratch::new();
    let model = MockServer::with_replies(vec![Reply::sse(text_with_usage("Four.", 31, 2))]).await;
    let mut command = cli(&unpriced);
    command.args(["run", "--output", "json", "2 + 2?"]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let summary: serde_json::Value = serde_json::from_str(&outcome.stdout).expect("JSON");
    assert!(summary["cost"].is_null(), "{summary:#}");
    assert_eq!(summary["usage"]["totalTokens"], 33, "{summary:#}");
}

/// A malformed price is a config error that says where.
#[tokio::test]
async fn a_bad_price_is_reported() {
    let scratch = Scratch::new();
    scratch.write(
        "aquaregia.json",
        &serde_json::json!({"prices": {"mock": {"input": "cheap", "output": 2}}}).to_string(),
    );
    let mut command = cli(&scratch);
    command
        .args(["run", "--model", "openai-chat:mock", "2 + 2?"])
        .env("OPENAI_API_KEY", "test");
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("aquaregia.json: `prices.mock.input` must be a number"),
        "{outcome:?}"
    );
}
