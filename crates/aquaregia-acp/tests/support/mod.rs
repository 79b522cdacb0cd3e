//! Shared fixtures for the ACP agent's integration tests: an in-memory agent on the mock
//! model (`aquaregia_test_support::mock_model`), a hand-written JSON-RPC client and stdio MCP
//! server scripts.
#![allow(dead_code, unreachable_pub)]

pub mod raw;
pub mod scripts;

use std::time::{Duration, Instant};

use aquaregia_acp::{AcpError, AcpServer};
use aquaregia_test_support::mock_model::MockServer;
use serde_json::Value;
use tokio::io::DuplexStream;
use tokio::task::JoinHandle;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// The generous bound on anything a test waits for.
pub const BOUND: Duration = Duration::from_secs(30);

/// Logs to the test output when `RUST_LOG` is set.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
}

/// An ACP agent whose model is the mock (model id `mock-model`, no retries).
pub fn agent_for(mock: &MockServer) -> AcpServer {
    let client = aquaregia::Client::openai_chat()
        .base_url(&mock.url)
        .api_key("test-key")
        .max_retries(0)
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client builds");
    AcpServer::new(move |_session| client.agent("mock-model").max_steps(10))
        .mcp_startup_timeout(Duration::from_secs(20))
}

/// Serves `server` over an in-memory byte stream; returns the client's end and the task
/// running `serve` (it ends when the client end closes its write side or is dropped).
pub fn serve_in_memory(server: AcpServer) -> (DuplexStream, JoinHandle<Result<(), AcpError>>) {
    init_tracing();
    let (client_end, agent_end) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(agent_end);
    let transport = agent_client_protocol::ByteStreams::new(write.compat_write(), read.compat());
    let task = tokio::spawn(server.serve(transport));
    (client_end, task)
}

/// The `session/update` payloads (`params.update`) among `messages`, for `session_id`.
pub fn updates(messages: &[Value], session_id: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session_id)
        .map(|m| m["params"]["update"].clone())
        .collect()
}

/// The `tool_call` and `tool_call_update` updates among `updates`, in order.
pub fn tool_updates(updates: &[Value]) -> Vec<Value> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call" || u["sessionUpdate"] == "tool_call_update")
        .cloned()
        .collect()
}

/// Time for a list-change notification to take effect in the agent before the model step
/// that should see it. The agent handles MCP notifications asynchronously (rmcp hands them
/// to a spawned task or a subscription channel) and nothing on the wire acknowledges them,
/// so a test that wants "the next step sees the change" cannot wait for an event.
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// Polls `condition` until it holds (within [`BOUND`]).
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
