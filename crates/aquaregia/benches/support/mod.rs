//! A zero-latency mock model server for benchmarks, on its own thread and runtime so its work
//! does not share the measured task's runtime.
//!
//! Every POST except the SSE route gets the scripted answers of the current [`Wire`] (any
//! provider's format: the bench sets the bodies), and can be recorded byte for byte so a
//! benchmark can replay exactly what the client sent.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::routing::post;

/// The scripted answers: `call` for the first `tool_steps` requests, then `text` (and the count
/// restarts).
#[derive(Clone, Default)]
pub struct Wire {
    pub call: Bytes,
    pub text: Bytes,
}

/// One request as it arrived: path with query, headers and the raw body bytes.
#[derive(Clone, Debug)]
pub struct RawRequest {
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

pub struct BenchServer {
    pub url: String,
    /// Tool-call answers to give before a text answer (then the count restarts).
    pub tool_steps: Arc<AtomicUsize>,
    /// The answers served at every path but the SSE one.
    pub wire: Arc<Mutex<Wire>>,
    /// SSE body served at `/v1/stream/chat/completions`.
    pub sse: Arc<Mutex<Bytes>>,
    recording: Arc<AtomicBool>,
    recorded: Arc<Mutex<Vec<RawRequest>>>,
    served: Arc<AtomicUsize>,
}

impl BenchServer {
    /// Sets the answers and restarts the count.
    pub fn set_wire(&self, call: impl Into<Bytes>, text: impl Into<Bytes>) {
        *self.wire.lock().expect("lock") = Wire {
            call: call.into(),
            text: text.into(),
        };
        self.served.store(0, Ordering::Relaxed);
    }

    /// Records the requests made while `f` runs.
    pub async fn record<F, Fut>(&self, f: F) -> Vec<RawRequest>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        self.recorded.lock().expect("lock").clear();
        self.recording.store(true, Ordering::SeqCst);
        f().await;
        self.recording.store(false, Ordering::SeqCst);
        std::mem::take(&mut *self.recorded.lock().expect("lock"))
    }
}

pub fn start() -> BenchServer {
    let tool_steps = Arc::new(AtomicUsize::new(0));
    let wire = Arc::new(Mutex::new(Wire::default()));
    let sse = Arc::new(Mutex::new(Bytes::new()));
    let recording = Arc::new(AtomicBool::new(false));
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let served = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    let (steps, wire2, sse_body, recording2, recorded2, served2) = (
        tool_steps.clone(),
        wire.clone(),
        sse.clone(),
        recording.clone(),
        recorded.clone(),
        served.clone(),
    );
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let app = Router::new()
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
                )
                .fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
                    if recording2.load(Ordering::Relaxed) {
                        recorded2.lock().expect("lock").push(RawRequest {
                            path_and_query: uri
                                .path_and_query()
                                .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned()),
                            headers,
                            body,
                        });
                    }
                    let n = served2.fetch_add(1, Ordering::Relaxed);
                    let body = {
                        let wire = wire2.lock().expect("lock");
                        if n < steps.load(Ordering::Relaxed) {
                            wire.call.clone()
                        } else {
                            served2.store(0, Ordering::Relaxed);
                            wire.text.clone()
                        }
                    };
                    async move { json_response(body) }
                });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            tx.send(listener.local_addr().expect("addr"))
                .expect("send addr");
            axum::serve(listener, app).await.expect("serve");
        });
    });
    let addr = rx.recv().expect("server address");
    BenchServer {
        url: format!("http://{addr}"),
        tool_steps,
        wire,
        sse,
        recording,
        recorded,
        served,
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
