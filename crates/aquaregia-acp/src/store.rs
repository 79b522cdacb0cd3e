//! Persistent sessions on the SDK's [`SessionStore`] (each session's [`aquaregia::Conversation`]
//! saves its turns): `session/list` pages through the store, `session/load` replays a stored
//! session as `session/update`s, and the client is told what a saved turn changed.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    self as acp, ContentChunk, ListSessionsRequest, ListSessionsResponse, SessionInfo,
    SessionInfoUpdate, SessionUpdate, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use aquaregia::{
    ContentPart, Message, Recorded, Role, SessionId, SessionMeta, SessionQuery, SessionStore,
};

use crate::rpc::invalid_params;
use crate::updates;

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

/// Replays stored messages as the updates a client saw live: user and agent text, and tool
/// calls with their final status and content.
pub(crate) fn replay(cx: &ConnectionTo<Client>, session_id: &str, messages: &[Message]) {
    for message in messages {
        for part in &message.content {
            let update = match (message.role, part) {
                (Role::User, ContentPart::Text { text }) => {
                    SessionUpdate::UserMessageChunk(ContentChunk::new(updates::text_block(text)))
                }
                (Role::Assistant, ContentPart::Text { text }) => updates::message(text),
                (_, ContentPart::ToolCall(call)) => SessionUpdate::ToolCall(
                    acp::ToolCall::new(call.id.clone(), call.name.clone())
                        .kind(updates::kind(&call.name, None))
                        .status(ToolCallStatus::InProgress)
                        .raw_input(call.arguments.clone()),
                ),
                (_, ContentPart::ToolResult(result)) => {
                    let status = if result.is_error {
                        ToolCallStatus::Failed
                    } else {
                        ToolCallStatus::Completed
                    };
                    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        result.call_id.clone(),
                        ToolCallUpdateFields::new()
                            .status(status)
                            .content(updates::tool_content(&result.output))
                            .raw_output(result.output.to_value()),
                    ))
                }
                _ => continue,
            };
            updates::send(cx, session_id, update);
        }
    }
}
