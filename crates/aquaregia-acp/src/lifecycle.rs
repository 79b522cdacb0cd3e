//! Opening sessions: `session/new` (created in the store when there is one) and
//! `session/load` (a stored session replayed, its servers connected again).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::schema::{
    DeleteSessionResponse, LoadSessionRequest, LoadSessionResponse, NewSessionRequest,
    NewSessionResponse, ResumeSessionRequest, ResumeSessionResponse, SessionConfigOption,
    SessionModeState,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use aquaregia::workspace::Workspace;
use aquaregia::{Message, NewSession};
use serde_json::Value;

use crate::dispatch::{State, invalid_params};
use crate::editor::Editor;
use crate::elicitation::Elicitation;
use crate::servers::{self, connect_all};
use crate::session::{Mode, Session, describe, lock};
use crate::trust::PinReviews;
use crate::{commands, store, updates};

fn modes(current: Mode) -> SessionModeState {
    SessionModeState::new(current.id(), Mode::ALL.into_iter().map(describe).collect())
}

impl State {
    pub(crate) async fn new_session(
        self: Arc<Self>,
        request: NewSessionRequest,
        servers: Vec<Value>,
        responder: Responder<NewSessionResponse>,
        cx: ConnectionTo<Client>,
    ) {
        let cwd = request.cwd;
        if !cwd.is_absolute() {
            let _ = responder.respond_with_error(invalid_params("`cwd` must be an absolute path"));
            return;
        }
        let id = match &self.store {
            Some(store) => match store
                .create(NewSession::new(cwd.clone()).mode(Mode::Default.id()))
                .await
            {
                Ok(meta) => meta.id.to_string(),
                Err(error) => {
                    let _ = responder.respond_with_error(store::acp_error(&error));
                    return;
                }
            },
            None => format!("sess-{}", self.next_session.fetch_add(1, Ordering::Relaxed)),
        };
        let (session, options) = self.open(id, cwd, &servers, Vec::new(), &cx).await;
        let _ = responder.respond(
            NewSessionResponse::new(session.id.clone())
                .modes(modes(Mode::Default))
                .config_options(options),
        );
        self.opened(&session, &cx).await;
    }

    pub(crate) async fn load_session(
        self: Arc<Self>,
        request: LoadSessionRequest,
        servers: Vec<Value>,
        responder: Responder<LoadSessionResponse>,
        cx: ConnectionTo<Client>,
    ) {
        let id = request.session_id.0.to_string();
        match self.restore(&id, request.cwd, &servers, &cx, true).await {
            Ok((session, mode)) => {
                let _ = responder.respond(
                    LoadSessionResponse::new()
                        .modes(modes(mode))
                        .config_options(self.config_options(&session)),
                );
                self.opened(&session, &cx).await;
            }
            Err(error) => {
                let _ = responder.respond_with_error(error);
            }
        }
    }

    /// `session/resume`: like `session/load`, without the replay.
    pub(crate) async fn resume_session(
        self: Arc<Self>,
        request: ResumeSessionRequest,
        servers: Vec<Value>,
        responder: Responder<ResumeSessionResponse>,
        cx: ConnectionTo<Client>,
    ) {
        let id = request.session_id.0.to_string();
        match self.restore(&id, request.cwd, &servers, &cx, false).await {
            Ok((session, mode)) => {
                let _ = responder.respond(
                    ResumeSessionResponse::new()
                        .modes(modes(mode))
                        .config_options(self.config_options(&session)),
                );
                self.opened(&session, &cx).await;
            }
            Err(error) => {
                let _ = responder.respond_with_error(error);
            }
        }
    }

    /// `session/delete`: closes the session if it is open and deletes it from the store.
    pub(crate) async fn delete_session(
        self: Arc<Self>,
        id: String,
    ) -> Result<DeleteSessionResponse, agent_client_protocol::Error> {
        let store = self
            .store
            .clone()
            .ok_or_else(agent_client_protocol::Error::method_not_found)?;
        let open = lock(&self.sessions).remove(&id);
        if let Some(session) = open {
            session.close().await;
        }
        store
            .delete(&store::id(&id)?)
            .await
            .map_err(|error| store::acp_error(&error))?;
        Ok(DeleteSessionResponse::new())
    }

    /// Opens a stored session again (its servers connected, its mode and model back); with
    /// `replay`, its history is sent as updates first.
    async fn restore(
        &self,
        id: &str,
        cwd: PathBuf,
        servers: &[Value],
        cx: &ConnectionTo<Client>,
        replay: bool,
    ) -> Result<(Arc<Session>, Mode), agent_client_protocol::Error> {
        let store = self
            .store
            .clone()
            .ok_or_else(agent_client_protocol::Error::method_not_found)?;
        if lock(&self.sessions).contains_key(id) {
            return Err(invalid_params(format!("session `{id}` is already open")));
        }
        let stored = store
            .load(&store::id(id)?)
            .await
            .map_err(|error| store::acp_error(&error))?;
        let (session, _) = self
            .open(id.to_owned(), cwd, servers, store::history(&stored), cx)
            .await;
        // The stored count (what the next append is checked against), which counts turns that
        // no longer decode too.
        session.set_stored_turns(stored.meta.turns);
        if stored.skipped > 0 {
            // Told at the next turn: what was lost is said, not silently dropped.
            session.add_notice(format!(
                "This session's file had {} damaged line(s) (a write cut short, say); they \
                 were skipped and the {} intact turn(s) were loaded.\n",
                stored.skipped,
                stored.turns.len()
            ));
        }
        let mode = stored
            .meta
            .mode
            .as_deref()
            .and_then(Mode::parse)
            .unwrap_or(Mode::Default);
        session.set_mode(mode);
        if let Some(model) = stored
            .meta
            .model
            .clone()
            .filter(|model| lock(&session.models).contains(model))
        {
            session.set_model(model);
        }
        if replay {
            // The whole conversation, even where the model continues from a compaction.
            store::replay(cx, id, &stored.messages());
        }
        tracing::info!(session = %id, turns = stored.turns.len(), replay, "session restored");
        Ok((session, mode))
    }

    /// Connects the servers, lists the models and registers the session.
    async fn open(
        &self,
        id: String,
        cwd: PathBuf,
        servers: &[Value],
        history: Vec<Message>,
        cx: &ConnectionTo<Client>,
    ) -> (Arc<Session>, Vec<SessionConfigOption>) {
        let (servers, mut failures) = servers::declared(servers);
        let list_models = async {
            match &self.models {
                Some(models) => models.list().await,
                None => Vec::new(),
            }
        };
        let capabilities = lock(&self.client_capabilities).clone();
        let elicitation = Elicitation::new(cx.clone(), id.clone(), &capabilities);
        let reviews = PinReviews::new(cx.clone(), id.clone());
        let ((toolset, connect_failures), models) = futures::join!(
            connect_all(
                &servers,
                &cwd,
                &self.plan,
                (cx, &self.acp),
                elicitation.clone(),
                (&self.trust, reviews.clone()),
            ),
            list_models
        );
        failures.extend(connect_failures);
        for failure in &failures {
            tracing::warn!(session = %id, server = %failure.name, reason = %failure.reason, "MCP server unavailable");
        }
        tracing::info!(session = %id, servers = toolset.connections().len(), failed = failures.len(), "session opened");
        let editor = Arc::new(Editor {
            cx: cx.clone(),
            session_id: id.clone(),
            cwd: cwd.clone(),
            workspace: Workspace::new(&cwd),
            outside_approved: Mutex::default(),
            capabilities,
            calls: Mutex::default(),
            on_process: self.plan.on_process.clone(),
            sandbox: self.plan.sandbox.clone(),
        });
        let session = Arc::new(Session::new(id.clone(), cwd, toolset, editor));
        elicitation.attach(&session);
        reviews.attach(&session);
        // Told at the start of the first turn, where the client shows them (kept before the
        // client knows the session, so its first prompt finds them).
        for failure in &failures {
            session.add_notice(format!(
                "MCP server `{}` is unavailable: {}\n",
                failure.name, failure.reason
            ));
        }
        *lock(&session.history) = history;
        *lock(&session.models) = models;
        let options = self.config_options(&session);
        lock(&self.sessions).insert(id, session.clone());
        (session, options)
    }

    /// Once the client knows the session: the commands.
    async fn opened(&self, session: &Session, cx: &ConnectionTo<Client>) {
        let prompts = commands::prompts(&session.toolset).await;
        updates::send(
            cx,
            &session.id,
            commands::update(&prompts, self.models.is_some()),
        );
        *lock(&session.commands) = prompts;
    }
}
