//! A local OAuth 2.1 authorization server and the MCP server it protects, on 127.0.0.1, in
//! one axum app: RFC 9728 protected-resource metadata, RFC 8414 metadata, dynamic client
//! registration, an authorize endpoint that approves at once (redirecting to the client's
//! loopback redirect URI with a code), a token endpoint checking PKCE S256 and issuing
//! refresh tokens, and an MCP endpoint (2025-11-25, JSON answers) that wants a live token; the
//! same server over the legacy HTTP+SSE transport at `/sse` (event stream) and `/message`.
//!
//! Its one tool, `whoami`, answers "you are authorized". Token lifetimes are a setting
//! ([`OAuthServer::set_expires_in`]), and [`OAuthServer::expire_access_tokens`] revokes the
//! tokens issued so far, so no test waits for a token to run out.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;

/// The scope the server advertises and grants.
pub const SCOPE: &str = "mcp:tools";

/// What the server was asked, counted.
#[derive(Debug, Default)]
pub struct Counts {
    /// Dynamic client registrations.
    pub registrations: AtomicUsize,
    /// Authorization requests (each approved at once).
    pub authorizations: AtomicUsize,
    /// Token requests with an authorization code.
    pub code_grants: AtomicUsize,
    /// Token requests with a refresh token.
    pub refresh_grants: AtomicUsize,
    /// MCP requests that came with a token the server did not accept.
    pub rejected_tokens: AtomicUsize,
    /// MCP requests that came with no token.
    pub anonymous: AtomicUsize,
}

#[derive(Default)]
struct Inner {
    base: String,
    /// client_id -> registered redirect URIs.
    clients: Mutex<HashMap<String, Vec<String>>>,
    /// code -> (PKCE challenge, redirect URI, client id).
    codes: Mutex<HashMap<String, (String, String, String)>>,
    access_tokens: Mutex<HashSet<String>>,
    refresh_tokens: Mutex<HashSet<String>>,
    /// The last `resource` and `scope` of an authorization request.
    last_authorize: Mutex<Option<(String, String)>>,
    /// Where the open legacy event stream's messages go.
    stream: Mutex<Option<tokio::sync::mpsc::UnboundedSender<String>>>,
    /// The `expires_in` of the next token issued.
    expires_in: AtomicU64,
    next: AtomicUsize,
    counts: Counts,
}

/// The running servers; stopped when dropped.
pub struct OAuthServer {
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
    /// The protected Streamable HTTP MCP endpoint.
    pub mcp_url: String,
    /// The legacy HTTP+SSE event stream of the same server.
    pub sse_url: String,
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl OAuthServer {
    /// Starts both servers on a port of 127.0.0.1 (tokens last an hour).
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let inner = Arc::new(Inner {
            base: base.clone(),
            expires_in: AtomicU64::new(3600),
            ..Inner::default()
        });
        let app = Router::new()
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(resource_metadata),
            )
            .route(
                "/.well-known/oauth-authorization-server",
                get(server_metadata),
            )
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route(
                "/.well-known/oauth-protected-resource/sse",
                get(sse_resource_metadata),
            )
            .route("/mcp", post(mcp).get(not_allowed).delete(not_allowed))
            .route("/sse", get(sse_events))
            .route("/message", post(sse_message))
            .with_state(inner.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            inner,
            task,
            mcp_url: format!("{base}/mcp"),
            sse_url: format!("{base}/sse"),
        }
    }

    /// What the server was asked so far.
    pub fn counts(&self) -> &Counts {
        &self.inner.counts
    }

    /// Tokens issued from now on expire after `seconds`.
    pub fn set_expires_in(&self, seconds: u64) {
        self.inner.expires_in.store(seconds, Ordering::SeqCst);
    }

    /// Every access token issued so far stops being accepted (as if it expired).
    pub fn expire_access_tokens(&self) {
        self.inner.access_tokens.lock().unwrap().clear();
    }

    /// A client registered beforehand (no dynamic registration) with its redirect URI.
    pub fn preregister(&self, client_id: &str, redirect_uri: &str) {
        self.inner
            .clients
            .lock()
            .unwrap()
            .insert(client_id.to_owned(), vec![redirect_uri.to_owned()]);
    }

    /// The `resource` and `scope` of the last authorization request.
    pub fn last_authorize(&self) -> Option<(String, String)> {
        self.inner.last_authorize.lock().unwrap().clone()
    }
}

fn count(counter: &AtomicUsize) -> usize {
    counter.fetch_add(1, Ordering::SeqCst)
}

fn params(query: &str) -> HashMap<String, String> {
    url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

async fn resource_metadata(State(inner): State<Arc<Inner>>) -> Response {
    axum::Json(json!({
        "resource": format!("{}/mcp", inner.base),
        "authorization_servers": [inner.base],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
    }))
    .into_response()
}

async fn sse_resource_metadata(State(inner): State<Arc<Inner>>) -> Response {
    axum::Json(json!({
        "resource": format!("{}/sse", inner.base),
        "authorization_servers": [inner.base],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
    }))
    .into_response()
}

async fn server_metadata(State(inner): State<Arc<Inner>>) -> Response {
    let base = &inner.base;
    axum::Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": [SCOPE],
        "authorization_response_iss_parameter_supported": true,
    }))
    .into_response()
}

async fn register(
    State(inner): State<Arc<Inner>>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    count(&inner.counts.registrations);
    let redirect_uris: Vec<String> = body["redirect_uris"]
        .as_array()
        .map(|uris| {
            uris.iter()
                .filter_map(|uri| uri.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if redirect_uris.is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_redirect_uri"})),
        )
            .into_response();
    }
    let client_id = format!("client-{}", inner.next.fetch_add(1, Ordering::SeqCst));
    inner
        .clients
        .lock()
        .unwrap()
        .insert(client_id.clone(), redirect_uris.clone());
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "client_id": client_id,
            "redirect_uris": redirect_uris,
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        })),
    )
        .into_response()
}

fn oauth_error(error: &str) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(json!({"error": error}))).into_response()
}

/// Approves at once: a 302 to the registered redirect URI with a code, the state and `iss`.
async fn authorize(State(inner): State<Arc<Inner>>, RawQuery(query): RawQuery) -> Response {
    count(&inner.counts.authorizations);
    let query = params(&query.unwrap_or_default());
    let field = |name: &str| query.get(name).cloned().unwrap_or_default();
    let (client_id, redirect_uri) = (field("client_id"), field("redirect_uri"));
    let registered = inner
        .clients
        .lock()
        .unwrap()
        .get(&client_id)
        .is_some_and(|uris| uris.contains(&redirect_uri));
    if !registered {
        return oauth_error("unauthorized_client");
    }
    if field("response_type") != "code" || field("code_challenge_method") != "S256" {
        return oauth_error("invalid_request");
    }
    *inner.last_authorize.lock().unwrap() = Some((field("resource"), field("scope")));
    let code = format!("code-{}", inner.next.fetch_add(1, Ordering::SeqCst));
    inner.codes.lock().unwrap().insert(
        code.clone(),
        (field("code_challenge"), redirect_uri.clone(), client_id),
    );
    let location = url::Url::parse_with_params(
        &redirect_uri,
        [
            ("code", code.as_str()),
            ("state", &field("state")),
            ("iss", &inner.base),
        ],
    )
    .unwrap();
    (
        StatusCode::FOUND,
        [(header::LOCATION, location.to_string())],
    )
        .into_response()
}

async fn token(State(inner): State<Arc<Inner>>, body: String) -> Response {
    let form = params(&body);
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    match field("grant_type").as_str() {
        "authorization_code" => {
            count(&inner.counts.code_grants);
            let Some((challenge, redirect_uri, client_id)) =
                inner.codes.lock().unwrap().remove(&field("code"))
            else {
                return oauth_error("invalid_grant");
            };
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(sha2::Sha256::digest(field("code_verifier").as_bytes()));
            if computed != challenge
                || redirect_uri != field("redirect_uri")
                || client_id != field("client_id")
            {
                return oauth_error("invalid_grant");
            }
        }
        "refresh_token" => {
            count(&inner.counts.refresh_grants);
            if !inner
                .refresh_tokens
                .lock()
                .unwrap()
                .remove(&field("refresh_token"))
            {
                return oauth_error("invalid_grant");
            }
        }
        _ => return oauth_error("unsupported_grant_type"),
    }
    let n = inner.next.fetch_add(1, Ordering::SeqCst);
    let (access, refresh) = (format!("access-{n}"), format!("refresh-{n}"));
    inner.access_tokens.lock().unwrap().insert(access.clone());
    inner.refresh_tokens.lock().unwrap().insert(refresh.clone());
    axum::Json(json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": inner.expires_in.load(Ordering::SeqCst),
        "refresh_token": refresh,
        "scope": SCOPE,
    }))
    .into_response()
}

async fn not_allowed() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

fn answer(id: &Value, result: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})),
    )
        .into_response()
}

/// The `401` for a request without a live token (counted), `None` for one with a live token.
fn unauthorized(inner: &Inner, headers: &HeaderMap, resource: &str) -> Option<Response> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let valid = token.is_some_and(|token| inner.access_tokens.lock().unwrap().contains(token));
    if valid {
        return None;
    }
    count(if token.is_some() {
        &inner.counts.rejected_tokens
    } else {
        &inner.counts.anonymous
    });
    let challenge = format!(
        r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource/{resource}", scope="{SCOPE}""#,
        inner.base
    );
    Some(
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response(),
    )
}

/// The legacy event stream: the `endpoint` event, then the answers to `/message` POSTs.
async fn sse_events(State(inner): State<Arc<Inner>>, headers: HeaderMap) -> Response {
    if let Some(challenge) = unauthorized(&inner, &headers, "sse") {
        return challenge;
    }
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel::<String>();
    *inner.stream.lock().unwrap() = Some(sender);
    let endpoint =
        futures::stream::once(async { "event: endpoint\ndata: /message\n\n".to_owned() });
    let messages = futures::stream::unfold(receiver, |mut receiver| async move {
        let message = receiver.recv().await?;
        Some((format!("event: message\ndata: {message}\n\n"), receiver))
    });
    let body = futures::StreamExt::map(
        futures::StreamExt::chain(endpoint, messages),
        Ok::<_, std::convert::Infallible>,
    );
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        axum::body::Body::from_stream(body),
    )
        .into_response()
}

/// A legacy POST: answered on the event stream, with the body the Streamable HTTP endpoint
/// would have answered.
async fn sse_message(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    message: axum::Json<Value>,
) -> Response {
    if let Some(challenge) = unauthorized(&inner, &headers, "sse") {
        return challenge;
    }
    let response = mcp(State(inner.clone()), headers, message).await;
    if response.status() != StatusCode::OK {
        return response;
    }
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    if let Some(stream) = inner.stream.lock().unwrap().as_ref() {
        let _ = stream.send(String::from_utf8_lossy(&body).into_owned());
    }
    StatusCode::ACCEPTED.into_response()
}

async fn mcp(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    axum::Json(message): axum::Json<Value>,
) -> Response {
    if let Some(challenge) = unauthorized(&inner, &headers, "mcp") {
        return challenge;
    }
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    match message.get("method").and_then(Value::as_str) {
        Some("initialize") => answer(
            &id,
            &json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                   "serverInfo": {"name": "protected", "version": "1"}}),
        ),
        Some("tools/list") => answer(
            &id,
            &json!({"tools": [{"name": "whoami", "description": "Says who you are.",
                              "inputSchema": {"type": "object"}}]}),
        ),
        Some("tools/call") => answer(
            &id,
            &json!({"content": [{"type": "text", "text": "you are authorized"}]}),
        ),
        Some(_) if message.get("id").is_some() => (
            [(header::CONTENT_TYPE, "application/json")],
            axum::Json(json!({"jsonrpc": "2.0", "id": id,
                              "error": {"code": -32601, "message": "Method not found"}})),
        )
            .into_response(),
        _ => StatusCode::ACCEPTED.into_response(),
    }
}
