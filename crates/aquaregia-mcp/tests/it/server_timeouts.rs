//! Per-server timeouts of an `McpToolset`: a server's call timeout cuts its slow call (and
//! only its), a server's startup timeout cuts its handshake.

use std::time::{Duration, Instant};

use aquaregia::ToolExecError;
use aquaregia_mcp::{McpError, McpServerTimeouts, McpToolset};
use aquaregia_test_support::mcp_servers::progress_server::ProgressServer;
use serde_json::json;

#[tokio::test]
async fn a_server_call_timeout_applies_to_its_tools_only() {
    let toolset = McpToolset::builder()
        .connect_with("strict", |connector| {
            connector.transport(ProgressServer::serve_duplex())
        })
        .connect_with("patient", |connector| {
            connector.transport(ProgressServer::serve_duplex())
        })
        .server_timeouts(
            "strict",
            McpServerTimeouts::new().call(Duration::from_millis(300)),
        )
        .connect()
        .await
        .unwrap();
    let tools = toolset.tools().await.unwrap();
    let tool = |name: &str| tools.iter().find(|t| t.name() == name).unwrap().clone();

    let started = Instant::now();
    let cut = tool("strict__silent")
        .execute(json!({"delay_ms": 5000}))
        .await;
    assert!(matches!(cut, Err(ToolExecError::Timeout)), "{cut:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );

    let waited = tool("patient__silent")
        .execute(json!({"delay_ms": 600}))
        .await;
    assert_eq!(waited.unwrap().to_string(), "done");
    toolset.close().await;
}

#[tokio::test]
async fn a_server_startup_timeout_cuts_its_handshake() {
    // A transport nobody answers on.
    let (client, server) = tokio::io::duplex(1024);
    let started = Instant::now();
    let result = McpToolset::builder()
        .connect_with("mute", move |connector| connector.transport(client))
        .server_timeouts(
            "mute",
            McpServerTimeouts::new().connect(Duration::from_millis(300)),
        )
        .strict(true)
        .connect()
        .await;
    assert!(
        matches!(result, Err(McpError::Connect { .. })),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    drop(server);
}
