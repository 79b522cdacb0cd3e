//! MCP servers' questions to the user (elicitation, form and URL modes), bridged to the
//! client: `elicitation/create` when the client advertises the mode; else, for the simple
//! cases (a URL to visit, a form whose every field is optional or has a default), a
//! `session/request_permission` question; else declined. The answer goes back to the server.
//!
//! A question that comes while one of the server's tools runs is tied to that tool call
//! (`toolCallId`); cancelling the prompt cancels the question. When a server says a URL
//! question the client was shown is done (`notifications/elicitation/complete`), the client
//! is told with `elicitation/complete`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, CompleteElicitationNotification, CreateElicitationRequest,
    ElicitationAction, ElicitationCapabilities, ElicitationFormMode, ElicitationSchema,
    ElicitationSessionScope, ElicitationUrlMode, PermissionOption, PermissionOptionId,
    PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest, ToolCallId,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use aquaregia_mcp::{ElicitationComplete, ElicitationRequest, ElicitationResponse};
use serde_json::{Map, Value};

use crate::rpc::CancelOnDrop;
use crate::state::SharedState;
use crate::updates;

/// One session's bridge; every MCP server of the session asks through it.
pub(crate) struct Elicitation {
    cx: ConnectionTo<Client>,
    session_id: String,
    capabilities: Option<ElicitationCapabilities>,
    /// The session's state: its running tool calls and prompt, the URL questions shown.
    state: SharedState,
    /// For the ids of questions asked outside any tool call.
    asked: AtomicU64,
}

/// The user's answer, before it is turned into MCP's.
enum Answer {
    Accept(Option<Value>),
    Decline,
    Cancel,
}

impl From<Answer> for ElicitationResponse {
    fn from(answer: Answer) -> Self {
        match answer {
            Answer::Accept(content) => ElicitationResponse::Accept(content),
            Answer::Decline => ElicitationResponse::Decline,
            Answer::Cancel => ElicitationResponse::Cancel,
        }
    }
}

impl Elicitation {
    pub(crate) fn new(
        cx: ConnectionTo<Client>,
        session_id: String,
        capabilities: &ClientCapabilities,
        state: SharedState,
    ) -> Arc<Self> {
        Arc::new(Self {
            cx,
            session_id,
            capabilities: capabilities.elicitation.clone(),
            state,
            asked: AtomicU64::new(1),
        })
    }

    /// A server says a URL question is done: the client is told if it was shown the question.
    pub(crate) fn completed(&self, complete: &ElicitationComplete) {
        let shown = self
            .state
            .with(|state| state.url_completed(&complete.server, &complete.elicitation_id));
        if !shown {
            tracing::debug!(server = %complete.server, id = %complete.elicitation_id, "completion of a URL question the client was not shown");
            return;
        }
        let notification = CompleteElicitationNotification::new(complete.elicitation_id.clone());
        if let Err(error) = self.cx.send_notification(notification) {
            tracing::debug!(error = %error.message, "cannot send elicitation/complete");
        }
    }

    /// Asks the user on behalf of a server; a cancelled prompt cancels the question.
    pub(crate) async fn answer(
        self: Arc<Self>,
        request: ElicitationRequest,
    ) -> ElicitationResponse {
        let server = match &request {
            ElicitationRequest::Form { server, .. } | ElicitationRequest::Url { server, .. } => {
                server.clone()
            }
            _ => String::new(),
        };
        let (tool_call, token) = self
            .state
            .with(|state| (state.running_call_of(&server), state.prompt_token()));
        let ask = self.ask(request, tool_call);
        let answer = match token {
            Some(token) => tokio::select! {
                answer = ask => answer,
                () = token.cancelled() => Answer::Cancel,
            },
            None => ask.await,
        };
        answer.into()
    }

    async fn ask(&self, request: ElicitationRequest, tool_call: Option<String>) -> Answer {
        let capabilities = self.capabilities.clone().unwrap_or_default();
        let mut scope = ElicitationSessionScope::new(self.session_id.clone());
        if let Some(id) = &tool_call {
            scope = scope.tool_call_id(ToolCallId::new(id.as_str()));
        }
        match request {
            ElicitationRequest::Form {
                server,
                message,
                schema,
            } => {
                tracing::info!(session = %self.session_id, %server, "elicitation (form)");
                if capabilities.supports_form() {
                    let schema = match serde_json::from_value::<ElicitationSchema>(schema) {
                        Ok(schema) => schema,
                        Err(error) => {
                            tracing::warn!(%server, %error, "declining a form the client cannot show");
                            return Answer::Decline;
                        }
                    };
                    let mode = ElicitationFormMode::new(scope, schema);
                    self.create(CreateElicitationRequest::new(
                        mode,
                        asking(&server, &message),
                    ))
                    .await
                } else if let Some(defaults) = defaults(&schema) {
                    let text = format!("{}{}", message, describe_defaults(&defaults));
                    let answer = self.confirm(&server, &message, &text, tool_call).await;
                    match answer {
                        Answer::Accept(_) => Answer::Accept(Some(Value::Object(defaults))),
                        other => other,
                    }
                } else {
                    tracing::info!(%server, "declining a form: the client has no elicitation and the form needs answers");
                    Answer::Decline
                }
            }
            ElicitationRequest::Url {
                server,
                message,
                url,
                elicitation_id,
            } => {
                tracing::info!(session = %self.session_id, %server, "elicitation (URL)");
                if capabilities.supports_url() {
                    let (shown_server, shown_id) = (server.clone(), elicitation_id.clone());
                    self.state
                        .with(|state| state.url_shown(shown_server, shown_id));
                    let mode = ElicitationUrlMode::new(scope, elicitation_id, url);
                    self.create(CreateElicitationRequest::new(
                        mode,
                        asking(&server, &message),
                    ))
                    .await
                } else {
                    let text = format!("{message}\n\nOpen: {url}");
                    match self.confirm(&server, &message, &text, tool_call).await {
                        Answer::Accept(_) => Answer::Accept(None),
                        other => other,
                    }
                }
            }
            _ => Answer::Decline,
        }
    }

    /// `elicitation/create`.
    async fn create(&self, request: CreateElicitationRequest) -> Answer {
        let sent = self.cx.send_request(updates::redacted(request));
        let mut guard = CancelOnDrop(Some(sent.cancellation_handle()));
        let reply = sent.block_task().await;
        guard.0 = None;
        match reply {
            Ok(response) => match response.action {
                ElicitationAction::Accept(accepted) => Answer::Accept(
                    accepted
                        .content
                        .and_then(|content| serde_json::to_value(content).ok()),
                ),
                ElicitationAction::Cancel => Answer::Cancel,
                ElicitationAction::Decline => Answer::Decline,
                other => {
                    tracing::warn!(action = ?other, "an unknown elicitation answer, taken as a decline");
                    Answer::Decline
                }
            },
            Err(error) => {
                tracing::warn!(error = %error.message, "elicitation/create failed; declining");
                Answer::Decline
            }
        }
    }

    /// The fallback: a permission question, "Accept" or "Decline".
    async fn confirm(
        &self,
        server: &str,
        message: &str,
        text: &str,
        tool_call: Option<String>,
    ) -> Answer {
        let question = asking(server, message);
        // On the tool call that asked, only the question is added (its title and status stay
        // the call's); a question outside any call gets one of its own.
        let (id, fields) = match tool_call {
            Some(id) => (
                id,
                ToolCallUpdateFields::new().content(vec![
                    updates::text_block(&format!("{question}\n\n{text}")).into(),
                ]),
            ),
            None => (
                format!("elicitation-{}", self.asked.fetch_add(1, Ordering::Relaxed)),
                ToolCallUpdateFields::new()
                    .title(question)
                    .kind(ToolKind::Other)
                    .status(ToolCallStatus::Pending)
                    .content(vec![updates::text_block(text).into()]),
            ),
        };
        let option = |id: &'static str, name: &'static str, kind| {
            PermissionOption::new(PermissionOptionId::new(id), name, kind)
        };
        let request = RequestPermissionRequest::new(
            self.session_id.clone(),
            ToolCallUpdate::new(id, fields),
            vec![
                option("accept", "Accept", PermissionOptionKind::AllowOnce),
                option("decline", "Decline", PermissionOptionKind::RejectOnce),
            ],
        );
        let sent = self.cx.send_request(updates::redacted(request));
        let mut guard = CancelOnDrop(Some(sent.cancellation_handle()));
        let reply = sent.block_task().await;
        guard.0 = None;
        match reply {
            Ok(response) => match response.outcome {
                RequestPermissionOutcome::Selected(selected)
                    if &*selected.option_id.0 == "accept" =>
                {
                    Answer::Accept(None)
                }
                RequestPermissionOutcome::Selected(_) => Answer::Decline,
                _ => Answer::Cancel,
            },
            Err(error) => {
                tracing::warn!(error = %error.message, "session/request_permission failed; declining");
                Answer::Decline
            }
        }
    }
}

/// The question as the user sees it.
fn asking(server: &str, message: &str) -> String {
    format!("MCP server `{server}` asks: {message}")
}

/// A form the user can accept with one click: every field has a default or is optional.
/// The defaults, by field; `None` when a required field has none.
fn defaults(schema: &Value) -> Option<Map<String, Value>> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut values = Map::new();
    for (name, property) in properties.into_iter().flatten() {
        match property.get("default") {
            Some(default) => {
                values.insert(name.clone(), default.clone());
            }
            None if required.contains(&name.as_str()) => return None,
            None => {}
        }
    }
    // A required name the schema does not describe cannot be answered either.
    let described = |name: &&str| properties.is_some_and(|p| p.contains_key(*name));
    required.iter().all(described).then_some(values)
}

fn describe_defaults(defaults: &Map<String, Value>) -> String {
    if defaults.is_empty() {
        return String::new();
    }
    let fields: Vec<String> = defaults
        .iter()
        .map(|(name, value)| match value {
            Value::String(text) => format!("{name}: {text}"),
            other => format!("{name}: {other}"),
        })
        .collect();
    format!("\n\nAccepting answers: {}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_forms_answerable_by_their_defaults_are_simple() {
        let schema = json!({"type": "object", "properties": {
            "confirm": {"type": "boolean", "default": true},
            "note": {"type": "string"}
        }, "required": ["confirm"]});
        assert_eq!(
            defaults(&schema),
            Some(
                json!({"confirm": true})
                    .as_object()
                    .cloned()
                    .unwrap_or_default()
            )
        );
        let needs_a_name = json!({"type": "object",
            "properties": {"name": {"type": "string"}}, "required": ["name"]});
        assert_eq!(defaults(&needs_a_name), None);
        let undescribed = json!({"type": "object", "properties": {}, "required": ["x"]});
        assert_eq!(defaults(&undescribed), None);
        assert_eq!(defaults(&json!({"type": "object"})), Some(Map::new()));
    }
}
