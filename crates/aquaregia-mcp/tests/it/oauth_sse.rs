//! OAuth over the legacy HTTP+SSE transport: a server whose event stream and message endpoint
//! want a bearer token from a local authorization server. The `401` on the GET starts the
//! discovery and authorization, the token goes on the GET and every POST, a POST whose token is
//! rejected is sent again with a refreshed one, and the next connect with the same store
//! refreshes the expired stored token without a new authorization; a POST refused for too
//! little scope mid-session gets a new authorization with that scope. `Connector::http` with
//! OAuth falls back to this transport like it does without.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aquaregia_mcp::{Connector, HttpOptions, MemoryTokenStore, OAuth};
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::mpsc;

#[derive(Default)]
struct Server {
    base: String,
    /// Takes requests without a token too.
    open: AtomicBool,
    access_tokens: Mutex<HashSet<String>>,
    refresh_tokens: Mutex<HashSet<String>>,
    /// Where the open event stream's messages go.
    stream: Mutex<Option<mpsc::UnboundedSender<String>>>,
    expires_in: AtomicU64,
    next: AtomicUsize,
    authorizations: AtomicUsize,
    refresh_grants: AtomicUsize,
    /// Requests to the MCP endpoints that came without a token.
    anonymous: AtomicUsize,
    /// Requests to the MCP endpoints that came with a token the server does not accept.
    rejected: AtomicUsize,
    /// POSTs that came with a valid token.
    authorized_posts: AtomicUsize,
    /// The scope the last authorization request asked for.
    last_scope: Mutex<String>,
    /// Access tokens granted the `tools.write` scope.
    write_tokens: Mutex<HashSet<String>>,
    /// POSTs need a token with `tools.write`.
    require_write: AtomicBool,
}

impl Server {
    fn authorized(&self, headers: &HeaderMap) -> bool {
        if self.open.load(Ordering::SeqCst) {
            return true;
        }
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        let valid = token.is_some_and(|token| self.access_tokens.lock().unwrap().contains(token));
        if !valid {
            let counter = if token.is_some() {
                &self.rejected
            } else {
                &self.anonymous
            };
            counter.fetch_add(1, Ordering::SeqCst);
        }
        valid
    }

    fn challenge(&self) -> Response {
        let challenge = format!(
            r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource/sse""#,
            self.base
        );
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response()
    }
}

async fn start() -> (Arc<Server>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Arc::new(Server {
        base: format!("http://{}", listener.local_addr().unwrap()),
        expires_in: AtomicU64::new(3600),
        ..Server::default()
    });
    let app = Router::new()
        .route(
            "/.well-known/oauth-protected-resource/sse",
            get(|State(server): State<Arc<Server>>| async move {
                axum::Json(json!({
                    "resource": format!("{}/sse", server.base),
                    "authorization_servers": [server.base],
                }))
            }),
        )
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        // A POST (Streamable HTTP) gets 404, as from an Express server.
        .route("/sse", get(events).post(|| async { StatusCode::NOT_FOUND }))
        .route("/message", post(message))
        .with_state(server.clone());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (server, task)
}

async fn metadata(State(server): State<Arc<Server>>) -> Response {
    let base = &server.base;
    axum::Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    }))
    .into_response()
}

async fn register(axum::Json(body): axum::Json<Value>) -> Response {
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "client_id": "sse-client",
            "redirect_uris": body["redirect_uris"],
            "token_endpoint_auth_method": "none",
        })),
    )
        .into_response()
}

async fn authorize(State(server): State<Arc<Server>>, RawQuery(query): RawQuery) -> Response {
    server.authorizations.fetch_add(1, Ordering::SeqCst);
    let query: HashMap<String, String> =
        url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    *server.last_scope.lock().unwrap() = query.get("scope").cloned().unwrap_or_default();
    let mut location = url::Url::parse(&query["redirect_uri"]).unwrap();
    location
        .query_pairs_mut()
        .append_pair("code", "sse-code")
        .append_pair("state", &query["state"]);
    (
        StatusCode::FOUND,
        [(header::LOCATION, location.to_string())],
    )
        .into_response()
}

async fn token(State(server): State<Arc<Server>>, body: String) -> Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    match form.get("grant_type").map(String::as_str) {
        Some("authorization_code") if form.get("code").map(String::as_str) == Some("sse-code") => {}
        Some("refresh_token")
            if server
                .refresh_tokens
                .lock()
                .unwrap()
                .remove(&form["refresh_token"]) =>
        {
            server.refresh_grants.fetch_add(1, Ordering::SeqCst);
        }
        _ => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": "invalid_grant"})),
            )
                .into_response();
        }
    }
    let n = server.next.fetch_add(1, Ordering::SeqCst);
    let (access, refresh) = (format!("access-{n}"), format!("refresh-{n}"));
    server.access_tokens.lock().unwrap().insert(access.clone());
    if form.get("grant_type").map(String::as_str) == Some("authorization_code")
        && server
            .last_scope
            .lock()
            .unwrap()
            .split(' ')
            .any(|scope| scope == "tools.write")
    {
        server.write_tokens.lock().unwrap().insert(access.clone());
    }
    server
        .refresh_tokens
        .lock()
        .unwrap()
        .insert(refresh.clone());
    axum::Json(json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": server.expires_in.load(Ordering::SeqCst),
        "refresh_token": refresh,
    }))
    .into_response()
}

async fn events(State(server): State<Arc<Server>>, headers: HeaderMap) -> Response {
    if !server.authorized(&headers) {
        return server.challenge();
    }
    let (sender, receiver) = mpsc::unbounded_channel::<String>();
    *server.stream.lock().unwrap() = Some(sender);
    let endpoint = Event::default().event("endpoint").data("/message");
    let messages = futures::stream::unfold(receiver, |mut receiver| async move {
        let message = receiver.recv().await?;
        Some((Event::default().event("message").data(message), receiver))
    });
    let stream = futures::StreamExt::map(
        futures::StreamExt::chain(futures::stream::once(async { endpoint }), messages),
        Ok::<_, Infallible>,
    );
    Sse::new(stream).into_response()
}

async fn message(
    State(server): State<Arc<Server>>,
    headers: HeaderMap,
    axum::Json(message): axum::Json<Value>,
) -> Response {
    if !server.authorized(&headers) {
        return server.challenge();
    }
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or_default();
    if server.require_write.load(Ordering::SeqCst)
        && !server.write_tokens.lock().unwrap().contains(token)
    {
        let challenge = format!(
            r#"Bearer error="insufficient_scope", scope="tools.write", resource_metadata="{}/.well-known/oauth-protected-resource/sse""#,
            server.base
        );
        return (
            StatusCode::FORBIDDEN,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response();
    }
    server.authorized_posts.fetch_add(1, Ordering::SeqCst);
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let reply = match message["method"].as_str() {
        Some("initialize") => json!({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "sse-protected", "version": "1"},
        }}),
        Some("tools/list") => json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
            {"name": "whoami", "inputSchema": {"type": "object"}},
        ]}}),
        Some("tools/call") => json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": "you are authorized"}],
        }}),
        _ => json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": "Method not found"}}),
    };
    if let Some(stream) = server.stream.lock().unwrap().as_ref() {
        let _ = stream.send(reply.to_string());
    }
    StatusCode::ACCEPTED.into_response()
}

/// Follows the authorization URL headlessly and hands back the redirect.
fn oauth(store: &Arc<MemoryTokenStore>) -> OAuth {
    OAuth::new("http://127.0.0.1:3999/callback")
        .shared_store(store.clone())
        .on_authorize(|prompt| async move {
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()?;
            let response = client.get(&prompt.url).send().await?;
            let location = response
                .headers()
                .get(header::LOCATION.as_str())
                .and_then(|value| value.to_str().ok())
                .ok_or("no redirect")?;
            Ok(location.to_owned())
        })
}

#[tokio::test]
async fn an_sse_server_behind_oauth_is_authorized_and_its_tokens_refreshed() {
    let (server, task) = start().await;
    let url = format!("{}/sse", server.base);
    let store = Arc::new(MemoryTokenStore::new());

    let connection = Connector::new()
        .oauth(oauth(&store))
        .sse(&url, HttpOptions::new())
        .await
        .expect("authorized on the GET's challenge");
    let tools = connection.tools().await.unwrap();
    let answer = tools[0].execute(json!({})).await.unwrap();
    assert!(
        answer.to_string().contains("you are authorized"),
        "{answer}"
    );
    assert_eq!(server.authorizations.load(Ordering::SeqCst), 1);
    // The first GET had no token (its challenge started the authorization); every token
    // sent was accepted.
    assert!(server.anonymous.load(Ordering::SeqCst) >= 1);
    assert_eq!(server.rejected.load(Ordering::SeqCst), 0);
    assert!(server.authorized_posts.load(Ordering::SeqCst) >= 3);

    // The server stops accepting the token mid-session: the POST it rejects is sent again
    // with a refreshed token (one that expires after two seconds).
    server.expires_in.store(2, Ordering::SeqCst);
    server.access_tokens.lock().unwrap().clear();
    let answer = tools[0].execute(json!({})).await.unwrap();
    assert!(
        answer.to_string().contains("you are authorized"),
        "{answer}"
    );
    connection.close().await;
    assert_eq!(server.rejected.load(Ordering::SeqCst), 1);
    assert_eq!(server.refresh_grants.load(Ordering::SeqCst), 1);
    assert_eq!(server.authorizations.load(Ordering::SeqCst), 1);

    // The token expires (and the server forgets it): the next connect refreshes it before
    // sending it.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    server.access_tokens.lock().unwrap().clear();
    let again = Connector::new()
        .oauth(oauth(&store))
        .sse(&url, HttpOptions::new())
        .await
        .expect("the stored token is refreshed and used");
    assert_eq!(again.tools().await.unwrap().len(), 1);
    again.close().await;
    assert_eq!(server.authorizations.load(Ordering::SeqCst), 1);
    assert_eq!(server.refresh_grants.load(Ordering::SeqCst), 2);
    assert_eq!(server.rejected.load(Ordering::SeqCst), 1);
    task.abort();
}

#[tokio::test]
async fn without_oauth_the_sse_server_says_authorization_is_required() {
    let (server, task) = start().await;
    let error = Connector::new()
        .sse(&format!("{}/sse", server.base), HttpOptions::new())
        .await
        .expect_err("no token, no stream");
    assert!(
        error.to_string().contains("requires authorization"),
        "{error}"
    );
    task.abort();
}

/// `http` (Streamable HTTP first) with OAuth: the server answers the Streamable HTTP POST with
/// `405`, so the legacy transport is tried, and authorized there.
#[tokio::test]
async fn http_with_oauth_falls_back_to_a_protected_sse_server() {
    let (server, task) = start().await;
    let store = Arc::new(MemoryTokenStore::new());
    let connection = Connector::new()
        .oauth(oauth(&store))
        .http(&format!("{}/sse", server.base), HttpOptions::new())
        .await
        .expect("the legacy fallback, authorized");
    assert_eq!(connection.tools().await.unwrap().len(), 1);
    assert_eq!(server.authorizations.load(Ordering::SeqCst), 1);
    connection.close().await;
    task.abort();
}

/// What is logged, kept for the test to read.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The CLI gives every HTTP server OAuth settings: a legacy server that needs no token is
/// still reached through `http`, and trying Streamable HTTP first (each POST answered 404)
/// is not reported as an expired session.
#[tokio::test]
async fn http_with_oauth_falls_back_to_an_open_sse_server() {
    let logs = Logs::default();
    let writer = logs.clone();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .finish(),
    );
    let (server, task) = start().await;
    server.open.store(true, Ordering::SeqCst);
    let store = Arc::new(MemoryTokenStore::new());
    let connection = Connector::new()
        .oauth(oauth(&store))
        .http(&format!("{}/sse", server.base), HttpOptions::new())
        .await
        .expect("the legacy fallback");
    assert_eq!(connection.tools().await.unwrap().len(), 1);
    assert_eq!(server.authorizations.load(Ordering::SeqCst), 0);
    connection.close().await;
    task.abort();
    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(!logged.contains("expired"), "{logged}");
}

/// Mid-session, the server wants more scope for a message (`403 insufficient_scope`): a new
/// authorization asks for it, and the message is sent again with the new token.
#[tokio::test]
async fn a_message_refused_for_scope_mid_session_is_authorized_again() {
    let (server, task) = start().await;
    let store = Arc::new(MemoryTokenStore::new());
    let connection = Connector::new()
        .oauth(oauth(&store))
        .sse(&format!("{}/sse", server.base), HttpOptions::new())
        .await
        .expect("authorized on the GET's challenge");
    let tools = connection.tools().await.unwrap();
    assert_eq!(server.authorizations.load(Ordering::SeqCst), 1);

    server.require_write.store(true, Ordering::SeqCst);
    let answer = tools[0]
        .execute(json!({}))
        .await
        .expect("authorized again with the scope");
    assert!(
        answer.to_string().contains("you are authorized"),
        "{answer}"
    );
    assert_eq!(server.authorizations.load(Ordering::SeqCst), 2);
    assert!(
        server
            .last_scope
            .lock()
            .unwrap()
            .split(' ')
            .any(|scope| scope == "tools.write")
    );
    connection.close().await;
    task.abort();
}
