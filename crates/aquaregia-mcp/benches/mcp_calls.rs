//! MCP tool-call overhead: calls through an `aquaregia_mcp` Tool against raw rmcp `call_tool`
//! on the same connection to the same stdio server, interleaved so drift hits both alike.
//!
//! `cargo bench -p aquaregia-mcp --bench mcp_calls` (add `taskset -c 0` to pin).
//! The server is this same binary, started with `--serve`.
//!
//! `MCP_CALLS_TRANSPORT=http` measures Streamable HTTP with a bearer token instead: the server
//! (`--serve-http`, a JSON-answering MCP endpoint on 127.0.0.1 that requires the token) is
//! called through a raw rmcp client transport (reqwest, `auth_header`) and through an
//! aquaregia connection (`HttpOptions::bearer_token`), each its own session.
//!
//! `MCP_CALLS_TRANSPORT=oauth` (with `--features oauth`) is the same, except that the
//! aquaregia connection gets its token from OAuth: a `FileTokenStore` holding it (in a
//! directory removed at the end), the server publishing the discovery documents the connect
//! reads.
#![allow(missing_docs, clippy::print_stdout)]
// Test code: a failed setup or expectation should stop the test loudly, and nothing here is
// public API that would need `Debug`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use aquaregia_mcp::{self as mcp, HttpOptions};
use rmcp::ServiceExt;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use serde_json::json;

const SEQUENTIAL_CALLS: usize = 2000;
const ROUNDS: usize = 15;
const IN_FLIGHT: usize = 64;
const MANY_TOOLS: usize = 1000;
const TOKEN: &str = "bench-token";

#[derive(Clone)]
struct BenchServer {
    tools: Arc<Vec<Tool>>,
}

impl ServerHandler for BenchServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items((*self.tools).clone()))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text("ok"),
        ])))
    }
}

fn schema() -> Arc<serde_json::Map<String, serde_json::Value>> {
    let schema = json!({
        "type": "object",
        "properties": {"text": {"type": "string", "description": "What to echo"}},
        "required": ["text"]
    });
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

fn serve() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut tools = vec![Tool::new("noop", "Does nothing", schema())];
        for i in 0..MANY_TOOLS {
            tools.push(Tool::new(
                format!("tool_{i}"),
                format!("Tool number {i}"),
                schema(),
            ));
        }
        let server = BenchServer {
            tools: Arc::new(tools),
        };
        let running = server
            .serve((tokio::io::stdin(), tokio::io::stdout()))
            .await
            .expect("serve stdio");
        let _ = running.waiting().await;
    });
}

/// A minimal Streamable HTTP MCP server answering JSON, behind a bearer token; prints its
/// port on stdout.
fn serve_http() {
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::response::IntoResponse;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        println!("{}", listener.local_addr().expect("address").port());
        let endpoint = axum::routing::post(
            |headers: HeaderMap, axum::Json(message): axum::Json<serde_json::Value>| async move {
                let bearer = format!("Bearer {TOKEN}");
                if headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    != Some(bearer.as_str())
                {
                    return StatusCode::UNAUTHORIZED.into_response();
                }
                let id = message.get("id").cloned().unwrap_or_default();
                let input_schema = serde_json::Value::Object((*schema()).clone());
                let result = match message["method"].as_str().unwrap_or_default() {
                    "initialize" => json!({"protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "bench", "version": "0"}}),
                    "tools/list" => json!({"tools": [{"name": "noop",
                        "description": "Does nothing", "inputSchema": input_schema}]}),
                    "tools/call" => json!({"content": [{"type": "text", "text": "ok"}]}),
                    "server/discover" => {
                        return axum::Json(json!({"jsonrpc": "2.0", "id": id,
                            "error": {"code": -32601, "message": "Method not found"}}))
                        .into_response();
                    }
                    _ => return StatusCode::ACCEPTED.into_response(),
                };
                (
                    [(header::HeaderName::from_static("mcp-session-id"), "bench")],
                    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})),
                )
                    .into_response()
            },
        )
        .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
        .delete(|| async { StatusCode::OK });
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let resource = json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]});
        let issuer = json!({"issuer": base, "authorization_endpoint": format!("{base}/authorize"),
            "token_endpoint": format!("{base}/token"), "response_types_supported": ["code"]});
        let app = axum::Router::new()
            .route("/mcp", endpoint)
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                axum::routing::get(|| async move { axum::Json(resource) }),
            )
            .route(
                "/.well-known/oauth-authorization-server",
                axum::routing::get(|| async move { axum::Json(issuer) }),
            );
        axum::serve(listener, app).await.expect("serve");
    });
}

fn main() {
    if std::env::args().any(|arg| arg == "--serve") {
        serve();
        return;
    }
    if std::env::args().any(|arg| arg == "--serve-http") {
        serve_http();
        return;
    }
    let transport = std::env::var("MCP_CALLS_TRANSPORT").unwrap_or_default();
    let oauth = transport == "oauth";
    let http = oauth || transport == "http";
    let token_dir = std::env::temp_dir().join(format!("aquaregia-bench-{}", std::process::id()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let exe = std::env::current_exe().expect("bench binary");
        // Over HTTP: the server process, and the raw rmcp session.
        let mut server = None;
        let mut raw_session = None;
        let connection = if http {
            use tokio::io::AsyncBufReadExt;
            let mut child = tokio::process::Command::new(&exe)
                .arg("--serve-http")
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("start the HTTP server");
            let stdout = child.stdout.take().expect("stdout");
            let mut port = String::new();
            tokio::io::BufReader::new(stdout)
                .read_line(&mut port)
                .await
                .expect("port");
            server = Some(child);
            let url = format!("http://127.0.0.1:{}/mcp", port.trim());
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(TOKEN);
            let transport =
                StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
            raw_session = Some(().serve(transport).await.expect("raw rmcp session"));
            let (connector, options) = if oauth {
                (oauth_connector(&url, &token_dir).await, HttpOptions::new())
            } else {
                (
                    mcp::Connector::new(),
                    HttpOptions::new().bearer_token(TOKEN),
                )
            };
            connector.http(url, options).await.expect("connect")
        } else {
            let mut command = tokio::process::Command::new(&exe);
            command.arg("--serve");
            mcp::connect_stdio(command).await.expect("connect")
        };
        let tools = connection.tools().await.expect("tools");
        let noop = tools
            .iter()
            .find(|t| t.name() == "noop")
            .expect("noop")
            .clone();
        let peer = match &raw_session {
            Some(raw) => raw.peer().clone(),
            None => connection.peer().clone(),
        };
        let args = json!({"text": "hi"});
        let raw_params = || {
            let mut params = CallToolRequestParams::new("noop");
            params.arguments = args.as_object().cloned();
            params
        };

        // For profilers (callgrind): `MCP_CALLS_ONLY=raw` or `=tool` makes only that side
        // call in the sequential rounds, `=none` neither (the baseline a side is counted
        // against).
        let side = std::env::var("MCP_CALLS_ONLY").unwrap_or_default();
        let rounds: usize = std::env::var("MCP_CALLS_ROUNDS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(ROUNDS);
        let (raw_calls, our_calls) = match side.as_str() {
            "raw" => (SEQUENTIAL_CALLS, 0),
            "tool" => (0, SEQUENTIAL_CALLS),
            "none" => (0, 0),
            _ => (SEQUENTIAL_CALLS, SEQUENTIAL_CALLS),
        };

        // Sequential calls.
        let (mut raw, mut ours) = (Vec::new(), Vec::new());
        for round in 0..rounds + 2 {
            let started = Instant::now();
            for _ in 0..raw_calls {
                peer.call_tool(raw_params()).await.expect("raw call");
            }
            let raw_time = started.elapsed();
            let started = Instant::now();
            for _ in 0..our_calls {
                noop.execute(args.clone()).await.expect("tool call");
            }
            let our_time = started.elapsed();
            if round >= 2 {
                raw.push(raw_time / SEQUENTIAL_CALLS as u32);
                ours.push(our_time / SEQUENTIAL_CALLS as u32);
            }
        }
        let (raw, ours) = (median(raw), median(ours));
        println!("sequential calls (median per call over {rounds} rounds of {SEQUENTIAL_CALLS}):");
        println!("  raw rmcp call_tool     {:>7.2} µs", micros(raw));
        println!("  aquaregia Tool         {:>7.2} µs", micros(ours));
        println!(
            "  difference             {:>+7.2} µs ({:.3}x)",
            micros(ours) - micros(raw),
            ours.as_secs_f64() / raw.as_secs_f64()
        );

        // 64 calls in flight.
        let (mut raw, mut ours) = (Vec::new(), Vec::new());
        for round in 0..rounds + 2 {
            let started = Instant::now();
            for _ in 0..20 {
                let calls = (0..IN_FLIGHT).map(|_| peer.call_tool(raw_params()));
                for result in futures::future::join_all(calls).await {
                    result.expect("raw call");
                }
            }
            let raw_time = started.elapsed();
            let started = Instant::now();
            for _ in 0..20 {
                let calls = (0..IN_FLIGHT).map(|_| noop.execute(args.clone()));
                for result in futures::future::join_all(calls).await {
                    result.expect("tool call");
                }
            }
            let our_time = started.elapsed();
            if round >= 2 {
                raw.push(raw_time);
                ours.push(our_time);
            }
        }
        let calls = (20 * IN_FLIGHT) as f64;
        let (raw, ours) = (median(raw), median(ours));
        println!("{IN_FLIGHT} calls in flight:");
        println!(
            "  raw rmcp call_tool     {:>9.0} calls/s",
            calls / raw.as_secs_f64()
        );
        println!(
            "  aquaregia Tool         {:>9.0} calls/s",
            calls / ours.as_secs_f64()
        );
        println!(
            "  ratio                  {:>9.1} %",
            100.0 * raw.as_secs_f64() / ours.as_secs_f64()
        );

        // Converting 1,001 listed tools into aquaregia Tools (listing cached, new settings).
        let mut samples = Vec::new();
        for i in 0..if http { 0 } else { rounds } {
            let view = connection.clone().with_tool_prefix(format!("p{i}"));
            let started = Instant::now();
            let tools = view.tools().await.expect("tools");
            samples.push(started.elapsed());
            assert_eq!(tools.len(), MANY_TOOLS + 1);
        }
        if !http {
            println!(
                "tools() conversion of {} tools: {:.0} µs",
                MANY_TOOLS + 1,
                micros(median(samples))
            );
        }
        connection.close().await;
        if let Some(raw) = raw_session {
            let _ = raw.cancel().await;
        }
        if let Some(mut server) = server {
            let _ = server.kill().await;
        }
        let _ = std::fs::remove_dir_all(&token_dir);
    });
}

/// OAuth with the bench token in a file store under `dir`, as an earlier login left it.
#[cfg(feature = "oauth")]
async fn oauth_connector(url: &str, dir: &std::path::Path) -> mcp::Connector {
    use aquaregia_mcp::{FileTokenStore, OAuth, OAuthCredentials, OAuthToken, TokenStore};

    let store = FileTokenStore::new(dir);
    let issuer = url.trim_end_matches("/mcp").to_owned();
    let credentials = OAuthCredentials::new("bench-client")
        .token(OAuthToken::bearer(TOKEN))
        .issuer(issuer);
    store.save(url, credentials).await.expect("store the token");
    mcp::Connector::new().oauth(OAuth::new("http://127.0.0.1/callback").store(store))
}

#[cfg(not(feature = "oauth"))]
async fn oauth_connector(_url: &str, _dir: &std::path::Path) -> mcp::Connector {
    panic!("MCP_CALLS_TRANSPORT=oauth needs --features oauth")
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
