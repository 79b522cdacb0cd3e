//! A zero-latency mock Chat Completions server for benchmarks, on its own thread and runtime
//! so its work does not share the measured task's runtime.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::response::Response;
use axum::routing::post;
use serde_json::json;

pub struct BenchServer {
    pub url: String,
    /// Tool-call answers to give before a text answer (then the count restarts).
    pub tool_steps: Arc<AtomicUsize>,
    /// SSE body served at `/v1/stream/chat/completions`.
    pub sse: Arc<std::sync::Mutex<Bytes>>,
}

pub fn start() -> BenchServer {
    let tool_steps = Arc::new(AtomicUsize::new(0));
    let sse = Arc::new(std::sync::Mutex::new(Bytes::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let steps = tool_steps.clone();
    let sse_body = sse.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let text = Bytes::from(
                json!({
                    "id": "c", "object": "chat.completion", "model": "m",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                })
                .to_string(),
            );
            let call = Bytes::from(
                json!({
                    "id": "c", "object": "chat.completion", "model": "m",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "noop", "arguments": "{}"}}
                    ]}, "finish_reason": "tool_calls"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                })
                .to_string(),
            );
            let served = Arc::new(AtomicUsize::new(0));
            let (text2, call2) = (text.clone(), call.clone());
            let app = Router::new()
                .route(
                    "/v1/chat/completions",
                    post(move || {
                        let (text, call, steps, served) =
                            (text2.clone(), call2.clone(), steps.clone(), served.clone());
                        async move {
                            let n = served.fetch_add(1, Ordering::Relaxed);
                            let body = if n < steps.load(Ordering::Relaxed) {
                                call
                            } else {
                                served.store(0, Ordering::Relaxed);
                                text
                            };
                            json_response(body)
                        }
                    }),
                )
                .route(
                    "/raw",
                    post(move || {
                        let text = text.clone();
                        async move { json_response(text) }
                    }),
                )
                .route(
                    "/v1/stream/chat/completions",
                    post(move || {
                        let body = sse_body.lock().expect("lock").clone();
                        async move {
                            Response::builder()
                                .header("content-type", "text/event-stream")
                                .body(Body::from(body))
                                .expect("response")
                        }
                    }),
                );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            tx.send(listener.local_addr().expect("addr")).expect("send addr");
            axum::serve(listener, app).await.expect("serve");
        });
    });
    let addr = rx.recv().expect("server address");
    BenchServer {
        url: format!("http://{addr}"),
        tool_steps,
        sse,
    }
}

fn json_response(body: Bytes) -> Response {
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("response")
}

/// Median of `samples` timings of `f`.
pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

pub async fn time<F, Fut>(f: F) -> Duration
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let started = Instant::now();
    f().await;
    started.elapsed()
}
