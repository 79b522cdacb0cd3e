//! The legacy MCP "HTTP with SSE" client transport (protocol revision 2024-11-05).
//!
//! The client GETs an event stream. The server's first event, `endpoint`, carries the URL
//! (usually relative) to POST client messages to; every later `message` event carries one
//! JSON-RPC message from the server. rmcp dropped this transport, but many deployed servers
//! still speak only it.
//!
//! A background task reads the event stream and hands the decoded messages to
//! [`Transport::receive`] through a bounded channel; each [`Transport::send`] is one POST.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::error::McpError;
use super::http::HttpOptions;
use crate::http::sse::{SseDecoder, SseEvent};
use crate::http::{reqwest_message, truncate};

/// Server messages decoded but not yet received; the reader waits when it is full.
const CHANNEL_CAPACITY: usize = 64;
/// How much of an error response body goes into an error message.
const ERROR_BODY_PREFIX: usize = 512;
/// How much of a successful POST's body is read (and dropped) so the connection can be reused.
const DRAIN_LIMIT: usize = 64 << 10;

/// A client transport for servers that speak the legacy HTTP+SSE transport.
pub(crate) struct SseTransport {
    client: reqwest::Client,
    /// The options' headers (values marked sensitive), sent with every POST.
    headers: HeaderMap,
    /// Where to POST messages, from the `endpoint` event.
    endpoint: Url,
    messages: mpsc::Receiver<ServerJsonRpcMessage>,
    /// Reads the event stream into `messages`.
    reader: JoinHandle<()>,
}

impl fmt::Debug for SseTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseTransport")
            .field("endpoint", &self.endpoint.as_str())
            .finish_non_exhaustive()
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl SseTransport {
    /// GETs `url` as an event stream, waits for the `endpoint` event and starts reading server
    /// messages in the background.
    ///
    /// Does not time out by itself: the caller bounds it with its connect timeout.
    pub(crate) async fn open(url: &str, options: &HttpOptions) -> Result<SseTransport, McpError> {
        let connect_error = |what: String| McpError::connect(url, what);
        let base =
            Url::parse(url).map_err(|error| connect_error(format!("invalid URL: {error}")))?;
        let headers = options.header_map()?;
        let client = options.client();

        let mut get_headers = headers.clone();
        get_headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let response = client
            .get(base.clone())
            .headers(get_headers)
            .send()
            .await
            .map_err(|error| {
                connect_error(format!(
                    "the SSE GET request failed: {}",
                    reqwest_message(&error)
                ))
            })?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            let challenge = response
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|value| value.to_str().ok())
                .map(super::http::parse_challenge);
            if challenge.is_some() || !options.has_credentials() {
                let challenge = challenge.unwrap_or_default();
                return Err(McpError::AuthRequired {
                    url: url.to_owned(),
                    resource_metadata: challenge.resource_metadata,
                    scope: challenge.scope,
                });
            }
            return Err(McpError::Http {
                url: url.to_owned(),
                status: status.as_u16(),
                body: body_prefix(response)
                    .await
                    .trim_start_matches(": ")
                    .to_owned(),
            });
        }
        if !status.is_success() {
            let body = body_prefix(response).await;
            return Err(connect_error(format!(
                "the SSE GET request got HTTP {status}{body}"
            )));
        }
        if let Some(content_type) = response.headers().get(CONTENT_TYPE) {
            let content_type = String::from_utf8_lossy(content_type.as_bytes());
            let media_type = content_type.split(';').next().unwrap_or_default().trim();
            if !media_type.eq_ignore_ascii_case("text/event-stream") {
                return Err(connect_error(format!(
                    "expected an event stream (text/event-stream), got `{}`",
                    truncate(&content_type, 100)
                )));
            }
        }

        let mut body = Box::pin(response.bytes_stream());
        let mut events = EventReader::new(options.max_response_bytes);
        let endpoint = loop {
            if let Some(event) = events.next_event() {
                if event.event == "endpoint" {
                    break resolve_endpoint(&base, &event.data).map_err(connect_error)?;
                }
                tracing::warn!(
                    url,
                    event = %event.event,
                    "ignoring an SSE event the MCP server sent before its `endpoint` event"
                );
                continue;
            }
            match body.next().await {
                Some(Ok(chunk)) => events.feed(&chunk),
                Some(Err(error)) => {
                    return Err(connect_error(format!(
                        "the event stream failed before the `endpoint` event: {}",
                        reqwest_message(&error)
                    )));
                }
                None => {
                    return Err(connect_error(
                        "the event stream ended before the `endpoint` event".to_owned(),
                    ));
                }
            }
        };
        tracing::debug!(url, endpoint = %endpoint, "MCP SSE session open");

        let (sender, messages) = mpsc::channel(CHANNEL_CAPACITY);
        let reader = tokio::spawn(read_messages(body, events, sender, url.to_owned()));
        Ok(SseTransport {
            client,
            headers,
            endpoint,
            messages,
            reader,
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseSendError;

    fn name() -> Cow<'static, str> {
        "legacy HTTP+SSE".into()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let client = self.client.clone();
        let headers = self.headers.clone();
        let endpoint = self.endpoint.clone();
        async move {
            let body = serde_json::to_vec(&item).map_err(SseSendError::Serialize)?;
            let response = client
                .post(endpoint)
                .headers(headers)
                .header(CONTENT_TYPE, "application/json")
                .body(body)
                .send()
                .await
                .map_err(|error| SseSendError::Request(reqwest_message(&error)))?;
            let status = response.status();
            if status.is_success() {
                drain(response).await;
                return Ok(());
            }
            Err(SseSendError::Status {
                status: status.as_u16(),
                body: body_prefix(response).await,
            })
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.messages.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.messages.close();
        Ok(())
    }
}

/// Why [`SseTransport`] could not deliver a message to the server.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SseSendError {
    /// The message did not serialize (should not happen).
    #[error("could not serialize the message: {0}")]
    Serialize(#[source] serde_json::Error),
    /// The POST did not get an answer.
    #[error("POST to the MCP message endpoint failed: {0}")]
    Request(String),
    /// The server answered the POST with a non-2xx status; `body` is a prefix of its body
    /// (with a leading `: `), or empty.
    #[error("the MCP message endpoint answered HTTP {status}{body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// `": <start of the body>"`, or empty.
        body: String,
    },
}

/// Reads the rest of the event stream, forwarding server messages until the stream ends or
/// fails, or the transport goes away.
async fn read_messages<S>(
    mut body: S,
    mut events: EventReader,
    sender: mpsc::Sender<ServerJsonRpcMessage>,
    url: String,
) where
    S: Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    let mut ended = false;
    loop {
        while let Some(event) = events.next_event() {
            for message in parse_messages(&event, &url) {
                if sender.send(message).await.is_err() {
                    return; // the transport is gone
                }
            }
        }
        if ended {
            tracing::debug!(url, "the MCP server closed its SSE event stream");
            return;
        }
        let next = tokio::select! {
            next = body.next() => next,
            () = sender.closed() => return,
        };
        match next {
            Some(Ok(chunk)) => events.feed(&chunk),
            Some(Err(error)) => {
                tracing::warn!(
                    url,
                    error = %reqwest_message(&error),
                    "the MCP server's SSE event stream failed"
                );
                return;
            }
            None => {
                events.finish();
                ended = true;
            }
        }
    }
}

/// The JSON-RPC messages in one event (a legacy server may send a batch); malformed ones are
/// logged and skipped.
fn parse_messages(event: &SseEvent, url: &str) -> Vec<ServerJsonRpcMessage> {
    match event.event.as_str() {
        "" | "message" => {}
        "endpoint" => {
            tracing::debug!(url, "ignoring a repeated `endpoint` event");
            return Vec::new();
        }
        other => {
            tracing::debug!(url, event = other, "ignoring an unknown SSE event");
            return Vec::new();
        }
    }
    let data = event.data.trim();
    if data.is_empty() {
        return Vec::new();
    }
    let parsed = if data.starts_with('[') {
        serde_json::from_str::<Vec<ServerJsonRpcMessage>>(data)
    } else {
        serde_json::from_str::<ServerJsonRpcMessage>(data).map(|message| vec![message])
    };
    parsed.unwrap_or_else(|error| {
        tracing::warn!(
            url,
            %error,
            data = %truncate(data, 200),
            "skipping a malformed JSON-RPC message from the MCP server"
        );
        Vec::new()
    })
}

/// The message URL from the `endpoint` event's data, resolved against the SSE URL. It must
/// have the same origin: the POSTs carry the same credentials as the GET.
fn resolve_endpoint(base: &Url, data: &str) -> Result<Url, String> {
    let data = data.trim();
    if data.is_empty() {
        return Err("the `endpoint` event is empty".to_owned());
    }
    let endpoint = base.join(data).map_err(|error| {
        format!(
            "the `endpoint` event holds an invalid URL `{}`: {error}",
            truncate(data, 200)
        )
    })?;
    if endpoint.origin() != base.origin() {
        return Err(format!(
            "the `endpoint` event points to another origin ({}); refusing to send messages there",
            endpoint.origin().ascii_serialization()
        ));
    }
    Ok(endpoint)
}

/// [`SseDecoder`] with the response size limit as its event limit: an oversized event is
/// skipped (with a warning) without being buffered.
#[derive(Debug)]
struct EventReader {
    decoder: SseDecoder,
    ended: bool,
}

impl EventReader {
    fn new(max_event_bytes: usize) -> Self {
        Self {
            decoder: SseDecoder::with_max_event_bytes(max_event_bytes),
            ended: false,
        }
    }

    /// Appends received bytes.
    fn feed(&mut self, chunk: &[u8]) {
        self.decoder.feed(chunk);
    }

    /// Call at the end of the stream: a last event not followed by a blank line comes next.
    fn finish(&mut self) {
        self.ended = true;
    }

    /// The next complete event.
    fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            let next = if self.ended {
                self.decoder.finish()
            } else {
                self.decoder.next_event()
            };
            match next {
                Ok(event) => return event,
                Err(error) => tracing::warn!(
                    limit = error.limit,
                    "skipping an SSE event from the MCP server larger than the response size limit"
                ),
            }
        }
    }
}

/// `": <start of the body>"` for an error message, or empty when the body is empty or
/// unreadable. Reads no more than it shows.
async fn body_prefix(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < ERROR_BODY_PREFIX {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {}", truncate(text, ERROR_BODY_PREFIX))
    }
}

/// Reads a small successful response to its end so the connection can be reused.
async fn drain(mut response: reqwest::Response) {
    let mut read = 0;
    while read <= DRAIN_LIMIT {
        match response.chunk().await {
            Ok(Some(chunk)) => read += chunk.len(),
            Ok(None) | Err(_) => break,
        }
    }
}

#[cfg(test)]
mod tests {
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
        let transport = within(SseTransport::open(&server.url("/sse"), &options))
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
        let error = within(SseTransport::open(&server.url("/sse"), &HttpOptions::new()))
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
            let error = within(SseTransport::open(&url, &options))
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
        let error = within(SseTransport::open(&url, &options))
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
        let error = within(SseTransport::open(&url, &HttpOptions::new()))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, McpError::Connect { server, .. } if server == &url),
            "{error:?}"
        );
        let error = within(SseTransport::open("not a url", &HttpOptions::new()))
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
        let error = within(SseTransport::open(&server.url("/sse"), &HttpOptions::new()))
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
        let transport = within(SseTransport::open(&server.url("/sse"), &options))
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
        let mut transport = within(SseTransport::open(&server.url("/sse"), &HttpOptions::new()))
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
        let mut transport = within(SseTransport::open(&server.url("/sse"), &HttpOptions::new()))
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
        let mut transport = within(SseTransport::open(&server.url("/sse"), &HttpOptions::new()))
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
        let transport = within(SseTransport::open(&server.url("/sse"), &HttpOptions::new()))
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
            SseEvent {
                event: "endpoint".into(),
                data: "/m".into(),
            },
            SseEvent {
                event: String::new(),
                data: "small".into(),
            },
            SseEvent {
                event: "last".into(),
                data: "tail".into(),
            },
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
        let event = |event: &str, data: &str| SseEvent {
            event: event.into(),
            data: data.into(),
        };
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
}
