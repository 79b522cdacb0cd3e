//! Shared test fixtures: a scripted mock provider on 127.0.0.1 and the checked wire payloads.
#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

/// A request the mock received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

/// What the mock answers with. Replies are served in the order they were pushed.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A JSON body with a status and extra headers.
    Json {
        status: u16,
        body: Value,
        headers: Vec<(String, String)>,
    },
    /// A raw body (malformed JSON and the like).
    Raw {
        status: u16,
        body: String,
        content_type: &'static str,
    },
    /// An SSE body sent in `chunk`-byte pieces, `delay` apart.
    Sse {
        body: String,
        chunk: usize,
        delay: Duration,
    },
    /// Sends `body` as SSE, then keeps the connection open without sending more.
    SseThenHang { body: String },
    /// Never answers (until the client goes away).
    Hang,
}

impl Reply {
    pub fn json(body: Value) -> Self {
        Self::Json {
            status: 200,
            body,
            headers: Vec::new(),
        }
    }

    pub fn error(status: u16, body: Value) -> Self {
        Self::Json {
            status,
            body,
            headers: Vec::new(),
        }
    }

    pub fn sse(body: impl Into<String>) -> Self {
        Self::Sse {
            body: body.into(),
            chunk: usize::MAX,
            delay: Duration::ZERO,
        }
    }

    /// Adds a response header (JSON replies only).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        if let Self::Json { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }
}

struct State {
    replies: Mutex<VecDeque<Reply>>,
    /// Served when the queue is empty (benchmarks); otherwise an empty queue is a 500.
    fallback: Mutex<Option<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// A mock model provider on 127.0.0.1 with a random port. Stops when dropped.
pub struct MockServer {
    /// Base URL including `/v1`, e.g. `http://127.0.0.1:41234/v1`.
    pub url: String,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    pub async fn start() -> Self {
        let state = Arc::new(State {
            replies: Mutex::new(VecDeque::new()),
            fallback: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        });
        let handler_state = state.clone();
        let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            let state = handler_state.clone();
            async move { handle(state, uri, headers, body).await }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url: format!("http://{addr}/v1"),
            state,
            task,
        }
    }

    /// The URL without `/v1` (Anthropic's base URL convention).
    pub fn root(&self) -> String {
        self.url.trim_end_matches("/v1").to_owned()
    }

    pub fn push(&self, reply: Reply) -> &Self {
        self.state.replies.lock().unwrap().push_back(reply);
        self
    }

    pub fn set_fallback(&self, reply: Reply) {
        *self.state.fallback.lock().unwrap() = Some(reply);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    pub fn request_count(&self) -> usize {
        self.state.requests.lock().unwrap().len()
    }

    pub fn pending_replies(&self) -> usize {
        self.state.replies.lock().unwrap().len()
    }
}

async fn handle(state: Arc<State>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state.requests.lock().unwrap().push(Recorded {
        path: uri.path().to_owned(),
        headers,
        body,
    });
    let reply = {
        let next = state.replies.lock().unwrap().pop_front();
        next.or_else(|| state.fallback.lock().unwrap().clone())
    };
    let Some(reply) = reply else {
        return Response::builder()
            .status(500)
            .body(Body::from("mock: no scripted reply left"))
            .unwrap();
    };
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let response = respond(reply).await;
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    response
}

async fn respond(reply: Reply) -> Response {
    match reply {
        Reply::Json {
            status,
            body,
            headers,
        } => {
            let mut builder = Response::builder()
                .status(StatusCode::from_u16(status).unwrap())
                .header("content-type", "application/json");
            for (name, value) in headers {
                builder = builder.header(name, value);
            }
            builder.body(Body::from(body.to_string())).unwrap()
        }
        Reply::Raw {
            status,
            body,
            content_type,
        } => Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap(),
        Reply::Sse { body, chunk, delay } => {
            let bytes = body.into_bytes();
            let pieces: Vec<Vec<u8>> = bytes.chunks(chunk.max(1)).map(<[u8]>::to_vec).collect();
            let stream = futures::stream::iter(pieces).then(move |piece| async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Ok::<_, std::io::Error>(piece)
            });
            sse_response(Body::from_stream(stream))
        }
        Reply::SseThenHang { body } => {
            let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(body) })
                .chain(futures::stream::pending());
            sse_response(Body::from_stream(stream))
        }
        Reply::Hang => {
            futures::future::pending::<()>().await;
            unreachable!()
        }
    }
}

fn sse_response(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

use futures::StreamExt;

/// A checked wire payload from `tests/fixtures/providers/`.
pub fn fixture(path: &str) -> String {
    let full = format!(
        "{}/tests/fixtures/providers/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("read {full}: {e}"))
}

pub fn fixture_json(path: &str) -> Value {
    serde_json::from_str(&fixture(path)).expect("fixture is JSON")
}

/// A Chat Completions answer with text.
pub fn chat_text(text: &str) -> Value {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "mock-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}

/// A Chat Completions answer calling tools: `(id, name, arguments)`.
pub fn chat_tool_calls(calls: &[(&str, &str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, arguments)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}})
        })
        .collect();
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "mock-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}

/// A Chat Completions stream of text deltas.
pub fn chat_text_stream(pieces: &[&str]) -> String {
    let mut out = String::new();
    for piece in pieces {
        out.push_str(&format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
                   "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]})
        ));
    }
    out.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    ));
    out
}

/// A Chat Completions stream that calls tools: `(id, name, arguments)`.
pub fn chat_tool_stream(calls: &[(&str, &str, Value)]) -> String {
    let mut out = String::new();
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        out.push_str(&format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
                   "choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "id": id, "type": "function",
                       "function": {"name": name, "arguments": arguments.to_string()}}]}, "finish_reason": null}]})
        ));
    }
    out.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    ));
    out
}

/// A Chat Completions client pointed at the mock, with fast retries.
pub fn chat_client(server: &MockServer) -> aquaregia::Client {
    aquaregia::Client::openai_chat()
        .base_url(&server.url)
        .api_key("test-key")
        .max_retries(2)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client builds")
}

pub fn max_in_flight(server: &MockServer) -> usize {
    server.state.max_in_flight.load(Ordering::SeqCst)
}
