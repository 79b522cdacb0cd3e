//! Usage is normalised across providers (input counts cache reads and writes, output counts
//! reasoning), per call and summed over a run, whole and streamed, from the checked fixtures.

use crate::common;

use aquaregia::{AgentEvent, AgentOutput, Client, StopReason};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{counts, fixture, fixture_json, provider_client};
use futures::StreamExt;
use serde_json::json;

/// Runs an agent over `replies` (one step each) and checks that the steps, the `Usage`
/// events and the output agree; returns the output.
async fn run(id: &str, model: &str, replies: Vec<Reply>, streamed: bool) -> AgentOutput {
    let steps = replies.len();
    let server = MockServer::with_replies(replies).await;
    let client: Client = provider_client(id, &server);
    let agent = client.agent(model).max_steps(steps).build().unwrap();
    let output = if streamed {
        let mut events = agent.stream("What's the weather in Paris?");
        let mut usage_events = Vec::new();
        let mut output = None;
        while let Some(event) = events.next().await {
            match event.unwrap() {
                AgentEvent::Usage {
                    step, usage, total, ..
                } => usage_events.push((step, usage, total)),
                AgentEvent::Finish(finished) => output = Some(finished),
                _ => {}
            }
        }
        let output = output.expect("the stream finishes");
        assert_eq!(usage_events.len(), steps, "{id}: one Usage event per call");
        let mut running = aquaregia::Usage::default();
        for ((step, usage, total), result) in usage_events.iter().zip(&output.steps) {
            running += *usage;
            assert_eq!(*step, result.index);
            assert_eq!(*usage, result.usage, "{id}: the event is the step's usage");
            assert_eq!(
                *total, running,
                "{id}: the event's total is the running sum"
            );
        }
        output
    } else {
        agent.run("What's the weather in Paris?").await.unwrap()
    };
    assert_eq!(output.steps.len(), steps, "{id}");
    let last_has_calls = output
        .steps
        .last()
        .is_some_and(|s| !s.tool_calls.is_empty());
    let expected = if last_has_calls {
        StopReason::MaxSteps
    } else {
        StopReason::Finished
    };
    assert_eq!(output.stop_reason, expected, "{id}");
    let summed: aquaregia::Usage = output.steps.iter().map(|s| s.usage).sum();
    assert_eq!(
        output.usage, summed,
        "{id}: the run total is the steps' sum"
    );
    assert!(output.cost.is_none(), "no price table, no cost");
    output
}

#[tokio::test]
async fn openai_chat_whole_and_streamed() {
    let replies = vec![
        Reply::json(fixture_json(
            "openai_chat/response_parallel_tool_calls.json",
        )),
        Reply::json(fixture_json("openai_chat/response_text.json")),
    ];
    let output = run("openai-chat", "gpt-4o-mini", replies, false).await;
    assert_eq!(counts(&output.steps[0].usage), [118, 52, 0, 0, 0]);
    assert_eq!(counts(&output.usage), [118 + 263, 52 + 31, 0, 0, 0]);

    let replies = vec![
        Reply::sse(fixture("openai_chat/stream_tool_calls.sse")),
        Reply::sse(fixture("openai_chat/stream_text.sse")),
    ];
    let output = run("openai-chat", "gpt-4o-mini", replies, true).await;
    assert_eq!(counts(&output.usage), [118 + 118, 52 + 9, 0, 0, 0]);
}

#[tokio::test]
async fn openai_chat_cached_and_reasoning_details() {
    let mut body = fixture_json("openai_chat/response_text.json");
    body["usage"]["prompt_tokens_details"]["cached_tokens"] = json!(256);
    body["usage"]["completion_tokens_details"]["reasoning_tokens"] = json!(20);
    let stream = fixture("openai_chat/stream_text.sse").replace(
        r#""prompt_tokens_details":{"cached_tokens":0"#,
        r#""prompt_tokens_details":{"cached_tokens":64"#,
    );
    let output = run("openai-chat", "o4-mini", vec![Reply::json(body)], false).await;
    // Chat's prompt_tokens already include cached ones, completion_tokens reasoning ones.
    assert_eq!(counts(&output.usage), [263, 31, 256, 0, 20]);
    let output = run("openai-chat", "o4-mini", vec![Reply::sse(stream)], true).await;
    assert_eq!(counts(&output.usage), [118, 9, 64, 0, 0]);
}

#[tokio::test]
async fn openai_responses_whole_and_streamed() {
    let body = fixture_json("openai_responses/response_message_and_function_calls.json");
    let mut cached = body.clone();
    cached["usage"]["input_tokens_details"] =
        json!({"cached_tokens": 100, "cache_write_tokens": 30});
    let output = run(
        "openai",
        "gpt-5-mini",
        vec![Reply::json(body), Reply::json(cached)],
        false,
    )
    .await;
    assert_eq!(counts(&output.steps[0].usage), [142, 214, 0, 0, 128]);
    assert_eq!(counts(&output.steps[1].usage), [142, 214, 100, 30, 128]);
    assert_eq!(output.usage.uncached_input_tokens(), 142 + 12);

    let stream = fixture("openai_responses/stream_reasoning_text_function_call.sse");
    let output = run(
        "openai",
        "gpt-5-mini",
        vec![Reply::sse(stream.clone()), Reply::sse(stream)],
        true,
    )
    .await;
    assert_eq!(counts(&output.usage), [2 * 142, 2 * 171, 0, 0, 2 * 128]);
}

#[tokio::test]
async fn anthropic_adds_cache_reads_and_writes_to_input() {
    let body = fixture_json("anthropic/response_tool_use.json");
    let mut cached = body.clone();
    cached["usage"]["cache_read_input_tokens"] = json!(400);
    cached["usage"]["cache_creation_input_tokens"] = json!(100);
    let output = run(
        "anthropic",
        "claude-sonnet-4-5",
        vec![Reply::json(body), Reply::json(cached)],
        false,
    )
    .await;
    assert_eq!(counts(&output.steps[0].usage), [512, 118, 0, 0, 0]);
    // Anthropic's input_tokens leave out cache reads and writes.
    assert_eq!(
        counts(&output.steps[1].usage),
        [512 + 400 + 100, 118, 400, 100, 0]
    );
    assert_eq!(output.steps[1].usage.uncached_input_tokens(), 512);

    // message_start and the cumulative message_delta: the last one counts.
    let stream = fixture("anthropic/stream_thinking_text_tool_use.sse");
    let cached_stream = stream.replace(
        r#""cache_creation_input_tokens":0,"cache_read_input_tokens":0"#,
        r#""cache_creation_input_tokens":7,"cache_read_input_tokens":500"#,
    );
    assert_ne!(cached_stream, stream);
    let output = run(
        "anthropic",
        "claude-sonnet-4-5",
        vec![Reply::sse(stream), Reply::sse(cached_stream)],
        true,
    )
    .await;
    assert_eq!(counts(&output.steps[0].usage), [530, 96, 0, 0, 0]);
    assert_eq!(counts(&output.steps[1].usage), [530 + 507, 96, 500, 7, 0]);
}

#[tokio::test]
async fn anthropic_old_style_message_delta_keeps_start_input() {
    // Older streams send only output_tokens in message_delta.
    let stream = fixture("anthropic/stream_thinking_text_tool_use.sse").replace(
        r#""usage":{"input_tokens":530,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":96}"#,
        r#""usage":{"output_tokens":96}"#,
    );
    let output = run(
        "anthropic",
        "claude-sonnet-4-5",
        vec![Reply::sse(stream)],
        true,
    )
    .await;
    assert_eq!(counts(&output.usage), [530, 96, 0, 0, 0]);
}

#[tokio::test]
async fn gemini_adds_thoughts_to_output() {
    let calls = fixture_json("gemini/response_function_calls.json");
    let mut text = fixture_json("gemini/response_text.json");
    text["usageMetadata"]["cachedContentTokenCount"] = json!(300);
    let output = run(
        "gemini",
        "gemini-3.7-flash",
        vec![Reply::json(calls), Reply::json(text)],
        false,
    )
    .await;
    // candidatesTokenCount leaves out thoughts; promptTokenCount includes cached content.
    assert_eq!(counts(&output.steps[0].usage), [118, 52 + 148, 0, 0, 148]);
    assert_eq!(counts(&output.steps[1].usage), [421, 31 + 61, 300, 0, 61]);

    let replies = vec![
        Reply::sse(fixture("gemini/stream_function_calls.sse")),
        Reply::sse(fixture("gemini/stream_text.sse")),
    ];
    let output = run("gemini", "gemini-3.7-flash", replies, true).await;
    assert_eq!(
        counts(&output.usage),
        [118 + 421, 52 + 148 + 31 + 61, 0, 0, 148 + 61]
    );
}
