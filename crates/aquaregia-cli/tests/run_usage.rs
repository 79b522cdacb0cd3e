//! `aquaregia run --usage` prints the run's token usage, summed over its model calls, on
//! stderr; without the flag nothing is printed.

mod common;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, run, use_mock};
use serde_json::json;

/// A streamed Chat Completions answer ending with a usage chunk.
fn answer(text: &str, prompt: u64, cached: u64, completion: u64, reasoning: u64) -> Reply {
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]});
    let usage = json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": cached},
                  "completion_tokens_details": {"reasoning_tokens": reasoning}}});
    Reply::sse(format!(
        "data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n"
    ))
}

#[tokio::test]
async fn usage_is_printed_on_request() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![answer("Hello.", 1200, 1000, 35, 10)]).await;
    let mut command = cli(&scratch);
    command.args(["run", "--yes", "--usage", "Say hello."]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Hello.\n");
    assert!(
        outcome.stderr.contains(
            "usage: 1200 input tokens (1000 cache reads, 0 cache writes), 35 output tokens \
             (10 reasoning), 1 model call\n"
        ),
        "{outcome:?}"
    );
    assert_eq!(model.bodies()[0]["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn no_usage_line_without_the_flag() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![answer("Hello.", 1200, 1000, 35, 10)]).await;
    let mut command = cli(&scratch);
    command.args(["run", "--yes", "Say hello."]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(!outcome.stderr.contains("usage:"), "{outcome:?}");
}
