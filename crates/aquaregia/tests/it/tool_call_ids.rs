//! Tool-call ids stay unique within a conversation when the provider sends none.

use aquaregia::{Client, ToolOutput, tool};
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text, tool_results};
use serde_json::json;

/// A Chat Completions stream calling `echo` twice, without ids (some compatible servers do).
fn calls_without_ids() -> String {
    let mut out = String::new();
    for index in 0..2 {
        let chunk = json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
            "choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "type": "function",
                "function": {"name": "echo", "arguments": "{}"}}]}, "finish_reason": null}]});
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    let done = json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
    out.push_str(&format!("data: {done}\n\ndata: [DONE]\n\n"));
    out
}

#[tokio::test]
async fn ids_are_unique_across_steps_when_the_provider_omits_them() {
    let server = MockServer::with_replies([
        Reply::sse(calls_without_ids()),
        Reply::sse(calls_without_ids()),
        Reply::json(chat_text("done")),
    ])
    .await;
    let client = Client::openai_chat()
        .base_url(&server.url)
        .api_key("test")
        .build()
        .expect("client");
    let echo = tool("echo").execute_raw(|_| async { Ok(ToolOutput::text("ok")) });
    let agent = client.agent("m").tool(echo).build().expect("agent");
    let mut stream = agent.stream("go");
    while let Some(event) = futures::StreamExt::next(&mut stream).await {
        event.expect("no error");
    }
    let last = server.bodies().pop().expect("three requests");
    let ids: Vec<String> = tool_results(&last).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), 4, "{last}");
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 4, "ids repeat: {ids:?}");
}
