//! `aquaregia acp` and HTTP servers behind OAuth: the agent has no terminal to authorize
//! from, so a server without a stored token is reported unavailable with the command that
//! logs in; once `aquaregia mcp login` stored one, the next session uses it.

use crate::common;
use aquaregia_test_support::oauth_server;

use serde_json::{Value, json};

use aquaregia_test_support::acp_client::{RawClient, updates};
use aquaregia_test_support::mock_model::{MockServer, Reply, tool_names};
use aquaregia_test_support::processes::{KillMarked, marker};
use common::{Scratch, acp_agent, cli, run};
use oauth_server::OAuthServer;

/// The text of the agent's messages in `session`.
fn agent_text(client: &RawClient, session: &str) -> String {
    updates(&client.log(), session)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

fn protected(url: &str) -> Value {
    json!([{"type": "http", "name": "protected", "url": url, "headers": []}])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_uses_the_token_mcp_login_stored() {
    let server = OAuthServer::start().await;
    let mock = MockServer::start().await;
    let scratch = Scratch::new();
    let marker = marker("acp-oauth");
    let _cleanup = KillMarked(marker.clone());
    let client = acp_agent(&scratch, &mock, &marker);
    client.initialize().await;
    let cwd = scratch.path.to_str().unwrap().to_owned();

    // No token yet: the server is unavailable, and the notice says how to log in.
    let first = client.new_session(&cwd, protected(&server.mcp_url)).await;
    mock.push(Reply::text("ok"));
    let answer = client.prompt(&first, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let notice = agent_text(&client, &first);
    assert!(
        notice.contains("`protected` is unavailable")
            && notice.contains("requires authorization")
            && notice.contains(&format!("aquaregia mcp login --http {}", server.mcp_url)),
        "{notice}"
    );
    let tools = tool_names(&mock.bodies()[0]);
    assert!(
        !tools.iter().any(|tool| tool.starts_with("protected__")),
        "{tools:?}"
    );

    // `mcp login` in a terminal (here, automatic) stores a token in the same data directory.
    let mut login = cli(&scratch);
    login
        .args(["mcp", "login", "--http", &server.mcp_url])
        .env("AQUAREGIA_OAUTH_AUTOMATIC", "1");
    let login = run(login, "").await;
    assert_eq!(login.code, Some(0), "{login:?}");

    // The next session connects with it; the model sees the server's tool.
    let second = client.new_session(&cwd, protected(&server.mcp_url)).await;
    mock.push(Reply::text("ok"));
    let answer = client.prompt(&second, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!agent_text(&client, &second).contains("unavailable"));
    let tools = tool_names(&mock.bodies()[1]);
    assert!(
        tools.iter().any(|tool| tool == "protected__whoami"),
        "{tools:?}"
    );
    let counts = server.counts();
    assert_eq!(
        counts
            .authorizations
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}
