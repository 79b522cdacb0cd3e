//! Sampling: a server asking the client's model mid-call, as a server-to-client request
//! (2025-11-25) or as an `input_required` round (2026-07-28), answered by `on_sampling`:
//! [`sample_with_model`] asks the approval callback, then the model (a mock provider here).
//! Without a handler, or when declined, the server is refused.

use std::sync::{Arc, Mutex};

use crate::common::chat_client;
use aquaregia_mcp::{Connector, McpConnection, SamplingRequest, sample_with_model};
use aquaregia_test_support::mcp_servers::input_required_server;
use aquaregia_test_support::mcp_servers::sampling_server;
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text};
use serde_json::json;

async fn haiku(connection: &McpConnection, tool: &str) -> Result<String, String> {
    let tools = connection.tools().await.unwrap();
    let tool = tools.iter().find(|t| t.name() == tool).unwrap();
    tool.execute(json!({}))
        .await
        .map(|output| output.to_string())
        .map_err(|error| error.to_string())
}

/// A connector answering sampling with the mock model when `approve`, recording the
/// requests it was asked to approve.
fn connector(model: &MockServer, approve: bool) -> (Connector, Arc<Mutex<Vec<SamplingRequest>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let connector = Connector::new().name("poet").on_sampling(sample_with_model(
        chat_client(model),
        "mock-model",
        move |request| {
            seen.lock().unwrap().push(request.clone());
            std::future::ready(approve)
        },
    ));
    (connector, asked)
}

#[tokio::test]
async fn a_server_request_is_answered_by_the_model_after_approval() {
    let model = MockServer::start().await;
    model.push(Reply::json(chat_text("Borrowed, then returned")));
    let (connector, asked) = connector(&model, true);
    let connection = connector
        .transport(sampling_server::serve_duplex())
        .await
        .unwrap();
    assert_eq!(
        haiku(&connection, "haiku").await.unwrap(),
        "Borrowed, then returned (by mock-model, endTurn)"
    );
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].server, "poet");
    // The approval callback sees the request in aquaregia's types.
    assert_eq!(asked[0].system_prompt.as_deref(), Some("You are a poet."));
    assert_eq!(asked[0].messages.len(), 1);
    assert_eq!(asked[0].messages[0].role, aquaregia::Role::User);
    assert_eq!(asked[0].messages[0].text(), "Write a haiku about rust.");
    assert_eq!(asked[0].max_tokens, 64);
    // The model saw the server's system prompt and message, within its token limit.
    let body = &model.bodies()[0];
    assert_eq!(body["model"], "mock-model");
    assert_eq!(body["messages"][0]["content"], "You are a poet.");
    assert_eq!(body["messages"][1]["content"], "Write a haiku about rust.");
    assert_eq!(
        body["max_tokens"]
            .as_u64()
            .or(body["max_completion_tokens"].as_u64()),
        Some(64)
    );
    connection.close().await;
}

#[tokio::test]
async fn a_declined_request_is_refused_and_the_model_is_not_called() {
    let model = MockServer::start().await;
    let (connector, asked) = connector(&model, false);
    let connection = connector
        .transport(sampling_server::serve_duplex())
        .await
        .unwrap();
    let answer = haiku(&connection, "haiku").await.unwrap();
    assert!(answer.starts_with("sampling failed:"), "{answer}");
    assert!(answer.contains("declined"), "{answer}");
    assert_eq!(asked.lock().unwrap().len(), 1);
    assert_eq!(model.request_count(), 0);
    connection.close().await;
}

#[tokio::test]
async fn without_a_handler_sampling_is_refused() {
    let connection = Connector::new()
        .transport(sampling_server::serve_duplex())
        .await
        .unwrap();
    let answer = haiku(&connection, "haiku").await.unwrap();
    assert!(answer.contains("no sampling handler"), "{answer}");
    connection.close().await;
}

#[tokio::test]
async fn an_input_required_round_is_answered_by_the_model() {
    let model = MockServer::start().await;
    model.push(Reply::json(chat_text("Quiet compile")));
    let (connector, _) = connector(&model, true);
    let server = input_required_server::InputRequiredServer::default();
    let connection = connector.transport(server.serve_duplex()).await.unwrap();
    assert_eq!(
        haiku(&connection, "sample").await.unwrap(),
        "sampled: Quiet compile"
    );
    let received = server.received();
    assert_eq!(
        received[1].input_responses.as_ref().unwrap()["haiku"]["model"],
        "mock-model"
    );
    connection.close().await;
}
