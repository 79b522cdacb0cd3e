//! Agent-loop overhead per step above a raw HTTP round trip to the same loopback mock model.
//!
//! Each step is one model call plus one no-op tool call. Raw round trips and agent runs are
//! interleaved, so drift on a busy machine hits both alike. Run with
//! `cargo bench -p aquaregia --bench agent_loop` (pin with `taskset -c 0` for stable figures).
#![allow(missing_docs, clippy::print_stdout)]

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use aquaregia::{Client, tool};
use serde_json::json;

const ROUNDS: usize = 400;

fn main() {
    let server = support::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let http = reqwest::Client::new();
        let raw_url = format!("{}/raw", server.url);
        let raw_body = serde_json::to_vec(&json!({
            "model": "m",
            "messages": [{"role": "user", "content": "go"}]
        }))
        .expect("body");
        let client = Client::openai_chat()
            .base_url(format!("{}/v1", server.url))
            .api_key("bench")
            .build()
            .expect("client");
        let noop = tool("noop")
            .description("Does nothing")
            .raw_schema(json!({"type": "object", "properties": {}}))
            .execute_raw(|_| async { Ok(json!("ok")) });
        let agent = client
            .agent("m")
            .tool(noop)
            .max_steps(64)
            .build()
            .expect("agent");

        println!("steps  raw/step     agent/step   overhead/step");
        for steps in [2usize, 8, 16] {
            server.tool_steps.store(steps - 1, Ordering::Relaxed);
            let (mut raw, mut run) = (Vec::new(), Vec::new());
            for round in 0..ROUNDS + 20 {
                let raw_time = support::time(|| async {
                    for _ in 0..steps {
                        let response = http
                            .post(&raw_url)
                            .header("content-type", "application/json")
                            .header("authorization", "Bearer bench")
                            .body(raw_body.clone())
                            .send()
                            .await
                            .expect("raw request");
                        let _ = response.bytes().await.expect("raw body");
                    }
                })
                .await;
                let run_time = support::time(|| async {
                    let output = agent.run("go").await.expect("agent run");
                    assert_eq!(output.steps.len(), steps);
                })
                .await;
                if round >= 20 {
                    raw.push(raw_time);
                    run.push(run_time);
                }
            }
            let raw = support::median(raw) / steps as u32;
            let run = support::median(run) / steps as u32;
            let overhead = run.saturating_sub(raw);
            println!(
                "{steps:>5}  {:>9.1} µs  {:>9.1} µs  {:>9.1} µs",
                micros(raw),
                micros(run),
                micros(overhead)
            );
        }
    });
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
