//! `session/cancel` stops a prompt with stop reason `cancelled` (never an error): during a
//! tool call that never returns, and while a permission request is unanswered.

use crate::support;

use std::time::Instant;

use serde_json::{Value, json};

use aquaregia_test_support::acp_client::select_permission;
use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::model::Model;
use support::raw::{RawClient, ok};
use support::scripts::marked_toolbox;
use support::{BOUND, tool_updates, updates};

fn position(log: &[Value], what: impl Fn(&Value) -> bool) -> Option<usize> {
    log.iter().position(what)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_during_a_tool_call_that_never_returns() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    client.set_handler(|request| select_permission(request, "allow_once"));
    client.initialize().await;
    let marker = marker("cancel-tool");
    let session = client
        .new_session("/tmp", json!([marked_toolbox("box", &marker)]))
        .await;
    model.tool_call("call-1", "box__sleep_forever", json!({}));

    let prompt = client.start_prompt(&session, "sleep").await;
    support::eventually("the call to start", || {
        tool_updates(&updates(&client.log(), &session))
            .iter()
            .any(|u| u["toolCallId"] == "call-1" && u["status"] == "in_progress")
    })
    .await;
    let cancelled_at = Instant::now();
    client
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let answer = client.response(prompt).await;
    assert!(cancelled_at.elapsed() < BOUND);
    assert_eq!(
        answer["result"]["stopReason"], "cancelled",
        "a stop reason, not an error: {answer}"
    );

    let log = client.log();
    let failed = position(&log, |m| {
        m["method"] == "session/update"
            && m["params"]["update"]["toolCallId"] == "call-1"
            && m["params"]["update"]["status"] == "failed"
    })
    .expect("the call is reported failed");
    let answered = position(&log, |m| m["id"] == prompt && m.get("method").is_none()).unwrap();
    assert!(failed < answered, "updates come before the answer");
    assert_eq!(
        log.iter()
            .filter(|m| m["id"] == prompt && m.get("method").is_none())
            .count(),
        1,
        "one answer"
    );

    // The session goes on.
    model.text("Awake.");
    let again = client.prompt(&session, "hello?").await;
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_while_a_permission_request_is_pending() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    client.initialize().await;
    let marker = marker("cancel-permission");
    let session = client
        .new_session("/tmp", json!([marked_toolbox("box", &marker)]))
        .await;
    model.tool_call("call-1", "box__write_note", json!({"text": "x"}));

    let prompt = client.start_prompt(&session, "write").await;
    // The client never answers this.
    let asked = client.agent_request("session/request_permission").await;
    client
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let answer = client.response(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");

    let log = client.log();
    assert!(
        log.iter()
            .any(|m| m["method"] == "$/cancel_request" && m["params"]["requestId"] == asked["id"]),
        "the agent withdraws its permission request"
    );
    let statuses: Vec<Value> = tool_updates(&updates(&log, &session))
        .iter()
        .filter(|u| u["toolCallId"] == "call-1")
        .map(|u| u["status"].clone())
        .collect();
    assert_eq!(
        statuses,
        ["pending", "failed"],
        "never run, shown as failed"
    );

    // A late answer changes nothing: the tool does not run, the session goes on.
    client
        .reply(&ok(
            &asked,
            json!({"outcome": {"outcome": "selected", "optionId": "allow_always"}}),
        ))
        .await;
    model.text("Okay.");
    let again = client.prompt(&session, "never mind").await;
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
    assert_eq!(model.request_count(), 2, "no step ran after the cancel");
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}

#[tokio::test]
async fn a_cancel_right_behind_the_prompt_is_not_lost() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    client.initialize().await;
    let session = client.new_session("/tmp", json!([])).await;
    for round in 0..5 {
        // Without the cancel this prompt would never end: the model never answers.
        model.hang();
        let id = 1000 + round;
        let prompt = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hang"}]}});
        let cancel = json!({"jsonrpc": "2.0", "method": "session/cancel",
            "params": {"sessionId": session}});
        // One write: the agent reads both before the prompt's task has started.
        client.send_line(&format!("{prompt}\n{cancel}")).await;
        let answer = client.response(id).await;
        assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    }
    client.finish().await.unwrap();
}
