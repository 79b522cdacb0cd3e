//! [`AcpServer`]: the ACP agent side, on the official SDK's connection machinery.
//!
//! Every message goes through one dispatcher. The SDK runs handlers one at a time, so
//! anything that waits (connecting servers, a prompt, a request back to the client) runs in a
//! spawned task, and the handler returns at once.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::{ConnectionTo, Dispatch, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo};
use aquaregia::{AgentBuilder, AgentEvent, Message, OutputBudget, Role, StopReason};
use std::panic::AssertUnwindSafe;

use futures::{FutureExt, StreamExt};
use serde_json::{Value, json};

use crate::mcp_over_acp::McpOverAcp;
use crate::servers::{ConnectPlan, connect_all};
use crate::session::{AcpHooks, Mode, Session, lock};
use crate::{prompt, updates};

/// What an agent factory is told about the session it builds an agent for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionContext {
    /// The ACP session id.
    pub session_id: String,
    /// The session's working directory.
    pub cwd: PathBuf,
}

type Factory = dyn Fn(&SessionContext) -> AgentBuilder + Send + Sync;

/// An ACP agent that runs aquaregia agents.
///
/// The factory configures the agent (model, instructions, extra Rust tools, hooks) for each
/// prompt; the session's MCP servers' tools are added to it, and its tool calls are reported
/// to the editor and gated by permission requests.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let (client, model) = aquaregia::Client::from_env()?;
/// aquaregia_acp::AcpServer::new(move |_session| client.agent(model.clone()).max_steps(30))
///     .serve_stdio()
///     .await?;
/// # Ok(()) }
/// ```
pub struct AcpServer {
    factory: Arc<Factory>,
    startup_timeout: Duration,
    disabled: Vec<String>,
    output_budget: Option<OutputBudget>,
}

impl fmt::Debug for AcpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcpServer")
            .field("startup_timeout", &self.startup_timeout)
            .field("disabled", &self.disabled)
            .field("output_budget", &self.output_budget)
            .finish_non_exhaustive()
    }
}

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcpError {
    /// The ACP connection failed (I/O or protocol).
    #[error("ACP connection: {0}")]
    Connection(String),
}

impl AcpServer {
    /// An agent whose per-prompt configuration comes from `factory`.
    pub fn new(factory: impl Fn(&SessionContext) -> AgentBuilder + Send + Sync + 'static) -> Self {
        Self {
            factory: Arc::new(factory),
            startup_timeout: aquaregia::mcp::DEFAULT_CONNECT_TIMEOUT,
            disabled: Vec::new(),
            output_budget: Some(DEFAULT_OUTPUT_BUDGET),
        }
    }

    /// What one tool result may put into the model's context (default 25k tokens; `None`
    /// for no limit). Longer results are cut to head and tail; the full output stays readable
    /// for the whole session through `read_tool_output`. This wins over a budget the factory
    /// sets.
    #[must_use]
    pub fn tool_output_budget(mut self, budget: Option<OutputBudget>) -> Self {
        self.output_budget = budget;
        self
    }

    /// How long each MCP server of a session gets to start (default 30 s). A server that
    /// misses it is reported to the client; the others are still used.
    #[must_use]
    pub fn mcp_startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Hides tools whose exposed name (`<server>__<tool>`) matches one of these patterns
    /// (`*` and `?` wildcards), for every transport alike.
    #[must_use]
    pub fn disable_tools<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.disabled.extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Serves ACP on stdin/stdout until stdin closes, then closes every session (no child
    /// process outlives it).
    pub async fn serve_stdio(self) -> Result<(), AcpError> {
        self.serve(agent_client_protocol::Stdio::new()).await
    }

    /// Serves ACP over any transport of the SDK (byte streams, channels...).
    pub async fn serve(self, transport: impl ConnectTo<Agent>) -> Result<(), AcpError> {
        let state = Arc::new(State {
            factory: self.factory,
            output_budget: self.output_budget,
            plan: ConnectPlan {
                startup_timeout: self.startup_timeout,
                disabled: self.disabled.into(),
            },
            sessions: Mutex::default(),
            next_session: AtomicU64::new(1),
            acp: Arc::default(),
        });
        let dispatch_state = state.clone();
        let result = Agent
            .v1()
            .name("aquaregia")
            .on_receive_dispatch(
                async move |message: Dispatch, cx: ConnectionTo<Client>| {
                    dispatch_state.dispatch(message, cx);
                    Ok(())
                },
                agent_client_protocol::on_receive_dispatch!(),
            )
            .connect_to(transport)
            .await;
        state.close_all().await;
        result.map_err(|error| AcpError::Connection(error.message))
    }
}

/// The ACP agent's default tool output budget.
const DEFAULT_OUTPUT_BUDGET: OutputBudget = OutputBudget::tokens(25_000);

struct State {
    factory: Arc<Factory>,
    output_budget: Option<OutputBudget>,
    plan: ConnectPlan,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    next_session: AtomicU64,
    acp: Arc<McpOverAcp>,
}

fn invalid_params(reason: impl Into<String>) -> agent_client_protocol::Error {
    let reason = reason.into();
    agent_client_protocol::Error::invalid_params().data(json!({"reason": reason}))
}

impl State {
    fn dispatch(self: &Arc<Self>, message: Dispatch, cx: ConnectionTo<Client>) {
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
        params: Value,
        responder: Responder,
        cx: ConnectionTo<Client>,
    ) {
        let state = self.clone();
        match method {
            "initialize" => {
                let _ = responder.respond(initialize_response(&params));
            }
            "session/new" => {
                tokio::spawn(async move { state.new_session(params, responder, cx).await });
            }
            "session/prompt" => match self.session_of(&params) {
                // The prompt is registered before the next message is read, so a
                // `session/cancel` right behind it finds it.
                Ok(session) => match session.begin_prompt() {
                    Some(token) => {
                        tokio::spawn(async move {
                            state.prompt(session, params, token, responder, cx).await;
                        });
                    }
                    None => {
                        let _ = responder.respond_with_error(invalid_params(
                            "a prompt is already running in this session",
                        ));
                    }
                },
                Err(error) => {
                    let _ = responder.respond_with_error(error);
                }
            },
            "session/set_mode" => {
                let result = self.session_of(&params).and_then(|session| {
                    let id = params
                        .get("modeId")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let mode = Mode::parse(id)
                        .ok_or_else(|| invalid_params(format!("unknown mode `{id}`")))?;
                    session.set_mode(mode);
                    updates::send(
                        &cx,
                        &session.id,
                        json!({"sessionUpdate": "current_mode_update", "currentModeId": mode.id()}),
                    );
                    Ok(json!({}))
                });
                let _ = responder.respond_with_result(result);
            }
            "session/close" => match self.session_of(&params) {
                Ok(session) => {
                    lock(&self.sessions).remove(&session.id);
                    tokio::spawn(async move {
                        session.close().await;
                        let _ = responder.respond(json!({}));
                    });
                }
                Err(error) => {
                    let _ = responder.respond_with_error(error);
                }
            },
            "mcp/message" => self.acp.request(&params, responder),
            _ => {
                let _ =
                    responder.respond_with_error(agent_client_protocol::Error::method_not_found());
            }
        }
    }

    fn notification(&self, method: &str, params: &Value) {
        match method {
            "session/cancel" => {
                if let Ok(session) = self.session_of(params) {
                    tracing::info!(session = %session.id, "session/cancel");
                    session.cancel();
                }
            }
            "mcp/message" => self.acp.notification(params),
            // Unknown notifications, custom `_` ones included, are ignored as the spec says.
            _ => {}
        }
    }

    fn session_of(&self, params: &Value) -> Result<Arc<Session>, agent_client_protocol::Error> {
        let id = params
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid_params("missing sessionId"))?;
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or_else(|| invalid_params(format!("unknown session `{id}`")))
    }

    async fn new_session(
        self: Arc<Self>,
        params: Value,
        responder: Responder,
        cx: ConnectionTo<Client>,
    ) {
        let cwd = match params.get("cwd").and_then(Value::as_str) {
            Some(cwd) if std::path::Path::new(cwd).is_absolute() => PathBuf::from(cwd),
            _ => {
                let _ =
                    responder.respond_with_error(invalid_params("`cwd` must be an absolute path"));
                return;
            }
        };
        let entries = match params.get("mcpServers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(entries)) => entries.clone(),
            Some(_) => {
                let _ =
                    responder.respond_with_error(invalid_params("`mcpServers` must be an array"));
                return;
            }
        };
        let id = format!("sess-{}", self.next_session.fetch_add(1, Ordering::Relaxed));
        let (toolset, failures) = connect_all(&entries, &cwd, &self.plan, &cx, &self.acp).await;
        for failure in &failures {
            tracing::warn!(session = %id, server = %failure.name, reason = %failure.reason, "MCP server unavailable");
        }
        tracing::info!(session = %id, servers = toolset.connections().len(), failed = failures.len(), "session created");
        let session = Arc::new(Session::new(id.clone(), cwd, toolset));
        lock(&self.sessions).insert(id.clone(), session);
        let _ = responder.respond(json!({
            "sessionId": id,
            "modes": {
                "currentModeId": Mode::Default.id(),
                "availableModes": Mode::ALL.iter().map(|mode| mode.describe()).collect::<Vec<_>>(),
            },
        }));
        // Reported once the client knows the session.
        for failure in failures {
            updates::send(
                &cx,
                &id,
                updates::chunk(
                    "agent_message_chunk",
                    &format!(
                        "MCP server `{}` is unavailable: {}\n",
                        failure.name, failure.reason
                    ),
                ),
            );
        }
    }

    async fn prompt(
        self: Arc<Self>,
        session: Arc<Session>,
        params: Value,
        token: tokio_util::sync::CancellationToken,
        responder: Responder,
        cx: ConnectionTo<Client>,
    ) {
        // Releases the session however this ends, a panic included.
        let running = session.prompt_guard(token.clone());
        let Some(blocks) = params.get("prompt").and_then(Value::as_array) else {
            drop(running);
            let _ = responder.respond_with_error(invalid_params(
                "`prompt` must be an array of content blocks",
            ));
            return;
        };
        // A panic inside the agent (a tool, a hook, a custom factory) fails this prompt with
        // an answer instead of leaving the client waiting forever.
        let outcome = AssertUnwindSafe(self.run_prompt(&session, blocks, &token, &cx))
            .catch_unwind()
            .await
            .unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_owned());
                tracing::error!(session = %session.id, panic = %what, "the prompt panicked");
                Err(format!("the agent panicked: {what}"))
            });
        drop(running);
        let _ = match outcome {
            Ok(stop) => responder.respond(json!({"stopReason": stop})),
            Err(message) => responder.respond_with_error(
                agent_client_protocol::Error::internal_error().data(json!({"reason": message})),
            ),
        };
    }

    async fn run_prompt(
        &self,
        session: &Arc<Session>,
        blocks: &[Value],
        token: &tokio_util::sync::CancellationToken,
        cx: &ConnectionTo<Client>,
    ) -> Result<&'static str, String> {
        let mut messages = lock(&session.history).clone();
        messages.push(Message::new(Role::User, prompt::parts(blocks)));
        let context = SessionContext {
            session_id: session.id.clone(),
            cwd: session.cwd.clone(),
        };
        let mcp_tools = session.mcp_tools().await;
        let mut agent = (self.factory)(&context);
        if let Some(budget) = self.output_budget {
            agent = agent
                .tool_output_budget(budget)
                .tool_output_store(session.output_store.clone());
        }
        let agent = agent
            .tools(mcp_tools)
            .hooks(AcpHooks {
                cx: cx.clone(),
                session: session.clone(),
            })
            .cancellation_token(token.clone())
            .prepare_step(session.toolset.prepare_step())
            .build()
            .map_err(|error| error.to_string())?;

        let mut events = agent.stream(messages);
        let mut output = None;
        while let Some(event) = events.next().await {
            match event {
                Ok(AgentEvent::TextDelta(text)) => {
                    updates::send(
                        cx,
                        &session.id,
                        updates::chunk("agent_message_chunk", &text),
                    );
                }
                Ok(AgentEvent::ReasoningDelta(text)) => {
                    updates::send(
                        cx,
                        &session.id,
                        updates::chunk("agent_thought_chunk", &text),
                    );
                }
                Ok(AgentEvent::ToolCallFinish { id, result, .. }) => {
                    updates::send(cx, &session.id, updates::finished(&id, &result));
                }
                Ok(AgentEvent::Finish(finished)) => output = Some(finished),
                Ok(_) => {}
                Err(error) => {
                    if token.is_cancelled() {
                        return Ok("cancelled");
                    }
                    return Err(error.to_string());
                }
            }
        }
        let output = output.ok_or_else(|| "the agent ended without an answer".to_owned())?;
        let stop = match output.stop_reason {
            StopReason::Finished => "end_turn",
            StopReason::MaxSteps => "max_turn_requests",
            StopReason::Length => "max_tokens",
            StopReason::Refusal => "refusal",
            _ if token.is_cancelled() => "cancelled",
            _ => "end_turn",
        };
        *lock(&session.history) = output.messages;
        Ok(if token.is_cancelled() {
            "cancelled"
        } else {
            stop
        })
    }

    async fn close_all(&self) {
        let sessions: Vec<_> = lock(&self.sessions)
            .drain()
            .map(|(_, session)| session)
            .collect();
        futures::future::join_all(sessions.iter().map(|session| session.close())).await;
    }
}

/// The `initialize` answer: protocol 1, what this agent supports.
fn initialize_response(params: &Value) -> Value {
    let requested = params.get("protocolVersion").and_then(Value::as_u64);
    let client = params.get("clientInfo").cloned().unwrap_or_default();
    tracing::info!(?requested, %client, "initialize");
    json!({
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": false,
            "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": true, "sse": true, "acp": true},
            "sessionCapabilities": {"close": {}},
        },
        "authMethods": [],
        "agentInfo": {"name": "aquaregia", "version": env!("CARGO_PKG_VERSION")},
    })
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State").finish_non_exhaustive()
    }
}
