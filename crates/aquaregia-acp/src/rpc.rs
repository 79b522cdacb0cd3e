//! JSON-RPC plumbing every handler shares: the `invalid_params` error, tasks run on the
//! connection, and outgoing requests withdrawn when their caller gives up.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use serde_json::json;

/// An `invalid_params` error (-32602) whose `data.reason` says why.
pub(crate) fn invalid_params(reason: impl Into<String>) -> agent_client_protocol::Error {
    let reason = reason.into();
    agent_client_protocol::Error::invalid_params().data(json!({"reason": reason}))
}

/// The most of an error's `data` sent back, as JSON text.
const MAX_DATA_BYTES: usize = 1024;

/// `error` with long `data` cut down: the SDK's invalid-params errors carry the whole
/// request back (a 20 MiB prompt in, 20 MiB out). Only the reason's start is kept.
pub(crate) fn bounded(mut error: agent_client_protocol::Error) -> agent_client_protocol::Error {
    let Some(data) = &error.data else {
        return error;
    };
    let text = data.to_string();
    if text.len() <= MAX_DATA_BYTES {
        return error;
    }
    let reason = data
        .get("error")
        .or_else(|| data.get("reason"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or(&text);
    let mut end = reason.len().min(MAX_DATA_BYTES / 2);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let cut = reason.get(..end).unwrap_or_default();
    error.data = Some(json!({"reason": format!("{cut}… (cut; {} bytes in all)", text.len())}));
    error
}

/// Runs `task` on the connection: it ends when the connection does.
pub(crate) fn spawn(cx: &ConnectionTo<Client>, task: impl Future<Output = ()> + Send + 'static) {
    if let Err(error) = cx.spawn(async move {
        task.await;
        Ok(())
    }) {
        tracing::debug!(error = %error.message, "the connection is closing; task not started");
    }
}

/// Cancels an outgoing request when dropped before it was answered.
pub(crate) struct CancelOnDrop(pub(crate) Option<agent_client_protocol::RequestCancellationHandle>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            let _ = handle.cancel();
        }
    }
}
