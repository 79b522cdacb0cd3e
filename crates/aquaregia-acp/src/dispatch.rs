//! The typed dispatcher: each client request is parsed into the schema's [`ClientRequest`]
//! and answered with its response type. Only `mcp/message` (whose envelope the SDK does not
//! type for this direction) and the raw `mcpServers` entries (read one by one, so a bad entry
//! does not sink the session) stay JSON.
//!
//! The SDK runs handlers one at a time, so anything that waits (connecting servers, a prompt,
//! a request back to the client) runs in a task spawned on the connection (it ends with it),
//! and the handler returns at once.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentAuthCapabilities, AgentCapabilities, AuthenticateResponse, ClientCapabilities,
    ClientNotification, ClientRequest, CloseSessionResponse, Implementation, InitializeRequest,
    InitializeResponse, LogoutCapabilities, LogoutResponse, McpCapabilities, PromptCapabilities,
    SessionCapabilities, SessionCloseCapabilities, SessionConfigOption, SessionDeleteCapabilities,
    SessionListCapabilities, SessionResumeCapabilities, SetSessionConfigOptionResponse,
    SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Dispatch, Responder};
use agent_client_protocol::{Client, JsonRpcMessage};
use aquaregia::{OutputBudget, SessionStore};
use serde_json::{Value, json};

use crate::auth::ApiKeyAuth;
use crate::config::{self, Models};
use crate::mcp_over_acp::McpOverAcp;
use crate::server::Factory;
use crate::servers::ConnectPlan;
use crate::session::{Mode, Session, lock};
use crate::{store, updates};

/// Everything one ACP connection shares.
pub(crate) struct State {
    pub(crate) factory: Arc<Factory>,
    pub(crate) plan: ConnectPlan,
    pub(crate) sessions: Mutex<HashMap<String, Arc<Session>>>,
    pub(crate) next_session: AtomicU64,
    pub(crate) acp: Arc<McpOverAcp>,
    pub(crate) initialized: AtomicBool,
    pub(crate) client_capabilities: Mutex<ClientCapabilities>,
    pub(crate) auth: Option<ApiKeyAuth>,
    pub(crate) models: Option<Arc<Models>>,
    pub(crate) editor_tools: bool,
    pub(crate) store: Option<Arc<dyn SessionStore>>,
    /// What one tool result may put into the context (`None`: no limit).
    pub(crate) output_budget: Option<OutputBudget>,
    /// The one decision point for tool calls: the user's policy inside the session modes.
    pub(crate) policy: Arc<aquaregia::policy::PermissionPolicy>,
    /// Which MCP servers' hints are believed.
    pub(crate) trust: Arc<crate::trust::Trust>,
}

pub(crate) fn invalid_params(reason: impl Into<String>) -> agent_client_protocol::Error {
    let reason = reason.into();
    agent_client_protocol::Error::invalid_params().data(json!({"reason": reason}))
}

/// Runs `task` on the connection: it ends when the connection does.
fn spawn(cx: &ConnectionTo<Client>, task: impl Future<Output = ()> + Send + 'static) {
    if let Err(error) = cx.spawn(async move {
        task.await;
        Ok(())
    }) {
        tracing::debug!(error = %error.message, "the connection is closing; task not started");
    }
}

impl State {
    pub(crate) fn new(
        factory: Arc<Factory>,
        plan: ConnectPlan,
        auth: Option<ApiKeyAuth>,
        models: Option<Arc<Models>>,
        editor_tools: bool,
        store: Option<Arc<dyn SessionStore>>,
        output_budget: Option<OutputBudget>,
    ) -> Self {
        Self {
            output_budget,
            editor_tools,
            store,
            factory,
            plan,
            auth,
            models,
            sessions: Mutex::default(),
            next_session: AtomicU64::new(1),
            acp: Arc::default(),
            initialized: AtomicBool::new(false),
            client_capabilities: Mutex::default(),
            policy: Arc::new(aquaregia::policy::PermissionPolicy::new().with_session_modes()),
            trust: Arc::default(),
        }
    }

    pub(crate) fn dispatch(self: &Arc<Self>, message: Dispatch, cx: &ConnectionTo<Client>) {
        match message {
            Dispatch::Request(request, responder) => {
                let (method, params) = request.into_parts();
                self.request(&method, params, responder, cx);
            }
            Dispatch::Notification(notification) => {
                let (method, params) = notification.into_parts();
                self.notification(&method, &params);
            }
            Dispatch::Response(result, router) => {
                let _ = router.route_with_result(result);
            }
        }
    }

    fn request(
        self: &Arc<Self>,
        method: &str,
        mut params: Value,
        responder: Responder,
        cx: &ConnectionTo<Client>,
    ) {
        if method == "mcp/message" {
            self.acp.request(&params, responder);
            return;
        }
        // Read one by one below; the typed request sees an empty list.
        let servers = match take_servers(method, &mut params) {
            Ok(servers) => servers,
            Err(error) => {
                let _ = responder.respond_with_error(error);
                return;
            }
        };
        let request = match ClientRequest::parse_message(method, &params) {
            Ok(request) => request,
            Err(error) => {
                let _ = responder.respond_with_error(error);
                return;
            }
        };
        let initialized = self.initialized.load(Ordering::Acquire);
        match request {
            ClientRequest::InitializeRequest(request) => {
                *lock(&self.client_capabilities) = request.client_capabilities.clone();
                self.initialized.store(true, Ordering::Release);
                let _ = responder.cast().respond(self.initialize(&request));
            }
            _ if !initialized => {
                let _ = responder.respond_with_error(
                    agent_client_protocol::Error::invalid_request()
                        .data(json!({"reason": "`initialize` must come first"})),
                );
            }
            ClientRequest::AuthenticateRequest(request) => {
                let result = match &self.auth {
                    Some(auth) => auth.authenticate(&request).map_err(|error| {
                        tracing::info!(method = %request.method_id, %error, "authenticate failed");
                        invalid_params(error.to_string())
                    }),
                    None => Ok(()),
                };
                let _ = responder
                    .cast()
                    .respond_with_result(result.map(|()| AuthenticateResponse::new()));
            }
            ClientRequest::LogoutRequest(_) => {
                let result = match &self.auth {
                    Some(auth) => auth.logout().map_err(|error| {
                        agent_client_protocol::Error::internal_error()
                            .data(json!({"reason": error.to_string()}))
                    }),
                    None => Ok(()),
                };
                let _ = responder
                    .cast()
                    .respond_with_result(result.map(|()| LogoutResponse::new()));
            }
            ClientRequest::NewSessionRequest(_)
            | ClientRequest::LoadSessionRequest(_)
            | ClientRequest::ResumeSessionRequest(_)
            | ClientRequest::PromptRequest(_)
                if self
                    .auth
                    .as_ref()
                    .is_some_and(|auth| !auth.is_authenticated()) =>
            {
                let _ = responder.respond_with_error(agent_client_protocol::Error::auth_required());
            }
            ClientRequest::NewSessionRequest(request) => {
                let state = self.clone();
                let task_cx = cx.clone();
                spawn(cx, async move {
                    state
                        .new_session(request, servers, responder.cast(), task_cx)
                        .await;
                });
            }
            ClientRequest::LoadSessionRequest(request) if self.store.is_some() => {
                let state = self.clone();
                let task_cx = cx.clone();
                spawn(cx, async move {
                    state
                        .load_session(request, servers, responder.cast(), task_cx)
                        .await;
                });
            }
            ClientRequest::ResumeSessionRequest(request) if self.store.is_some() => {
                let state = self.clone();
                let task_cx = cx.clone();
                spawn(cx, async move {
                    state
                        .resume_session(request, servers, responder.cast(), task_cx)
                        .await;
                });
            }
            ClientRequest::DeleteSessionRequest(request) if self.store.is_some() => {
                let state = self.clone();
                let responder = responder.cast();
                spawn(cx, async move {
                    let id = request.session_id.0.to_string();
                    let _ = responder.respond_with_result(state.delete_session(id).await);
                });
            }
            ClientRequest::ListSessionsRequest(request) => {
                let Some(store) = self.store.clone() else {
                    let _ = responder
                        .respond_with_error(agent_client_protocol::Error::method_not_found());
                    return;
                };
                let responder = responder.cast();
                spawn(cx, async move {
                    let _ = responder.respond_with_result(store::list(&*store, request).await);
                });
            }
            ClientRequest::PromptRequest(request) => {
                let session = match self.session(&request.session_id.0) {
                    Ok(session) => session,
                    Err(error) => {
                        let _ = responder.respond_with_error(error);
                        return;
                    }
                };
                // The prompt is registered before the next message is read, so a
                // `session/cancel` right behind it finds it.
                let Some(token) = session.begin_prompt() else {
                    let _ = responder.respond_with_error(invalid_params(
                        "a prompt is already running in this session",
                    ));
                    return;
                };
                let state = self.clone();
                let task_cx = cx.clone();
                spawn(cx, async move {
                    state
                        .prompt(session, request, token, responder.cast(), task_cx)
                        .await;
                });
            }
            ClientRequest::SetSessionModeRequest(request) => {
                let result = self.session(&request.session_id.0).and_then(|session| {
                    self.set_mode(&session, &request.mode_id.0, cx)?;
                    updates::send(
                        cx,
                        &session.id,
                        updates::config_options(self.config_options(&session)),
                    );
                    Ok(SetSessionModeResponse::new())
                });
                let _ = responder.cast().respond_with_result(result);
            }
            ClientRequest::SetSessionConfigOptionRequest(request) => {
                let result = self.session(&request.session_id.0).and_then(|session| {
                    let value = request
                        .value
                        .as_value_id()
                        .map(|value| value.0.to_string())
                        .ok_or_else(|| invalid_params("the value must be a value id"))?;
                    match &*request.config_id.0 {
                        config::MODE => self.set_mode(&session, &value, cx)?,
                        config::MODEL if self.models.is_some() => {
                            if !lock(&session.models).contains(&value) {
                                return Err(invalid_params(format!("unknown model `{value}`")));
                            }
                            tracing::info!(session = %session.id, model = %value, "model switched");
                            session.set_model(value);
                            self.remember(&session, cx);
                        }
                        other => {
                            return Err(invalid_params(format!("unknown config option `{other}`")));
                        }
                    }
                    Ok(SetSessionConfigOptionResponse::new(
                        self.config_options(&session),
                    ))
                });
                let _ = responder.cast().respond_with_result(result);
            }
            ClientRequest::CloseSessionRequest(request) => {
                match self.session(&request.session_id.0) {
                    Ok(session) => {
                        lock(&self.sessions).remove(&session.id);
                        let responder = responder.cast();
                        spawn(cx, async move {
                            session.close().await;
                            let _ = responder.respond(CloseSessionResponse::new());
                        });
                    }
                    Err(error) => {
                        let _ = responder.respond_with_error(error);
                    }
                }
            }
            _ => {
                let _ =
                    responder.respond_with_error(agent_client_protocol::Error::method_not_found());
            }
        }
    }

    fn notification(&self, method: &str, params: &Value) {
        if method == "mcp/message" {
            self.acp.notification(params);
            return;
        }
        match ClientNotification::parse_message(method, params) {
            Ok(ClientNotification::CancelNotification(cancel)) => {
                if let Ok(session) = self.session(&cancel.session_id.0) {
                    tracing::info!(session = %session.id, "session/cancel");
                    session.cancel();
                }
            }
            // Unknown notifications, custom `_` ones included, are ignored as the spec says.
            Ok(_) => {}
            Err(error) => tracing::debug!(method, error = %error.message, "notification ignored"),
        }
    }

    /// Switches the mode and tells the client (`current_mode_update`).
    fn set_mode(
        &self,
        session: &Session,
        id: &str,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), agent_client_protocol::Error> {
        let mode = Mode::parse(id).ok_or_else(|| invalid_params(format!("unknown mode `{id}`")))?;
        session.set_mode(mode);
        updates::send(cx, &session.id, updates::current_mode(mode));
        self.remember(session, cx);
        Ok(())
    }

    /// Keeps the session's mode and model in the store, for `session/load`.
    pub(crate) fn remember(&self, session: &Session, cx: &ConnectionTo<Client>) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let Ok(id) = aquaregia::SessionId::new(session.id.as_str()) else {
            return;
        };
        let mut update = aquaregia::SessionUpdate::new().mode(session.mode().id());
        if let Some(model) = session.model() {
            update = update.model(model);
        }
        spawn(cx, async move {
            if let Err(error) = store.update(&id, update).await {
                tracing::warn!(session = %id, %error, "the session's settings were not stored");
            }
        });
    }

    pub(crate) fn config_options(&self, session: &Session) -> Vec<SessionConfigOption> {
        let models = lock(&session.models).clone();
        config::options(
            session,
            self.models
                .as_deref()
                .map(|catalog| (catalog, models.as_slice())),
        )
    }

    fn session(&self, id: &str) -> Result<Arc<Session>, agent_client_protocol::Error> {
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or_else(|| invalid_params(format!("unknown session `{id}`")))
    }

    /// The `initialize` answer: protocol 1, what this agent supports.
    fn initialize(&self, request: &InitializeRequest) -> InitializeResponse {
        let client = request.client_info.as_ref().map(|info| info.name.as_str());
        tracing::info!(
            requested = request.protocol_version.as_u16(),
            ?client,
            "initialize"
        );
        let mut capabilities = AgentCapabilities::new()
            .prompt_capabilities(
                PromptCapabilities::new()
                    .image(true)
                    .audio(false)
                    .embedded_context(true),
            )
            .mcp_capabilities(McpCapabilities::new().http(true).sse(true).acp(true))
            .load_session(self.store.is_some());
        let mut sessions = SessionCapabilities::new().close(SessionCloseCapabilities::new());
        if self.store.is_some() {
            sessions = sessions
                .list(SessionListCapabilities::new())
                .resume(SessionResumeCapabilities::new())
                .delete(SessionDeleteCapabilities::new());
        }
        capabilities = capabilities.session_capabilities(sessions);
        let mut response = InitializeResponse::new(ProtocolVersion::V1);
        if let Some(auth) = &self.auth {
            capabilities =
                capabilities.auth(AgentAuthCapabilities::new().logout(LogoutCapabilities::new()));
            response =
                response.auth_methods(auth.acp_methods(request.client_capabilities.auth.terminal));
        }
        response
            .agent_capabilities(capabilities)
            .agent_info(Implementation::new("aquaregia", env!("CARGO_PKG_VERSION")))
    }

    pub(crate) async fn close_all(&self) {
        let sessions: Vec<_> = lock(&self.sessions)
            .drain()
            .map(|(_, session)| session)
            .collect();
        futures::future::join_all(sessions.iter().map(|session| session.close())).await;
    }
}

/// Takes the raw `mcpServers` out of a session request (replacing them with `[]`), to be read
/// entry by entry.
fn take_servers(
    method: &str,
    params: &mut Value,
) -> Result<Vec<Value>, agent_client_protocol::Error> {
    if !matches!(method, "session/new" | "session/load" | "session/resume") {
        return Ok(Vec::new());
    }
    let Some(object) = params.as_object_mut() else {
        return Ok(Vec::new());
    };
    match object.insert("mcpServers".into(), json!([])) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(entries)) => Ok(entries),
        Some(_) => Err(invalid_params("`mcpServers` must be an array")),
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State").finish_non_exhaustive()
    }
}
