//! A reusable in-process MCP test server built on `rmcp`, served over `tokio::io::duplex`.
//!
//! Tools (tools/list is paginated, 5 per page, sorted by name):
//! `add`, `audio`, `complex_schema`, `echo`, `empty`, `fails`, `image`, `meta_echo`, `never`,
//! `resource_blob`, `resource_link`, `resource_text`, `slow`, `structured`,
//! `structured_media` (text and image blocks with `structuredContent`, as FastMCP's
//! `ToolResult` gives), `two_texts` and, after `set_extra_tool(true)`, `extra`.
//!
//! Notes on rmcp 3.11 behaviour this server relies on:
//! - Cancellation: on `notifications/cancelled` rmcp does NOT drop the handler future; it cancels
//!   the request's `RequestContext::ct` (a `CancellationToken`) and discards whatever response the
//!   handler later produces. `slow`/`never` therefore select on that token. The server handler's
//!   `on_cancelled` is also called (in a separately spawned task), which is what
//!   `cancelled_count()` counts.
//! - 2025-11-25 (`initialize`) clients get `notifications/tools/list_changed` through the
//!   connection's `Peer` (recorded in `initialize`).
//! - 2026-07-28 (`server/discover`, per-request `_meta`) clients get it only on an open
//!   `subscriptions/listen` subscription (the notification carries the subscription id in its
//!   `_meta`); the server accepts `toolsListChanged` subscriptions.
#![allow(missing_docs)]

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    handler::server::{
        common::schema_for_output,
        tool::{ToolCallContext, ToolRouter},
        wrapper::Parameters,
    },
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
        ContentBlock, Implementation, InitializeRequestParams, InitializeResult, JsonObject,
        ListToolsResult, PaginatedRequestParams, RequestId, Resource, ResourceContents,
        ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
    },
    service::{NotificationContext, Peer, RequestContext, SubscriptionContext, SubscriptionSink},
    tool, tool_router,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::{io::DuplexStream, sync::Notify};
use tokio_util::sync::CancellationToken;

/// Maximum number of tools per tools/list page.
pub const PAGE_SIZE: usize = 5;

/// Base64 of a valid 1x1 PNG.
pub const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGMwTjsDAAI1AWaKkkQyAAAAAElFTkSuQmCC";
/// Base64 of a few bytes (`RIFF$\0\0\0WAVE`).
pub const WAV_BASE64: &str = "UklGRiQAAABXQVZF";
/// Raw input schema of `complex_schema` (served verbatim).
pub const COMPLEX_SCHEMA: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"point":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}},"properties":{"at":{"$ref":"#/$defs/point"}},"required":["at"],"additionalProperties":false}"##;

/// Names of the tools always served (sorted), i.e. without `extra`.
pub const BASE_TOOLS: [&str; 16] = [
    "add",
    "audio",
    "complex_schema",
    "echo",
    "empty",
    "fails",
    "image",
    "meta_echo",
    "never",
    "resource_blob",
    "resource_link",
    "resource_text",
    "slow",
    "structured",
    "structured_media",
    "two_texts",
];

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// Text to echo back.
    pub text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    pub a: i64,
    pub b: i64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SlowArgs {
    /// How long to sleep, in milliseconds.
    pub ms: u64,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Weather {
    pub temperature: i64,
    pub unit: String,
}

fn complex_input_schema() -> Arc<JsonObject> {
    Arc::new(serde_json::from_str(COMPLEX_SCHEMA).expect("COMPLEX_SCHEMA is a JSON object"))
}

#[derive(Default)]
struct State {
    extra_present: AtomicBool,
    tool_calls: AtomicUsize,
    list_calls: AtomicUsize,
    list_cursors: Mutex<Vec<Option<String>>>,
    last_call_meta: Mutex<Option<Value>>,
    cancelled_ids: Mutex<Vec<Option<RequestId>>>,
    cancelled_notify: Notify,
    /// Tool handlers (`slow`, `never`) that observed their cancellation token.
    handlers_cancelled: AtomicUsize,
    /// Peers of connections opened with `initialize` (2025-11-25 and older).
    legacy_peers: Mutex<Vec<Peer<RoleServer>>>,
    /// Open `subscriptions/listen` subscriptions (2026-07-28 connections).
    subscriptions: Mutex<Vec<SubscriptionSink>>,
    subscriptions_opened: AtomicUsize,
    subscription_notify: Notify,
}

/// In-process MCP server for tests. Cheap to clone; all clones share state.
#[derive(Clone)]
pub struct TestServer {
    state: Arc<State>,
    router: Arc<ToolRouter<TestServer>>,
}

impl Default for TestServer {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl TestServer {
    pub fn new() -> Self {
        Self {
            state: Arc::default(),
            router: Arc::new(Self::tool_router()),
        }
    }

    /// Serves one connection over an in-memory duplex pipe and returns the client end
    /// (a `tokio::io::DuplexStream`, usable as an rmcp client transport). The server task
    /// is spawned and ends when the client end is dropped.
    ///
    /// Must be called inside a tokio runtime. Both the classic `initialize` lifecycle and the
    /// 2026-07-28 `server/discover` / per-request-`_meta` lifecycle are accepted.
    pub fn serve_duplex(&self) -> DuplexStream {
        let (client, server) = tokio::io::duplex(1 << 16);
        let handler = self.clone();
        tokio::spawn(async move {
            // Initialization fails if the client goes away early: nothing to do then.
            if let Ok(running) = handler.serve(server).await {
                let _quit_reason = running.waiting().await;
            }
        });
        client
    }

    /// Adds (true) or removes (false) the `extra` tool at run time and notifies every
    /// connected client with `notifications/tools/list_changed`: through the connection for
    /// `initialize`-lifecycle clients, through each open `subscriptions/listen` subscription
    /// (that accepted `toolsListChanged`) for 2026-07-28 clients. Returns once every
    /// notification has been written to its transport.
    pub async fn set_extra_tool(&self, present: bool) {
        self.state.extra_present.store(present, Ordering::SeqCst);
        let peers: Vec<_> = {
            let mut peers = lock(&self.state.legacy_peers);
            peers.retain(|peer| !peer.is_transport_closed());
            peers.clone()
        };
        for peer in peers {
            let _ignored = peer.notify_tool_list_changed().await;
        }
        let sinks: Vec<_> = lock(&self.state.subscriptions).clone();
        for sink in sinks {
            if let Err(rmcp::service::SubscriptionSendError::SubscriptionClosed) =
                sink.notify_tool_list_changed().await
            {
                lock(&self.state.subscriptions).retain(|s| s.id() != sink.id());
            }
        }
    }

    /// Whether `extra` is currently listed.
    pub fn extra_tool_present(&self) -> bool {
        self.state.extra_present.load(Ordering::SeqCst)
    }

    /// Number of `notifications/cancelled` received so far (any request, including a
    /// cancelled `subscriptions/listen`).
    pub fn cancelled_count(&self) -> usize {
        lock(&self.state.cancelled_ids).len()
    }

    /// The request ids named by the `notifications/cancelled` received so far, in order
    /// (`None` for a notification without `requestId`).
    pub fn cancelled_ids(&self) -> Vec<Option<RequestId>> {
        lock(&self.state.cancelled_ids).clone()
    }

    /// Waits until at least `n` cancellations were received; false on timeout.
    pub async fn wait_cancelled(&self, n: usize, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, async {
            loop {
                let notified = self.state.cancelled_notify.notified();
                if self.cancelled_count() >= n {
                    return;
                }
                notified.await;
            }
        })
        .await
        .is_ok()
    }

    /// Number of tool handlers (`slow`, `never`) that saw their request's cancellation token
    /// fire (client cancellation, or the connection closing under them).
    pub fn handlers_cancelled(&self) -> usize {
        self.state.handlers_cancelled.load(Ordering::SeqCst)
    }

    /// Number of tools/call requests received so far.
    pub fn call_count(&self) -> usize {
        self.state.tool_calls.load(Ordering::SeqCst)
    }

    /// The `_meta` object of the most recent tools/call request (as serde_json::Value), if any.
    /// A request without `_meta` records `{}`. Note that rmcp clients put a `progressToken`
    /// in every request's `_meta`, and 2026-07-28 clients add `io.modelcontextprotocol/*` keys.
    pub fn last_call_meta(&self) -> Option<Value> {
        lock(&self.state.last_call_meta).clone()
    }

    /// Number of tools/list requests received so far (one per page).
    pub fn list_calls(&self) -> usize {
        self.state.list_calls.load(Ordering::SeqCst)
    }

    /// The cursor of every tools/list request so far, in order (`None` = first page).
    pub fn list_cursors(&self) -> Vec<Option<String>> {
        lock(&self.state.list_cursors).clone()
    }

    /// Number of `subscriptions/listen` subscriptions currently open.
    pub fn open_subscriptions(&self) -> usize {
        lock(&self.state.subscriptions).len()
    }

    /// Waits until at least `n` subscriptions were ever opened; false on timeout.
    pub async fn wait_subscriptions(&self, n: usize, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, async {
            loop {
                let notified = self.state.subscription_notify.notified();
                if self.state.subscriptions_opened.load(Ordering::SeqCst) >= n {
                    return;
                }
                notified.await;
            }
        })
        .await
        .is_ok()
    }

    /// The tools currently served, sorted by name.
    pub fn visible_tools(&self) -> Vec<Tool> {
        let extra = self.extra_tool_present();
        self.router
            .list_all()
            .into_iter()
            .filter(|tool| extra || tool.name != "extra")
            .collect()
    }

    fn tool_visible(&self, name: &str) -> bool {
        name != "extra" || self.extra_tool_present()
    }
}

/// Waits for `ct`; counts the cancellation.
async fn observe_cancel(
    state: &State,
    ct: &CancellationToken,
) -> Result<CallToolResult, ErrorData> {
    ct.cancelled().await;
    state.handlers_cancelled.fetch_add(1, Ordering::SeqCst);
    // rmcp discards the response of a cancelled request; this only ends the handler.
    Err(ErrorData::internal_error("request cancelled", None))
}

#[tool_router]
impl TestServer {
    #[tool(
        description = "Echo the given text",
        annotations(read_only_hint = true)
    )]
    fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(args.text)])
    }

    #[tool(description = "Add two integers")]
    fn add(&self, Parameters(args): Parameters<AddArgs>) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text((args.a + args.b).to_string())])
    }

    #[tool(description = "Return two text blocks")]
    fn two_texts(&self) -> CallToolResult {
        CallToolResult::success(vec![
            ContentBlock::text("first"),
            ContentBlock::text("second"),
        ])
    }

    #[tool(
        description = "Return a text block and a PNG image",
        title = "Image maker",
        annotations(title = "Image maker")
    )]
    fn image(&self) -> CallToolResult {
        CallToolResult::success(vec![
            ContentBlock::text("here is an image"),
            ContentBlock::image(PNG_BASE64, "image/png"),
        ])
    }

    #[tool(description = "Return an embedded text resource")]
    fn resource_text(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::resource(
            ResourceContents::text("hello notes", "file:///notes.txt").with_mime_type("text/plain"),
        )])
    }

    #[tool(description = "Return an embedded blob resource")]
    fn resource_blob(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::resource(
            ResourceContents::blob("AAEC", "file:///data.bin")
                .with_mime_type("application/octet-stream"),
        )])
    }

    #[tool(description = "Return a resource link")]
    fn resource_link(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::resource_link(
            Resource::new("file:///big.log", "big.log")
                .with_mime_type("text/plain")
                .with_description("a log"),
        )])
    }

    #[tool(description = "Return an audio block")]
    fn audio(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::audio(WAV_BASE64, "audio/wav")])
    }

    #[tool(
        description = "Return structured content",
        output_schema = schema_for_output::<Weather>()
    )]
    fn structured(&self) -> CallToolResult {
        CallToolResult::structured(json!({"temperature": 21, "unit": "C"}))
    }

    #[tool(description = "Return a text block, an image and structured content")]
    fn structured_media(&self) -> CallToolResult {
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("a chart of the week"),
            ContentBlock::image(PNG_BASE64, "image/png"),
        ]);
        result.structured_content = Some(json!({"days": 7, "peak": "Tuesday"}));
        result
    }

    #[tool(description = "Return no content at all")]
    fn empty(&self) -> CallToolResult {
        CallToolResult::success(Vec::new())
    }

    #[tool(
        description = "Always fail with a tool error",
        annotations(destructive_hint = true)
    )]
    fn fails(&self) -> CallToolResult {
        CallToolResult::error(vec![
            ContentBlock::text("bad thing"),
            ContentBlock::text("happened"),
        ])
    }

    #[tool(description = "Sleep `ms` milliseconds, then answer \"done\"; cancellable")]
    async fn slow(
        &self,
        Parameters(args): Parameters<SlowArgs>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(args.ms)) => {
                Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
            }
            result = observe_cancel(&self.state, &ct) => result,
        }
    }

    #[tool(description = "Never answer (until cancelled)")]
    async fn never(&self, ct: CancellationToken) -> Result<CallToolResult, ErrorData> {
        observe_cancel(&self.state, &ct).await
    }

    #[tool(
        description = "Takes a raw JSON schema with $defs/$ref",
        input_schema = complex_input_schema()
    )]
    fn complex_schema(&self, _arguments: JsonObject) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text("ok")])
    }

    #[tool(description = "Return the request's _meta as JSON text")]
    fn meta_echo(&self, meta: rmcp::model::RequestMetaObject) -> CallToolResult {
        let meta = Value::Object(meta.0.0);
        CallToolResult::success(vec![ContentBlock::text(meta.to_string())])
    }

    #[tool(description = "Only present after set_extra_tool(true)")]
    fn extra(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text("extra")])
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("aquaregia-test-server", "0.0.0"))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        lock(&self.state.legacy_peers).push(context.peer);
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let cursor = request.and_then(|params| params.cursor);
        self.state.list_calls.fetch_add(1, Ordering::SeqCst);
        lock(&self.state.list_cursors).push(cursor.clone());

        let tools = self.visible_tools();
        let start = match cursor.as_deref() {
            None => 0,
            Some(cursor) => cursor
                .strip_prefix("offset:")
                .and_then(|offset| offset.parse::<usize>().ok())
                .filter(|offset| *offset <= tools.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("invalid cursor {cursor:?}"), None)
                })?,
        };
        let end = (start + PAGE_SIZE).min(tools.len());
        let mut result = ListToolsResult::with_all_items(tools[start..end].to_vec());
        result.next_cursor = (end < tools.len()).then(|| format!("offset:{end}"));
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        if !self.tool_visible(name) {
            return None;
        }
        self.router.get(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.state.tool_calls.fetch_add(1, Ordering::SeqCst);
        *lock(&self.state.last_call_meta) = Some(Value::Object(context.meta.0.0.clone()));
        if !self.tool_visible(&request.name) {
            return Err(ErrorData::invalid_params("tool not found", None));
        }
        let router = self.router.clone();
        router
            .call(ToolCallContext::new(self, request, context))
            .await
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        lock(&self.state.cancelled_ids).push(notification.request_id);
        self.state.cancelled_notify.notify_waiters();
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let sink = context.sink().clone();
        let id = sink.id().clone();
        lock(&self.state.subscriptions).push(sink);
        self.state
            .subscriptions_opened
            .fetch_add(1, Ordering::SeqCst);
        self.state.subscription_notify.notify_waiters();
        // The subscription stays open (and its sink usable) while `context` is alive.
        context.cancelled().await;
        lock(&self.state.subscriptions).retain(|sink| sink.id() != &id);
        Ok(())
    }
}
