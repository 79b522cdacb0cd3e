//! Tool calls that run as tasks: the server answers `tools/call` with a task, which is polled
//! (at the server's suggested interval, else with backoff) until it ends, its status reported
//! as progress, and cancelled with `tasks/cancel` when the call is dropped or times out.
//!
//! Two generations of tasks are spoken:
//! - the 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): the client
//!   declares the extension and the server decides; `tasks/get` carries the result, the
//!   error, or the input the task needs (answered with `tasks/update`);
//! - 2025-11-25 task augmentation (SEP-1686): tools whose `execution.taskSupport` is
//!   `required` or `optional` are called with a `task` parameter; the result is fetched
//!   with `tasks/result`, which also carries the server's questions to the client.

use std::collections::HashSet;
use std::time::Duration;

use aquaregia::{ProgressReporter, ToolCheckpoint, ToolExecError, ToolOutput, ToolProgress};
use rmcp::RoleClient;
use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, ClientRequest, GetTaskParams, GetTaskRequest,
    InputRequests, ServerResult, UpdateTaskParams, UpdateTaskRequest,
};
use rmcp::service::{Peer, PeerRequestOptions};
use serde_json::Value;

use super::content::map_raw_result;
use super::executor::{CallContext, CallError, ToolTarget, finish};
use crate::error::McpError;
use crate::session::connection::DEFAULT_CALL_TIMEOUT;
use crate::transport::compat::tasks_result;

/// Polling between `FIRST_POLL` and `MAX_POLL`, growing by half each time the server
/// suggests nothing.
const FIRST_POLL: Duration = Duration::from_millis(100);
const MAX_POLL: Duration = Duration::from_secs(5);
/// A bound on one `tasks/get` or `tasks/cancel` answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The key of a task in a call's checkpoint: `{"mcpTask": {"server": ..., "taskId": ...}}`.
const CHECKPOINT_KEY: &str = "mcpTask";

/// What a call records in its [`ToolCheckpoint`] once the server
/// made a task for it.
fn task_checkpoint(server: &str, id: &str) -> Value {
    serde_json::json!({ CHECKPOINT_KEY: { "server": server, "taskId": id } })
}

/// A task the server made for a call.
#[derive(Debug, Clone)]
pub(crate) struct TaskState {
    pub(crate) id: String,
    status: String,
    message: Option<String>,
    poll: Option<Duration>,
    /// The whole `tasks/get` answer (2026-07-28: carries `result`, `error`, `inputRequests`).
    body: Value,
}

impl TaskState {
    /// The task in a `tools/call` answer, if the server made one.
    fn created(result: &ServerResult) -> Option<Self> {
        match result {
            ServerResult::CreateTaskResult(created) => {
                Self::read(serde_json::to_value(&created.task).ok()?)
            }
            // 2025-11-25: `{"task": {...}}`.
            ServerResult::CustomResult(custom) => Self::read(custom.0.get("task")?.clone()),
            _ => None,
        }
    }

    fn read(body: Value) -> Option<Self> {
        let id = body.get("taskId")?.as_str()?.to_owned();
        let status = body.get("status")?.as_str()?.to_owned();
        let message = body
            .get("statusMessage")
            .and_then(Value::as_str)
            .map(str::to_owned);
        // `pollIntervalMs` (2026-07-28) or `pollInterval` (2025-11-25), in milliseconds.
        let poll = ["pollIntervalMs", "pollInterval"]
            .iter()
            .find_map(|key| body.get(*key).and_then(Value::as_u64))
            .map(Duration::from_millis);
        Some(Self {
            id,
            status,
            message,
            poll,
            body,
        })
    }
}

/// Sends `tasks/cancel` for a task abandoned mid-flight, unless the task is `kept` in the
/// call's checkpoint for a later attempt (and the runner did not cancel the call).
struct CancelTaskOnDrop {
    peer: Peer<RoleClient>,
    id: Option<String>,
    kept: Option<ToolCheckpoint>,
}

impl Drop for CancelTaskOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        if self
            .kept
            .as_ref()
            .is_some_and(|checkpoint| !checkpoint.is_cancelled())
        {
            tracing::debug!(
                task = id,
                "the call is dropped; its task is kept for a later attempt"
            );
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let peer = self.peer.clone();
            runtime.spawn(async move { cancel(&peer, &id).await });
        }
    }
}

async fn cancel(peer: &Peer<RoleClient>, id: &str) {
    let request =
        ClientRequest::CancelTaskRequest(CancelTaskRequest::new(CancelTaskParams::new(id)));
    let sent = peer
        .send_request_with_option(request, PeerRequestOptions::with_timeout(REQUEST_TIMEOUT))
        .await;
    let answer = match sent {
        Ok(handle) => handle.await_response().await,
        Err(error) => Err(error),
    };
    match answer {
        Ok(_) => tracing::debug!(task = id, "task cancelled"),
        Err(error) => tracing::debug!(task = id, %error, "tasks/cancel failed"),
    }
}

impl CallContext {
    /// The task a `tools/call` answer made, if it made one: follow it with
    /// [`follow_task`](Self::follow_task).
    pub(super) fn created_task(&self, result: &ServerResult) -> Option<TaskState> {
        TaskState::created(result)
    }

    /// Follows a task the server just made for the call, recorded first in the call's
    /// checkpoint when its runner keeps one: the task then outlives this attempt, and a later
    /// attempt follows it ([`resume_task`](Self::resume_task)) instead of calling again.
    pub(super) async fn follow_new_task(
        &self,
        tool: &str,
        task: TaskState,
        checkpoint: Option<&ToolCheckpoint>,
    ) -> Result<ToolOutput, CallError> {
        if let Some(checkpoint) = checkpoint {
            checkpoint.record(task_checkpoint(&self.input.server, &task.id));
        }
        self.follow_task(tool, task, checkpoint).await
    }

    /// Follows the task an earlier attempt of this call started and recorded in its
    /// `checkpoint`: `None` when the checkpoint holds no such record, or when the server no
    /// longer knows the task and the tool is safe to call again; an error when it is not (the
    /// call is not made twice).
    pub(super) async fn resume_task(
        &self,
        tool: &ToolTarget,
        checkpoint: &ToolCheckpoint,
    ) -> Result<Option<ToolOutput>, CallError> {
        let Some(recorded) = checkpoint
            .resumed()
            .and_then(|resumed| resumed.get(CHECKPOINT_KEY))
        else {
            return Ok(None);
        };
        let (Some(server), Some(id)) = (
            recorded.get("server").and_then(Value::as_str),
            recorded.get("taskId").and_then(Value::as_str),
        ) else {
            return Ok(None);
        };
        if server != self.input.server {
            return Err(CallError::Tool(ToolExecError::Execution(format!(
                "an earlier attempt of this call left task `{id}` on MCP server `{server}`, not \
                 on `{}`: the call is not made again",
                self.input.server
            ))));
        }
        tracing::debug!(server, tool = %tool.name, task = id, "resuming the task of an earlier attempt");
        match self.poll_task(id).await {
            Ok(task) => self
                .follow_task(&tool.name, task, Some(checkpoint))
                .await
                .map(Some),
            Err(_) if tool.retry_safe => {
                tracing::info!(server, tool = %tool.name, task = id, "the task is gone; the tool is safe to call again");
                Ok(None)
            }
            Err(error) => {
                let reason = match error {
                    CallError::Mcp(error) => error.to_string(),
                    CallError::Tool(error) => error.to_string(),
                    CallError::SessionLost => McpError::Disconnected.to_string(),
                };
                Err(CallError::Tool(ToolExecError::Execution(format!(
                    "MCP server `{server}` no longer knows task `{id}`, which an earlier attempt \
                     of this call started ({reason}); the call is not made again, since it may \
                     have had its effect"
                ))))
            }
        }
    }

    /// Follows a task to its end and returns the call's output. A task `kept` in the call's
    /// checkpoint is left running when the call is dropped (a later attempt resumes it),
    /// unless the runner cancelled the call.
    pub(crate) async fn follow_task(
        &self,
        tool: &str,
        mut task: TaskState,
        kept: Option<&ToolCheckpoint>,
    ) -> Result<ToolOutput, CallError> {
        let server = self.input.server.clone();
        tracing::debug!(server = %server, tool, task = %task.id, "the call runs as a task");
        let mut guard = CancelTaskOnDrop {
            peer: self.peer.clone(),
            id: Some(task.id.clone()),
            kept: kept.cloned(),
        };
        let reporter = ProgressReporter::current();
        let mut updates = 0u32;
        let mut report = |task: &TaskState| {
            updates += 1;
            if let Some(reporter) = &reporter {
                let message = match &task.message {
                    Some(message) => format!("task {}: {message}", task.status),
                    None => format!("task {}", task.status),
                };
                reporter.report(ToolProgress::new(f64::from(updates)).message(message));
            }
        };
        report(&task);
        let mut pause = FIRST_POLL;
        let mut answered = HashSet::new();
        // The call timeout bounds a task that shows no sign of life.
        let mut quiet_since = tokio::time::Instant::now();
        loop {
            match task.status.as_str() {
                "completed" | "failed" => {
                    let output = self.task_result(&task).await;
                    guard.id = None;
                    return output;
                }
                "cancelled" => {
                    guard.id = None;
                    return Err(CallError::Tool(ToolExecError::Execution(format!(
                        "MCP server `{server}` cancelled the task running `{tool}`"
                    ))));
                }
                "input_required" => {
                    if task.body.get("inputRequests").is_some() {
                        self.answer_task(&task, &mut answered).await?;
                    } else {
                        // 2025-11-25: the questions come with `tasks/result`.
                        let output = self.task_result(&task).await;
                        guard.id = None;
                        return output;
                    }
                }
                _ => {}
            }
            if let Some(timeout) = self.timeout
                && quiet_since.elapsed() >= timeout
            {
                guard.id = None;
                cancel(&self.peer, &task.id).await;
                return Err(McpError::CallTimeout.into());
            }
            let wait = task.poll.unwrap_or(pause).clamp(FIRST_POLL, MAX_POLL);
            pause = (pause * 3 / 2).min(MAX_POLL);
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.closed.cancelled() => {
                    guard.id = None;
                    return Err(McpError::Disconnected.into());
                }
            }
            let next = self.poll_task(&task.id).await?;
            if next.status != task.status || next.message != task.message {
                report(&next);
                quiet_since = tokio::time::Instant::now();
            }
            task = next;
        }
    }

    async fn poll_task(&self, id: &str) -> Result<TaskState, CallError> {
        let request = ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(id)));
        let answer = self
            .task_request(request, REQUEST_TIMEOUT, "tasks/get")
            .await?;
        let body = serde_json::to_value(&answer).unwrap_or_default();
        TaskState::read(body).ok_or_else(|| {
            McpError::InvalidResponse {
                server: self.input.server.clone(),
                method: "tasks/get",
                reason: "the answer is not a task".into(),
            }
            .into()
        })
    }

    /// The result of a task that ended: in the `tasks/get` answer (2026-07-28) or from
    /// `tasks/result` (2025-11-25, which waits for the task to end).
    async fn task_result(&self, task: &TaskState) -> Result<ToolOutput, CallError> {
        if let Some(result) = task.body.get("result") {
            return map_raw_result(result.clone()).map_err(CallError::Tool);
        }
        if let Some(error) = task.body.get("error") {
            return Err(McpError::Protocol {
                server: self.input.server.clone(),
                method: "tools/call",
                code: error
                    .get("code")
                    .and_then(Value::as_i64)
                    .and_then(|code| i32::try_from(code).ok())
                    .unwrap_or(0),
                message: error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the task failed")
                    .to_owned(),
            }
            .into());
        }
        let request = tasks_result(&task.id);
        // A task waiting on the user may take long, but not forever.
        let wait = self.timeout.unwrap_or(DEFAULT_CALL_TIMEOUT);
        let answer = self.task_request(request, wait, "tasks/result").await?;
        finish(answer)
    }

    /// Answers the questions of a task waiting for input (2026-07-28) with `tasks/update`.
    /// Questions already answered (`answered`) are not asked again while the server has not
    /// taken the answers in yet.
    async fn answer_task(
        &self,
        task: &TaskState,
        answered: &mut HashSet<String>,
    ) -> Result<(), CallError> {
        let mut questions: InputRequests =
            serde_json::from_value(task.body["inputRequests"].clone()).map_err(|error| {
                self.input
                    .unanswerable(format!("the task's inputRequests are unreadable: {error}"))
            })?;
        questions.retain(|key, _| !answered.contains(key));
        if questions.is_empty() {
            return Ok(());
        }
        answered.extend(questions.keys().cloned());
        let answers = self.input.fulfil(questions).await?;
        let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(
            UpdateTaskParams::new(task.id.clone(), answers),
        ));
        self.task_request(request, REQUEST_TIMEOUT, "tasks/update")
            .await
            .map(drop)
    }

    async fn task_request(
        &self,
        request: ClientRequest,
        timeout: Duration,
        method: &'static str,
    ) -> Result<ServerResult, CallError> {
        let sent = self
            .peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
            .await;
        let answer = match sent {
            Ok(handle) => handle.await_response().await,
            Err(error) => Err(error),
        };
        match answer {
            Ok(answer) => Ok(answer),
            Err(error) => Err(self.session_error(error, method).await.into()),
        }
    }
}
