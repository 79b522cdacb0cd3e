//! `AcpServer::disable_tools` patterns hide tools from stdio and ACP-served servers alike.

use crate::support;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::BOUND;
use support::model::{Model, tool_names, tool_outputs};
use support::raw::{RawClient, stateless_server};
use support::scripts::marked_toolbox;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn disabled_patterns_hide_tools_of_every_transport() {
    let model = Model::new();
    let client = RawClient::connect(model.agent().trust_server("ed").disable_tools([
        "box__*write*",
        "ed__*write*",
        "ed__peek",
    ]));
    let acp_tools = json!([
        {"name": "write_file", "inputSchema": {"type": "object"}},
        {"name": "peek", "inputSchema": {"type": "object"}},
        {"name": "read_file", "inputSchema": {"type": "object"},
         "annotations": {"readOnlyHint": true}},
    ]);
    let calls: Arc<Mutex<Vec<Value>>> = Arc::default();
    client.set_handler({
        let calls = calls.clone();
        move |request| {
            if request["params"]["method"] == "tools/call" {
                calls
                    .lock()
                    .unwrap()
                    .push(request["params"]["params"].clone());
            }
            stateless_server(request, &acp_tools)
        }
    });
    client.initialize().await;
    let marker = marker("disabled");
    let session = client
        .new_session(
            "/tmp",
            json!([
                marked_toolbox("box", &marker),
                {"type": "acp", "name": "ed", "serverId": "editor-1"},
            ]),
        )
        .await;

    // The model tries a hidden tool anyway, then a visible one.
    model
        .tool_call("call-1", "ed__write_file", json!({}))
        .tool_call("call-2", "ed__read_file", json!({}))
        .text("Done.");
    let answer = client.prompt(&session, "go").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let requests = model.requests();
    let mut names = tool_names(&requests[0]);
    names.sort();
    assert_eq!(
        names,
        [
            "box__echo",
            "box__read_note",
            "box__sleep_forever",
            "box__whereami",
            "ed__read_file"
        ]
    );
    let told = tool_outputs(&requests[1]);
    assert!(
        told[0].contains("ed__write_file"),
        "a hidden tool is unknown to the agent: {told:?}"
    );
    let calls = calls.lock().unwrap().clone();
    assert_eq!(
        calls.len(),
        1,
        "only the visible tool reached the server: {calls:?}"
    );
    assert_eq!(calls[0]["name"], "read_file");
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}
