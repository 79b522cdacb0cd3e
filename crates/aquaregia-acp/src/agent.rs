//! The agent a turn runs: the factory's, with the session's tools, permission hooks, output
//! budget and cancellation; and `/compact`, which runs it to summarise the history.

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use aquaregia::{Agent, CompactionReport, Tool, ToolAnnotations};
use tokio_util::sync::CancellationToken;

use crate::connection::{Connection, SessionContext};
use crate::permissions::AcpHooks;
use crate::session::Session;
use crate::state::Mode;
use crate::{builtins, subagents};

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
    let mut tools = tools(connection, session).await;
    let budgeted = |mut agent: aquaregia::AgentBuilder| {
        if let Some(budget) = settings.output_budget {
            agent = agent
                .tool_output_budget(budget)
                .tool_output_store(session.output_store.clone());
        }
        agent
    };
    if let Some(max_steps) = settings.task_subagent {
        // A fresh agent with the same tools (in `plan` mode, the read-only ones); its calls
        // are decided by this turn's hooks.
        let task = budgeted((settings.factory)(&context).map_err(|error| error.to_string())?)
            .tools(tools.clone())
            .max_steps(max_steps)
            .prepare_step(session.toolset.prepare_step())
            .build()
            .map_err(|error| error.to_string())?;
        // Read-only as far as asking goes: handing over a task changes nothing, and each of
        // the subagent's calls is asked about as the session's own are.
        let annotations = ToolAnnotations::new().title(builtins::TASK).read_only(true);
        tools.push(
            task.into_tool(builtins::TASK, subagents::TASK_DESCRIPTION)
                .with_annotations(annotations),
        );
    }
    let agent = budgeted((settings.factory)(&context).map_err(|error| error.to_string())?);
    agent
        .tools(tools)
        .hooks(AcpHooks {
            cx: cx.clone(),
            session: session.clone(),
            policy: settings.policy.clone(),
            trust: settings.trust.clone(),
            children: connection.children.clone(),
            subagents_exposed: connection.client_capabilities().subagents.is_some(),
            child: None,
        })
        .cancellation_token(token.clone())
        .steering(session.steering.clone())
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

/// Every tool of the session, whatever the mode: the MCP servers', the built-ins and the skill tool.
pub(crate) async fn all_tools(connection: &Connection, session: &Session) -> Vec<Tool> {
    let mut tools = session.mcp_tools().await;
    if connection.settings.editor_tools {
        tools.extend(session.editor.tools(&connection.settings.plan.disabled));
    }
    let skills = session.state.with(|state| state.skills.tool());
    tools.extend(skills);
    tools
}
