//! Slash commands: an MCP server's prompt runs as `/<server>:<prompt>` (its messages go to
//! the model), announced with the built-ins in `available_commands_update`; `/clear` forgets
//! the conversation without calling the model.

use crate::support;

use serde_json::json;

use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::model::{Model, transcript, user_texts};
use support::raw::RawClient;
use support::{BOUND, eventually, updates};

/// A 2025-11-25 stdio MCP server with one prompt, `summarize(topic)`, and no tools.
const PROMPT_SERVER: &str = r#"
import json, sys
def send(message):
    print(json.dumps(message), flush=True)
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"prompts": {}, "tools": {}},
            "serverInfo": {"name": "notes", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": []}})
    elif method == "prompts/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"prompts": [
            {"name": "summarize", "description": "Summarize the notes on a topic",
             "arguments": [{"name": "topic", "required": True}]}]}})
    elif method == "prompts/get":
        topic = msg["params"].get("arguments", {}).get("topic", "?")
        send({"jsonrpc": "2.0", "id": mid, "result": {"messages": [
            {"role": "user", "content": {"type": "text",
             "text": "Summarize the notes about " + topic + "."}}]}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_mcp_prompt_runs_as_a_slash_command() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    client.initialize().await;
    let marker = marker("slash-commands");
    let server = json!({"name": "notes", "command": "python3", "args": ["-c", PROMPT_SERVER],
        "env": [{"name": "AQUAREGIA_TEST_MARKER", "value": marker}]});
    let session = client.new_session("/tmp", json!([server])).await;

    let find = || {
        updates(&client.log(), &session)
            .into_iter()
            .find(|u| u["sessionUpdate"] == "available_commands_update")
    };
    eventually("the available commands", || find().is_some()).await;
    let commands = find().unwrap();
    let names: Vec<&str> = commands["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"clear") && names.contains(&"tools"),
        "{names:?}"
    );
    let summarize = commands["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "notes:summarize")
        .unwrap_or_else(|| panic!("the MCP prompt is a command: {commands}"));
    assert_eq!(summarize["description"], "Summarize the notes on a topic");
    assert_eq!(summarize["input"]["hint"], "topic");

    model.text("The week was calm.");
    let answer = client.prompt(&session, "/notes:summarize the week").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let sent = user_texts(&model.requests()[0]);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        sent[0].contains("Summarize the notes about the week."),
        "the prompt's messages reach the model: {sent:?}"
    );
    assert!(!sent[0].contains("/notes:summarize"), "{sent:?}");

    // `/clear` answers without the model; the next turn starts afresh.
    let cleared = client.prompt(&session, "/clear").await;
    assert_eq!(cleared["result"]["stopReason"], "end_turn", "{cleared}");
    assert_eq!(model.request_count(), 1, "the model was not called");
    model.text("Hello.");
    client.prompt(&session, "hi").await;
    let request = &model.requests()[1];
    assert_eq!(user_texts(request).len(), 1, "{request:?}");
    assert!(!transcript(request).contains("calm"), "{request:?}");
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}

/// `/tools` lists every tool the model is offered: the built-ins beside the MCP servers'.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tools_lists_the_built_ins_and_the_mcp_tools() {
    let model = Model::new();
    let client = RawClient::connect(model.agent().editor_tools(true).trust_server("box"));
    client.initialize().await;
    let marker = marker("slash-tools");
    let session = client
        .new_session(
            "/tmp",
            json!([support::scripts::marked_toolbox("box", &marker)]),
        )
        .await;
    let answer = client.prompt(&session, "/tools").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let said: String = updates(&client.log(), &session)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    for built_in in [
        "read_file",
        "write_file",
        "edit_file",
        "run_command",
        "update_plan",
    ] {
        assert!(
            said.contains(&format!("- `{built_in}` (built-in)")),
            "{built_in}: {said}"
        );
    }
    assert!(said.contains("- `box__echo` (MCP server `box`)"), "{said}");
    assert!(!said.contains("no MCP tools"), "{said}");
    assert_eq!(model.request_count(), 0, "answered without the model");
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}
