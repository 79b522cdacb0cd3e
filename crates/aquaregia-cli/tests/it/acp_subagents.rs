//! The built-in `task` subagent under the official TypeScript SDK client (which validates
//! every message against the ACP schema), against the binary on the loopback mock model:
//! a client that advertises `subagents` sees the child session announced on the parent and
//! linked to the parent's tool call, the child's tool calls, messages and permission
//! questions on the child session, and cancels one child alone while the parent's turn goes
//! on with the tool error.

use crate::common;

use serde_json::{Value, json};

use aquaregia_test_support::deps::node_script;
use aquaregia_test_support::mock_model::{MockServer, Reply, tool_results};
use aquaregia_test_support::processes::{KillMarked, marker};
use common::node_report;

/// Prompts twice: the first delegates a write (answering its permission question), the
/// second delegates work the client cancels (`session/cancel` of the child session) as soon
/// as the child's first message arrives. Reports every update and question.
const CLIENT: &str = r#"
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/unstable";

setTimeout(() => { console.error("subagents client: overall timeout"); process.exit(2); }, 90000).unref();
const [cwd, agentPath, ...agentArgs] = process.argv.slice(2);
const report = { updates: [], permissions: [], results: [], cancelled: [] };
const child = spawn(agentPath, agentArgs, { stdio: ["pipe", "pipe", "inherit"], env: process.env });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
let parent;
let cancelChild = false;
let agent;
const app = acp.client()
  .onNotification(acp.methods.client.session.update, async ({ params }) => {
    report.updates.push(params);
    if (cancelChild && params.sessionId !== parent && params.update.sessionUpdate === "agent_message_chunk") {
      cancelChild = false;
      report.cancelled.push(params.sessionId);
      await agent.notify("session/cancel", { sessionId: params.sessionId });
    }
  })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    report.permissions.push(params);
    return { outcome: { outcome: "selected", optionId: "allow_once" } };
  });
const connection = app.connect(stream);
agent = connection.agent;
await agent.request("initialize", {
  protocolVersion: acp.PROTOCOL_VERSION,
  clientCapabilities: { subagents: {} },
  clientInfo: { name: "ts-subagents", version: "1" },
});
parent = (await agent.request("session/new", { cwd, mcpServers: [] })).sessionId;
report.parent = parent;
report.results.push(await agent.request("session/prompt", { sessionId: parent, prompt: [{ type: "text", text: "delegate the notes" }] }));
cancelChild = true;
report.results.push(await agent.request("session/prompt", { sessionId: parent, prompt: [{ type: "text", text: "delegate and stop it" }] }));
connection.close();
child.stdin.end();
report.exit = await exited;
console.log(JSON.stringify(report));
"#;

fn first_chunk(text: &str) -> String {
    format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    )
}

/// The updates of session `id`, as `(sessionUpdate, update)`.
fn updates_of<'a>(report: &'a Value, id: &str) -> Vec<(&'a str, &'a Value)> {
    report["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionId"] == id)
        .map(|u| (u["update"]["sessionUpdate"].as_str().unwrap(), &u["update"]))
        .collect()
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subagent_is_a_child_session_of_the_typescript_sdk_client_asked_and_cancelled_alone() {
    let root = tempfile::tempdir().unwrap();
    let root_path = std::fs::canonicalize(root.path()).unwrap();
    let project = root_path.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let notes = project.join("notes.txt");
    let mark = marker("acp-subagents");
    let _kill = KillMarked(mark.clone());
    let mock = MockServer::start().await;
    mock.push(Reply::tool_call(
        "call-task",
        "task",
        json!({"task": "write the notes"}),
    ))
    .push(Reply::tool_call(
        "call-write",
        "write_file",
        json!({"path": notes, "content": "from the subagent"}),
    ))
    .push(Reply::text("notes written"))
    .push(Reply::text("the subagent wrote the notes"))
    .push(Reply::tool_call(
        "call-task-2",
        "task",
        json!({"task": "take forever"}),
    ))
    .push(Reply::SseThenHang {
        body: first_chunk("working on it"),
    })
    .push(Reply::text("stopped the subagent"));

    let script = node_script(CLIENT);
    let (report, stderr) = node_report(
        tokio::process::Command::new("node")
            .arg(&script)
            .arg(&project)
            .arg(env!("CARGO_BIN_EXE_aquaregia"))
            .args(["acp", "--model", "openai-chat:mock-model"])
            .current_dir(&project)
            .env("AQUAREGIA_DATA_DIR", root_path.join("data"))
            .env("XDG_CONFIG_HOME", root_path.join("xdg"))
            .env("AQUAREGIA_TEST_MARKER", &mark)
            .env_remove("AQUAREGIA_MODEL")
            .env_remove("RUST_LOG")
            .env("OPENAI_BASE_URL", &mock.url)
            .env("OPENAI_API_KEY", "test"),
        "the client finished",
    )
    .await;
    assert_eq!(report["exit"]["code"], 0, "{stderr}");
    assert_eq!(report["results"][0]["stopReason"], "end_turn", "{report:#}");
    assert_eq!(report["results"][1]["stopReason"], "end_turn", "{report:#}");
    let parent = report["parent"].as_str().unwrap();
    let on_parent = updates_of(&report, parent);

    // The first child: announced on the parent, linked to the `task` call, running.
    let announced: Vec<&Value> = on_parent
        .iter()
        .filter(|(kind, u)| *kind == "subagent_update" && u.get("title").is_some())
        .map(|(_, u)| *u)
        .collect();
    assert_eq!(announced.len(), 2, "{report:#}");
    let first = announced[0]["sessionId"].as_str().unwrap();
    assert_ne!(first, parent);
    assert_eq!(announced[0]["_meta"]["toolCallId"], "call-task");
    assert_eq!(announced[0]["state"]["state"], "running");
    assert!(announced[0]["capabilities"]["cancel"].is_object());
    assert!(
        announced[0]["title"]
            .as_str()
            .unwrap()
            .contains("write the notes")
    );
    assert!(
        on_parent.iter().any(|(kind, u)| *kind == "tool_call_update"
            && u["toolCallId"] == "call-task"
            && u["_meta"]["subagentSessionId"] == first),
        "the parent's call names its child: {report:#}"
    );
    // Announced before anything of the child's.
    let updates = report["updates"].as_array().unwrap();
    let announce_at = updates
        .iter()
        .position(|u| u["update"]["sessionId"] == first)
        .unwrap();
    let first_child_update = updates
        .iter()
        .position(|u| u["sessionId"] == first)
        .unwrap();
    assert!(announce_at < first_child_update);

    // The child's work is on the child session, not the parent's.
    let on_first = updates_of(&report, first);
    assert!(
        on_first
            .iter()
            .any(|(kind, u)| *kind == "tool_call" && u["toolCallId"] == "call-write"),
        "{on_first:#?}"
    );
    assert!(on_first.iter().any(|(kind, u)| *kind == "tool_call_update"
        && u["toolCallId"] == "call-write"
        && u["status"] == "completed"));
    let said: String = on_first
        .iter()
        .filter(|(kind, _)| *kind == "agent_message_chunk")
        .map(|(_, u)| u["content"]["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(said, "notes written");
    assert!(
        !on_parent
            .iter()
            .any(|(_, u)| u["toolCallId"] == "call-write"),
        "the child's call is not the parent's"
    );
    // Its permission question reached the client, on the child session.
    let permissions = report["permissions"].as_array().unwrap();
    assert_eq!(permissions.len(), 1, "{permissions:#?}");
    assert_eq!(permissions[0]["sessionId"], first);
    assert_eq!(permissions[0]["toolCall"]["toolCallId"], "call-write");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "from the subagent"
    );
    // It ended, the parent's call completed with its answer.
    assert!(on_parent.iter().any(|(kind, u)| *kind == "subagent_update"
        && u["sessionId"] == first
        && u["state"]["state"] == "idle"
        && u["state"]["stopReason"] == "end_turn"));
    assert!(on_parent.iter().any(|(kind, u)| *kind == "tool_call_update"
        && u["toolCallId"] == "call-task"
        && u["status"] == "completed"));
    let bodies = mock.bodies();
    assert_eq!(
        tool_results(&bodies[3]),
        [("call-task".to_owned(), "notes written".to_owned())]
    );

    // The second child, cancelled alone: the parent's call failed, its turn went on.
    let second = announced[1]["sessionId"].as_str().unwrap();
    assert_ne!(second, first);
    assert_eq!(report["cancelled"], json!([second]));
    assert!(on_parent.iter().any(|(kind, u)| *kind == "subagent_update"
        && u["sessionId"] == second
        && u["state"]["state"] == "idle"
        && u["state"]["stopReason"] == "cancelled"));
    assert!(on_parent.iter().any(|(kind, u)| *kind == "tool_call_update"
        && u["toolCallId"] == "call-task-2"
        && u["status"] == "failed"));
    assert_eq!(
        bodies.len(),
        7,
        "the parent's model was called after the cancel"
    );
    let told = tool_results(&bodies[6]);
    assert_eq!(told[told.len() - 1].0, "call-task-2");
    assert!(told[told.len() - 1].1.contains("cancelled"), "{told:?}");
    let parent_said: String = on_parent
        .iter()
        .filter(|(kind, _)| *kind == "agent_message_chunk")
        .map(|(_, u)| u["content"]["text"].as_str().unwrap_or_default())
        .collect();
    assert!(
        parent_said.ends_with("stopped the subagent"),
        "{parent_said}"
    );
}
