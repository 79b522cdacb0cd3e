//! Unit tests of the parent module.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes as AxumBytes};
use axum::http::{HeaderMap as AxumHeaders, Method, Uri};
use axum::response::Response;
use rmcp::ServiceExt;
use serde_json::{Value, json};

use super::*;

const ENDPOINT_EVENT: &str = "event: endpoint\ndata: /message?sessionId=abc\n\n";

/// How the mock legacy SSE server behaves.
#[derive(Clone)]
struct Script {
    /// Status of the GET (200 serves the event stream).
    get_status: u16,
    /// Sent first on the event stream.
    preamble: String,
    /// End the event stream right after the preamble.
    close_after_preamble: bool,
    /// Status of every POST (2xx: accepted and answered on the event stream).
    post_status: u16,
    /// Sent on the event stream before every answer.
    before_each_answer: String,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            get_status: 200,
            preamble: ENDPOINT_EVENT.to_owned(),
            close_after_preamble: false,
            post_status: 202,
            before_each_answer: String::new(),
        }
    }
}

#[derive(Debug, Clone)]
struct Post {
    /// Path and query.
    target: String,
    headers: AxumHeaders,
    body: Value,
}

#[derive(Default)]
struct State {
    script: Script,
    events: Mutex<Option<mpsc::UnboundedSender<String>>>,
    gets: Mutex<Vec<AxumHeaders>>,
    posts: Mutex<Vec<Post>>,
    /// Set when the server drops the event stream (the client went away).
    stream_dropped: Arc<AtomicBool>,
}

/// A legacy HTTP+SSE MCP server on 127.0.0.1: any GET opens the event stream, any POST
/// is a client message, answered on the stream. Stops when dropped.
struct MockServer {
    addr: std::net::SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    async fn start(script: Script) -> Self {
        let state = Arc::new(State {
            script,
            ..State::default()
        });
        let handler_state = state.clone();
        let app = Router::new().fallback(
            move |method: Method, uri: Uri, headers: AxumHeaders, body: AxumBytes| {
                let state = handler_state.clone();
                async move { handle(&state, &method, &uri, headers, &body) }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, state, task }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn posts(&self) -> Vec<Post> {
        self.state.posts.lock().unwrap().clone()
    }

    fn gets(&self) -> Vec<AxumHeaders> {
        self.state.gets.lock().unwrap().clone()
    }

    fn stream_dropped(&self) -> bool {
        self.state.stream_dropped.load(Ordering::SeqCst)
    }
}

/// Sets a flag when dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn handle(
    state: &State,
    method: &Method,
    uri: &Uri,
    headers: AxumHeaders,
    body: &[u8],
) -> Response {
    let script = &state.script;
    if method == Method::GET {
        state.gets.lock().unwrap().push(headers);
        if script.get_status != 200 {
            return status_response(script.get_status, "mock: no stream for you");
        }
        let preamble = futures::stream::once(std::future::ready(script.preamble.clone()));
        let body = if script.close_after_preamble {
            Body::from_stream(preamble.map(Ok::<_, std::io::Error>))
        } else {
            let (sender, receiver) = mpsc::unbounded_channel::<String>();
            *state.events.lock().unwrap() = Some(sender);
            let flag = DropFlag(state.stream_dropped.clone());
            let rest =
                futures::stream::unfold((receiver, flag), |(mut receiver, flag)| async move {
                    let event = receiver.recv().await?;
                    Some((event, (receiver, flag)))
                });
            Body::from_stream(preamble.chain(rest).map(Ok::<_, std::io::Error>))
        };
        return Response::builder()
            .status(200)
            .header("content-type", "text/event-stream")
            .body(body)
            .unwrap();
    }

    let message: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let target = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
    state.posts.lock().unwrap().push(Post {
        target,
        headers,
        body: message.clone(),
    });
    if !(200..300).contains(&script.post_status) {
        return status_response(script.post_status, "mock: message refused");
    }
    if let Some(answer) = answer(&message) {
        let event = format!(
            "{}event: message\ndata: {answer}\n\n",
            script.before_each_answer
        );
        if let Some(events) = state.events.lock().unwrap().as_ref() {
            let _ = events.send(event);
        }
    }
    status_response(script.post_status, "Accepted")
}

fn status_response(status: u16, body: &'static str) -> Response {
    Response::builder()
        .status(status)
        .body(Body::from(body))
        .unwrap()
}

/// The server's answer to a client message (`None` for notifications and responses).
fn answer(message: &Value) -> Option<Value> {
    let id = message.get("id")?.clone();
    let method = message.get("method")?.as_str()?;
    let result = match method {
        "initialize" => json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "mock-legacy-sse", "version": "1.0.0"}
        }),
        "tools/list" => json!({"tools": [{
            "name": "echo",
            "description": "Echoes its input",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}
        }]}),
        "ping" => json!({}),
        _ => {
            return Some(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}}));
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .expect("timed out")
}

/// `initialize`, `notifications/initialized`, `tools/list` over the transport.
async fn list_tools(transport: SseTransport) -> Vec<rmcp::model::Tool> {
    let client = within(().serve(transport)).await.expect("handshake");
    let tools = within(client.list_all_tools()).await.expect("tools/list");
    let _ = within(client.cancel()).await;
    tools
}

#[tokio::test]
async fn rmcp_client_handshake_and_list_tools() {
    let server = MockServer::start(Script::default()).await;
    let options = HttpOptions::new()
        .bearer_token("secret-token")
        .header("X-Tenant", "acme");
    let transport = within(SseTransport::open(&server.url("/sse"), &options, None))
        .await
        .expect("open");
    assert_eq!(transport.endpoint.path(), "/message");

    let tools = list_tools(transport).await;
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "echo");

    let gets = server.gets();
    assert_eq!(gets.len(), 1);
    assert_eq!(gets[0]["accept"], "text/event-stream");
    assert_eq!(gets[0]["authorization"], "Bearer secret-token");
    assert_eq!(gets[0]["x-tenant"], "acme");

    let posts = server.posts();
    let methods: Vec<_> = posts
        .iter()
        .map(|post| post.body["method"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        methods,
        ["initialize", "notifications/initialized", "tools/list"]
    );
    for post in &posts {
        assert_eq!(post.target, "/message?sessionId=abc");
        assert_eq!(post.headers["content-type"], "application/json");
        assert_eq!(post.headers["authorization"], "Bearer secret-token");
        assert_eq!(post.headers["x-tenant"], "acme");
    }
}

#[tokio::test]
async fn relative_endpoint_resolves_against_the_sse_url() {
    let server = MockServer::start(Script {
        preamble: "event: endpoint\r\ndata: messages?sessionId=xyz\r\n\r\n".to_owned(),
        ..Script::default()
    })
    .await;
    let transport = within(SseTransport::open(
        &server.url("/mcp/sse"),
        &HttpOptions::new(),
        None,
    ))
    .await
    .expect("open");
    assert_eq!(list_tools(transport).await.len(), 1);
    assert!(
        server
            .posts()
            .iter()
            .all(|post| post.target == "/mcp/messages?sessionId=xyz")
    );
}

#[test]
fn endpoint_resolution() {
    let base = Url::parse("http://example.com:8080/mcp/sse?token=1").unwrap();
    let resolve = |data: &str| resolve_endpoint(&base, data).map(String::from);
    assert_eq!(
        resolve("/message?sessionId=a").unwrap(),
        "http://example.com:8080/message?sessionId=a"
    );
    assert_eq!(
        resolve(" messages?sessionId=a \n").unwrap(),
        "http://example.com:8080/mcp/messages?sessionId=a"
    );
    assert_eq!(
        resolve("http://example.com:8080/other").unwrap(),
        "http://example.com:8080/other"
    );
    let other_origin = resolve("http://evil.example/steal").unwrap_err();
    assert!(other_origin.contains("another origin"), "{other_origin}");
    assert!(resolve("https://example.com:8080/message").is_err());
    assert!(resolve("  ").unwrap_err().contains("empty"));
}

#[tokio::test]
async fn endpoint_on_another_origin_fails_to_connect() {
    let server = MockServer::start(Script {
        preamble: "event: endpoint\ndata: http://192.0.2.1/message\n\n".to_owned(),
        ..Script::default()
    })
    .await;
    let error = within(SseTransport::open(
        &server.url("/sse"),
        &HttpOptions::new(),
        None,
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(&error, McpError::Connect { message, .. } if message.contains("another origin")),
        "{error:?}"
    );
}

#[tokio::test]
async fn unauthorized_and_forbidden() {
    for status in [401, 403] {
        let server = MockServer::start(Script {
            get_status: status,
            ..Script::default()
        })
        .await;
        let url = server.url("/sse");
        let options = HttpOptions::new().bearer_token("wrong-token");
        let error = within(SseTransport::open(&url, &options, None))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, McpError::Http { url: u, status: s, .. } if *u == url && *s == status),
            "{error:?}"
        );
    }
}

#[tokio::test]
async fn other_http_errors_fail_to_connect() {
    let server = MockServer::start(Script {
        get_status: 404,
        ..Script::default()
    })
    .await;
    let url = server.url("/sse");
    let options = HttpOptions::new().header("X-Api-Key", "header-secret");
    let error = within(SseTransport::open(&url, &options, None))
        .await
        .unwrap_err();
    assert!(matches!(&error, McpError::Connect { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&url), "{message}");
    assert!(message.contains("404"), "{message}");
    assert!(message.contains("mock: no stream for you"), "{message}");
    assert!(!message.contains("header-secret"), "{message}");
}

#[tokio::test]
async fn unreachable_server_fails_to_connect() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/sse", listener.local_addr().unwrap());
    drop(listener);
    let error = within(SseTransport::open(&url, &HttpOptions::new(), None))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, McpError::Connect { server, .. } if server == &url),
        "{error:?}"
    );
    let error = within(SseTransport::open("not a url", &HttpOptions::new(), None))
        .await
        .unwrap_err();
    assert!(matches!(error, McpError::Connect { .. }), "{error:?}");
}

#[tokio::test]
async fn stream_ending_before_endpoint_fails_to_connect() {
    let server = MockServer::start(Script {
        preamble: ": hello\n\nevent: message\ndata: {}\n\n".to_owned(),
        close_after_preamble: true,
        ..Script::default()
    })
    .await;
    let error = within(SseTransport::open(
        &server.url("/sse"),
        &HttpOptions::new(),
        None,
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(&error, McpError::Connect { message, .. }
            if message.contains("ended before the `endpoint` event")),
        "{error:?}"
    );
}

#[tokio::test]
async fn malformed_and_oversized_messages_are_skipped() {
    let huge = format!(
        "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{{\"pad\":\"{}\"}}}}\n\n",
        "x".repeat(8000)
    );
    let server = MockServer::start(Script {
        before_each_answer: format!(
            "event: message\ndata: {{not json\n\n: keep-alive\n\n{huge}event: ping\ndata: 1\n\n"
        ),
        ..Script::default()
    })
    .await;
    let options = HttpOptions::new().max_response_size(4096);
    let transport = within(SseTransport::open(&server.url("/sse"), &options, None))
        .await
        .expect("open");
    assert_eq!(list_tools(transport).await.len(), 1);
}

#[tokio::test]
async fn receive_ends_with_the_stream() {
    let server = MockServer::start(Script {
        preamble: format!(
            "{ENDPOINT_EVENT}data: {}\n\n",
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        ),
        close_after_preamble: true,
        ..Script::default()
    })
    .await;
    let mut transport = within(SseTransport::open(
        &server.url("/sse"),
        &HttpOptions::new(),
        None,
    ))
    .await
    .expect("open");
    let message = within(transport.receive()).await.expect("a notification");
    assert!(matches!(message, ServerJsonRpcMessage::Notification(_)));
    assert!(within(transport.receive()).await.is_none());
}

#[tokio::test]
async fn send_reports_http_errors() {
    let server = MockServer::start(Script {
        post_status: 500,
        ..Script::default()
    })
    .await;
    let mut transport = within(SseTransport::open(
        &server.url("/sse"),
        &HttpOptions::new(),
        None,
    ))
    .await
    .expect("open");
    let ping: ClientJsonRpcMessage =
        serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).unwrap();
    let error = within(transport.send(ping)).await.unwrap_err();
    assert!(
        matches!(&error, SseSendError::Status { status: 500, body } if body.contains("message refused")),
        "{error:?}"
    );
    assert!(error.to_string().contains("HTTP 500"), "{error}");
}

#[tokio::test]
async fn close_and_drop_stop_the_reader() {
    let server = MockServer::start(Script::default()).await;
    let mut transport = within(SseTransport::open(
        &server.url("/sse"),
        &HttpOptions::new(),
        None,
    ))
    .await
    .expect("open");
    within(transport.close()).await.expect("close");
    assert!(within(transport.receive()).await.is_none());
    within(async {
        while !server.stream_dropped() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;

    let server = MockServer::start(Script::default()).await;
    let transport = within(SseTransport::open(
        &server.url("/sse"),
        &HttpOptions::new(),
        None,
    ))
    .await
    .expect("open");
    drop(transport);
    within(async {
        while !server.stream_dropped() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

fn read_in_chunks(input: &[u8], chunk: usize, limit: usize) -> Vec<SseEvent> {
    let mut reader = EventReader::new(limit);
    let mut events = Vec::new();
    for piece in input.chunks(chunk) {
        reader.feed(piece);
        events.extend(std::iter::from_fn(|| reader.next_event()));
    }
    reader.finish();
    events.extend(std::iter::from_fn(|| reader.next_event()));
    events
}

#[test]
fn event_reader_skips_oversized_events_split_anywhere() {
    let big = "y".repeat(100);
    let input = format!(
        "event: endpoint\r\ndata: /m\r\n\r\n: comment\n\nevent: message\ndata: {big}\ndata: more\n\ndata: small\n\n: {big}\n\nevent: message\ndata: {big}\r\n\r\nevent: last\ndata: tail"
    );
    let expected = vec![
        SseEvent::new("endpoint", "/m"),
        SseEvent::new("", "small"),
        SseEvent::new("last", "tail"),
    ];
    for chunk in 1..=input.len() {
        assert_eq!(
            read_in_chunks(input.as_bytes(), chunk, 64),
            expected,
            "chunk size {chunk}"
        );
    }
    // Without the limit everything comes through.
    assert_eq!(read_in_chunks(input.as_bytes(), 7, usize::MAX).len(), 5);
}

#[test]
fn malformed_messages_are_skipped_and_batches_split() {
    let event = |event: &str, data: &str| SseEvent::new(event, data);
    assert!(parse_messages(&event("message", "{oops"), "u").is_empty());
    assert!(parse_messages(&event("message", "{\"jsonrpc\":\"2.0\"}"), "u").is_empty());
    assert!(parse_messages(&event("other", "{}"), "u").is_empty());
    assert!(parse_messages(&event("endpoint", "/m"), "u").is_empty());
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    assert_eq!(parse_messages(&event("", ping), "u").len(), 1);
    assert_eq!(
        parse_messages(&event("message", &format!("[{ping},{ping}]")), "u").len(),
        2
    );
}
