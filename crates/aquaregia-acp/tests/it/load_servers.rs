//! `session/load` connects the `mcpServers` the client sends with it, as the spec has it:
//! those are authoritative. A server the stored session had but the client no longer sends is
//! not brought back; a new one is used.

use crate::support;

use std::sync::Arc;

use serde_json::{Value, json};

use aquaregia::FileSessionStore;
use aquaregia::ModelRequest;
use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::BOUND;
use support::model::{Model, tool_names};
use support::raw::RawClient;
use support::scripts::marked_toolbox;

fn load(id: &str, servers: &Value) -> Value {
    json!({"sessionId": id, "cwd": "/tmp", "mcpServers": servers})
}

fn servers_offered(request: &ModelRequest) -> Vec<String> {
    let mut servers: Vec<String> = tool_names(request)
        .iter()
        .filter_map(|name| name.split_once("__").map(|(server, _)| server.to_owned()))
        .collect();
    servers.dedup();
    servers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_servers_sent_with_load_are_the_sessions_servers() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let model = Model::new();
    let marker = marker("load-servers");
    let agent = || model.agent().session_store(store.clone());

    let first = RawClient::connect(agent());
    first.initialize().await;
    let id = first
        .new_session("/tmp", json!([marked_toolbox("alpha", &marker)]))
        .await;
    model.text("One.");
    first.prompt(&id, "hi").await;
    first.finish().await.unwrap();
    assert_eq!(servers_offered(&model.requests()[0]), ["alpha"]);

    // Loaded without servers: `alpha` is not brought back.
    let second = RawClient::connect(agent());
    second.initialize().await;
    let loaded = second.request("session/load", load(&id, &json!([]))).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    model.text("Two.");
    second.prompt(&id, "again").await;
    second.finish().await.unwrap();
    assert_eq!(servers_offered(&model.requests()[1]), Vec::<String>::new());

    // Loaded with another server: that one, and only it.
    let third = RawClient::connect(agent());
    third.initialize().await;
    let loaded = third
        .request(
            "session/load",
            load(&id, &json!([marked_toolbox("beta", &marker)])),
        )
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    model.text("Three.");
    third.prompt(&id, "and again").await;
    third.finish().await.unwrap();
    assert_eq!(servers_offered(&model.requests()[2]), ["beta"]);

    assert_no_process_left(&marker, BOUND).await;
}
