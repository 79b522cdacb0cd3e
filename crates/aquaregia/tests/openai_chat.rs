//! Chat Completions against a mock server speaking the real wire format.

mod common;

use aquaregia::{ContentPart, FinishReason, Message, ModelRequest, Role, StreamEvent, ToolResult};
use common::{MockServer, Reply, chat_client, fixture, fixture_json};
use futures::StreamExt;
use serde_json::json;

#[tokio::test]
async fn parses_parallel_tool_calls_and_usage() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json("openai_chat/response_parallel_tool_calls.json")));
    let client = chat_client(&server);
    let response = client
        .generate(&ModelRequest::new("gpt-4o", vec![Message::user("weather?")]))
        .await
        .unwrap();
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].arguments, json!({"location": "Paris", "unit": "celsius"}));
    assert_eq!(calls[1].id, "call_Hc4dJ8uQe2nWz6RtY1oPx5vB");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 118);
    assert_eq!(response.usage.output_tokens, 52);
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.headers["authorization"], "Bearer test-key");
}
