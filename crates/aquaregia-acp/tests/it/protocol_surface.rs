//! The protocol surface: `initialize`, unknown methods and sessions, malformed input.

use crate::support;

use serde_json::json;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use support::agent_for;
use support::raw::RawClient;

#[tokio::test]
async fn initialize_advertises_what_the_agent_supports() {
    let mock = MockServer::start().await;
    let client = RawClient::connect(agent_for(&mock));
    let result = client.initialize().await;
    assert_eq!(result["protocolVersion"], 1);
    let capabilities = &result["agentCapabilities"];
    assert_eq!(capabilities["promptCapabilities"]["image"], true);
    assert_eq!(capabilities["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(
        capabilities["mcpCapabilities"],
        json!({"http": true, "sse": true, "acp": true})
    );
    assert!(
        capabilities["sessionCapabilities"]["close"].is_object(),
        "{capabilities}"
    );
    assert_eq!(result["agentInfo"]["name"], "aquaregia");
    assert!(result["agentInfo"]["version"].is_string());

    // A client asking for a version the agent does not have gets the agent's latest.
    let newer = client
        .request(
            "initialize",
            json!({"protocolVersion": 99, "clientCapabilities": {}}),
        )
        .await;
    assert_eq!(newer["result"]["protocolVersion"], 1, "{newer}");
    client.finish().await.unwrap();
}

#[tokio::test]
async fn unknown_methods_and_sessions_are_errors_and_the_agent_keeps_serving() {
    let mock = MockServer::start().await;
    let client = RawClient::connect(agent_for(&mock));
    client.initialize().await;

    for method in ["session/teleport", "_vendor/custom"] {
        let response = client.request(method, json!({})).await;
        assert_eq!(response["error"]["code"], -32601, "{method}: {response}");
    }
    // Unknown notifications (custom ones included) are ignored.
    client.notify("_vendor/ping", json!({})).await;
    client.notify("session/teleported", json!({})).await;

    for (method, params) in [
        (
            "session/prompt",
            json!({"sessionId": "sess-404", "prompt": [{"type": "text", "text": "hi"}]}),
        ),
        (
            "session/set_mode",
            json!({"sessionId": "sess-404", "modeId": "default"}),
        ),
        ("session/close", json!({"sessionId": "sess-404"})),
        (
            "session/prompt",
            json!({"prompt": [{"type": "text", "text": "no session id"}]}),
        ),
    ] {
        let response = client.request(method, params).await;
        let error = &response["error"];
        assert!(error.is_object(), "{method}: {response}");
        assert_ne!(error["code"], -32601, "{method} exists: {response}");
    }
    // `session/cancel` for an unknown session is a notification: ignored.
    client
        .notify("session/cancel", json!({"sessionId": "sess-404"}))
        .await;

    let relative = client
        .request(
            "session/new",
            json!({"cwd": "relative/dir", "mcpServers": []}),
        )
        .await;
    assert_eq!(relative["error"]["code"], -32602, "{relative}");

    // Still serving: a session and a prompt work.
    mock.push(Reply::text("Hello there."));
    let session = client.new_session("/tmp", json!([])).await;
    let answer = client.prompt(&session, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    client.finish().await.unwrap();
}

#[tokio::test]
async fn a_malformed_line_gets_a_parse_error_and_the_agent_keeps_serving() {
    let mock = MockServer::start().await;
    let client = RawClient::connect(agent_for(&mock));
    client.initialize().await;

    client.send_line("{this is not json").await;
    let parse_error = client
        .wait_for("a parse error", |m| m.get("error").is_some())
        .await;
    assert_eq!(parse_error["error"]["code"], -32700, "{parse_error}");
    assert!(parse_error["id"].is_null(), "{parse_error}");

    // Valid JSON that is not a JSON-RPC message.
    client.send_line(r#"{"jsonrpc": "2.0", "id": 77}"#).await;
    client.send_line("[]").await;

    mock.push(Reply::text("Still fine."));
    let session = client.new_session("/tmp", json!([])).await;
    let answer = client.prompt(&session, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    client.finish().await.unwrap();
}
