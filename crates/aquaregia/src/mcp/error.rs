//! [`McpError`].

use crate::error::Error;
use crate::tool::ToolExecError;

/// What can go wrong with an MCP server connection.
///
/// Errors name the server; none of them ever contains a bearer token or header value.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The server could not be started or reached, or the handshake failed. For a stdio
    /// server the message ends with the tail of its stderr.
    #[error("could not connect to MCP server {0}")]
    Connect(String),
    /// The server refused our credentials (HTTP 401/403).
    #[error("MCP server at {url} rejected the credentials (HTTP {status})")]
    Unauthorized {
        /// The server URL.
        url: String,
        /// 401 or 403.
        status: u16,
    },
    /// `tools/list` failed.
    #[error("listing the tools of MCP server {0}")]
    ListTools(String),
    /// The connection was closed or dropped, or the server went away.
    #[error("the MCP server connection is closed")]
    Disconnected,
    /// The server process exited; the message says how, with the tail of its stderr.
    #[error("MCP server {0}")]
    ServerExited(String),
    /// A tool call took longer than the call timeout; the server was told to cancel it.
    #[error("the MCP tool call timed out")]
    CallTimeout,
    /// The server answered a request with a JSON-RPC error.
    #[error("MCP server {server} answered {method} with error {code}: {message}")]
    Protocol {
        /// The server's name.
        server: String,
        /// The request method.
        method: &'static str,
        /// The JSON-RPC error code.
        code: i32,
        /// The error message.
        message: String,
    },
    /// Something else broke in the transport (malformed messages, a response over the size
    /// limit...).
    #[error("MCP transport error with server {0}")]
    Transport(String),
}

impl From<McpError> for Error {
    fn from(error: McpError) -> Self {
        Error::Other(Box::new(error))
    }
}

impl From<McpError> for ToolExecError {
    fn from(error: McpError) -> Self {
        match error {
            McpError::CallTimeout => ToolExecError::Timeout,
            other => ToolExecError::Execution(other.to_string()),
        }
    }
}
