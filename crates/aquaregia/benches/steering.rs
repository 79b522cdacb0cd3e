//! Steering latency: from `Steering::send` to the message's arrival in the next model request.
//!
//! Each round runs an agent on `ScriptedModel` (in process, no HTTP) whose first answer calls a
//! tool that waits for the bench; while it waits, the bench sends a steering message, lets the
//! tool return, and times until the model receives its second request (the call counter's
//! wake-up), then checks that request carries the message exactly once. The time covers what
//! the loop does at the boundary: the tool's result recorded and appended, the queue taken,
//! the message appended, the step prepared and the model called, plus one task wake-up.
//! `cargo bench -p aquaregia --features test-utils --bench steering`.
#![allow(missing_docs, clippy::print_stdout)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{AgentBuilder, Role, Steering, tool};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

const ROUNDS: usize = 2_000;
const WARMUP: usize = 100;

async fn round() -> Duration {
    let model = ScriptedModel::new()
        .reply(ScriptedReply::tool_call("c1", "wait", json!({})))
        .reply(ScriptedReply::text("done"));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let gate = release.clone();
    let wait = tool("wait")
        .description("Waits for the bench")
        .raw_schema(json!({"type": "object", "properties": {}}))
        .execute_raw(move |_args: Value| {
            let (started, gate) = (started_tx.clone(), gate.clone());
            async move {
                let _ = started.send(());
                gate.notified().await;
                Ok(json!("waited"))
            }
        });
    let steering = Steering::new();
    let agent = AgentBuilder::new(Arc::new(model.clone()))
        .tool(wait)
        .steering(steering.clone())
        .build()
        .unwrap();
    let run = tokio::spawn(async move { agent.run("start").await });
    started.recv().await.unwrap();
    let sent = Instant::now();
    steering.send("steer");
    release.notify_one();
    model.wait_calls(2).await;
    let elapsed = sent.elapsed();
    let output = run.await.unwrap().unwrap();
    let request = &model.requests()[1];
    let carried = request
        .messages
        .iter()
        .filter(|m| m.role == Role::User && m.text() == "steer")
        .count();
    assert_eq!(carried, 1, "the next request carries the message once");
    assert_eq!(output.text, "done");
    elapsed
}

fn main() {
    let threads = std::env::var("STEERING_THREADS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for _ in 0..WARMUP {
            round().await;
        }
        let mut times = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            times.push(round().await);
        }
        times.sort();
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        println!(
            "steering send -> next model request, {ROUNDS} rounds, {threads} worker threads: \
             median {:?}, p90 {:?}, p99 {:?}, max {:?}",
            at(0.5),
            at(0.9),
            at(0.99),
            times[times.len() - 1]
        );
    });
}
