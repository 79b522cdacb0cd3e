//! [`McpToolset`]: several MCP servers connected in parallel, their tools as one list, pinned
//! ([`pins`]).

pub(crate) mod pins;
pub(crate) mod prompts;
pub(crate) mod skills;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::{BoxFuture, join_all};

use aquaregia::policy::glob_match;
use aquaregia::{OutputBudget, StepContext, StepOverrides, Tool};

use crate::config::{McpServerSpec, McpServerTimeouts};
use crate::connector::Connector;
use crate::error::McpError;
use crate::session::connection::McpConnection;
use crate::session::listing::McpTool;
use aquaregia::sync::lock;
use pins::{PinApproval, PinChange, PinFile, PinReview, ToolPin, WithheldTool};

type ConnectFuture = BoxFuture<'static, Result<McpConnection, McpError>>;
type CustomConnect = Box<dyn FnOnce(Connector) -> ConnectFuture + Send>;

/// How one server of a [`McpToolsetBuilder`] is reached.
enum Source {
    Spec(McpServerSpec),
    Connected(McpConnection),
    Custom(CustomConnect),
}

/// The tools of several MCP servers as one list, for an agent.
///
/// Servers connect in parallel, each within the startup timeout; one that fails is reported
/// in [`failures`](Self::failures) and the others are used (unless
/// [`strict`](McpToolsetBuilder::strict)). With more than one server, tools are named
/// `<server>__<tool>` (see [`prefixed_name`](crate::prefixed_name)). Tools whose exposed name
/// matches a [`disable_tools`](McpToolsetBuilder::disable_tools) glob are hidden. A name that
/// is already taken (a server listing a tool twice, or two names equal once sanitised, like
/// `a.b` and `a_b`) keeps the first tool; the others are skipped with a warning.
///
/// Cheap to clone; clones share the connections.
///
/// ```no_run
/// # async fn demo(client: aquaregia::Client) -> Result<(), aquaregia::Error> {
/// use aquaregia_mcp::{McpServerSpec, McpToolset};
///
/// let toolset = McpToolset::builder()
///     .server("fs", McpServerSpec::stdio("mcp-server-fs", vec!["/tmp".into()]))
///     .server("github", McpServerSpec::Http {
///         url: "https://mcp.example.com/mcp".into(),
///         headers: Vec::new(),
///     })
///     .disable_tools(["github__delete_*"])
///     .connect()
///     .await?;
/// for (server, error) in toolset.failures() {
///     eprintln!("{server} is unavailable: {error}");
/// }
/// let agent = client
///     .agent("gpt-5-mini")
///     .tools(toolset.tools().await?)
///     // Picks up `tools/list_changed` between steps.
///     .prepare_step(toolset.prepare_step())
///     .build()?;
/// let answer = agent.run("What changed in the repo today?").await;
/// toolset.close().await;
/// # answer?; Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpToolset {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    servers: Vec<(String, McpConnection)>,
    failures: Vec<(String, McpError)>,
    /// Per-server limits on what one tool result may put into the context.
    budgets: Vec<(String, OutputBudget)>,
    /// Every name [`McpToolset::tools`] handed out: how `prepare_step` tells the toolset's
    /// tools from the agent's own.
    handed_out: Mutex<HashSet<String>>,
    /// The list-change counter seen before the last listing.
    listed_generation: AtomicU64,
    /// Where tools are pinned, if they are.
    pins: Option<PinFile>,
    /// Asked about new and changed tools of pinned servers.
    approval: Option<PinApproval>,
    /// Each stdio server's resolved command line, for its pins.
    commands: HashMap<String, Vec<String>>,
    /// Servers whose annotations are believed.
    trusted: HashSet<String>,
    /// What was decided on each (server, tool, hash), so that a tool is asked about once.
    decisions: Mutex<HashMap<(String, String, String), bool>>,
    /// The tools withheld at the last listing.
    withheld: Mutex<Vec<WithheldTool>>,
    /// The server of each tool handed out, by the tool's exposed name.
    owners: Mutex<HashMap<String, String>>,
    /// One review of the pin file at a time.
    pin_lock: tokio::sync::Mutex<()>,
}

/// Settings for [`McpToolset::builder`].
#[must_use]
pub struct McpToolsetBuilder {
    servers: Vec<(String, Source)>,
    connector: Connector,
    strict: bool,
    always_prefix: bool,
    disabled: Vec<String>,
    budgets: Vec<(String, OutputBudget)>,
    timeouts: HashMap<String, McpServerTimeouts>,
    pins: Option<PinFile>,
    approval: Option<PinApproval>,
    commands: HashMap<String, Vec<String>>,
    trusted: HashSet<String>,
}

impl fmt::Debug for McpToolsetBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpToolsetBuilder")
            .field(
                "servers",
                &self
                    .servers
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("connector", &self.connector)
            .field("strict", &self.strict)
            .field("always_prefix", &self.always_prefix)
            .field("disabled", &self.disabled)
            .field("budgets", &self.budgets)
            .field("timeouts", &self.timeouts)
            .field("pins", &self.pins)
            .field("trusted", &self.trusted)
            .finish_non_exhaustive()
    }
}

impl McpToolsetBuilder {
    /// Pins the servers' tools in `file`: the first time a server's tools are seen, a hash of
    /// each tool's name, description, input schema and annotations is recorded (and a stdio
    /// server's command, resolved on `PATH`). At every later listing (on connect, and after
    /// `tools/list_changed`), a tool that differs from its pin, or that is new on a pinned
    /// server, is withheld from the model unless [`on_pin_review`](Self::on_pin_review)
    /// approves it; an approved tool is pinned again. A tool is asked about once per toolset
    /// for each new form; [`McpToolset::withheld`] lists what is withheld. Hashing happens at
    /// listing time, never per call.
    pub fn pins(mut self, file: PinFile) -> Self {
        self.pins = Some(file);
        self
    }

    /// Decides on each new or changed tool of a pinned server: `true` approves and re-pins
    /// it, `false` withholds it. Without it, such tools are withheld with a warning.
    pub fn on_pin_review<F, Fut>(mut self, decide: F) -> Self
    where
        F: Fn(PinReview) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = bool> + Send + 'static,
    {
        self.approval = Some(Arc::new(move |review| Box::pin(decide(review))));
        self
    }

    /// Believes the annotations (`readOnlyHint`...) of server `name`'s tools (see
    /// [`Tool::hints_trusted`]); a server marked trusted in the pin file is trusted too.
    pub fn trust(mut self, name: impl Into<String>) -> Self {
        self.trusted.insert(name.into());
        self
    }

    /// The command line of server `name` as its pins record it, for servers connected with
    /// [`connect_with`](Self::connect_with) (a [`server`](Self::server) spec records its own).
    /// The program is resolved on `PATH`.
    pub fn pinned_command(
        mut self,
        name: impl Into<String>,
        program: &str,
        args: &[String],
    ) -> Self {
        self.commands
            .insert(name.into(), pins::resolved_command(program, args));
        self
    }

    /// A server to connect, under `name` (its prefix, and its name in logs and errors).
    pub fn server(mut self, name: impl Into<String>, spec: McpServerSpec) -> Self {
        self.servers.push((name.into(), Source::Spec(spec)));
        self
    }

    /// Several servers, e.g. [`McpServersConfig::servers`](crate::McpServersConfig::servers).
    pub fn servers<I, N>(self, servers: I) -> Self
    where
        I: IntoIterator<Item = (N, McpServerSpec)>,
        N: Into<String>,
    {
        servers
            .into_iter()
            .fold(self, |builder, (name, spec)| builder.server(name, spec))
    }

    /// A server that is already connected.
    pub fn connection(mut self, name: impl Into<String>, connection: McpConnection) -> Self {
        self.servers
            .push((name.into(), Source::Connected(connection)));
        self
    }

    /// A server connected by `connect` (a custom transport), which gets the
    /// [`connector`](Self::connector) template with the server's name and startup timeout. It
    /// runs in parallel with the others, within the startup timeout.
    pub fn connect_with<F, Fut>(mut self, name: impl Into<String>, connect: F) -> Self
    where
        F: FnOnce(Connector) -> Fut + Send + 'static,
        Fut: Future<Output = Result<McpConnection, McpError>> + Send + 'static,
    {
        let connect: CustomConnect = Box::new(move |connector| Box::pin(connect(connector)));
        self.servers.push((name.into(), Source::Custom(connect)));
        self
    }

    /// Timeouts for the server called `name`, over the [`connector`](Self::connector)'s
    /// timeout and the default call timeout (from a config file: [`McpServersConfig::timeouts`]).
    ///
    /// [`McpServersConfig::timeouts`]: crate::McpServersConfig::timeouts
    pub fn server_timeouts(mut self, name: impl Into<String>, timeouts: McpServerTimeouts) -> Self {
        self.timeouts.insert(name.into(), timeouts);
        self
    }

    /// The template every server is connected with: its [`timeout`](Connector::timeout)
    /// (each server's startup limit, default 30 s; servers connect in parallel, so it also
    /// bounds the whole [`connect`](Self::connect)), its handlers (elicitation, sampling), its
    /// [`oauth`](Connector::oauth), environment inheritance, restarts and process hook. Each
    /// server gets its own name (its entry's) and, when
    /// [`server_timeouts`](Self::server_timeouts) sets one, its own startup limit.
    ///
    /// With an OAuth authorization callback, a server waiting for the user is not cut off by
    /// the startup limit (each handshake still is): the callback bounds the wait.
    pub fn connector(mut self, connector: Connector) -> Self {
        self.connector = connector;
        self
    }

    /// All or nothing: when a server fails, the others are closed and `connect` returns the
    /// first failure. Off by default.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Names tools `<server>__<tool>` even with a single server (by default only with more
    /// than one).
    pub fn always_prefix(mut self, always: bool) -> Self {
        self.always_prefix = always;
        self
    }

    /// Hides tools whose exposed name (prefixed, if prefixed) matches one of these globs:
    /// `*` matches any run of characters, `?` one character, anything else itself.
    pub fn disable_tools<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.disabled.extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Limits what one result of server `name`'s tools may put into the context: its tools
    /// carry this [`OutputBudget`] (see [`Tool::with_output_budget`]), which wins over the
    /// agent's.
    pub fn output_budget(mut self, name: impl Into<String>, budget: OutputBudget) -> Self {
        let name = name.into();
        self.budgets.retain(|(server, _)| *server != name);
        self.budgets.push((name, budget));
        self
    }

    /// Connects every server in parallel. A server that fails is in
    /// [`McpToolset::failures`]; in [`strict`](Self::strict) mode the first failure is
    /// returned instead (and the servers that did connect are closed). Dropping the future
    /// stops every attempt (started stdio servers are killed).
    pub async fn connect(self) -> Result<McpToolset, McpError> {
        let prefix = self.always_prefix || self.servers.len() > 1;
        let connector = self.connector;
        let timeout = connector.timeout;
        // Asking the user to authorize takes as long as it takes.
        let outer_timeout = Some(timeout).filter(|_| !connector.authorizes_interactively());
        let timeouts = self.timeouts;
        let mut commands = self.commands;
        for (name, source) in &self.servers {
            if let Source::Spec(McpServerSpec::Stdio { command, args, .. }) = source {
                commands
                    .entry(name.clone())
                    .or_insert_with(|| pins::resolved_command(command, args));
            }
        }
        let attempts = join_all(self.servers.into_iter().map(|(name, source)| {
            let limits = timeouts.get(&name).copied().unwrap_or_default();
            let startup = limits.connect.unwrap_or(timeout);
            let outer_timeout = outer_timeout.map(|_| startup);
            let connector = connector.clone().name(name.clone()).timeout(startup);
            async move {
                let attempt: ConnectFuture = match source {
                    Source::Connected(connection) => return (name, Ok(connection)),
                    Source::Spec(spec) => Box::pin(async move { spec.connect(connector).await }),
                    Source::Custom(connect) => connect(connector),
                };
                let result =
                    match outer_timeout {
                        None => attempt.await,
                        Some(timeout) => tokio::time::timeout(timeout, attempt)
                            .await
                            .unwrap_or_else(|_| {
                                Err(McpError::connect(
                                    &name,
                                    format!("did not start within {} s", timeout.as_secs_f64()),
                                ))
                            }),
                    };
                let result = match limits.call {
                    Some(call) => result.map(|connection| connection.with_call_timeout(call)),
                    None => result,
                };
                (name, result)
            }
        }))
        .await;
        let disabled: Arc<[String]> = self.disabled.into();
        let mut servers = Vec::new();
        let mut failures = Vec::new();
        for (name, result) in attempts {
            match result {
                Ok(mut connection) => {
                    if prefix {
                        connection = connection.with_tool_prefix(format!("{name}_"));
                    }
                    if !disabled.is_empty() {
                        let disabled = disabled.clone();
                        connection = connection.with_tool_filter(move |tool| {
                            !disabled
                                .iter()
                                .any(|pattern| glob_match(pattern, &tool.name))
                        });
                    }
                    servers.push((name, connection));
                }
                Err(error) => failures.push((name, error)),
            }
        }
        if self.strict {
            let mut errors = failures.iter().map(|(_, error)| error);
            if let Some(first) = errors.next() {
                for other in errors {
                    tracing::warn!(error = %other, "another MCP server failed too");
                }
                let first = first.clone();
                join_all(
                    servers
                        .into_iter()
                        .map(|(_, connection)| connection.close()),
                )
                .await;
                return Err(first);
            }
        }
        for (name, error) in &failures {
            tracing::warn!(server = %name, %error, "MCP server unavailable");
        }
        Ok(McpToolset {
            inner: Arc::new(Inner {
                servers,
                failures,
                budgets: self.budgets,
                pins: self.pins,
                approval: self.approval,
                commands,
                trusted: self.trusted,
                ..Inner::default()
            }),
        })
    }
}

/// No servers, no tools.
impl Default for McpToolset {
    fn default() -> Self {
        McpToolset {
            inner: Arc::default(),
        }
    }
}

impl fmt::Debug for McpToolset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpToolset")
            .field("servers", &self.inner.servers)
            .field("failures", &self.inner.failures)
            .finish_non_exhaustive()
    }
}

impl McpToolset {
    /// Settings: servers, the connector template, strictness, prefixing, disabled tools.
    pub fn builder() -> McpToolsetBuilder {
        McpToolsetBuilder {
            servers: Vec::new(),
            connector: Connector::new(),
            strict: false,
            always_prefix: false,
            disabled: Vec::new(),
            budgets: Vec::new(),
            timeouts: HashMap::new(),
            pins: None,
            approval: None,
            commands: HashMap::new(),
            trusted: HashSet::new(),
        }
    }

    /// The connected servers, by name, in the order given. Their tools are named (prefixed,
    /// filtered) as the toolset names them.
    pub fn connections(&self) -> &[(String, McpConnection)] {
        &self.inner.servers
    }

    /// The servers that could not be connected, and why.
    pub fn failures(&self) -> &[(String, McpError)] {
        &self.inner.failures
    }

    /// Every connected server's tools, in server order. Fails if a server cannot list its
    /// tools; see [`available_tools`](Self::available_tools) for the lenient version.
    pub async fn tools(&self) -> Result<Vec<Tool>, McpError> {
        let generation = self.generation();
        let listings = join_all(
            self.inner
                .servers
                .iter()
                .map(|(_, c)| c.tools_and_listing()),
        )
        .await;
        let mut named = Vec::with_capacity(listings.len());
        for ((name, connection), listing) in self.inner.servers.iter().zip(listings) {
            let (tools, listing) = listing?;
            let tools = self.screen(name, connection, tools, &listing).await;
            named.push((name.as_str(), tools));
        }
        Ok(self.merge(generation, named))
    }

    /// Like [`tools`](Self::tools), but a server that cannot list its tools (it went away)
    /// is logged and skipped.
    pub async fn available_tools(&self) -> Vec<Tool> {
        let generation = self.generation();
        let listings = join_all(
            self.inner
                .servers
                .iter()
                .map(|(_, c)| c.tools_and_listing()),
        )
        .await;
        let mut named = Vec::with_capacity(listings.len());
        for ((name, connection), listing) in self.inner.servers.iter().zip(listings) {
            match listing {
                Ok((tools, listing)) => {
                    let tools = self.screen(name, connection, tools, &listing).await;
                    named.push((name.as_str(), tools));
                }
                Err(error) => {
                    tracing::warn!(server = %name, %error, "MCP server tools unavailable");
                }
            }
        }
        self.merge(generation, named)
    }

    /// The server (by the name it was given to the builder) whose tool the model knows as
    /// `tool`, for a tool this toolset listed.
    pub fn server_of(&self, tool: &str) -> Option<String> {
        lock(&self.inner.owners).get(tool).cloned()
    }

    /// The tools withheld at the last listing because they are new or changed on a pinned
    /// server and were not approved (see [`McpToolsetBuilder::pins`]).
    pub fn withheld(&self) -> Vec<WithheldTool> {
        lock(&self.inner.withheld).clone()
    }

    /// Server `server`'s tools as they may be used: trusted or not, and without those that
    /// differ from their pins and are not approved.
    async fn screen(
        &self,
        server: &str,
        connection: &McpConnection,
        tools: Vec<Tool>,
        listing: &[McpTool],
    ) -> Vec<Tool> {
        let mut trusted = self.inner.trusted.contains(server);
        let Some(file) = &self.inner.pins else {
            return tools
                .into_iter()
                .map(|tool| tool.with_trusted_hints(trusted))
                .collect();
        };
        let _one_at_a_time = self.inner.pin_lock.lock().await;
        let mut pins = match file.load() {
            Ok(pins) => pins,
            Err(error) => {
                tracing::warn!(
                    server, %error,
                    "cannot read the tool pins; the server's tools are withheld"
                );
                return Vec::new();
            }
        };
        let command = self.inner.commands.get(server).cloned();
        let mut dirty = false;
        let mut withheld = Vec::new();
        match pins.servers.get_mut(server) {
            None => {
                let entry = pins.servers.entry(server.to_owned()).or_default();
                entry.command = command;
                for tool in listing {
                    let record = pins::record(tool);
                    let hash = pins::hash(&record);
                    entry
                        .tools
                        .insert(tool.name.clone(), ToolPin { hash, tool: record });
                }
                dirty = true;
            }
            Some(entry) => {
                trusted |= entry.trusted;
                let command_changed = entry.command != command;
                for tool in listing {
                    let record = pins::record(tool);
                    let hash = pins::hash(&record);
                    let old = entry.tools.get(&tool.name);
                    if !command_changed && old.is_some_and(|pin| pin.hash == hash) {
                        continue;
                    }
                    let review = PinReview {
                        server: server.to_owned(),
                        tool: tool.name.clone(),
                        command: command.clone(),
                        change: if old.is_some() {
                            PinChange::Changed
                        } else {
                            PinChange::New
                        },
                        diff: pins::diff(
                            old.map(|pin| &pin.tool),
                            &record,
                            command_changed
                                .then_some((entry.command.as_deref(), command.as_deref())),
                        ),
                    };
                    let key = (server.to_owned(), tool.name.clone(), hash.clone());
                    let decided = lock(&self.inner.decisions).get(&key).copied();
                    let approved = match decided {
                        Some(decided) => decided,
                        None => {
                            let decided = match &self.inner.approval {
                                Some(approve) => approve(review.clone()).await,
                                None => {
                                    tracing::warn!(
                                        server,
                                        tool = %tool.name,
                                        "withholding an MCP tool that is new or changed since \
                                         it was pinned (nothing approves it)"
                                    );
                                    false
                                }
                            };
                            lock(&self.inner.decisions).insert(key, decided);
                            decided
                        }
                    };
                    if approved {
                        entry
                            .tools
                            .insert(tool.name.clone(), ToolPin { hash, tool: record });
                        dirty = true;
                    } else {
                        withheld.push(WithheldTool {
                            server: server.to_owned(),
                            name: connection.exposed_name(&tool.name),
                            review,
                        });
                    }
                }
                if command_changed && withheld.is_empty() {
                    entry.command = command;
                    dirty = true;
                }
            }
        }
        if dirty && let Err(error) = file.save(&pins) {
            tracing::warn!(server, %error, "cannot write the tool pins");
        }
        let hidden: HashSet<&str> = withheld.iter().map(|tool| tool.name.as_str()).collect();
        let tools = tools
            .into_iter()
            .filter(|tool| !hidden.contains(tool.name()))
            .map(|tool| tool.with_trusted_hints(trusted))
            .collect();
        let mut all = lock(&self.inner.withheld);
        all.retain(|tool| tool.server != server);
        all.extend(withheld);
        tools
    }

    /// One list without duplicate names: the first tool of a name wins.
    fn merge(&self, generation: u64, listings: Vec<(&str, Vec<Tool>)>) -> Vec<Tool> {
        let mut seen = HashSet::new();
        let mut tools = Vec::new();
        let mut owners = lock(&self.inner.owners);
        for (server, listing) in listings {
            let budget = self
                .inner
                .budgets
                .iter()
                .find(|(name, _)| name == server)
                .map(|&(_, budget)| budget);
            for mut tool in listing {
                if seen.contains(tool.name()) {
                    tracing::warn!(
                        server,
                        tool = tool.name(),
                        "skipping a tool whose name is already taken (listed twice, or equal \
                         to another once sanitised); the first one is kept"
                    );
                    continue;
                }
                seen.insert(tool.name().to_owned());
                owners.insert(tool.name().to_owned(), server.to_owned());
                if let Some(budget) = budget {
                    tool = tool.with_output_budget(budget);
                }
                tools.push(tool);
            }
        }
        drop(owners);
        lock(&self.inner.handed_out).extend(seen);
        self.inner
            .listed_generation
            .store(generation, Ordering::Relaxed);
        tools
    }

    /// The sum of every server's list-change counter: it moves on any `tools/list_changed`.
    pub fn generation(&self) -> u64 {
        self.inner
            .servers
            .iter()
            .map(|(_, connection)| *connection.tools_changed().borrow())
            .sum()
    }

    /// A callback for [`AgentBuilder::prepare_step`](aquaregia::AgentBuilder::prepare_step) that
    /// picks up `tools/list_changed` from any server between steps: the agent's own tools
    /// stay, the toolset's are replaced by the current listing (servers that went away are
    /// skipped). Nothing is fetched while nothing changed.
    ///
    /// Use it with tools from [`tools`](Self::tools) or
    /// [`available_tools`](Self::available_tools), listed before the run starts.
    pub fn prepare_step(
        &self,
    ) -> impl Fn(&StepContext<'_>) -> BoxFuture<'static, Result<StepOverrides, aquaregia::Error>>
    + Send
    + Sync
    + 'static {
        // (last generation seen, whether the agent's initial tools are stale)
        let state = Arc::new(Mutex::new((
            self.inner.listed_generation.load(Ordering::Relaxed),
            false,
        )));
        let toolset = self.clone();
        move |ctx| {
            let own: Vec<Tool> = {
                let handed_out = lock(&toolset.inner.handed_out);
                ctx.tools()
                    .iter()
                    .filter(|tool| !handed_out.contains(tool.name()))
                    .cloned()
                    .collect()
            };
            let (toolset, state) = (toolset.clone(), state.clone());
            Box::pin(async move {
                // List changes are counted as the transport reads them, so one sent with the
                // last tool results is already in the generation.
                let generation = toolset.generation();
                {
                    let mut state = lock(&state);
                    if state.0 == generation && !state.1 {
                        return Ok(StepOverrides::new());
                    }
                    if state.0 != generation {
                        tracing::info!("MCP tool list changed");
                    }
                    *state = (generation, true);
                }
                let mut tools = own;
                let taken: HashSet<String> = tools.iter().map(|t| t.name().to_owned()).collect();
                for tool in toolset.available_tools().await {
                    if taken.contains(tool.name()) {
                        tracing::warn!(
                            tool = tool.name(),
                            "skipping an MCP tool named like one of the agent's own tools"
                        );
                    } else {
                        tools.push(tool);
                    }
                }
                Ok(StepOverrides::new().tools(tools))
            })
        }
    }

    /// Closes every server (see [`McpConnection::close`]).
    pub async fn close(&self) {
        join_all(
            self.inner
                .servers
                .iter()
                .map(|(_, connection)| connection.clone().close()),
        )
        .await;
    }
}
