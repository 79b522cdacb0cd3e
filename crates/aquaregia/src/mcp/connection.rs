//! [`McpConnection`]: one running MCP client session, and the tools it hands out.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientNotification, ClientRequest, Implementation,
    ListToolsRequest, PaginatedRequestParams, ProtocolVersion, RequestId, RequestMetaObject,
    ServerNotification, ServerResult, SubscriptionFilter,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer,
    PeerRequestOptions, RunningService, ServiceError,
};
use rmcp::transport::IntoTransport;
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::content::{map_raw_result, map_result};
use super::error::McpError;
use super::stdio::StdioProcess;
use crate::tool::{
    MAX_TOOL_NAME_LEN, Tool, ToolAnnotations, ToolDescriptor, ToolExecError, ToolExecutor,
    ToolOutput,
};

/// Default limit on one tool call.
pub(crate) const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// Limit on each `tools/list` page.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);
/// Upper bound on `tools/list` pages, against a server that never stops paginating.
const MAX_PAGES: usize = 1000;

type ToolFilter = dyn Fn(&ToolDescriptor) -> bool + Send + Sync;

/// A connected MCP server. Cheap to clone; clones share the session.
///
/// [`tools`](Self::tools) turns the server's tools into [`Tool`]s; the `with_*` methods return a
/// connection with other settings for the tools made from it (the session stays shared).
/// Dropping the last clone, or [`close`](Self::close), ends the session (and a stdio server's
/// whole process group); tools made from it then fail with [`McpError::Disconnected`].
#[derive(Clone)]
pub struct McpConnection {
    shared: Arc<Shared>,
    view: Arc<View>,
}

/// Settings of one [`McpConnection`] value, with the tools last made under them.
struct View {
    call_timeout: Option<Duration>,
    prefix: Option<String>,
    meta: Option<RequestMetaObject>,
    filter: Option<Arc<ToolFilter>>,
    /// The converted tools and the listing generation they came from.
    converted: Mutex<Option<(u64, Vec<Tool>)>>,
}

impl View {
    fn with(&self, change: impl FnOnce(&mut View)) -> Arc<View> {
        let mut view = View {
            call_timeout: self.call_timeout,
            prefix: self.prefix.clone(),
            meta: self.meta.clone(),
            filter: self.filter.clone(),
            converted: Mutex::new(None),
        };
        change(&mut view);
        Arc::new(view)
    }
}

pub(crate) struct Shared {
    name: String,
    peer: Peer<RoleClient>,
    service: Mutex<Option<RunningService<RoleClient, Handler>>>,
    /// Cancelled when the session ends: in-flight calls return at once.
    closed: CancellationToken,
    changes: Arc<Changes>,
    /// The last raw listing; the async lock also coalesces concurrent refreshes.
    listing: tokio::sync::Mutex<Option<Listing>>,
    process: Mutex<Option<Arc<StdioProcess>>>,
    info: McpServerInfo,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.closed.cancel();
        // `StdioProcess` kills its process group when dropped; the service's own drop guard
        // stops the rmcp task.
    }
}

#[derive(Clone)]
struct Listing {
    generation: u64,
    tools: Arc<[McpTool]>,
}

/// A tool as the server described it.
#[derive(Debug, Clone)]
struct McpTool {
    name: String,
    description: String,
    schema: Value,
    annotations: ToolAnnotations,
}

/// Counts `tools/list_changed` notifications.
pub(crate) struct Changes {
    generation: watch::Sender<u64>,
}

impl Changes {
    fn new() -> Self {
        Self {
            generation: watch::Sender::new(0),
        }
    }

    fn bump(&self) {
        self.generation.send_modify(|generation| *generation += 1);
    }

    fn current(&self) -> u64 {
        *self.generation.borrow()
    }
}

/// rmcp's client handler: announces aquaregia and records list changes.
pub(crate) struct Handler {
    changes: Arc<Changes>,
    server: String,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("aquaregia", env!("CARGO_PKG_VERSION")),
        );
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        info
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        tracing::debug!(server = %self.server, "tools/list_changed");
        self.changes.bump();
        std::future::ready(())
    }
}

/// Who the server says it is.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpServerInfo {
    /// The server's implementation name.
    pub name: Option<String>,
    /// Its version.
    pub version: Option<String>,
    /// A human-readable title.
    pub title: Option<String>,
    /// The negotiated MCP protocol version (e.g. `2025-11-25`, `2026-07-28`).
    pub protocol_version: String,
    /// Usage instructions the server gave.
    pub instructions: Option<String>,
}

/// Which handshake to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handshake {
    /// `server/discover` (2026-07-28) first, falling back to a 2025-11-25 `initialize` when
    /// the server answers like a legacy server. Never an `initialize` claiming 2026-07-28.
    Auto,
    /// Only the 2025-11-25 `initialize` handshake.
    Initialize,
}

/// A failed handshake.
pub(crate) struct HandshakeError {
    pub(crate) error: McpError,
    /// The server answered `server/discover` with something that is neither a discover
    /// result nor an error (some servers answer unknown methods with `{}`): a fresh
    /// transport with [`Handshake::Initialize`] will likely work.
    pub(crate) discover_confused: bool,
}

/// Runs the MCP handshake over `transport` and starts watching for list changes.
pub(crate) async fn establish<T, E, A>(
    transport: T,
    name: String,
    timeout: Duration,
    process: Option<StdioProcess>,
    handshake: Handshake,
) -> Result<McpConnection, HandshakeError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let changes = Arc::new(Changes::new());
    let handler = Handler {
        changes: changes.clone(),
        server: name.clone(),
    };
    let lifecycle = match handshake {
        Handshake::Auto => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
        Handshake::Initialize => ClientLifecycleMode::Initialize,
    };
    let started = tokio::time::timeout(timeout, handler.serve_with_lifecycle(transport, lifecycle));
    let (failure, discover_confused) = match started.await {
        Ok(Ok(service)) => return Ok(finish_connect(service, name, changes, process).await),
        Ok(Err(error)) => (
            format!("`{name}`: {}", describe_init_error(&error)),
            handshake == Handshake::Auto
                && matches!(
                    error,
                    ClientInitializeError::ExpectedInitResult(_)
                        | ClientInitializeError::ExpectedInitResponse(_)
                        | ClientInitializeError::LegacyFallbackFailed { .. }
                ),
        ),
        Err(_) => (
            format!("`{name}` did not complete the MCP handshake within {timeout:?}"),
            false,
        ),
    };
    let message = match process {
        Some(process) => {
            process.wait_exit(Duration::from_millis(500)).await;
            format!("{failure}; {}", process.describe_failure(&name))
        }
        None => failure,
    };
    Err(HandshakeError {
        error: McpError::Connect(message),
        discover_confused,
    })
}

fn describe_init_error(error: &ClientInitializeError) -> String {
    // rmcp's Display of transport errors names Rust types; the causes say what failed.
    let (mut message, mut source) = match error {
        ClientInitializeError::TransportError { error, context } => (
            format!("{context}"),
            Some(error.error.as_ref() as &(dyn std::error::Error + 'static)),
        ),
        other => (other.to_string(), std::error::Error::source(other)),
    };
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !message.contains(&cause_text) {
            message.push_str(": ");
            message.push_str(&cause_text);
        }
        source = cause.source();
    }
    message
}

async fn finish_connect(
    service: RunningService<RoleClient, Handler>,
    name: String,
    changes: Arc<Changes>,
    process: Option<StdioProcess>,
) -> McpConnection {
    let peer = service.peer().clone();
    let info = peer
        .peer_info()
        .map(|info| McpServerInfo {
            name: info.server_info.as_ref().map(|i| i.name.clone()),
            version: info.server_info.as_ref().map(|i| i.version.clone()),
            title: info.server_info.as_ref().and_then(|i| i.title.clone()),
            protocol_version: info.protocol_version.to_string(),
            instructions: info.instructions.clone(),
        })
        .unwrap_or_default();
    let modern = peer
        .peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize());
    tracing::info!(server = %name, protocol = %info.protocol_version, "MCP server connected");
    let closed = CancellationToken::new();
    if modern {
        listen_for_changes(&peer, &name, &changes, &closed).await;
    }
    McpConnection {
        shared: Arc::new(Shared {
            name,
            peer,
            service: Mutex::new(Some(service)),
            closed,
            changes,
            listing: tokio::sync::Mutex::new(None),
            process: Mutex::new(process.map(Arc::new)),
            info,
        }),
        view: Arc::new(View {
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
            prefix: None,
            meta: None,
            filter: None,
            converted: Mutex::new(None),
        }),
    }
}

/// On 2026-07-28 sessions list changes only arrive on a `subscriptions/listen` stream.
async fn listen_for_changes(
    peer: &Peer<RoleClient>,
    name: &str,
    changes: &Arc<Changes>,
    closed: &CancellationToken,
) {
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let subscription = tokio::time::timeout(Duration::from_secs(10), peer.listen(filter)).await;
    let mut subscription = match subscription {
        Ok(Ok(subscription)) => subscription,
        Ok(Err(error)) => {
            tracing::warn!(server = %name, %error, "subscriptions/listen failed; tool list changes will not be seen");
            return;
        }
        Err(_) => {
            tracing::warn!(server = %name, "subscriptions/listen was not acknowledged; tool list changes will not be seen");
            return;
        }
    };
    let (changes, closed, name) = (changes.clone(), closed.clone(), name.to_owned());
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                () = closed.cancelled() => break,
                next = subscription.next() => next,
            };
            match next {
                Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                    tracing::debug!(server = %name, "tools/list_changed (subscription)");
                    changes.bump();
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(error) => {
                    tracing::debug!(server = %name, %error, "list-change subscription ended");
                    break;
                }
            }
        }
    });
}

impl fmt::Debug for McpConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpConnection")
            .field("server", &self.shared.name)
            .field("protocol_version", &self.shared.info.protocol_version)
            .field("call_timeout", &self.view.call_timeout)
            .field("prefix", &self.view.prefix)
            .finish_non_exhaustive()
    }
}

impl McpConnection {
    /// The server's tools as [`Tool`]s, in the server's order.
    ///
    /// Served from a cache until the server announces a list change; refreshes are
    /// coalesced, and an older listing never replaces a newer one. Tools are the same `Arc`s
    /// while nothing changes, so agents can tell the tool set did not change.
    pub async fn tools(&self) -> Result<Vec<Tool>, McpError> {
        if self.shared.closed.is_cancelled() {
            return Err(McpError::Disconnected);
        }
        let current = self.shared.changes.current();
        if let Some((generation, tools)) = &*lock(&self.view.converted)
            && *generation >= current
        {
            return Ok(tools.clone());
        }
        let listing = self.shared.listing().await?;
        let tools = self.convert(&listing.tools);
        let mut converted = lock(&self.view.converted);
        if converted
            .as_ref()
            .is_none_or(|(generation, _)| *generation <= listing.generation)
        {
            *converted = Some((listing.generation, tools.clone()));
        }
        Ok(tools)
    }

    fn convert(&self, tools: &[McpTool]) -> Vec<Tool> {
        let call = Arc::new(CallContext {
            peer: self.shared.peer.clone(),
            closed: self.shared.closed.clone(),
            timeout: self.view.call_timeout,
            meta: self.view.meta.clone(),
            shared: Arc::downgrade(&self.shared),
        });
        tools
            .iter()
            .filter_map(|tool| {
                let name = match &self.view.prefix {
                    Some(prefix) => prefixed_name(prefix, &tool.name),
                    None => tool.name.clone(),
                };
                let descriptor = ToolDescriptor {
                    name,
                    description: tool.description.clone(),
                    input_schema: tool.schema.clone(),
                };
                if let Some(keep) = &self.view.filter
                    && !keep(&descriptor)
                {
                    return None;
                }
                let executor = Arc::new(McpToolExecutor {
                    call: call.clone(),
                    name: tool.name.clone(),
                });
                Some(Tool::new(descriptor, executor).with_annotations(tool.annotations.clone()))
            })
            .collect()
    }

    /// Per-call time limit for tools made from this connection (default 300 s; `None` for no
    /// limit). On expiry the call fails with [`McpError::CallTimeout`] and the server is sent
    /// `notifications/cancelled`; the connection stays usable.
    #[must_use]
    pub fn with_call_timeout(self, timeout: impl Into<Option<Duration>>) -> Self {
        let timeout = timeout.into();
        self.with_view(|view| view.call_timeout = timeout)
    }

    /// Names tools `<prefix>_<name>` (sanitised to `[A-Za-z0-9_-]`, at most 64 characters
    /// with a stable hash when cut). Calls still use the server's own names.
    #[must_use]
    pub fn with_tool_prefix(self, prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        self.with_view(|view| view.prefix = Some(prefix))
    }

    /// MCP `_meta` sent with every tool call (auth context, tracing...). The model never sees it.
    #[must_use]
    pub fn with_call_meta(self, meta: Map<String, Value>) -> Self {
        self.with_view(|view| view.meta = Some(RequestMetaObject::from(meta)))
    }

    /// Keeps only the tools for which `keep` returns true. It sees each tool's descriptor as
    /// the model would (after prefixing), the same for every transport.
    #[must_use]
    pub fn with_tool_filter(
        self,
        keep: impl Fn(&ToolDescriptor) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.with_view(|view| view.filter = Some(Arc::new(keep)))
    }

    fn with_view(self, change: impl FnOnce(&mut View)) -> Self {
        Self {
            view: self.view.with(change),
            shared: self.shared,
        }
    }

    /// A counter bumped on every `tools/list_changed`; `changed().await` on it to react.
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.shared.changes.generation.subscribe()
    }

    /// Who the server says it is, and the negotiated protocol version.
    pub fn server_info(&self) -> &McpServerInfo {
        &self.shared.info
    }

    /// The underlying rmcp peer, for what this module does not wrap (prompts, resources...).
    /// Requests sent through it share the session.
    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.shared.peer
    }

    /// The name used for this server in logs and errors.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Whether the session has ended (closed, dropped elsewhere, or the server went away).
    pub fn is_closed(&self) -> bool {
        self.shared.closed.is_cancelled() || self.shared.peer.is_transport_closed()
    }

    /// Ends the session for every clone: in-flight calls fail with
    /// [`McpError::Disconnected`], the transport is closed, and a stdio server gets its stdin
    /// closed, then SIGTERM, then SIGKILL, as a whole process group.
    pub async fn close(self) -> Result<(), McpError> {
        let shared = &self.shared;
        shared.closed.cancel();
        let service = lock(&shared.service).take();
        if let Some(service) = service {
            let _ = service.cancel().await;
        }
        let process = lock(&shared.process).take();
        if let Some(process) = process {
            process.shutdown().await;
        }
        Ok(())
    }
}

impl Shared {
    /// The current listing: cached unless a change came in since it was fetched.
    async fn listing(&self) -> Result<Listing, McpError> {
        let mut cached = tokio::select! {
            () = self.closed.cancelled() => return Err(McpError::Disconnected),
            guard = self.listing.lock() => guard,
        };
        let generation = self.changes.current();
        if let Some(listing) = &*cached
            && listing.generation >= generation
        {
            return Ok(listing.clone());
        }
        // Tagged with the generation seen before fetching: a change during the fetch makes
        // the next call fetch again.
        let tools = tokio::select! {
            () = self.closed.cancelled() => return Err(McpError::Disconnected),
            tools = self.fetch_tools() => tools?,
        };
        let listing = Listing {
            generation,
            tools: tools.into(),
        };
        *cached = Some(listing.clone());
        Ok(listing)
    }

    async fn fetch_tools(&self) -> Result<Vec<McpTool>, McpError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = HashSet::new();
        for _ in 0..MAX_PAGES {
            let mut params = PaginatedRequestParams::default();
            params.cursor = cursor.take();
            let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
            let response = self
                .peer
                .send_request_with_option(request, PeerRequestOptions::with_timeout(LIST_TIMEOUT))
                .await;
            let response = match response {
                Ok(handle) => handle.await_response().await,
                Err(error) => Err(error),
            };
            let next = match response {
                Ok(ServerResult::ListToolsResult(page)) => {
                    tools.extend(page.tools.into_iter().map(McpTool::from_rmcp));
                    page.next_cursor
                }
                // A listing rmcp could not type (e.g. a schema that is not an object).
                Ok(ServerResult::CustomResult(page)) => self.parse_raw_page(&page.0, &mut tools)?,
                Ok(_) => {
                    return Err(McpError::ListTools(format!(
                        "`{}`: the server answered tools/list with something else",
                        self.name
                    )));
                }
                Err(error) => return Err(self.list_error(error).await),
            };
            match next {
                Some(next) if !seen.insert(next.clone()) => {
                    return Err(McpError::ListTools(format!(
                        "`{}`: the server repeated the pagination cursor `{next}`",
                        self.name
                    )));
                }
                Some(next) => cursor = Some(next),
                None => return Ok(tools),
            }
        }
        Err(McpError::ListTools(format!(
            "`{}`: more than {MAX_PAGES} pages of tools",
            self.name
        )))
    }

    fn parse_raw_page(
        &self,
        page: &Value,
        tools: &mut Vec<McpTool>,
    ) -> Result<Option<String>, McpError> {
        let Some(items) = page.get("tools").and_then(Value::as_array) else {
            return Err(McpError::ListTools(format!(
                "`{}`: tools/list result has no `tools` array",
                self.name
            )));
        };
        for item in items {
            let Some(name) = item.get("name").and_then(Value::as_str) else {
                tracing::warn!(server = %self.name, tool = %item, "skipping a tool without a name");
                continue;
            };
            let schema = item.get("inputSchema").cloned().unwrap_or(Value::Null);
            if !schema.is_object() {
                tracing::warn!(
                    server = %self.name, tool = name,
                    "the tool's input schema is not a JSON object; it is kept as given and \
                     its arguments are not validated"
                );
            }
            let text = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_owned);
            let hints = item.get("annotations");
            let hint = |key: &str| hints.and_then(|h| h.get(key)).and_then(Value::as_bool);
            let title = text("title").or_else(|| {
                hints
                    .and_then(|h| h.get("title"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            });
            tools.push(McpTool {
                name: name.to_owned(),
                description: text("description")
                    .or_else(|| title.clone())
                    .unwrap_or_default(),
                schema,
                annotations: annotations(
                    title,
                    hint("readOnlyHint"),
                    hint("destructiveHint"),
                    hint("idempotentHint"),
                    hint("openWorldHint"),
                ),
            });
        }
        Ok(page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned))
    }

    async fn list_error(&self, error: ServiceError) -> McpError {
        match self.session_error(error, "tools/list").await {
            McpError::Transport(message) => McpError::ListTools(message),
            other => other,
        }
    }

    /// Maps a failed request: a dead stdio server is described with its exit status and
    /// stderr, and ends the session for everyone.
    async fn session_error(&self, error: ServiceError, method: &'static str) -> McpError {
        match error {
            ServiceError::McpError(data) => McpError::Protocol {
                server: self.name.clone(),
                method,
                code: data.code.0,
                message: data.message.into_owned(),
            },
            ServiceError::Timeout { .. } => {
                McpError::Transport(format!("`{}`: {method} got no answer in time", self.name))
            }
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => self.gone().await,
            other => McpError::Transport(format!("`{}`: {method}: {other}", self.name)),
        }
    }

    /// The session is over; say why if a process exit explains it.
    async fn gone(&self) -> McpError {
        let process = lock(&self.process).clone();
        let exited = match &process {
            Some(process) => process
                .wait_exit(Duration::from_millis(500))
                .await
                .is_some(),
            None => false,
        };
        match process {
            Some(process) if exited => {
                let error = McpError::ServerExited(process.describe_failure(&self.name));
                tracing::warn!(server = %self.name, %error, "MCP server exited");
                self.closed.cancel();
                error
            }
            _ => McpError::Disconnected,
        }
    }
}

impl McpTool {
    fn from_rmcp(tool: rmcp::model::Tool) -> Self {
        let hints = tool.annotations.as_ref();
        let title = tool
            .title
            .clone()
            .or_else(|| hints.and_then(|h| h.title.clone()));
        Self {
            description: tool
                .description
                .as_deref()
                .map(str::to_owned)
                .or_else(|| title.clone())
                .unwrap_or_default(),
            annotations: annotations(
                title,
                hints.and_then(|h| h.read_only_hint),
                hints.and_then(|h| h.destructive_hint),
                hints.and_then(|h| h.idempotent_hint),
                hints.and_then(|h| h.open_world_hint),
            ),
            schema: Value::Object(Arc::unwrap_or_clone(tool.input_schema)),
            name: tool.name.into_owned(),
        }
    }
}

fn annotations(
    title: Option<String>,
    read_only: Option<bool>,
    destructive: Option<bool>,
    idempotent: Option<bool>,
    open_world: Option<bool>,
) -> ToolAnnotations {
    let mut annotations = ToolAnnotations::new();
    annotations.title = title;
    annotations.read_only = read_only;
    annotations.destructive = destructive;
    annotations.idempotent = idempotent;
    annotations.open_world = open_world;
    annotations
}

/// `<prefix>_<name>` sanitised to `[A-Za-z0-9_-]`; over 64 characters it is cut and ends
/// with a hash of the full name, so distinct long names stay distinct and stable.
///
/// ```
/// use aquaregia::mcp::prefixed_name;
/// assert_eq!(prefixed_name("fs", "read file"), "fs_read_file");
/// let long = prefixed_name("server", &"x".repeat(100));
/// assert_eq!(long.len(), 64);
/// assert_eq!(long, prefixed_name("server", &"x".repeat(100)));
/// ```
pub fn prefixed_name(prefix: &str, name: &str) -> String {
    let full = format!("{prefix}_{name}");
    let mut sanitized: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if sanitized.len() > MAX_TOOL_NAME_LEN {
        let hash = format!("_{:08x}", fnv1a(full.as_bytes()) as u32);
        sanitized.truncate(MAX_TOOL_NAME_LEN - hash.len());
        sanitized.push_str(&hash);
    }
    sanitized
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What every tool of one `tools()` call shares: the session's sink and the call settings.
struct CallContext {
    peer: Peer<RoleClient>,
    closed: CancellationToken,
    timeout: Option<Duration>,
    meta: Option<RequestMetaObject>,
    /// Only to explain a dead server; tools never keep the session alive.
    shared: Weak<Shared>,
}

struct McpToolExecutor {
    call: Arc<CallContext>,
    name: String,
}

#[async_trait::async_trait]
impl ToolExecutor for McpToolExecutor {
    async fn execute(&self, args: Value) -> Result<ToolOutput, ToolExecError> {
        self.call
            .call(&self.name, args)
            .await
            .map_err(|error| match error {
                CallError::Mcp(error) => ToolExecError::from(error),
                CallError::Tool(error) => error,
            })
    }
}

enum CallError {
    Mcp(McpError),
    Tool(ToolExecError),
}

impl From<McpError> for CallError {
    fn from(error: McpError) -> Self {
        Self::Mcp(error)
    }
}

impl CallContext {
    async fn call(&self, name: &str, args: Value) -> Result<ToolOutput, CallError> {
        if self.closed.is_cancelled() {
            return Err(McpError::Disconnected.into());
        }
        let arguments = match args {
            Value::Object(arguments) => Some(arguments),
            Value::Null => None,
            _ => {
                return Err(CallError::Tool(ToolExecError::InvalidArguments(
                    "MCP tool arguments must be a JSON object".into(),
                )));
            }
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments;
        params.meta.clone_from(&self.meta);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut handle = match self
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(self.session_error(error).await.into()),
        };
        // Dropped with the call (agent cancelled): the server is told to stop.
        let mut guard = CancelOnDrop {
            peer: &self.peer,
            id: Some(handle.id.clone()),
        };
        let timeout = async {
            match self.timeout {
                Some(timeout) => tokio::time::sleep(timeout).await,
                None => std::future::pending().await,
            }
        };
        let response = tokio::select! {
            biased;
            response = &mut handle.rx => response,
            () = self.closed.cancelled() => {
                guard.id = None;
                return Err(McpError::Disconnected.into());
            }
            () = timeout => {
                if let Some(id) = guard.id.take() {
                    let _ = self.peer.send_notification(cancelled(id, "request timeout")).await;
                }
                return Err(McpError::CallTimeout.into());
            }
        };
        guard.id = None;
        match response {
            Ok(Ok(ServerResult::CallToolResult(result))) => {
                map_result(result).map_err(CallError::Tool)
            }
            Ok(Ok(ServerResult::CustomResult(result))) => {
                map_raw_result(result.0).map_err(CallError::Tool)
            }
            Ok(Ok(ServerResult::EmptyResult(_))) => Ok(ToolOutput::default()),
            Ok(Ok(_)) => Err(CallError::Tool(ToolExecError::Execution(
                "the MCP server answered tools/call with something else".into(),
            ))),
            Ok(Err(error)) => Err(self.session_error(error).await.into()),
            Err(_) => Err(self
                .session_error(ServiceError::TransportClosed)
                .await
                .into()),
        }
    }

    async fn session_error(&self, error: ServiceError) -> McpError {
        match self.shared.upgrade() {
            Some(shared) => shared.session_error(error, "tools/call").await,
            None => McpError::Disconnected,
        }
    }
}

fn cancelled(id: RequestId, reason: &str) -> ClientNotification {
    ClientNotification::CancelledNotification(CancelledNotification::new(
        CancelledNotificationParam::new(Some(id), Some(reason.to_owned())),
    ))
}

/// Sends `notifications/cancelled` for a request abandoned mid-flight.
struct CancelOnDrop<'a> {
    peer: &'a Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let peer = self.peer.clone();
            runtime.spawn(async move {
                let _ = peer
                    .send_notification(cancelled(id, "the caller cancelled the tool call"))
                    .await;
            });
        }
    }
}
