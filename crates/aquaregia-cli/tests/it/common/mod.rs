//! Shared test fixtures: the built `aquaregia` run in a scratch directory, the in-repo MCP
//! test server, server-everything, pointing the CLI at the mock model
//! (`aquaregia_test_support::mock_model`), and `aquaregia acp` under a raw ACP client.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::Stdio;
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
    _dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("aquaregia-cli-test-")
            .tempdir()
            .expect("create the scratch directory");
        Self {
            path: dir.path().to_path_buf(),
            _dir: dir,
        }
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

    /// The data directory the CLI sees (`$AQUAREGIA_DATA_DIR`): sessions go there.
    pub fn data_dir(&self) -> PathBuf {
        self.path.join("data")
    }

    /// The user config directory the CLI sees (`$XDG_CONFIG_HOME`).
    pub fn user_config_dir(&self) -> PathBuf {
        self.path.join("xdg")
    }
}

/// `aquaregia` in `scratch`, with no model, key or log settings from the caller's environment.
pub fn cli(scratch: &Scratch) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_aquaregia"));
    command
        .current_dir(&scratch.path)
        .env("XDG_CONFIG_HOME", scratch.user_config_dir())
        .env("AQUAREGIA_DATA_DIR", scratch.data_dir())
        .env("NO_COLOR", "1");
    for var in [
        "AQUAREGIA_MODEL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OLLAMA_HOST",
        "RUST_LOG",
        "AZURE_OPENAI_AD_TOKEN",
        "AZURE_OPENAI_BASE_URL",
        "AZURE_OPENAI_ENDPOINT",
    ] {
        command.env_remove(var);
    }
    for (_, vars) in aquaregia::Client::provider_key_vars() {
        for var in vars {
            command.env_remove(var);
        }
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

/// Runs a Node client script (`command`: `node SCRIPT ...` with its env) to its end, within
/// twice [`BOUND`], and returns the JSON report its last stdout line holds and its stderr. The
/// test fails, showing both outputs, if node fails or the last line is no JSON; `what` names
/// the client in the timeout's message.
pub async fn node_report(command: &mut tokio::process::Command, what: &str) -> (Value, String) {
    let output = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(BOUND * 2, output)
        .await
        .unwrap_or_else(|_| panic!("{what} within {:?}", BOUND * 2))
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "node failed: {}\nstdout: {stdout}\nstderr: {stderr}",
        output.status
    );
    let report = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: stdout: {stdout}\nstderr: {stderr}"));
    (report, stderr)
}

/// The in-repo stdio MCP server (`mcp_test_server.py` of `aquaregia-test-support`).
pub fn test_server_script() -> String {
    aquaregia_test_support::deps::python_server("mcp_test_server.py")
        .to_string_lossy()
        .into_owned()
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
    acp_agent_with(scratch, model, marker, &[])
}

/// [`acp_agent`] with more arguments for `aquaregia acp`.
pub fn acp_agent_with(
    scratch: &Scratch,
    model: &MockServer,
    marker: &str,
    args: &[&str],
) -> RawClient {
    let mut command = cli(scratch);
    command.arg("acp").args(args);
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

/// A Chat Completions stream answering `text`, ending with a usage chunk
/// (`stream_options.include_usage`).
pub fn text_with_usage(text: &str, prompt_tokens: u64, completion_tokens: u64) -> String {
    let mut body = String::new();
    for chunk in [
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
               "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}),
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model", "choices": [],
               "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                         "total_tokens": prompt_tokens + completion_tokens}}),
    ] {
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    body
}

/// The `(role, text)` of each message of a Chat Completions request.
pub fn transcript(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .map(|message| {
                    (
                        message["role"].as_str().unwrap_or_default().to_owned(),
                        aquaregia_test_support::mock_model::content_text(message),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `command` on a pty `columns` wide, made by `script(1)`: stdin, stdout and stderr all go
/// through the pty (stdout of the returned command is the screen's bytes; what is written to
/// its stdin is typed). Colours are on (`TERM=xterm`, and `NO_COLOR` left out, even though
/// [`cli`] sets it: set it on the returned command to turn them off).
pub fn on_pty(command: &std::process::Command, columns: u16) -> tokio::process::Command {
    let quote =
        |word: &std::ffi::OsStr| format!("'{}'", word.to_string_lossy().replace('\'', r"'\''"));
    let line = std::iter::once(quote(command.get_program()))
        .chain(command.get_args().map(quote))
        .collect::<Vec<_>>()
        .join(" ");
    let mut script = std::process::Command::new("script");
    script.args([
        "-qfec",
        &format!("stty cols {columns} rows 50; exec {line}"),
        "/dev/null",
    ]);
    script.env_remove("NO_COLOR");
    for (key, value) in command.get_envs().filter(|(key, _)| *key != "NO_COLOR") {
        match value {
            Some(value) => script.env(key, value),
            None => script.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        script.current_dir(dir);
    }
    script.env("TERM", "xterm");
    let mut script = tokio::process::Command::from(script);
    script
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    script
}

/// Reads the pty's bytes until `seen` contains `text`, within [`BOUND`].
pub async fn read_until(
    screen: &mut (impl tokio::io::AsyncRead + Unpin),
    seen: &mut Vec<u8>,
    text: &str,
) {
    use tokio::io::AsyncReadExt;
    let deadline = tokio::time::Instant::now() + BOUND;
    while !String::from_utf8_lossy(seen).contains(text) {
        let mut chunk = [0u8; 4096];
        let read = tokio::time::timeout_at(deadline, screen.read(&mut chunk))
            .await
            .unwrap_or_else(|_| panic!("`{text}` never showed: {}", String::from_utf8_lossy(seen)))
            .expect("read the pty output");
        assert!(
            read > 0,
            "ended before `{text}` showed: {}",
            String::from_utf8_lossy(seen)
        );
        seen.extend_from_slice(&chunk[..read]);
    }
}

/// Starts `run` calling the test server's `hang` tool, with `server` as the config entry
/// (stdio servers inherit only an allowlist, so its `env` gets the marker and the file the tool
/// creates once called), and waits until the call is in flight. A stubborn server ignores
/// stdin closing and SIGTERM.
pub async fn hanging_run(
    scratch: &Scratch,
    model: &MockServer,
    marker: &str,
    mut server: Value,
    stubborn: bool,
) -> tokio::process::Child {
    let hang_file = scratch.path.join("hang-started");
    server["env"] = json!({
        "AQUAREGIA_TEST_MARKER": marker,
        "AQUAREGIA_TEST_HANG_FILE": hang_file,
    });
    if stubborn {
        server["env"]["AQUAREGIA_TEST_STUBBORN"] = json!("1");
    }
    scratch.config(&json!({ "test": server }));
    let mut command = cli(scratch);
    command
        .args(["run", "--yes", "Wait."])
        .env("AQUAREGIA_TEST_MARKER", marker);
    use_mock(&mut command, model);
    let mut command = tokio::process::Command::from(command);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("start aquaregia");
    let deadline = std::time::Instant::now() + BOUND;
    while !hang_file.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the hang tool was never called"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child
}
