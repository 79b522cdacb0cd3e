//! `session/load` of a session open on the same connection (a client reloading its view, as
//! acp-factory does): the history is replayed again and one live session remains; refused
//! clearly only while a prompt runs. A session stored in `bypass_permissions` is loaded in
//! the default mode.

use crate::support;

use std::sync::Arc;

use serde_json::{Value, json};

use aquaregia::FileSessionStore;
use support::model::{Model, transcript};
use support::raw::RawClient;
use support::updates;

fn load(id: &str) -> Value {
    json!({"sessionId": id, "cwd": "/tmp", "mcpServers": []})
}

/// The user texts replayed for `session` so far.
fn replayed_user_texts(client: &RawClient, session: &str) -> Vec<String> {
    updates(&client.log(), session)
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_open_session_loads_again_and_stays_one_session() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let model = Model::new();
    let client = RawClient::connect(model.agent().session_store(store));
    client.initialize().await;
    let id = client.new_session("/tmp", json!([])).await;
    model.text("One.");
    client.prompt(&id, "First question").await;

    let loaded = client.request("session/load", load(&id)).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    assert_eq!(replayed_user_texts(&client, &id), ["First question"]);
    // Loaded once more: replayed once more.
    let again = client.request("session/load", load(&id)).await;
    assert!(again.get("result").is_some(), "{again}");
    assert_eq!(
        replayed_user_texts(&client, &id),
        ["First question", "First question"]
    );

    // The session goes on from its history.
    model.text("Two.");
    let answer = client.prompt(&id, "Second question").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let history = transcript(&model.requests()[1]);
    assert!(
        history.contains("First question") && history.contains("One."),
        "{history}"
    );

    // While a prompt runs, loading is refused with a reason, and the prompt is not cut short.
    model.hang();
    let running = client.start_prompt(&id, "Third question").await;
    model.wait_requests(3).await;
    let refused = client.request("session/load", load(&id)).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused.to_string().contains("running a prompt"),
        "{refused}"
    );
    client
        .notify("session/cancel", json!({"sessionId": id}))
        .await;
    let cancelled = client.response(running).await;
    assert_eq!(
        cancelled["result"]["stopReason"], "cancelled",
        "{cancelled}"
    );
    client.finish().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stored_bypass_mode_does_not_come_back_silently() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let model = Model::new();
    let first = RawClient::connect(model.agent().session_store(store.clone()));
    first.initialize().await;
    let id = first.new_session("/tmp", json!([])).await;
    let set = first
        .request(
            "session/set_mode",
            json!({"sessionId": id, "modeId": "bypass_permissions"}),
        )
        .await;
    assert!(set.get("result").is_some(), "{set}");
    model.text("One.");
    first.prompt(&id, "First question").await;
    first.finish().await.unwrap();

    let second = RawClient::connect(model.agent().session_store(store));
    second.initialize().await;
    let loaded = second.request("session/load", load(&id)).await;
    assert_eq!(
        loaded["result"]["modes"]["currentModeId"], "default",
        "{loaded}"
    );
    // The user is told at the next turn.
    model.text("Two.");
    second.prompt(&id, "Second question").await;
    let said: String = updates(&second.log(), &id)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(said.contains("`bypass_permissions` mode"), "{said}");
    second.finish().await.unwrap();
}
