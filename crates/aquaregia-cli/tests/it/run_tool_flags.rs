//! `run --disable-tool` hides tools from the model; `--call-timeout` bounds one tool call,
//! which then fails without stopping the run.

use crate::common;

use std::time::{Duration, Instant};

use aquaregia_test_support::mock_model::{MockServer, Reply, tool_names, tool_results};
use common::{Scratch, cli, run, test_server_command, use_mock};
use serde_json::json;

#[tokio::test]
async fn disabled_tools_are_not_offered() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![Reply::text_stream(&["ok"])]).await;
    let mut command = cli(&scratch);
    command.args([
        "run",
        "--stdio",
        &test_server_command(),
        "--disable-tool",
        "gr*",
        "--disable-tool",
        "hang",
        "Hi.",
    ]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let names = tool_names(&model.bodies()[0]);
    assert_eq!(names, ["fail", "media", "spoof"], "{names:?}");
}

#[tokio::test]
async fn a_call_past_the_timeout_fails_and_the_run_goes_on() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "hang", json!({}))]),
        Reply::text_stream(&["It timed out."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args([
        "run",
        "--yes",
        "--call-timeout",
        "1",
        "--stdio",
        &test_server_command(),
        "Wait.",
    ]);
    use_mock(&mut command, &model);
    let started = Instant::now();
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "It timed out.\n");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let results = tool_results(&model.bodies()[1]);
    assert!(results[0].1.contains("timed out"), "{results:?}");
}
