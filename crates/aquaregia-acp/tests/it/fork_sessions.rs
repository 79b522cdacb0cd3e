//! `session/fork`: advertised with or without a store; a stored session forks from another
//! connection (it need not be open), an open one without a store forks in memory; the fork
//! goes on from the parent's history and the parent never sees the fork's turns; an unknown
//! session is invalid params naming it.

use crate::support;

use std::sync::Arc;

use serde_json::json;

use aquaregia::FileSessionStore;
use support::model::{Model, transcript};
use support::raw::RawClient;

fn fork_params(id: &str) -> serde_json::Value {
    json!({"sessionId": id, "cwd": "/tmp", "mcpServers": []})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stored_session_forks_from_another_connection_and_they_diverge() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let model = Model::new();

    let first = RawClient::connect(model.agent().session_store(store.clone()));
    first.initialize().await;
    let parent = first.new_session("/tmp", json!([])).await;
    model.text("One.");
    first.prompt(&parent, "First question").await;
    first.finish().await.unwrap();

    let second = RawClient::connect(model.agent().session_store(store));
    let init = second.initialize().await;
    assert!(
        init["agentCapabilities"]["sessionCapabilities"]["fork"].is_object(),
        "{init}"
    );
    let forked = second.request("session/fork", fork_params(&parent)).await;
    let fork = forked["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{forked}"))
        .to_owned();
    assert_ne!(fork, parent);
    assert_eq!(
        forked["result"]["modes"]["currentModeId"], "default",
        "{forked}"
    );
    model.text("Fork answer.");
    let answer = second.prompt(&fork, "From the fork").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let sent = transcript(&model.requests()[1]);
    assert!(
        sent.contains("First question") && sent.contains("One.") && sent.contains("From the fork"),
        "{sent}"
    );

    let resumed = second.request("session/resume", fork_params(&parent)).await;
    assert!(resumed.get("result").is_some(), "{resumed}");
    model.text("Parent answer.");
    second.prompt(&parent, "From the parent").await;
    let sent = transcript(&model.requests()[2]);
    assert!(sent.contains("First question"), "{sent}");
    assert!(
        !sent.contains("From the fork"),
        "the parent never sees the fork: {sent}"
    );

    let unknown = second
        .request("session/fork", fork_params("no-such-session"))
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["data"]["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("unknown session `no-such-session`")),
        "{unknown}"
    );
    second.finish().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_store_an_open_session_forks_in_memory() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    let init = client.initialize().await;
    assert!(
        init["agentCapabilities"]["sessionCapabilities"]["fork"].is_object(),
        "{init}"
    );
    let parent = client.new_session("/tmp", json!([])).await;
    model.text("One.");
    client.prompt(&parent, "Remember 42").await;
    let forked = client.request("session/fork", fork_params(&parent)).await;
    let fork = forked["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{forked}"))
        .to_owned();
    model.text("42.");
    client.prompt(&fork, "What was it?").await;
    let sent = transcript(&model.requests()[1]);
    assert!(
        sent.contains("Remember 42") && sent.contains("One."),
        "{sent}"
    );

    let closed = client
        .request("session/close", json!({"sessionId": parent}))
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let gone = client.request("session/fork", fork_params(&parent)).await;
    assert_eq!(
        gone["error"]["code"], -32602,
        "nothing stored to fork: {gone}"
    );
    client.finish().await.unwrap();
}
