//! Answers our transports make up for requests whose real answer could not be delivered
//! (an unreadable line, an HTTP error status), so that only that request fails, at once,
//! and the caller learns what happened as a typed [`McpError`]: a JSON-RPC error marked with
//! our own key in its `data`, which the session reads back ([`LocalFault::from_error`]).
//!
//! Remove when rmcp's transports can fail one request with a typed error of their own (today
//! a transport can only deliver a JSON-RPC message or end the session).

use rmcp::model::JsonRpcVersion2_0;
use rmcp::model::{
    ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use serde::{Deserialize, Serialize};

use crate::error::McpError;

/// The key in `ErrorData::data` that marks an error as made up by aquaregia.
const KEY: &str = "io.aquaregia/localFault";

/// What went wrong with the answer to one request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum LocalFault {
    /// The answer could not be read.
    InvalidResponse { reason: String },
    /// The HTTP request carrying it failed with a status.
    Http {
        url: String,
        status: u16,
        body: String,
    },
}

impl LocalFault {
    /// The JSON-RPC error response to `id` that carries this fault.
    pub(crate) fn into_response(self, id: RequestId) -> ServerJsonRpcMessage {
        let message = match &self {
            Self::InvalidResponse { reason } => reason.clone(),
            Self::Http { status, .. } => format!("HTTP {status}"),
        };
        let data = serde_json::json!({ KEY: self });
        JsonRpcMessage::Error(JsonRpcError {
            jsonrpc: JsonRpcVersion2_0,
            id: Some(id),
            error: ErrorData::new(ErrorCode::INTERNAL_ERROR, message, Some(data)),
        })
    }

    /// The fault an error carries, if aquaregia made it up.
    pub(crate) fn from_error(error: &ErrorData) -> Option<Self> {
        let fault = error.data.as_ref()?.get(KEY)?;
        serde_json::from_value(fault.clone()).ok()
    }

    /// The typed error for a request to `server` with `method`.
    pub(crate) fn into_error(self, server: &str, method: &'static str) -> McpError {
        match self {
            Self::InvalidResponse { reason } => McpError::InvalidResponse {
                server: server.to_owned(),
                method,
                reason,
            },
            Self::Http { url, status, body } => McpError::Http { url, status, body },
        }
    }
}
