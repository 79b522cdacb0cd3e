//! The end of input (the client closes its write side) makes `serve` return and leaves no
//! child process behind, idle or in the middle of a tool call.

use crate::support;

use serde_json::json;

use aquaregia_test_support::acp_client::select_permission;
use aquaregia_test_support::processes::{assert_no_process_left, marker, processes_with_marker};
use support::model::Model;
use support::raw::RawClient;
use support::scripts::{marked_toolbox, toolbox_entry};
use support::{BOUND, tool_updates, updates};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn end_of_input_ends_serve_and_every_server() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    client.initialize().await;
    let marker = marker("eof-idle");
    let env = [("AQUAREGIA_TEST_MARKER", marker.as_str())];
    client
        .new_session(
            "/tmp",
            json!([
                toolbox_entry("one", &[], &env),
                toolbox_entry("two", &[], &env)
            ]),
        )
        .await;
    client
        .new_session("/tmp", json!([toolbox_entry("three", &[], &env)]))
        .await;
    assert_eq!(processes_with_marker(&marker).len(), 3);

    client
        .finish()
        .await
        .expect("serve returns Ok at the end of input");
    assert_no_process_left(&marker, BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn end_of_input_during_a_tool_call_ends_serve_and_the_server() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    client.set_handler(|request| select_permission(request, "allow_once"));
    client.initialize().await;
    let marker = marker("eof-busy");
    let session = client
        .new_session("/tmp", json!([marked_toolbox("box", &marker)]))
        .await;
    model.tool_call("call-1", "box__sleep_forever", json!({}));
    client.start_prompt(&session, "sleep").await;
    support::eventually("the call to start", || {
        tool_updates(&updates(&client.log(), &session))
            .iter()
            .any(|u| u["status"] == "in_progress")
    })
    .await;

    client
        .finish()
        .await
        .expect("serve returns at the end of input");
    assert_no_process_left(&marker, BOUND).await;
}
