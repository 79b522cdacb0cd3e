//! The session lifecycle family: `session/new` (created in the store when there is one),
//! `session/load` (a stored session replayed, its servers connected again), `session/resume`
//! (the same without the replay), `session/fork` (a new session holding another's history up
//! to its latest completed turn, under its prompt-cache key), `session/list`, `session/close`
//! and `session/delete`.

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::schema::{
    CloseSessionRequest, CloseSessionResponse, DeleteSessionResponse, ForkSessionRequest,
    ForkSessionResponse, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest,
    LoadSessionResponse, NewSessionRequest, NewSessionResponse, ResumeSessionRequest,
    ResumeSessionResponse, SessionConfigOption, SessionModeState,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use aquaregia::workspace::Workspace;
use aquaregia::{NewSession, SkillIssue, Skills, Steering, ToolOutputStore};
use serde_json::Value;

use crate::connection::Connection;
use crate::editor::Editor;
use crate::elicitation::Elicitation;
use crate::rpc::{invalid_params, spawn};
use crate::servers::{self, connect_all};
use crate::session::Session;
use crate::state::{Mode, SessionState, SharedState, describe};
use crate::trust::PinReviews;
use crate::{agent, commands, store, updates};

fn modes(current: Mode) -> SessionModeState {
    SessionModeState::new(current.id(), Mode::ALL.into_iter().map(describe).collect())
}

/// `session/new`.
pub(crate) async fn new(
    connection: Arc<Connection>,
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
    // Created in the store now, so another agent process can open it before its first prompt
    // (acpx makes a session, then prompts it from a new process); listings leave it out until
    // it has a turn, so chat panels opened and left do not fill `session/list`.
    let conversation = match &connection.settings.store {
        Some(store) => {
            let new = NewSession::new(cwd.clone()).mode(Mode::Default.id());
            match aquaregia::Conversation::create(store.clone(), new).await {
                Ok(conversation) => conversation,
                Err(error) => {
                    let _ = responder.respond_with_error(store::acp_error(&error));
                    return;
                }
            }
        }
        None => {
            // `sess-N` is a valid id; the fallback is never taken.
            let id = aquaregia::SessionId::new(connection.sessions.next_id())
                .unwrap_or_else(|_| aquaregia::SessionId::generate());
            aquaregia::Conversation::new(cwd.clone()).id(id)
        }
    };
    let id = conversation.session_id().to_string();
    let (session, options) = open(&connection, id, cwd, &servers, conversation, &cx).await;
    let _ = responder.respond(
        NewSessionResponse::new(session.id.clone())
            .modes(modes(Mode::Default))
            .config_options(options),
    );
    opened(&connection, &session, &cx).await;
}

/// `session/load`: a stored session opened again, its history replayed first.
pub(crate) async fn load(
    connection: Arc<Connection>,
    request: LoadSessionRequest,
    servers: Vec<Value>,
    responder: Responder<LoadSessionResponse>,
    cx: ConnectionTo<Client>,
) {
    let id = request.session_id.0.to_string();
    match restore(&connection, &id, request.cwd, &servers, &cx, true).await {
        Ok((session, mode)) => {
            let _ = responder.respond(
                LoadSessionResponse::new()
                    .modes(modes(mode))
                    .config_options(connection.config_options(&session)),
            );
            opened(&connection, &session, &cx).await;
        }
        Err(error) => {
            let _ = responder.respond_with_error(error);
        }
    }
}

/// `session/resume`: like `session/load`, without the replay.
pub(crate) async fn resume(
    connection: Arc<Connection>,
    request: ResumeSessionRequest,
    servers: Vec<Value>,
    responder: Responder<ResumeSessionResponse>,
    cx: ConnectionTo<Client>,
) {
    let id = request.session_id.0.to_string();
    match restore(&connection, &id, request.cwd, &servers, &cx, false).await {
        Ok((session, mode)) => {
            let _ = responder.respond(
                ResumeSessionResponse::new()
                    .modes(modes(mode))
                    .config_options(connection.config_options(&session)),
            );
            opened(&connection, &session, &cx).await;
        }
        Err(error) => {
            let _ = responder.respond_with_error(error);
        }
    }
}

/// `session/fork`: a new session holding the history of `sessionId` up to its latest
/// completed turn (a prompt running in it goes on, and its turn stays its own), its servers
/// the request's; the parent is not changed. Stored, the fork names its parent and the turn it
/// forked at; its requests share the parent's prompt-cache key.
pub(crate) async fn fork(
    connection: Arc<Connection>,
    request: ForkSessionRequest,
    servers: Vec<Value>,
    responder: Responder<ForkSessionResponse>,
    cx: ConnectionTo<Client>,
) {
    let cwd = request.cwd;
    if !cwd.is_absolute() {
        let _ = responder.respond_with_error(invalid_params("`cwd` must be an absolute path"));
        return;
    }
    let parent_id = request.session_id.0.to_string();
    let open_parent = connection.sessions.get(&parent_id).ok();
    let unknown = || invalid_params(format!("unknown session `{parent_id}`: nothing to fork"));
    let forked = match (&open_parent, &connection.settings.store) {
        (Some(parent), _) => parent.conversation.lock().await.fork().await,
        (None, Some(store)) => match store::id(&parent_id) {
            Ok(id) => aquaregia::Conversation::fork_stored(store.clone(), &id)
                .await
                .map(|(fork, _)| fork),
            Err(error) => {
                let _ = responder.respond_with_error(error);
                return;
            }
        },
        (None, None) => {
            let _ = responder.respond_with_error(unknown());
            return;
        }
    };
    let conversation = match forked {
        Ok(conversation) => conversation,
        Err(aquaregia::SessionError::NotFound { .. }) => {
            let _ = responder.respond_with_error(unknown());
            return;
        }
        Err(error) => {
            let _ = responder.respond_with_error(store::acp_error(&error));
            return;
        }
    };
    // The parent's mode and model: as stored, or as the open parent has them now.
    let (mode, model) = match (conversation.meta(), &open_parent) {
        (Some(meta), _) => (
            meta.mode.as_deref().and_then(Mode::parse),
            meta.model.clone(),
        ),
        (None, Some(parent)) => parent
            .state
            .with(|state| (Some(state.mode), state.model.clone())),
        (None, None) => (None, None),
    };
    let id = conversation.session_id().to_string();
    let (session, _) = open(&connection, id, cwd, &servers, conversation, &cx).await;
    let mode = settle(&session, mode.unwrap_or(Mode::Default), model);
    tracing::info!(session = %session.id, parent = %parent_id, "session forked");
    let _ = responder.respond(
        ForkSessionResponse::new(session.id.clone())
            .modes(modes(mode))
            .config_options(connection.config_options(&session)),
    );
    opened(&connection, &session, &cx).await;
}

/// Puts a reopened or forked session in its stored `mode` (skipping every question is
/// chosen again each time, never brought back silently: that one becomes `default`, with a
/// notice) and `model` (if it is still offered); returns the mode it is in.
fn settle(session: &Session, stored_mode: Mode, model: Option<String>) -> Mode {
    let mode = match stored_mode {
        Mode::BypassPermissions => Mode::Default,
        other => other,
    };
    session.state.with(|state| {
        if stored_mode != mode {
            state.add_notice(format!(
                "This session was in `{}` mode; it was opened in `{}` mode (tools are asked \
                 about again). Choose the mode again to skip the questions.\n",
                stored_mode.id(),
                mode.id()
            ));
        }
        state.mode = mode;
        if let Some(model) = model.filter(|model| state.models.contains(model)) {
            state.model = Some(model);
        }
    });
    mode
}

/// `session/list`: the store's page (`method_not_found` without a store).
pub(crate) async fn list(
    connection: Arc<Connection>,
    request: ListSessionsRequest,
) -> Result<ListSessionsResponse, agent_client_protocol::Error> {
    let store = connection
        .settings
        .store
        .clone()
        .ok_or_else(agent_client_protocol::Error::method_not_found)?;
    store::list(&*store, request).await
}

/// `session/close`: the session leaves the open ones at once, and is answered once its
/// servers are closed.
pub(crate) fn close(
    connection: &Connection,
    request: &CloseSessionRequest,
    responder: Responder<CloseSessionResponse>,
    cx: &ConnectionTo<Client>,
) {
    let id = &request.session_id.0;
    match connection.sessions.get(id) {
        Ok(session) => {
            connection.sessions.remove(&session.id);
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

/// `session/delete`: closes the session if it is open and deletes it from the store.
pub(crate) async fn delete(
    connection: Arc<Connection>,
    id: String,
) -> Result<DeleteSessionResponse, agent_client_protocol::Error> {
    let store = connection
        .settings
        .store
        .clone()
        .ok_or_else(agent_client_protocol::Error::method_not_found)?;
    if let Some(session) = connection.sessions.remove(&id) {
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
    connection: &Connection,
    id: &str,
    cwd: PathBuf,
    servers: &[Value],
    cx: &ConnectionTo<Client>,
    replay: bool,
) -> Result<(Arc<Session>, Mode), agent_client_protocol::Error> {
    let store = connection
        .settings
        .store
        .clone()
        .ok_or_else(agent_client_protocol::Error::method_not_found)?;
    if let Ok(open) = connection.sessions.get(id) {
        // Opened again (a client reloading its view): the open one is closed and the stored
        // one takes its place, so one live session remains. Claiming it as a prompt
        // keeps a prompt from starting meanwhile; a running one is not cut short.
        if open.state.with(|state| state.begin_prompt()).is_none() {
            return Err(invalid_params(format!(
                "session `{id}` is running a prompt: cancel it (session/cancel) or wait for \
                 its answer before loading the session again"
            )));
        }
        connection.sessions.remove(id);
        open.close().await;
    }
    let (conversation, stored) = aquaregia::Conversation::load(store, &store::id(id)?)
        .await
        .map_err(|error| store::acp_error(&error))?;
    let (session, _) = open(connection, id.to_owned(), cwd, servers, conversation, cx).await;
    if stored.skipped > 0 {
        // Told at the next turn: what was lost is said, not silently dropped.
        session.state.add_notice(format!(
            "This session's file had {} damaged line(s) (a write cut short, say); they were \
             skipped and the {} intact turn(s) were loaded.\n",
            stored.skipped,
            stored.turns.len()
        ));
    }
    let stored_mode = stored
        .meta
        .mode
        .as_deref()
        .and_then(Mode::parse)
        .unwrap_or(Mode::Default);
    let mode = settle(&session, stored_mode, stored.meta.model.clone());
    if replay {
        // The whole conversation, even where the model continues from a compaction.
        let tools = agent::all_tools(connection, &session).await;
        store::replay(cx, id, &stored.messages(), &tools);
    }
    tracing::info!(session = %id, turns = stored.turns.len(), replay, "session restored");
    Ok((session, mode))
}

/// Connects the servers, lists the models and registers the session.
async fn open(
    connection: &Connection,
    id: String,
    cwd: PathBuf,
    servers: &[Value],
    conversation: aquaregia::Conversation,
    cx: &ConnectionTo<Client>,
) -> (Arc<Session>, Vec<SessionConfigOption>) {
    let settings = &connection.settings;
    let (servers, mut failures) = servers::declared(servers);
    let list_models = async {
        match &settings.models {
            Some(models) => models.list().await,
            None => Vec::new(),
        }
    };
    // The session's state exists before its servers connect: they may ask the user
    // (elicitation, tool reviews) while a later prompt runs.
    let state = SharedState::new(SessionState::new(&cwd));
    let capabilities = connection.client_capabilities();
    let elicitation = Elicitation::new(cx.clone(), id.clone(), &capabilities, state.clone());
    let reviews = PinReviews::new(cx.clone(), id.clone(), state.clone());
    let ((toolset, connect_failures), models) = futures::join!(
        connect_all(
            &servers,
            &cwd,
            &settings.plan,
            (cx, &connection.acp),
            elicitation,
            (&settings.trust, reviews),
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
        capabilities,
        state: state.clone(),
        on_process: settings.plan.on_process.clone(),
        sandbox: settings.plan.sandbox.clone(),
        local: settings.local_tools,
    });
    // The project's and the user's skills, known before the first prompt can name one.
    let local_cwd = cwd.clone();
    let skills = tokio::task::spawn_blocking(move || Skills::discover(local_cwd))
        .await
        .unwrap_or_default();
    state.with(|state| {
        // Told at the start of the first turn, where the client shows them (kept before the
        // client knows the session, so its first prompt finds them).
        tell_skill_issues(state, &id, skills.issues());
        state.skills = skills;
        for failure in &failures {
            state.add_notice(format!(
                "MCP server `{}` is unavailable: {}\n",
                failure.name, failure.reason
            ));
        }
        state.models = models;
    });
    let session = Arc::new(Session {
        cache_key: conversation.cache_key(),
        id,
        cwd,
        toolset,
        editor,
        output_store: ToolOutputStore::in_memory(),
        state,
        conversation: tokio::sync::Mutex::new(conversation),
        steering: Steering::new(),
        turn: tokio::sync::Mutex::new(()),
    });
    let options = connection.config_options(&session);
    connection.sessions.insert(session.clone());
    (session, options)
}

/// Once the client knows the session: the commands (the built-ins, the servers' prompts and
/// the skills).
async fn opened(connection: &Connection, session: &Session, cx: &ConnectionTo<Client>) {
    let prompts = session.toolset.prompts().await;
    let skills = skills(session).await;
    updates::send(
        cx,
        &session.id,
        commands::update(&prompts, &skills, connection.settings.models.is_some()),
    );
    session.state.with(|state| {
        state.commands = prompts;
        state.skills = skills;
    });
}

/// The session's skills: its servers', then the user's and the project's found when it
/// opened (more local ones win). What is wrong with the servers' is logged and told at the
/// start of the next turn.
async fn skills(session: &Session) -> Skills {
    let mut skills = session.toolset.skills().await;
    session.state.with(|state| {
        let local = state.skills.clone();
        let servers = skills.issues().len();
        let known = servers + local.issues().len();
        skills.merge(local);
        // The servers' issues, then the clashes the merge found (the local ones were told).
        let issues = skills.issues();
        let new = issues.iter().take(servers).chain(issues.iter().skip(known));
        tell_skill_issues(state, &session.id, new);
    });
    skills
}

/// Logs these issues with skills, and keeps them for the start of the next turn.
fn tell_skill_issues<'a>(
    state: &mut SessionState,
    session: &str,
    issues: impl IntoIterator<Item = &'a SkillIssue>,
) {
    for issue in issues {
        tracing::warn!(session, %issue, "skill");
        state.add_notice(format!("Skills: {issue}\n"));
    }
}
