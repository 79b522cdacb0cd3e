//! Streaming decode throughput: a large Chat Completions SSE body from the loopback mock,
//! decoded into events by `Client::stream`, against reading the same body raw.
//! Run with `cargo bench -p aquaregia --bench sse_decode`.
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

use aquaregia::{Client, Message, ModelRequest, StreamEvent};
use axum::body::Bytes;
use futures::StreamExt;
use serde_json::json;

const ROUNDS: usize = 30;

fn main() {
    let server = support::start();
    let mut body = String::new();
    let mut i = 0;
    while body.len() < 8 << 20 {
        let chunk = json!({
            "id": "chatcmpl-BfX3q1w2e3r4t5y6u7i8o9p0AsDf", "object": "chat.completion.chunk",
            "created": 1750000010, "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_a1b2c3d4e5",
            "choices": [{"index": 0, "delta": {"content": format!(" token{i}")}, "logprobs": null, "finish_reason": null}],
            "usage": null, "obfuscation": "x7Q"
        });
        body.push_str(&format!("data: {chunk}\n\n"));
        i += 1;
    }
    body.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    let size = body.len();
    *server.sse.lock().expect("lock") = Bytes::from(body);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let client = Client::openai_chat()
            .base_url(format!("{}/v1/stream", server.url))
            .api_key("bench")
            .build()
            .expect("client");
        let http = reqwest::Client::new();
        let raw_url = format!("{}/v1/stream/chat/completions", server.url);
        let request = ModelRequest::new("m", vec![Message::user("go")]);
        let (mut raw, mut decoded) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            raw.push(
                support::time(|| async {
                    let mut stream = http
                        .post(&raw_url)
                        .send()
                        .await
                        .expect("raw")
                        .bytes_stream();
                    while let Some(chunk) = stream.next().await {
                        std::hint::black_box(chunk.expect("chunk"));
                    }
                })
                .await,
            );
            decoded.push(
                support::time(|| async {
                    let mut stream = client.stream(&request).await.expect("stream");
                    let mut deltas = 0usize;
                    while let Some(event) = stream.next().await {
                        if let StreamEvent::TextDelta(_) = event.expect("event") {
                            deltas += 1;
                        }
                    }
                    assert_eq!(deltas, i);
                })
                .await,
            );
        }
        let (raw, decoded) = (support::median(raw), support::median(decoded));
        let decode_only = decoded.saturating_sub(raw);
        println!("body: {:.1} MB, {i} events", size as f64 / 1e6);
        println!("raw HTTP read:        {:>8.1} MB/s", mb_per_s(size, raw));
        println!(
            "stream() end to end:  {:>8.1} MB/s",
            mb_per_s(size, decoded)
        );
        println!(
            "decoding alone:       {:>8.1} MB/s",
            mb_per_s(size, decode_only)
        );
    });
}

fn mb_per_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / 1e6 / time.as_secs_f64()
}
