//! OAuth discovery for servers of the 2025-03-26 revision: no protected-resource metadata,
//! RFC 8414 metadata at the MCP server's origin naming an issuer under `/oauth`. Such a server
//! is authorized; the same metadata behind protected-resource metadata (the current discovery)
//! is still rejected for its issuer.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aquaregia_mcp::{Connector, HttpOptions, McpError, OAuth};
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

const TOKEN: &str = "legacy-access-token";

#[derive(Default)]
struct Server {
    base: String,
    token_grants: AtomicUsize,
}

/// The MCP server and its authorization server on one origin; with `resource_metadata`, it
/// also publishes protected-resource metadata pointing at that origin.
async fn start(resource_metadata: bool) -> (Arc<Server>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Arc::new(Server {
        base: format!("http://{}", listener.local_addr().unwrap()),
        ..Server::default()
    });
    let mut app = Router::new()
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route("/oauth/register", post(register))
        .route("/oauth/authorize", get(authorize))
        .route("/oauth/token", post(token))
        .route("/mcp", post(mcp));
    if resource_metadata {
        app = app.route(
            "/.well-known/oauth-protected-resource/mcp",
            get(|State(server): State<Arc<Server>>| async move {
                axum::Json(json!({
                    "resource": format!("{}/mcp", server.base),
                    "authorization_servers": [server.base],
                }))
            }),
        );
    }
    let app = app.with_state(server.clone());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (server, task)
}

async fn metadata(State(server): State<Arc<Server>>) -> Response {
    let base = &server.base;
    axum::Json(json!({
        "issuer": format!("{base}/oauth"),
        "authorization_endpoint": format!("{base}/oauth/authorize"),
        "token_endpoint": format!("{base}/oauth/token"),
        "registration_endpoint": format!("{base}/oauth/register"),
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
            "client_id": "legacy-client",
            "redirect_uris": body["redirect_uris"],
            "token_endpoint_auth_method": "none",
        })),
    )
        .into_response()
}

async fn authorize(RawQuery(query): RawQuery) -> Response {
    let query: std::collections::HashMap<String, String> =
        url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let mut location = url::Url::parse(&query["redirect_uri"]).unwrap();
    location
        .query_pairs_mut()
        .append_pair("code", "legacy-code")
        .append_pair("state", &query["state"]);
    (
        StatusCode::FOUND,
        [(header::LOCATION, location.to_string())],
    )
        .into_response()
}

async fn token(State(server): State<Arc<Server>>, body: String) -> Response {
    server.token_grants.fetch_add(1, Ordering::SeqCst);
    assert!(body.contains("grant_type=authorization_code"), "{body}");
    axum::Json(json!({"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600}))
        .into_response()
}

async fn mcp(headers: HeaderMap, axum::Json(message): axum::Json<Value>) -> Response {
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        == Some(&format!("Bearer {TOKEN}"));
    if !authorized {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
        )
            .into_response();
    }
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let result = match message["method"].as_str() {
        Some("initialize") => json!({
            "protocolVersion": "2025-03-26",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "legacy", "version": "1"},
        }),
        Some("tools/list") => json!({"tools": [
            {"name": "ping", "inputSchema": {"type": "object"}},
        ]}),
        Some(_) if message.get("id").is_some() => {
            return axum::Json(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "Method not found"}}))
            .into_response();
        }
        _ => return StatusCode::ACCEPTED.into_response(),
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

/// Follows the authorization URL headlessly and hands back the redirect.
fn oauth() -> OAuth {
    OAuth::new("http://127.0.0.1:3999/callback").on_authorize(|prompt| async move {
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
async fn a_2025_03_26_server_is_authorized_at_its_origin() {
    let (server, task) = start(false).await;
    let connection = Connector::new()
        .oauth(oauth())
        .http(&format!("{}/mcp", server.base), HttpOptions::new())
        .await
        .expect("authorized through the 2025-03-26 discovery");
    let tools = connection.tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(server.token_grants.load(Ordering::SeqCst), 1);
    connection.close().await;
    task.abort();
}

#[tokio::test]
async fn with_protected_resource_metadata_the_issuer_is_still_checked() {
    let (server, task) = start(true).await;
    let error = Connector::new()
        .oauth(oauth())
        .http(&format!("{}/mcp", server.base), HttpOptions::new())
        .await
        .expect_err("metadata naming another issuer is rejected");
    assert!(
        matches!(&error, McpError::Authorization { message, .. } if message.contains("issuer")),
        "{error:?}"
    );
    assert_eq!(server.token_grants.load(Ordering::SeqCst), 0);
    task.abort();
}
