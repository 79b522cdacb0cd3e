//! A hand-written ACP client: newline-delimited JSON-RPC over a duplex pipe, no SDK.
//!
//! A reader task records every message the agent sends. Requests from the agent go to the
//! installed handler, which may answer them at once; everything else is queued for the test.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use aquaregia_acp::{AcpError, AcpServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, WriteHalf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{BOUND, serve_in_memory};

/// Decides the answer to a request from the agent: `Some(full JSON-RPC response)` to send
/// it (or `Some([messages...])` to send several, e.g. notifications and no response yet),
/// `None` to leave the request to the test.
pub type Handler = Box<dyn FnMut(&Value) -> Option<Value> + Send>;

type Writer = Arc<tokio::sync::Mutex<Option<WriteHalf<DuplexStream>>>>;

pub struct RawClient {
    writer: Writer,
    inbox: tokio::sync::Mutex<mpsc::UnboundedReceiver<Value>>,
    backlog: Mutex<VecDeque<Value>>,
    log: Arc<Mutex<Vec<Value>>>,
    handler: Arc<Mutex<Option<Handler>>>,
    next_id: AtomicI64,
    reader: JoinHandle<()>,
    serve: Option<JoinHandle<Result<(), AcpError>>>,
}

impl Drop for RawClient {
    fn drop(&mut self) {
        self.reader.abort();
        if let Some(serve) = &self.serve {
            serve.abort();
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

impl RawClient {
    /// Starts `server` in memory and connects to it.
    pub fn connect(server: AcpServer) -> Self {
        let (end, serve) = serve_in_memory(server);
        let mut client = Self::over(end);
        client.serve = Some(serve);
        client
    }

    /// A client over one end of a duplex pipe.
    pub fn over(end: DuplexStream) -> Self {
        let (read, write) = tokio::io::split(end);
        let writer: Writer = Arc::new(tokio::sync::Mutex::new(Some(write)));
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
            serve: None,
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
                .unwrap_or_else(|_| panic!("timed out waiting for {what}; log: {:#?}", self.log()))
                .unwrap_or_else(|| {
                    panic!("the agent closed the connection while waiting for {what}")
                });
            if matches(&message) {
                return message;
            }
            self.backlog.lock().unwrap().push_back(message);
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

    /// Closes our write side and waits for `serve` to return.
    pub async fn finish(mut self) -> Result<(), AcpError> {
        self.close_write().await;
        let serve = self
            .serve
            .take()
            .expect("connected with RawClient::connect");
        tokio::time::timeout(BOUND, serve)
            .await
            .expect("serve returned after the end of input")
            .expect("serve did not panic")
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
