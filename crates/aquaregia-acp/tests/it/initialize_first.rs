//! `initialize` comes first: a session request before it is refused (and nothing is started),
//! and the same request works once the client has initialized.

use crate::support;

use serde_json::json;

use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::BOUND;
use support::model::Model;
use support::raw::RawClient;
use support::scripts::marked_toolbox;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_new_before_initialize_is_refused() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    let marker = marker("before-initialize");
    let params = json!({"cwd": "/tmp", "mcpServers": [marked_toolbox("box", &marker)]});
    let early = client.request("session/new", params.clone()).await;
    assert_eq!(early["error"]["code"], -32600, "{early}");
    assert!(
        early["error"]["data"]["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("initialize")),
        "{early}"
    );
    assert_no_process_left(&marker, BOUND).await;

    client.initialize().await;
    let session = client.request("session/new", params).await;
    assert!(session["result"]["sessionId"].is_string(), "{session}");
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}
