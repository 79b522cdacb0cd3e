//! Streamable HTTP servers that fail in ways callers must be able to tell apart: a one-off
//! HTTP 500 on a call, an authorization challenge, and nothing listening at all. The server is a small axum app that
//! speaks just enough MCP (2025-11-25), so each failure is exact.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aquaregia_mcp::{self as mcp, HttpOptions, McpError};
use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(10);

async fn serve(app: Router) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/mcp"), task)
}

fn json_response(id: &Value, result: &Value) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (
                header::HeaderName::from_static("mcp-session-id"),
                "session-1",
            ),
        ],
        axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})),
    )
        .into_response()
}

/// The same answer as one `text/event-stream` event, as most Streamable HTTP servers send it
/// (a progress notification first, as a busy server might).
fn sse_response(id: &Value, result: &Value) -> Response {
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "data": "listing"}});
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (
                header::HeaderName::from_static("mcp-session-id"),
                "session-1",
            ),
        ],
        format!("event: message\ndata: {progress}\n\nevent: message\ndata: {answer}\n\n"),
    )
        .into_response()
}

fn task(status: &str) -> Value {
    json!({"taskId": "t-1", "status": status, "createdAt": "2026-01-01T00:00:00Z",
           "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 10})
}

/// A 2025-11-25 server whose first `tools/call` answers HTTP 500.
fn flaky_server(calls: Arc<AtomicUsize>) -> Router {
    server_answering(calls, json_response)
}

/// [`flaky_server`], answering every request as `server` frames it.
fn server_answering(
    calls: Arc<AtomicUsize>,
    json_response: fn(&Value, &Value) -> Response,
) -> Router {
    Router::new().route(
        "/mcp",
        post(move |axum::Json(message): axum::Json<Value>| {
            let calls = calls.clone();
            async move {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                match message.get("method").and_then(Value::as_str) {
                    Some("initialize") => json_response(
                        &id,
                        &json!({"protocolVersion": "2025-11-25",
                               "capabilities": {"tools": {},
                                                "tasks": {"requests": {"tools": {"call": {}}}}},
                               "serverInfo": {"name": "flaky", "version": "1"}}),
                    ),
                    Some("tools/list") => json_response(
                        &id,
                        &json!({"tools": [
                            {"name": "work", "inputSchema": {"type": "object"}},
                            {"name": "as_task", "inputSchema": {"type": "object"},
                             "execution": {"taskSupport": "required"}}
                        ]}),
                    ),
                    // `as_task` runs only as a task (2025-11-25 augmentation).
                    Some("tools/call") if message["params"]["name"] == "as_task" => {
                        if message["params"]["task"].is_object() {
                            json_response(&id, &json!({"task": task("working")}))
                        } else {
                            json_response(&id, &json!({"content": [], "isError": true}))
                        }
                    }
                    Some("tasks/get") => json_response(&id, &task("completed")),
                    Some("tasks/result") => json_response(
                        &id,
                        &json!({"content": [{"type": "text", "text": "done as a task"}]}),
                    ),
                    Some("tools/call") if calls.fetch_add(1, Ordering::SeqCst) == 0 => {
                        (StatusCode::INTERNAL_SERVER_ERROR, "database on fire").into_response()
                    }
                    Some("tools/call") => {
                        json_response(&id, &json!({"content": [{"type": "text", "text": "done"}]}))
                    }
                    Some(_) if message.get("id").is_some() => (
                        [(header::CONTENT_TYPE, "application/json")],
                        axum::Json(json!({"jsonrpc": "2.0", "id": id,
                            "error": {"code": -32601, "message": "Method not found"}})),
                    )
                        .into_response(),
                    _ => StatusCode::ACCEPTED.into_response(),
                }
            }
        })
        .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
        .delete(|| async { StatusCode::OK }),
    )
}

/// Fault 5: one HTTP 500 fails that call with its status and body; the session goes on.
#[tokio::test]
async fn an_http_500_fails_only_that_call() {
    let calls = Arc::new(AtomicUsize::new(0));
    let (url, server) = serve(flaky_server(calls.clone())).await;
    let connection = mcp::Connector::new()
        .name("flaky")
        .timeout(BOUND)
        .http(&url, HttpOptions::new())
        .await
        .unwrap();
    let tools = connection.tools().await.unwrap();
    let work = tools.iter().find(|t| t.name() == "work").unwrap();
    let error = tokio::time::timeout(BOUND, work.execute(json!({})))
        .await
        .expect("no hang")
        .unwrap_err()
        .to_string();
    assert!(error.contains("500"), "{error}");
    assert!(error.contains("database on fire"), "{error}");
    assert_eq!(
        tokio::time::timeout(BOUND, work.execute(json!({})))
            .await
            .expect("no hang"),
        Ok(aquaregia::ToolOutput::text("done"))
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    server.abort();
}

/// Fault 9 over Streamable HTTP: a tool that must run as a task is offered and runs as one.
#[tokio::test]
async fn task_only_tools_run_as_tasks_over_http() {
    assert_eq!(
        offered_tools(flaky_server(Arc::default())).await,
        ["work", "as_task"]
    );
}

/// Fault 9 when `tools/list` is answered as an event stream: its `execution` is still read.
#[tokio::test]
async fn task_only_tools_run_as_tasks_when_listed_over_sse() {
    let app = server_answering(Arc::default(), sse_response);
    assert_eq!(offered_tools(app).await, ["work", "as_task"]);
}

/// The names of the tools a connection to `app` offers, after checking that `as_task` runs
/// as a task.
async fn offered_tools(app: Router) -> Vec<String> {
    let (url, server) = serve(app).await;
    let connection = mcp::Connector::new()
        .name("tasks")
        .timeout(BOUND)
        .http(&url, HttpOptions::new())
        .await
        .unwrap();
    let tools = connection.tools().await.unwrap();
    let as_task = tools.iter().find(|t| t.name() == "as_task").unwrap();
    let output = tokio::time::timeout(BOUND, as_task.execute(json!({})))
        .await
        .expect("no hang");
    assert_eq!(output, Ok(aquaregia::ToolOutput::text("done as a task")));
    let names = tools.iter().map(|t| t.name().to_owned()).collect();
    server.abort();
    names
}

/// A 401 with a `WWW-Authenticate` challenge is an authorization request, not a rejection.
#[tokio::test]
async fn an_auth_challenge_is_auth_required_with_its_parameters() {
    let challenge = r#"Bearer error="invalid_request", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="files:read files:write""#;
    let app = Router::new().fallback(move || async move {
        let mut headers = HeaderMap::new();
        headers.insert(header::WWW_AUTHENTICATE, challenge.parse().unwrap());
        (StatusCode::UNAUTHORIZED, headers, "unauthorized")
    });
    let (url, server) = serve(app).await;
    let error = mcp::Connector::new()
        .timeout(BOUND)
        .http(&url, HttpOptions::new())
        .await
        .unwrap_err();
    server.abort();
    let McpError::AuthRequired {
        url: error_url,
        resource_metadata,
        scope,
        ..
    } = &error
    else {
        panic!("{error:?}")
    };
    assert_eq!(error_url, &url);
    assert_eq!(
        resource_metadata.as_deref(),
        Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
    );
    assert_eq!(scope.as_deref(), Some("files:read files:write"));
    let text = error.to_string();
    assert!(text.contains("requires authorization"), "{text}");
    assert!(!text.contains("rejected"), "{text}");
}

/// Without a challenge: no credentials sent means authorization is required; credentials
/// sent and refused is an HTTP error with its status. The token never shows.
#[tokio::test]
async fn refused_credentials_are_an_http_error_without_the_token() {
    for status in [401u16, 403] {
        let app = Router::new()
            .fallback(move || async move { (StatusCode::from_u16(status).unwrap(), "go away") });
        let (url, server) = serve(app).await;
        let error = mcp::Connector::new()
            .timeout(BOUND)
            .http(&url, HttpOptions::new().bearer_token("s3cret-token"))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, McpError::Http { status: s, body, .. } if *s == status && body.contains("go away")),
            "{error:?}"
        );
        assert!(!error.to_string().contains("s3cret-token"));
        assert!(!format!("{error:?}").contains("s3cret-token"));

        let error = mcp::Connector::new()
            .timeout(BOUND)
            .http(&url, HttpOptions::new())
            .await
            .unwrap_err();
        if status == 401 {
            assert!(matches!(&error, McpError::AuthRequired { .. }), "{error:?}");
            assert!(error.to_string().contains("requires authorization"));
        } else {
            assert!(
                matches!(&error, McpError::Http { status: 403, .. }),
                "{error:?}"
            );
        }
        server.abort();
    }
}

/// Nothing listens at the address: the error says so in a line (no request, no legacy SSE
/// fallback, which could not do better), and the OS error is its source.
#[tokio::test]
async fn nothing_listening_is_said_plainly_without_a_fallback() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let error = mcp::Connector::new()
        .timeout(BOUND)
        .http(&url, HttpOptions::new())
        .await
        .unwrap_err();
    let McpError::Connect {
        message, source, ..
    } = &error
    else {
        panic!("{error:?}");
    };
    assert!(
        message.starts_with(&format!("cannot connect to {url}: ")) && message.contains("refused"),
        "{message}"
    );
    assert!(!message.contains("SSE"), "{message}");
    let source = source.as_ref().expect("the cause").to_string();
    assert!(message.ends_with(&source), "{message} / {source}");
}
