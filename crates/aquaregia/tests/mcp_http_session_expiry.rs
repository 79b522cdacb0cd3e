//! An HTTP session that expires mid-run (the server answers 404 for its session id) is
//! re-initialised, and the call that hit the 404 goes through on the new session.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aquaregia::mcp::{self, HttpOptions};
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
                        &json!({"tools": [{"name": "work", "inputSchema": {"type": "object"}}]}),
                    ),
                    "tools/call" => {
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
