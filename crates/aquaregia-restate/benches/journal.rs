//! What journaling costs per agent step: the same runs (9 steps calling a no-op tool, then the
//! answer; a scripted OpenAI-compatible model on 127.0.0.1) through the plain loop
//! (`Agent::run`) and through `DurableAgent` on a real `restate-server` on 127.0.0.1 (the
//! ingress's synchronous `run` call: start, every model call and tool call journaled, the
//! result). The service runs in this process; the server is the pinned one from
//! `scripts/test-deps.sh restate`.
//!
//! `cargo bench -p aquaregia-restate --features real-peers --bench journal` (the target of
//! issue 21: under 5 ms per step over the plain loop).
#![allow(missing_docs, clippy::print_stdout)]
// Bench code: a failed setup should stop it loudly, and nothing here is public API.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

use std::time::{Duration, Instant};

use aquaregia::{Agent, Client, tool};
use aquaregia_restate::DurableAgent;
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text, chat_tool_calls};
use aquaregia_test_support::restate::RestateServer;
use serde_json::json;

/// Model calls per run (all but the last call the tool).
const STEPS: usize = 10;
/// Timed runs of each kind (after 3 warm-up runs).
const RUNS: usize = 30;
const WARM_UP: usize = 3;

fn queue_run(model: &MockServer) {
    for step in 0..STEPS - 1 {
        model.push(Reply::json(chat_tool_calls(&[(
            &format!("call-{step}"),
            "noop",
            json!({"step": step}),
        )])));
    }
    model.push(Reply::json(chat_text("done")));
}

fn agent(model: &MockServer) -> Agent {
    let client = Client::openai_chat()
        .base_url(&model.url)
        .api_key("bench")
        .build()
        .unwrap();
    let noop = tool("noop")
        .description("Does nothing")
        .raw_schema(json!({"type": "object", "properties": {"step": {"type": "integer"}}}))
        .execute_raw(|_| async { Ok("ok") });
    client
        .agent("mock-model")
        .tool(noop)
        .max_steps(STEPS)
        .build()
        .unwrap()
}

/// p50 and p99 of per-step times.
fn summary(mut per_step: Vec<Duration>) -> (Duration, Duration) {
    per_step.sort();
    let at = |q: f64| per_step[((per_step.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

/// The server's logs written without waiting for the disk: what is left of the journaling
/// cost without `fsync`.
const NO_FSYNC: &str = r#"
[bifrost.local]
rocksdb-disable-wal-fsync = true

[log-server]
rocksdb-disable-wal-fsync = true
"#;

/// Per-step times of the timed runs through `DurableAgent` (served from this process) on a
/// fresh `restate-server` started with `extra_config`.
async fn on_restate(agent: &Agent, model: &MockServer, extra_config: &str) -> Vec<Duration> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let service = tokio::spawn(DurableAgent::new(agent.clone()).serve(listener, stopped));
    let server = RestateServer::start_with_config(extra_config).await;
    server.register(&format!("http://{address}")).await;
    let mut per_step = Vec::new();
    for run in 0..WARM_UP + RUNS {
        queue_run(model);
        let started = Instant::now();
        let (status, body) = server
            .ingress_post(
                &format!("/AgentRun/bench-{run}/run"),
                &json!({"prompt": "Call the tool nine times."}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["steps"], STEPS);
        if run >= WARM_UP {
            per_step.push(started.elapsed() / STEPS as u32);
        }
    }
    let _ = stop.send(());
    let _ = service.await;
    per_step
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average at start: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    runtime.block_on(async {
        let model = MockServer::start().await;
        let agent = agent(&model);

        let mut plain = Vec::new();
        for run in 0..WARM_UP + RUNS {
            queue_run(&model);
            let started = Instant::now();
            let output = agent.run("Call the tool nine times.").await.unwrap();
            assert_eq!(output.steps.len(), STEPS);
            if run >= WARM_UP {
                plain.push(started.elapsed() / STEPS as u32);
            }
        }

        let durable = on_restate(&agent, &model, "").await;
        let no_fsync = on_restate(&agent, &model, NO_FSYNC).await;

        let (plain_p50, plain_p99) = summary(plain);
        let (durable_p50, durable_p99) = summary(durable);
        let (no_fsync_p50, no_fsync_p99) = summary(no_fsync);
        println!(
            "{STEPS} steps per run (a model call and a tool call each but the last), {RUNS} runs"
        );
        println!("plain loop, per step:  p50 {plain_p50:.2?}  p99 {plain_p99:.2?}");
        println!("on Restate, per step:  p50 {durable_p50:.2?}  p99 {durable_p99:.2?}");
        println!("on Restate, fsync off:  p50 {no_fsync_p50:.2?}  p99 {no_fsync_p99:.2?}");
        println!(
            "journaling overhead per step (p50): {:.2?} (target < 5 ms); fsync off: {:.2?}",
            durable_p50.saturating_sub(plain_p50),
            no_fsync_p50.saturating_sub(plain_p50)
        );
    });
}
