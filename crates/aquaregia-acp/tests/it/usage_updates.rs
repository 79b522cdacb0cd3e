//! `usage_update` after each model call: the tokens of that call out of the model's window,
//! before the prompt is answered; none when the window is not known (a size of 0 shows the
//! context full).

use crate::support;

use serde_json::{Value, json};

use aquaregia::Usage;
use aquaregia::test_utils::ScriptedReply;
use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::model::Model;
use support::raw::RawClient;
use support::scripts::marked_toolbox;
use support::{BOUND, updates};

/// A model call's usage.
fn usage(input: u64, output: u64, cached: u64) -> Usage {
    let mut usage = Usage::default();
    usage.input_tokens = input;
    usage.output_tokens = output;
    usage.cached_input_tokens = cached;
    usage
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_usage_update_follows_every_model_call() {
    let model = Model::new().context_window(32_000);
    let client = RawClient::connect(model.agent().trust_server("box"));
    client.initialize().await;
    let marker = marker("usage");
    let session = client
        .new_session("/tmp", json!([marked_toolbox("box", &marker)]))
        .await;

    // Two model calls: a read-only tool call, then the answer.
    model
        .push(
            ScriptedReply::tool_call("call-1", "box__read_note", json!({}))
                .with_usage(usage(100, 7, 0)),
        )
        .push(ScriptedReply::text("Done.").with_usage(usage(130, 9, 50)));
    let answer = client.prompt(&session, "read").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let log = client.log();
    let usage: Vec<Value> = updates(&log, &session)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "usage_update")
        .collect();
    assert_eq!(usage.len(), 2, "one per model call: {usage:#?}");
    let seen: Vec<(u64, u64, u64, u64)> = usage
        .iter()
        .map(|u| {
            let number = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("a number in {u}"));
            (
                number(&u["used"]),
                number(&u["_meta"]["inputTokens"]),
                number(&u["_meta"]["outputTokens"]),
                number(&u["_meta"]["cachedInputTokens"]),
            )
        })
        .collect();
    assert_eq!(seen, [(107, 100, 7, 0), (139, 130, 9, 50)]);
    for update in &usage {
        assert_eq!(update["size"], 32_000, "the model's window: {update}");
        assert_eq!(update["_meta"]["model"], "mock-model", "{update}");
    }
    // Sent before the prompt's answer.
    let answered = log
        .iter()
        .position(|m| {
            m.get("result")
                .is_some_and(|r| r.get("stopReason").is_some())
        })
        .unwrap();
    let last_usage = log
        .iter()
        .rposition(|m| m["params"]["update"]["sessionUpdate"] == "usage_update")
        .unwrap();
    assert!(last_usage < answered);
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}

/// A model whose window nobody knows (not the model, not the agent's settings, not the SDK's
/// table): no `usage_update`, rather than one saying the context is 0 tokens big.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_usage_update_says_the_window_is_zero() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    client.initialize().await;
    let session = client.new_session("/tmp", json!([])).await;
    model.push(ScriptedReply::text("Done.").with_usage(usage(100, 7, 0)));
    let answer = client.prompt(&session, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let usage: Vec<Value> = updates(&client.log(), &session)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "usage_update")
        .collect();
    assert_eq!(
        usage,
        Vec::<Value>::new(),
        "the window of `mock-model` is unknown"
    );
    client.finish().await.unwrap();
}
