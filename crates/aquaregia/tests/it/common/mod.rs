//! Shared test fixtures of this crate: the checked wire payloads and a Chat Completions client
//! for the mock model (`aquaregia_test_support::mock_model`).
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use aquaregia_test_support::mock_model::MockServer;
use serde_json::Value;

/// A checked wire payload from `tests/fixtures/providers/`.
pub fn fixture(path: &str) -> String {
    let full = format!(
        "{}/tests/fixtures/providers/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("read {full}: {e}"))
}

pub fn fixture_json(path: &str) -> Value {
    serde_json::from_str(&fixture(path)).expect("fixture is JSON")
}

/// A Chat Completions client pointed at the mock, with fast retries.
pub fn chat_client(server: &MockServer) -> aquaregia::Client {
    aquaregia::Client::openai_chat()
        .base_url(&server.url)
        .api_key("test-key")
        .max_retries(2)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client builds")
}

/// A client of provider `id` (`openai`, `openai-chat`, `anthropic`, `gemini`, `ollama`) pointed
/// at the mock, without retries.
pub fn provider_client(id: &str, server: &MockServer) -> aquaregia::Client {
    let builder = match id {
        "openai" => aquaregia::Client::openai().base_url(&server.url),
        "openai-chat" => aquaregia::Client::openai_chat().base_url(&server.url),
        "anthropic" => aquaregia::Client::anthropic().base_url(server.root()),
        "gemini" => aquaregia::Client::gemini().base_url(server.root()),
        "ollama" => aquaregia::Client::ollama().base_url(server.root()),
        other => panic!("no provider {other}"),
    };
    builder
        .api_key("test-key")
        .max_retries(0)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client builds")
}

/// A usage as `[input, output, cached read, cache write, reasoning]`, to compare in one go.
pub fn counts(usage: &aquaregia::Usage) -> [u64; 5] {
    [
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_input_tokens,
        usage.cache_write_tokens,
        usage.reasoning_tokens,
    ]
}

/// An agent on a scripted model: the loop's logic without any HTTP.
pub fn scripted_agent(model: &aquaregia::test_utils::ScriptedModel) -> aquaregia::AgentBuilder {
    aquaregia::AgentBuilder::new(std::sync::Arc::new(model.clone()))
}

/// The tool results of a request's messages, in order, as `(call id, output text, is_error)`.
pub fn tool_results(request: &aquaregia::ModelRequest) -> Vec<(String, String, bool)> {
    request
        .messages
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|part| match part {
            aquaregia::ContentPart::ToolResult(result) => Some((
                result.call_id.clone(),
                result.output.to_text(),
                result.is_error,
            )),
            _ => None,
        })
        .collect()
}

/// The tool results of a request's last message (the ones its step just produced).
pub fn last_tool_results(request: &aquaregia::ModelRequest) -> Vec<(String, String, bool)> {
    let last = request.messages.last().cloned().into_iter().collect();
    tool_results(&aquaregia::ModelRequest::new("", last))
}
