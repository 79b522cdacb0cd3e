//! `aquaregia run --output json|stream-json`: machine-readable results with the tool calls,
//! their arguments and results, usage and the stop reason.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, run, test_server_command, text_with_usage, use_mock};
use serde_json::{Value, json};

async fn run_with_output(format: &str) -> common::Outcome {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "greet", json!({"name": "Ann"}))]),
        Reply::sse(text_with_usage("Greeted Ann.", 120, 7)),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args([
        "run",
        "--yes",
        "--output",
        format,
        "--stdio",
        &test_server_command(),
        "Greet Ann.",
    ]);
    use_mock(&mut command, &model);
    run(command, "").await
}

fn assert_summary(summary: &Value) {
    assert_eq!(summary["type"], "result");
    assert_eq!(summary["text"], "Greeted Ann.");
    assert_eq!(summary["stopReason"], "finished");
    assert_eq!(summary["model"], "openai-chat:mock");
    assert_eq!(summary["steps"], 2);
    assert_eq!(
        summary["toolCalls"],
        json!([{
            "id": "call_1",
            "name": "greet",
            "arguments": {"name": "Ann"},
            "output": "Hello, Ann.",
            "isError": false,
        }])
    );
    assert_eq!(summary["usage"]["inputTokens"], 120);
    assert_eq!(summary["usage"]["outputTokens"], 7);
    assert_eq!(summary["usage"]["totalTokens"], 127);
    assert!(summary["sessionId"].is_string(), "{summary}");
}

#[tokio::test]
async fn json_is_one_object_with_calls_usage_and_stop_reason() {
    let outcome = run_with_output("json").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let summary: Value = serde_json::from_str(&outcome.stdout).expect("stdout is one JSON value");
    assert_summary(&summary);
}

#[tokio::test]
async fn stream_json_is_one_event_per_line_ending_with_the_result() {
    let outcome = run_with_output("stream-json").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let events: Vec<Value> = outcome
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["tool_call", "tool_result", "step", "text", "step", "result"],
        "{outcome:?}"
    );
    assert_eq!(events[0]["arguments"], json!({"name": "Ann"}));
    assert_eq!(events[1]["output"], "Hello, Ann.");
    assert_eq!(events[3]["text"], "Greeted Ann.");
    assert_eq!(events[4]["usage"]["inputTokens"], 120);
    assert_summary(&events[5]);
}
