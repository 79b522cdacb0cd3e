//! A tool call that needs approval suspends the run on a durable promise; a decision signed in
//! another process and sent through Restate's ingress resumes it, even after the service
//! restarted. A decision that does not check is refused and the run keeps waiting.

use std::time::Duration;

use aquaregia::{ApprovalKey, ToolCall};
use aquaregia_test_support::deps::example_binary;
use serde_json::{Value, json};

use crate::support::{APPROVAL_SECRET, Setup, answer, call};

/// Waits until run `id` waits on approvals, and returns the calls.
async fn wait_pending(setup: &Setup, id: &str) -> Vec<ToolCall> {
    let pending = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let (status, body) = setup
                .server
                .ingress_post(&format!("/AgentRun/{id}/pending"), &Value::Null)
                .await;
            assert_eq!(status, 200, "pending: {body}");
            let calls: Vec<ToolCall> = serde_json::from_value(body["calls"].clone()).unwrap();
            if !calls.is_empty() {
                return calls;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    pending.unwrap_or_else(|_| {
        panic!(
            "run {id} never waited for approval; the service's stderr:\n{}",
            setup.service.stderr()
        )
    })
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs restate-server (scripts/test-deps.sh restate): --features real-peers"
)]
async fn an_approval_sent_after_a_service_restart_resumes_the_run() {
    let mut setup = Setup::start(vec![
        call("call-p", "publish", "hello"),
        answer("Published hello."),
    ])
    .await;
    setup.send_run("approval", "Publish hello.").await;
    let calls = wait_pending(&setup, "approval").await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "publish");
    assert_eq!(calls[0].arguments, json!({"text": "hello"}));
    assert!(
        setup.side_effects().is_empty(),
        "nothing ran before approval"
    );

    // A decision signed with another key, and one for other arguments, are refused.
    let forger = ApprovalKey::new("not the service's key, but long enough too").unwrap();
    let (status, body) = setup
        .server
        .ingress_post(
            "/AgentRun/approval/approve",
            &json!(forger.approve(&calls[0])),
        )
        .await;
    assert_eq!(status, 400, "a forged approval: {body}");
    let mut edited = calls[0].clone();
    edited.arguments = json!({"text": "something else"});
    let key = ApprovalKey::new(APPROVAL_SECRET).unwrap();
    let (status, body) = setup
        .server
        .ingress_post("/AgentRun/approval/approve", &json!(key.approve(&edited)))
        .await;
    assert_eq!(status, 400, "an approval of other arguments: {body}");

    // The service restarts while the run waits; the run still waits.
    setup.service.kill().await;
    setup.service.restart().await;
    assert_eq!(wait_pending(&setup, "approval").await, calls);

    // The example's `approve` command signs and sends the decision, from another process.
    let output = tokio::process::Command::new(example_binary("durable_agent"))
        .args(["approve", "approval"])
        .env("AQUAREGIA_APPROVAL_KEY", APPROVAL_SECRET)
        .env("RESTATE_INGRESS", &setup.server.ingress)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "durable_agent approve: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        r#"approved call-p publish({"text":"hello"})"#
    );

    let result = setup.result("approval").await;
    assert_eq!(result["text"], "Published hello.");
    assert_eq!(setup.side_effects(), ["published: hello"]);
    assert_eq!(
        setup.model.request_count(),
        2,
        "no model call was sent again"
    );
    let (_, pending) = setup
        .server
        .ingress_post("/AgentRun/approval/pending", &Value::Null)
        .await;
    assert_eq!(pending["calls"], json!([]), "nothing waits any more");
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs restate-server (scripts/test-deps.sh restate): --features real-peers"
)]
async fn cancelling_a_run_that_waits_for_approval_ends_it_without_running_the_call() {
    let setup = Setup::start(vec![call("call-p", "publish", "never")]).await;
    let invocation = setup.send_run("cancelled", "Publish never.").await;
    wait_pending(&setup, "cancelled").await;

    let status = setup.server.cancel(&invocation).await;
    assert!((200..300).contains(&status), "cancel: {status}");
    let (status, body) = setup
        .server
        .attach("AgentRun", "cancelled", crate::support::RUN_BOUND)
        .await;
    assert_eq!(status, 409, "a cancelled run fails as cancelled: {body}");
    assert!(setup.side_effects().is_empty(), "the call never ran");
    assert_eq!(setup.model.request_count(), 1);
    let (_, pending) = setup
        .server
        .ingress_post("/AgentRun/cancelled/pending", &Value::Null)
        .await;
    assert_eq!(pending["calls"], json!([]), "nothing waits any more");
    // An approval that comes too late is refused.
    let key = ApprovalKey::new(APPROVAL_SECRET).unwrap();
    let call = ToolCall {
        id: "call-p".into(),
        name: "publish".into(),
        arguments: json!({"text": "never"}),
    };
    let (status, body) = setup
        .server
        .ingress_post("/AgentRun/cancelled/approve", &json!(key.approve(&call)))
        .await;
    assert_eq!(status, 409, "an approval after the end: {body}");
}
