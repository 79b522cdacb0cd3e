//! [`AcpServer`]: the ACP agent side, on the official SDK's connection machinery. Messages
//! are handled in [`crate::dispatch`], on the [`Connection`] the server's settings make.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::{ConnectionTo, Dispatch};
use agent_client_protocol::{Agent, Client, ConnectTo};
use aquaregia::{AgentBuilder, LanguageModel, OutputBudget, SessionStore};
use aquaregia_mcp::{Connector, PinFile, ServerProcess};
use futures::future::BoxFuture;

use crate::auth::ApiKeyAuth;
use crate::config::Models;
use crate::connection::{Connection, Factory, SessionContext, Settings};
use crate::dispatch;
use crate::sandbox::Sandbox;
use crate::servers::{ConnectPlan, LoginHint, ProcessHook};
use crate::stdio;
use crate::trust::Trust;

/// How long the end of serving waits for stdout to take what was sent.
const STDOUT_DRAIN: Duration = Duration::from_secs(1);

/// The ACP agent's default tool output budget.
const DEFAULT_OUTPUT_BUDGET: OutputBudget = OutputBudget::tokens(25_000);

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
///
/// A clone serves another connection on the same settings (the same factory, store, pin file
/// and hooks), each connection with its own sessions and its own memory of servers the user
/// trusted by an answer: what a network server does per client.
#[derive(Clone)]
pub struct AcpServer {
    factory: Arc<Factory>,
    connector: Connector,
    disabled: Vec<String>,
    auth: Option<ApiKeyAuth>,
    models: Option<Arc<Models>>,
    editor_tools: bool,
    task_subagent: Option<usize>,
    store: Option<Arc<dyn SessionStore>>,
    output_budget: Option<OutputBudget>,
    on_process: Option<ProcessHook>,
    sandbox: Option<Arc<Sandbox>>,
    login_hint: Option<LoginHint>,
    policy: Option<aquaregia::policy::PermissionPolicy>,
    pins: Option<PinFile>,
    trusted: Vec<String>,
    stdio_servers: bool,
    local_tools: bool,
}

impl fmt::Debug for AcpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcpServer")
            .field("connector", &self.connector)
            .field("disabled", &self.disabled)
            .field("output_budget", &self.output_budget)
            .field("on_process", &self.on_process.as_ref().map(|_| "<hook>"))
            .field("sandbox", &self.sandbox)
            .field("pins", &self.pins)
            .field("trusted", &self.trusted)
            .field("stdio_servers", &self.stdio_servers)
            .field("local_tools", &self.local_tools)
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
    /// An agent whose per-prompt configuration comes from `factory`: given the session (its
    /// id, working directory and picked model), it returns the agent to run, on any model
    /// (`client.agent(model)`, or [`AgentBuilder::new`] on any [`LanguageModel`]). For one
    /// model and the defaults, [`from_model`](Self::from_model) is shorter.
    pub fn new(factory: impl Fn(&SessionContext) -> AgentBuilder + Send + Sync + 'static) -> Self {
        Self::try_new(move |session| Ok(factory(session)))
    }

    /// An agent whose per-prompt configuration comes from a `factory` that may fail (a client
    /// that cannot be built, say): the prompt is then answered with the error.
    pub fn try_new(
        factory: impl Fn(&SessionContext) -> Result<AgentBuilder, aquaregia::Error>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self {
            factory: Arc::new(factory),
            connector: Connector::new(),
            disabled: Vec::new(),
            auth: None,
            models: None,
            editor_tools: false,
            task_subagent: None,
            store: None,
            output_budget: Some(DEFAULT_OUTPUT_BUDGET),
            on_process: None,
            sandbox: None,
            login_hint: None,
            policy: None,
            pins: None,
            trusted: Vec::new(),
            stdio_servers: true,
            local_tools: true,
        }
    }

    /// An agent on `model` for every session and every prompt: [`AgentBuilder::new`] with the
    /// SDK's defaults, to which each prompt adds the session's tools, hooks and output budget
    /// as it does to a factory's agent. Any [`LanguageModel`] will do: a
    /// [`Client`](aquaregia::Client)'s model, a [`Fallback`](aquaregia::Fallback), a provider
    /// of your own, or in tests `aquaregia::test_utils::ScriptedModel` (no HTTP at all).
    ///
    /// The agent is the same whatever the session's `model` option says; to pick the model,
    /// instructions or steps per session, give [`new`](Self::new) a factory.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let (client, model) = aquaregia::Client::from_env()?;
    /// aquaregia_acp::AcpServer::from_model(std::sync::Arc::new(client.model(model)))
    ///     .serve_stdio()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn from_model(model: Arc<dyn LanguageModel>) -> Self {
        Self::new(move |_session| AgentBuilder::new(model.clone()))
    }

    /// A permission policy for every tool call of every session (principal: the session id,
    /// front end `"acp"`, context `mode`: the session's mode). It is put inside the session
    /// modes ([`PermissionPolicy::with_session_modes`]), the one decision point for every
    /// call: [`Decision::Deny`] refuses the call with the policy's reason,
    /// [`Decision::Allow`] runs it without asking (except that plan mode still refuses
    /// anything not read-only, and a file outside the workspace still asks), and
    /// [`Decision::Ask`] leaves it to the session's mode (which may ask the user). Without
    /// one, the modes alone decide.
    ///
    /// [`PermissionPolicy::with_session_modes`]: aquaregia::policy::PermissionPolicy::with_session_modes
    /// [`Decision::Deny`]: aquaregia::policy::Decision::Deny
    /// [`Decision::Allow`]: aquaregia::policy::Decision::Allow
    /// [`Decision::Ask`]: aquaregia::policy::Decision::Ask
    #[must_use]
    pub fn permission_policy(mut self, policy: aquaregia::policy::PermissionPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Pins the sessions' MCP tools in `file` (see
    /// [`McpToolsetBuilder::pins`](aquaregia_mcp::McpToolsetBuilder::pins)), by the names
    /// the editor gives its servers, and keeps there which servers the user trusts. The first
    /// time a server is seen its tools are pinned as they are; later, a tool that is new or
    /// changed since (its description, schema or annotations, or a stdio server's resolved
    /// command) is withheld from the model until the user approves it: a
    /// `session/request_permission` naming the server and showing the diff, asked when the
    /// session's tools are listed for a prompt turn (at the start of its first turn, and
    /// after the server says its tools changed). A server marked trusted in the file (the
    /// CLI's `aquaregia mcp trust` writes the same file: [`PinFile::in_data_dir`]) has its
    /// read-only hints believed, as has one the user trusts by answering a read-only tool's
    /// question with its "always" option, which is then stored here.
    ///
    /// Without a pin file tools are not pinned, and trusting a server by an answer lasts
    /// until the agent stops.
    ///
    /// [`PinFile::in_data_dir`]: aquaregia_mcp::PinFile::in_data_dir
    #[must_use]
    pub fn pins(mut self, file: PinFile) -> Self {
        self.pins = Some(file);
        self
    }

    /// Believes the annotations (`readOnlyHint`...) of the servers the editor names `name`,
    /// in every session: their read-only tools run without a question. Servers not trusted
    /// this way (or in the [`pins`](Self::pins), or by the user's answer) are asked about
    /// like any tool, whatever their hints say.
    #[must_use]
    pub fn trust_server(mut self, name: impl Into<String>) -> Self {
        self.trusted.push(name.into());
        self
    }

    /// The template every session's MCP servers are connected with (see
    /// [`McpToolsetBuilder::connector`](aquaregia_mcp::McpToolsetBuilder::connector)): its
    /// timeout is each server's startup limit (default 30 s; a server that misses it is
    /// reported to the client, the others are still used), and its
    /// [`oauth`](Connector::oauth) (feature `oauth`) authorizes HTTP servers. Each session adds
    /// its own elicitation handler (questions go to the editor) and this server's
    /// [`on_process`](Self::on_process) hook.
    ///
    /// An agent the editor started has no terminal to send the user to a browser from: give
    /// its OAuth the token store a login elsewhere filled, without a callback, so stored
    /// tokens are used and refreshed, and a server that needs a new authorization is reported
    /// unavailable (with [`login_hint`](Self::login_hint)).
    #[must_use]
    pub fn connector(mut self, connector: Connector) -> Self {
        self.connector = connector;
        self
    }

    /// What to tell the user when a server needs an authorization this agent cannot do: given
    /// the server's URL, how to authorize it (a command to run, say). It follows the reason in
    /// the unavailable-server notice.
    #[must_use]
    pub fn login_hint(mut self, hint: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        self.login_hint = Some(Arc::new(hint));
        self
    }

    /// Tells `hook` when each session's stdio MCP server process starts and ends (see
    /// [`Connector::on_process`](aquaregia_mcp::Connector::on_process)), and likewise each
    /// local `run_command` process (the leader of its own process group): what a supervisor
    /// that must end them if this process is killed outright (SIGKILL) needs to know.
    ///
    /// ```
    /// use aquaregia_mcp::ServerProcess;
    /// # fn demo(server: aquaregia_acp::AcpServer) -> aquaregia_acp::AcpServer {
    /// server.on_process(|event| match event {
    ///     ServerProcess::Started { pid } => eprintln!("server {pid} started"),
    ///     ServerProcess::Ended { pid } => eprintln!("server {pid} is gone"),
    ///     _ => {}
    /// })
    /// # }
    /// ```
    #[must_use]
    pub fn on_process(mut self, hook: impl Fn(ServerProcess) + Send + Sync + 'static) -> Self {
        self.on_process = Some(Arc::new(hook));
        self
    }

    /// Runs the local `run_command` (the one used when the client has no terminal) through
    /// `sandbox`'s launcher, which confines it with Landlock on Linux: writes only beneath the
    /// session's working directory and the temp directory, reads everywhere, and no TCP if
    /// [`Sandbox::network`] says so. Each such tool call tells the user how it is confined,
    /// and says so where the kernel has no Landlock and the command runs unconfined. Without
    /// a sandbox (the default) local commands run unconfined, and the tool call says that.
    #[must_use]
    pub fn sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = Some(Arc::new(sandbox));
        self
    }

    /// Whether the stdio MCP servers a client names in `session/new` (or `load`/`resume`) are
    /// started, on this machine (default: yes, as for an editor that started the agent
    /// itself). An agent served to remote clients should say no: a stdio entry is a command
    /// line the client asks this machine to run. Refused entries are reported to the client
    /// as unavailable servers (at the start of the session's first turn) and the session
    /// opens with its other servers.
    #[must_use]
    pub fn allow_stdio_servers(mut self, allowed: bool) -> Self {
        self.stdio_servers = allowed;
        self
    }

    /// Whether the [`editor_tools`](Self::editor_tools) the client cannot serve run on this
    /// machine instead (default: yes): the file tools without the client's `fs`
    /// capabilities, `run_command` without its `terminal`. An agent served to remote clients
    /// should say no: those tools then exist only where the client serves them.
    #[must_use]
    pub fn local_tools(mut self, allowed: bool) -> Self {
        self.local_tools = allowed;
        self
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

    /// Keeps sessions in `store`: each completed turn is appended, `session/list` pages
    /// through it, `session/load` replays a stored session and continues it (`loadSession`
    /// and `sessionCapabilities.list` are advertised).
    #[must_use]
    pub fn session_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Gives every session the built-in tools `read_file`, `write_file`, `edit_file` and
    /// `run_command`: through the editor (`fs/*`, `terminal/*`) when the client advertises
    /// those capabilities, else local and confined to the session's `cwd`. They go through
    /// the same permission path and `disable_tools` patterns as MCP tools.
    #[must_use]
    pub fn editor_tools(mut self, enabled: bool) -> Self {
        self.editor_tools = enabled;
        self
    }

    /// Offers the built-in general subagent, the `task` tool (`Some(max_steps)`; `None`, the
    /// default: not offered): the model hands it a self-contained task, and a fresh agent
    /// from the same factory (same model and instructions) with the session's tools, at most
    /// `max_steps` steps, works on it and answers. Its tool calls go through the session's
    /// permission path; a client that advertises `clientCapabilities.subagents` sees each run
    /// as a child session linked to the `task` call (announced with `subagent_update`, its
    /// updates and permission questions on the child session) and may cancel it alone with
    /// `session/cancel` of the child session. In `plan` mode it gets the read-only tools.
    #[must_use]
    pub fn task_subagent(mut self, max_steps: Option<usize>) -> Self {
        self.task_subagent = max_steps;
        self
    }

    /// Offers a `model` config option: `default` (the model the factory uses when the session
    /// picked none) and what `list` returns (fetched once, bounded, cached). The factory sees
    /// the pick in [`SessionContext::model`].
    #[must_use]
    pub fn models(
        mut self,
        default: impl Into<String>,
        list: impl Fn() -> BoxFuture<'static, Result<Vec<String>, String>> + Send + Sync + 'static,
    ) -> Self {
        self.models = Some(Arc::new(Models::new(default.into(), Arc::new(list))));
        self
    }

    /// Requires an API key before sessions run, offered as ACP auth methods: with no usable
    /// key the agent still answers `initialize` and answers `session/new` and
    /// `session/prompt` with `auth_required` until `authenticate` succeeds.
    #[must_use]
    pub fn auth(mut self, auth: ApiKeyAuth) -> Self {
        self.auth = Some(auth);
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

    /// Serves ACP on stdin/stdout until stdin closes or the process gets SIGTERM or SIGHUP,
    /// then closes every session (no child process outlives it, grandchildren of stdio servers
    /// included). A line that is not UTF-8 or longer than 64 MiB is answered with a parse
    /// error.
    pub async fn serve_stdio(self) -> Result<(), AcpError> {
        let (stdout, written) = stdio::stdout_lines();
        let transport = agent_client_protocol::Lines::new(
            Box::pin(stdout),
            Box::pin(stdio::stdin_lines(stdio::MAX_LINE_BYTES)),
        );
        let result = self.serve_until(transport, termination()).await;
        // What was sent reaches stdout before the caller goes on (and likely exits); bounded,
        // as a client that stopped reading must not hold the agent up.
        let _ = tokio::time::timeout(STDOUT_DRAIN, written).await;
        result
    }

    /// Serves ACP over any transport of the SDK (byte streams, channels...).
    pub async fn serve(self, transport: impl ConnectTo<Agent>) -> Result<(), AcpError> {
        self.serve_until(transport, std::future::pending()).await
    }

    /// Serves ACP over a transport of whole messages, such as a WebSocket's text frames:
    /// each item of `incoming` should be one JSON-RPC message, and each `String` sent to
    /// `outgoing` is one. An item that is not one message (not JSON, two messages, a batch)
    /// is answered with a parse error, as a bad line on stdio is, quoting at most its start,
    /// and serving goes on. Serving ends, and every session of the connection is closed (its
    /// turn cancelled, its servers stopped), when `incoming` ends or fails, or `stop`
    /// completes.
    pub async fn serve_messages(
        self,
        outgoing: impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
        incoming: impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
        stop: impl Future<Output = ()>,
    ) -> Result<(), AcpError> {
        use futures::StreamExt as _;
        let incoming = incoming.map(|message| message.map(stdio::bounded));
        self.serve_until(agent_client_protocol::Lines::new(outgoing, incoming), stop)
            .await
    }

    /// Serves until the transport ends or `stop` completes, then closes every session.
    async fn serve_until(
        self,
        transport: impl ConnectTo<Agent>,
        stop: impl Future<Output = ()>,
    ) -> Result<(), AcpError> {
        let shared = Arc::new(Connection::new(Settings {
            factory: self.factory,
            plan: ConnectPlan {
                connector: self.connector,
                disabled: self.disabled.into(),
                on_process: self.on_process,
                sandbox: self.sandbox,
                login_hint: self.login_hint,
                stdio_servers: self.stdio_servers,
            },
            auth: self.auth,
            models: self.models,
            editor_tools: self.editor_tools,
            task_subagent: self.task_subagent,
            local_tools: self.local_tools,
            store: self.store,
            output_budget: self.output_budget,
            policy: Arc::new(self.policy.unwrap_or_default().with_session_modes()),
            trust: Arc::new(Trust::new(self.pins, self.trusted)),
        }));
        let dispatched = shared.clone();
        let connection = Agent
            .v1()
            .name("aquaregia")
            .on_receive_dispatch(
                async move |message: Dispatch, cx: ConnectionTo<Client>| {
                    dispatch::dispatch(&dispatched, message, &cx);
                    Ok(())
                },
                agent_client_protocol::on_receive_dispatch!(),
            )
            .connect_to(transport);
        let result = tokio::select! {
            result = connection => result,
            () = stop => Ok(()),
        };
        shared.sessions.close_all().await;
        result.map_err(|error| AcpError::Connection(error.message))
    }
}

/// SIGTERM, SIGHUP or Ctrl-C (SIGINT).
async fn termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut hangup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            tracing::warn!("cannot listen for SIGTERM/SIGHUP");
            return std::future::pending().await;
        };
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = hangup.recv() => "SIGHUP",
            Ok(()) = tokio::signal::ctrl_c() => "SIGINT",
        };
        tracing::info!(signal = name, "stopping: closing every session");
    }
    #[cfg(not(unix))]
    {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        tracing::info!("stopping: closing every session");
    }
}
