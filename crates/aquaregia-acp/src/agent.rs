//! The agent a turn runs: the factory's, with the session's tools, permission hooks, output
//! budget and cancellation; and `/compact`, which runs it to summarise the history.

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use aquaregia::{Agent, CompactionReport, Tool};
use tokio_util::sync::CancellationToken;

use crate::connection::{Connection, SessionContext};
use crate::permissions::AcpHooks;
use crate::session::Session;
use crate::state::Mode;

/// The session's agent for one turn.
pub(crate) async fn for_turn(
    connection: &Connection,
    session: &Arc<Session>,
    token: &CancellationToken,
    cx: &ConnectionTo<Client>,
) -> Result<Agent, String> {
    let settings = &connection.settings;
    let context = SessionContext {
        session_id: session.id.clone(),
        cwd: session.cwd.clone(),
        model: session.state.with(|state| state.model.clone()),
        cache_key: session.cache_key.clone(),
    };
    let tools = tools(connection, session).await;
    let mut agent = (settings.factory)(&context).map_err(|error| error.to_string())?;
    if let Some(budget) = settings.output_budget {
        agent = agent
            .tool_output_budget(budget)
            .tool_output_store(session.output_store.clone());
    }
    agent
        .tools(tools)
        .hooks(AcpHooks {
            cx: cx.clone(),
            session: session.clone(),
            policy: settings.policy.clone(),
            trust: settings.trust.clone(),
        })
        .cancellation_token(token.clone())
        .prepare_step(session.toolset.prepare_step())
        .build()
        .map_err(|error| error.to_string())
}

/// `/compact`: the history compacted now and stored as the session's base (the stored turns
/// stay, and are replayed on load).
pub(crate) async fn compact(
    connection: &Connection,
    session: &Arc<Session>,
    token: &CancellationToken,
    cx: &ConnectionTo<Client>,
) -> Result<CompactionReport, String> {
    let agent = for_turn(connection, session, token, cx).await?;
    let mut conversation = session.conversation.lock().await;
    tokio::select! {
        result = conversation.compact(&agent) => result.map_err(|error| error.to_string()),
        () = token.cancelled() => Err("cancelled".into()),
    }
}

/// The tools a turn offers: the MCP servers' and the built-ins (in `plan` mode, the
/// read-only ones).
pub(crate) async fn tools(connection: &Connection, session: &Session) -> Vec<Tool> {
    let mut tools = all_tools(connection, session).await;
    if session.state.mode() == Mode::Plan {
        tools.retain(|tool| tool.annotations().read_only == Some(true));
    }
    tools
}

/// Every tool of the session, whatever the mode: the MCP servers' and the built-ins.
pub(crate) async fn all_tools(connection: &Connection, session: &Session) -> Vec<Tool> {
    let mut tools = session.mcp_tools().await;
    if connection.settings.editor_tools {
        tools.extend(session.editor.tools(&connection.settings.plan.disabled));
    }
    tools
}
