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
