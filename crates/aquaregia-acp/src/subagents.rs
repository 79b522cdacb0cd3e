//! Subagents as child sessions (the schema's `unstable_subagents`, ACP's subagent sessions):
//! each run of a subagent tool (the built-in `task`, see [`AcpServer::task_subagent`]) gets a
//! child session id. To a client that advertised `clientCapabilities.subagents`, the child is
//! announced with a `subagent_update` on the parent session (title, task, `cancel` permitted,
//! `running`; `_meta.toolCallId` names the parent's tool call, and the parent's call gets a
//! `tool_call_update` whose `_meta.subagentSessionId` names the child), its messages, thoughts
//! and tool calls are `session/update`s of the child session, its permission questions carry
//! the child's session id, and its end is an `idle` state with the stop reason. Any other
//! client sees the child's tool calls (and their questions) in the parent session, and its
//! answer as the call's result. `session/cancel` of a child session stops that child alone:
//! the parent's call fails as cancelled and the parent's turn goes on.
//!
//! The parent's tool call is linked through `_meta` rather than the schema's `session` tool
//! call content because the TypeScript SDK (2.4, the newest) does not know that content type
//! and rejects the whole update.
//!
//! [`AcpServer::task_subagent`]: crate::AcpServer::task_subagent

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ErrorStopReason, IdleStateUpdate, IdleStopReason, RunningStateUpdate,
    SessionCancelCapabilities, SessionUpdate, StateUpdate, SubagentSessionCapabilities,
    SubagentUpdate, ToolCallUpdate, ToolCallUpdateFields,
};
use aquaregia::redact::redact_known;
use aquaregia::sync::lock;
use aquaregia::{AgentEvent, ToolCall, ToolExecError, ToolOutput};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{builtins, updates};

/// What the built-in subagent's tool tells the model.
pub(crate) const TASK_DESCRIPTION: &str = "Hands a self-contained task to a subagent: a fresh \
     agent with this session's tools and no view of this conversation, which works on it \
     step by step and answers with its result. Use it for work that needs many tool calls \
     whose details the conversation does not need, such as searching a codebase. Say in \
     `task` everything the subagent needs to know.";

/// The subagent runs of a connection, by child session id.
#[derive(Default)]
pub(crate) struct Children {
    running: Mutex<HashMap<String, Child>>,
    next: AtomicU64,
}

/// One subagent run.
struct Child {
    /// The session its updates would otherwise go to: the parent (or, for a child's child
    /// not shown as a session, the session its parent's updates go to).
    parent: String,
    /// The parent's tool call that runs it.
    call_id: String,
    /// Stops it alone.
    token: CancellationToken,
    /// Whether the client sees it as a child session.
    exposed: bool,
}

impl Children {
    /// Registers the run `call_id` of session `parent` starts: its child session id and the
    /// token that stops it alone.
    pub(crate) fn start(
        &self,
        parent: &str,
        call_id: &str,
        exposed: bool,
    ) -> (String, CancellationToken) {
        let id = format!(
            "{parent}.subagent-{}",
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        );
        let token = CancellationToken::new();
        lock(&self.running).insert(
            id.clone(),
            Child {
                parent: parent.to_owned(),
                call_id: call_id.to_owned(),
                token: token.clone(),
                exposed,
            },
        );
        (id, token)
    }

    /// `session/cancel` of a child session: stops it; `false` when `id` is no running child.
    pub(crate) fn cancel(&self, id: &str) -> bool {
        match lock(&self.running).get(id) {
            Some(child) => {
                tracing::info!(session = %id, parent = %child.parent, "session/cancel of a subagent");
                child.token.cancel();
                true
            }
            None => false,
        }
    }

    /// Where the updates of the run started by `parent`'s call `call_id` go: its child session
    /// when the client sees it, else `parent`.
    fn target(&self, parent: &str, call_id: &str) -> Option<(String, bool)> {
        lock(&self.running).iter().find_map(|(id, child)| {
            (child.parent == parent && child.call_id == call_id).then(|| {
                if child.exposed {
                    (id.clone(), true)
                } else {
                    (parent.to_owned(), false)
                }
            })
        })
    }

    /// The run of `parent`'s call `call_id` ended: forgotten; its id when the client saw it.
    fn finish(&self, parent: &str, call_id: &str) -> Option<String> {
        let mut running = lock(&self.running);
        let id = running
            .iter()
            .find(|(_, child)| child.parent == parent && child.call_id == call_id)
            .map(|(id, _)| id.clone())?;
        running
            .remove(&id)
            .and_then(|child| child.exposed.then_some(id))
    }

    /// A turn of `parent` ended: the runs it left (a failed turn ends without their calls'
    /// results) are forgotten, and theirs.
    pub(crate) fn end_turn(&self, parent: &str) {
        let mut running = lock(&self.running);
        let mut gone = vec![parent.to_owned()];
        while let Some(session) = gone.pop() {
            let ids: Vec<String> = running
                .iter()
                .filter(|(_, child)| child.parent == session)
                .map(|(id, _)| id.clone())
                .collect();
            for id in ids {
                running.remove(&id);
                gone.push(id);
            }
        }
    }
}

/// Announces the child session `id` of the subagent run `call` (of `parent`) starts.
pub(crate) fn announce(cx: &ConnectionTo<Client>, parent: &str, id: &str, call: &ToolCall) {
    let task = call
        .arguments
        .get("task")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut update = SubagentUpdate::new(id.to_owned())
        .title(format!("{}: {}", call.name, updates::one_line(task)))
        .description(task.to_owned())
        .capabilities(SubagentSessionCapabilities::new().cancel(SessionCancelCapabilities::new()))
        .state(StateUpdate::Running(RunningStateUpdate::new()));
    update = update.meta(
        json!({"toolCallId": call.id})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    updates::send(cx, parent, SessionUpdate::SubagentUpdate(update));
    let link = ToolCallUpdate::new(call.id.clone(), ToolCallUpdateFields::new())
        .meta(json!({"subagentSessionId": id}).as_object().cloned());
    updates::send(cx, parent, SessionUpdate::ToolCallUpdate(link));
}

/// The parent's tool call `call_id` finished: when it ran a child session, the child's end
/// (`idle` with its stop reason) is told on `parent`.
pub(crate) fn call_finished(
    children: &Children,
    cx: &ConnectionTo<Client>,
    parent: &str,
    call_id: &str,
    result: &Result<ToolOutput, ToolExecError>,
) {
    let Some(id) = children.finish(parent, call_id) else {
        return;
    };
    let stop = match result {
        Ok(ToolOutput::Structured { structured, .. }) => {
            match structured.get("stop_reason").and_then(Value::as_str) {
                Some("max_steps") => IdleStopReason::MaxTurnRequests,
                Some("length") => IdleStopReason::MaxTokens,
                Some("refusal") => IdleStopReason::Refusal,
                _ => IdleStopReason::EndTurn,
            }
        }
        Ok(_) => IdleStopReason::EndTurn,
        Err(ToolExecError::Cancelled) => IdleStopReason::Cancelled,
        Err(error) => IdleStopReason::Error(ErrorStopReason::new().error(
            agent_client_protocol::v1::schema::Error::internal_error().data(json!({
                "reason": redact_known(&error.to_string()),
            })),
        )),
    };
    let update = SubagentUpdate::new(id)
        .state(StateUpdate::Idle(IdleStateUpdate::new().stop_reason(stop)))
        .capabilities(None::<SubagentSessionCapabilities>);
    updates::send(cx, parent, SessionUpdate::SubagentUpdate(update));
}

/// One event of the subagent run by `parent`'s call `call_id`, sent where the client sees the
/// run: text and thoughts on its child session (not shown otherwise), its tool calls' results
/// where their `tool_call` was sent (the hooks send those), a subagent's subagent likewise one
/// level down.
pub(crate) fn forward(
    children: &Children,
    cx: &ConnectionTo<Client>,
    parent: &str,
    call_id: &str,
    event: AgentEvent,
    finished: &dyn Fn(&str),
) {
    let Some((target, exposed)) = children.target(parent, call_id) else {
        return;
    };
    match event {
        AgentEvent::TextDelta(text) if exposed => {
            updates::send(cx, &target, updates::message(&text));
        }
        AgentEvent::ReasoningDelta(text) if exposed => {
            updates::send(cx, &target, updates::thought(&text));
        }
        AgentEvent::ToolCallFinish { id, name, result } => {
            finished(&id);
            let keep_content = matches!(name.as_str(), builtins::WRITE | builtins::EDIT);
            updates::send(cx, &target, updates::finished(&id, &result, keep_content));
            call_finished(children, cx, &target, &id, &result);
        }
        AgentEvent::SubAgent { id, event, .. } => {
            forward(children, cx, &target, &id, *event, finished);
        }
        _ => {}
    }
}
