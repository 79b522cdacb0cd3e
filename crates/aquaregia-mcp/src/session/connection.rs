//! [`McpConnection`]: one running MCP client session, shared by its clones, and the settings
//! of the tools made from it (the tools themselves are made in the call layer).

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::RequestMetaObject;
use rmcp::service::{Peer, RunningService, ServiceError};
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::handler::{Handler, ServerInput};
use super::listing::{self, McpTool};
use super::progress::ProgressRoutes;
use super::restart::{Replaceable, Restart};
use super::trace::{Endpoint, SpanServer};
use crate::error::McpError;
use crate::transport::compat::execution::TASKS_CAPABILITY;
use crate::transport::compat::fault::LocalFault;
use crate::transport::http::Reconnects;
use crate::transport::process::StdioProcess;
pub(crate) use aquaregia::sync::lock;
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
    pub(crate) shared: Arc<Shared>,
    pub(crate) view: Arc<View>,
}

/// Converted tools: the listing generation, the tools, and the listing they came from.
pub(crate) type Converted = (u64, Vec<Tool>, Arc<[McpTool]>);

/// Settings of one [`McpConnection`] value, with the tools last made under them.
pub(crate) struct View {
    pub(crate) call_timeout: Option<Duration>,
    pub(crate) prefix: Option<String>,
    pub(crate) meta: Option<RequestMetaObject>,
    pub(crate) filter: Option<Arc<ToolFilter>>,
    /// Whether the tools' annotations are believed ([`Tool::hints_trusted`]).
    pub(crate) trusted: bool,
    /// The converted tools, the listing generation they came from, and that listing.
    pub(crate) converted: Mutex<Option<Converted>>,
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
    listing: tokio::sync::Mutex<Option<listing::Listing>>,
    process: Mutex<Option<Arc<StdioProcess>>>,
    info: McpServerInfo,
    pub(crate) progress: Arc<ProgressRoutes>,
    /// Answers to what the server asks mid-call.
    pub(crate) input: Arc<ServerInput>,
    /// Set for stdio servers that are restarted when they die.
    restart: OnceLock<Restart<McpConnection>>,
    endpoint: Endpoint,
    /// Set for Streamable HTTP sessions, which the transport re-initialises.
    reconnects: OnceLock<Arc<Reconnects>>,
    /// The tools of the last listing that cannot be called correctly, and why.
    pub(crate) left_out: Mutex<Vec<LeftOutTool>>,
    /// The tools already warned about as left out (once each).
    pub(crate) warned: Mutex<std::collections::HashSet<String>>,
}

/// A tool the server lists that is not offered, because it cannot be called correctly.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOutTool {
    /// The tool's name on the server.
    pub name: String,
    /// Why it is left out.
    pub reason: String,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.closed.cancel();
        // `StdioProcess` kills its process group when dropped; the service's own drop guard
        // stops the rmcp task.
    }
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

    pub(crate) fn current(&self) -> u64 {
        *self.generation.borrow()
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
                left_out: Mutex::new(Vec::new()),
                warned: Mutex::new(std::collections::HashSet::new()),
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
    /// The server as the spans of its calls name it.
    pub(crate) fn span_server(&self) -> SpanServer<'_> {
        SpanServer {
            endpoint: &self.endpoint,
            protocol_version: &self.info.protocol_version,
            name: &self.name,
        }
    }

    /// The negotiated MCP protocol version.
    pub(crate) fn protocol_version(&self) -> &str {
        &self.info.protocol_version
    }

    /// Whether the server declared the 2025-11-25 `tasks` capability for `tools/call` (kept
    /// by the transports, see [`crate::transport::compat::execution`]).
    pub(crate) fn declares_tool_tasks(&self) -> bool {
        self.peer.peer_info().is_some_and(|info| {
            info.capabilities
                .experimental
                .as_ref()
                .and_then(|experimental| experimental.get(TASKS_CAPABILITY))
                .and_then(|tasks| tasks.get("requests"))
                .and_then(|requests| requests.get("tools"))
                .and_then(|tools| tools.get("call"))
                .is_some()
        })
    }

    pub(crate) fn set_restart(&self, restart: Restart<McpConnection>) {
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
    pub(crate) fn restart(&self) -> Option<&Restart<McpConnection>> {
        self.restart.get()
    }

    /// The current listing: cached unless a change came in since it was fetched.
    pub(crate) async fn listing(&self) -> Result<listing::Listing, McpError> {
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
        let fetch = listing::fetch_tools(&self.peer, &self.name, |error, method| {
            self.session_error(error, method)
        });
        let tools = tokio::select! {
            () = self.closed.cancelled() => return Err(McpError::Disconnected),
            tools = fetch => tools?,
        };
        let listing = listing::Listing {
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

impl Replaceable for McpConnection {
    fn is_closed(&self) -> bool {
        McpConnection::is_closed(self)
    }

    fn close(self) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(McpConnection::close(self))
    }
}
