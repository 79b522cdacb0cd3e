//! What several test modules share: a Chat Completions client for the mock model
//! (`aquaregia_test_support::mock_model`), and the `McpError` behind a failed tool call.

use std::time::Duration;

use aquaregia::ToolExecError;
use aquaregia_mcp::McpError;
use aquaregia_test_support::mock_model::MockServer;

/// A Chat Completions client pointed at the mock, with fast retries.
pub(crate) fn chat_client(server: &MockServer) -> aquaregia::Client {
    aquaregia::Client::openai_chat()
        .base_url(&server.url)
        .api_key("test-key")
        .max_retries(2)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client builds")
}

/// The `McpError` a failed MCP tool call carries, if any.
pub(crate) fn mcp_error(error: &ToolExecError) -> Option<&McpError> {
    error.downcast_ref::<McpError>()
}
