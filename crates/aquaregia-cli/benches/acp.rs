//! `aquaregia acp` figures: start-up to the `initialize` answer (against a minimal C agent
//! compiled with the machine's `cc`, measured in the same run), exit on stdin EOF, memory per
//! idle session, `session/load` of a 200-turn session, `session/new` with slow servers in
//! parallel, and a tool call over MCP-over-ACP against the same MCP server over stdio.
//!
//! `cargo bench -p aquaregia-cli --bench acp`. The bench binary is also the MCP server
//! (`--serve-mcp`) and hosts the mock model (`aquaregia_test_support::mock_model`); the agent is
//! the real `aquaregia` binary. Sessions are stored under the target directory, not in the
//! user's data dir.
#![allow(missing_docs, clippy::print_stdout)]
// Test code: a failed setup or expectation should stop the test loudly, and nothing here is
// public API that would need `Debug`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text, chat_tool_calls};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, oneshot};

const AGENT: &str = env!("CARGO_BIN_EXE_aquaregia");

/// The bench's scratch directory (the agents' data dir, the C agent).
fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("acp-bench")
}

/// The floor: an ACP agent in C that answers `initialize` and reads until EOF.
const C_AGENT: &str = r#"
#include <stdio.h>
#include <string.h>
int main(void) {
    static char line[1 << 16];
    while (fgets(line, sizeof line, stdin)) {
        char id[64] = "null";
        char *p = strstr(line, "\"id\":");
        if (p) {
            p += 5;
            size_t n = 0;
            while (*p && *p != ',' && *p != '}' && n < sizeof id - 1) id[n++] = *p++;
            id[n] = 0;
        }
        if (strstr(line, "\"initialize\"")) {
            printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"protocolVersion\":1,"
                   "\"agentCapabilities\":{},\"authMethods\":[]}}\n", id);
            fflush(stdout);
        }
    }
    return 0;
}
"#;

/// Compiles [`C_AGENT`] with `cc -O2` into the scratch directory.
fn compile_c_agent() -> PathBuf {
    let dir = scratch();
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let source = dir.join("min_agent.c");
    let binary = dir.join("min_agent");
    std::fs::write(&source, C_AGENT).expect("write the C agent");
    let status = std::process::Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&binary)
        .arg(&source)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed");
    binary
}

/// A stored 200-turn session (a tool call per turn, about 190 KB), written as one file.
async fn long_session(data_dir: &Path) -> String {
    use aquaregia::{
        ContentPart, FileSessionStore, Message, NewSession, Role, SessionStore, SessionTurn,
        ToolCall, ToolOutput, ToolResult,
    };
    let store = FileSessionStore::new(data_dir.join("sessions"));
    let meta = store
        .create(NewSession::new("/tmp"))
        .await
        .expect("create a session");
    let path = store.session_path(&meta.id);
    let mut body = std::fs::read_to_string(&path).expect("the session file");
    for n in 0..200 {
        let turn = SessionTurn::new(vec![
            Message::user(format!("prompt {n}: {}", "lorem ipsum ".repeat(20))),
            Message::new(
                Role::Assistant,
                vec![ContentPart::ToolCall(ToolCall {
                    id: format!("call_{n}"),
                    name: "bench__noop".into(),
                    arguments: json!({"a": 2, "b": 40}),
                })],
            ),
            Message::new(
                Role::Tool,
                vec![ContentPart::ToolResult(ToolResult {
                    call_id: format!("call_{n}"),
                    name: "bench__noop".into(),
                    output: ToolOutput::Json(json!({"sum": 42, "note": "dolor sit ".repeat(20)})),
                    is_error: false,
                })],
            ),
            Message::assistant(format!("The sum is 42 ({n}). {}", "amet ".repeat(30))),
        ]);
        body.push_str(&json!({"type": "turn", "turn": turn}).to_string());
        body.push('\n');
    }
    std::fs::write(&path, body).expect("write the session");
    meta.id.to_string()
}

/// The one MCP server both transports reach: `server/discover`, `tools/list`, `tools/call`.
fn handle_mcp(method: &str) -> Result<Value, Value> {
    match method {
        "server/discover" => Ok(json!({
            "resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private"
        })),
        "initialize" => Ok(json!({
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "bench", "version": "1"}
        })),
        "tools/list" => Ok(json!({"tools": [
            {"name": "noop", "description": "Does nothing",
             "inputSchema": {"type": "object", "properties": {}},
             "annotations": {"readOnlyHint": true}},
            {"name": "hang", "description": "Never answers (served over ACP only)",
             "inputSchema": {"type": "object", "properties": {}},
             "annotations": {"readOnlyHint": true}}
        ]})),
        "tools/call" => Ok(json!({"content": [{"type": "text", "text": "ok"}]})),
        _ => Err(json!({"code": -32601, "message": "Method not found"})),
    }
}

/// `--serve-mcp`: the MCP server over stdio.
fn serve_mcp() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        let mut stdout = tokio::io::stdout();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let (Some(id), Some(method)) = (message.get("id"), message["method"].as_str()) else {
                continue;
            };
            let reply = match handle_mcp(method) {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
            };
            let mut bytes = reply.to_string().into_bytes();
            bytes.push(b'\n');
            if stdout.write_all(&bytes).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
}

/// Queues `steps` answers calling `tool` on the mock model, then a text answer (none with
/// `answer: false`, for a turn that is cancelled before it gets there).
fn script(model: &MockServer, steps: usize, tool: &str, answer: bool) {
    for step in 0..steps {
        let id = format!("c{step}");
        model.push(Reply::json(chat_tool_calls(&[(&id, tool, json!({}))])));
    }
    if answer {
        model.push(Reply::json(chat_text("done")));
    }
}

/// A raw ACP client over the agent's stdio; it serves `acp` MCP servers with [`handle_mcp`].
struct AcpClient {
    child: Child,
    out: mpsc::UnboundedSender<String>,
    /// Dropping it closes the agent's stdin.
    close: Option<oneshot::Sender<()>>,
    pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>,
    next_id: u64,
    /// Signalled when the agent calls the `hang` tool, which is never answered.
    hanging: mpsc::UnboundedReceiver<()>,
    /// How many `tools/call`s came over MCP-over-ACP.
    acp_calls: Arc<AtomicUsize>,
}

impl AcpClient {
    /// `aquaregia acp` on the mock model, its data dir in the scratch directory.
    fn spawn(model_url: &str) -> Self {
        let mut command = Command::new(AGENT);
        command
            .args(["acp", "--max-steps", "200"])
            .env("AQUAREGIA_MODEL", "openai-chat:mock")
            .env("OPENAI_BASE_URL", model_url)
            .env("OPENAI_API_KEY", "bench")
            .env("AQUAREGIA_DATA_DIR", scratch().join("data"))
            .env("RUST_LOG", "error");
        Self::spawn_command(command)
    }

    fn spawn_command(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn aquaregia acp");
        let stdin: ChildStdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        // One writer, shared: our requests and the answers to the agent's `mcp/message`s,
        // which the reader writes directly, as a stdio server would.
        let stdin = Arc::new(tokio::sync::Mutex::new(Some(stdin)));
        let (out, mut lines_out) = mpsc::unbounded_channel::<String>();
        let (close, mut closed) = oneshot::channel::<()>();
        let writer = stdin.clone();
        tokio::spawn(async move {
            loop {
                let line = tokio::select! {
                    _ = &mut closed => break,
                    line = lines_out.recv() => match line { Some(line) => line, None => break },
                };
                if !write_line(&writer, line).await {
                    break;
                }
            }
            writer.lock().await.take();
        });
        let pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>> = Arc::default();
        let routes = pending.clone();
        let replies = stdin;
        let (hang_seen, hanging) = mpsc::unbounded_channel();
        let acp_calls = Arc::new(AtomicUsize::new(0));
        let calls = acp_calls.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                match (message.get("id"), message["method"].as_str()) {
                    (Some(_), Some("mcp/message"))
                        if message["params"]["params"]["name"] == "hang" =>
                    {
                        let _ = hang_seen.send(());
                    }
                    (Some(id), Some(method)) => {
                        let result = if method == "mcp/message" {
                            if message["params"]["method"] == "tools/call" {
                                calls.fetch_add(1, Ordering::Relaxed);
                            }
                            match handle_mcp(message["params"]["method"].as_str().unwrap_or("")) {
                                Ok(result) => {
                                    json!({"jsonrpc": "2.0", "id": id, "result": {"result": result}})
                                }
                                Err(error) => {
                                    json!({"jsonrpc": "2.0", "id": id, "result": {"error": error}})
                                }
                            }
                        } else {
                            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "not here"}})
                        };
                        write_line(&replies, result.to_string()).await;
                    }
                    (Some(id), None) => {
                        let waiter = id
                            .as_u64()
                            .and_then(|id| routes.lock().expect("routes").remove(&id));
                        if let Some(waiter) = waiter {
                            let _ = waiter.send(message);
                        }
                    }
                    _ => {}
                }
            }
        });
        Self {
            child,
            out,
            close: Some(close),
            pending,
            next_id: 1,
            hanging,
            acp_calls,
        }
    }

    /// Sends a request; the answer comes on the returned channel.
    fn start_request(&mut self, method: &str, params: &Value) -> oneshot::Receiver<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let (waiter, reply) = oneshot::channel();
        self.pending.lock().expect("pending").insert(id, waiter);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.out.send(message.to_string()).expect("agent stdin");
        reply
    }

    fn notify(&self, method: &str, params: &Value) {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.out.send(message.to_string()).expect("agent stdin");
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        let reply = self.start_request(method, &params);
        let reply = tokio::time::timeout(Duration::from_secs(60), reply)
            .await
            .expect("agent answered in time")
            .expect("agent answered");
        assert!(reply.get("error").is_none(), "{method} failed: {reply}");
        reply["result"].clone()
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Closes stdin and waits for the agent to exit.
    async fn finish(mut self) -> Duration {
        let started = Instant::now();
        self.close = None;
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the agent exits on EOF")
            .expect("wait");
        started.elapsed()
    }
}

async fn write_line(stdin: &tokio::sync::Mutex<Option<ChildStdin>>, mut line: String) -> bool {
    line.push('\n');
    match stdin.lock().await.as_mut() {
        Some(stdin) => stdin.write_all(line.as_bytes()).await.is_ok(),
        None => false,
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Processes whose parent is `pid`.
fn children_of(pid: u32) -> usize {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter(|child| {
                    std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                        stat.rsplit(')')
                            .next()
                            .and_then(|rest| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                            == Some(pid)
                    })
                })
                .count()
        })
        .unwrap_or(0)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn initialize() -> Value {
    json!({"protocolVersion": 1, "clientCapabilities": {}})
}

fn stdio_server(name: &str, delay_ms: u64) -> Value {
    let exe = std::env::current_exe().expect("bench binary");
    let command = format!(
        "sleep {}; exec '{}' --serve-mcp",
        delay_ms as f64 / 1000.0,
        exe.display()
    );
    json!({"name": name, "command": "sh", "args": ["-c", command], "env": []})
}

async fn bench() {
    let model = MockServer::start().await;

    let _ = std::fs::remove_dir_all(scratch());
    let c_agent = compile_c_agent();

    // 1. Spawn to the initialize answer, and exit on EOF, against the C floor: the two take
    // turns, so load on the machine hits both alike.
    let (mut starts, mut floor, mut exits) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..30 {
        let started = Instant::now();
        let mut client = AcpClient::spawn_command(Command::new(&c_agent));
        client.request("initialize", initialize()).await;
        floor.push(started.elapsed());
        client.finish().await;

        let started = Instant::now();
        let mut client = AcpClient::spawn(&model.url);
        client.request("initialize", initialize()).await;
        starts.push(started.elapsed());
        exits.push(client.finish().await);
    }
    let (starts, floor) = (median(starts), median(floor));
    println!(
        "spawn -> initialize answer      {:>8.2} ms; minimal C agent {:.2} ms (ratio {:.2}, median of 30)",
        ms(starts),
        ms(floor),
        starts.as_secs_f64() / floor.as_secs_f64()
    );
    println!(
        "stdin EOF -> exit               {:>8.2} ms",
        ms(median(exits))
    );

    // 2. Memory, idle and per idle session.
    const SESSIONS: u32 = 100;
    let mut client = AcpClient::spawn(&model.url);
    client.request("initialize", initialize()).await;
    client
        .request("session/new", json!({"cwd": "/tmp", "mcpServers": []}))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let idle = rss_kib(client.pid());
    for _ in 0..SESSIONS {
        client
            .request("session/new", json!({"cwd": "/tmp", "mcpServers": []}))
            .await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let with_sessions = rss_kib(client.pid());
    println!(
        "memory idle (one session)       {:>8.1} MiB",
        idle as f64 / 1024.0
    );
    println!(
        "memory per idle session ({SESSIONS})   {:>8.1} KiB",
        with_sessions.saturating_sub(idle) as f64 / f64::from(SESSIONS)
    );
    client.finish().await;

    // 3. session/load of a 200-turn session: the stored file read, the history replayed as
    // updates (800 of them) before the answer.
    let session = long_session(&scratch().join("data")).await;
    let mut client = AcpClient::spawn(&model.url);
    client.request("initialize", initialize()).await;
    let mut loads = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        client
            .request(
                "session/load",
                json!({"sessionId": session, "cwd": "/tmp", "mcpServers": []}),
            )
            .await;
        loads.push(started.elapsed());
        client
            .request("session/close", json!({"sessionId": session}))
            .await;
    }
    println!(
        "session/load, 200 turns         {:>8.2} ms (median of 20)",
        ms(median(loads))
    );
    client.finish().await;

    // 4. session/new with slow servers: 5 in parallel against 1.
    let mut client = AcpClient::spawn(&model.url);
    client.request("initialize", initialize()).await;
    let mut timings = Vec::new();
    for count in [1usize, 5] {
        let servers: Vec<Value> = (0..count)
            .map(|i| stdio_server(&format!("slow{i}"), 500))
            .collect();
        let mut samples = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            let session = client
                .request("session/new", json!({"cwd": "/tmp", "mcpServers": servers}))
                .await;
            samples.push(started.elapsed());
            client
                .request("session/close", json!({"sessionId": session["sessionId"]}))
                .await;
        }
        timings.push(median(samples));
    }
    println!(
        "session/new, 1 slow server       {:>8.1} ms; 5 slow servers {:>8.1} ms (ratio {:.2})",
        ms(timings[0]),
        ms(timings[1]),
        timings[1].as_secs_f64() / timings[0].as_secs_f64()
    );
    let pid = client.pid();
    client.finish().await;
    assert_eq!(children_of(pid), 0);

    // 5. A tool call over MCP-over-ACP against the same server over stdio. The baseline
    // session's model calls a tool that does not exist: a step with no MCP round trip.
    // Sessions take turns each round, so drift hits all three alike. The server over ACP has
    // a name of its own: the agent pins servers' tools by name, and the same name with
    // another transport would be a changed server, its tools withheld until reviewed.
    const CALLS: usize = 60;
    let mut client = AcpClient::spawn(&model.url);
    client.request("initialize", initialize()).await;
    let mut sessions = Vec::new();
    for (label, server, tool) in [
        ("baseline", stdio_server("bench", 0), "missing"),
        ("stdio", stdio_server("bench", 0), "bench__noop"),
        (
            "acp",
            json!({"type": "acp", "name": "remote", "serverId": "bench-1"}),
            "remote__noop",
        ),
    ] {
        let session = client
            .request(
                "session/new",
                json!({"cwd": "/tmp", "mcpServers": [server]}),
            )
            .await;
        let id = session["sessionId"].clone();
        client
            .request(
                "session/set_mode",
                json!({"sessionId": id, "modeId": "bypass_permissions"}),
            )
            .await;
        sessions.push((label, id, tool));
    }
    let mut samples: HashMap<&str, Vec<Duration>> = HashMap::new();
    for round in 0..12 {
        for (label, id, tool) in &sessions {
            script(&model, CALLS, tool, true);
            let started = Instant::now();
            let reply = client
                .request(
                    "session/prompt",
                    json!({"sessionId": id, "prompt": [{"type": "text", "text": "go"}]}),
                )
                .await;
            assert_eq!(reply["stopReason"], "end_turn");
            if round > 1 {
                samples
                    .entry(label)
                    .or_default()
                    .push(started.elapsed() / (CALLS as u32 + 1));
            }
        }
    }
    assert_eq!(
        client.acp_calls.load(Ordering::Relaxed),
        12 * CALLS,
        "every call of the server over ACP reached it"
    );
    let per_call: HashMap<&str, Duration> = samples
        .into_iter()
        .map(|(label, samples)| (label, median(samples)))
        .collect();
    let round_trip = |label: &str| per_call[label].saturating_sub(per_call["baseline"]);
    println!(
        "agent step (model + loop) {:>6.3} ms; tool call round trip: stdio {:>6.3} ms, MCP-over-ACP {:>6.3} ms (ratio {:.2})",
        ms(per_call["baseline"]),
        ms(round_trip("stdio")),
        ms(round_trip("acp")),
        round_trip("acp").as_secs_f64() / round_trip("stdio").as_secs_f64()
    );

    // 6. session/cancel while a tool call is in flight: until session/prompt answers.
    let (label, id, _) = &sessions[2];
    assert_eq!(*label, "acp");
    let mut cancels = Vec::new();
    for _ in 0..20 {
        script(&model, 1, "remote__hang", false);
        let prompt = client.start_request(
            "session/prompt",
            &json!({"sessionId": id, "prompt": [{"type": "text", "text": "go"}]}),
        );
        tokio::time::timeout(Duration::from_secs(30), client.hanging.recv())
            .await
            .expect("the hang tool was called in time")
            .expect("the hang tool was called");
        let started = Instant::now();
        client.notify("session/cancel", &json!({"sessionId": id}));
        let reply = tokio::time::timeout(Duration::from_secs(10), prompt)
            .await
            .expect("the prompt answered")
            .expect("answer");
        cancels.push(started.elapsed());
        assert_eq!(reply["result"]["stopReason"], "cancelled");
    }
    println!(
        "session/cancel -> prompt answers cancelled  {:>6.3} ms (median of 20)",
        ms(median(cancels))
    );
    client.finish().await;
    let _ = std::fs::remove_dir_all(scratch());
}

fn main() {
    if std::env::args().any(|arg| arg == "--serve-mcp") {
        serve_mcp();
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench());
}
