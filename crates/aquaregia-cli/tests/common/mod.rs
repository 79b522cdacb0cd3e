//! Shared test fixtures: the built `aquaregia` run in a scratch directory, the in-repo MCP
//! test server, server-everything, pointing the CLI at the mock model
//! (`aquaregia_test_support::mock_model`), and `aquaregia acp` under a raw ACP client.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aquaregia_test_support::acp_client::RawClient;
use aquaregia_test_support::deps::dep;
use aquaregia_test_support::mock_model::MockServer;
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

/// `aquaregia` in `scratch`, with no model, key or log settings from the caller's environment
/// and its data dir (`AQUAREGIA_DATA_DIR`) inside `scratch`.
pub fn cli(scratch: &Scratch) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_aquaregia"));
    command
        .current_dir(&scratch.path)
        .env("XDG_CONFIG_HOME", scratch.user_config_dir())
        .env("AQUAREGIA_DATA_DIR", scratch.path.join("data"))
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

/// The `mcpServers` entry that starts server-everything (from `scripts/test-deps.sh`) over
/// stdio.
pub fn server_everything_entry() -> Value {
    json!({"command": "node", "args": [dep("AQUAREGIA_SERVER_EVERYTHING"), "stdio"]})
}

/// The `mcpServers` entry of an ACP `session/new` that starts server-everything over stdio
/// as `name`.
pub fn server_everything_acp_entry(name: &str) -> Value {
    let mut entry = server_everything_entry();
    entry["name"] = json!(name);
    entry
}

/// `aquaregia acp --model openai-chat:mock` in `scratch` on `model`, under a raw ACP client
/// over its stdio (killed when the client is dropped). `AQUAREGIA_TEST_MARKER=<marker>` is set
/// on it; the stdio servers it starts carry the marker only if their entries set it in `env`.
pub fn acp_agent(scratch: &Scratch, model: &MockServer, marker: &str) -> RawClient {
    let mut command = cli(scratch);
    command.arg("acp");
    use_mock(&mut command, model);
    command.env("AQUAREGIA_TEST_MARKER", marker);
    RawClient::spawn(tokio::process::Command::from(command))
}

/// Points `command` at the mock model as `openai-chat:mock`.
pub fn use_mock(command: &mut std::process::Command, model: &MockServer) {
    command
        .args(["--model", "openai-chat:mock"])
        .env("OPENAI_BASE_URL", &model.url)
        .env("OPENAI_API_KEY", "test");
}
