//! Auth without dying: `aquaregia acp` started with no API key still answers `initialize`
//! with auth methods, answers `session/new` with `auth_required` until `authenticate` gives it
//! a key (stored 0600 in `AQUAREGIA_DATA_DIR`, never logged), and `logout` forgets it.

use crate::common;

use serde_json::json;

use aquaregia_test_support::acp_client::RawClient;
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{BOUND, Scratch, cli};

const KEY: &str = "sk-ant-test-0123456789";

/// One Anthropic Messages stream answering `text`.
fn anthropic_text(text: &str) -> Reply {
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 12, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
            "stop_sequence": null}, "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ];
    Reply::sse(
        events
            .iter()
            .map(|event| {
                format!(
                    "event: {}\ndata: {event}\n\n",
                    event["type"].as_str().unwrap()
                )
            })
            .collect::<String>(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_the_agent_asks_for_one_and_then_runs_prompts() {
    let mock = MockServer::start().await;
    let scratch = Scratch::new();
    let data_dir = scratch.path.join("data");
    let mut command = cli(&scratch);
    command
        .args(["acp", "--model", "anthropic:claude-test"])
        .env("ANTHROPIC_BASE_URL", mock.root())
        .env("AQUAREGIA_DATA_DIR", &data_dir)
        .env("RUST_LOG", "trace");
    let client = RawClient::spawn(tokio::process::Command::from(command));

    let init = client
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": true}}}),
        )
        .await;
    let methods = init["result"]["authMethods"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let anthropic = methods
        .iter()
        .find(|m| m["id"] == "anthropic-api-key")
        .unwrap_or_else(|| panic!("an Anthropic key method: {init}"));
    assert_eq!(
        anthropic["_meta"]["envVar"], "ANTHROPIC_API_KEY",
        "{anthropic}"
    );
    assert!(
        methods.iter().any(|m| m["id"] == "openai-api-key"),
        "a method per provider: {methods:?}"
    );
    let terminal = methods
        .iter()
        .find(|m| m["type"] == "terminal")
        .unwrap_or_else(|| panic!("terminal auth for a client that supports it: {methods:?}"));
    assert_eq!(terminal["args"], json!(["acp", "--login"]));
    assert!(
        init["result"]["agentCapabilities"]["auth"]["logout"].is_object(),
        "{init}"
    );

    let session_params = json!({"cwd": scratch.path, "mcpServers": []});
    let refused = client.request("session/new", session_params.clone()).await;
    assert_eq!(refused["error"]["code"], -32000, "auth_required: {refused}");

    let keyless = client
        .request("authenticate", json!({"methodId": "anthropic-api-key"}))
        .await;
    assert!(
        keyless["error"]["data"]["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("ANTHROPIC_API_KEY")),
        "a key is needed: {keyless}"
    );
    let unknown = client
        .request("authenticate", json!({"methodId": "carrier-pigeon"}))
        .await;
    assert!(unknown.get("error").is_some(), "{unknown}");

    let accepted = client
        .request(
            "authenticate",
            json!({"methodId": "anthropic-api-key", "_meta": {"apiKey": KEY}}),
        )
        .await;
    assert_eq!(accepted["result"], json!({}), "{accepted}");
    let stored = data_dir.join("credentials.json");
    assert!(
        std::fs::read_to_string(&stored).unwrap().contains(KEY),
        "the key is stored"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&stored).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    let session = client.request("session/new", session_params.clone()).await;
    let session = session["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("a session once authenticated: {session}"))
        .to_owned();
    mock.push(anthropic_text("Hello with a key."));
    let answer = client.prompt(&session, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(
        requests[0].headers["x-api-key"], KEY,
        "the stored key is used"
    );

    let logout = client.request("logout", json!({})).await;
    assert_eq!(logout["result"], json!({}), "{logout}");
    assert!(!stored.exists(), "logout forgets the stored key");
    let refused = client.request("session/new", session_params).await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");

    client.close_write().await;
    let status = client.wait_exit(BOUND).await;
    assert!(status.success(), "{status:?}: {}", client.stderr());
    assert!(
        !client.stderr().contains(KEY),
        "the key never reaches the log (RUST_LOG=trace)"
    );
}
