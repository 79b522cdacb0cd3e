//! [`McpConnection`]: one running MCP client session, and the tools it hands out.

mod prompts;

pub use prompts::{McpPrompt, McpPromptArgument, RenderedPrompt};

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::ErrorData;
#[allow(deprecated)] // sampling: deprecated by SEP-2577, still used by 2025-11-25 servers
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    CustomNotification, ElicitRequestParams, ElicitResult, ElicitationCapability,
    ExtensionCapabilities, FormElicitationCapability, Implementation, ProtocolVersion,
    RequestMetaObject, SamplingCapability, TASKS_EXTENSION_ID, UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RunningService, ServiceError};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::call::{CallContext, McpToolExecutor, ToolTarget};
use super::elicitation;
use super::error::McpError;
use super::fault::LocalFault;
use super::input::ServerInput;
use super::listing::McpTool;
use super::naming::{prefixed_name, sanitized_name};
use super::progress::ProgressRoutes;
use super::reconnect::Reconnects;
use super::restart::Restart;
use super::stdio::StdioProcess;
use super::trace::Endpoint;
use aquaregia::{Tool, ToolDescriptor};

/// Default limit on one tool call.
pub(crate) const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);

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

/// Converted tools: the listing generation, the tools, and the listing they came from.
type Converted = (u64, Vec<Tool>, Arc<[McpTool]>);

/// Settings of one [`McpConnection`] value, with the tools last made under them.
struct View {
    call_timeout: Option<Duration>,
    prefix: Option<String>,
    meta: Option<RequestMetaObject>,
    filter: Option<Arc<ToolFilter>>,
    /// Whether the tools' annotations are believed ([`Tool::hints_trusted`]).
    trusted: bool,
    /// The converted tools, the listing generation they came from, and that listing.
    converted: Mutex<Option<Converted>>,
}

impl View {
    fn with(&self, change: impl FnOnce(&mut View)) -> Arc<View> {
        let mut view = View {
            call_timeout: self.call_timeout,
            prefix: self.prefix.clone(),
            meta: self.meta.clone(),
            filter: self.filter.clone(),
            trusted: self.trusted,
            converted: Mutex::new(None),
        };
        change(&mut view);
        Arc::new(view)
    }
}

pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) peer: Peer<RoleClient>,
    service: Mutex<Option<RunningService<RoleClient, Handler>>>,
    /// Cancelled when the session ends: in-flight calls return at once.
    pub(crate) closed: CancellationToken,
    pub(crate) changes: Arc<Changes>,
    /// The last raw listing; the async lock also coalesces concurrent refreshes.
    listing: tokio::sync::Mutex<Option<Listing>>,
    process: Mutex<Option<Arc<StdioProcess>>>,
    info: McpServerInfo,
    pub(crate) progress: Arc<ProgressRoutes>,
    /// Answers to what the server asks mid-call.
    pub(crate) input: Arc<ServerInput>,
    /// Set for stdio servers that are restarted when they die.
    restart: OnceLock<Restart>,
    endpoint: Endpoint,
    /// Set for Streamable HTTP sessions, which the transport re-initialises.
    reconnects: OnceLock<Arc<Reconnects>>,
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

/// Counts `tools/list_changed` notifications.
pub(crate) struct Changes {
    generation: watch::Sender<u64>,
}

impl Changes {
    pub(crate) fn new() -> Self {
        Self {
            generation: watch::Sender::new(0),
        }
    }

    pub(crate) fn bump(&self) {
        self.generation.send_modify(|generation| *generation += 1);
    }

    fn current(&self) -> u64 {
        *self.generation.borrow()
    }
}

/// rmcp's client handler: announces aquaregia and answers what the server asks.
pub(crate) struct Handler {
    pub(crate) server: String,
    /// Filled by the session's transport (see `HandshakeGuard`), read by tool calls.
    pub(crate) progress: Arc<ProgressRoutes>,
    pub(crate) input: Arc<ServerInput>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // The 2026-07-28 tasks extension: the server may answer a call with a task.
        let mut capabilities = ClientCapabilities::default();
        capabilities.extensions = Some(ExtensionCapabilities::from([(
            TASKS_EXTENSION_ID.to_owned(),
            Map::new(),
        )]));
        let mut info = ClientConfig::new(
            capabilities,
            Implementation::new("aquaregia", env!("CARGO_PKG_VERSION")),
        );
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        if self.input.handlers.elicitation.is_some() {
            info.capabilities.elicitation = Some(
                ElicitationCapability::new()
                    .with_form(FormElicitationCapability::new())
                    .with_url(UrlElicitationCapability::new()),
            );
        }
        if self.input.handlers.sampling.is_some() {
            info.capabilities.sampling = Some(SamplingCapability::default());
        }
        info
    }

    #[allow(deprecated)]
    async fn create_message(
        &self,
        request: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.input.sample_request(request).await
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(self.input.elicit(request).await)
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        // Counted by the transport as it is read (`HandshakeGuard`), in order with answers.
        tracing::debug!(server = %self.server, "tools/list_changed");
        std::future::ready(())
    }

    fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        if notification.method == elicitation::COMPLETE_METHOD {
            match elicitation::completion(&self.server, notification.params.as_ref()) {
                Some(complete) => {
                    tracing::debug!(server = %self.server, id = %complete.elicitation_id, "elicitation complete");
                    if let Some(hook) = &self.input.handlers.elicitation_complete {
                        hook(complete);
                    }
                }
                None => {
                    tracing::warn!(server = %self.server, "an elicitation/complete notification without an elicitationId");
                }
            }
        } else {
            tracing::debug!(server = %self.server, method = %notification.method, "ignoring a notification");
        }
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

impl McpConnection {
    /// A connection over a session that finished its handshake.
    pub(crate) fn new(
        service: RunningService<RoleClient, Handler>,
        name: String,
        changes: Arc<Changes>,
        process: Option<StdioProcess>,
        endpoint: Endpoint,
    ) -> Self {
        let peer = service.peer().clone();
        let progress = service.service().progress.clone();
        let input = service.service().input.clone();
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
        tracing::info!(server = %name, protocol = %info.protocol_version, "MCP server connected");
        McpConnection {
            shared: Arc::new(Shared {
                name,
                peer,
                service: Mutex::new(Some(service)),
                closed: CancellationToken::new(),
                changes,
                listing: tokio::sync::Mutex::new(None),
                process: Mutex::new(process.map(Arc::new)),
                info,
                progress,
                input,
                restart: OnceLock::new(),
                endpoint,
                reconnects: OnceLock::new(),
            }),
            view: Arc::new(View {
                call_timeout: Some(DEFAULT_CALL_TIMEOUT),
                prefix: None,
                meta: None,
                filter: None,
                trusted: false,
                converted: Mutex::new(None),
            }),
        }
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    pub(crate) fn shared_arc(&self) -> Arc<Shared> {
        self.shared.clone()
    }
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
        Ok(self.tools_and_listing().await?.0)
    }

    /// [`tools`](Self::tools) with the server's own description of them (the listing they
    /// were made from).
    pub(crate) async fn tools_and_listing(&self) -> Result<(Vec<Tool>, Arc<[McpTool]>), McpError> {
        if self.shared.closed.is_cancelled() {
            return Err(McpError::Disconnected);
        }
        let current = self.shared.changes.current();
        if let Some((generation, tools, listing)) = &*lock(&self.view.converted)
            && *generation >= current
        {
            return Ok((tools.clone(), listing.clone()));
        }
        let listing = self.shared.listing().await?;
        let tools = self.convert(&listing.tools);
        let mut converted = lock(&self.view.converted);
        if converted
            .as_ref()
            .is_none_or(|(generation, _, _)| *generation <= listing.generation)
        {
            *converted = Some((listing.generation, tools.clone(), listing.tools.clone()));
        }
        Ok((tools, listing.tools))
    }

    /// The name the model sees for the server's tool `name` under this connection's prefix.
    pub(crate) fn exposed_name(&self, name: &str) -> String {
        match &self.view.prefix {
            Some(prefix) => prefixed_name(prefix, name),
            None => sanitized_name(name),
        }
    }

    fn convert(&self, tools: &[McpTool]) -> Vec<Tool> {
        let call = Arc::new(CallContext {
            peer: self.shared.peer.clone(),
            closed: self.shared.closed.clone(),
            timeout: self.view.call_timeout,
            meta: self.view.meta.clone(),
            shared: Arc::downgrade(&self.shared),
            progress: self.shared.progress.clone(),
            input: self.shared.input.clone(),
            augment_tasks: self.shared.info.protocol_version.as_str() < "2026-07-28",
            reconnects: self.shared.reconnects().cloned(),
        });
        tools
            .iter()
            .filter_map(|tool| {
                // MCP allows names (`a.b`, `a/b`) that models reject.
                let name = self.exposed_name(&tool.name);
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
                    tool: ToolTarget {
                        name: tool.name.clone(),
                        tasks: tool.tasks,
                        retry_safe: tool.annotations.read_only == Some(true)
                            || tool.annotations.idempotent == Some(true),
                    },
                });
                Some(
                    Tool::new(descriptor, executor)
                        .with_annotations(tool.annotations.clone())
                        .with_trusted_hints(self.view.trusted),
                )
            })
            .collect()
    }

    /// Per-call inactivity limit for tools made from this connection (default 300 s; `None`
    /// for no limit): each `notifications/progress` for the call starts it again, so a long
    /// call that keeps reporting progress is not cut off. On expiry the call fails with
    /// [`McpError::CallTimeout`] and the server is sent `notifications/cancelled`; the
    /// connection stays usable.
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

    /// Whether the tools made from this connection have their annotations believed
    /// ([`Tool::hints_trusted`]): off by default, since a server can claim `readOnlyHint` for
    /// a tool that writes. Turn it on only for a server the user trusts.
    #[must_use]
    pub fn with_trusted_hints(self, trusted: bool) -> Self {
        self.with_view(|view| view.trusted = trusted)
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

    /// The underlying rmcp peer: an escape hatch for what this crate does not wrap
    /// (resources, completions...). Requests sent through it share the session. Its types are
    /// rmcp's (use the [`rmcp`](crate::rmcp) re-export), so code using it follows rmcp's major
    /// versions; prefer this crate's own methods ([`list_prompts`](Self::list_prompts),
    /// [`get_prompt`](Self::get_prompt), [`tools`](Self::tools)) where they exist.
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
    ///
    /// Returns nothing: the session is over whatever happens, and nothing that can go wrong
    /// here (a server that has to be killed, an HTTP session the server would not delete)
    /// leaves the caller anything to do. Such things are logged at debug level.
    pub async fn close(self) {
        let shared = &self.shared;
        shared.closed.cancel();
        let service = lock(&shared.service).take();
        if let Some(service) = service
            && let Err(error) = service.cancel().await
        {
            tracing::debug!(server = %shared.name, %error, "closing the MCP session");
        }
        let process = lock(&shared.process).take();
        if let Some(process) = process {
            process.shutdown().await;
        }
        if let Some(restart) = shared.restart.get() {
            restart.close().await;
        }
    }
}

impl Shared {
    /// Where the server is, for spans.
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The negotiated MCP protocol version.
    pub(crate) fn protocol_version(&self) -> &str {
        &self.info.protocol_version
    }

    pub(crate) fn set_restart(&self, restart: Restart) {
        let _ = self.restart.set(restart);
    }

    pub(crate) fn set_reconnects(&self, reconnects: Arc<Reconnects>) {
        let _ = self.reconnects.set(reconnects);
    }

    /// The re-established sessions, for a transport that re-establishes them.
    pub(crate) fn reconnects(&self) -> Option<&Arc<Reconnects>> {
        self.reconnects.get()
    }

    /// Whether the server process exited (on its own: a closed connection has no process).
    pub(crate) async fn exited(&self) -> bool {
        let process = lock(&self.process).clone();
        match process {
            Some(process) => process
                .wait_exit(Duration::from_millis(500))
                .await
                .is_some(),
            None => false,
        }
    }

    /// How a dead session is replaced, if it can be.
    pub(crate) fn restart(&self) -> Option<&Restart> {
        self.restart.get()
    }

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

    /// Maps a failed request: a dead stdio server is described with its exit status and
    /// stderr, and ends the session for everyone.
    pub(crate) async fn session_error(
        &self,
        error: ServiceError,
        method: &'static str,
    ) -> McpError {
        match error {
            ServiceError::McpError(data) => match LocalFault::from_error(&data) {
                Some(fault) => fault.into_error(&self.name, method),
                None => McpError::Protocol {
                    server: self.name.clone(),
                    method,
                    code: data.code.0,
                    message: data.message.into_owned(),
                },
            },
            ServiceError::Timeout { timeout } => McpError::transport(
                &self.name,
                format!("{method} got no answer within {timeout:?}"),
            ),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => self.gone().await,
            other => McpError::Transport {
                server: self.name.clone(),
                message: format!("{method}: {other}"),
                source: Some(Arc::new(other)),
            },
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
