//! The `plan` mode offers the model only read-only tools; set through the `mode` config
//! option (or `session/set_mode`), it is reported with `current_mode_update`.

use crate::support;

use serde_json::json;

use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::model::{Model, tool_names, transcript};
use support::raw::RawClient;
use support::scripts::marked_toolbox;
use support::{BOUND, updates};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn plan_mode_offers_only_read_only_tools() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    client.initialize().await;
    let marker = marker("plan-mode");
    let session = client
        .new_session("/tmp", json!([marked_toolbox("box", &marker)]))
        .await;

    model.text("All tools.");
    client.prompt(&session, "look").await;
    let mut all = tool_names(&model.requests()[0]);
    all.sort();
    assert_eq!(
        all,
        [
            "box__echo",
            "box__read_note",
            "box__sleep_forever",
            "box__whereami",
            "box__write_note"
        ]
    );

    let set = client
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "mode", "value": "plan"}),
        )
        .await;
    let options = set["result"]["configOptions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mode = options
        .iter()
        .find(|o| o["id"] == "mode")
        .expect("a mode option");
    assert_eq!(mode["currentValue"], "plan", "{set}");
    assert!(
        updates(&client.log(), &session)
            .iter()
            .any(|u| u["sessionUpdate"] == "current_mode_update" && u["currentModeId"] == "plan")
    );

    // A call to a tool the model was not offered is refused, and the tool never runs.
    model
        .tool_call("call-1", "box__write_note", json!({"text": "x"}))
        .text("Planned.");
    let answer = client.prompt(&session, "plan it").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let mut read_only = tool_names(&model.requests()[1]);
    read_only.sort();
    assert_eq!(read_only, ["box__read_note", "box__whereami"]);
    let told = transcript(&model.requests()[2]);
    assert!(!told.contains("written"), "write_note did not run: {told}");
    // Refused by the mode, not in the user's name.
    assert!(
        told.contains("plan mode") && !told.contains("the user rejected"),
        "{told}"
    );
    assert!(
        client
            .log()
            .iter()
            .all(|m| m["method"] != "session/request_permission"),
        "nothing to ask in plan mode"
    );

    // Back to default through the older session/set_mode: every tool again.
    let back = client
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "default"}),
        )
        .await;
    assert_eq!(back["result"], json!({}), "{back}");
    model.text("Back.");
    client.prompt(&session, "again").await;
    assert_eq!(tool_names(&model.requests()[3]).len(), 5);
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}
