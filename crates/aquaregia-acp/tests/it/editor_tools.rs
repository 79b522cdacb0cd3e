//! The editor's files and terminal as built-in tools, with a client advertising `fs` and
//! `terminal`: an edit is shown as a diff, asked for, then written through
//! `fs/write_text_file`; `run_command` runs in a `terminal/create` terminal, shown as terminal
//! content, and `session/cancel` kills and releases it.

use crate::support;

use serde_json::{Value, json};

use support::model::Model;
use support::raw::{RawClient, ok};
use support::{eventually, tool_updates, updates};

const SOURCE: &str = "fn main() {\n    println!(\"old\");\n}\n";

fn position(log: &[Value], method: &str) -> usize {
    log.iter()
        .position(|m| m["method"] == method)
        .unwrap_or_else(|| panic!("no {method} in {log:#?}"))
}

/// The first `method` request of the agent, once it is in the log.
async fn logged(client: &RawClient, method: &str) -> Value {
    let find = || client.log().into_iter().find(|m| m["method"] == method);
    eventually(method, || find().is_some()).await;
    find().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn edits_and_commands_go_through_the_editor() {
    let model = Model::new();
    let client = RawClient::connect(model.agent().editor_tools(true));
    client.set_handler(|request| match request["method"].as_str()? {
        "fs/read_text_file" => Some(ok(request, json!({"content": SOURCE}))),
        "fs/write_text_file" | "terminal/kill" | "terminal/release" => Some(ok(request, json!({}))),
        "session/request_permission" => Some(ok(
            request,
            json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
        )),
        "terminal/create" => Some(ok(request, json!({"terminalId": "term-1"}))),
        // The command never ends by itself.
        _ => None,
    });
    let init = client
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {
                "fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true}}),
        )
        .await;
    assert!(init.get("result").is_some(), "{init}");
    let session = client.new_session("/work/project", json!([])).await;

    model
        .tool_call(
            "call-edit",
            "edit_file",
            json!({"path": "src/main.rs", "old_string": "\"old\"", "new_string": "\"new\""}),
        )
        .text("Edited.");
    let answer = client.prompt(&session, "change old to new").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let log = client.log();
    let asked = position(&log, "session/request_permission");
    let written = position(&log, "fs/write_text_file");
    assert!(asked < written, "written after permission");
    // The question itself carries the diff and where it lands.
    let question = &log[asked]["params"]["toolCall"];
    assert_eq!(
        question["content"],
        json!([{"type": "diff", "path": "/work/project/src/main.rs",
                "oldText": SOURCE, "newText": SOURCE.replace("\"old\"", "\"new\"")}]),
        "{question}"
    );
    assert_eq!(
        question["locations"],
        json!([{"path": "/work/project/src/main.rs"}])
    );
    let write = &log[written]["params"];
    assert_eq!(write["path"], "/work/project/src/main.rs");
    assert_eq!(write["content"], SOURCE.replace("\"old\"", "\"new\""));
    let edit: Vec<Value> = tool_updates(&updates(&log, &session))
        .into_iter()
        .filter(|u| u["toolCallId"] == "call-edit")
        .collect();
    let shown = &edit[0];
    assert_eq!(shown["kind"], "edit", "{shown}");
    assert_eq!(
        shown["content"],
        json!([{"type": "diff", "path": "/work/project/src/main.rs",
                "oldText": SOURCE, "newText": SOURCE.replace("\"old\"", "\"new\"")}]),
        "{shown}"
    );
    assert_eq!(
        shown["locations"],
        json!([{"path": "/work/project/src/main.rs"}])
    );
    let last = edit.last().unwrap();
    assert_eq!(last["status"], "completed", "{edit:#?}");
    assert!(last.get("content").is_none(), "the diff stays: {last}");

    // run_command: a terminal of the editor, killed and released on cancel.
    model.tool_call(
        "call-run",
        "run_command",
        json!({"command": "cargo", "args": ["test"]}),
    );
    let prompt = client.start_prompt(&session, "run the tests").await;
    // The handler answers it: found in the log, not among the unanswered requests.
    let created = logged(&client, "terminal/create").await;
    assert_eq!(created["params"]["command"], "cargo");
    assert_eq!(created["params"]["args"], json!(["test"]));
    assert_eq!(created["params"]["cwd"], "/work/project");
    eventually("the terminal shown in the tool call", || {
        tool_updates(&updates(&client.log(), &session))
            .iter()
            .any(|u| {
                u["toolCallId"] == "call-run"
                    && u["content"] == json!([{"type": "terminal", "terminalId": "term-1"}])
            })
    })
    .await;
    client.agent_request("terminal/wait_for_exit").await;
    client
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let answer = client.response(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let killed = logged(&client, "terminal/kill").await;
    assert_eq!(killed["params"]["terminalId"], "term-1");
    let released = logged(&client, "terminal/release").await;
    assert_eq!(released["params"]["terminalId"], "term-1");
    client.finish().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_outside_the_workspace_through_the_editor_ask_first() {
    let model = Model::new();
    let client = RawClient::connect(model.agent().editor_tools(true));
    client.set_handler(|request| match request["method"].as_str()? {
        "fs/read_text_file" => Some(ok(request, json!({"content": "root:x:0:0"}))),
        "session/request_permission" => Some(ok(
            request,
            json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
        )),
        _ => None,
    });
    let init = client
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {
                "fs": {"readTextFile": true, "writeTextFile": true}}}),
        )
        .await;
    assert!(init.get("result").is_some(), "{init}");
    let session = client.new_session("/work/project", json!([])).await;
    model
        .tool_call("call-1", "read_file", json!({"path": "/etc/passwd"}))
        .tool_call(
            "call-2",
            "read_file",
            json!({"path": "../../root/.ssh/id_ed25519"}),
        )
        .tool_call("call-3", "read_file", json!({"path": "src/main.rs"}))
        .text("Done.");
    let answer = client.prompt(&session, "look around").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let log = client.log();
    let asked: Vec<&Value> = log
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .collect();
    let titles: Vec<&str> = asked
        .iter()
        .map(|m| m["params"]["toolCall"]["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        [
            "read_file: /etc/passwd (outside the workspace)",
            "read_file: /root/.ssh/id_ed25519 (outside the workspace)"
        ]
    );
    // Only the read inside the workspace reached the editor, without asking.
    let reads: Vec<&Value> = log
        .iter()
        .filter(|m| m["method"] == "fs/read_text_file")
        .map(|m| &m["params"]["path"])
        .collect();
    assert_eq!(reads, ["/work/project/src/main.rs"]);
    client.finish().await.unwrap();
}
