//! `session/fork` under the TypeScript SDK client (which validates every message against the
//! ACP schema): the agent advertises it; a fork made while the parent runs a prompt holds the
//! parent's history up to its latest completed turn; the fork's first model request starts
//! with the parent's messages byte for byte under the parent's `prompt_cache_key`; the two
//! then keep their own histories; an unknown session is a clear error.

use std::sync::Arc;

use aquaregia_test_support::mock_model::Reply;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::acp_typescript_sdk::Drive;

/// The (role, text) of each input item of a Responses request.
fn said(body: &Value) -> Vec<(String, String)> {
    body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                item["role"].as_str().unwrap_or_default().to_owned(),
                aquaregia_test_support::mock_model::content_text(item),
            )
        })
        .collect()
}

fn texts(body: &Value) -> Vec<String> {
    said(body).into_iter().map(|(_, text)| text).collect()
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fork_shares_the_parents_history_and_cache_key_under_the_typescript_sdk() {
    let drive = Drive::new("ts-fork").await;
    // The parent's second turn is held until the fork's first request arrived: the fork is
    // made while the parent runs a prompt.
    let gate = Arc::new(Notify::new());
    drive.mock.push(Reply::responses_text("One."));
    drive.mock.push(Reply::Gated(
        gate.clone(),
        Box::new(Reply::responses_text("Parent two.")),
    ));
    for answer in ["Fork two.", "Parent three.", "Fork three."] {
        drive.mock.push(Reply::responses_text(answer));
    }
    let cwd = drive.project();
    let plan = json!({
        "steps": [
            {"op": "new", "cwd": cwd},
            {"op": "prompt", "session": 0, "text": "one"},
            {"op": "prompt", "session": 0, "text": "two in the parent", "background": true},
            {"op": "fork", "session": 0, "cwd": cwd},
            {"op": "prompt", "session": 1, "text": "two in the fork"},
            {"op": "settle"},
            {"op": "prompt", "session": 0, "text": "three in the parent"},
            {"op": "prompt", "session": 1, "text": "three in the fork"},
            {"op": "fork", "sessionId": "no-such-session", "cwd": cwd, "expectError": true},
        ],
    });
    let release = async {
        drive.mock.wait_requests(3).await;
        gate.notify_one();
    };
    let (report, ()) = tokio::join!(drive.run_on("openai:gpt-5-mini", &plan, &[]), release);

    assert!(
        report["inits"][0]["agentCapabilities"]["sessionCapabilities"]["fork"].is_object(),
        "fork is advertised: {:#}",
        report["inits"][0]
    );
    let (parent, fork) = (&report["sessions"][0], &report["sessions"][1]);
    assert_ne!(parent, fork);
    let bodies = drive.mock.bodies();
    assert_eq!(bodies.len(), 5);
    let (parent_two, fork_two) = (&bodies[1], &bodies[2]);
    assert_eq!(texts(parent_two), ["one", "One.", "two in the parent"]);
    // The running turn is the parent's own: the fork starts after the latest completed one.
    assert_eq!(texts(fork_two), ["one", "One.", "two in the fork"]);
    // What the two share goes out byte for byte, under the parent's cache key.
    assert_eq!(
        parent_two["input"].as_array().unwrap()[..2],
        fork_two["input"].as_array().unwrap()[..2]
    );
    assert_eq!(parent_two["instructions"], fork_two["instructions"]);
    assert_eq!(parent_two["tools"], fork_two["tools"]);
    for body in &bodies {
        assert_eq!(body["prompt_cache_key"], *parent, "{body:#}");
    }
    assert_eq!(
        texts(&bodies[3]),
        [
            "one",
            "One.",
            "two in the parent",
            "Parent two.",
            "three in the parent"
        ]
    );
    assert_eq!(
        texts(&bodies[4]),
        [
            "one",
            "One.",
            "two in the fork",
            "Fork two.",
            "three in the fork"
        ]
    );
    let unknown = report["results"].as_array().unwrap().last().unwrap();
    assert!(
        unknown["result"]["error"]
            .as_str()
            .unwrap()
            .contains("Invalid params"),
        "{unknown:#}"
    );
    assert!(
        unknown["result"]["data"]
            .to_string()
            .contains("unknown session `no-such-session`"),
        "{unknown:#}"
    );
}
