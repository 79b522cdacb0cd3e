//! `RateLimited`: requests and tokens per minute in paused time, the estimate corrected by the
//! real usage, one limiter shared by several models, a cancelled wait giving its share back.

use std::time::Duration;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    Error, LanguageModel, LanguageModelExt, Message, ModelRequest, ModelState, RateLimiter,
    StreamEvent, Usage,
};
use futures::StreamExt;
use tokio::time::Instant;

fn request() -> ModelRequest {
    ModelRequest::new("scripted-model", vec![Message::user("hi")])
}

async fn call(model: &dyn LanguageModel) {
    model
        .generate(&request(), &mut ModelState::new())
        .await
        .unwrap();
}

fn seconds_since(started: Instant) -> f64 {
    started.elapsed().as_secs_f64()
}

#[tokio::test(start_paused = true)]
async fn requests_per_minute_spread_calls_over_the_minute() {
    let limiter = RateLimiter::builder()
        .requests_per_minute(2)
        .build()
        .unwrap();
    let model = ScriptedModel::new()
        .repeat_with(|| ScriptedReply::text("ok"))
        .with_rate_limit(limiter);
    let started = Instant::now();
    let mut at = Vec::new();
    for _ in 0..4 {
        call(&model).await;
        at.push(seconds_since(started));
    }
    // A full minute's two at once, then one every 30 s.
    assert!(at[0] < 0.01 && at[1] < 0.01, "{at:?}");
    assert!((at[2] - 30.0).abs() < 0.01, "{at:?}");
    assert!((at[3] - 60.0).abs() < 0.01, "{at:?}");
}

#[tokio::test(start_paused = true)]
async fn tokens_per_minute_are_corrected_by_the_real_usage() {
    let limiter = RateLimiter::builder()
        .tokens_per_minute(1000)
        .build()
        .unwrap();
    // The request is a few tokens by its size; the provider says each call used 900.
    let model = ScriptedModel::new()
        .repeat_with(|| ScriptedReply::text("ok").with_usage(Usage::new(800, 100)))
        .with_rate_limit(limiter);
    let started = Instant::now();
    call(&model).await;
    call(&model).await;
    assert!(seconds_since(started) < 0.01, "both fit the estimate");
    // 1000 - 900 - 900 = -800 left, plus this call's estimate: about 48 s to pay back.
    call(&model).await;
    let waited = seconds_since(started);
    assert!((48.0..50.0).contains(&waited), "waited {waited} s");
}

#[tokio::test(start_paused = true)]
async fn a_streamed_call_is_corrected_when_its_usage_arrives() {
    let limiter = RateLimiter::builder()
        .tokens_per_minute(600)
        .build()
        .unwrap();
    let model = ScriptedModel::new()
        .repeat_with(|| ScriptedReply::text("ok").with_usage(Usage::new(1100, 100)))
        .with_rate_limit(limiter);
    let started = Instant::now();
    let mut stream = model
        .stream(&request(), &mut ModelState::new())
        .await
        .unwrap();
    while let Some(event) = stream.next().await {
        if let StreamEvent::Finish(response) = event.unwrap() {
            assert_eq!(response.usage.input_tokens, 1100);
        }
    }
    // 600 - 1200 = -600: a minute to pay back before the next call.
    call(&model).await;
    let waited = seconds_since(started);
    assert!((60.0..63.0).contains(&waited), "waited {waited} s");
}

#[tokio::test(start_paused = true)]
async fn one_limiter_is_shared_by_every_model_and_clone_it_is_given_to() {
    let limiter = RateLimiter::builder()
        .requests_per_minute(1)
        .build()
        .unwrap();
    let big = ScriptedModel::new()
        .id("big")
        .text("a")
        .with_rate_limit(limiter.clone());
    let small = ScriptedModel::new()
        .id("small")
        .text("b")
        .with_rate_limit(limiter);
    let started = Instant::now();
    call(&big).await;
    call(&small).await;
    let waited = seconds_since(started);
    assert!((60.0..60.01).contains(&waited), "waited {waited} s");
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_wait_gives_its_share_back() {
    let limiter = RateLimiter::builder()
        .requests_per_minute(1)
        .build()
        .unwrap();
    let model = ScriptedModel::new()
        .repeat_with(|| ScriptedReply::text("ok"))
        .with_rate_limit(limiter);
    let started = Instant::now();
    call(&model).await;
    // This call waits for the next minute's request; it is dropped after 10 s.
    let cancelled = tokio::time::timeout(
        Duration::from_secs(10),
        model.generate(&request(), &mut ModelState::new()),
    )
    .await;
    assert!(cancelled.is_err(), "the call was still waiting");
    // Its reservation went back: the next call goes at 60 s, not at 120 s.
    call(&model).await;
    let waited = seconds_since(started);
    assert!((60.0..60.01).contains(&waited), "waited {waited} s");
}

#[test]
fn a_zero_limit_is_refused() {
    let error = RateLimiter::builder()
        .requests_per_minute(0)
        .build()
        .unwrap_err();
    assert!(matches!(error, Error::InvalidRequest(_)), "{error:?}");
}
