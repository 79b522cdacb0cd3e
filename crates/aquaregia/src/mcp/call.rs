//! The tool call path: one [`ToolExecutor`] per MCP tool, with the call timeout, cancellation
//! sent to the server, and errors that say what happened.

use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientNotification, ClientRequest, RequestId, RequestMetaObject, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use super::connection::Shared;
use super::content::{map_raw_result, map_result};
use super::error::McpError;
use super::progress::ProgressRoutes;
use super::trace;
use crate::tool::{ProgressReporter, ToolExecError, ToolExecutor, ToolOutput, ToolProgress};

/// What every tool of one `tools()` call shares: the session's sink and the call settings.
pub(crate) struct CallContext {
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) closed: CancellationToken,
    pub(crate) timeout: Option<Duration>,
    pub(crate) meta: Option<RequestMetaObject>,
    /// Only to explain a dead server; tools never keep the session alive.
    pub(crate) shared: Weak<Shared>,
    pub(crate) progress: Arc<ProgressRoutes>,
}

/// Calls one tool by its server-side name.
pub(crate) struct McpToolExecutor {
    pub(crate) call: Arc<CallContext>,
    pub(crate) name: String,
}

#[async_trait::async_trait]
impl ToolExecutor for McpToolExecutor {
    async fn execute(&self, args: Value) -> Result<ToolOutput, ToolExecError> {
        let span = trace::call_span(self.call.shared.upgrade().as_deref(), &self.name);
        let result = self
            .call
            .call(&self.name, args)
            .instrument(span.clone())
            .await;
        result.map_err(|error| match error {
            CallError::Mcp(error) => {
                trace::record_mcp_error(&span, &error);
                ToolExecError::from(error)
            }
            CallError::Tool(error) => {
                trace::record_tool_error(&span, &error);
                error
            }
        })
    }
}

enum CallError {
    Mcp(McpError),
    Tool(ToolExecError),
}

impl From<McpError> for CallError {
    fn from(error: McpError) -> Self {
        Self::Mcp(error)
    }
}

impl CallContext {
    async fn call(&self, name: &str, args: Value) -> Result<ToolOutput, CallError> {
        if self.closed.is_cancelled() || self.peer.is_transport_closed() {
            return self.call_restarted(name, args).await;
        }
        let arguments = match args {
            Value::Object(arguments) => Some(arguments),
            Value::Null => None,
            _ => {
                return Err(CallError::Tool(ToolExecError::InvalidArguments(
                    "MCP tool arguments must be a JSON object".into(),
                )));
            }
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments;
        params.meta.clone_from(&self.meta);
        trace::inject(&Span::current(), &mut params.meta);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut handle = match self
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(self.session_error(error).await.into()),
        };
        trace::record_request_id(&Span::current(), &handle.id);
        // Dropped with the call (agent cancelled): the server is told to stop.
        let mut guard = CancelOnDrop {
            peer: &self.peer,
            id: Some(handle.id.clone()),
        };
        let reporter = ProgressReporter::current();
        let (_route, mut progress) = self.progress.register(handle.progress_token.clone());
        // An inactivity timer: every progress notification restarts it.
        let mut idle = self
            .timeout
            .map(|timeout| (timeout, Box::pin(tokio::time::sleep(timeout))));
        let response = loop {
            tokio::select! {
                biased;
                // Progress read before the answer is reported before it.
                Some(update) = progress.recv() => {
                    if let Some((timeout, sleep)) = &mut idle {
                        sleep.as_mut().reset(tokio::time::Instant::now() + *timeout);
                    }
                    if let Some(reporter) = &reporter {
                        reporter.report(
                            ToolProgress::new(update.progress)
                                .total(update.total)
                                .message(update.message),
                        );
                    }
                }
                response = &mut handle.rx => break response,
                () = self.closed.cancelled() => {
                    guard.id = None;
                    return Err(McpError::Disconnected.into());
                }
                () = async {
                    match &mut idle {
                        Some((_, sleep)) => sleep.as_mut().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if let Some(id) = guard.id.take() {
                        let _ = self.peer.send_notification(cancelled(id, "request timeout")).await;
                    }
                    return Err(McpError::CallTimeout.into());
                }
            }
        };
        guard.id = None;
        match response {
            Ok(Ok(ServerResult::CallToolResult(result))) => {
                map_result(result).map_err(CallError::Tool)
            }
            Ok(Ok(ServerResult::CustomResult(result))) => {
                map_raw_result(result.0).map_err(CallError::Tool)
            }
            Ok(Ok(ServerResult::EmptyResult(_))) => Ok(ToolOutput::default()),
            Ok(Ok(_)) => Err(CallError::Tool(ToolExecError::Execution(
                "the MCP server answered tools/call with something else".into(),
            ))),
            Ok(Err(error)) => Err(self.session_error(error).await.into()),
            Err(_) => Err(self
                .session_error(ServiceError::TransportClosed)
                .await
                .into()),
        }
    }

    /// The session is gone: runs the call on a restarted server when this one is restarted,
    /// else fails.
    async fn call_restarted(&self, name: &str, args: Value) -> Result<ToolOutput, CallError> {
        let Some(shared) = self.shared.upgrade() else {
            return Err(McpError::Disconnected.into());
        };
        // Only a server that died is restarted, not one that was closed.
        let Some(restart) = shared.restart() else {
            return Err(McpError::Disconnected.into());
        };
        if !shared.exited().await {
            return Err(McpError::Disconnected.into());
        }
        let session = restart.session().await?;
        let replacement = session.shared();
        let context = CallContext {
            peer: replacement.peer.clone(),
            closed: replacement.closed.clone(),
            timeout: self.timeout,
            meta: self.meta.clone(),
            shared: Arc::downgrade(&session.shared_arc()),
            progress: replacement.progress.clone(),
        };
        Box::pin(context.call(name, args)).await
    }

    async fn session_error(&self, error: ServiceError) -> McpError {
        match self.shared.upgrade() {
            Some(shared) => shared.session_error(error, "tools/call").await,
            None => McpError::Disconnected,
        }
    }
}

fn cancelled(id: RequestId, reason: &str) -> ClientNotification {
    ClientNotification::CancelledNotification(CancelledNotification::new(
        CancelledNotificationParam::new(Some(id), Some(reason.to_owned())),
    ))
}

/// Sends `notifications/cancelled` for a request abandoned mid-flight.
struct CancelOnDrop<'a> {
    peer: &'a Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let peer = self.peer.clone();
            runtime.spawn(async move {
                let _ = peer
                    .send_notification(cancelled(id, "the caller cancelled the tool call"))
                    .await;
            });
        }
    }
}
