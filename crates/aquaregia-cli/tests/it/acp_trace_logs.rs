//! With `RUST_LOG=trace`, the log of `aquaregia acp` never shows the header or env values of
//! `session/new` servers (the ACP SDK dumps whole messages at TRACE). At the default level the
//! log is empty (no per-message lines, no start-up lines).

use crate::common;

use serde_json::json;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{BOUND, Scratch, cli, test_server_script, use_mock};

const HEADER_SECRET: &str = "Bearer header-secret-4f1c";
const ENV_SECRET: &str = "env-secret-9b2e";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_logs_never_show_header_or_env_values() {
    let mock = MockServer::start().await;
    let scratch = Scratch::new();
    let mut command = cli(&scratch);
    command.arg("acp").env("RUST_LOG", "trace");
    use_mock(&mut command, &mock);
    let client = aquaregia_test_support::acp_client::RawClient::spawn(
        tokio::process::Command::from(command),
    );
    client.initialize().await;
    let session = client
        .request(
            "session/new",
            json!({"cwd": scratch.path, "mcpServers": [
                {"type": "http", "name": "remote", "url": format!("{}/no-mcp-here", mock.root()),
                 "headers": [{"name": "Authorization", "value": HEADER_SECRET}]},
                {"name": "local", "command": "python3", "args": [test_server_script()],
                 "env": [{"name": "SERVICE_TOKEN", "value": ENV_SECRET}]},
            ]}),
        )
        .await;
    assert!(session["result"]["sessionId"].is_string(), "{session}");
    client.close_write().await;
    assert!(client.wait_exit(BOUND).await.success());
    let log = client.stderr();
    assert!(log.contains("TRACE"), "tracing is on");
    assert!(!log.contains(HEADER_SECRET), "a header value in the log");
    assert!(!log.contains("header-secret"), "a header value in the log");
    assert!(!log.contains(ENV_SECRET), "an env value in the log");
}

/// Editors show an agent's stderr (acp.el shows every line as an error): at the default level a
/// whole session (start, `session/new`, a turn, `session/close`) writes nothing there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_log_is_silent_for_a_whole_session() {
    let mock = MockServer::start().await;
    mock.push(Reply::text("Hello."));
    let scratch = Scratch::new();
    let mut command = cli(&scratch);
    command.arg("acp").env_remove("RUST_LOG");
    use_mock(&mut command, &mock);
    let client = aquaregia_test_support::acp_client::RawClient::spawn(
        tokio::process::Command::from(command),
    );
    client.initialize().await;
    let session = client.new_session("/tmp", json!([])).await;
    let answer = client.prompt(&session, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    client
        .request("session/close", json!({"sessionId": session}))
        .await;
    client.close_write().await;
    assert!(client.wait_exit(BOUND).await.success());
    let log = client.stderr();
    assert_eq!(log, "", "nothing on stderr at the default level");
}
