//! The tool call path: one [`ToolExecutor`] per MCP tool, with the call timeout, cancellation
//! sent to the server, the `input_required` rounds of 2026-07-28 servers, and errors that say
//! what happened.

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

use aquaregia::{
    ProgressReporter, ToolCheckpoint, ToolExecError, ToolExecutor, ToolOutput, ToolProgress,
};

use super::content::{map_raw_result, map_result};
use super::input::{MAX_INPUT_ROUNDS, state_only_pause};
use crate::error::McpError;
use crate::session::connection::Shared;
use crate::session::handler::ServerInput;
use crate::session::listing::TaskSupport;
use crate::session::progress::ProgressRoutes;
use crate::session::trace;
use crate::transport::compat::{lost_in_reinit, task_augmented_call};
use crate::transport::http::Reconnects;

/// What every tool of one `tools()` call shares: the session's sink and the call settings.
pub(crate) struct CallContext {
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) closed: CancellationToken,
    pub(crate) timeout: Option<Duration>,
    pub(crate) meta: Option<RequestMetaObject>,
    /// Only to explain a dead server; tools never keep the session alive.
    pub(crate) shared: Weak<Shared>,
    pub(crate) progress: Arc<ProgressRoutes>,
    pub(crate) input: Arc<ServerInput>,
    /// Whether tools that run as tasks are called with a `task` parameter (2025-11-25).
    pub(crate) augment_tasks: bool,
    /// The sessions re-established under an HTTP connection.
    pub(crate) reconnects: Option<Arc<Reconnects>>,
}

/// Calls one tool.
pub(crate) struct McpToolExecutor {
    pub(crate) call: Arc<CallContext>,
    pub(crate) tool: ToolTarget,
}

/// What a call needs to know of its tool.
pub(crate) struct ToolTarget {
    /// The server-side name.
    pub(crate) name: String,
    pub(crate) tasks: TaskSupport,
    /// Annotated read-only or idempotent: safe to call again when unsure whether it ran.
    pub(crate) retry_safe: bool,
}

#[aquaregia::async_trait]
impl ToolExecutor for McpToolExecutor {
    async fn execute(&self, args: Value) -> Result<ToolOutput, ToolExecError> {
        // The session is only borrowed for the span: a tool never keeps it alive.
        let span = {
            let shared = self.call.shared.upgrade();
            trace::call_span(shared.as_deref().map(Shared::span_server), &self.tool.name)
        };
        let result = self
            .call
            .call(&self.tool, args)
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
            CallError::SessionLost => ToolExecError::from(McpError::Disconnected),
        })
    }
}

pub(crate) enum CallError {
    Mcp(McpError),
    Tool(ToolExecError),
    /// The answer was pending when the HTTP session was re-initialised (see
    /// [`lost_in_reinit`]); [`CallContext::call`] decides what it becomes.
    SessionLost,
}

impl From<McpError> for CallError {
    fn from(error: McpError) -> Self {
        Self::Mcp(error)
    }
}

impl CallContext {
    async fn call(&self, tool: &ToolTarget, args: Value) -> Result<ToolOutput, CallError> {
        if self.closed.is_cancelled() || self.peer.is_transport_closed() {
            return self.call_restarted(tool, args).await;
        }
        let name = tool.name.as_str();
        // A durable runner keeps the task an earlier attempt of this call started: follow it
        // rather than call the tool again.
        let checkpoint = ToolCheckpoint::current();
        if let Some(checkpoint) = &checkpoint
            && let Some(output) = self.resume_task(tool, checkpoint).await?
        {
            return Ok(output);
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
        let (mut rounds, mut state_only_rounds) = (0, 0);
        let mut repeated = false;
        loop {
            let result = match self.send(self.request(&params, tool.tasks)).await {
                Err(CallError::SessionLost) if tool.retry_safe && !repeated => {
                    tracing::info!(server = %self.input.server, tool = name, "calling again on the new session");
                    repeated = true;
                    continue;
                }
                Err(CallError::SessionLost) => {
                    return Err(McpError::SessionLost {
                        server: self.input.server.clone(),
                        tool: name.to_owned(),
                    }
                    .into());
                }
                other => other?,
            };
            if let Some(task) = self.created_task(&result) {
                return self.follow_new_task(name, task, checkpoint.as_ref()).await;
            }
            let asked = match result {
                ServerResult::InputRequiredResult(asked) => asked,
                other => return finish(other),
            };
            if rounds == MAX_INPUT_ROUNDS {
                return Err(self
                    .input
                    .unanswerable(format!(
                        "the call still needed input after {MAX_INPUT_ROUNDS} rounds of answers"
                    ))
                    .into());
            }
            rounds += 1;
            // The next request is a new one (new id), carrying the answers and the server's
            // state exactly as given; nothing of it outlives this call.
            let questions = asked.input_requests.unwrap_or_default();
            if questions.is_empty() {
                if asked.request_state.is_none() {
                    return Err(self
                        .input
                        .unanswerable("an input_required result with nothing to answer")
                        .into());
                }
                tokio::time::sleep(state_only_pause(state_only_rounds)).await;
                state_only_rounds += 1;
            } else {
                state_only_rounds = 0;
            }
            tracing::debug!(server = %self.input.server, tool = name, questions = questions.len(), "input required");
            let answers = self.input.fulfil(questions).await?;
            params.input_responses = (!answers.is_empty()).then_some(answers);
            params.request_state = asked.request_state;
        }
    }

    /// `tools/call`, with a `task` parameter for a tool that runs as a task on a 2025-11-25
    /// session (2026-07-28 servers make tasks themselves).
    fn request(&self, params: &CallToolRequestParams, tasks: TaskSupport) -> ClientRequest {
        if tasks != TaskSupport::Forbidden
            && self.augment_tasks
            && let Some(request) = task_augmented_call(params)
        {
            return request;
        }
        ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()))
    }

    /// One request: its progress reported, its inactivity timer, and the server told to stop
    /// when the call is dropped or times out.
    async fn send(&self, request: ClientRequest) -> Result<ServerResult, CallError> {
        let reconnects = self.reconnects.as_ref().map(|r| (r, r.count()));
        let result = self.send_once(request).await;
        if let Some((reconnects, before)) = reconnects
            && reconnects.count() != before
        {
            report(format!(
                "the session with MCP server `{}` expired and was re-established",
                self.input.server
            ));
        }
        result
    }

    async fn send_once(&self, request: ClientRequest) -> Result<ServerResult, CallError> {
        let mut handle = match self
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(self.session_error(error, "tools/call").await.into()),
        };
        trace::record_request_id(&Span::current(), &handle.id);
        // Dropped with the call (agent cancelled): the server is told to stop.
        let mut guard = CancelOnDrop {
            peer: &self.peer,
            id: Some(handle.id.clone()),
        };
        let reporter = ProgressReporter::current();
        let (_route, progress) = self.progress.register(handle.progress_token.clone());
        // An inactivity timer: every progress notification restarts it.
        let mut idle = self
            .timeout
            .map(|timeout| (timeout, Box::pin(tokio::time::sleep(timeout))));
        let response = loop {
            tokio::select! {
                biased;
                // Progress read before the answer is reported before it.
                update = progress.recv() => {
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
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(error))) if lost_in_reinit(&error) => {
                Err(CallError::SessionLost)
            }
            Ok(Err(error)) => Err(self.session_error(error, "tools/call").await.into()),
            Err(_) => Err(self
                .session_error(ServiceError::TransportClosed, "tools/call")
                .await
                .into()),
        }
    }

    /// The session is gone: runs the call on a restarted server when this one is restarted,
    /// else fails.
    async fn call_restarted(
        &self,
        tool: &ToolTarget,
        args: Value,
    ) -> Result<ToolOutput, CallError> {
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
        let (session, restarted) = restart.session().await?;
        if restarted {
            report(format!(
                "MCP server `{}` stopped and was restarted",
                self.input.server
            ));
        }
        let replacement = session.shared();
        let context = CallContext {
            peer: replacement.peer.clone(),
            closed: replacement.closed.clone(),
            timeout: self.timeout,
            meta: self.meta.clone(),
            shared: Arc::downgrade(&session.shared_arc()),
            progress: replacement.progress.clone(),
            input: replacement.input.clone(),
            augment_tasks: self.augment_tasks,
            reconnects: replacement.reconnects().cloned(),
        };
        Box::pin(context.call(tool, args)).await
    }

    pub(crate) async fn session_error(
        &self,
        error: ServiceError,
        method: &'static str,
    ) -> McpError {
        match self.shared.upgrade() {
            Some(shared) => shared.session_error(error, method).await,
            None => McpError::Disconnected,
        }
    }
}

/// A final `tools/call` answer as the tool's output.
pub(crate) fn finish(result: ServerResult) -> Result<ToolOutput, CallError> {
    match result {
        ServerResult::CallToolResult(result) => map_result(result).map_err(CallError::Tool),
        ServerResult::CustomResult(result) => map_raw_result(result.0).map_err(CallError::Tool),
        ServerResult::EmptyResult(_) => Ok(ToolOutput::default()),
        _ => Err(CallError::Tool(ToolExecError::Execution(
            "the MCP server answered tools/call with something else".into(),
        ))),
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

/// Tells the running tool call, if any, that its server was reconnected (it reaches the agent
/// as [`AgentEvent::ToolProgress`](aquaregia::AgentEvent::ToolProgress)).
fn report(message: String) {
    if let Some(reporter) = ProgressReporter::current() {
        reporter.report(ToolProgress::new(0.0).message(message));
    }
}
