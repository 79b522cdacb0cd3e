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

        // Every model answer calls the tool, so each run reaches a tool call.
        server.tool_steps.store(usize::MAX, Ordering::Relaxed);
        cancellation_latency(&client).await;
    });
}

/// From `cancel()` to `run()` returning: while a tool runs, and while the model request hangs.
async fn cancellation_latency(client: &Client) {
    use aquaregia::CancellationToken;
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let forever = tool("noop")
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
