//! The prompt family: `session/prompt` runs a turn (the notices left from opening the
//! session, slash commands, the agent run streamed as `session/update`s, and the turn
//! stored); `session/cancel` stops it.
//!
//! The history fed to the model stays within the model's context window: before each model
//! call the SDK compacts a request that would not fit (older tool results elided, older turns
//! summarised; a request that still does not fit is never sent). When that happens, or on
//! `/compact`, the compacted history is stored as the session's base, so a reloaded session
//! continues from it instead of from every turn ever stored.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::schema::{
    CancelNotification, PromptRequest, PromptResponse, StopReason as AcpStopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use aquaregia::redact::{StreamRedactor, redact_known};
use aquaregia::{AgentEvent, Message, Role, StopReason};
use futures::{FutureExt, StreamExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::connection::Connection;
use crate::rpc::{invalid_params, spawn};
use crate::session::Session;
use crate::{agent, builtins, commands, prompt, store, subagents, updates};

/// `session/prompt`: the prompt is registered at once, so a `session/cancel` read right behind
/// it finds it, and runs in a task of its own. A prompt that arrives while another runs waits
/// for it (queued, in order, as claude-agent-acp's `promptQueueing` does) and then runs as
/// the next turn; `session/cancel` stops the running prompt and the queued ones.
pub(crate) fn start(
    connection: &Arc<Connection>,
    request: PromptRequest,
    responder: Option<Responder<PromptResponse>>,
    cx: &ConnectionTo<Client>,
) {
    let session = match connection.sessions.get(&request.session_id.0) {
        Ok(session) => session,
        Err(error) => {
            if let Some(responder) = responder {
                let _ = responder.respond_with_error(error);
            }
            return;
        }
    };
    let token = CancellationToken::new();
    session
        .state
        .with(|state| state.queue_prompt(token.clone()));
    let connection = connection.clone();
    let task_cx = cx.clone();
    spawn(cx, async move {
        let turn = tokio::select! {
            biased;
            () = token.cancelled() => None,
            turn = session.turn.lock() => Some(turn),
        };
        let Some(_turn) = turn else {
            session.state.with(|state| state.unqueue(&token));
            if let Some(responder) = responder {
                let _ = responder.respond(PromptResponse::new(AcpStopReason::Cancelled));
            }
            return;
        };
        if !session.state.with(|state| state.start_queued(&token)) {
            if let Some(responder) = responder {
                let _ = responder.respond_with_error(invalid_params(
                    "the session is being loaded again; send the prompt once it is open",
                ));
            }
            return;
        }
        prompt(
            connection,
            session.clone(),
            request,
            token,
            responder,
            task_cx,
        )
        .await;
    });
}

/// `session/cancel`: stops the session's running prompt, if any; of a subagent's child
/// session, that subagent alone.
pub(crate) fn cancel(connection: &Connection, cancel: &CancelNotification) {
    if let Ok(session) = connection.sessions.get(&cancel.session_id.0) {
        tracing::info!(session = %session.id, "session/cancel");
        session.cancel();
    } else {
        connection.children.cancel(&cancel.session_id.0);
    }
}

/// Runs one turn and answers the prompt.
async fn prompt(
    connection: Arc<Connection>,
    session: Arc<Session>,
    request: PromptRequest,
    token: CancellationToken,
    responder: Option<Responder<PromptResponse>>,
    cx: ConnectionTo<Client>,
) {
    // Releases the session however this ends, a panic included.
    let running = session.prompt_guard(token.clone());
    // A panic inside the agent (a tool, a hook, a custom factory) fails this prompt with
    // an answer instead of leaving the client waiting forever.
    let outcome = AssertUnwindSafe(run_prompt(&connection, &session, &request, &token, &cx))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            tracing::error!(session = %session.id, panic = %what, "the prompt panicked");
            Err(Failure::Internal(format!("the agent panicked: {what}")))
        });
    drop(running);
    connection.children.end_turn(&session.id);
    let Some(responder) = responder else {
        // A turn `_session/steering` started on an idle session: nobody waits for its answer.
        if let Err(Failure::Internal(message) | Failure::TooLarge(message)) = &outcome {
            tracing::warn!(session = %session.id, error = %redact_known(message), "a steered turn failed");
        }
        return;
    };
    let _ = match outcome {
        Ok(stop) => responder.respond(PromptResponse::new(stop)),
        Err(Failure::Internal(message)) => responder.respond_with_error(
            agent_client_protocol::Error::internal_error()
                .data(json!({"reason": redact_known(&message)})),
        ),
        Err(Failure::TooLarge(message)) => responder.respond_with_error(invalid_params(format!(
            "the prompt is too large for the model: {message}"
        ))),
    };
}

/// Why a turn failed.
enum Failure {
    /// The agent could not run it (the model, a tool, a panic).
    Internal(String),
    /// The prompt does not fit the model's context window, even with the history compacted:
    /// the client's to fix, answered as invalid params naming the limit.
    TooLarge(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self::Internal(message)
    }
}

async fn run_prompt(
    connection: &Connection,
    session: &Arc<Session>,
    request: &PromptRequest,
    token: &CancellationToken,
    cx: &ConnectionTo<Client>,
) -> Result<AcpStopReason, Failure> {
    // What could not be said before the client had a turn to show it in: the servers
    // that failed to connect.
    for notice in session.state.with(|state| state.take_notices()) {
        updates::send(cx, &session.id, updates::message(&notice));
    }
    let mut new = vec![Message::new(Role::User, prompt::parts(&request.prompt))];
    let text = prompt::text(&request.prompt);
    let skills = session.state.with(|state| state.skills.clone());
    if let Some((skill, input)) = commands::skill(&text, &skills) {
        match commands::run_skill(&skill, input).await {
            Ok(messages) => new = messages,
            Err(error) => {
                updates::send(cx, &session.id, updates::message(&format!("{error}\n")));
                return Ok(AcpStopReason::EndTurn);
            }
        }
    } else if let Some(command) = commands::parse(&text) {
        match commands::run(connection, session, command, token, cx).await? {
            None => return Ok(AcpStopReason::EndTurn),
            // An unknown `/server:prompt` goes to the model as it is.
            Some(messages) if messages.is_empty() => {}
            Some(messages) => new = messages,
        }
    }
    loop {
        let stop = run_turn(connection, session, &new, token, cx).await?;
        if token.is_cancelled() {
            session.steering.take_pending();
            return Ok(AcpStopReason::Cancelled);
        }
        // Steering messages that came after the turn's last tool boundary: the next turn,
        // answered by this prompt (the client's prompt still runs, so nothing is lost).
        let leftover = session.steering.take_pending();
        if leftover.is_empty() || stop != AcpStopReason::EndTurn {
            return Ok(stop);
        }
        tracing::info!(session = %session.id, messages = leftover.len(), "steering messages after the last tool call run as the next turn");
        new = leftover.into_iter().map(|queued| queued.message).collect();
    }
}

/// One agent run of `new` after the session's history, streamed as updates and stored.
async fn run_turn(
    connection: &Connection,
    session: &Arc<Session>,
    new: &[Message],
    token: &CancellationToken,
    cx: &ConnectionTo<Client>,
) -> Result<AcpStopReason, Failure> {
    let mut messages = session.conversation.lock().await.history().to_vec();
    messages.extend(new.iter().cloned());
    let agent = agent::for_turn(connection, session, token, cx).await?;

    let mut events = agent.stream(messages);
    let mut output = None;
    // Streamed text and thoughts go out redacted, the end of a piece that could begin a
    // known secret held until the next piece (or anything else) comes.
    let mut streams = HeldText::default();
    while let Some(event) = events.next().await {
        if !matches!(
            event,
            Ok(AgentEvent::TextDelta(_) | AgentEvent::ReasoningDelta(_))
        ) {
            streams.flush(cx, &session.id);
        }
        match event {
            Ok(AgentEvent::TextDelta(text)) => {
                let text = streams.text.push(&text);
                if !text.is_empty() {
                    updates::send(cx, &session.id, updates::message(&text));
                }
            }
            Ok(AgentEvent::ReasoningDelta(text)) => {
                let text = streams.thought.push(&text);
                if !text.is_empty() {
                    updates::send(cx, &session.id, updates::thought(&text));
                }
            }
            Ok(AgentEvent::ToolCallFinish { id, name, result }) => {
                session.state.with(|state| state.call_finished(&id));
                // An edit keeps the diff it was shown with.
                let keep_content = matches!(name.as_str(), builtins::WRITE | builtins::EDIT);
                updates::send(
                    cx,
                    &session.id,
                    updates::finished(&id, &result, keep_content),
                );
                subagents::call_finished(&connection.children, cx, &session.id, &id, &result);
            }
            Ok(AgentEvent::SubAgent { id, event, .. }) => {
                let finished = |call: &str| session.state.with(|state| state.call_finished(call));
                subagents::forward(
                    &connection.children,
                    cx,
                    &session.id,
                    &id,
                    *event,
                    &finished,
                );
            }
            Ok(AgentEvent::StepFinish(step)) => {
                let window = agent.context_window(&step.model);
                if let Some(update) = updates::usage(&step.model, &step.usage, window) {
                    updates::send(cx, &session.id, update);
                }
            }
            Ok(AgentEvent::Compacted {
                before_tokens,
                after_tokens,
                ..
            }) => {
                tracing::info!(session = %session.id, before_tokens, after_tokens, "history compacted to fit the context window");
            }
            Ok(AgentEvent::Finish(finished)) => output = Some(finished),
            Ok(_) => {}
            Err(error) => {
                if token.is_cancelled() {
                    return Ok(AcpStopReason::Cancelled);
                }
                if let aquaregia::Error::ContextWindowExceeded { .. } = error {
                    return Err(Failure::TooLarge(error.to_string()));
                }
                return Err(error.to_string().into());
            }
        }
    }
    streams.flush(cx, &session.id);
    let output =
        output.ok_or_else(|| Failure::from("the agent ended without an answer".to_owned()))?;
    let stop = match output.stop_reason {
        _ if token.is_cancelled() => AcpStopReason::Cancelled,
        StopReason::Finished => AcpStopReason::EndTurn,
        StopReason::MaxSteps => AcpStopReason::MaxTurnRequests,
        StopReason::Length => AcpStopReason::MaxTokens,
        StopReason::Refusal => AcpStopReason::Refusal,
        _ => AcpStopReason::EndTurn,
    };
    // The conversation finds the turn (after a compaction, too) and saves it.
    let model = session.state.with(|state| state.model.clone());
    let recorded = session
        .conversation
        .lock()
        .await
        .record(new, &output, model.as_deref())
        .await;
    match recorded {
        Ok(recorded) => store::told(cx, &session.id, &recorded),
        Err(error) => tracing::warn!(session = %session.id, %error, "the turn was not stored"),
    }
    Ok(stop)
}

/// A turn's streamed answer and thoughts, each redacted as it streams.
struct HeldText {
    text: StreamRedactor,
    thought: StreamRedactor,
}

impl Default for HeldText {
    fn default() -> Self {
        Self {
            text: StreamRedactor::known_only(),
            thought: StreamRedactor::known_only(),
        }
    }
}

impl HeldText {
    /// Sends what each stream holds back.
    fn flush(&mut self, cx: &ConnectionTo<Client>, session_id: &str) {
        let text = self.text.finish();
        if !text.is_empty() {
            updates::send(cx, session_id, updates::message(&text));
        }
        let thought = self.thought.finish();
        if !thought.is_empty() {
            updates::send(cx, session_id, updates::thought(&thought));
        }
    }
}
