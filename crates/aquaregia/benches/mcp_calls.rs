//! MCP tool-call overhead: calls through an `aquaregia::mcp` Tool against raw rmcp `call_tool`
//! on the same connection to the same stdio server, interleaved so drift hits both alike.
//!
//! `cargo bench -p aquaregia --features mcp --bench mcp_calls` (add `taskset -c 0` to pin).
//! The server is this same binary, started with `--serve`.
#![allow(missing_docs, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use aquaregia::mcp;
use rmcp::ServiceExt;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::json;

const SEQUENTIAL_CALLS: usize = 2000;
const ROUNDS: usize = 15;
const IN_FLIGHT: usize = 64;
const MANY_TOOLS: usize = 1000;

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

fn main() {
    if std::env::args().any(|arg| arg == "--serve") {
        serve();
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let exe = std::env::current_exe().expect("bench binary");
        let mut command = tokio::process::Command::new(exe);
        command.arg("--serve");
        let connection = mcp::connect_stdio(command).await.expect("connect");
        let tools = connection.tools().await.expect("tools");
        let noop = tools
            .iter()
            .find(|t| t.name() == "noop")
            .expect("noop")
            .clone();
        let peer = connection.peer().clone();
        let args = json!({"text": "hi"});
        let raw_params = || {
            let mut params = CallToolRequestParams::new("noop");
            params.arguments = args.as_object().cloned();
            params
        };

        // For profilers (callgrind): `MCP_CALLS_ONLY=raw` or `=tool` makes only that side
        // call in the sequential rounds.
        let side = std::env::var("MCP_CALLS_ONLY").unwrap_or_default();
        let rounds: usize = std::env::var("MCP_CALLS_ROUNDS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(ROUNDS);
        let (raw_calls, our_calls) = match side.as_str() {
            "raw" => (SEQUENTIAL_CALLS, 0),
            "tool" => (0, SEQUENTIAL_CALLS),
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
        for i in 0..rounds {
            let view = connection.clone().with_tool_prefix(format!("p{i}"));
            let started = Instant::now();
            let tools = view.tools().await.expect("tools");
            samples.push(started.elapsed());
            assert_eq!(tools.len(), MANY_TOOLS + 1);
        }
        println!(
            "tools() conversion of {} tools: {:.0} µs",
            MANY_TOOLS + 1,
            micros(median(samples))
        );
        connection.close().await;
    });
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
