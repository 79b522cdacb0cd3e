//! A hand-written ACP client ([`RawClient`]): newline-delimited JSON-RPC over any pair of
//! byte streams (an in-memory duplex pipe, a spawned agent's stdin/stdout), no SDK; and the
//! client side of MCP-over-ACP ([`stateless_server`], [`AcpMcpServer`]).
//!
//! A reader task records every message the agent sends. Requests from the agent go to the
//! installed handler, which may answer them at once; everything else is queued for the test.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::io::{DuplexStream, split};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The generous bound on anything the client waits for.
pub const BOUND: Duration = Duration::from_secs(30);

/// Decides the answer to a request from the agent: `Some(full JSON-RPC response)` to send
/// it (or `Some([messages...])` to send several, e.g. notifications and no response yet),
/// `None` to leave the request to the test.
pub type Handler = Box<dyn FnMut(&Value) -> Option<Value> + Send>;

type Sink = Box<dyn AsyncWrite + Send + Unpin>;
type Writer = Arc<tokio::sync::Mutex<Option<Sink>>>;

/// An ACP client speaking raw JSON-RPC lines to an agent.
pub struct RawClient {
    writer: Writer,
    inbox: tokio::sync::Mutex<mpsc::UnboundedReceiver<Value>>,
    backlog: Mutex<VecDeque<Value>>,
    log: Arc<Mutex<Vec<Value>>>,
    handler: Arc<Mutex<Option<Handler>>>,
    next_id: AtomicI64,
    reader: JoinHandle<()>,
    /// The agent process, when the client spawned it (killed when the client is dropped).
    child: tokio::sync::Mutex<Option<Child>>,
    pid: Option<u32>,
    stderr: Arc<Mutex<String>>,
}

impl Drop for RawClient {
    fn drop(&mut self) {
        self.reader.abort();
        // `kill_on_drop` is set too; this also covers a child already taken out of the mutex.
        if let Some(child) = self.child.get_mut().as_mut() {
            let _ = child.start_kill();
        }
    }
}

/// A success response to `request`.
pub fn ok(request: &Value, result: Value) -> Value {
    let mut response = json!({"jsonrpc": "2.0", "id": request["id"]});
    response["result"] = result;
    response
}

/// An error response to `request`.
pub fn error(request: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": code, "message": message}})
}

/// The answer selecting `option` (`allow_once`, `allow_always`, `reject_once`,
/// `reject_always`) if `request` is a `session/request_permission`; `None` otherwise.
pub fn select_permission(request: &Value, option: &str) -> Option<Value> {
    (request["method"] == "session/request_permission").then(|| {
        ok(
            request,
            json!({"outcome": {"outcome": "selected", "optionId": option}}),
        )
    })
}

impl RawClient {
    /// A client over any pair of byte streams: what the agent writes, and its input.
    pub fn new<R, W>(read: R, write: W) -> Self
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let writer: Writer = Arc::new(tokio::sync::Mutex::new(Some(Box::new(write))));
        let log = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Mutex<Option<Handler>>> = Arc::new(Mutex::new(None));
        let (tx, inbox) = mpsc::unbounded_channel();
        let reader = tokio::spawn({
            let (writer, log, handler) = (writer.clone(), log.clone(), handler.clone());
            async move {
                let mut lines = BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let message: Value = match serde_json::from_str(&line) {
                        Ok(message) => message,
                        Err(error) => panic!("the agent wrote a non-JSON line {line:?}: {error}"),
                    };
                    log.lock().unwrap().push(message.clone());
                    let is_request = message.get("method").is_some() && message.get("id").is_some();
                    let answer = if is_request {
                        handler.lock().unwrap().as_mut().and_then(|h| h(&message))
                    } else {
                        None
                    };
                    match answer {
                        // Several messages (notifications, then the response...).
                        Some(Value::Array(messages)) => {
                            for message in messages {
                                write_line(&writer, &message.to_string()).await;
                            }
                        }
                        Some(answer) => write_line(&writer, &answer.to_string()).await,
                        None => {
                            let _ = tx.send(message);
                        }
                    }
                }
            }
        });
        Self {
            writer,
            inbox: tokio::sync::Mutex::new(inbox),
            backlog: Mutex::new(VecDeque::new()),
            log,
            handler,
            next_id: AtomicI64::new(1),
            reader,
            child: tokio::sync::Mutex::new(None),
            pid: None,
            stderr: Arc::default(),
        }
    }

    /// A client over one end of an in-memory duplex pipe.
    pub fn in_memory(end: DuplexStream) -> Self {
        let (read, write) = split(end);
        Self::new(read, write)
    }

    /// Spawns `command` (the agent) and talks to it over its stdin and stdout; its stderr is
    /// kept for [`stderr`](Self::stderr) and failure messages. The process is killed when the
    /// client is dropped (only it: an agent is expected to end the servers it started).
    pub fn spawn(mut command: Command) -> Self {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting the agent {command:?}: {e}"));
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let mut client = Self::new(stdout, stdin);
        client.pid = child.id();
        *client.child.get_mut() = Some(child);
        let kept = client.stderr.clone();
        tokio::spawn(async move {
            let mut buffer = [0u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buffer).await {
                kept.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        client
    }

    /// The spawned agent's process id.
    pub fn pid(&self) -> u32 {
        self.pid.expect("an agent started with RawClient::spawn")
    }

    /// What the spawned agent wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (within `within`) for the spawned agent to exit; returns its status.
    pub async fn wait_exit(&self, within: Duration) -> ExitStatus {
        let mut child = self.child.lock().await;
        let child = child
            .as_mut()
            .expect("an agent started with RawClient::spawn");
        match tokio::time::timeout(within, child.wait()).await {
            Ok(status) => status.expect("wait for the agent"),
            Err(_) => panic!(
                "the agent did not exit within {within:?}; stderr: {}",
                self.stderr()
            ),
        }
    }

    /// Installs the handler for requests from the agent.
    pub fn set_handler(&self, handler: impl FnMut(&Value) -> Option<Value> + Send + 'static) {
        *self.handler.lock().unwrap() = Some(Box::new(handler));
    }

    /// Every message received so far, in order (handled requests included).
    pub fn log(&self) -> Vec<Value> {
        self.log.lock().unwrap().clone()
    }

    /// Sends one message.
    pub async fn send(&self, message: &Value) {
        self.send_line(&message.to_string()).await;
    }

    /// Writes one line as is (no validation).
    pub async fn send_line(&self, line: &str) {
        write_line(&self.writer, line).await;
    }

    /// Sends a request; returns its id.
    pub async fn start_request(&self, method: &str, params: Value) -> i64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Sends a request and waits for its response (the whole message).
    pub async fn request(&self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params).await;
        self.response(id).await
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// Answers a request the agent sent.
    pub async fn reply(&self, response: &Value) {
        self.send(response).await;
    }

    /// The response to our request `id`.
    pub async fn response(&self, id: i64) -> Value {
        self.wait_for(&format!("the response to request {id}"), |m| {
            m.get("method").is_none() && m["id"] == id
        })
        .await
    }

    /// The first queued or incoming message matching `matches`; others stay queued in order.
    pub async fn wait_for(&self, what: &str, mut matches: impl FnMut(&Value) -> bool) -> Value {
        {
            let mut backlog = self.backlog.lock().unwrap();
            if let Some(index) = backlog.iter().position(&mut matches) {
                return backlog.remove(index).unwrap();
            }
        }
        let mut inbox = self.inbox.lock().await;
        let deadline = tokio::time::Instant::now() + BOUND;
        loop {
            let message = tokio::time::timeout_at(deadline, inbox.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "timed out waiting for {what}; log: {:#?}{}",
                        self.log(),
                        self.stderr_note()
                    )
                })
                .unwrap_or_else(|| {
                    panic!(
                        "the agent closed the connection while waiting for {what}{}",
                        self.stderr_note()
                    )
                });
            if matches(&message) {
                return message;
            }
            self.backlog.lock().unwrap().push_back(message);
        }
    }

    fn stderr_note(&self) -> String {
        match self.pid {
            Some(_) => format!("\nagent stderr: {}", self.stderr()),
            None => String::new(),
        }
    }

    /// The next request from the agent with `method` (not answered by the handler).
    pub async fn agent_request(&self, method: &str) -> Value {
        self.wait_for(&format!("a {method} request"), |m| {
            m["method"] == method && m.get("id").is_some()
        })
        .await
    }

    /// Closes our write side: the agent sees the end of its input.
    pub async fn close_write(&self) {
        if let Some(mut writer) = self.writer.lock().await.take() {
            let _ = writer.shutdown().await;
        }
    }

    /// `initialize` with protocol 1; returns the result.
    pub async fn initialize(&self) -> Value {
        let response = self
            .request(
                "initialize",
                json!({"protocolVersion": 1,
                       "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
                       "clientInfo": {"name": "raw-test-client", "version": "0"}}),
            )
            .await;
        response["result"].clone()
    }

    /// `session/new` in `cwd` with `servers`; returns the session id.
    pub async fn new_session(&self, cwd: &str, servers: Value) -> String {
        let response = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": servers}))
            .await;
        response["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new failed: {response}"))
            .to_owned()
    }

    /// Sends `session/prompt` with one text block; returns the request id.
    pub async fn start_prompt(&self, session: &str, text: &str) -> i64 {
        self.start_request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// A prompt with one text block; returns the whole response.
    pub async fn prompt(&self, session: &str, text: &str) -> Value {
        let id = self.start_prompt(session, text).await;
        self.response(id).await
    }

    /// The `status`es of the updates about tool call `id` of `session`, in order.
    pub fn tool_statuses(&self, session: &str, id: &str) -> Vec<String> {
        tool_updates(&updates(&self.log(), session))
            .iter()
            .filter(|u| u["toolCallId"] == id)
            .filter_map(|u| u["status"].as_str().map(str::to_owned))
            .collect()
    }
}

async fn write_line(writer: &Writer, line: &str) {
    let mut guard = writer.lock().await;
    let Some(writer) = guard.as_mut() else {
        return;
    };
    let mut bytes = line.as_bytes().to_vec();
    bytes.push(b'\n');
    let _ = writer.write_all(&bytes).await;
    let _ = writer.flush().await;
}

/// The `session/update` payloads (`params.update`) among `messages`, for `session_id`.
pub fn updates(messages: &[Value], session_id: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session_id)
        .map(|m| m["params"]["update"].clone())
        .collect()
}

/// The `tool_call` and `tool_call_update` updates among `updates`, in order. A `tool_call`
/// without `status` gets the protocol's default, `pending` (the SDK's types leave it out).
pub fn tool_updates(updates: &[Value]) -> Vec<Value> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call" || u["sessionUpdate"] == "tool_call_update")
        .cloned()
        .map(|mut u| {
            if u["sessionUpdate"] == "tool_call"
                && u.get("status").is_none()
                && let Some(object) = u.as_object_mut()
            {
                object.insert("status".into(), "pending".into());
            }
            u
        })
        .collect()
}

/// Time for a list-change notification to take effect in the agent before the model step
/// that should see it. The agent handles MCP notifications asynchronously (rmcp hands them
/// to a spawned task or a subscription channel) and nothing on the wire acknowledges them
/// (the tool list is only fetched again when the next step asks for it), so a test that wants
/// "the next step sees the change" cannot wait for an event.
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// Polls `condition` until it holds (within [`BOUND`]).
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Answers a stateless `mcp/message` request for a minimal 2026-07-28 server offering `tools`
/// (no `server/discover`, no subscriptions); `None` for anything else.
pub fn stateless_server(request: &Value, tools: &Value) -> Option<Value> {
    if request["method"] != "mcp/message" || request["params"].get("serverId").is_none() {
        return None;
    }
    let inner = &request["params"];
    let not_found = json!({"error": {"code": -32601, "message": "Method not found"}});
    let outcome = match inner["method"].as_str().unwrap_or_default() {
        "tools/list" => json!({"result": {"resultType": "complete", "tools": tools}}),
        "tools/call" => json!({"result": {"resultType": "complete", "content": [
            {"type": "text", "text": format!("{} ran", inner["params"]["name"].as_str().unwrap_or_default())}
        ]}}),
        _ => not_found,
    };
    Some(ok(request, outcome))
}

/// A client-side MCP server on the stateless MCP-over-ACP binding, like
/// [`stateless_server`] but with state: its tool list can change, it keeps the
/// `subscriptions/listen` requests open (acknowledged) to announce changes on them, records
/// the calls, and can leave calls to some tools unanswered for the test.
#[derive(Clone, Default)]
pub struct AcpMcpServer {
    state: Arc<Mutex<McpState>>,
}

#[derive(Default)]
struct McpState {
    tools: Value,
    /// `tools/call` params (`{name, arguments}`), in order.
    calls: Vec<Value>,
    /// Methods of every inner request, in order.
    methods: Vec<String>,
    /// Open `subscriptions/listen` requests: (server id, request id).
    listens: Vec<(String, String)>,
    /// Tools whose calls are left to the test.
    held: Vec<String>,
}

impl AcpMcpServer {
    /// A server offering `tools` (a `tools/list` array).
    pub fn new(tools: Value) -> Self {
        let server = Self::default();
        server.set_tools(tools);
        server
    }

    /// Leaves calls to `tool` unanswered (the requests reach the test's queue).
    #[must_use]
    pub fn hold(self, tool: &str) -> Self {
        self.state.lock().unwrap().held.push(tool.to_owned());
        self
    }

    /// Replaces the tool list (announce it with [`list_changed`](Self::list_changed)).
    pub fn set_tools(&self, tools: Value) {
        self.state.lock().unwrap().tools = tools;
    }

    /// The `tools/call` params received, in order.
    pub fn calls(&self) -> Vec<Value> {
        self.state.lock().unwrap().calls.clone()
    }

    /// The inner methods received, in order.
    pub fn methods(&self) -> Vec<String> {
        self.state.lock().unwrap().methods.clone()
    }

    /// How many `subscriptions/listen` requests are open.
    pub fn listens(&self) -> usize {
        self.state.lock().unwrap().listens.len()
    }

    /// The `mcp/message` notification announcing a tool list change on the latest open
    /// subscription (the stateless binding routes it by its `requestId`).
    pub fn list_changed(&self) -> Value {
        let state = self.state.lock().unwrap();
        let (server, request) = state.listens.last().expect("an open subscriptions/listen");
        json!({"jsonrpc": "2.0", "method": "mcp/message", "params": {
            "serverId": server, "requestId": request, "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": request}}}})
    }

    /// The answer to a request from the agent, if it is an `mcp/message` for this server.
    pub fn handle(&self, request: &Value) -> Option<Value> {
        let params = &request["params"];
        if request["method"] != "mcp/message" {
            return None;
        }
        let server = params["serverId"].as_str()?;
        let request_id = params["requestId"].as_str().unwrap_or_default();
        let method = params["method"].as_str().unwrap_or_default();
        let mut state = self.state.lock().unwrap();
        state.methods.push(method.to_owned());
        let outcome = match method {
            "subscriptions/listen" => {
                state
                    .listens
                    .push((server.to_owned(), request_id.to_owned()));
                // Acknowledged, and kept open: no response.
                return Some(
                    json!([{"jsonrpc": "2.0", "method": "mcp/message", "params": {
                    "serverId": server, "requestId": request_id,
                    "method": "notifications/subscriptions/acknowledged",
                    "params": {"notifications": params["params"]["notifications"],
                               "_meta": {"io.modelcontextprotocol/subscriptionId": request_id}}}}]),
                );
            }
            "tools/list" => json!({"result": {"resultType": "complete", "tools": state.tools}}),
            "tools/call" => {
                let call = params["params"].clone();
                let name = call["name"].as_str().unwrap_or_default().to_owned();
                state.calls.push(call);
                if state.held.contains(&name) {
                    return None;
                }
                json!({"result": {"resultType": "complete",
                                  "content": [{"type": "text", "text": format!("{name} ran")}]}})
            }
            _ => json!({"error": {"code": -32601, "message": "Method not found"}}),
        };
        Some(ok(request, outcome))
    }
}
