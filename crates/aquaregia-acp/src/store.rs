//! Persistent sessions on the SDK's [`SessionStore`] (each session's [`aquaregia::Conversation`]
//! saves its turns): `session/list` pages through the store, `session/load` replays a stored
//! session as `session/update`s, and the client is told what a saved turn changed.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use std::collections::HashMap;

use agent_client_protocol::v1::schema::{
    ContentChunk, ListSessionsRequest, ListSessionsResponse, SessionInfo, SessionInfoUpdate,
    SessionUpdate,
};
use aquaregia::{
    ContentPart, Message, Recorded, Role, SessionId, SessionMeta, SessionQuery, SessionStore, Tool,
};

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

/// Tells the client what saving a turn changed: the session's title after its first turn,
/// and that turns another process added were loaded (this one was saved after them).
pub(crate) fn told(cx: &ConnectionTo<Client>, session_id: &str, recorded: &Recorded) {
    if recorded.merged_turns > 0 {
        updates::send(
            cx,
            session_id,
            updates::message(&format!(
                "\n\n(This session was changed by another process: its {} new turn(s) were \
                 loaded, and this turn was saved after them.)",
                recorded.merged_turns
            )),
        );
    }
    if let Some(meta) = recorded.meta.as_ref().filter(|meta| meta.turns == 1) {
        let update = SessionInfoUpdate::new()
            .title(meta.title.clone())
            .updated_at(meta.updated_at.to_string());
        updates::send(cx, session_id, SessionUpdate::SessionInfoUpdate(update));
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
