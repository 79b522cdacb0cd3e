//! Client credentials with `private_key_jwt`: a key that cannot sign fails the connect with a
//! clear authorization error, before any token request. (The conformance suite's
//! `auth/client-credentials-jwt` verifies the assertions of a working key.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aquaregia_mcp::{Connector, HttpOptions, JwtAlgorithm, McpError, OAuth};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::json;

#[derive(Default)]
struct Server {
    base: String,
    token_requests: AtomicUsize,
}

/// A protected MCP endpoint and an authorization server for client credentials whose token
/// endpoint refuses every request (and counts them).
async fn start() -> (Arc<Server>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Arc::new(Server {
        base: format!("http://{}", listener.local_addr().unwrap()),
        ..Server::default()
    });
    let app = Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(|State(server): State<Arc<Server>>| async move {
                axum::Json(json!({
                    "resource": format!("{}/mcp", server.base),
                    "authorization_servers": [server.base],
                }))
            }),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(|State(server): State<Arc<Server>>| async move {
                let base = &server.base;
                axum::Json(json!({
                    "issuer": base,
                    "authorization_endpoint": format!("{base}/authorize"),
                    "token_endpoint": format!("{base}/token"),
                    "grant_types_supported": ["client_credentials"],
                    "token_endpoint_auth_methods_supported": ["private_key_jwt"],
                    "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
                }))
            }),
        )
        .route(
            "/token",
            post(|State(server): State<Arc<Server>>| async move {
                server.token_requests.fetch_add(1, Ordering::SeqCst);
                StatusCode::BAD_REQUEST
            }),
        )
        .route(
            "/mcp",
            post(|State(server): State<Arc<Server>>| async move {
                let challenge = format!(
                    r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#,
                    server.base
                );
                (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, challenge)],
                )
                    .into_response()
            }),
        )
        .with_state(server.clone());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    (server, task)
}

#[tokio::test]
async fn a_key_that_cannot_sign_fails_before_any_token_request() {
    let (server, task) = start().await;
    let pem = "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n";
    let oauth = OAuth::client_credentials_jwt("agent-7", pem, JwtAlgorithm::Es256);
    let error = Connector::new()
        .oauth(oauth)
        .http(&format!("{}/mcp", server.base), HttpOptions::new())
        .await
        .expect_err("an unusable key cannot authorize");
    let McpError::Authorization { message, .. } = &error else {
        panic!("{error:?}");
    };
    assert!(
        message.contains("client credentials") && message.contains("key"),
        "{message}"
    );
    assert!(
        !message.contains("bm90IGEga2V5"),
        "the key leaked: {message}"
    );
    assert_eq!(server.token_requests.load(Ordering::SeqCst), 0);
    task.abort();
}

/// The grant runs off the caller's runtime thread (rmcp's exchange is not `Send`); on a
/// current-thread runtime it must still reach the token endpoint and come back.
#[tokio::test]
async fn a_refused_client_secret_grant_reports_the_token_endpoint_on_a_current_thread_runtime() {
    let (server, task) = start().await;
    let oauth = OAuth::client_credentials("agent-7", "s3cret");
    let url = format!("{}/mcp", server.base);
    let connect = Connector::new().oauth(oauth).http(&url, HttpOptions::new());
    let error = tokio::time::timeout(std::time::Duration::from_secs(60), connect)
        .await
        .expect("the grant does not hang")
        .expect_err("the token endpoint refuses");
    let McpError::Authorization { message, .. } = &error else {
        panic!("{error:?}");
    };
    assert!(message.contains("client credentials"), "{message}");
    assert!(!message.contains("s3cret"), "the secret leaked: {message}");
    assert_eq!(server.token_requests.load(Ordering::SeqCst), 1);
    task.abort();
}
