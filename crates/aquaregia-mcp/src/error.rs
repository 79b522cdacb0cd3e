//! [`McpError`].

use std::fmt;
use std::sync::Arc;

use aquaregia::ToolExecError;

/// The cause behind an [`McpError`], shared so the error stays `Clone`.
pub type ErrorSource = Arc<dyn std::error::Error + Send + Sync>;

/// What can go wrong with an MCP server connection.
///
/// Branch on the variants; the `Display` text is for people. Errors name the server; none of
/// them ever contains a bearer token or header value. Where a lower layer (rmcp, reqwest, the
/// OS) had a cause, it is in [`source`](std::error::Error::source).
#[non_exhaustive]
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    /// The server could not be started or reached, or the handshake failed. For a stdio
    /// server the message ends with its exit status and the tail of its stderr.
    #[error("could not connect to MCP server `{server}`: {message}")]
    Connect {
        /// The server's name (or URL).
        server: String,
        /// What failed.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<ErrorSource>,
    },
    /// The server wants an authorization it did not get: no credentials were sent, or it
    /// answered with an OAuth challenge (`WWW-Authenticate: Bearer ...`). Authorize (the
    /// protected resource metadata says how) and connect again.
    #[error("MCP server at {url} requires authorization{}", scope_hint(.scope.as_deref()))]
    AuthRequired {
        /// The server URL.
        url: String,
        /// The `resource_metadata` URL of the challenge (RFC 9728), where the authorization
        /// servers to use are listed.
        resource_metadata: Option<String>,
        /// The `scope` the challenge asks for.
        scope: Option<String>,
    },
    /// Authorizing with the server failed: discovery, registration, the user's answer, the
    /// token exchange. The message names the step; it never contains a token or secret.
    #[error("authorizing with MCP server at {url} failed: {message}")]
    Authorization {
        /// The server URL.
        url: String,
        /// Which step failed, and why.
        message: String,
    },
    /// The server answered an HTTP request with an error status: credentials that were sent
    /// and refused (401, 403), or a failure such as a 500. A failed tool call leaves the
    /// session usable.
    #[error("MCP server at {url} answered HTTP {status}{}", body_hint(.body))]
    Http {
        /// The server URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the response body (empty when there was none).
        body: String,
    },
    /// `tools/list` failed.
    #[error("listing the tools of MCP server `{server}`: {message}")]
    ListTools {
        /// The server's name.
        server: String,
        /// What failed.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<Box<McpError>>,
    },
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
    #[error("MCP server `{server}` answered {method} with error {code}: {message}")]
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
    /// The server's answer to a request could not be read: over the size limit, not UTF-8,
    /// not JSON, nested too deeply. Only that request failed.
    #[error("MCP server `{server}` sent an unreadable answer to {method}: {reason}")]
    InvalidResponse {
        /// The server's name.
        server: String,
        /// The request method.
        method: &'static str,
        /// What was wrong with it.
        reason: String,
    },
    /// A tool call the server asked client input for (a 2026-07-28 `input_required`
    /// result) could not be completed: the server asked something this client cannot answer,
    /// or kept asking for more than the allowed number of rounds.
    #[error("MCP server `{server}` asked for input the call could not give: {message}")]
    InputRequired {
        /// The server's name.
        server: String,
        /// What was asked, and why it could not be answered.
        message: String,
    },
    /// The server forgot the HTTP session while the call's answer was on its way; the session
    /// was re-established, but whether the call ran is unknown. Calls of tools annotated
    /// read-only or idempotent are made again instead; this one was not.
    #[error(
        "the session with MCP server `{server}` expired while `{tool}` was running and was \
         re-established; the call may or may not have run, and was not repeated because the \
         tool is not annotated read-only or idempotent"
    )]
    SessionLost {
        /// The server's name.
        server: String,
        /// The tool.
        tool: String,
    },
    /// Something else broke in the transport.
    #[error("MCP transport error with server `{server}`: {message}")]
    Transport {
        /// The server's name.
        server: String,
        /// What failed.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<ErrorSource>,
    },
}

fn scope_hint(scope: Option<&str>) -> String {
    scope.map_or_else(String::new, |scope| format!(" (scope `{scope}`)"))
}

fn body_hint(body: &str) -> String {
    if body.is_empty() {
        String::new()
    } else {
        format!(": {body}")
    }
}

impl McpError {
    /// A [`Connect`](Self::Connect) error without a separate cause.
    pub(crate) fn connect(server: impl fmt::Display, message: impl Into<String>) -> Self {
        Self::Connect {
            server: server.to_string(),
            message: message.into(),
            source: None,
        }
    }

    /// A [`Transport`](Self::Transport) error without a separate cause.
    pub(crate) fn transport(server: impl fmt::Display, message: impl Into<String>) -> Self {
        Self::Transport {
            server: server.to_string(),
            message: message.into(),
            source: None,
        }
    }
}

/// A call timeout is [`ToolExecError::Timeout`]; every other error is
/// [`ToolExecError::Failed`] with the `McpError` kept whole inside (its text is what the model
/// sees; downcast it to act on it).
impl From<McpError> for ToolExecError {
    fn from(error: McpError) -> Self {
        match error {
            McpError::CallTimeout => ToolExecError::Timeout,
            other => ToolExecError::failed(other),
        }
    }
}

/// [`aquaregia::Error::Other`] with the `McpError` inside, so that `?` works in functions
/// returning aquaregia's error (a `prepare_step` that lists tools, say).
impl From<McpError> for aquaregia::Error {
    fn from(error: McpError) -> Self {
        aquaregia::Error::other(error)
    }
}
