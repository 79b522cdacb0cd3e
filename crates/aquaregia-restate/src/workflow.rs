//! [`DurableAgent`]: an [`Agent`] served as the Restate workflow `AgentRun`, one workflow
//! instance per run id, each model call and each tool call one journaled step.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use aquaregia::{
    Agent, AgentRun, Approval, ApprovalKey, ModelRequest, NextAction, RunStepper, ToolCall,
    ToolCheckpoint, ToolExecError, ToolOutput,
};
use restate_sdk::prelude::*;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cancel;
use crate::journal::{RecordedResponse, RecordedToolResult, RecordedToolStep};
use crate::run::{PendingApprovals, RunRequest, RunResult};

/// The Restate name of the workflow [`DurableAgent`] serves.
pub const WORKFLOW_NAME: &str = "AgentRun";

/// The workflow state key of the run while it waits for approvals (read by `approve`).
const PAUSED_RUN: &str = "paused_run";
/// The workflow state key of the calls waiting for approval (read by `pending`).
const PENDING: &str = "pending";

/// The durable promise an approval of call `call_id` resolves.
fn approval_promise(call_id: &str) -> String {
    format!("approval:{call_id}")
}

/// An [`Agent`] served as the Restate workflow `AgentRun` ([`WORKFLOW_NAME`]), keyed by run id.
///
/// A workflow rather than a virtual object: a run executes once per id (Restate refuses a
/// second start of the same id and lets anyone attach to its result), its shared handlers run
/// next to it while it waits (`pending`, `approve`), and a workflow has *named* durable
/// promises, so an approval is addressed by the call it decides (`approval:<call id>`) without
/// handing out awakeable ids. A session that holds several runs is a virtual object above this,
/// calling one workflow per turn.
///
/// Handlers (over the ingress, `http://<ingress>/AgentRun/<run id>/<handler>`):
///
/// - `run` ([`RunRequest`] → [`RunResult`]): drives [`Agent::start`]'s run through a
///   [`RunStepper`]. Each model call is one `ctx.run` step recording the answer, each tool call
///   one step recording its result (failures included), so when the service dies mid-run and
///   Restate invokes it again, the replay hands back the recorded answers and results: a
///   completed model call is not sent again and a completed tool call is not made again. Only
///   the step in flight when the process died runs again. A tool call whose MCP server runs
///   it as a task takes two steps: the task's handle, journaled as soon as the server made
///   the task, then the result; a run resumed while the task runs polls that same task to its
///   end instead of calling the tool again (any tool can do the same through
///   [`ToolCheckpoint`]). A call that needs approval
///   ([`AgentBuilder::require_approval`](aquaregia::AgentBuilder::require_approval)) suspends
///   the run on the durable promise `approval:<call id>`; the invocation may suspend for days
///   and survives restarts of the service and of Restate.
/// - `pending` (no input → [`PendingApprovals`]): the calls the run waits on.
/// - `approve` ([`Approval`] → nothing): checks a signed decision against the paused run
///   ([`AgentRun::apply_approval`]: the exact call id, tool and arguments, and the
///   signature under the approval key) and resolves the call's promise; a decision that does
///   not check is refused (HTTP 400) and the run keeps waiting.
///
/// Cancelling the invocation (Restate's admin API, `PATCH /invocations/<id>/cancel`, or its
/// CLI) ends the run at once with a terminal error (409, `cancelled`): the model call or tool
/// calls in flight are dropped (an MCP server is sent `notifications/cancelled`, or
/// `tasks/cancel` for a task), and a run waiting for approval stops listing its calls. This
/// needs [`serve`](Self::serve), which watches each invocation's input for Restate's cancel
/// signal (restate-sdk 0.13 itself does not interrupt a running `ctx.run`); a `DurableAgent`
/// bound into an endpoint of your own ends a cancelled run at its next journaled step.
///
/// What runs again on replay, since it is not journaled: `prepare_step`, the hooks, and
/// conversation compaction (a summarising model call); keep them deterministic, or leave
/// compaction off, for runs that must replay exactly. A failed model call is retried by
/// Restate when [`Error::is_retryable`](aquaregia::Error::is_retryable) says so, and ends the
/// run with a terminal error otherwise.
///
/// ```no_run
/// use aquaregia_restate::DurableAgent;
///
/// # async fn demo(agent: aquaregia::Agent) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:9080").await?;
/// DurableAgent::new(agent)
///     .serve(listener, std::future::pending::<()>())
///     .await;
/// # Ok(()) }
/// ```
pub struct DurableAgent {
    agent: Agent,
    approval_key: Option<ApprovalKey>,
}

impl fmt::Debug for DurableAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DurableAgent")
            .field("agent", &self.agent)
            .field("approval_key", &self.approval_key)
            .finish()
    }
}

impl DurableAgent {
    /// Serves `agent`'s runs.
    pub fn new(agent: Agent) -> Self {
        Self {
            agent,
            approval_key: None,
        }
    }

    /// The key the `approve` handler checks decisions with before it wakes the run: the same
    /// key as the agent's [`require_approval`](aquaregia::AgentBuilder::require_approval).
    /// Without it, `approve` refuses every decision.
    #[must_use]
    pub fn approval_key(mut self, key: ApprovalKey) -> Self {
        self.approval_key = Some(key);
        self
    }

    /// Serves the workflow on `listener` (HTTP/2, as Restate calls it) until `shutdown`
    /// completes. Register the address with Restate once (`restate deployments register
    /// http://<address>`, or `POST /deployments` on its admin API).
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future) {
        let endpoint = Endpoint::builder().bind(self).build();
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, remote) = match accepted {
                        Ok(accepted) => accepted,
                        Err(error) => {
                            // Out of file descriptors, say: wait before the next accept rather
                            // than spinning on the same error (as axum's serve does).
                            tracing::warn!(%error, "accepting a connection from Restate failed");
                            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                    // Journal entries are small HTTP/2 frames each waiting for Restate's answer:
                    // with Nagle on, each waits for a delayed ACK first.
                    if let Err(error) = stream.set_nodelay(true) {
                        tracing::warn!(%error, "TCP_NODELAY could not be set");
                    }
                    let connection = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(
                        hyper_util::rt::TokioIo::new(stream),
                        // Each invocation's input watched for Restate's cancel signal, so the
                        // step in flight ends at once (see `cancel`).
                        hyper::service::service_fn({
                            let endpoint = endpoint.clone();
                            move |request| {
                                std::future::ready(Ok::<_, std::convert::Infallible>(
                                    cancel::serve(&endpoint, request),
                                ))
                            }
                        }),
                    );
                    let connection = graceful.watch(connection);
                    tokio::spawn(async move {
                        if let Err(error) = connection.await {
                            tracing::warn!(%remote, ?error, "a connection from Restate failed");
                        }
                    });
                }
                _ = &mut shutdown => break,
            }
        }
        // In-flight invocations get a bounded time to finish; Restate retries the rest.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(10), graceful.shutdown()).await;
    }
}

#[restate_sdk::workflow(name = "AgentRun")]
impl DurableAgent {
    /// Drives one run to its end.
    #[handler]
    async fn run(
        &self,
        ctx: WorkflowContext<'_>,
        request: Json<RunRequest>,
    ) -> HandlerResult<Json<RunResult>> {
        let Json(request) = request;
        let cancelled = cancel::current();
        let cancelled = cancelled.as_ref();
        let mut stepper = self.agent.stepper(self.agent.start(request.prompt));
        loop {
            match stepper.next_action() {
                NextAction::CallModel { step } => {
                    // Preparing may call the model too (compaction): retried like a model call.
                    let model_request = stepper.model_request().await.map_err(failure)?;
                    // The step's future takes the closure's borrows (a `FnOnce`).
                    let (borrowed, sent) = (&mut stepper, &model_request);
                    let Json(recorded) = ctx
                        .run(move || async move {
                            // A run cancelled already makes no request.
                            tokio::select! {
                                biased;
                                () = until_cancelled(cancelled) => Err(cancelled_error()),
                                answer = call_model(borrowed, sent) => answer,
                            }
                        })
                        .name(format!("model call, step {step}"))
                        .await?;
                    stepper
                        .model_responded(recorded.into())
                        .await
                        .map_err(TerminalError::from_error)?;
                }
                NextAction::RunTools { step, calls } => {
                    for call in calls {
                        let result = run_tool(&ctx, &mut stepper, &call, step, cancelled).await?;
                        stepper
                            .tool_finished(&call.id, result)
                            .await
                            .map_err(TerminalError::from_error)?;
                    }
                }
                NextAction::AwaitApproval { step, calls } => {
                    ctx.set(PAUSED_RUN, Json(stepper.run().clone()));
                    ctx.set(
                        PENDING,
                        Json(PendingApprovals {
                            step,
                            calls: calls.clone(),
                        }),
                    );
                    tracing::info!(step, calls = calls.len(), "the run waits for approval");
                    for call in &calls {
                        let name = approval_promise(&call.id);
                        let approval = match ctx.promise::<Json<Approval>>(&name).await {
                            Ok(Json(approval)) => approval,
                            Err(error) => {
                                // Cancelled: nothing waits any more.
                                ctx.clear(PAUSED_RUN);
                                ctx.clear(PENDING);
                                return Err(error.into());
                            }
                        };
                        stepper
                            .approve(&approval)
                            .await
                            .map_err(TerminalError::from_error)?;
                    }
                    ctx.clear(PAUSED_RUN);
                    ctx.clear(PENDING);
                }
                NextAction::Done(_) => {
                    let output = stepper.finish().await.map_err(TerminalError::from_error)?;
                    return Ok(Json(RunResult::from(&output)));
                }
                other => {
                    return Err(TerminalError::new(format!(
                        "the run asks for an action this version of aquaregia-restate does not \
                         know: {other:?}"
                    ))
                    .into());
                }
            }
        }
    }

    /// The calls the run waits on (none when it does not wait).
    #[handler]
    async fn pending(
        &self,
        ctx: SharedWorkflowContext<'_>,
    ) -> HandlerResult<Json<PendingApprovals>> {
        let pending = ctx.get::<Json<PendingApprovals>>(PENDING).await?;
        Ok(pending.unwrap_or_default())
    }

    /// Checks a signed decision on a waiting call and wakes the run with it.
    #[handler]
    async fn approve(
        &self,
        ctx: SharedWorkflowContext<'_>,
        approval: Json<Approval>,
    ) -> HandlerResult<()> {
        let Json(approval) = approval;
        let Some(key) = &self.approval_key else {
            return Err(TerminalError::new_with_code(
                500,
                "this service has no approval key (`DurableAgent::approval_key`)",
            )
            .into());
        };
        let Some(Json(mut paused)) = ctx.get::<Json<AgentRun>>(PAUSED_RUN).await? else {
            return Err(TerminalError::new_with_code(
                409,
                format!("run `{}` does not wait for approval", ctx.key()),
            )
            .into());
        };
        paused
            .apply_approval(&approval, key)
            .map_err(|error| TerminalError::new_with_code(400, error.to_string()))?;
        ctx.resolve_promise(&approval_promise(&approval.call_id), Json(approval));
        Ok(())
    }
}

/// One model call, as a journaled step: a retryable failure is retried by Restate, any other
/// ends the run.
async fn call_model(
    stepper: &mut RunStepper,
    request: &ModelRequest,
) -> HandlerResult<Json<RecordedResponse>> {
    match stepper.call_model(request).await {
        Ok(response) => Ok(Json(response.into())),
        Err(error) => Err(failure(error)),
    }
}

/// A failure Restate retries when [`aquaregia::Error::is_retryable`] says so, else one that
/// ends the run.
fn failure(error: aquaregia::Error) -> HandlerError {
    if error.is_retryable() {
        error.into()
    } else {
        TerminalError::from_error(error).into()
    }
}

/// A running tool call, polled only inside its journaled steps.
type ToolCallFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ToolOutput, ToolExecError>> + Send + 'a>>;

/// One tool call, as journaled steps: the result, whatever the tool answered (failures
/// included), in one step; or, for a tool that records a handle on work it started (an MCP
/// task, through its [`ToolCheckpoint`]), the handle in a first step and the result in the
/// next. A replay that finds a handle but no result runs the call again *with the handle*,
/// so the tool follows its work (polls the same MCP task) instead of starting it again.
///
/// When Restate cancels the invocation meanwhile, the call is given up for good (its
/// checkpoint [cancelled](ToolCheckpoint::cancel), so an MCP task is cancelled on its server)
/// and dropped, and the run ends with a terminal 409.
async fn run_tool(
    ctx: &WorkflowContext<'_>,
    stepper: &mut RunStepper,
    call: &ToolCall,
    step: usize,
    cancelled: Option<&CancellationToken>,
) -> Result<Result<ToolOutput, ToolExecError>, HandlerError> {
    let (sender, mut checkpoints) = mpsc::unbounded_channel();
    // Created now, started (polled) only by a step that runs: a replayed step leaves it as it
    // is, and a replayed handle replaces it by a call that resumes from the handle.
    let (mut running, mut checkpoint) = start_tool(stepper, call, None, &sender);
    let mut continued = false;
    loop {
        let mut polled = false;
        let name = if continued {
            format!(
                "tool call {} `{}`, step {step}, continued",
                call.id, call.name
            )
        } else {
            format!("tool call {} `{}`, step {step}", call.id, call.name)
        };
        continued = true;
        let (future, records, ran, giving_up) =
            (&mut running, &mut checkpoints, &mut polled, &checkpoint);
        let Json(recorded) = ctx
            .run(move || async move {
                *ran = true;
                // Cancellation first: a run cancelled already does not start the call.
                tokio::select! {
                    biased;
                    () = until_cancelled(cancelled) => {
                        giving_up.cancel();
                        Err(cancelled_error())
                    }
                    result = future => {
                        Ok(Json(RecordedToolStep::Finished(RecordedToolResult { result })))
                    }
                    Some(checkpoint) = records.recv() => {
                        Ok(Json(RecordedToolStep::Started { checkpoint }))
                    }
                }
            })
            .name(name)
            .await?;
        match recorded {
            RecordedToolStep::Finished(recorded) => return Ok(recorded.result),
            // This process made the call: it goes on in the next step.
            RecordedToolStep::Started { .. } if polled => {}
            RecordedToolStep::Started {
                checkpoint: recorded,
            } => {
                drop(running);
                (running, checkpoint) = start_tool(stepper, call, Some(recorded), &sender);
            }
        }
    }
}

/// The call and its checkpoint, whose records go to `records`.
fn start_tool<'a>(
    stepper: &'a mut RunStepper,
    call: &'a ToolCall,
    resumed: Option<Value>,
    records: &mpsc::UnboundedSender<Value>,
) -> (ToolCallFuture<'a>, ToolCheckpoint) {
    let records = records.clone();
    let checkpoint = ToolCheckpoint::new(resumed, move |state| {
        let _ = records.send(state);
    });
    let running = Box::pin(checkpoint.clone().scope(stepper.execute_tool(call)));
    (running, checkpoint)
}

/// Completes when the invocation is cancelled; never without a token.
async fn until_cancelled(token: Option<&CancellationToken>) {
    match token {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
}

/// What a step cancelled in flight ends with: what restate-sdk answers a cancelled await.
fn cancelled_error() -> HandlerError {
    TerminalError::new_with_code(409, "cancelled").into()
}
