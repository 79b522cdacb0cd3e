//! A zero-latency mock model server for benchmarks: on its own thread and runtime ([`start`]),
//! or in a process of its own ([`start_process`]: this bench binary started again with
//! `--serve-mock`, driven over its stdin and stdout), as a model server really runs.
//!
//! Every POST except the SSE route gets the scripted answers of the current [`Wire`] (any
//! provider's format: the bench sets the bodies), and can be recorded byte for byte so a
//! benchmark can replay exactly what the client sent. Connections are kept alive (HTTP/1.1).
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Uri};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

/// The argument that makes a bench binary serve the mock ([`serve_mock`]) instead of
/// benchmarking.
pub const SERVE_MOCK: &str = "--serve-mock";

/// The scripted answers: `call` for the first `tool_steps` requests, then `text` (and the count
/// restarts).
#[derive(Clone, Default)]
pub struct Wire {
    pub call: Bytes,
    pub text: Bytes,
}

/// One request as it arrived: path with query, headers and the raw body bytes.
#[derive(Clone, Debug)]
pub struct RawRequest {
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// What the mock serves and records; shared with its handlers.
#[derive(Default)]
struct Shared {
    /// Tool-call answers to give before a text answer (then the count restarts).
    tool_steps: AtomicUsize,
    wire: Mutex<Wire>,
    /// SSE body served at `/v1/stream/chat/completions`.
    sse: Arc<Mutex<Bytes>>,
    recording: AtomicBool,
    recorded: Mutex<Vec<RawRequest>>,
    served: AtomicUsize,
}

impl Shared {
    fn set_wire(&self, wire: Wire) {
        *self.wire.lock().expect("lock") = wire;
        self.served.store(0, Ordering::Relaxed);
    }
}

/// A mock on a thread of this process, or the mock process and the pipes that drive it.
enum Control {
    Thread(Arc<Shared>),
    Process {
        child: Child,
        commands: ChildStdin,
        replies: std::io::BufReader<ChildStdout>,
    },
}

pub struct BenchServer {
    pub url: String,
    /// SSE body served at `/v1/stream/chat/completions` (thread mock only).
    pub sse: Arc<Mutex<Bytes>>,
    control: Mutex<Control>,
}

impl Drop for BenchServer {
    fn drop(&mut self) {
        if let Ok(Control::Process { child, .. }) = self.control.get_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl BenchServer {
    /// Where the mock runs: `thread` or `process`.
    pub fn mode(&self) -> &'static str {
        match &*self.control.lock().expect("lock") {
            Control::Thread(_) => "thread",
            Control::Process { .. } => "process",
        }
    }

    /// Sets the answers and restarts the count.
    pub fn set_wire(&self, call: impl Into<Bytes>, text: impl Into<Bytes>) {
        let wire = Wire {
            call: call.into(),
            text: text.into(),
        };
        match &mut *self.control.lock().expect("lock") {
            Control::Thread(shared) => shared.set_wire(wire),
            control @ Control::Process { .. } => {
                let call: Value = serde_json::from_slice(&wire.call).expect("JSON call answer");
                let text: Value = serde_json::from_slice(&wire.text).expect("JSON text answer");
                command(control, &json!({"wire": {"call": call, "text": text}}));
            }
        }
    }

    /// Sets how many tool-call answers come before a text answer, and restarts the count.
    pub fn set_tool_steps(&self, steps: usize) {
        match &mut *self.control.lock().expect("lock") {
            Control::Thread(shared) => {
                shared.tool_steps.store(steps, Ordering::Relaxed);
                shared.served.store(0, Ordering::Relaxed);
            }
            control @ Control::Process { .. } => {
                command(control, &json!({"steps": steps}));
            }
        }
    }

    /// Records the requests made while `f` runs.
    pub async fn record<F, Fut>(&self, f: F) -> Vec<RawRequest>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        self.set_recording(true);
        f().await;
        self.set_recording(false)
    }

    /// Starts recording (returns nothing) or stops it (returns what was recorded).
    fn set_recording(&self, on: bool) -> Vec<RawRequest> {
        match &mut *self.control.lock().expect("lock") {
            Control::Thread(shared) => {
                if on {
                    shared.recorded.lock().expect("lock").clear();
                }
                shared.recording.store(on, Ordering::SeqCst);
                if on {
                    Vec::new()
                } else {
                    std::mem::take(&mut *shared.recorded.lock().expect("lock"))
                }
            }
            control @ Control::Process { .. } => {
                let reply = command(control, &json!({"record": on}));
                reply["requests"]
                    .as_array()
                    .map(|requests| requests.iter().map(request_from_json).collect())
                    .unwrap_or_default()
            }
        }
    }
}

/// Sends one command to the mock process and reads its one-line answer.
fn command(control: &mut Control, command: &Value) -> Value {
    let Control::Process {
        commands, replies, ..
    } = control
    else {
        unreachable!("only the mock process takes commands");
    };
    let mut line = serde_json::to_vec(command).expect("command");
    line.push(b'\n');
    commands.write_all(&line).expect("command to the mock");
    commands.flush().expect("command to the mock");
    let mut answer = String::new();
    replies.read_line(&mut answer).expect("the mock's answer");
    serde_json::from_str(&answer).expect("the mock answers JSON")
}

fn request_to_json(request: &RawRequest) -> Value {
    let headers: Vec<Value> = request
        .headers
        .iter()
        .map(|(name, value)| json!([name.as_str(), value.to_str().expect("text header")]))
        .collect();
    json!({
        "path_and_query": request.path_and_query,
        "headers": headers,
        "body": String::from_utf8(request.body.to_vec()).expect("UTF-8 body"),
    })
}

fn request_from_json(value: &Value) -> RawRequest {
    let mut headers = HeaderMap::new();
    for pair in value["headers"].as_array().expect("headers") {
        headers.append(
            HeaderName::from_bytes(pair[0].as_str().expect("name").as_bytes()).expect("name"),
            HeaderValue::from_str(pair[1].as_str().expect("value")).expect("value"),
        );
    }
    RawRequest {
        path_and_query: value["path_and_query"].as_str().expect("path").to_owned(),
        headers,
        body: Bytes::from(value["body"].as_str().expect("body").to_owned()),
    }
}

/// The mock's routes.
fn app(shared: Arc<Shared>) -> Router {
    let sse_body = shared.sse.clone();
    Router::new()
        .route(
            "/v1/stream/chat/completions",
            post(move || {
                let body = sse_body.lock().expect("lock").clone();
                async move {
                    Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(Body::from(body))
                        .expect("response")
                }
            }),
        )
        // Google's token endpoint, for Vertex AI's service-account keys.
        .route(
            "/token",
            post(|| async {
                json_response(Bytes::from_static(
                    br#"{"access_token":"ya29.bench-access-token","expires_in":3599,"token_type":"Bearer"}"#,
                ))
            }),
        )
        .fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            if shared.recording.load(Ordering::Relaxed) {
                shared.recorded.lock().expect("lock").push(RawRequest {
                    path_and_query: uri
                        .path_and_query()
                        .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned()),
                    headers,
                    body,
                });
            }
            let n = shared.served.fetch_add(1, Ordering::Relaxed);
            let body = {
                let wire = shared.wire.lock().expect("lock");
                if n < shared.tool_steps.load(Ordering::Relaxed) {
                    wire.call.clone()
                } else {
                    shared.served.store(0, Ordering::Relaxed);
                    wire.text.clone()
                }
            };
            async move { json_response(body) }
        })
}

/// Serves the mock on a current-thread runtime of the calling thread; sends the address once
/// it listens.
fn serve(shared: Arc<Shared>, ready: std::sync::mpsc::Sender<std::net::SocketAddr>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        ready
            .send(listener.local_addr().expect("addr"))
            .expect("send addr");
        axum::serve(listener, app(shared)).await.expect("serve");
    });
}

/// The mock on a thread of this process.
pub fn start() -> BenchServer {
    let shared = Arc::new(Shared::default());
    let (tx, rx) = std::sync::mpsc::channel();
    let served = shared.clone();
    std::thread::spawn(move || serve(served, tx));
    let addr = rx.recv().expect("server address");
    BenchServer {
        url: format!("http://{addr}"),
        sse: shared.sse.clone(),
        control: Mutex::new(Control::Thread(shared)),
    }
}

/// The mock in a process of its own: this binary with [`SERVE_MOCK`]. It inherits the CPU
/// affinity, so under `taskset -c 1` both processes share core 1.
pub fn start_process() -> BenchServer {
    let exe = std::env::current_exe().expect("bench binary");
    let mut child = Command::new(exe)
        .arg(SERVE_MOCK)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the mock process");
    let commands = child.stdin.take().expect("stdin");
    let mut replies = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut addr = String::new();
    replies.read_line(&mut addr).expect("the mock's address");
    BenchServer {
        url: format!("http://{}", addr.trim()),
        sse: Arc::default(),
        control: Mutex::new(Control::Process {
            child,
            commands,
            replies,
        }),
    }
}

/// The mock process's main: serves on a thread of its own (a current-thread runtime) and
/// takes commands, one JSON line each, on stdin; answers each with one line on stdout. Ends
/// when stdin closes.
pub fn serve_mock() {
    let shared = Arc::new(Shared::default());
    let (tx, rx) = std::sync::mpsc::channel();
    let served = shared.clone();
    std::thread::spawn(move || serve(served, tx));
    let addr = rx.recv().expect("server address");
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "{addr}").expect("address");
    out.flush().expect("flush");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let command: Value = serde_json::from_str(&line).expect("command");
        let mut answer = json!({"ok": true});
        if let Some(steps) = command["steps"].as_u64() {
            shared.tool_steps.store(steps as usize, Ordering::Relaxed);
            shared.served.store(0, Ordering::Relaxed);
        }
        if let Some(wire) = command.get("wire") {
            shared.set_wire(Wire {
                call: Bytes::from(serde_json::to_vec(&wire["call"]).expect("call")),
                text: Bytes::from(serde_json::to_vec(&wire["text"]).expect("text")),
            });
        }
        match command["record"].as_bool() {
            Some(true) => {
                shared.recorded.lock().expect("lock").clear();
                shared.recording.store(true, Ordering::SeqCst);
            }
            Some(false) => {
                shared.recording.store(false, Ordering::SeqCst);
                let recorded = std::mem::take(&mut *shared.recorded.lock().expect("lock"));
                let requests: Vec<Value> = recorded.iter().map(request_to_json).collect();
                answer = json!({"requests": requests});
            }
            None => {}
        }
        writeln!(out, "{answer}").expect("answer");
        out.flush().expect("flush");
    }
}

fn json_response(body: Bytes) -> Response {
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("response")
}

/// Median of `samples` timings of `f`.
pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

pub async fn time<F, Fut>(f: F) -> Duration
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let started = Instant::now();
    f().await;
    started.elapsed()
}
