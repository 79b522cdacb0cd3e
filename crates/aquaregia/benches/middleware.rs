//! What each model middleware adds to one call: `generate` on a `ScriptedModel` (an answer
//! from memory, no I/O) bare, and under `Retry`, `RateLimited` (limits never reached) and a
//! replaying `Cassette`. Rounds of each are interleaved; figures are medians per call.
//! Run pinned: `taskset -c 1 cargo bench -p aquaregia --bench middleware`.
#![allow(missing_docs, clippy::print_stdout)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    Cassette, CassetteMode, LanguageModel, LanguageModelExt, Message, ModelRequest, ModelState,
    RateLimiter, RetryPolicy,
};

const CALLS: u32 = 20_000;
const ROUNDS: usize = 15;

fn scripted() -> ScriptedModel {
    ScriptedModel::new().repeat_with(|| ScriptedReply::text("The answer is 42."))
}

async fn per_call(model: &dyn LanguageModel, request: &ModelRequest) -> Duration {
    let mut state = ModelState::new();
    let started = Instant::now();
    for _ in 0..CALLS {
        let response = model.generate(request, &mut state).await.unwrap();
        std::hint::black_box(response);
    }
    started.elapsed() / CALLS
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let request = ModelRequest::new(
            "scripted-model",
            vec![
                Message::user("What is six times seven? Answer in one sentence."),
                Message::assistant("Let me think."),
                Message::user("Go on."),
            ],
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench.json");
        Cassette::builder(&path)
            .mode(CassetteMode::Record)
            .model(Arc::new(scripted()))
            .build()
            .unwrap()
            .generate(&request, &mut ModelState::new())
            .await
            .unwrap();
        let limiter = RateLimiter::builder()
            .requests_per_minute(u32::MAX)
            .tokens_per_minute(u64::MAX)
            .build()
            .unwrap();
        let models: Vec<(&str, Arc<dyn LanguageModel>)> = vec![
            ("bare ScriptedModel", Arc::new(scripted())),
            ("Retry", Arc::new(scripted().with_retry(RetryPolicy::new()))),
            ("RateLimited", Arc::new(scripted().with_rate_limit(limiter))),
            (
                "Cassette (replay)",
                Arc::new(Cassette::builder(&path).build().unwrap()),
            ),
        ];
        let mut samples = vec![Vec::new(); models.len()];
        for round in 0..=ROUNDS {
            for (index, (_, model)) in models.iter().enumerate() {
                let sample = per_call(&**model, &request).await;
                if round > 0 {
                    samples[index].push(sample);
                }
            }
        }
        let medians: Vec<Duration> = samples.into_iter().map(median).collect();
        println!("| model | per call | above bare |");
        println!("|---|---|---|");
        for ((name, _), median) in models.iter().zip(&medians) {
            let above = median.saturating_sub(medians[0]);
            println!(
                "| {name} | {:.2} µs | {:.2} µs |",
                median.as_secs_f64() * 1e6,
                above.as_secs_f64() * 1e6
            );
        }
    });
}
