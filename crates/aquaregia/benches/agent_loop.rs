//! Agent-loop overhead per step above replaying, raw, the very requests the agent sent.
//!
//! Each step is one model call plus one call of a closure tool with a schema, against a
//! zero-latency keep-alive HTTP/1.1 mock in a process of its own (this binary, started with
//! `--serve-mock`) answering in each provider's wire format (bodies from
//! `tests/fixtures/providers/`, cut to one `lookup` call). One agent run is recorded byte for
//! byte at the mock; the floor replays those bodies with `reqwest` (same URLs and headers, in
//! the same order), reading and parsing each answer into a `serde_json::Value`. Replays and
//! agent runs are interleaved, so drift on a busy machine hits both alike. Run pinned, the mock
//! process on the same core: `taskset -c 1 cargo bench -p aquaregia --bench agent_loop`
//! (`AGENT_LOOP_MOCK=thread` puts the mock on a thread of the bench process instead).
#![allow(missing_docs, clippy::print_stdout)]
// Test code: a failed setup or expectation should stop the test loudly, and nothing here is
// public API that would need `Debug`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

mod support;

use std::time::Duration;

use aquaregia::{Agent, Client, ClientBuilder, OutputBudget, SEARCH_TOOLS, Tool, tool};
use serde_json::{Value, json};

const ROUNDS: usize = 400;
const WARMUP: usize = 20;

const CHAT_CALL: &str =
    include_str!("../tests/fixtures/providers/openai_chat/response_parallel_tool_calls.json");
const CHAT_TEXT: &str = include_str!("../tests/fixtures/providers/openai_chat/response_text.json");
const RESPONSES_CALL: &str = include_str!(
    "../tests/fixtures/providers/openai_responses/response_message_and_function_calls.json"
);
const ANTHROPIC_CALL: &str =
    include_str!("../tests/fixtures/providers/anthropic/response_tool_use.json");
const GEMINI_CALL: &str =
    include_str!("../tests/fixtures/providers/gemini/response_function_calls.json");
const GEMINI_TEXT: &str = include_str!("../tests/fixtures/providers/gemini/response_text.json");

struct Provider {
    name: &'static str,
    builder: fn() -> ClientBuilder,
    /// Appended to the mock's root URL.
    base_path: &'static str,
    call: Value,
    text: Value,
    /// Signed per request (SigV4) rather than sent a key.
    signed: bool,
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("fixture")
}

/// The fixtures' answers, each tool-call answer cut to one call of `lookup` with
/// `{"query": "rust"}`.
fn providers() -> Vec<Provider> {
    let mut chat_call = parse(CHAT_CALL);
    let calls = &mut chat_call["choices"][0]["message"]["tool_calls"];
    calls.as_array_mut().expect("calls").truncate(1);
    calls[0]["function"] = json!({"name": "lookup", "arguments": "{\"query\":\"rust\"}"});

    let mut responses_call = parse(RESPONSES_CALL);
    let output = responses_call["output"].as_array_mut().expect("output");
    output.truncate(3); // reasoning, message, first function call
    output[2]["name"] = json!("lookup");
    output[2]["arguments"] = json!("{\"query\":\"rust\"}");
    let mut responses_text = responses_call.clone();
    let message = responses_text["output"][1].clone();
    responses_text["output"] = json!([message]);

    let mut anthropic_call = parse(ANTHROPIC_CALL);
    let content = anthropic_call["content"].as_array_mut().expect("content");
    content.truncate(2); // text, first tool_use
    content[1]["name"] = json!("lookup");
    content[1]["input"] = json!({"query": "rust"});
    let mut anthropic_text = anthropic_call.clone();
    let text = anthropic_text["content"][0].clone();
    anthropic_text["content"] = json!([text]);
    anthropic_text["stop_reason"] = json!("end_turn");

    let mut gemini_call = parse(GEMINI_CALL);
    let parts = gemini_call["candidates"][0]["content"]["parts"]
        .as_array_mut()
        .expect("parts");
    parts.truncate(2); // thought, first function call (with its signature)
    parts[1]["functionCall"]["name"] = json!("lookup");
    parts[1]["functionCall"]["args"] = json!({"query": "rust"});

    vec![
        Provider {
            name: "Chat Completions",
            builder: Client::openai_chat,
            base_path: "/v1",
            call: chat_call.clone(),
            text: parse(CHAT_TEXT),
            signed: false,
        },
        Provider {
            name: "Responses",
            builder: Client::openai,
            base_path: "/v1",
            call: responses_call,
            text: responses_text,
            signed: false,
        },
        // Gemini and Claude on Vertex AI, with an access token minted once from a
        // service-account key at the mock's `/token` and then sent from the cache.
        #[cfg(feature = "vertex")]
        Provider {
            name: "Vertex Gemini",
            builder: || vertex_builder("vertex:m"),
            base_path: "",
            call: gemini_call.clone(),
            text: parse(GEMINI_TEXT),
            signed: true,
        },
        #[cfg(feature = "vertex")]
        Provider {
            name: "Vertex Anthropic",
            builder: || vertex_builder("vertex-anthropic:m"),
            base_path: "",
            call: anthropic_call.clone(),
            text: anthropic_text.clone(),
            signed: true,
        },
        Provider {
            name: "Anthropic",
            builder: Client::anthropic,
            base_path: "",
            call: anthropic_call,
            text: anthropic_text,
            signed: false,
        },
        Provider {
            name: "Gemini",
            builder: Client::gemini,
            base_path: "",
            call: gemini_call,
            text: parse(GEMINI_TEXT),
            signed: false,
        },
        // A compatible preset: Chat Completions in a dialect (`max_tokens`, reasoning back).
        Provider {
            name: "DeepSeek preset",
            builder: || spec_builder("deepseek:m"),
            base_path: "/v1",
            call: chat_call.clone(),
            text: parse(CHAT_TEXT),
            signed: false,
        },
        // The other dialects of the presets: `max_completion_tokens` (Groq, Cerebras), no
        // `parallel_tool_calls` (Mistral), and a local server without a key (llama.cpp, LM
        // Studio, vLLM).
        Provider {
            name: "Groq preset",
            builder: || spec_builder("groq:m"),
            base_path: "/openai/v1",
            call: chat_call.clone(),
            text: parse(CHAT_TEXT),
            signed: false,
        },
        Provider {
            name: "Mistral preset",
            builder: || spec_builder("mistral:m"),
            base_path: "/v1",
            call: chat_call.clone(),
            text: parse(CHAT_TEXT),
            signed: false,
        },
        Provider {
            name: "llama.cpp preset",
            builder: || spec_builder("llamacpp:m"),
            base_path: "/v1",
            call: chat_call.clone(),
            text: parse(CHAT_TEXT),
            signed: false,
        },
        // Classic deployment URLs: `/openai/deployments/m/chat/completions?api-version=`.
        Provider {
            name: "Azure deployment",
            builder: || spec_builder("azure:m"),
            base_path: "",
            call: chat_call,
            text: parse(CHAT_TEXT),
            signed: false,
        },
        #[cfg(feature = "bedrock")]
        Provider {
            name: "Bedrock SigV4",
            builder: || {
                spec_builder("bedrock:m").aws_credentials(
                    "AKIDBENCH",
                    "bench/secret/access/key",
                    None,
                    "us-east-1",
                )
            },
            base_path: "",
            call: json!({"output": {"message": {"role": "assistant", "content": [
                    {"text": "Let me look that up."},
                    {"toolUse": {"toolUseId": "tooluse_bench", "name": "lookup",
                        "input": {"query": "rust"}}}]}},
                "stopReason": "tool_use",
                "usage": {"inputTokens": 118, "outputTokens": 52, "totalTokens": 170},
                "metrics": {"latencyMs": 1}}),
            text: json!({"output": {"message": {"role": "assistant", "content": [
                    {"text": "Rust is a systems programming language."}]}},
                "stopReason": "end_turn",
                "usage": {"inputTokens": 190, "outputTokens": 12, "totalTokens": 202},
                "metrics": {"latencyMs": 1}}),
            signed: true,
        },
    ]
}

/// The service-account key file the Vertex providers mint their token from (its `token_uri`
/// is the mock's), written once the mock listens.
#[cfg(feature = "vertex")]
static VERTEX_KEY: std::sync::OnceLock<(tempfile::TempDir, std::path::PathBuf)> =
    std::sync::OnceLock::new();

#[cfg(feature = "vertex")]
fn write_vertex_key(mock_url: &str) {
    let dir = tempfile::tempdir().expect("scratch dir");
    let path = dir.path().join("key.json");
    let key = json!({
        "type": "service_account",
        "project_id": "bench-project",
        "private_key": aquaregia_test_support::google_token_server::TEST_ONLY_PRIVATE_KEY,
        "client_email": "bench@bench-project.iam.gserviceaccount.com",
        "token_uri": format!("{mock_url}/token"),
    });
    std::fs::write(&path, key.to_string()).expect("key file");
    let _ = VERTEX_KEY.set((dir, path));
}

#[cfg(feature = "vertex")]
fn vertex_builder(spec: &str) -> ClientBuilder {
    let (_, key) = VERTEX_KEY.get().expect("key file written");
    spec_builder(spec)
        .google_credentials_file(key)
        .google_cloud_location("us-central1")
}

fn spec_builder(spec: &str) -> ClientBuilder {
    Client::builder_from_model_spec(spec).expect("spec").0
}

/// Sends the recorded requests again, raw, in order; reads and parses each answer.
async fn replay(http: &reqwest::Client, root: &str, requests: &[support::RawRequest]) {
    for request in requests {
        let response = http
            .post(format!("{root}{}", request.path_and_query))
            .headers(request.headers.clone())
            .body(request.body.clone())
            .send()
            .await
            .expect("replayed request");
        let body = response.bytes().await.expect("replayed body");
        let value: Value = serde_json::from_slice(&body).expect("JSON answer");
        std::hint::black_box(value);
    }
}

/// A keep-alive HTTP/1.1 client that writes each recorded request as one buffer on one kept
/// connection and reads the answer by its `content-length`: the replay without any HTTP
/// client library.
struct RawClient {
    stream: tokio::net::TcpStream,
    buffer: Vec<u8>,
}

impl RawClient {
    async fn connect(root: &str) -> Self {
        let addr = root.trim_start_matches("http://");
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream,
            buffer: Vec::with_capacity(64 * 1024),
        }
    }

    async fn replay(&mut self, root: &str, requests: &[support::RawRequest]) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let host = root.trim_start_matches("http://");
        for request in requests {
            let mut out = Vec::with_capacity(request.body.len() + 512);
            out.extend_from_slice(
                format!(
                    "POST {} HTTP/1.1\r\nhost: {host}\r\n",
                    request.path_and_query
                )
                .as_bytes(),
            );
            for (name, value) in &request.headers {
                out.extend_from_slice(name.as_str().as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(value.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(
                format!("content-length: {}\r\n\r\n", request.body.len()).as_bytes(),
            );
            out.extend_from_slice(&request.body);
            self.stream.write_all(&out).await.expect("write");
            self.buffer.clear();
            let (head_end, length) = loop {
                self.buffer.reserve(16 * 1024);
                let n = self.stream.read_buf(&mut self.buffer).await.expect("read");
                assert!(n > 0, "connection closed");
                if let Some(end) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = std::str::from_utf8(&self.buffer[..end]).expect("head");
                    let length = head
                        .lines()
                        .find_map(|line| {
                            let (name, value) = line.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .expect("content-length");
                    break (end + 4, length);
                }
            };
            while self.buffer.len() < head_end + length {
                self.buffer.reserve(16 * 1024);
                let n = self.stream.read_buf(&mut self.buffer).await.expect("read");
                assert!(n > 0, "connection closed");
            }
            let value: Value = serde_json::from_slice(&self.buffer[head_end..head_end + length])
                .expect("JSON answer");
            std::hint::black_box(value);
        }
    }
}

/// `AGENT_LOOP_OTEL=1` (built with `--features otel`): the runs are traced by a
/// `tracing-opentelemetry` layer with an in-memory exporter, emptied between rounds.
#[cfg(feature = "otel")]
mod otel {
    use std::sync::OnceLock;

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::{Layer, Registry};

    static SPANS: OnceLock<(SdkTracerProvider, InMemorySpanExporter)> = OnceLock::new();

    pub(crate) fn install() {
        if std::env::var_os("AGENT_LOOP_OTEL").is_none() {
            return;
        }
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer()
            // Only the conventions' attributes: no code location, thread or busy/idle times.
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_tracer(provider.tracer("bench"))
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target(aquaregia::TELEMETRY_TARGET, tracing::Level::INFO),
            );
        tracing::subscriber::set_global_default(Registry::default().with(layer))
            .expect("the only subscriber");
        let _ = SPANS.set((provider, exporter));
        println!("(traced: tracing-opentelemetry, in-memory exporter)");
    }

    /// Drops the spans exported so far; checks that there were some.
    pub(crate) fn clear() {
        if let Some((_, exporter)) = SPANS.get() {
            let spans = exporter.get_finished_spans().expect("spans");
            assert!(!spans.is_empty(), "runs are traced");
            exporter.reset();
        }
    }
}

#[cfg(not(feature = "otel"))]
mod otel {
    pub(crate) fn install() {}
    pub(crate) fn clear() {}
}

fn main() {
    if std::env::args().any(|arg| arg == support::SERVE_MOCK) {
        support::serve_mock();
        return;
    }
    let only: Option<String> = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    otel::install();
    // The mock runs in a process of its own, as a model server does; `AGENT_LOOP_MOCK=thread`
    // runs it on a thread of this process instead (how this bench measured until 2026-12).
    let server = match std::env::var("AGENT_LOOP_MOCK").as_deref() {
        Ok("thread") => support::start(),
        _ => support::start_process(),
    };
    println!("(mock: {})", server.mode());
    #[cfg(feature = "vertex")]
    write_vertex_key(&server.url);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let http = reqwest::Client::new();
        // A closure tool with a schema: every call's arguments are checked against it.
        let lookup = tool("lookup")
            .description("Looks a word up")
            .raw_schema(json!({
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to look up"}},
                "required": ["query"]
            }))
            .execute_raw(|args| async move { Ok(json!({"found": args["query"]})) });

        println!(
            "per step:                        floors                         agent above the floor"
        );
        println!(
            "provider                  steps   raw socket     reqwest        agent   above raw  above reqwest"
        );
        for provider in providers() {
            if only
                .as_deref()
                .is_some_and(|only| !provider.name.to_lowercase().contains(only))
            {
                continue;
            }
            server.set_wire(
                serde_json::to_vec(&provider.call).expect("call"),
                serde_json::to_vec(&provider.text).expect("text"),
            );
            let mut builder =
                (provider.builder)().base_url(format!("{}{}", server.url, provider.base_path));
            if !provider.signed {
                builder = builder.api_key("bench");
            }
            let client = builder.build().expect("client");
            let agent = client
                .agent("m")
                .tool(lookup.clone())
                .max_steps(64)
                .build()
                .expect("agent");
            // The same loop with a tool output budget (the context window check runs always).
            let budgeted = client
                .agent("m")
                .tool(lookup.clone())
                .max_steps(64)
                .tool_output_budget(OutputBudget::tokens(25_000))
                .build()
                .expect("agent");
            for (label, agent) in [("", &agent), (" +budget", &budgeted)] {
                for steps in step_counts() {
                    let name = format!("{}{label}", provider.name);
                    measure(&server, &http, agent, steps, &name).await;
                }
            }
        }

        if only.is_none() || only.as_deref() == Some("deferral") {
            // 2,000 tools, deferred: every step searches them, then the last one answers.
            let mut call = providers().swap_remove(0).call;
            call["choices"][0]["message"]["tool_calls"][0]["function"] =
                json!({"name": SEARCH_TOOLS, "arguments": "{\"query\": \"billing invoice 1999\"}"});
            server.set_wire(
                serde_json::to_vec(&call).expect("call"),
                serde_json::to_vec(&parse(CHAT_TEXT)).expect("text"),
            );
            let client = Client::openai_chat()
                .base_url(format!("{}/v1", server.url))
                .api_key("bench")
                .build()
                .expect("client");
            let agent = client
                .agent("m")
                .tools(many_tools(2_000))
                .max_steps(64)
                .tool_output_budget(OutputBudget::tokens(25_000))
                .build()
                .expect("agent");
            for steps in step_counts() {
                measure(&server, &http, &agent, steps, "2,000 tools").await;
            }
        }

        if only.is_none() {
            // Every model answer calls the tool, so each run reaches a tool call.
            server.set_wire(
                serde_json::to_vec(&providers()[0].call).expect("call"),
                serde_json::to_vec(&providers()[0].text).expect("text"),
            );
            server.set_tool_steps(usize::MAX);
            let client = Client::openai_chat()
                .base_url(format!("{}/v1", server.url))
                .api_key("bench")
                .build()
                .expect("client");
            cancellation_latency(&client).await;
        }
    });
}

/// The steps per run to measure: 2, 8 and 16, or the comma-separated `AGENT_LOOP_STEPS`.
fn step_counts() -> Vec<usize> {
    std::env::var("AGENT_LOOP_STEPS")
        .ok()
        .map(|steps| {
            steps
                .split(',')
                .map(|n| n.trim().parse().expect("AGENT_LOOP_STEPS: numbers"))
                .collect()
        })
        .unwrap_or_else(|| vec![2, 8, 16])
}

/// Interleaved runs of `agent` and raw replays of the requests it sent; prints the medians
/// per step.
async fn measure(
    server: &support::BenchServer,
    http: &reqwest::Client,
    agent: &Agent,
    steps: usize,
    name: &str,
) {
    server.set_tool_steps(steps - 1);
    let requests = server
        .record(|| async {
            let output = agent.run("go").await.expect("agent run");
            assert_eq!(output.steps.len(), steps);
        })
        .await;
    assert_eq!(requests.len(), steps, "one request per step");
    let mut requests = requests;
    for request in &mut requests {
        // reqwest sets these itself.
        request.headers.remove("host");
        request.headers.remove("content-length");
    }
    // For profilers (callgrind): `AGENT_LOOP_ONLY=agent`, `=raw` or `=reqwest` runs just that
    // side, `AGENT_LOOP_ROUNDS` sets the rounds.
    let only = std::env::var("AGENT_LOOP_ONLY").unwrap_or_default();
    let runs = |side: &str| only.is_empty() || only == side;
    let rounds: usize = std::env::var("AGENT_LOOP_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(ROUNDS);
    // A connection of its own, kept alive from round to round like the agent's.
    let mut raw = RawClient::connect(&server.url).await;
    let (mut raw_floor, mut reqwest_floor, mut run) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds + WARMUP {
        let raw_time = support::time(|| async {
            if runs("raw") {
                raw.replay(&server.url, &requests).await;
            }
        })
        .await;
        let reqwest_time = support::time(|| async {
            if runs("reqwest") {
                replay(http, &server.url, &requests).await;
            }
        })
        .await;
        let run_time = support::time(|| async {
            if runs("agent") {
                let output = agent.run("go").await.expect("agent run");
                assert_eq!(output.steps.len(), steps);
            }
        })
        .await;
        if runs("agent") {
            otel::clear();
        }
        if round >= WARMUP {
            raw_floor.push(raw_time);
            reqwest_floor.push(reqwest_time);
            run.push(run_time);
        }
    }
    let per_step = |samples| support::median(samples) / steps as u32;
    let (raw_floor, reqwest_floor, run) =
        (per_step(raw_floor), per_step(reqwest_floor), per_step(run));
    println!(
        "{name:<24}  {steps:>5}  {:>8.1} µs  {:>8.1} µs  {:>8.1} µs  {:>8.1} µs  {:>8.1} µs",
        micros(raw_floor),
        micros(reqwest_floor),
        micros(run),
        micros(run.saturating_sub(raw_floor)),
        micros(run.saturating_sub(reqwest_floor)),
    );
}

/// `count` tools named and described like a big MCP server's.
fn many_tools(count: usize) -> Vec<Tool> {
    const TOPICS: [&str; 8] = [
        "files", "mail", "calendar", "billing", "crm", "tickets", "deploy", "metrics",
    ];
    (0..count)
        .map(|n| {
            let topic = TOPICS[n % TOPICS.len()];
            tool(format!("{topic}_op_{n:04}"))
                .description(format!(
                    "Operation {n} of the {topic} service: invoice, report or sync"
                ))
                .raw_schema(json!({"type": "object", "properties": {"id": {"type": "string"}}}))
                .execute_raw(|_| async { Ok(json!("ok")) })
        })
        .collect()
}

/// From `cancel()` to `run()` returning: while a tool runs, and while the model request hangs.
async fn cancellation_latency(client: &Client) {
    use aquaregia::CancellationToken;
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let forever = tool("lookup")
        .raw_schema(json!({"type": "object", "properties": {}}))
        .execute_raw(move |_| {
            let started = started_tx.clone();
            async move {
                let _ = started.send(());
                futures::future::pending::<()>().await;
                Ok(json!(null))
            }
        });
    // A "model" that accepts the connection and never answers.
    let mute = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let mute_url = format!("http://{}/v1", mute.local_addr().expect("addr"));
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = mute.accept().await {
            held.push(socket);
        }
    });
    let mute_client = Client::openai_chat()
        .base_url(mute_url)
        .api_key("bench")
        .build()
        .expect("client");

    let (mut in_tool, mut in_model) = (Vec::new(), Vec::new());
    for _ in 0..50 {
        let token = CancellationToken::new();
        let agent = client
            .agent("m")
            .tool(forever.clone())
            .cancellation_token(token.clone())
            .build()
            .expect("agent");
        let run = tokio::spawn(async move { agent.run("go").await });
        started_rx.recv().await.expect("tool started");
        let started = std::time::Instant::now();
        token.cancel();
        run.await.expect("join").expect("run");
        in_tool.push(started.elapsed());

        let token = CancellationToken::new();
        let agent = mute_client
            .agent("m")
            .cancellation_token(token.clone())
            .build()
            .expect("agent");
        let run = tokio::spawn(async move { agent.run("go").await });
        tokio::time::sleep(Duration::from_millis(2)).await;
        let started = std::time::Instant::now();
        token.cancel();
        run.await.expect("join").expect("run");
        in_model.push(started.elapsed());
    }
    println!(
        "cancel -> run returns: during a tool call {:.1} µs, during a model request {:.1} µs (medians of 50)",
        micros(support::median(in_tool)),
        micros(support::median(in_model))
    );
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
