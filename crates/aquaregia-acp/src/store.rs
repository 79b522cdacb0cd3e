//! Persistent sessions on the SDK's [`SessionStore`]: each completed turn is appended,
//! `session/list` pages through the store, `session/load` replays a stored session as
//! `session/update`s and continues it.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use std::collections::HashMap;

use agent_client_protocol::v1::schema::{
    ContentChunk, ListSessionsRequest, ListSessionsResponse, SessionInfo, SessionInfoUpdate,
    SessionUpdate,
};
use aquaregia::{
    ContentPart, Message, Role, SessionId, SessionMeta, SessionQuery, SessionStore, SessionTurn,
    StoredSession, Tool, Usage,
};
use serde::{Deserialize, Serialize};

use crate::rpc::invalid_params;
use crate::{builtins, updates};

/// A store failure as an ACP error.
pub(crate) fn acp_error(error: &aquaregia::SessionError) -> agent_client_protocol::Error {
    match error {
        aquaregia::SessionError::NotFound { .. } | aquaregia::SessionError::InvalidId { .. } => {
            invalid_params(error.to_string())
        }
        other => agent_client_protocol::Error::internal_error()
            .data(serde_json::json!({"reason": other.to_string()})),
    }
}

/// The store's id for an ACP session id.
pub(crate) fn id(session_id: &str) -> Result<SessionId, agent_client_protocol::Error> {
    SessionId::new(session_id).map_err(|error| acp_error(&error))
}

/// `session/list`: the store's page, as ACP session infos.
pub(crate) async fn list(
    store: &dyn SessionStore,
    request: ListSessionsRequest,
) -> Result<ListSessionsResponse, agent_client_protocol::Error> {
    let mut query = SessionQuery::new();
    if let Some(cwd) = request.cwd {
        query = query.cwd(cwd);
    }
    if let Some(cursor) = request.cursor {
        query = query.cursor(cursor);
    }
    let page = store.list(query).await.map_err(|error| acp_error(&error))?;
    let sessions = page.sessions.iter().map(info).collect();
    Ok(ListSessionsResponse::new(sessions).next_cursor(page.next_cursor))
}

fn info(meta: &SessionMeta) -> SessionInfo {
    SessionInfo::new(meta.id.to_string(), meta.cwd.clone())
        .title(meta.title.clone())
        .updated_at(meta.updated_at.to_string())
}

/// The metadata entry holding a session's [`Base`].
const BASE: &str = "aquaregia.acp.base";

/// What the model's history starts from instead of the first `turns` stored turns: their
/// compaction (a summary and the newest messages), or nothing after `/clear`. The turns stay
/// stored, so `session/load` still replays the whole conversation to the user.
#[derive(Debug, Serialize, Deserialize)]
struct Base {
    turns: u64,
    messages: Vec<Message>,
}

/// The history the model continues from: the stored base, then the turns after it.
pub(crate) fn history(stored: &StoredSession) -> Vec<Message> {
    let base = stored
        .meta
        .metadata
        .get(BASE)
        .and_then(|base| serde_json::from_value::<Base>(base.clone()).ok())
        .and_then(|base| Some((usize::try_from(base.turns).ok()?, base.messages)))
        .filter(|(turns, _)| *turns <= stored.turns.len());
    let Some((covered, mut messages)) = base else {
        return stored.messages();
    };
    let later = stored.turns.get(covered..).unwrap_or_default();
    messages.extend(later.iter().flat_map(|turn| turn.messages.iter().cloned()));
    messages
}

/// Stores `messages` as the history that replaces the first `turns` turns.
pub(crate) async fn save_base(
    store: &dyn SessionStore,
    session_id: &str,
    turns: u64,
    messages: &[Message],
) {
    let Ok(id) = SessionId::new(session_id) else {
        return;
    };
    let base = Base {
        turns,
        messages: messages.to_vec(),
    };
    let saved = match serde_json::to_value(&base) {
        Ok(value) => store
            .update(&id, aquaregia::SessionUpdate::new().metadata(BASE, value))
            .await
            .map(|_| ())
            .map_err(|error| error.to_string()),
        Err(error) => Err(error.to_string()),
    };
    if let Err(error) = saved {
        tracing::warn!(session = session_id, %error, "the compacted history was not stored");
    }
}

/// A turn stored by [`append`].
#[derive(Debug)]
pub(crate) struct Appended {
    /// How many turns the store now holds.
    pub(crate) turns: u64,
    /// When another process had changed the session: the latest history (theirs, then this
    /// turn), which the session continues from instead of its own.
    pub(crate) reloaded: Option<Vec<Message>>,
}

/// How many times [`append`] tries to store a turn: after each conflict it reloads the session
/// and tries on top of it, so only a session other processes keep changing that fast loses
/// the turn (with a warning).
const SAVE_ATTEMPTS: usize = 5;

/// Appends a completed turn on top of the `expected` turns this session has seen (the stored
/// count, [`aquaregia::SessionMeta::turns`]); when it gave the session its title, tells the
/// client. When another process changed the session meanwhile, the latest state is loaded, the
/// turn is appended after it, and the client is told in an agent message. Returns `None` when
/// the turn was not stored.
pub(crate) async fn append(
    store: &dyn SessionStore,
    cx: &ConnectionTo<Client>,
    session_id: &str,
    messages: Vec<Message>,
    usage: Usage,
    expected: u64,
) -> Option<Appended> {
    let id = SessionId::new(session_id).ok()?;
    let turn = SessionTurn::new(messages).usage(usage);
    let mut reloaded = None;
    let mut saved = store.append_turn_checked(&id, turn.clone(), expected).await;
    let mut attempts = 1;
    while let Err(aquaregia::SessionError::Conflict { .. }) = &saved
        && attempts < SAVE_ATTEMPTS
    {
        attempts += 1;
        saved = match store.load(&id).await {
            Ok(latest) => {
                let mut history = history(&latest);
                history.extend(turn.messages.iter().cloned());
                reloaded = Some(history);
                // The stored count, which may include turns that no longer decode.
                store
                    .append_turn_checked(&id, turn.clone(), latest.meta.turns)
                    .await
            }
            Err(error) => Err(error),
        };
    }
    if let (Some(_), Ok(meta)) = (&reloaded, &saved) {
        let theirs = meta.turns.saturating_sub(expected).saturating_sub(1);
        updates::send(
            cx,
            session_id,
            updates::message(&format!(
                "\n\n(This session was changed by another process: its {theirs} new \
                 turn(s) were loaded, and this turn was saved after them.)"
            )),
        );
    }
    match saved {
        Ok(meta) => {
            if meta.turns == 1 {
                let update = SessionInfoUpdate::new()
                    .title(meta.title.clone())
                    .updated_at(meta.updated_at.to_string());
                updates::send(cx, session_id, SessionUpdate::SessionInfoUpdate(update));
            }
            Some(Appended {
                turns: meta.turns,
                reloaded,
            })
        }
        Err(error) => {
            tracing::warn!(session = session_id, %error, "the turn was not stored");
            None
        }
    }
}

/// Replays stored messages as the updates a client saw live: user and agent text, thoughts,
/// tool calls with the title and kind they had (from the session's `tools`), their final
/// status (a refusal `failed`, as live), content and raw output, and the plans `update_plan`
/// showed.
pub(crate) fn replay(
    cx: &ConnectionTo<Client>,
    session_id: &str,
    messages: &[Message],
    tools: &[Tool],
) {
    let mut calls: HashMap<&str, &aquaregia::ToolCall> = HashMap::new();
    let send = |update| updates::send(cx, session_id, update);
    for message in messages {
        for part in &message.content {
            match (message.role, part) {
                (Role::User, ContentPart::Text { text }) => send(SessionUpdate::UserMessageChunk(
                    ContentChunk::new(updates::text_block(text)),
                )),
                (Role::Assistant, ContentPart::Text { text }) => send(updates::message(text)),
                (Role::Assistant, ContentPart::Reasoning(reasoning))
                    if !reasoning.text.is_empty() =>
                {
                    send(updates::thought(&reasoning.text));
                }
                (_, ContentPart::ToolCall(call)) => {
                    calls.insert(&call.id, call);
                    let tool = tools.iter().find(|tool| tool.name() == call.name);
                    let title = updates::title(&call.name, tool, &call.arguments);
                    let kind = updates::kind(&call.name, tool);
                    send(updates::tool_call(
                        &call.id,
                        &title,
                        kind,
                        &call.arguments,
                        (Vec::new(), Vec::new()),
                    ));
                }
                (_, ContentPart::ToolResult(result)) => {
                    let text = result.output.as_text().unwrap_or_default();
                    let outcome = if result.is_error {
                        updates::Outcome::Failed(result.output.to_text())
                    } else if text.starts_with(updates::DENIED_PREFIX) {
                        updates::Outcome::Failed(text.to_owned())
                    } else {
                        updates::Outcome::Completed(&result.output)
                    };
                    let call = calls.get(result.call_id.as_str());
                    if let (Some(call), updates::Outcome::Completed(_)) = (call, &outcome)
                        && call.name == builtins::UPDATE_PLAN
                        && let Ok(plan) = updates::plan(&call.arguments)
                    {
                        send(SessionUpdate::Plan(plan));
                    }
                    send(updates::finished_as(&result.call_id, &outcome, false));
                }
                _ => {}
            }
        }
    }
}
