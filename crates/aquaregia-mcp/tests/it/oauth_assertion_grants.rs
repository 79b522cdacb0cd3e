//! Grants without a browser beyond client credentials, against an identity provider, an
//! authorization server and an MCP server on 127.0.0.1:
//! - enterprise-managed authorization (SEP-990): the ID token is exchanged for an ID-JAG, the
//!   ID-JAG for an access token; when that token expires (it has no refresh token) the
//!   exchange runs again mid-session, with a fresh ID token from the source;
//! - workload identity (SEP-1933): the workload's JWT is the grant; a refusal is reported with
//!   the server's error and not retried.
//!
//! (The conformance suite's `auth/cross-app-access-complete-flow`,
//! `auth/enterprise-managed-authorization` and `auth/wif-jwt-bearer` check the wire format
//! against signed tokens.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aquaregia_mcp::{
    Connector, HttpOptions, IdentityProvider, McpConnection, McpError, MemoryTokenStore, OAuth,
    OAuthCredentials, TokenStore, TokenStoreError,
};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

use serde_json::{Value, json};

const IDP_CLIENT: &str = "agent-at-idp";
const CLIENT: &str = "agent-at-mcp";
const SECRET: &str = "mcp-client-secret";

/// What the servers saw, and how they behave.
#[derive(Default)]
struct World {
    base: String,
    /// Seconds the access tokens live.
    lifetime: u64,
    /// The ID token the identity provider accepts next (`None`: it rejects every one).
    accepted_id_token: Mutex<Option<String>>,
    /// The error the token endpoint answers the workload's grant with, if any.
    workload_refusal: Option<&'static str>,
    /// The token endpoint never answers.
    silent: bool,
    exchanges: AtomicUsize,
    grants: AtomicUsize,
    /// Access token -> when it expires.
    issued: Mutex<HashMap<String, u64>>,
    /// The last form the authorization server's token endpoint received.
    last_grant: Mutex<HashMap<String, String>>,
    tool_calls: AtomicUsize,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn form(body: &str) -> HashMap<String, String> {
    url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

fn oauth_error(code: &str, description: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": code, "error_description": description})),
    )
        .into_response()
}

async fn start(world: World) -> (Arc<World>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let world = Arc::new(World {
        base: format!("http://{}", listener.local_addr().unwrap()),
        ..world
    });
    let app = Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(|State(world): State<Arc<World>>| async move {
                axum::Json(json!({
                    "resource": format!("{}/mcp", world.base),
                    "authorization_servers": [format!("{}/as", world.base)],
                }))
            }),
        )
        .route(
            "/.well-known/oauth-authorization-server/as",
            get(|State(world): State<Arc<World>>| async move {
                let issuer = format!("{}/as", world.base);
                axum::Json(json!({
                    "issuer": issuer,
                    "authorization_endpoint": format!("{issuer}/authorize"),
                    "token_endpoint": format!("{issuer}/token"),
                    "response_types_supported": ["code"],
                    "grant_types_supported": ["urn:ietf:params:oauth:grant-type:jwt-bearer"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"],
                }))
            }),
        )
        .route("/idp/token", post(idp_token))
        .route("/as/token", post(as_token))
        .route("/mcp", post(mcp))
        .with_state(world.clone());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (world, task)
}

/// The identity provider's token exchange: an ID token for an ID-JAG.
async fn idp_token(State(world): State<Arc<World>>, body: String) -> Response {
    let form = form(&body);
    let base = &world.base;
    assert_eq!(
        form["grant_type"],
        "urn:ietf:params:oauth:grant-type:token-exchange"
    );
    assert_eq!(
        form["requested_token_type"],
        "urn:ietf:params:oauth:token-type:id-jag"
    );
    assert_eq!(
        form["subject_token_type"],
        "urn:ietf:params:oauth:token-type:id_token"
    );
    assert_eq!(form["audience"], format!("{base}/as"));
    assert_eq!(form["resource"], format!("{base}/mcp"));
    assert_eq!(form["client_id"], IDP_CLIENT);
    let accepted = world.accepted_id_token.lock().unwrap().clone();
    if accepted.as_deref() != Some(form["subject_token"].as_str()) {
        return oauth_error("invalid_grant", "the ID token is not valid");
    }
    let n = world.exchanges.fetch_add(1, Ordering::SeqCst) + 1;
    let segment = |value: Value| URL_SAFE_NO_PAD.encode(value.to_string());
    let jag = format!(
        "{}.{}.{}",
        segment(json!({"alg": "ES256", "typ": "oauth-id-jag+jwt"})),
        segment(json!({
            "iss": format!("{base}/idp"),
            "sub": "alice@example.com",
            "aud": format!("{base}/as"),
            "client_id": CLIENT,
            "resource": format!("{base}/mcp"),
            "jti": format!("jag-{n}"),
            "iat": now(),
            "exp": now() + 300,
        })),
        URL_SAFE_NO_PAD.encode(b"signature"),
    );
    axum::Json(json!({
        "access_token": jag,
        "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
        "token_type": "N_A",
    }))
    .into_response()
}

/// The MCP server's authorization server: a JWT-bearer grant (an ID-JAG from the client
/// authenticated with HTTP Basic, or a workload's JWT from a public client) for an access token.
async fn as_token(State(world): State<Arc<World>>, headers: HeaderMap, body: String) -> Response {
    let form = form(&body);
    assert_eq!(
        form["grant_type"],
        "urn:ietf:params:oauth:grant-type:jwt-bearer"
    );
    *world.last_grant.lock().unwrap() = form.clone();
    let n = world.grants.fetch_add(1, Ordering::SeqCst) + 1;
    if world.silent {
        std::future::pending::<()>().await;
    }
    if let Some(code) = world.workload_refusal {
        return oauth_error(code, "the workload may not have these scopes");
    }
    let basic = format!("Basic {}", STANDARD.encode(format!("{CLIENT}:{SECRET}")));
    let authenticated = headers
        .get(header::AUTHORIZATION)
        .is_some_and(|value| value == basic.as_str());
    let workload = form.get("client_id").map(String::as_str) == Some("workload-7");
    if !authenticated && !workload {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let token = format!("access-{n}");
    world
        .issued
        .lock()
        .unwrap()
        .insert(token.clone(), now() + world.lifetime);
    axum::Json(json!({
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": world.lifetime,
    }))
    .into_response()
}

/// A stateless MCP server that takes only unexpired tokens the authorization server issued.
async fn mcp(
    State(world): State<Arc<World>>,
    headers: HeaderMap,
    axum::Json(message): axum::Json<Value>,
) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let valid = token.is_some_and(|token| {
        world
            .issued
            .lock()
            .unwrap()
            .get(token)
            .is_some_and(|expires| *expires > now())
    });
    if !valid {
        let challenge = format!(
            r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#,
            world.base
        );
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response();
    }
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let result = match message["method"].as_str() {
        Some("initialize") => json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "enterprise", "version": "1"},
        }),
        Some("tools/list") => json!({"tools": [
            {"name": "whoami", "inputSchema": {"type": "object"}},
        ]}),
        Some("tools/call") => {
            world.tool_calls.fetch_add(1, Ordering::SeqCst);
            json!({"content": [{"type": "text", "text": "alice"}]})
        }
        Some(_) if message.get("id").is_some() => {
            return axum::Json(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "Method not found"}}))
            .into_response();
        }
        _ => return StatusCode::ACCEPTED.into_response(),
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

/// Connects to the world's MCP server, authorizing with `oauth`.
async fn connect(world: &World, oauth: OAuth) -> Result<McpConnection, McpError> {
    Connector::new()
        .oauth(oauth)
        .http(&format!("{}/mcp", world.base), HttpOptions::new())
        .await
}

/// The message of an authorization that failed.
fn refusal(error: &McpError) -> &str {
    let McpError::Authorization { message, .. } = error else {
        panic!("{error:?}");
    };
    message
}

fn idp(world: &World) -> IdentityProvider {
    IdentityProvider::new(
        format!("{}/idp", world.base),
        format!("{}/idp/token", world.base),
        IDP_CLIENT,
    )
}

#[tokio::test]
async fn an_expired_enterprise_token_is_exchanged_again_with_a_fresh_id_token() {
    let (world, task) = start(World {
        lifetime: 2,
        ..World::default()
    })
    .await;
    // The source hands out a new ID token each time and tells the identity provider, which
    // accepts only the newest.
    let source_world = world.clone();
    let handed_out = Arc::new(AtomicUsize::new(0));
    let counter = handed_out.clone();
    let oauth = OAuth::enterprise_with(idp(&world), move || {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let token = format!("id-token-{n}");
        *source_world.accepted_id_token.lock().unwrap() = Some(token.clone());
        async move { Ok(token) }
    })
    .client_id(CLIENT)
    .client_secret(SECRET);
    let connection = connect(&world, oauth)
        .await
        .expect("authorized by the enterprise grant");
    let tools = connection.tools().await.unwrap();
    let whoami = tools.iter().find(|tool| tool.name() == "whoami").unwrap();
    whoami
        .execute(json!({}))
        .await
        .expect("a call with the token");
    assert_eq!(world.exchanges.load(Ordering::SeqCst), 1);

    // Past the token's lifetime the next call needs a new one: no refresh token, so the
    // exchange runs again with a new ID token, and the call goes through. A long session
    // does this many times (more than the step-ups allowed in a row).
    for round in 2..=5 {
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        whoami
            .execute(json!({}))
            .await
            .unwrap_or_else(|error| panic!("call {round}, after the token expired: {error}"));
        assert_eq!(world.exchanges.load(Ordering::SeqCst), round);
        assert_eq!(world.grants.load(Ordering::SeqCst), round);
        assert_eq!(handed_out.load(Ordering::SeqCst), round);
        assert_eq!(world.tool_calls.load(Ordering::SeqCst), round);
    }
    connection.close().await;
    task.abort();
}

#[tokio::test]
async fn a_rejected_id_token_fails_the_connect_and_says_to_sign_in_again() {
    let (world, task) = start(World {
        lifetime: 3600,
        ..World::default()
    })
    .await;
    let oauth = OAuth::enterprise(idp(&world), "stale-id-token")
        .client_id(CLIENT)
        .client_secret(SECRET);
    let error = connect(&world, oauth)
        .await
        .expect_err("the identity provider refuses the ID token");
    let message = refusal(&error);
    assert!(
        message.contains("identity provider rejected the ID token")
            && message.contains("sign in again"),
        "{message}"
    );
    assert!(!message.contains("stale-id-token"), "{message}");
    assert!(!format!("{error:?}").contains(SECRET));
    assert_eq!(world.grants.load(Ordering::SeqCst), 0);
    task.abort();
}

#[tokio::test]
async fn without_a_client_id_the_enterprise_grant_says_what_is_missing() {
    let (world, task) = start(World {
        lifetime: 3600,
        ..World::default()
    })
    .await;
    *world.accepted_id_token.lock().unwrap() = Some("id-token".to_owned());
    let error = connect(&world, OAuth::enterprise(idp(&world), "id-token"))
        .await
        .expect_err("no client at the authorization server");
    let message = refusal(&error);
    assert!(message.contains("OAuth::client_id"), "{message}");
    assert_eq!(world.exchanges.load(Ordering::SeqCst), 0);
    task.abort();
}

#[tokio::test]
async fn a_workload_identity_token_is_the_grant() {
    let (world, task) = start(World {
        lifetime: 3600,
        ..World::default()
    })
    .await;
    let oauth = OAuth::workload_identity("workload-7", "workload-jwt").scopes(["tools.read"]);
    let connection = connect(&world, oauth)
        .await
        .expect("authorized by the workload's JWT");
    assert_eq!(connection.tools().await.unwrap().len(), 1);
    let grant = world.last_grant.lock().unwrap().clone();
    assert_eq!(grant["assertion"], "workload-jwt");
    assert_eq!(grant["client_id"], "workload-7");
    assert_eq!(grant["scope"], "tools.read");
    assert_eq!(grant["resource"], format!("{}/mcp", world.base));
    connection.close().await;
    task.abort();
}

/// A store that counts its reads.
#[derive(Default)]
struct CountingStore {
    inner: MemoryTokenStore,
    loads: AtomicUsize,
}

#[async_trait::async_trait]
impl TokenStore for CountingStore {
    async fn load(&self, server: &str) -> Result<Option<OAuthCredentials>, TokenStoreError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.inner.load(server).await
    }

    async fn save(
        &self,
        server: &str,
        credentials: OAuthCredentials,
    ) -> Result<(), TokenStoreError> {
        self.inner.save(server, credentials).await
    }

    async fn remove(&self, server: &str) -> Result<bool, TokenStoreError> {
        self.inner.remove(server).await
    }
}

/// rmcp asks for the token before every request; the store (a file, for the CLI) is read
/// once, not each time.
#[tokio::test]
async fn calls_do_not_read_the_token_store_each_time() {
    let (world, task) = start(World {
        lifetime: 3600,
        ..World::default()
    })
    .await;
    let store = Arc::new(CountingStore::default());
    let oauth = OAuth::workload_identity("workload-7", "workload-jwt").shared_store(store.clone());
    let connection = connect(&world, oauth)
        .await
        .expect("authorized by the workload's JWT");
    let tools = connection.tools().await.unwrap();
    let loads = store.loads.load(Ordering::SeqCst);
    for _ in 0..10 {
        tools[0].execute(json!({})).await.unwrap();
    }
    assert_eq!(world.tool_calls.load(Ordering::SeqCst), 10);
    assert_eq!(store.loads.load(Ordering::SeqCst), loads, "read per call");
    connection.close().await;
    task.abort();
}

#[tokio::test]
async fn a_refused_workload_grant_reports_the_error_once() {
    let (world, task) = start(World {
        lifetime: 3600,
        workload_refusal: Some("invalid_scope"),
        ..World::default()
    })
    .await;
    let oauth = OAuth::workload_identity("workload-7", "workload-jwt");
    let error = connect(&world, oauth)
        .await
        .expect_err("the authorization server refuses");
    let message = refusal(&error);
    assert!(
        message.contains("workload identity")
            && message.contains("invalid_scope")
            && message.contains("may not have these scopes"),
        "{message}"
    );
    assert!(!message.contains("workload-jwt"), "{message}");
    assert_eq!(world.grants.load(Ordering::SeqCst), 1, "not retried");
    task.abort();
}

/// A token endpoint that never answers fails the connect after the request's time limit
/// (30 s) instead of holding it forever.
#[tokio::test]
async fn a_silent_token_endpoint_fails_the_connect_in_time() {
    let (world, task) = start(World {
        lifetime: 3600,
        silent: true,
        ..World::default()
    })
    .await;
    let oauth = OAuth::workload_identity("workload-7", "workload-jwt");
    let error = tokio::time::timeout(Duration::from_secs(90), connect(&world, oauth))
        .await
        .expect("the token request has a time limit")
        .expect_err("no token");
    let message = refusal(&error);
    assert!(message.contains("did not answer within 30 s"), "{message}");
    task.abort();
}
