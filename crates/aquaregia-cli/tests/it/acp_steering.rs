//! `_session/steering` through the official TypeScript SDK client against the real binary:
//! the extension advertised where claude-agent-acp and codex-acp put it
//! (`InitializeResponse._meta.steering.supported`); a message steered while a tool call runs
//! (the client's own MCP-over-ACP tool sends it before answering) reaches the next model
//! request, after the tool result, once; a revoked one never does; an idle session answers
//! `promptRequired` when the client opts in; an unknown session is a clear error; and a
//! second agent process replays the steered message on `session/load` as a
//! `user_message_chunk` at its place.

use crate::common;

use serde_json::{Value, json};

use aquaregia_test_support::deps::node_script;
use aquaregia_test_support::mock_model::{MockServer, Reply, content_text};
use aquaregia_test_support::processes::{KillMarked, assert_no_process_left, marker};
use common::{BOUND, node_report};

const CLIENT: &str = r#"
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/unstable";

setTimeout(() => { console.error("steering client: overall timeout"); process.exit(2); }, 90000).unref();
const [agentPath, ...agentArgs] = process.argv.slice(2);
const report = { steers: [], revokes: [], replay: [] };

function start(onUpdate) {
  const child = spawn(agentPath, agentArgs, { stdio: ["pipe", "pipe", "inherit"], env: process.env });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const provider = new acp.McpOverAcpProvider();
  const app = acp.client()
    .onRequest(acp.methods.client.mcp.message, provider.handleRequest)
    .onNotification(acp.methods.client.session.update, async ({ params }) => onUpdate(params))
    .onRequest(acp.methods.client.session.requestPermission, async () =>
      ({ outcome: { outcome: "selected", optionId: "allow_once" } }));
  const connection = app.connect(stream);
  return { child, exited, connection, agent: connection.agent, provider };
}

async function stop({ connection, child, exited }) {
  connection.close();
  child.stdin.end();
  return await exited;
}

const first = start(() => {});
const agent = first.agent;
report.init = await agent.request("initialize", {
  protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {}, clientInfo: { name: "ts-steering", version: "1" },
});
let sessionId;
const text = (t) => [{ type: "text", text: t }];
const notes = first.provider.registerServer(agent, {
  name: "notes",
  handler: async (op) => {
    switch (op.method) {
      case "server/discover":
        return { result: {
          resultType: "complete", supportedVersions: ["2026-07-28"],
          capabilities: { tools: {} }, ttlMs: 0, cacheScope: "private",
        } };
      case "tools/list":
        return { result: { resultType: "complete", tools: [{
          name: "lookup", description: "Looks a note up",
          inputSchema: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
        }] } };
      case "tools/call": {
        // The user types while the tool runs: one message steered, one steered and revoked.
        report.steers.push(await agent.request("_session/steering", { sessionId, prompt: text("Use the blue notes.") }));
        const revoked = await agent.request("_session/steering", { sessionId, prompt: text("Forget this one.") });
        report.steers.push(revoked);
        report.revokes.push(await agent.request("_session/revoke_steering", { sessionId, messageId: revoked.messageId }));
        report.revokes.push(await agent.request("_session/revoke_steering", { sessionId, messageId: revoked.messageId }));
        return { result: { resultType: "complete", content: [{ type: "text", text: "red notes and blue notes" }] } };
      }
      default:
        throw new acp.McpProtocolError(-32601, "Method not found");
    }
  },
});
const session = await agent
  .buildSession({ cwd: process.cwd(), mcpServers: [] })
  .withMcpServer(notes.declaration)
  .start();
sessionId = session.sessionId;
report.sessionId = sessionId;
report.idle = await agent.request("_session/steering", {
  sessionId, prompt: text("nothing runs"), _meta: { steering: { idleBehavior: "promptRequired" } },
});
try {
  await agent.request("_session/steering", { sessionId: "no-such-session", prompt: text("hello") });
  report.unknown = "answered";
} catch (error) {
  report.unknown = String(error?.message ?? error) + " " + JSON.stringify(error?.data ?? null);
}
const done = session.prompt("What do my notes say?");
for (;;) {
  const message = await session.nextUpdate();
  if (message.kind === "stop") { report.stopReason = message.stopReason; break; }
}
await done;
session.dispose();
report.exits = [await stop(first)];

// Another agent process loads the stored session.
const second = start((params) => report.replay.push(params.update));
await second.agent.request("initialize", {
  protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {}, clientInfo: { name: "ts-steering", version: "1" },
});
await second.agent.request("session/load", { sessionId, cwd: process.cwd(), mcpServers: [] });
report.exits.push(await stop(second));
console.log(JSON.stringify(report));
"#;

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_steered_during_a_tool_call_reaches_the_next_model_request_and_replays() {
    let script = node_script(CLIENT);
    let mock = MockServer::start().await;
    mock.push(Reply::tool_call(
        "call-1",
        "notes__lookup",
        json!({"topic": "colour"}),
    ))
    .push(Reply::text("Blue notes it is."));

    let marker = marker("steering");
    let _kill = KillMarked(marker.clone());
    let data = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let (report, stderr) = node_report(
        tokio::process::Command::new("node")
            .arg(&script)
            .arg(env!("CARGO_BIN_EXE_aquaregia"))
            .args([
                "acp",
                "--model",
                "openai-chat:mock-model",
                "--max-steps",
                "4",
            ])
            .current_dir(project.path())
            .env("AQUAREGIA_DATA_DIR", data.path())
            .env("XDG_CONFIG_HOME", data.path().join("xdg"))
            .env_remove("AQUAREGIA_MODEL")
            .env_remove("RUST_LOG")
            .env("OPENAI_BASE_URL", &mock.url)
            .env("OPENAI_API_KEY", "test")
            .env("AQUAREGIA_TEST_MARKER", &marker),
        "the steering client finished",
    )
    .await;

    assert_eq!(
        report["init"]["_meta"]["steering"]["supported"], true,
        "{report:#}"
    );
    assert_eq!(
        report["idle"],
        json!({"outcome": "promptRequired", "reason": "noRunningTurn"})
    );
    let unknown = report["unknown"].as_str().unwrap();
    assert!(unknown.contains("unknown session"), "{unknown}");
    assert_eq!(report["steers"][0]["outcome"], "injected", "{report:#}");
    assert_eq!(report["steers"][1]["outcome"], "injected");
    assert_ne!(
        report["steers"][0]["messageId"],
        report["steers"][1]["messageId"]
    );
    assert_eq!(
        report["revokes"],
        json!([{"outcome": "revoked"}, {"outcome": "notPending"}])
    );
    assert_eq!(report["stopReason"], "end_turn", "{report:#}\n{stderr}");
    for exit in report["exits"].as_array().unwrap() {
        assert_eq!(exit["code"], 0, "the agent exits cleanly: {stderr}");
    }

    // The model's second request ends with the tool result and then the steered message;
    // the revoked one never reached it.
    let requests = mock.bodies();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let said = |request: &Value, text: &str| {
        request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user" && content_text(m) == text)
            .count()
    };
    assert_eq!(said(&requests[0], "Use the blue notes."), 0);
    assert_eq!(said(&requests[1], "Use the blue notes."), 1);
    let messages = requests[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(&roles[roles.len() - 2..], ["tool", "user"], "{messages:#?}");
    for request in &requests {
        assert_eq!(said(request, "Forget this one."), 0, "revoked: {request:#}");
    }

    // Replayed at its place: after the tool call's result, before the answer.
    let replay = report["replay"].as_array().unwrap();
    let position = |wanted: &dyn Fn(&Value) -> bool| {
        replay
            .iter()
            .position(wanted)
            .unwrap_or_else(|| panic!("not replayed: {replay:#?}"))
    };
    let prompt = position(&|u| {
        u["sessionUpdate"] == "user_message_chunk"
            && u["content"]["text"] == "What do my notes say?"
    });
    let result =
        position(&|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "call-1");
    let steered = position(&|u| {
        u["sessionUpdate"] == "user_message_chunk" && u["content"]["text"] == "Use the blue notes."
    });
    let answer = position(&|u| u["sessionUpdate"] == "agent_message_chunk");
    assert!(
        prompt < result && result < steered && steered < answer,
        "{replay:#?}"
    );
    assert!(
        replay
            .iter()
            .all(|u| u["content"]["text"] != "Forget this one."),
        "{replay:#?}"
    );
    assert_no_process_left(&marker, BOUND).await;
}
