//! An HTTP session that expires mid-run (the server answers 404 for its session id) is
//! re-initialised, and the call that hit the 404 goes through on the new session (the server
//! never ran it). A call whose answer was pending when the session was replaced may or may
//! not have run: it is made again only when its tool is annotated read-only or idempotent,
//! and otherwise fails saying so. The tool call during which the session was re-established
//! is told (as progress).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aquaregia_mcp::{self as mcp, HttpOptions};
use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(10);

/// What the server saw: sessions started, and each tools/call with its session.
#[derive(Default)]
struct Log {
    live_session: Option<String>,
    sessions_started: usize,
    calls: Vec<String>,
    /// Each tools/call: the tool and its session.
    named_calls: Vec<(String, String)>,
    expired_requests: usize,
}

fn answer(id: &Value, session: &str, result: &Value) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (
                header::HeaderName::from_static("mcp-session-id"),
                session.to_owned(),
            ),
        ],
        axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})),
    )
        .into_response()
}

/// A 2025-11-25 server with sessions; `expire` forgets the live one.
fn server(log: Arc<Mutex<Log>>) -> Router {
    Router::new().route(
        "/mcp",
        post(move |headers: HeaderMap, axum::Json(message): axum::Json<Value>| {
            let log = log.clone();
            async move {
                let mut log = log.lock().unwrap();
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                let method = message.get("method").and_then(Value::as_str).unwrap_or("");
                let session = headers
                    .get("mcp-session-id")
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned);
                if method == "initialize" {
                    log.sessions_started += 1;
                    let new = format!("session-{}", log.sessions_started);
                    log.live_session = Some(new.clone());
                    return answer(
                        &id,
                        &new,
                        &json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                "serverInfo": {"name": "expiring", "version": "1"}}),
                    );
                }
                let Some(session) = session.filter(|s| Some(s) == log.live_session.as_ref())
                else {
                    if method != "server/discover" {
                        log.expired_requests += 1;
                        return StatusCode::NOT_FOUND.into_response();
                    }
                    return (
                        [(header::CONTENT_TYPE, "application/json")],
                        axum::Json(json!({"jsonrpc": "2.0", "id": id,
                            "error": {"code": -32601, "message": "Method not found"}})),
                    )
                        .into_response();
                };
                match method {
                    "tools/list" => answer(
                        &id,
                        &session,
                        &json!({"tools": [
                            {"name": "work", "inputSchema": {"type": "object"}},
                            {"name": "slow_write", "inputSchema": {"type": "object"}},
                            {"name": "slow_read", "inputSchema": {"type": "object"},
                             "annotations": {"readOnlyHint": true}}
                        ]}),
                    ),
                    "tools/call" => {
                        let tool = message["params"]["name"].as_str().unwrap_or("").to_owned();
                        log.named_calls.push((tool.clone(), session.clone()));
                        // On the first session the slow tools answer with an event stream
                        // that never delivers: the answer is still pending when the session
                        // goes.
                        if tool.starts_with("slow") && session == "session-1" {
                            let never = futures::stream::pending::<Result<bytes::Bytes, std::io::Error>>();
                            return (
                                [
                                    (header::CONTENT_TYPE, "text/event-stream".to_owned()),
                                    (header::HeaderName::from_static("mcp-session-id"), session),
                                ],
                                axum::body::Body::from_stream(never),
                            )
                                .into_response();
                        }
                        log.calls.push(session.clone());
                        answer(
                            &id,
                            &session,
                            &json!({"content": [{"type": "text", "text": format!("done on {session}")}]}),
                        )
                    }
                    _ => StatusCode::ACCEPTED.into_response(),
                }
            }
        })
        .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
        .delete(|| async { StatusCode::OK }),
    )
}

#[tokio::test]
async fn an_expired_session_is_reinitialised_mid_run() {
    let log = Arc::new(Mutex::new(Log::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = server(log.clone());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let connection = mcp::Connector::new()
        .name("expiring")
        .timeout(BOUND)
        .http(&url, HttpOptions::new())
        .await
        .unwrap();
    let tools = connection.tools().await.unwrap();
    let work = tools.iter().find(|t| t.name() == "work").unwrap();
    let first = tokio::time::timeout(BOUND, work.execute(json!({})))
        .await
        .unwrap();
    assert_eq!(first.unwrap().to_string(), "done on session-1");

    // The server restarts (or times the session out): the old id is unknown now.
    log.lock().unwrap().live_session = None;
    let second = tokio::time::timeout(BOUND, work.execute(json!({})))
        .await
        .unwrap();
    assert_eq!(second.unwrap().to_string(), "done on session-2");
    {
        let log = log.lock().unwrap();
        assert_eq!(log.sessions_started, 2);
        assert_eq!(log.calls, ["session-1", "session-2"]);
        assert!(log.expired_requests >= 1);
    }
    connection.close().await;
    task.abort();
}

/// Starts the server; its URL, log and task.
async fn start() -> (String, Arc<Mutex<Log>>, tokio::task::JoinHandle<()>) {
    let log = Arc::new(Mutex::new(Log::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = server(log.clone());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, log, task)
}

/// Calls `tool`, expires the session while its answer is pending, and has another call find
/// out (404, re-initialisation). The slow call's outcome, and what it was told.
async fn call_across_expiry(tool: &str) -> (Result<String, String>, Vec<String>, Arc<Mutex<Log>>) {
    let (url, log, task) = start().await;
    let connection = mcp::Connector::new()
        .name("expiring")
        .timeout(BOUND)
        .http(&url, HttpOptions::new())
        .await
        .unwrap();
    let tools = connection.tools().await.unwrap();
    let find = |name: &str| tools.iter().find(|t| t.name() == name).unwrap().clone();
    let (slow, work) = (find(tool), find("work"));

    let told = Arc::new(Mutex::new(Vec::new()));
    let sink = told.clone();
    let reporter = aquaregia::ProgressReporter::new(move |progress| {
        sink.lock()
            .unwrap()
            .push(progress.message.unwrap_or_default());
    });
    let pending = tokio::spawn(reporter.scope(async move { slow.execute(json!({})).await }));
    for _ in 0..200 {
        if !log.lock().unwrap().named_calls.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    log.lock().unwrap().live_session = None;
    let other = tokio::time::timeout(BOUND, work.execute(json!({})))
        .await
        .expect("no hang");
    assert_eq!(other.unwrap().to_string(), "done on session-2");
    let outcome = tokio::time::timeout(BOUND, pending)
        .await
        .expect("no hang")
        .unwrap()
        .map(|output| output.to_string())
        .map_err(|error| error.to_string());
    connection.close().await;
    task.abort();
    let told = told.lock().unwrap().clone();
    (outcome, told, log)
}

#[tokio::test]
async fn a_call_cut_off_by_a_new_session_is_not_repeated_unless_safe() {
    let (outcome, told, log) = call_across_expiry("slow_write").await;
    let error = outcome.unwrap_err();
    assert!(
        error.contains("slow_write") && error.contains("may or may not have run"),
        "{error}"
    );
    assert!(
        told.iter()
            .any(|m| m.contains("expired and was re-established")),
        "{told:?}"
    );
    let writes = log
        .lock()
        .unwrap()
        .named_calls
        .iter()
        .filter(|(tool, _)| tool == "slow_write")
        .count();
    assert_eq!(writes, 1, "never sent again");
}

#[tokio::test]
async fn a_read_only_call_cut_off_by_a_new_session_is_made_again() {
    let (outcome, told, log) = call_across_expiry("slow_read").await;
    assert_eq!(outcome.unwrap(), "done on session-2");
    assert!(
        told.iter()
            .any(|m| m.contains("expired and was re-established")),
        "{told:?}"
    );
    let reads: Vec<_> = log
        .lock()
        .unwrap()
        .named_calls
        .iter()
        .filter(|(tool, _)| tool == "slow_read")
        .map(|(_, session)| session.clone())
        .collect();
    assert_eq!(reads, ["session-1", "session-2"]);
}
