//! Shared test fixtures: the built `aquaregia` run in a scratch directory, the in-repo MCP
//! test server, and a scripted mock Chat Completions model on 127.0.0.1.
#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// How long one CLI run may take (a cold `node` start included).
pub const BOUND: Duration = Duration::from_secs(60);

/// A fresh directory, removed when dropped. The CLI runs in it, with its user config
/// directory inside it, so no real config file is ever read.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "aquaregia-cli-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create the scratch directory");
        Self { path }
    }

    /// Writes `contents` to `name` (directories created) and returns its path.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let file = self.path.join(name);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).expect("create the parent directory");
        }
        std::fs::write(&file, contents).expect("write the file");
        file
    }

    /// Writes `./aquaregia.json` with these servers.
    pub fn config(&self, servers: &Value) -> PathBuf {
        self.write(
            "aquaregia.json",
            &json!({ "mcpServers": servers }).to_string(),
        )
    }

    /// The user config directory the CLI sees (`$XDG_CONFIG_HOME`).
    pub fn user_config_dir(&self) -> PathBuf {
        self.path.join("xdg")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// `aquaregia` in `scratch`, with no model, key or log settings from the caller's environment.
pub fn cli(scratch: &Scratch) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_aquaregia"));
    command
        .current_dir(&scratch.path)
        .env("XDG_CONFIG_HOME", scratch.user_config_dir())
        .env("NO_COLOR", "1");
    for var in [
        "AQUAREGIA_MODEL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OLLAMA_HOST",
        "RUST_LOG",
    ] {
        command.env_remove(var);
    }
    command
}

/// How a CLI run ended.
#[derive(Debug)]
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    /// The stderr lines that are not warnings.
    pub fn error_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|line| !line.starts_with("warning:"))
            .collect()
    }
}

/// Runs `command` with `stdin` as its whole input, within [`BOUND`].
pub async fn run(command: std::process::Command, stdin: &str) -> Outcome {
    let mut command = tokio::process::Command::from(command);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("start aquaregia");
    let mut input = child.stdin.take().expect("piped stdin");
    // Small enough for the pipe buffer; closing it is the end of input.
    let _ = input.write_all(stdin.as_bytes()).await;
    drop(input);
    let output = tokio::time::timeout(BOUND, child.wait_with_output())
        .await
        .expect("aquaregia finished in time")
        .expect("wait for aquaregia");
    Outcome {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The in-repo stdio MCP server (`tests/servers/mcp_test_server.py`).
pub fn test_server_script() -> String {
    format!(
        "{}/tests/servers/mcp_test_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Its `--stdio` command line.
pub fn test_server_command() -> String {
    format!("python3 '{}'", test_server_script())
}

/// Its `mcpServers` entry.
pub fn test_server_entry() -> Value {
    json!({"command": "python3", "args": [test_server_script()]})
}

/// Processes whose environment holds `AQUAREGIA_TEST_MARKER=<marker>`.
pub fn processes_with_marker(marker: &str) -> Vec<u32> {
    let needle = format!("AQUAREGIA_TEST_MARKER={marker}");
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == needle.as_bytes()))
        })
        .collect()
}

/// A unique marker for [`processes_with_marker`].
pub fn unique_marker(test: &str) -> String {
    format!("{test}-{}", std::process::id())
}

/// SIGKILLs every process carrying a marker when dropped, so a failing test leaves nothing
/// running either.
pub struct KillMarked(pub String);

impl Drop for KillMarked {
    fn drop(&mut self) {
        let pids: Vec<String> = processes_with_marker(&self.0)
            .iter()
            .map(u32::to_string)
            .collect();
        if !pids.is_empty() {
            let _ = std::process::Command::new("kill")
                .arg("-KILL")
                .args(pids)
                .status();
        }
    }
}

/// What the mock model answers a request with.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A Chat Completions SSE stream.
    Sse(String),
    /// No answer, ever.
    Hang,
}

/// A scripted Chat Completions server on 127.0.0.1: answers `POST /v1/chat/completions`
/// with the next reply, and 500 when none is left. Stops when dropped.
pub struct MockModel {
    pub base_url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl MockModel {
    pub async fn start(replies: Vec<Reply>) -> Self {
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        let app = Router::new().route(
            "/v1/chat/completions",
            post(move |body: Bytes| {
                let (replies, recorded) = (replies.clone(), recorded.clone());
                async move {
                    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    recorded.lock().unwrap().push(body);
                    let next = replies.lock().unwrap().pop_front();
                    match next {
                        Some(Reply::Sse(events)) => Response::builder()
                            .header("content-type", "text/event-stream")
                            .body(Body::from(events))
                            .unwrap(),
                        Some(Reply::Hang) => std::future::pending().await,
                        None => Response::builder()
                            .status(500)
                            .body(Body::from("mock: no scripted reply left"))
                            .unwrap(),
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base_url: format!("http://{addr}/v1"),
            requests,
            task,
        }
    }

    /// Points `command` at this server as `openai-chat:mock`.
    pub fn use_in(&self, command: &mut std::process::Command) {
        command
            .args(["--model", "openai-chat:mock"])
            .env("OPENAI_BASE_URL", &self.base_url)
            .env("OPENAI_API_KEY", "test");
    }

    /// The request bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A Chat Completions stream of text deltas.
pub fn text_stream(pieces: &[&str]) -> Reply {
    let mut out = String::new();
    for piece in pieces {
        out.push_str(&format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock",
                   "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]})
        ));
    }
    out.push_str(&finish_chunk("stop"));
    Reply::Sse(out)
}

/// A Chat Completions stream that calls tools: `(id, name, arguments)`.
pub fn tool_stream(calls: &[(&str, &str, Value)]) -> Reply {
    let mut out = String::new();
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        out.push_str(&format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock",
                   "choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "id": id, "type": "function",
                       "function": {"name": name, "arguments": arguments.to_string()}}]}, "finish_reason": null}]})
        ));
    }
    out.push_str(&finish_chunk("tool_calls"));
    Reply::Sse(out)
}

fn finish_chunk(reason: &str) -> String {
    format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock",
               "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    )
}

/// The tool messages of a recorded request, as `(tool_call_id, content)`.
pub fn tool_messages(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter(|message| message["role"] == "tool")
                .map(|message| {
                    (
                        message["tool_call_id"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        message["content"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The tool names offered in a recorded request.
pub fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
