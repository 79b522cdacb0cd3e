//! A scripted OpenAI-compatible model provider on 127.0.0.1 ([`MockServer`]), the Chat
//! Completions payloads it answers with, and inspectors for the requests it received.
//!
//! Replies are served in the order they were pushed; when none is left the mock answers 500
//! (or the fallback reply, if one is set). Every request is recorded, whatever its path.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

/// How long [`MockServer::wait_requests`] waits.
const WAIT_BOUND: Duration = Duration::from_secs(30);
/// How long a [`Reply::Gated`] reply waits for its gate, so a broken test cannot hang forever.
const GATE_BOUND: Duration = Duration::from_secs(120);

/// A request the mock received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The query string without `?` (empty when there is none), e.g. `alt=sse`.
    pub query: String,
    /// The request headers.
    pub headers: HeaderMap,
    /// The JSON body (`null` if it was not JSON).
    pub body: Value,
    /// The body's bytes as they arrived (what a signature covers).
    pub raw_body: Vec<u8>,
}

/// What the mock answers with.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A JSON body with a status and extra headers.
    Json {
        /// The HTTP status.
        status: u16,
        /// The JSON body.
        body: Value,
        /// Extra response headers.
        headers: Vec<(String, String)>,
    },
    /// A raw body (malformed JSON and the like).
    Raw {
        /// The HTTP status.
        status: u16,
        /// The body, sent as is.
        body: String,
        /// The `content-type` header.
        content_type: &'static str,
    },
    /// A binary body (AWS event streams and the like), sent in `chunk`-byte pieces.
    Bytes {
        /// The HTTP status.
        status: u16,
        /// The body.
        body: Vec<u8>,
        /// The `content-type` header.
        content_type: &'static str,
        /// The size of each piece sent.
        chunk: usize,
    },
    /// An SSE body sent in `chunk`-byte pieces, `delay` apart.
    Sse {
        /// The whole SSE body.
        body: String,
        /// The size of each piece sent.
        chunk: usize,
        /// The pause before each piece.
        delay: Duration,
    },
    /// Sends `body` as SSE, then keeps the connection open without sending more.
    SseThenHang {
        /// The SSE sent before hanging.
        body: String,
    },
    /// Waits until the gate is notified (bounded), then answers with the inner reply.
    Gated(Arc<Notify>, Box<Reply>),
    /// Never answers (until the client goes away).
    Hang,
}

impl Reply {
    /// A 200 JSON answer.
    pub fn json(body: Value) -> Self {
        Self::Json {
            status: 200,
            body,
            headers: Vec::new(),
        }
    }

    /// A JSON answer with an error `status`.
    pub fn error(status: u16, body: Value) -> Self {
        Self::Json {
            status,
            body,
            headers: Vec::new(),
        }
    }

    /// An SSE answer sent in one piece.
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

    /// A streamed Chat Completions text answer with these deltas ([`chat_text_stream`]).
    pub fn text_stream(pieces: &[&str]) -> Self {
        Self::sse(chat_text_stream(pieces))
    }

    /// A streamed Chat Completions text answer, in two deltas (split in the middle).
    pub fn text(answer: &str) -> Self {
        let (first, second) = answer.split_at(answer.len() / 2);
        Self::text_stream(&[first, second])
    }

    /// A streamed OpenAI Responses text answer (`openai:` models, which send
    /// `prompt_cache_key`).
    pub fn responses_text(answer: &str) -> Self {
        let delta = json!({"type": "response.output_text.delta", "item_id": "msg_1",
            "output_index": 0, "content_index": 0, "delta": answer});
        let completed = json!({"type": "response.completed", "response": {
            "id": "resp_1", "status": "completed", "model": "gpt-5-mini",
            "output": [{"id": "msg_1", "type": "message", "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": answer, "annotations": []}]}],
            "usage": {"input_tokens": 5, "output_tokens": 2}}});
        Self::sse(format!(
            "event: response.output_text.delta\ndata: {delta}\n\n\
             event: response.completed\ndata: {completed}\n\n"
        ))
    }

    /// A streamed Chat Completions answer calling tools ([`chat_tool_stream`]).
    pub fn tool_stream(calls: &[(&str, &str, Value)]) -> Self {
        Self::sse(chat_tool_stream(calls))
    }

    /// A streamed Chat Completions answer calling one tool.
    pub fn tool_call(id: &str, name: &str, arguments: Value) -> Self {
        Self::tool_stream(&[(id, name, arguments)])
    }
}

struct State {
    replies: Mutex<VecDeque<Reply>>,
    /// Served when the queue is empty (benchmarks); otherwise an empty queue is a 500.
    fallback: Mutex<Option<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    /// How many requests arrived, for [`MockServer::wait_requests`].
    arrived: watch::Sender<usize>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Served by `GET /v1/models` (kept apart from the scripted replies and requests).
    models: Mutex<Vec<String>>,
    model_lists: AtomicUsize,
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
    /// Starts the mock with no scripted reply.
    pub async fn start() -> Self {
        let state = Arc::new(State {
            replies: Mutex::new(VecDeque::new()),
            fallback: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            arrived: watch::Sender::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            models: Mutex::new(Vec::new()),
            model_lists: AtomicUsize::new(0),
        });
        let handler_state = state.clone();
        let models_state = state.clone();
        let app = Router::new()
            .route(
                "/v1/models",
                axum::routing::get(move || {
                    let state = models_state.clone();
                    async move {
                        state.model_lists.fetch_add(1, Ordering::SeqCst);
                        let data: Vec<Value> = state
                            .models
                            .lock()
                            .unwrap()
                            .iter()
                            .map(|id| json!({"id": id, "object": "model", "owned_by": "mock"}))
                            .collect();
                        axum::Json(json!({"object": "list", "data": data}))
                    }
                }),
            )
            .fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
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

    /// Starts the mock with these replies queued.
    pub async fn with_replies(replies: impl IntoIterator<Item = Reply>) -> Self {
        let server = Self::start().await;
        server.state.replies.lock().unwrap().extend(replies);
        server
    }

    /// The URL without `/v1` (Anthropic's base URL convention).
    pub fn root(&self) -> String {
        self.url.trim_end_matches("/v1").to_owned()
    }

    /// Queues a reply.
    pub fn push(&self, reply: Reply) -> &Self {
        self.state.replies.lock().unwrap().push_back(reply);
        self
    }

    /// Sets the reply served whenever the queue is empty.
    pub fn set_fallback(&self, reply: Reply) {
        *self.state.fallback.lock().unwrap() = Some(reply);
    }

    /// Sets the models `GET /v1/models` lists (none by default). Those requests are not
    /// scripted replies and are not among [`requests`](Self::requests).
    pub fn set_models(&self, models: &[&str]) {
        *self.state.models.lock().unwrap() = models.iter().map(|m| (*m).to_owned()).collect();
    }

    /// How many times the models were listed.
    pub fn model_lists(&self) -> usize {
        self.state.model_lists.load(Ordering::SeqCst)
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// The bodies of the requests received so far.
    pub fn bodies(&self) -> Vec<Value> {
        let requests = self.state.requests.lock().unwrap();
        requests
            .iter()
            .map(|request| request.body.clone())
            .collect()
    }

    /// How many requests were received so far.
    pub fn request_count(&self) -> usize {
        self.state.requests.lock().unwrap().len()
    }

    /// Waits (within 30 s) until `n` requests arrived.
    pub async fn wait_requests(&self, n: usize) {
        let mut arrived = self.state.arrived.subscribe();
        tokio::time::timeout(WAIT_BOUND, arrived.wait_for(|count| *count >= n))
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {n} model requests"))
            .expect("the mock's state outlives this wait");
    }

    /// How many queued replies were not served yet.
    pub fn pending_replies(&self) -> usize {
        self.state.replies.lock().unwrap().len()
    }

    /// The most replies that were being answered at once.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }
}

async fn handle(state: Arc<State>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let raw_body = body.to_vec();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let count = {
        let mut requests = state.requests.lock().unwrap();
        requests.push(Recorded {
            path: uri.path().to_owned(),
            query: uri.query().unwrap_or_default().to_owned(),
            headers,
            body,
            raw_body,
        });
        requests.len()
    };
    state.arrived.send_replace(count);
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

async fn respond(mut reply: Reply) -> Response {
    // Open the gates first.
    while let Reply::Gated(gate, inner) = reply {
        let _ = tokio::time::timeout(GATE_BOUND, gate.notified()).await;
        reply = *inner;
    }
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
        Reply::Bytes {
            status,
            body,
            content_type,
            chunk,
        } => {
            let pieces: Vec<Vec<u8>> = body.chunks(chunk.max(1)).map(<[u8]>::to_vec).collect();
            let stream = futures::stream::iter(pieces.into_iter().map(Ok::<_, std::io::Error>));
            Response::builder()
                .status(StatusCode::from_u16(status).unwrap())
                .header("content-type", content_type)
                .body(Body::from_stream(stream))
                .unwrap()
        }
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
        Reply::Gated(..) => unreachable!("gates are opened above"),
    }
}

fn sse_response(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
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
    out.push_str(&finish_chunk("stop"));
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
    out.push_str(&finish_chunk("tool_calls"));
    out
}

/// The last chunk of a Chat Completions stream, and `[DONE]`.
fn finish_chunk(reason: &str) -> String {
    format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
               "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    )
}

/// The names of the tools a Chat Completions request offered.
pub fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The `role: "tool"` messages of a Chat Completions request.
pub fn tool_messages(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m["role"] == "tool")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// The [`tool_messages`] of a Chat Completions request as `(tool_call_id, content)`
/// (a content that is not a string is empty).
pub fn tool_results(body: &Value) -> Vec<(String, String)> {
    tool_messages(body)
        .iter()
        .map(|message| {
            (
                message["tool_call_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                message["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The text of a message's content (a string, or the text parts of an array).
pub fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
