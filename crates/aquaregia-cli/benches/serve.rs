//! `aquaregia serve` figures: memory per idle WebSocket session (1,000 connections with one
//! session each, and 1,000 sessions on 10 connections), and, with 100 clients prompting at
//! once, the time from each `session/prompt` to its first `session/update` and to its answer
//! (a text answer, and a turn with a tool call).
//!
//! `cargo bench -p aquaregia-cli --bench serve`. The server is the real `aquaregia serve`
//! binary on 127.0.0.1 (port 0), a fresh one per part; the model is a scripted Chat Completions
//! server in the bench binary that answers at once; the clients are WebSocket connections of
//! the bench (tokio-tungstenite, the one axum serves with). Sessions are stored under the
//! target directory, not in the user's data dir, or in `$AQUAREGIA_SERVE_BENCH_DATA` when set
//! (a tmpfs there takes the disk's syncs out of the figures; its `sessions` directory is
//! removed before and after).
//!
//! `-- memory` or `-- latency` runs only that part; `AQUAREGIA_BIN=path/to/aquaregia` serves
//! with another build (to compare two).
#![allow(missing_docs, clippy::print_stdout)]
// Bench code: a failed setup or expectation should stop the bench loudly, and nothing here is
// public API that would need `Debug`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aquaregia_test_support::mock_model::{chat_text_stream, chat_tool_stream};
use axum::body::{Body, Bytes};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Message, http::HeaderValue};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The `aquaregia` binary served: the bench's build, or `$AQUAREGIA_BIN`.
fn agent() -> PathBuf {
    std::env::var_os("AQUAREGIA_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_aquaregia")),
        PathBuf::from,
    )
}

/// The bearer token the servers are started with.
const TOKEN: &str = "bench-token-of-serve";

/// Every wait of the bench is bounded by this.
const BOUND: Duration = Duration::from_secs(120);

/// Idle sessions in the memory part.
const IDLE_SESSIONS: usize = 1_000;

/// Connections the same number of sessions share in the second memory figure.
const FEW_CONNECTIONS: usize = 10;

/// Clients prompting at once in the latency part.
const PROMPTING: usize = 100;

/// Rounds of the latency part per kind of turn (the first one is a warm-up, not counted).
const ROUNDS: usize = 8;

/// Open files the bench needs: its own end of every connection, the server's (a child, which
/// inherits the limit), and some to spare.
const FILES_NEEDED: u64 = 4_096;

/// Set when the bench started itself again under `ulimit -n`.
const RAISED_VAR: &str = "AQUAREGIA_SERVE_BENCH_RAISED";

/// A prompt with this in it gets an `update_plan` call from the model before its answer.
const PLAN_PROMPT: &str = "make a plan";

/// The bench's scratch directory (the servers' working and data dirs).
fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-bench")
}

/// Where the servers store their sessions.
fn data_dir() -> PathBuf {
    std::env::var_os("AQUAREGIA_SERVE_BENCH_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| scratch().join("data"))
}

/// The soft and hard limits of open files of this process.
fn open_file_limits() -> (u64, u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").expect("read /proc/self/limits");
    let line = limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))
        .expect("a `Max open files` line");
    let mut fields = line.split_whitespace().map(|field| match field {
        "unlimited" => u64::MAX,
        number => number.parse().expect("a limit"),
    });
    (fields.next().expect("soft"), fields.next().expect("hard"))
}

/// Raises the soft limit of open files to [`FILES_NEEDED`] when it is lower, by running the
/// bench again under `ulimit -n` (`setrlimit` needs `unsafe`, which the workspace forbids);
/// the exit code of that run, if it was needed.
fn ensure_open_files() -> Option<ExitCode> {
    let (soft, hard) = open_file_limits();
    if soft >= FILES_NEEDED {
        return None;
    }
    assert!(
        hard >= FILES_NEEDED,
        "the hard limit of open files is {hard}; the bench needs {FILES_NEEDED}"
    );
    assert!(
        std::env::var_os(RAISED_VAR).is_none(),
        "`ulimit -n {FILES_NEEDED}` did not raise the limit (still {soft})"
    );
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {FILES_NEEDED} && exec \"$0\" \"$@\""))
        .arg(std::env::current_exe().expect("the bench binary"))
        .args(std::env::args_os().skip(1))
        .env(RAISED_VAR, "1")
        .status()
        .expect("run the bench under ulimit -n");
    Some(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The scripted model on 127.0.0.1: a Chat Completions stream, answered at once (a prompt
/// saying [`PLAN_PROMPT`] gets an `update_plan` call first, and the step after it a text), and
/// two models listed (each `session/new` offers them).
struct Model {
    url: String,
    task: JoinHandle<()>,
}

impl Model {
    async fn start() -> Self {
        let models = json!({"object": "list", "data": [
            {"id": "mock", "object": "model", "owned_by": "bench"},
            {"id": "mock-large", "object": "model", "owned_by": "bench"}
        ]});
        let app = axum::Router::new()
            .route(
                "/v1/chat/completions",
                axum::routing::post(|body: Bytes| async move { answer(&body) }),
            )
            .route(
                "/v1/models",
                axum::routing::get(move || async move { axum::Json(models) }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the model");
        let url = format!("http://{}/v1", listener.local_addr().expect("its address"));
        // Nagle off: the model's writes are not what is measured.
        let listener = axum::serve::ListenerExt::tap_io(listener, |stream: &mut TcpStream| {
            let _ = stream.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve the model");
        });
        Self { url, task }
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn answer(body: &[u8]) -> Response {
    let body: Value = serde_json::from_slice(body).unwrap_or_default();
    let last = body["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .cloned()
        .unwrap_or_default();
    let stream = if last["role"] != "tool" && last.to_string().contains(PLAN_PROMPT) {
        let plan = json!({"entries": [
            {"content": "Answer the question", "status": "in_progress", "priority": "high"}
        ]});
        chat_tool_stream(&[("call_plan", "update_plan", plan)])
    } else {
        chat_text_stream(&["Hello from ", "the scripted model."])
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(stream))
        .expect("a response")
}

/// A running `aquaregia serve` on the scripted model.
struct Served {
    child: tokio::process::Child,
    pid: u32,
    /// `ws://127.0.0.1:PORT/acp`.
    url: String,
    /// How many connections it logged as ended.
    disconnected: Arc<tokio::sync::watch::Sender<usize>>,
    stderr: Arc<Mutex<String>>,
    drain: JoinHandle<()>,
}

impl Served {
    /// `aquaregia serve --listen 127.0.0.1:0` with its data and config under the scratch
    /// directory; waits until it says where it listens.
    async fn start(model: &Model) -> Self {
        let dir = scratch();
        std::fs::create_dir_all(&dir).expect("the scratch directory");
        let mut child = tokio::process::Command::new(agent())
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--model",
                "openai-chat:mock",
            ])
            .current_dir(&dir)
            .env("AQUAREGIA_SERVE_TOKEN", TOKEN)
            .env("OPENAI_BASE_URL", &model.url)
            .env("OPENAI_API_KEY", "bench")
            .env("AQUAREGIA_DATA_DIR", data_dir())
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("NO_COLOR", "1")
            .env_remove("AQUAREGIA_MODEL")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start aquaregia serve");
        let pid = child.id().expect("running");
        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let url = tokio::time::timeout(BOUND, async {
            while let Some(line) = lines.next_line().await.expect("read stderr") {
                stderr.lock().unwrap().push_str(&format!("{line}\n"));
                if let Some(url) = line.split("ACP over WebSocket at ").nth(1) {
                    return url.trim().to_owned();
                }
            }
            panic!("serve exited: {}", stderr.lock().unwrap());
        })
        .await
        .expect("serve listened in time");
        let disconnected = Arc::new(tokio::sync::watch::Sender::new(0));
        let (count, kept) = (disconnected.clone(), stderr.clone());
        let drain = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("disconnected") {
                    count.send_modify(|count| *count += 1);
                }
                // Warnings and errors only: a thousand connection lines are not kept.
                if !line.contains(" INFO ") {
                    kept.lock().unwrap().push_str(&format!("{line}\n"));
                }
            }
        });
        Self {
            child,
            pid,
            url,
            disconnected,
            stderr,
            drain,
        }
    }

    /// Waits until `n` connections in all were logged as ended.
    async fn wait_disconnected(&self, n: usize) {
        let mut count = self.disconnected.subscribe();
        tokio::time::timeout(BOUND, count.wait_for(|count| *count >= n))
            .await
            .unwrap_or_else(|_| panic!("{n} connections did not end in time"))
            .expect("the drain outlives this wait");
    }

    /// The resident set (VmRSS) and proportional set (Pss), in KiB.
    fn memory(&self) -> (u64, u64) {
        let field = |file: &str, name: &str| {
            std::fs::read_to_string(format!("/proc/{}/{file}", self.pid))
                .expect("read /proc")
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in /proc/{}/{file}", self.pid))
        };
        (field("status", "VmRSS:"), field("smaps_rollup", "Pss:"))
    }

    /// How many sockets the server has open (its connections and its listener).
    fn sockets(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid))
            .expect("read /proc/PID/fd")
            .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count()
    }

    /// Its threads.
    fn threads(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/task", self.pid))
            .map(|tasks| tasks.count())
            .unwrap_or(0)
    }

    /// Kills it (every connection closed) and waits for it; fails if it had warned or failed.
    async fn stop(mut self) {
        self.child.kill().await.expect("kill serve");
        self.drain.abort();
        let stderr = self.stderr.lock().unwrap().clone();
        let complaints: Vec<&str> = stderr
            .lines()
            .filter(|line| line.contains(" WARN ") || line.contains(" ERROR "))
            .collect();
        assert!(
            complaints.is_empty(),
            "serve complained:\n{}",
            complaints.join("\n")
        );
    }
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A `session/update` or an answer, and when it arrived.
struct Arrival {
    at: Instant,
    message: Value,
}

/// One ACP client connection over WebSocket, read inline: each request reads frames until its
/// answer, keeping the `session/update`s that came before it.
struct Connection {
    socket: Socket,
    next_id: u64,
    updates: Vec<Arrival>,
}

impl Connection {
    /// Connects to `url` with the token and initializes the ACP connection.
    async fn open(url: &str) -> Self {
        let mut request = url.into_client_request().expect("a WebSocket request");
        request.headers_mut().insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {TOKEN}")).expect("a header"),
        );
        // A small read buffer: a thousand of these live in the bench at once.
        let config = WebSocketConfig::default().read_buffer_size(16 << 10);
        let (socket, _) = tokio::time::timeout(
            BOUND,
            tokio_tungstenite::connect_async_with_config(request, Some(config), true),
        )
        .await
        .expect("connected in time")
        .expect("the upgrade succeeded");
        let mut connection = Self {
            socket,
            next_id: 0,
            updates: Vec::new(),
        };
        connection
            .request(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": {},
                       "clientInfo": {"name": "serve-bench", "version": "1"}}),
            )
            .await;
        connection
    }

    /// Sends a request; its id and when it went.
    async fn send(&mut self, method: &str, params: Value) -> (u64, Instant) {
        self.next_id += 1;
        let message =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        let sent = Instant::now();
        self.socket
            .send(Message::text(message.to_string()))
            .await
            .expect("send a request");
        (self.next_id, sent)
    }

    /// The next message from the agent; requests it makes are answered here.
    async fn next(&mut self) -> Arrival {
        loop {
            let frame = tokio::time::timeout(BOUND, self.socket.next())
                .await
                .expect("the agent answered in time")
                .expect("the socket is open")
                .expect("a frame");
            let at = Instant::now();
            let Message::Text(text) = frame else {
                continue;
            };
            let message: Value = serde_json::from_str(text.as_str()).expect("a JSON message");
            match (message.get("id"), message["method"].as_str()) {
                (Some(id), Some(method)) => {
                    let reply = if method == "session/request_permission" {
                        json!({"jsonrpc": "2.0", "id": id, "result": {"outcome":
                            {"outcome": "selected", "optionId": "allow_once"}}})
                    } else {
                        json!({"jsonrpc": "2.0", "id": id,
                               "error": {"code": -32601, "message": "not here"}})
                    };
                    self.socket
                        .send(Message::text(reply.to_string()))
                        .await
                        .expect("answer the agent");
                }
                _ => return Arrival { at, message },
            }
        }
    }

    /// Reads until the answer to request `id` (kept updates before it); fails on an error.
    async fn answer(&mut self, id: u64) -> Arrival {
        loop {
            let arrival = self.next().await;
            if arrival.message["id"] == id {
                assert!(
                    arrival.message.get("error").is_none(),
                    "request {id} failed: {}",
                    arrival.message
                );
                return arrival;
            }
            if arrival.message["method"] == "session/update" {
                self.updates.push(arrival);
            }
        }
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        let (id, _) = self.send(method, params).await;
        self.answer(id).await.message["result"].clone()
    }

    /// A new session, once the agent has sent its commands (the last thing `session/new`
    /// does, after its answer).
    async fn new_session(&mut self) -> String {
        let cwd = scratch();
        let created = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        let session = created["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        let commands_sent = |updates: &[Arrival]| {
            updates.iter().any(|update| {
                update.message["params"]["sessionId"] == session.as_str()
                    && update.message["params"]["update"]["sessionUpdate"]
                        == "available_commands_update"
            })
        };
        while !commands_sent(&self.updates) {
            let arrival = self.next().await;
            self.updates.push(arrival);
        }
        self.updates.clear();
        session
    }

    /// Prompts `session` with `text`: the time to the first `session/update` (and its kind)
    /// and to the answer.
    async fn timed_prompt(&mut self, session: &str, text: &str) -> Timing {
        self.updates.clear();
        let (id, sent) = self
            .send(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
            )
            .await;
        let answer = self.answer(id).await;
        assert_eq!(
            answer.message["result"]["stopReason"], "end_turn",
            "{}",
            answer.message
        );
        let first = self
            .updates
            .iter()
            .find(|update| update.message["params"]["sessionId"] == session)
            .expect("an update before the answer");
        Timing {
            sent,
            first_update: first.at - sent,
            first_kind: first.message["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            answer: answer.at - sent,
        }
    }

    /// Leaves the connection open, reading (so pings are answered), until it is told to
    /// close.
    fn idle(mut self) -> Idle {
        let (close, mut closing) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    frame = self.socket.next() => if !matches!(frame, Some(Ok(_))) {
                        return false;
                    },
                    _ = &mut closing => break,
                }
            }
            self.close().await;
            true
        });
        Idle { close, task }
    }

    /// Closes the connection with a close frame (the server ends its sessions) and reads
    /// until the server has closed it too.
    async fn close(mut self) {
        let _ = self.socket.close(None).await;
        let _ = tokio::time::timeout(BOUND, async {
            while let Some(Ok(_)) = self.socket.next().await {}
        })
        .await;
    }
}

/// A connection left idle by [`Connection::idle`].
struct Idle {
    close: oneshot::Sender<()>,
    /// Whether it was still open when told to close.
    task: JoinHandle<bool>,
}

impl Idle {
    fn is_open(&self) -> bool {
        !self.task.is_finished()
    }

    /// Closes every connection of `idle`; fails if one had closed before.
    async fn close_all(idle: Vec<Self>) {
        let tasks: Vec<JoinHandle<bool>> = idle
            .into_iter()
            .map(|idle| {
                let _ = idle.close.send(());
                idle.task
            })
            .collect();
        for task in tasks {
            assert!(
                task.await.expect("an idle connection"),
                "a connection closed early"
            );
        }
    }
}

struct Timing {
    /// When the prompt went.
    sent: Instant,
    first_update: Duration,
    first_kind: String,
    answer: Duration,
}

/// p50, p90, p99 and max of `samples` (nearest rank).
fn percentiles(mut samples: Vec<Duration>) -> [Duration; 4] {
    samples.sort();
    let rank = |p: f64| samples[((p * samples.len() as f64).ceil() as usize).max(1) - 1];
    [rank(0.5), rank(0.9), rank(0.99), samples[samples.len() - 1]]
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// KiB per session of the growth from `before` to `after`.
fn per_session(before: u64, after: u64, sessions: usize) -> f64 {
    after.saturating_sub(before) as f64 / sessions as f64
}

/// 1,000 connections, each with one session: the server's memory before any connection,
/// after one (a warm-up: the model's client and the like are built once), and after 1,000
/// more.
async fn memory_per_connection(model: &Model) {
    let server = Served::start(model).await;
    let fresh = server.memory();
    let threads_fresh = server.threads();
    let mut idle = Vec::new();
    let mut warm_up = Connection::open(&server.url).await;
    warm_up.new_session().await;
    idle.push(warm_up.idle());
    let warm = server.memory();
    let started = Instant::now();
    let mut sessions = 0;
    for _ in 0..IDLE_SESSIONS {
        let mut connection = Connection::open(&server.url).await;
        connection.new_session().await;
        sessions += 1;
        idle.push(connection.idle());
    }
    let setup = started.elapsed();
    assert_eq!(sessions, IDLE_SESSIONS, "every connection opened a session");
    let loaded = server.memory();
    let sockets = server.sockets();
    // Its connections, the listener and the model's connection(s): not fewer.
    assert!(
        sockets > IDLE_SESSIONS + 1,
        "the server holds only {sockets} sockets for {} connections",
        IDLE_SESSIONS + 1
    );
    assert!(idle.iter().all(Idle::is_open), "a connection was closed");
    println!(
        "{IDLE_SESSIONS} connections with a session each (set up in {:.1} s; server: {sockets} sockets, {} threads, {threads_fresh} at start)",
        setup.as_secs_f64(),
        server.threads()
    );
    println!(
        "  VmRSS  fresh {:>7.1} MiB, after 1 {:>7.1} MiB, after {} {:>7.1} MiB",
        mib(fresh.0),
        mib(warm.0),
        IDLE_SESSIONS + 1,
        mib(loaded.0)
    );
    println!(
        "  Pss    fresh {:>7.1} MiB, after 1 {:>7.1} MiB, after {} {:>7.1} MiB",
        mib(fresh.1),
        mib(warm.1),
        IDLE_SESSIONS + 1,
        mib(loaded.1)
    );
    println!(
        "  per connection+session: VmRSS {:.1} KiB from fresh, {:.1} KiB after the first; Pss {:.1} / {:.1} KiB",
        per_session(fresh.0, loaded.0, IDLE_SESSIONS + 1),
        per_session(warm.0, loaded.0, IDLE_SESSIONS),
        per_session(fresh.1, loaded.1, IDLE_SESSIONS + 1),
        per_session(warm.1, loaded.1, IDLE_SESSIONS),
    );
    Idle::close_all(idle).await;
    server.wait_disconnected(IDLE_SESSIONS + 1).await;
    let closed = server.memory();
    // The same again: memory the first thousand left is reused, not added to.
    let mut idle = Vec::new();
    for _ in 0..IDLE_SESSIONS {
        let mut connection = Connection::open(&server.url).await;
        connection.new_session().await;
        idle.push(connection.idle());
    }
    let reopened = server.memory();
    println!(
        "  all closed: VmRSS {:.1} MiB, Pss {:.1} MiB; {IDLE_SESSIONS} opened again: VmRSS {:.1} MiB, Pss {:.1} MiB",
        mib(closed.0),
        mib(closed.1),
        mib(reopened.0),
        mib(reopened.1)
    );
    Idle::close_all(idle).await;
    server.wait_disconnected(2 * IDLE_SESSIONS + 1).await;
    server.stop().await;
}

/// The same number of sessions on [`FEW_CONNECTIONS`] connections: what a session costs
/// without its socket.
async fn memory_per_session(model: &Model) {
    let server = Served::start(model).await;
    let fresh = server.memory();
    let mut connections = Vec::new();
    for _ in 0..FEW_CONNECTIONS {
        let mut connection = Connection::open(&server.url).await;
        connection.new_session().await;
        connections.push(connection);
    }
    let warm = server.memory();
    let mut sessions = 0;
    for connection in &mut connections {
        for _ in 0..IDLE_SESSIONS / FEW_CONNECTIONS {
            connection.new_session().await;
            sessions += 1;
        }
    }
    assert_eq!(sessions, IDLE_SESSIONS, "every session opened");
    let loaded = server.memory();
    println!("{IDLE_SESSIONS} sessions on {FEW_CONNECTIONS} connections (after one session each)");
    println!(
        "  VmRSS  fresh {:>7.1} MiB, after {FEW_CONNECTIONS} {:>7.1} MiB, after {} {:>7.1} MiB: {:.1} KiB per session",
        mib(fresh.0),
        mib(warm.0),
        IDLE_SESSIONS + FEW_CONNECTIONS,
        mib(loaded.0),
        per_session(warm.0, loaded.0, IDLE_SESSIONS)
    );
    println!(
        "  Pss    fresh {:>7.1} MiB, after {FEW_CONNECTIONS} {:>7.1} MiB, after {} {:>7.1} MiB: {:.1} KiB per session",
        mib(fresh.1),
        mib(warm.1),
        IDLE_SESSIONS + FEW_CONNECTIONS,
        mib(loaded.1),
        per_session(warm.1, loaded.1, IDLE_SESSIONS)
    );
    for connection in connections {
        connection.close().await;
    }
    server.wait_disconnected(FEW_CONNECTIONS).await;
    server.stop().await;
}

/// The two kinds of turn timed: a label, and the prompt.
const TURNS: [(&str, &str); 2] = [
    ("text answer", "Say hello."),
    (
        "update_plan call, then text",
        "Please make a plan, then answer.",
    ),
];

/// A client of the latency part: its connection and its session.
struct Client {
    connection: Connection,
    session: String,
}

impl Client {
    async fn prompt(&mut self, text: &str) -> Timing {
        self.connection.timed_prompt(&self.session, text).await
    }
}

/// [`PROMPTING`] clients, each on its own connection and session, prompt at once, for
/// [`ROUNDS`] rounds of each kind of turn.
async fn latency(model: &Model) {
    let server = Served::start(model).await;
    let mut clients = Vec::new();
    for _ in 0..PROMPTING {
        let mut connection = Connection::open(&server.url).await;
        let session = connection.new_session().await;
        clients.push(Client {
            connection,
            session,
        });
    }
    for (label, text) in TURNS {
        // Per round: p50, p90, p99, max of the first update, then of the answer.
        let mut rounds: Vec<[f64; 8]> = Vec::new();
        let mut kinds = std::collections::BTreeSet::new();
        let mut spread = Vec::new();
        for round in 0..ROUNDS {
            let start = Arc::new(tokio::sync::Barrier::new(clients.len()));
            let tasks: Vec<JoinHandle<(Client, Timing)>> = clients
                .drain(..)
                .map(|mut client| {
                    let start = start.clone();
                    tokio::spawn(async move {
                        start.wait().await;
                        let timing = client.prompt(text).await;
                        (client, timing)
                    })
                })
                .collect();
            let mut timings = Vec::new();
            for task in tasks {
                let (client, timing) = task.await.expect("a client ran");
                clients.push(client);
                timings.push(timing);
            }
            assert_eq!(timings.len(), PROMPTING, "every client was answered");
            if round == 0 {
                continue;
            }
            let first_sent = timings.iter().map(|t| t.sent).min().expect("a send");
            let last_sent = timings.iter().map(|t| t.sent).max().expect("a send");
            spread.push(ms(last_sent - first_sent));
            kinds.extend(timings.iter().map(|timing| timing.first_kind.clone()));
            let first = percentiles(timings.iter().map(|t| t.first_update).collect());
            let answer = percentiles(timings.iter().map(|t| t.answer).collect());
            let mut row = [0.0; 8];
            for (slot, value) in row.iter_mut().zip(first.iter().chain(answer.iter())) {
                *slot = ms(*value);
            }
            rounds.push(row);
        }
        let column = |i: usize| median(rounds.iter().map(|row| row[i]).collect());
        println!(
            "{PROMPTING} clients prompting at once, {label} (median of {} rounds; sends spread over {:.2} ms; first update: {})",
            rounds.len(),
            median(spread),
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        );
        println!(
            "  prompt -> first session/update  p50 {:>7.2} ms  p90 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms",
            column(0),
            column(1),
            column(2),
            column(3)
        );
        println!(
            "  prompt -> answer (end_turn)     p50 {:>7.2} ms  p90 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms",
            column(4),
            column(5),
            column(6),
            column(7)
        );
    }
    // One client alone, for comparison: the same turns without the others.
    let alone = clients.first_mut().expect("a client");
    for (label, text) in TURNS {
        let mut first = Vec::new();
        let mut answer = Vec::new();
        for _ in 0..20 {
            let timing = alone.prompt(text).await;
            first.push(ms(timing.first_update));
            answer.push(ms(timing.answer));
        }
        println!(
            "1 client alone, {label} (median of 20): first update {:.2} ms, answer {:.2} ms",
            median(first),
            median(answer)
        );
    }
    for client in clients {
        client.connection.close().await;
    }
    server.wait_disconnected(PROMPTING).await;
    server.stop().await;
}

async fn bench() {
    let parts: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    let runs = |part: &str| parts.is_empty() || parts.iter().any(|named| named == part);
    let _ = std::fs::remove_dir_all(scratch());
    let _ = std::fs::remove_dir_all(data_dir().join("sessions"));
    let model = Model::start().await;
    if runs("memory") {
        memory_per_connection(&model).await;
        memory_per_session(&model).await;
    }
    if runs("latency") {
        latency(&model).await;
    }
    let _ = std::fs::remove_dir_all(scratch());
    let _ = std::fs::remove_dir_all(data_dir().join("sessions"));
}

fn main() -> ExitCode {
    if let Some(code) = ensure_open_files() {
        return code;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench());
    ExitCode::SUCCESS
}
