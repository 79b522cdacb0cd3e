//! The connection family: `initialize` (what this agent supports, and the client's
//! capabilities remembered) and the API-key `authenticate` and `logout` (see
//! [`crate::auth`]).

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentAuthCapabilities, AgentCapabilities, AuthenticateRequest, AuthenticateResponse,
    Implementation, InitializeRequest, InitializeResponse, LogoutCapabilities, LogoutResponse,
    McpCapabilities, PromptCapabilities, SessionCapabilities, SessionCloseCapabilities,
    SessionDeleteCapabilities, SessionForkCapabilities, SessionListCapabilities,
    SessionResumeCapabilities,
};

use crate::auth;
use crate::connection::Connection;

/// `initialize`: protocol 1 and what this agent supports; the client's capabilities are kept
/// for its sessions.
pub(crate) fn initialize(
    connection: &Connection,
    request: &InitializeRequest,
) -> InitializeResponse {
    connection.initialize(request.client_capabilities.clone());
    let settings = &connection.settings;
    let client = request.client_info.as_ref().map(|info| info.name.as_str());
    tracing::info!(
        requested = request.protocol_version.as_u16(),
        ?client,
        "initialize"
    );
    let has_store = settings.store.is_some();
    let mut capabilities = AgentCapabilities::new()
        .prompt_capabilities(
            PromptCapabilities::new()
                .image(true)
                .audio(false)
                .embedded_context(true),
        )
        .mcp_capabilities(McpCapabilities::new().http(true).sse(true).acp(true))
        .load_session(has_store);
    let mut sessions = SessionCapabilities::new()
        .close(SessionCloseCapabilities::new())
        .fork(SessionForkCapabilities::new());
    if has_store {
        sessions = sessions
            .list(SessionListCapabilities::new())
            .resume(SessionResumeCapabilities::new())
            .delete(SessionDeleteCapabilities::new());
    }
    capabilities = capabilities.session_capabilities(sessions);
    let mut response = InitializeResponse::new(ProtocolVersion::V1);
    if let Some(auth) = &settings.auth {
        capabilities =
            capabilities.auth(AgentAuthCapabilities::new().logout(LogoutCapabilities::new()));
        response =
            response.auth_methods(auth.acp_methods(request.client_capabilities.auth.terminal));
    }
    // Where claude-agent-acp and codex-acp advertise `_session/steering`.
    let mut meta = serde_json::Map::new();
    meta.insert("steering".into(), crate::steering::capability());
    response
        .meta(meta)
        .agent_capabilities(capabilities)
        // The ACP registry's entry (`acp-registry/aquaregia/agent.json`) has this id, display
        // name and version.
        .agent_info(Implementation::new("aquaregia", env!("CARGO_PKG_VERSION")).title("Aquaregia"))
}

/// `authenticate`: an API key stored (any request succeeds when the agent asks for none).
pub(crate) fn authenticate(
    connection: &Connection,
    request: &AuthenticateRequest,
) -> Result<AuthenticateResponse, agent_client_protocol::Error> {
    auth::authenticate(connection.settings.auth.as_ref(), request)
}

/// `logout`: the stored keys forgotten.
pub(crate) fn logout(
    connection: &Connection,
) -> Result<LogoutResponse, agent_client_protocol::Error> {
    auth::logout(connection.settings.auth.as_ref())
}

/// Whether the agent waits for a key before sessions run (`auth_required`).
pub(crate) fn needs_key(connection: &Connection) -> bool {
    connection
        .settings
        .auth
        .as_ref()
        .is_some_and(|auth| !auth.is_authenticated())
}
