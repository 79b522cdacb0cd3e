//! Shared fixtures for the ACP agent's integration tests: a scripted mock model on
//! 127.0.0.1, an in-memory agent, a hand-written JSON-RPC client, stdio MCP server scripts,
//! and the external test dependencies.
#![allow(dead_code, unreachable_pub)]

pub mod deps;
pub mod mock;
pub mod raw;
pub mod scripts;

use std::time::{Duration, Instant};

use aquaregia_acp::{AcpError, AcpServer};
use serde_json::Value;
use tokio::io::DuplexStream;
use tokio::task::JoinHandle;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use mock::MockModel;

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
pub fn agent_for(mock: &MockModel) -> AcpServer {
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

/// Processes whose environment contains `AQUAREGIA_TEST_MARKER=<marker>`.
pub fn processes_with_marker(marker: &str) -> Vec<u32> {
    let needle = format!("AQUAREGIA_TEST_MARKER={marker}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == needle.as_bytes()))
        })
        .collect()
}

/// Waits (within [`BOUND`]) until no process carries the marker.
pub async fn assert_no_process_left(marker: &str) {
    let deadline = Instant::now() + BOUND;
    loop {
        let left = processes_with_marker(marker);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "processes left behind: {left:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A marker unique to this test process and `tag`.
pub fn marker(tag: &str) -> String {
    format!("acp-{}-{tag}", std::process::id())
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
