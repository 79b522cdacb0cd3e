//! Smoke test of the real binary with the official TypeScript SDK (`@agentclientprotocol/sdk`,
//! installed by `scripts/test-deps.sh`): a Node client spawns `aquaregia acp` over stdio,
//! serves an MCP server through `McpOverAcpProvider.registerServer`, and prompts; the mock
//! model calls the ACP-served tool.

use crate::common;

use std::process::Stdio;

use serde_json::{Value, json};

use aquaregia_test_support::deps::node_script;
use aquaregia_test_support::mock_model::{
    MockServer, Reply, content_text, tool_messages, tool_names,
};
use aquaregia_test_support::processes::{KillMarked, assert_no_process_left, marker};
use common::BOUND;

/// The Node client. ES-module `import` ignores NODE_PATH, so it is written next to the
/// installed `node_modules`.
const CLIENT: &str = r#"
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/unstable";

setTimeout(() => { console.error("smoke client: overall timeout"); process.exit(2); }, 60000).unref();

// The agent's command line: `node client.mjs <agent> [args...]`.
const [agentPath, ...agentArgs] = process.argv.slice(2);
const child = spawn(agentPath, agentArgs, { stdio: ["pipe", "pipe", "inherit"], env: process.env });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const calls = [];
const methods = [];
const permissions = [];
let subscribed = false;
const provider = new acp.McpOverAcpProvider();
const app = acp.client()
  .onRequest(acp.methods.client.mcp.message, provider.handleRequest)
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    permissions.push(params);
    return { outcome: { outcome: "selected", optionId: "allow_once" } };
  });
const connection = app.connect(stream);
const agent = connection.agent;

const init = await agent.request("initialize", {
  protocolVersion: acp.PROTOCOL_VERSION,
  clientCapabilities: {},
  clientInfo: { name: "ts-smoke", version: "1" },
});

const notes = provider.registerServer(agent, {
  name: "notes",
  handler: async (op) => {
    methods.push(op.method);
    switch (op.method) {
      case "server/discover":
        return { result: {
          resultType: "complete", supportedVersions: ["2026-07-28"],
          capabilities: { tools: { listChanged: true } }, ttlMs: 0, cacheScope: "private",
        } };
      case "tools/list":
        return { result: { resultType: "complete", tools: [{
          name: "lookup", description: "Looks a note up",
          inputSchema: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
        }] } };
      case "tools/call":
        calls.push({ requestId: op.requestId, params: op.params });
        return { result: { resultType: "complete", content: [
          { type: "text", text: `note about ${op.params.arguments.topic}: served by TypeScript` },
        ] } };
      case "subscriptions/listen":
        await op.notify("notifications/subscriptions/acknowledged", {
          notifications: op.params.notifications,
          _meta: { "io.modelcontextprotocol/subscriptionId": op.requestId },
        });
        subscribed = true;
        await new Promise((resolve) => op.signal.addEventListener("abort", resolve, { once: true }));
        throw op.signal.reason ?? new Error("cancelled");
      default:
        throw new acp.McpProtocolError(-32601, "Method not found");
    }
  },
});

const session = await agent
  .buildSession({ cwd: process.cwd(), mcpServers: [] })
  .withMcpServer(notes.declaration)
  .start();
const done = session.prompt("What do my notes say about rust?");
const updates = [];
let stopReason;
for (;;) {
  const message = await session.nextUpdate();
  if (message.kind === "stop") { stopReason = message.stopReason; break; }
  updates.push(message.update);
}
await done;
session.dispose();

connection.close();
child.stdin.end();
const exit = await exited;
console.log(JSON.stringify({ init, stopReason, updates, calls, methods, permissions, subscribed, exit }));
"#;

/// The `--system` instructions given to the agent.
const SYSTEM: &str = "Answer from the user's notes.";

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_typescript_sdk_serves_a_tool_to_the_binary() {
    let script = node_script(CLIENT);

    let mock = MockServer::start().await;
    mock.push(Reply::tool_call(
        "call-1",
        "notes__lookup",
        json!({"topic": "rust"}),
    ))
    .push(Reply::text("Your notes say Rust is served by TypeScript."));

    let marker = marker("typescript");
    let _kill = KillMarked(marker.clone());
    let output = tokio::process::Command::new("node")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_aquaregia"))
        .args([
            "acp",
            "--model",
            "openai-chat:mock-model",
            "--max-steps",
            "4",
        ])
        .args(["--system", SYSTEM])
        .current_dir(std::env::temp_dir())
        .env_remove("AQUAREGIA_MODEL")
        .env_remove("RUST_LOG")
        .env("OPENAI_BASE_URL", &mock.url)
        .env("OPENAI_API_KEY", "test")
        .env("AQUAREGIA_TEST_MARKER", &marker)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(BOUND * 2, output)
        .await
        .expect("the smoke client finished")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "node failed: {}\nstdout: {stdout}\nstderr: {stderr}",
        output.status
    );
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: stdout: {stdout}\nstderr: {stderr}"));

    assert_eq!(report["init"]["agentInfo"]["name"], "aquaregia");
    assert_eq!(
        report["init"]["agentCapabilities"]["mcpCapabilities"]["acp"],
        true
    );
    assert_eq!(report["stopReason"], "end_turn", "{report:#}");
    // The tool ran in the TypeScript client, through the stateless binding.
    assert_eq!(
        report["calls"].as_array().unwrap().len(),
        1,
        "{report:#}\nstderr: {stderr}"
    );
    assert_eq!(
        report["calls"][0]["params"]["arguments"],
        json!({"topic": "rust"})
    );
    assert!(report["calls"][0]["requestId"].is_string());
    let methods: Vec<&str> = report["methods"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(!methods.contains(&"initialize"), "{methods:?}");
    assert!(methods.contains(&"tools/list"), "{methods:?}");
    assert_eq!(report["subscribed"], true, "list changes are subscribed to");
    assert_eq!(report["permissions"].as_array().unwrap().len(), 1);
    let statuses: Vec<&str> = report["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["toolCallId"] == "call-1")
        // A `tool_call` without status is `pending`, the protocol's default.
        .filter_map(|u| match u["status"].as_str() {
            None if u["sessionUpdate"] == "tool_call" => Some("pending"),
            status => status,
        })
        .collect();
    assert_eq!(statuses, ["pending", "in_progress", "completed"]);
    let text: String = report["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "Your notes say Rust is served by TypeScript.");
    assert_eq!(
        report["exit"]["code"], 0,
        "the agent exits cleanly at the end of input"
    );

    // The model got the options, saw the ACP-served tool, and got its result.
    let requests = mock.bodies();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["model"], "mock-model");
    let system = &requests[0]["messages"][0];
    assert_eq!(system["role"], "system", "{system}");
    assert_eq!(content_text(system), SYSTEM);
    assert_eq!(mcp_tool_names(&requests[0]), ["notes__lookup"]);
    assert!(
        content_text(&tool_messages(&requests[1])[0]).contains("served by TypeScript"),
        "{:?}",
        tool_messages(&requests[1])
    );
    assert_no_process_left(&marker, BOUND).await;
}

/// The MCP tools (`<server>__<tool>`) a request offers, without the agent's built-in editor
/// tools.
fn mcp_tool_names(body: &Value) -> Vec<String> {
    tool_names(body)
        .into_iter()
        .filter(|name| name.contains("__"))
        .collect()
}

/// A Node client on the TypeScript SDK that rejects every permission request and reports
/// them: for the workspace boundary and what a permission request shows.
const REJECTING_CLIENT: &str = r#"
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/unstable";

setTimeout(() => { console.error("boundary client: overall timeout"); process.exit(2); }, 60000).unref();

const [agentPath, ...agentArgs] = process.argv.slice(2);
const child = spawn(agentPath, agentArgs, { stdio: ["pipe", "pipe", "inherit"], env: process.env });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const permissions = [];
const app = acp.client()
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    permissions.push(params);
    return { outcome: { outcome: "selected", optionId: "reject_once" } };
  });
const connection = app.connect(stream);
const agent = connection.agent;
await agent.request("initialize", {
  protocolVersion: acp.PROTOCOL_VERSION,
  clientCapabilities: {},
  clientInfo: { name: "ts-boundary", version: "1" },
});
const session = await agent.buildSession({ cwd: process.cwd(), mcpServers: [] }).start();
const done = session.prompt("Read the link, then run the command.");
let stopReason;
for (;;) {
  const message = await session.nextUpdate();
  if (message.kind === "stop") { stopReason = message.stopReason; break; }
}
await done;
session.dispose();
connection.close();
child.stdin.end();
const exit = await exited;
console.log(JSON.stringify({ stopReason, permissions, exit }));
"#;

#[cfg(unix)]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_typescript_sdk_is_asked_outside_the_workspace_and_sees_every_command_line() {
    let script = node_script(REJECTING_CLIENT);
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::create_dir_all(dir.join("project")).unwrap();
    std::fs::write(dir.join("secret.txt"), "outside secret").unwrap();
    std::os::unix::fs::symlink(dir.join("secret.txt"), dir.join("project/link")).unwrap();
    let dir = std::fs::canonicalize(dir).unwrap();
    let pwned = dir.join("pwned_hidden_line");

    let mock = MockServer::start().await;
    mock.push(Reply::tool_call(
        "call-1",
        "read_file",
        json!({"path": "link"}),
    ))
    .push(Reply::tool_call(
        "call-2",
        "run_command",
        json!({"command": format!("echo harmless\ntouch {}", pwned.display())}),
    ))
    .push(Reply::text("Done."));
    let output = tokio::process::Command::new("node")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_aquaregia"))
        .args([
            "acp",
            "--model",
            "openai-chat:mock-model",
            "--max-steps",
            "4",
        ])
        .current_dir(dir.join("project"))
        .env_remove("AQUAREGIA_MODEL")
        .env_remove("RUST_LOG")
        .env("OPENAI_BASE_URL", &mock.url)
        .env("OPENAI_API_KEY", "test")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(BOUND * 2, output)
        .await
        .expect("the client finished")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: stdout: {stdout}\nstderr: {stderr}"));
    assert_eq!(report["stopReason"], "end_turn", "{report:#}");
    let asked = report["permissions"].as_array().unwrap();
    assert_eq!(
        asked.len(),
        2,
        "the read-only read asks outside: {report:#}"
    );

    let read = &asked[0]["toolCall"];
    let secret = dir.join("secret.txt");
    let title = read["title"].as_str().unwrap();
    assert!(
        title.contains(secret.to_str().unwrap()) && title.contains("outside the workspace"),
        "{read:#}"
    );
    let requests = mock.bodies();
    let told = content_text(tool_messages(&requests[1]).last().unwrap());
    assert!(
        !told.contains("outside secret"),
        "rejected: not read: {told}"
    );

    let run = &asked[1]["toolCall"];
    let title = run["title"].as_str().unwrap();
    assert!(title.contains("(+1 more line)"), "{run:#}");
    let shown = run["content"].to_string();
    assert!(
        shown.contains(&format!("touch {}", pwned.display())),
        "the hidden line is in the request: {run:#}"
    );
    assert!(!pwned.exists(), "rejected: not run");
}
