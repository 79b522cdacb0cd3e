//! Shared fixtures for the ACP agent's integration tests: an in-memory agent on the scripted
//! model ([`model::Model`]) or, end to end, on the loopback mock model
//! (`aquaregia_test_support::mock_model`, [`agent_for`]), the hand-written JSON-RPC client of
//! `aquaregia_test_support::acp_client` connected to it, and stdio MCP server scripts.
// Each test binary uses part of it (re-exports included).
#![allow(dead_code, unreachable_pub, unused_imports)]

pub mod model;
pub mod raw;
pub mod scripts;

use std::time::Duration;

use aquaregia_acp::{AcpError, AcpServer};
/// `BOUND`: the generous bound on anything a test waits for.
pub use aquaregia_test_support::acp_client::{BOUND, eventually, settle, tool_updates, updates};
use aquaregia_test_support::mock_model::MockServer;
use tokio::io::DuplexStream;
use tokio::task::JoinHandle;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// Logs to the test output when `RUST_LOG` is set.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
}

/// An ACP agent whose model is the loopback HTTP mock (model id `mock-model`, no retries): for
/// the tests that check what goes over a provider's wire.
pub fn agent_for(mock: &MockServer) -> AcpServer {
    let client = aquaregia::Client::openai_chat()
        .base_url(&mock.url)
        .api_key("test-key")
        .max_retries(0)
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client builds");
    AcpServer::new(move |_session| client.agent("mock-model").max_steps(10))
        .connector(aquaregia_mcp::Connector::new().timeout(Duration::from_secs(20)))
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

/// The agent's `session/request_permission` requests so far.
pub fn permission_requests(client: &raw::RawClient) -> Vec<serde_json::Value> {
    client
        .log()
        .into_iter()
        .filter(|m| m["method"] == "session/request_permission")
        .collect()
}

/// Answers every permission request with `option`.
pub fn answer_with(client: &raw::RawClient, option: &'static str) {
    client.set_handler(move |request| {
        (request["method"] == "session/request_permission").then(|| {
            raw::ok(
                request,
                serde_json::json!({"outcome": {"outcome": "selected", "optionId": option}}),
            )
        })
    });
}
