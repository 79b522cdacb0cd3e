//! What one ACP connection shares, grouped: the application's [`Settings`] (fixed), the
//! client (once it sent `initialize`), the open [`Sessions`], and the MCP-over-ACP routes.
//! Every handler family works on a [`Connection`]; only the dispatcher knows them all.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ClientCapabilities, SessionConfigOption};
use aquaregia::policy::PermissionPolicy;
use aquaregia::sync::lock;
use aquaregia::{AgentBuilder, OutputBudget, SessionStore};

use crate::auth::ApiKeyAuth;
use crate::config::{self, Models};
use crate::mcp_over_acp::McpOverAcp;
use crate::rpc::{invalid_params, spawn};
use crate::servers::ConnectPlan;
use crate::session::Session;
use crate::subagents::Children;
use crate::trust::Trust;

/// What an agent factory is told about the session it builds an agent for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionContext {
    /// The ACP session id.
    pub session_id: String,
    /// The session's working directory.
    pub cwd: PathBuf,
    /// The model picked in the session's `model` option (`None`: the agent's default); see
    /// [`AcpServer::models`](crate::AcpServer::models).
    pub model: Option<String>,
    /// The key the session's requests share the provider's prompt cache under (OpenAI's
    /// `prompt_cache_key`): the session id, or for a fork (`session/fork`) its parent's key,
    /// since the fork starts with the parent's history.
    pub cache_key: String,
}

/// Builds the agent of one prompt.
pub(crate) type Factory =
    dyn Fn(&SessionContext) -> Result<AgentBuilder, aquaregia::Error> + Send + Sync;

/// What the application configured on the [`AcpServer`](crate::AcpServer): fixed for the
/// connection's life.
pub(crate) struct Settings {
    pub(crate) factory: Arc<Factory>,
    /// How sessions' MCP servers are connected.
    pub(crate) plan: ConnectPlan,
    pub(crate) auth: Option<ApiKeyAuth>,
    pub(crate) models: Option<Arc<Models>>,
    pub(crate) editor_tools: bool,
    /// The step limit of the built-in `task` subagent (`None`: not offered).
    pub(crate) task_subagent: Option<usize>,
    /// Whether built-in tools the client cannot serve run on this machine.
    pub(crate) local_tools: bool,
    pub(crate) store: Option<Arc<dyn SessionStore>>,
    /// What one tool result may put into the context (`None`: no limit).
    pub(crate) output_budget: Option<OutputBudget>,
    /// The one decision point for tool calls: the user's policy inside the session modes.
    pub(crate) policy: Arc<PermissionPolicy>,
    /// Which MCP servers' hints are believed.
    pub(crate) trust: Arc<Trust>,
}

/// The open sessions, by id.
#[derive(Default)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<String, Arc<Session>>>,
    /// For the ids of sessions made without a store.
    next: AtomicU64,
}

impl Sessions {
    /// The open session `id`; `invalid_params` if there is none.
    pub(crate) fn get(&self, id: &str) -> Result<Arc<Session>, agent_client_protocol::Error> {
        lock(&self.open)
            .get(id)
            .cloned()
            .ok_or_else(|| invalid_params(format!("unknown session `{id}`")))
    }

    pub(crate) fn insert(&self, session: Arc<Session>) {
        lock(&self.open).insert(session.id.clone(), session);
    }

    /// Takes the session `id` out of the open ones.
    pub(crate) fn remove(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.open).remove(id)
    }

    /// A new id for a session made without a store: `sess-1`, `sess-2`...
    pub(crate) fn next_id(&self) -> String {
        format!("sess-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// Closes every open session.
    pub(crate) async fn close_all(&self) {
        let sessions: Vec<_> = lock(&self.open)
            .drain()
            .map(|(_, session)| session)
            .collect();
        futures::future::join_all(sessions.iter().map(|session| session.close())).await;
    }
}

/// Everything one ACP connection shares.
pub(crate) struct Connection {
    pub(crate) settings: Settings,
    /// The client's capabilities, once it sent `initialize`.
    client: Mutex<Option<ClientCapabilities>>,
    pub(crate) sessions: Sessions,
    /// The subagent runs, by child session id.
    pub(crate) children: Arc<Children>,
    /// The live MCP-over-ACP transports and the binding the client speaks.
    pub(crate) acp: Arc<McpOverAcp>,
}

impl Connection {
    pub(crate) fn new(settings: Settings) -> Self {
        Self {
            settings,
            client: Mutex::default(),
            sessions: Sessions::default(),
            children: Arc::default(),
            acp: Arc::default(),
        }
    }

    /// Whether the client sent `initialize`.
    pub(crate) fn initialized(&self) -> bool {
        lock(&self.client).is_some()
    }

    /// What the client said it can do in `initialize`.
    pub(crate) fn client_capabilities(&self) -> ClientCapabilities {
        lock(&self.client).clone().unwrap_or_default()
    }

    /// The client sent `initialize`, saying it can do `capabilities`.
    pub(crate) fn initialize(&self, capabilities: ClientCapabilities) {
        *lock(&self.client) = Some(capabilities);
    }

    /// The session's config options now (the model, when the agent offers a choice, and the
    /// mode).
    pub(crate) fn config_options(&self, session: &Session) -> Vec<SessionConfigOption> {
        let (mode, model, models) = session
            .state
            .with(|state| (state.mode, state.model.clone(), state.models.clone()));
        config::options(
            mode,
            model,
            self.settings
                .models
                .as_deref()
                .map(|catalog| (catalog, models.as_slice())),
        )
    }

    /// Keeps the session's mode and model in the store, for `session/load` (before its first
    /// turn, in the session that turn creates).
    pub(crate) fn remember(&self, session: &Arc<Session>, cx: &ConnectionTo<Client>) {
        if self.settings.store.is_none() {
            return;
        }
        let (mode, model) = session
            .state
            .with(|state| (state.mode, state.model.clone()));
        let mut update = aquaregia::SessionUpdate::new().mode(mode.id());
        if let Some(model) = model {
            update = update.model(model);
        }
        let session = session.clone();
        spawn(cx, async move {
            if let Err(error) = session.conversation.lock().await.update(update).await {
                tracing::warn!(session = %session.id, %error, "the session's settings were not stored");
            }
        });
    }
}
