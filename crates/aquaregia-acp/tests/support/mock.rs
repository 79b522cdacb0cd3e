//! A scripted OpenAI-compatible (Chat Completions) model on 127.0.0.1.
//!
//! Replies are served in the order they were pushed; the agent streams, so replies are SSE
//! `data:` chunks ending with `data: [DONE]`. A reply can be held behind a gate the test opens.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{BOUND, eventually};

/// One scripted answer.
#[derive(Clone)]
pub enum Reply {
    /// An SSE body.
    Sse(String),
    /// Waits until the gate is opened, then answers.
    Gated(Arc<Notify>, Box<Reply>),
    /// Never answers (until the client goes away).
    Hang,
}

/// A text answer, streamed in two pieces.
pub fn text(answer: &str) -> Reply {
    let (first, second) = answer.split_at(answer.len() / 2);
    let mut out = String::new();
    for piece in [first, second] {
        out.push_str(&chunk(json!({"content": piece}), None));
    }
    out.push_str(&chunk(json!({}), Some("stop")));
    out.push_str("data: [DONE]\n\n");
    Reply::Sse(out)
}

/// An answer calling tools: `(call id, tool name, arguments)`.
pub fn tool_calls(calls: &[(&str, &str, Value)]) -> Reply {
    let mut out = String::new();
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        out.push_str(&chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                   "function": {"name": name, "arguments": arguments.to_string()}}]}),
            None,
        ));
    }
    out.push_str(&chunk(json!({}), Some("tool_calls")));
    out.push_str("data: [DONE]\n\n");
    Reply::Sse(out)
}

/// One tool call.
pub fn tool_call(id: &str, name: &str, arguments: Value) -> Reply {
    tool_calls(&[(id, name, arguments)])
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let mut choice = json!({"index": 0, "finish_reason": finish});
    choice["delta"] = delta;
    format!(
        "data: {}\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
               "choices": [choice]})
    )
}

#[derive(Default)]
struct State {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Value>>,
}

/// The mock model. Stops when dropped.
pub struct MockModel {
    /// Base URL including `/v1`.
    pub url: String,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockModel {
    pub async fn start() -> Self {
        let state = Arc::new(State::default());
        let handler_state = state.clone();
        let app = Router::new().fallback(move |body: Bytes| {
            let state = handler_state.clone();
            async move { handle(state, body).await }
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

    pub fn push(&self, reply: Reply) -> &Self {
        self.state.replies.lock().unwrap().push_back(reply);
        self
    }

    /// The request bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.state.requests.lock().unwrap().clone()
    }

    pub fn request_count(&self) -> usize {
        self.state.requests.lock().unwrap().len()
    }

    /// Waits (within the bound) until `n` requests arrived.
    pub async fn wait_requests(&self, n: usize) {
        eventually(&format!("{n} model requests"), || self.request_count() >= n).await;
    }

    pub fn pending_replies(&self) -> usize {
        self.state.replies.lock().unwrap().len()
    }
}

async fn handle(state: Arc<State>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state.requests.lock().unwrap().push(body);
    let next = state.replies.lock().unwrap().pop_front();
    let Some(mut reply) = next else {
        return Response::builder()
            .status(500)
            .body(Body::from("mock: no scripted reply left"))
            .unwrap();
    };
    loop {
        match reply {
            Reply::Sse(body) => {
                return Response::builder()
                    .status(200)
                    .header("content-type", "text/event-stream")
                    .body(Body::from(body))
                    .unwrap();
            }
            Reply::Gated(gate, inner) => {
                // Bounded so a broken test cannot hang forever.
                let _ = tokio::time::timeout(BOUND * 4, gate.notified()).await;
                reply = *inner;
            }
            Reply::Hang => {
                futures::future::pending::<()>().await;
            }
        }
    }
}

/// The names of the tools a model request offered.
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

/// The `role: "tool"` messages of a model request.
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
