//! Secrets never stored: known, unique secrets are handed to the CLI through every way a user
//! gives one (a provider API key in the environment, an `Authorization` header and a stdio
//! server's `env` resolved from `${VAR}` in the config, OAuth tokens from a login), then every
//! output is searched for them: stdout (`--output json`, and streamed answers that split a
//! secret between two pieces), stderr with `RUST_LOG=trace`, the saved session files, the
//! OTLP spans exported with content capture on, and everything `aquaregia acp` sends the
//! editor (tool output, streamed messages, errors).

use crate::common;
use aquaregia_test_support::oauth_server;

use std::path::Path;
use std::sync::{Arc, Mutex};

use aquaregia_test_support::acp_client::{RawClient, select_permission};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use aquaregia_test_support::processes::{KillMarked, assert_no_process_left, marker};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{any, post};
use common::{BOUND, Outcome, Scratch, cli, run, test_server_script};
use oauth_server::OAuthServer;
use serde_json::{Value, json};

const API_KEY: &str = "sk-proj-UniqueApiKey0123456789abcdef";
const SERVER_TOKEN: &str = "stdio-env-token-5f2c9e71d3";
const HEADER_TOKEN: &str = "header-bearer-token-8a41b7c0";

/// A local OTLP/HTTP collector that keeps every body it gets.
struct Collector {
    url: String,
    posts: Arc<Mutex<Vec<Bytes>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Collector {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let posts = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/v1/traces", post(receive))
            .with_state(posts.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, posts, task }
    }

    /// Every exported body as text (protobuf keeps strings as UTF-8 bytes).
    fn text(&self) -> String {
        let posts = self.posts.lock().unwrap();
        assert!(!posts.is_empty(), "nothing was exported");
        posts
            .iter()
            .map(|body| String::from_utf8_lossy(body).into_owned())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(State(posts): State<Arc<Mutex<Vec<Bytes>>>>, body: Bytes) -> Vec<u8> {
    posts.lock().unwrap().push(body);
    Vec::new()
}

/// An "MCP server" over HTTP that refuses every request with a body echoing the
/// `Authorization` header it got, as misbehaving gateways do.
struct EchoServer {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl EchoServer {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let app = Router::new().route("/mcp", any(echo));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, task }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn echo(headers: HeaderMap) -> (StatusCode, String) {
    let auth = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("nothing");
    (
        StatusCode::BAD_REQUEST,
        format!("bad request: you sent Authorization: {auth}"),
    )
}

/// Every file under `dir`, as text.
fn files_text(dir: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_text(&path));
        } else {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            found.push((path.display().to_string(), text));
        }
    }
    found
}

/// Where each secret shows, `secret in place`; empty when none leaked.
fn leaks(secrets: &[&str], outputs: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for secret in secrets {
        for (place, text) in outputs {
            if text.contains(secret) {
                found.push(format!("{secret} in {place}"));
            }
        }
    }
    found
}

fn outputs(label: &str, outcome: &Outcome) -> Vec<(String, String)> {
    vec![
        (format!("{label} stdout"), outcome.stdout.clone()),
        (format!("{label} stderr"), outcome.stderr.clone()),
    ]
}

/// `aquaregia <args>`, with `--model` when it is `run`, given every secret.
fn command(scratch: &Scratch, model: &MockServer, args: &[&str]) -> std::process::Command {
    let mut command = cli(scratch);
    command.args(args);
    if args[0] == "run" {
        command.args(["--model", "openai-chat:mock"]);
    }
    command
        .env("OPENAI_BASE_URL", &model.url)
        .env("OPENAI_API_KEY", API_KEY)
        .env("MY_SERVER_TOKEN", SERVER_TOKEN)
        .env("REMOTE_TOKEN", HEADER_TOKEN)
        .env("RUST_LOG", "trace")
        .env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true");
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_any_output() {
    let collector = Collector::start().await;
    let remote = EchoServer::start().await;
    let scratch = Scratch::new();
    scratch.config(&json!({
        "local": {
            "command": "python3",
            "args": [test_server_script()],
            "env": {"AQUAREGIA_TEST_SECRET_TOKEN": "${MY_SERVER_TOKEN}"},
        },
        "remote": {
            "url": remote.url,
            "headers": {"Authorization": "Bearer ${REMOTE_TOKEN}"},
        },
    }));
    let mut all = Vec::new();

    // A run whose tool echoes the stdio server's token, saved as a session, exported.
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "local__whoami", json!({}))]),
        Reply::text_stream(&["Done."]),
    ])
    .await;
    let mut first = command(
        &scratch,
        &model,
        &["run", "--yes", "--output", "json", "Who are you?"],
    );
    first.env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url);
    let first = run(first, "").await;
    assert!(
        model.request_count() >= 2,
        "the tool was called and its result sent back: {first:?}"
    );
    assert!(
        model.requests()[0].headers.get("authorization").is_some(),
        "the key was sent"
    );
    let results = aquaregia_test_support::mock_model::tool_results(&model.bodies()[1]);
    assert!(
        results
            .iter()
            .any(|(_, text)| text.contains("my token is ")),
        "the server answered: {results:?}"
    );
    all.extend(outputs("run", &first));
    all.push(("exported spans".to_owned(), collector.text()));

    // A provider that refuses the key and echoes it in its error, as OpenAI does.
    let refusing = MockServer::with_replies(vec![Reply::error(
        401,
        json!({"error": {"message": format!("Incorrect API key provided: {API_KEY}."),
                         "type": "invalid_request_error"}}),
    )])
    .await;
    let second = run(command(&scratch, &refusing, &["run", "--yes", "Hi."]), "").await;
    assert_eq!(second.code, Some(1), "{second:?}");
    all.extend(outputs("refused run", &second));

    // The HTTP server's error echoing its Authorization header.
    let tools = run(command(&scratch, &model, &["mcp", "tools", "remote"]), "").await;
    assert_eq!(tools.code, Some(1), "{tools:?}");
    all.extend(outputs("mcp tools", &tools));

    all.extend(files_text(&scratch.data_dir()));
    let leaked = leaks(&[API_KEY, SERVER_TOKEN, HEADER_TOKEN], &all);
    assert!(leaked.is_empty(), "secrets leaked:\n{}", leaked.join("\n"));
}

/// The tokens a login obtains (read back from the token store, the one place they belong)
/// are in no output of the login or of a later command that uses them.
#[tokio::test]
async fn oauth_tokens_reach_no_output() {
    let server = OAuthServer::start().await;
    let scratch = Scratch::new();
    scratch.config(&json!({"protected": {"url": server.mcp_url}}));
    let oauth = |args: &[&str]| {
        let mut command = cli(&scratch);
        command
            .args(args)
            .env("AQUAREGIA_OAUTH_AUTOMATIC", "1")
            .env("RUST_LOG", "trace");
        command
    };
    let login = run(oauth(&["mcp", "login", "protected"]), "").await;
    assert_eq!(login.code, Some(0), "{login:?}");
    let tools = run(oauth(&["mcp", "tools", "protected"]), "").await;
    assert_eq!(tools.code, Some(0), "{tools:?}");

    let store = files_text(&scratch.data_dir().join("oauth"));
    assert_eq!(store.len(), 1, "{store:?}");
    let stored: serde_json::Value = serde_json::from_str(&store[0].1).unwrap();
    let mut tokens = Vec::new();
    collect_tokens(&stored, &mut tokens);
    assert!(!tokens.is_empty(), "tokens in the store: {stored}");
    let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut all = outputs("login", &login);
    all.extend(outputs("mcp tools", &tools));
    let leaked = leaks(&tokens, &all);
    assert!(leaked.is_empty(), "tokens leaked:\n{}", leaked.join("\n"));
}

fn collect_tokens(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                if let (true, Some(text)) = (key.ends_with("_token"), value.as_str()) {
                    out.push(text.to_owned());
                } else {
                    collect_tokens(value, out);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| collect_tokens(item, out)),
        _ => {}
    }
}

/// The pieces of a streamed answer that splits each secret in two.
fn split_secrets(secrets: &[&'static str]) -> Vec<&'static str> {
    let mut pieces = vec!["Here they are: "];
    for secret in secrets {
        let (head, tail) = secret.split_at(secret.len() / 2);
        pieces.extend([head, tail, " and "]);
    }
    pieces.push("that is all.");
    pieces
}

/// A streamed answer that splits a known secret between two pieces (the provider key, and a
/// server's secret `env`) shows neither, in plain text or in `stream-json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_split_between_streamed_pieces_is_redacted() {
    let scratch = Scratch::new();
    scratch.config(&json!({
        "local": {
            "command": "python3",
            "args": [test_server_script()],
            "env": {"AQUAREGIA_TEST_SECRET_TOKEN": "${MY_SERVER_TOKEN}"},
        },
    }));
    let pieces = split_secrets(&[API_KEY, SERVER_TOKEN]);
    for format in ["text", "stream-json"] {
        let model = MockServer::with_replies(vec![Reply::text_stream(&pieces)]).await;
        let outcome = run(
            command(
                &scratch,
                &model,
                &["run", "--yes", "--output", format, "Say them."],
            ),
            "",
        )
        .await;
        assert_eq!(outcome.code, Some(0), "{outcome:?}");
        // The answer as the user reads it: stream-json's text pieces joined.
        let answer = if format == "text" {
            outcome.stdout.clone()
        } else {
            outcome
                .stdout
                .lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .filter(|line| line["type"] == "text")
                .filter_map(|line| line["text"].as_str().map(str::to_owned))
                .collect()
        };
        assert!(
            answer.contains("Here they are: [REDACTED] and [REDACTED] and that is all."),
            "{format}: {answer}"
        );
        let mut all = outputs(format, &outcome);
        all.push((format!("{format} answer"), answer));
        let leaked = leaks(&[API_KEY, SERVER_TOKEN], &all);
        assert!(leaked.is_empty(), "secrets leaked:\n{}", leaked.join("\n"));
    }
}

/// What `aquaregia acp` sends the editor holds no known secret: a tool's output (a server's
/// secret `env`), the streamed answer splitting the provider key and that token, and a
/// provider error echoing the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_the_editor() {
    let scratch = Scratch::new();
    let marker = marker("acp-secrets");
    let _kill = KillMarked(marker.clone());
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "local__whoami", json!({}))]),
        Reply::text_stream(&split_secrets(&[API_KEY, SERVER_TOKEN])),
        Reply::error(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {API_KEY}."),
                             "type": "invalid_request_error"}}),
        ),
    ])
    .await;
    let mut agent = cli(&scratch);
    agent
        .args(["acp", "--model", "openai-chat:mock"])
        .env("OPENAI_BASE_URL", &model.url)
        .env("OPENAI_API_KEY", API_KEY)
        .env("RUST_LOG", "trace")
        .env("AQUAREGIA_TEST_MARKER", &marker);
    let client = RawClient::spawn(tokio::process::Command::from(agent));
    client.set_handler(|request| select_permission(request, "allow_once"));
    client.initialize().await;
    let local = json!({
        "name": "local", "command": "python3", "args": [test_server_script()],
        "env": [
            {"name": "AQUAREGIA_TEST_SECRET_TOKEN", "value": SERVER_TOKEN},
            {"name": "AQUAREGIA_TEST_MARKER", "value": marker},
        ],
    });
    let cwd = scratch.path.to_str().unwrap().to_owned();
    let session = client.new_session(&cwd, json!([local])).await;
    let answer = client
        .prompt(&session, "Who are you, and what are the keys?")
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let results = aquaregia_test_support::mock_model::tool_results(&model.bodies()[1]);
    assert!(
        results.iter().any(|(_, text)| text.contains(SERVER_TOKEN)),
        "the server answered with its token (the model may see it): {results:?}"
    );
    let refused = client.prompt(&session, "Again.").await;
    assert!(refused.get("error").is_some(), "{refused}");

    let sent: Vec<Value> = client.log();
    let answer_text: String = sent
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    let all = vec![
        (
            "messages to the editor".to_owned(),
            serde_json::to_string(&sent).unwrap(),
        ),
        ("the streamed answer".to_owned(), answer_text.clone()),
        ("acp stderr".to_owned(), client.stderr()),
    ];
    let leaked = leaks(&[API_KEY, SERVER_TOKEN], &all);
    assert!(leaked.is_empty(), "secrets leaked:\n{}", leaked.join("\n"));
    assert!(
        answer_text.contains("Here they are: [REDACTED] and [REDACTED]"),
        "{answer_text}"
    );
    client.close_write().await;
    assert!(client.wait_exit(BOUND).await.success());
    assert_no_process_left(&marker, BOUND).await;
}
