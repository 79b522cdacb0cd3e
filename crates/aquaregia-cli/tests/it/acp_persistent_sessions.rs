//! Persistent sessions with the official TypeScript SDK client (`@agentclientprotocol/sdk`,
//! installed by `scripts/test-deps.sh`): a session is created and prompted, the agent is
//! stopped, a new agent process lists it (title, `updatedAt`), loads it (the history replayed
//! as `session/update`s) and the next prompt's model request carries the earlier turn.

use crate::common;

use serde_json::Value;

use aquaregia_test_support::deps::node_script;
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, node_report};

const CLIENT: &str = r#"
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/unstable";

setTimeout(() => { console.error("sessions client: overall timeout"); process.exit(2); }, 60000).unref();
const [agentPath, ...agentArgs] = process.argv.slice(2);

async function start() {
  const child = spawn(agentPath, agentArgs, { stdio: ["pipe", "pipe", "inherit"], env: process.env });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const updates = [];
  const app = acp.client().onNotification(acp.methods.client.session.update, async ({ params }) => {
    updates.push(params);
  });
  const connection = app.connect(stream);
  const agent = connection.agent;
  const init = await agent.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
    clientInfo: { name: "ts-sessions", version: "1" },
  });
  return { child, exited, connection, agent, init, updates };
}

const cwd = process.cwd();
const first = await start();
const created = await first.agent.request("session/new", { cwd, mcpServers: [] });
const answered = await first.agent.request("session/prompt", {
  sessionId: created.sessionId, prompt: [{ type: "text", text: "Remember the number 42." }],
});
const titled = first.updates.filter((n) => n.update.sessionUpdate === "session_info_update");
first.child.kill("SIGTERM");
const firstExit = await first.exited;

const second = await start();
const listed = await second.agent.request("session/list", { cwd });
const loaded = await second.agent.request("session/load", { sessionId: created.sessionId, cwd, mcpServers: [] });
const replayed = second.updates.filter((n) => n.sessionId === created.sessionId).map((n) => n.update);
const again = await second.agent.request("session/prompt", {
  sessionId: created.sessionId, prompt: [{ type: "text", text: "Which number?" }],
});
second.connection.close();
second.child.stdin.end();
const secondExit = await second.exited;
console.log(JSON.stringify({ init: second.init, created, answered, titled, firstExit, listed, loaded, replayed, again, secondExit }));
"#;

fn texts(updates: &Value, kind: &str) -> Vec<String> {
    updates
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .map(|u| u["content"]["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_outlives_its_agent_process() {
    let script = node_script(CLIENT);
    let scratch = Scratch::new();
    let mock = MockServer::start().await;
    mock.push(Reply::text("I will remember 42."))
        .push(Reply::text("It was 42."));

    let (report, _) = node_report(
        tokio::process::Command::new("node")
            .arg(&script)
            .arg(env!("CARGO_BIN_EXE_aquaregia"))
            .args(["acp", "--model", "openai-chat:mock-model"])
            .current_dir(&scratch.path)
            .env_remove("AQUAREGIA_MODEL")
            .env_remove("RUST_LOG")
            .env("OPENAI_BASE_URL", &mock.url)
            .env("OPENAI_API_KEY", "test")
            .env("AQUAREGIA_DATA_DIR", scratch.path.join("data")),
        "the client finished",
    )
    .await;

    assert_eq!(report["init"]["agentCapabilities"]["loadSession"], true);
    assert!(report["init"]["agentCapabilities"]["sessionCapabilities"]["list"].is_object());
    assert_eq!(report["answered"]["stopReason"], "end_turn", "{report:#}");
    assert_eq!(
        report["titled"][0]["update"]["title"], "Remember the number 42.",
        "session_info_update once the title is set: {report:#}"
    );
    assert_eq!(report["firstExit"]["code"], 0, "{report:#}");
    let id = report["created"]["sessionId"].as_str().unwrap();
    let listed = report["listed"]["sessions"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{report:#}");
    assert_eq!(listed[0]["sessionId"], id);
    assert_eq!(listed[0]["title"], "Remember the number 42.");
    assert!(listed[0]["updatedAt"].is_string(), "{report:#}");
    let replayed = &report["replayed"];
    assert_eq!(
        texts(replayed, "user_message_chunk"),
        ["Remember the number 42."]
    );
    assert_eq!(
        texts(replayed, "agent_message_chunk"),
        ["I will remember 42."]
    );
    assert_eq!(report["again"]["stopReason"], "end_turn", "{report:#}");
    let requests = mock.bodies();
    assert_eq!(requests.len(), 2);
    let history = requests[1]["messages"].to_string();
    assert!(
        history.contains("Remember the number 42.") && history.contains("I will remember 42."),
        "the earlier turn reaches the model: {history}"
    );
    assert_eq!(report["secondExit"]["code"], 0, "{report:#}");
}
