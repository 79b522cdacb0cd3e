//! What ACP clients nobody here wrote need from the wire, seen through the official
//! TypeScript SDK client (which validates every message against the ACP schema) driving the
//! built `aquaregia acp`: every finished tool call's `rawOutput` is a JSON object shaped like
//! MCP's `CallToolResult` (Toad rejects anything else), for MCP tools, built-ins and failures.

use crate::acp_typescript_sdk::Drive;
use crate::common;

use serde_json::{Value, json};

use aquaregia_test_support::mock_model::Reply;
use common::test_server_script;

/// The last update that carried `rawOutput` for call `id`.
fn raw_output<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["updates"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|u| &u["update"])
        .find(|u| u["toolCallId"] == id && u.get("rawOutput").is_some())
        .map(|u| &u["rawOutput"])
        .unwrap_or_else(|| panic!("no rawOutput for {id}: {report:#}"))
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_finished_tool_call_has_an_object_raw_output() {
    let drive = Drive::new("ts-raw-output").await;
    std::fs::write(drive.project().join("notes.txt"), "a line of notes\n").unwrap();
    drive
        .mock
        .push(Reply::tool_call(
            "call-1",
            "read_file",
            json!({"path": "notes.txt"}),
        ))
        .push(Reply::tool_call(
            "call-2",
            "cli__greet",
            json!({"name": "Ada"}),
        ))
        .push(Reply::tool_call("call-3", "cli__fail", json!({})))
        .push(Reply::tool_call("call-4", "cli__media", json!({})))
        .push(Reply::tool_call("call-5", "cli__hang", json!({})))
        .push(Reply::text("Done."));
    let server = json!({"name": "cli", "command": "python3", "args": [test_server_script()],
        "env": [{"name": "AQUAREGIA_TEST_MARKER", "value": drive.marker}]});
    let plan = json!({
        // greet, fail and media are asked about and allowed; hang is refused.
        "answers": ["allow_once", "allow_once", "allow_once", "reject_once"],
        "steps": [
            {"op": "new", "cwd": drive.project(), "mcpServers": [server]},
            {"op": "prompt", "session": 0, "text": "Use every tool"},
        ],
    });
    let report = drive.run(&plan, &[]).await;
    assert_eq!(
        report["results"][1]["result"]["stopReason"], "end_turn",
        "{report:#}"
    );

    for id in ["call-1", "call-2", "call-3", "call-4", "call-5"] {
        let raw = raw_output(&report, id);
        assert!(raw.is_object(), "{id}: {raw}");
        assert!(raw["content"].is_array(), "{id}: {raw}");
        assert!(raw["isError"].is_boolean(), "{id}: {raw}");
    }
    assert!(
        raw_output(&report, "call-1")["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("a line of notes"),
        "{report:#}"
    );
    assert_eq!(
        *raw_output(&report, "call-2"),
        json!({"content": [{"type": "text", "text": "Hello, Ada."}], "isError": false})
    );
    let failed = raw_output(&report, "call-3");
    assert_eq!(failed["isError"], true, "{failed}");
    assert!(
        failed["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("the disk is on fire"),
        "{failed}"
    );
    // Blocks as MCP writes them: an embedded resource's contents under `resource`.
    let media = raw_output(&report, "call-4");
    let kinds: Vec<&str> = media["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["type"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["text", "image", "resource", "resource_link"],
        "{media}"
    );
    assert_eq!(
        media["content"][2]["resource"],
        json!({"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "hi"})
    );
    let refused = raw_output(&report, "call-5");
    assert_eq!(refused["isError"], true, "{refused}");
}
