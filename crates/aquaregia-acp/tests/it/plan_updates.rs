//! The built-in `update_plan` tool streams the model's plan as a `plan` update; a malformed
//! plan is an error the model sees.

use crate::support;

use serde_json::{Value, json};

use support::model::{Model, last_tool_output};
use support::raw::RawClient;
use support::updates;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn update_plan_streams_a_plan() {
    let model = Model::new();
    let client = RawClient::connect(model.agent().editor_tools(true));
    client.initialize().await;
    let session = client.new_session("/tmp", json!([])).await;
    let entries = json!([
        {"content": "Read the failing test", "status": "completed", "priority": "high"},
        {"content": "Fix the parser", "status": "in_progress", "priority": "high"},
        {"content": "Update the changelog", "status": "pending", "priority": "low"}
    ]);
    model
        .tool_call("call-1", "update_plan", json!({"entries": entries}))
        .tool_call(
            "call-2",
            "update_plan",
            json!({"entries": [{"content": "x", "status": "someday", "priority": "high"}]}),
        )
        .text("Working on it.");
    let answer = client.prompt(&session, "fix the parser").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let plans: Vec<Value> = updates(&client.log(), &session)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "plan")
        .collect();
    assert_eq!(plans.len(), 1, "{plans:#?}");
    assert_eq!(plans[0]["entries"], entries);
    let requests = model.requests();
    let told = last_tool_output(&requests[2]);
    assert!(
        told.contains("/entries/0/status: value must be one of"),
        "{told}"
    );
    client.finish().await.unwrap();
}
