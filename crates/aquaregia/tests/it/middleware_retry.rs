//! `Retry`: real 429s with `Retry-After` and 503s from the loopback mock, in paused time; what
//! is never retried; streams retried only before their first event; a shared budget.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    Client, Error, LanguageModel, LanguageModelExt, Message, ModelRequest, ModelState, Retry,
    RetryBudget, RetryPolicy, StreamEvent,
};
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text};
use futures::StreamExt;
use serde_json::json;
use tokio::time::Instant;

/// A client on the mock with the client's own default retries (2) left on: under `Retry`
/// they must be off. The timeout is long so that paused time never fires it.
fn client(server: &MockServer) -> Client {
    Client::openai_chat()
        .base_url(&server.url)
        .api_key("test-key")
        .timeout(Duration::from_secs(3600))
        .build()
        .unwrap()
}

fn request() -> ModelRequest {
    ModelRequest::new("mock-model", vec![Message::user("hi")])
}

fn rate_limited(retry_after: &str) -> Reply {
    Reply::error(
        429,
        json!({"error": {"message": "slow down", "type": "rate_limit_exceeded"}}),
    )
    .with_header("retry-after", retry_after)
}

fn overloaded() -> Reply {
    Reply::error(503, json!({"error": {"message": "overloaded"}}))
}

#[tokio::test(start_paused = true)]
async fn a_429_is_retried_after_its_retry_after() {
    let server =
        MockServer::with_replies([rate_limited("7"), Reply::json(chat_text("hello"))]).await;
    let model = client(&server)
        .model("mock-model")
        .with_retry(RetryPolicy::new());
    let started = Instant::now();
    let response = model
        .generate(&request(), &mut ModelState::new())
        .await
        .unwrap();
    assert_eq!(response.text(), "hello");
    assert_eq!(server.request_count(), 2);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(7) && waited < Duration::from_secs(8),
        "waited {waited:?}, the provider asked for 7 s"
    );
}

#[tokio::test(start_paused = true)]
async fn attempts_do_not_multiply_with_the_clients_own_retries() {
    // Two attempts allowed: the 429, then the 503 ends the call. Were the client's own
    // retries (2 by default) still on, the third reply would have answered it.
    let server = MockServer::with_replies([
        rate_limited("1"),
        overloaded(),
        Reply::json(chat_text("too late")),
    ])
    .await;
    let model = client(&server)
        .model("mock-model")
        .with_retry(RetryPolicy::new().max_attempts(2));
    let error = model
        .generate(&request(), &mut ModelState::new())
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::Provider { status: 503, .. }),
        "{error:?}"
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_provider_error_carries_retry_after_in_every_form() {
    let in_30_s = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
    let server = MockServer::with_replies([
        Reply::error(429, json!({"error": {"message": "a"}})).with_header("retry-after-ms", "1500"),
        rate_limited("2"),
        rate_limited(&in_30_s),
        overloaded(),
    ])
    .await;
    let model = Client::openai_chat()
        .base_url(&server.url)
        .api_key("test-key")
        .max_retries(0)
        .build()
        .unwrap()
        .model("mock-model");
    let mut asked = Vec::new();
    for _ in 0..4 {
        let error = model
            .generate(&request(), &mut ModelState::new())
            .await
            .unwrap_err();
        asked.push(error.retry_after());
    }
    assert_eq!(asked[0], Some(Duration::from_millis(1500)));
    assert_eq!(asked[1], Some(Duration::from_secs(2)));
    let date = asked[2].expect("an HTTP date is read");
    assert!(
        date > Duration::from_secs(27) && date <= Duration::from_secs(30),
        "{date:?}"
    );
    assert_eq!(asked[3], None, "a 503 without the header asks for nothing");
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_longer_than_the_policy_allows_fails_at_once() {
    let server =
        MockServer::with_replies([rate_limited("600"), Reply::json(chat_text("no"))]).await;
    let model = client(&server)
        .model("mock-model")
        .with_retry(RetryPolicy::new().max_retry_after(Duration::from_secs(60)));
    let started = Instant::now();
    let error = model
        .generate(&request(), &mut ModelState::new())
        .await
        .unwrap_err();
    assert_eq!(error.retry_after(), Some(Duration::from_secs(600)));
    assert_eq!(server.request_count(), 1);
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn rejections_of_the_request_are_never_retried() {
    for status in [400, 401, 403, 404, 422] {
        let server = MockServer::with_replies([
            Reply::error(status, json!({"error": {"message": "no"}})),
            Reply::json(chat_text("never")),
        ])
        .await;
        let model = client(&server)
            .model("mock-model")
            .with_retry(RetryPolicy::new().max_attempts(5));
        let error = model
            .generate(&request(), &mut ModelState::new())
            .await
            .unwrap_err();
        assert!(
            matches!(error, Error::Provider { status: got, .. } if got == status),
            "{error:?}"
        );
        assert_eq!(server.request_count(), 1, "HTTP {status} was retried");
    }
}

#[tokio::test(start_paused = true)]
async fn backoff_without_retry_after_stays_within_the_policy() {
    let server = MockServer::with_replies([
        overloaded(),
        overloaded(),
        Reply::text("streamed after two 503s"),
    ])
    .await;
    let model = client(&server).model("mock-model").with_retry(
        RetryPolicy::new()
            .initial_backoff(Duration::from_secs(1))
            .max_backoff(Duration::from_secs(10)),
    );
    let started = Instant::now();
    let mut stream = model
        .stream(&request(), &mut ModelState::new())
        .await
        .unwrap();
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        if let StreamEvent::TextDelta(delta) = event.unwrap() {
            text.push_str(&delta);
        }
    }
    assert_eq!(text, "streamed after two 503s");
    assert_eq!(server.request_count(), 3);
    // Jittered between half and all of 1 s, then of 2 s.
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1500) && waited <= Duration::from_secs(3),
        "{waited:?}"
    );
}

fn overloaded_event() -> Error {
    Error::Stream {
        provider: "scripted",
        message: "overloaded".into(),
        code: Some("overloaded_error".into()),
    }
}

#[tokio::test(start_paused = true)]
async fn a_stream_is_retried_before_its_first_event_and_never_after() {
    let scripted = ScriptedModel::new()
        .reply(ScriptedReply::Events(vec![Err(overloaded_event())]))
        .reply(ScriptedReply::Events(vec![
            Ok(StreamEvent::TextDelta("partial".into())),
            Err(overloaded_event()),
        ]))
        .text("never asked");
    let model = Retry::new(Arc::new(scripted.clone()), RetryPolicy::new());
    let mut stream = model
        .stream(&request(), &mut ModelState::new())
        .await
        .unwrap();
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        StreamEvent::TextDelta("partial".into())
    );
    assert!(matches!(
        stream.next().await,
        Some(Err(Error::Stream { .. }))
    ));
    assert!(stream.next().await.is_none());
    assert_eq!(
        scripted.call_count(),
        2,
        "the error before any event was retried, the one after was not"
    );
}

#[tokio::test(start_paused = true)]
async fn a_shared_budget_stops_a_retry_storm() {
    let failing = || {
        ScriptedModel::new().repeat_with(|| {
            ScriptedReply::Error(Error::Provider {
                provider: "scripted",
                status: 503,
                message: "down".into(),
                code: None,
                body: String::new(),
                request_id: None,
                retry_after: None,
            })
        })
    };
    let (first, second) = (failing(), failing());
    let budget = RetryBudget::new(4, 0.5);
    let policy = RetryPolicy::new().max_attempts(5).budget(budget.clone());
    let a = first.clone().with_retry(policy.clone());
    let b = second.clone().with_retry(policy);
    assert!(
        a.generate(&request(), &mut ModelState::new())
            .await
            .is_err()
    );
    // 4 tokens: the first failure leaves 3 (> 2, retry), the second 2 (no retry).
    assert_eq!(first.call_count(), 2);
    assert!(
        b.generate(&request(), &mut ModelState::new())
            .await
            .is_err()
    );
    assert_eq!(
        second.call_count(),
        1,
        "the budget shared with `a` is spent"
    );
    assert_eq!(budget.tokens(), 1.0);
}
