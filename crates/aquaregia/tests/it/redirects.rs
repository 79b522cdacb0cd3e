//! Credentials never follow a redirect to another origin, and no `Referer` is sent.

use std::sync::{Arc, Mutex};

use aquaregia::{Client, Error, Message, ModelRequest};
use aquaregia_test_support::mock_model::chat_text;
use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

type Seen = Arc<Mutex<Vec<HeaderMap>>>;

/// A server that records the headers of every request and answers with `answer`.
async fn serve(answer: impl Fn() -> Response + Clone + Send + Sync + 'static) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let app = Router::new().fallback(post(move |headers: HeaderMap| {
        let answer = answer.clone();
        let record = record.clone();
        async move {
            record.lock().expect("lock").push(headers);
            answer()
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

fn redirect_to(location: String) -> impl Fn() -> Response + Clone + Send + Sync + 'static {
    move || {
        (
            StatusCode::TEMPORARY_REDIRECT,
            [(header::LOCATION, location.clone())],
        )
            .into_response()
    }
}

/// Clients for `base_url` on both HTTP paths: aquaregia's own (plain HTTP goes straight on
/// hyper) and a caller's `reqwest::Client` built with aquaregia's redirect rules.
fn clients(base_url: &str) -> [Client; 2] {
    let builder = || {
        Client::openai_chat()
            .base_url(format!("{base_url}/v1"))
            .api_key("sk-secret")
            .header("x-gateway-key", "gateway-secret")
            .max_retries(0)
    };
    let same_origin = reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if same {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    let reqwest = reqwest::Client::builder()
        .referer(false)
        .redirect(same_origin)
        .build()
        .expect("reqwest client");
    [
        builder().build().expect("client"),
        builder().http_client(reqwest).build().expect("client"),
    ]
}

fn request() -> ModelRequest {
    ModelRequest::new("m", vec![Message::user("hi")])
}

#[tokio::test]
async fn a_cross_origin_redirect_is_not_followed_with_credentials() {
    let (other, other_seen) = serve(|| axum::Json(chat_text("stolen")).into_response()).await;
    let (origin, origin_seen) = serve(redirect_to(format!("{other}/v1/chat/completions"))).await;

    for client in clients(&origin) {
        let error = client.generate(&request()).await.unwrap_err();
        assert!(
            matches!(error, Error::Provider { status: 307, .. }),
            "the redirect is reported, not followed: {error}"
        );
    }
    assert_eq!(origin_seen.lock().expect("lock").len(), 2);
    for headers in other_seen.lock().expect("lock").iter() {
        for name in ["authorization", "x-gateway-key", "referer"] {
            assert!(
                headers.get(name).is_none(),
                "`{name}` reached another origin"
            );
        }
    }
}

#[tokio::test]
async fn a_same_origin_redirect_is_followed_without_referer() {
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            post(|| async { redirect_to("/v1/moved".to_owned())() }),
        )
        .route(
            "/v1/moved",
            post(move |headers: HeaderMap| {
                let record = record.clone();
                async move {
                    record.lock().expect("lock").push(headers);
                    axum::Json(chat_text("ok")).into_response()
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let origin = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });

    for client in clients(&origin) {
        let response = client.generate(&request()).await.expect("answer");
        assert_eq!(response.text(), "ok");
    }
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 2);
    for headers in seen.iter() {
        assert_eq!(headers["authorization"], "Bearer sk-secret");
        assert_eq!(headers["x-gateway-key"], "gateway-secret");
        assert!(headers.get("referer").is_none());
    }
}
