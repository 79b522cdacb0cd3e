//! `aquaregia serve`: ACP over WebSocket, under the official TypeScript SDK's own WebSocket
//! client (`createWebSocketStream` of `@agentclientprotocol/sdk`, on Node 24's WebSocket):
//! a prompt with a tool call the client serves (MCP-over-ACP across the socket), two clients
//! prompting at once, a closed socket ending only its own sessions, stdio servers and local
//! tools refused unless the operator allows them, and two replicas on one PostgreSQL handing a
//! session over after the first is killed mid-turn. Without those peers: upgrades without the
//! right bearer token get 401, and `serve` without a token does not start.

use crate::common;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use aquaregia_test_support::deps::{dep, node_script};
use aquaregia_test_support::mock_model::{MockServer, Reply, tool_names, tool_results};
use aquaregia_test_support::processes::{
    KillMarked, assert_no_process_left, marker, processes_with_marker,
};
use common::{BOUND, Scratch, cli, run, test_server_script, use_mock};

/// The token every test server is started with.
const TOKEN: &str = "test-token-of-serve";

/// A step runner around the SDK's WebSocket client: one JSON command per stdin line, one JSON
/// result per stdout line (`{"id", "result"}` or `{"id", "error"}`), commands run
/// concurrently. Each connection serves a `notes` MCP server over ACP; `"$notes"` in a
/// request's params stands for its declaration.
const CLIENT: &str = r#"
import readline from "node:readline";
import * as acp from "@agentclientprotocol/sdk/unstable";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";

setTimeout(() => { console.error("ws client: overall timeout"); process.exit(2); }, 180000).unref();

// Node's WebSocket takes headers in its options; the SDK passes them as a third argument.
class HeaderWebSocket extends WebSocket {
  constructor(url, protocols, options) {
    super(url, { protocols: protocols ?? [], headers: options?.headers ?? {} });
  }
}

const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const connections = new Map();

function connect(name, url, token) {
  const stream = createWebSocketStream(url, {
    headers: { Authorization: `Bearer ${token}` },
    WebSocket: HeaderWebSocket,
  });
  const state = { updates: [], permissions: [], calls: [] };
  const provider = new acp.McpOverAcpProvider();
  const app = acp.client()
    .onRequest(acp.methods.client.mcp.message, provider.handleRequest)
    .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
      state.permissions.push(params);
      return { outcome: { outcome: "selected", optionId: "allow_once" } };
    })
    .onNotification(acp.methods.client.session.update, async ({ params }) => {
      state.updates.push(params);
    });
  state.connection = app.connect(stream);
  state.notes = provider.registerServer(state.connection.agent, {
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
        case "tools/call":
          state.calls.push(op.params);
          return { result: { resultType: "complete", content: [
            { type: "text", text: `note about ${op.params.arguments.topic}, kept by ${name}` },
          ] } };
        default:
          throw new acp.McpProtocolError(-32601, "Method not found");
      }
    },
  });
  connections.set(name, state);
  return state;
}

function withNotes(value, state) {
  if (value === "$notes") return state.notes.declaration;
  if (Array.isArray(value)) return value.map((item) => withNotes(item, state));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, withNotes(item, state)]));
  }
  return value;
}

async function perform(command) {
  switch (command.op) {
    case "connect": {
      const state = connect(command.conn, command.url, command.token);
      return await state.connection.agent.request("initialize", {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {},
        clientInfo: { name: "ts-websocket", version: "1" },
      });
    }
    case "request": {
      const state = connections.get(command.conn);
      return await state.connection.agent.request(command.method, withNotes(command.params, state));
    }
    case "seen": {
      const state = connections.get(command.conn);
      return { updates: state.updates, calls: state.calls, permissions: state.permissions };
    }
    case "raw": {
      // A WebSocket of its own: sends `frames` (text, or `{ binary }`), then a valid
      // `initialize`, and reports what came back until that is answered or the socket closes.
      const socket = new WebSocket(command.url, { headers: { Authorization: `Bearer ${command.token}` } });
      const received = [];
      return await new Promise((resolve, reject) => {
        socket.onerror = () => {};
        socket.onclose = (event) => resolve({ received, closed: { code: event.code, reason: event.reason } });
        socket.onmessage = (event) => {
          const message = JSON.parse(event.data);
          received.push(message);
          if (message.id === "last") { socket.close(); }
        };
        socket.onopen = () => {
          for (const frame of command.frames) {
            if (typeof frame === "string") socket.send(frame);
            else if (frame.binary !== undefined) socket.send(new TextEncoder().encode(frame.binary));
            else if (frame.repeat !== undefined) socket.send("x".repeat(frame.repeat));
          }
          socket.send(JSON.stringify({ jsonrpc: "2.0", id: "last", method: "initialize",
            params: { protocolVersion: 1, clientCapabilities: {} } }));
        };
      });
    }
    case "close": {
      connections.get(command.conn).connection.close();
      return null;
    }
    default:
      throw new Error(`unknown op ${command.op}`);
  }
}

for await (const line of readline.createInterface({ input: process.stdin })) {
  const command = JSON.parse(line);
  perform(command).then(
    (result) => out({ id: command.id, result: result ?? null }),
    (error) => out({ id: command.id, error: { message: String(error?.message ?? error), code: error?.code ?? null, data: error?.data ?? null } }),
  );
}
// The end of input: the connections close, and the runner exits.
for (const state of connections.values()) state.connection.close();
process.exit(0);
"#;

/// The Node step runner, on Node 24 (whose global `WebSocket` the SDK uses).
struct Client {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    results: HashMap<u64, Value>,
    next: u64,
    _script: tempfile::TempPath,
}

impl Client {
    fn start() -> Self {
        let script = node_script(CLIENT);
        let mut child = tokio::process::Command::new(dep("AQUAREGIA_NODE22"))
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs");
        let stdin = child.stdin.take().expect("piped stdin");
        let lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        Self {
            child,
            stdin,
            lines,
            results: HashMap::new(),
            next: 0,
            _script: script,
        }
    }

    /// Starts `command`; its id, for [`Self::result`].
    async fn send(&mut self, mut command: Value) -> u64 {
        self.next += 1;
        command["id"] = json!(self.next);
        let line = format!("{command}\n");
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("write to the client");
        self.next
    }

    /// The outcome of command `id` (`{"result"}` or `{"error"}`), within [`BOUND`].
    async fn result(&mut self, id: u64) -> Value {
        let deadline = tokio::time::Instant::now() + BOUND;
        loop {
            if let Some(outcome) = self.results.remove(&id) {
                return outcome;
            }
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("no answer to command {id}"))
                .expect("read the client")
                .unwrap_or_else(|| panic!("the client exited before answering command {id}"));
            let outcome: Value = serde_json::from_str(&line).expect("a JSON line");
            let done = outcome["id"].as_u64().expect("an id");
            self.results.insert(done, outcome);
        }
    }

    /// Runs `command` and returns its result; fails the test on an error.
    async fn ok(&mut self, command: Value) -> Value {
        let id = self.send(command.clone()).await;
        let outcome = self.result(id).await;
        assert!(
            outcome.get("error").is_none(),
            "{command} failed: {outcome}"
        );
        outcome["result"].clone()
    }

    async fn connect(&mut self, conn: &str, server: &Served) -> Value {
        self.ok(json!({"op": "connect", "conn": conn, "url": server.url, "token": TOKEN}))
            .await
    }

    fn request(conn: &str, method: &str, params: Value) -> Value {
        let mut request = json!({"op": "request", "conn": conn, "method": method});
        request["params"] = params;
        request
    }

    fn prompt(conn: &str, session: &str, text: &str) -> Value {
        Self::request(
            conn,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    async fn new_session(&mut self, conn: &str, cwd: &str, servers: Value) -> String {
        let created = self
            .ok(Self::request(
                conn,
                "session/new",
                json!({"cwd": cwd, "mcpServers": servers}),
            ))
            .await;
        created["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned()
    }

    /// What connection `conn` saw: `updates` (the `session/update` params), `calls` (of its
    /// `notes` tool) and `permissions`.
    async fn seen(&mut self, conn: &str) -> Value {
        self.ok(json!({"op": "seen", "conn": conn})).await
    }

    /// Ends the runner (its connections close with it).
    async fn stop(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(BOUND, self.child.wait()).await;
        let _ = self.child.kill().await;
    }
}

/// A running `aquaregia serve`.
struct Served {
    child: tokio::process::Child,
    /// `ws://127.0.0.1:PORT/acp`.
    url: String,
    /// `127.0.0.1:PORT`.
    address: String,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    /// `aquaregia serve --listen 127.0.0.1:0 <args>` in `scratch` on the mock model, with the
    /// token in the environment; waits until it says where it listens.
    async fn start(scratch: &Scratch, model: &MockServer, args: &[&str]) -> Self {
        let mut command = cli(scratch);
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("AQUAREGIA_SERVE_TOKEN", TOKEN);
        use_mock(&mut command, model);
        Self::spawn(command).await
    }

    async fn spawn(command: std::process::Command) -> Self {
        let mut child = tokio::process::Command::from(command)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start aquaregia serve");
        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let url = tokio::time::timeout(BOUND, async {
            while let Some(line) = lines.next_line().await.expect("read stderr") {
                stderr.lock().unwrap().push_str(&format!("{line}\n"));
                if let Some(url) = line.split("ACP over WebSocket at ").nth(1) {
                    return url.trim().to_owned();
                }
            }
            panic!("serve exited: {}", stderr.lock().unwrap());
        })
        .await
        .expect("serve listened in time");
        let drained = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                drained.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        let address = url
            .trim_start_matches("ws://")
            .trim_end_matches("/acp")
            .to_owned();
        Self {
            child,
            url,
            address,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// SIGTERM, then waits: `serve` closes every connection and exits with 0.
    async fn stop(mut self) {
        let pid = self.child.id().expect("still running");
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let status = tokio::time::timeout(BOUND, self.child.wait())
            .await
            .expect("serve stopped in time")
            .expect("wait for serve");
        assert!(status.success(), "{status}: {}", self.stderr());
    }
}

/// The texts of `updates` (`session/update` params) of kind `kind`.
fn texts(updates: &Value, kind: &str) -> Vec<String> {
    updates
        .as_array()
        .unwrap()
        .iter()
        .filter(|params| params["update"]["sessionUpdate"] == kind)
        .map(|params| {
            params["update"]["content"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

fn cwd(scratch: &Scratch) -> &str {
    scratch.path.to_str().unwrap()
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_typescript_clients_prompt_at_once_with_a_tool_call_each() {
    let scratch = Scratch::new();
    let model = MockServer::start().await;
    let gates = [
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    ];
    for gate in &gates {
        model.push(Reply::Gated(
            gate.clone(),
            Box::new(Reply::tool_call(
                "call-1",
                "notes__lookup",
                json!({"topic": "rust"}),
            )),
        ));
    }
    model
        .push(Reply::text("Rust, from the notes."))
        .push(Reply::text("Rust, from the notes."));
    let server = Served::start(&scratch, &model, &[]).await;
    let mut client = Client::start();
    let init = client.connect("a", &server).await;
    client.connect("b", &server).await;
    assert_eq!(init["agentInfo"]["name"], "aquaregia", "{init}");
    assert_eq!(init["agentCapabilities"]["loadSession"], true, "{init}");

    let mut prompts = Vec::new();
    for conn in ["a", "b"] {
        let session = client
            .new_session(conn, cwd(&scratch), json!(["$notes"]))
            .await;
        prompts.push(
            client
                .send(Client::prompt(
                    conn,
                    &session,
                    "What do my notes say about rust?",
                ))
                .await,
        );
    }
    // Both turns are at the model at once, before either is answered (turns served one after
    // the other would have run the first one's tool before the second request).
    model.wait_requests(2).await;
    for conn in ["a", "b"] {
        assert_eq!(client.seen(conn).await["calls"], json!([]));
    }
    for gate in &gates {
        gate.notify_one();
    }
    for prompt in prompts {
        let outcome = client.result(prompt).await;
        assert_eq!(
            outcome["result"]["stopReason"],
            "end_turn",
            "{outcome}\n{}",
            server.stderr()
        );
    }
    for conn in ["a", "b"] {
        let seen = client.seen(conn).await;
        // Each client's own tool ran, once, in that client.
        let calls = seen["calls"].as_array().unwrap();
        assert_eq!(calls.len(), 1, "{seen:#}");
        assert_eq!(calls[0]["name"], "lookup");
        assert_eq!(calls[0]["arguments"], json!({"topic": "rust"}));
        assert_eq!(seen["permissions"].as_array().unwrap().len(), 1, "{seen:#}");
        let statuses: Vec<&str> = seen["updates"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|params| params["update"]["status"].as_str())
            .collect();
        assert_eq!(statuses.last(), Some(&"completed"), "{seen:#}");
        assert_eq!(
            texts(&seen["updates"], "agent_message_chunk").concat(),
            "Rust, from the notes."
        );
    }
    let results: Vec<String> = model.bodies()[2..]
        .iter()
        .flat_map(|body| tool_results(body).into_iter().map(|(_, text)| text))
        .collect();
    let mut results = results;
    results.sort();
    assert_eq!(
        results,
        ["note about rust, kept by a", "note about rust, kept by b"]
    );
    client.stop().await;
    server.stop().await;
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_closed_socket_ends_its_own_sessions_only() {
    let scratch = Scratch::new();
    let model = MockServer::start().await;
    model.push(Reply::Hang);
    model.set_fallback(Reply::text("Still here."));
    let server = Served::start(&scratch, &model, &["--allow-stdio-servers"]).await;
    let markers = [marker("serve-closed"), marker("serve-open")];
    let _kill: Vec<_> = markers.iter().cloned().map(KillMarked).collect();
    let mut client = Client::start();
    let mut sessions = Vec::new();
    for (conn, marker) in ["a", "b"].into_iter().zip(&markers) {
        client.connect(conn, &server).await;
        let servers = json!([{
            "name": "local", "command": "python3", "args": [test_server_script()],
            "env": [{"name": "AQUAREGIA_TEST_MARKER", "value": marker}],
        }]);
        sessions.push(client.new_session(conn, cwd(&scratch), servers).await);
        assert!(
            !processes_with_marker(marker).is_empty(),
            "{conn}'s server runs"
        );
    }
    // a's turn is at the model when its socket closes.
    let hanging = client
        .send(Client::prompt("a", &sessions[0], "Wait."))
        .await;
    model.wait_requests(1).await;
    client.ok(json!({"op": "close", "conn": "a"})).await;
    let outcome = client.result(hanging).await;
    assert!(outcome.get("error").is_some(), "{outcome}");
    assert_no_process_left(&markers[0], BOUND).await;

    // b goes on, its server still there.
    assert!(!processes_with_marker(&markers[1]).is_empty());
    let answer = client.ok(Client::prompt("b", &sessions[1], "Hello?")).await;
    assert_eq!(answer["stopReason"], "end_turn", "{}", server.stderr());
    assert!(
        tool_names(&model.bodies()[1]).contains(&"local__greet".to_owned()),
        "{:?}",
        tool_names(&model.bodies()[1])
    );
    // SIGTERM with b still connected: its session is closed too, and serve exits with 0.
    server.stop().await;
    assert_no_process_left(&markers[1], BOUND).await;
    client.stop().await;
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn remote_stdio_servers_and_local_tools_need_the_operator() {
    let scratch = Scratch::new();
    let model = MockServer::start().await;
    model.set_fallback(Reply::text("Done."));
    let marker = marker("serve-stdio");
    let _kill = KillMarked(marker.clone());
    let servers = json!([{
        "name": "local", "command": "python3", "args": [test_server_script()],
        "env": [{"name": "AQUAREGIA_TEST_MARKER", "value": marker}],
    }, "$notes"]);

    // By default: the stdio server is refused, said so, and the session has its other server;
    // no file tool or `run_command` runs here for a client without `fs` and `terminal`.
    let server = Served::start(&scratch, &model, &[]).await;
    let mut client = Client::start();
    client.connect("a", &server).await;
    let session = client
        .new_session("a", cwd(&scratch), servers.clone())
        .await;
    assert!(processes_with_marker(&marker).is_empty());
    let answer = client.ok(Client::prompt("a", &session, "Hi.")).await;
    assert_eq!(answer["stopReason"], "end_turn");
    let seen = client.seen("a").await;
    let told = texts(&seen["updates"], "agent_message_chunk").concat();
    assert!(
        told.contains("MCP server `local` is unavailable: this agent does not start stdio servers")
            && told.contains("python3"),
        "{told}"
    );
    let tools = tool_names(&model.bodies()[0]);
    assert!(tools.contains(&"notes__lookup".to_owned()), "{tools:?}");
    assert!(
        !tools.iter().any(|tool| tool.starts_with("local__")),
        "{tools:?}"
    );
    for local in ["read_file", "write_file", "edit_file", "run_command"] {
        assert!(!tools.contains(&local.to_owned()), "{tools:?}");
    }
    assert!(tools.contains(&"update_plan".to_owned()), "{tools:?}");
    client.stop().await;
    server.stop().await;

    // Allowed by the operator: both.
    let server = Served::start(
        &scratch,
        &model,
        &["--allow-stdio-servers", "--allow-local-tools"],
    )
    .await;
    let mut client = Client::start();
    client.connect("a", &server).await;
    let session = client.new_session("a", cwd(&scratch), servers).await;
    assert!(!processes_with_marker(&marker).is_empty());
    let answer = client.ok(Client::prompt("a", &session, "Hi.")).await;
    assert_eq!(answer["stopReason"], "end_turn");
    let tools = tool_names(&model.bodies()[1]);
    for tool in ["local__greet", "notes__lookup", "read_file", "run_command"] {
        assert!(tools.contains(&tool.to_owned()), "{tool}: {tools:?}");
    }
    client.stop().await;
    server.stop().await;
    assert_no_process_left(&marker, BOUND).await;
}

/// The status line and headers of a WebSocket upgrade of `/acp` at `address`, sent with
/// `authorization` (if any), lowercased.
async fn upgrade(address: &str, authorization: Option<&str>) -> String {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect to serve");
    upgrade_on(&mut stream, address, authorization).await
}

/// [`upgrade`] on `stream`, which is left at the first byte after the response's head.
async fn upgrade_on(
    stream: &mut tokio::net::TcpStream,
    address: &str,
    authorization: Option<&str>,
) -> String {
    let mut request = format!(
        "GET /acp HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    );
    if let Some(authorization) = authorization {
        request.push_str(&format!("Authorization: {authorization}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let read = tokio::time::timeout(BOUND, stream.read(&mut byte))
            .await
            .expect("an answer in time")
            .unwrap();
        assert_eq!(read, 1, "closed early: {}", String::from_utf8_lossy(&head));
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).to_lowercase()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrades_need_the_bearer_token_and_serve_needs_one() {
    let scratch = Scratch::new();
    let model = MockServer::start().await;
    let server = Served::start(&scratch, &model, &[]).await;
    for refused in [
        None,
        Some("Bearer wrong-token"),
        Some(&*format!("Bearer {TOKEN}x")),
        Some(&*format!("Basic {TOKEN}")),
    ] {
        let head = upgrade(&server.address, refused).await;
        assert!(head.starts_with("http/1.1 401 "), "{refused:?}: {head}");
        assert!(head.contains("www-authenticate: bearer"), "{head}");
    }
    let head = upgrade(&server.address, Some(&format!("Bearer {TOKEN}"))).await;
    assert!(head.starts_with("http/1.1 101 "), "{head}");
    assert!(head.contains("acp-connection-id: conn-"), "{head}");
    assert_eq!(model.request_count(), 0);
    server.stop().await;

    // No token: not started.
    let mut command = cli(&scratch);
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("AQUAREGIA_SERVE_TOKEN");
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("no bearer token: set AQUAREGIA_SERVE_TOKEN or give --token-file"),
        "{outcome:?}"
    );
    let empty = scratch.write("token", " \n");
    let mut command = cli(&scratch);
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&empty);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(outcome.stderr.contains("is empty"), "{outcome:?}");

    // A token file, and a warning when listening beyond loopback.
    let file = scratch.write("token", &format!("{TOKEN}\n"));
    let mut command = cli(&scratch);
    command
        .args(["serve", "--listen", "0.0.0.0:0", "--token-file"])
        .arg(&file);
    use_mock(&mut command, &model);
    let server = Served::spawn(command).await;
    assert!(
        server.stderr().contains("without TLS"),
        "{}",
        server.stderr()
    );
    let port = server.address.rsplit(':').next().unwrap().to_owned();
    let head = upgrade(
        &format!("127.0.0.1:{port}"),
        Some(&format!("Bearer {TOKEN}")),
    )
    .await;
    assert!(head.starts_with("http/1.1 101 "), "{head}");
    server.stop().await;
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn frames_that_are_not_one_message_get_a_parse_error_and_big_ones_close_the_socket() {
    let scratch = Scratch::new();
    let model = MockServer::start().await;
    let server = Served::start(&scratch, &model, &[]).await;
    let mut client = Client::start();
    let raw =
        |frames: Value| json!({"op": "raw", "url": server.url, "token": TOKEN, "frames": frames});
    let two = r#"{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}
{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}"#;
    let long = format!("{{\"not json\": {}", "é".repeat(1 << 20));
    let outcome = client
        .ok(raw(json!(["not json", two, {"binary": "{}"}, long])))
        .await;
    let received = outcome["received"].as_array().unwrap();
    let errors: Vec<&Value> = received
        .iter()
        .filter(|message| message["error"]["code"] == -32700)
        .collect();
    assert_eq!(errors.len(), 4, "{outcome:#}");
    // The long one is quoted short.
    assert!(
        errors.iter().all(|error| error.to_string().len() < 1024),
        "{outcome:#}"
    );
    // And the connection goes on.
    let last = received.last().unwrap();
    assert_eq!(last["id"], "last", "{outcome:#}");
    assert_eq!(
        last["result"]["agentInfo"]["name"], "aquaregia",
        "{outcome:#}"
    );

    // A message over the bound (64 MiB) ends its connection, and only that one.
    client.connect("a", &server).await;
    let outcome = client.ok(raw(json!([{"repeat": (64 << 20) + 1}]))).await;
    assert!(
        outcome["received"].as_array().unwrap().is_empty(),
        "{outcome}"
    );
    assert_ne!(outcome["closed"]["code"], 1000, "{outcome}");
    let listed = client
        .ok(Client::request("a", "session/list", json!({})))
        .await;
    assert!(listed["sessions"].is_array(), "{listed}");
    client.stop().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_answer_pings_is_disconnected() {
    let scratch = Scratch::new();
    let model = MockServer::start().await;
    let server = Served::start(&scratch, &model, &["--ping-interval", "1"]).await;
    let mut stream = tokio::net::TcpStream::connect(&server.address)
        .await
        .unwrap();
    let head = upgrade_on(
        &mut stream,
        &server.address,
        Some(&format!("Bearer {TOKEN}")),
    )
    .await;
    assert!(head.starts_with("http/1.1 101 "), "{head}");
    // Nothing is read or answered: a ping comes, then, a ping interval later, a close frame
    // (policy violation, 1008), then the end of the stream.
    let mut frames = Vec::new();
    tokio::time::timeout(BOUND, stream.read_to_end(&mut frames))
        .await
        .expect("the server closed the socket")
        .unwrap();
    assert_eq!(frames.get(..2), Some(&[0x89, 0x00][..]), "{frames:x?}");
    let close = &frames[2..];
    assert_eq!(close.first(), Some(&0x88), "{frames:x?}");
    assert_eq!(close.get(2..4), Some(&[0x03, 0xf0][..]), "{frames:x?}");
    assert!(
        server.stderr().contains("did not answer a ping"),
        "{}",
        server.stderr()
    );
    server.stop().await;
}

#[cfg(feature = "postgres")]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_moves_to_another_replica_when_the_first_is_killed() {
    use aquaregia_test_support::postgres::{PgCluster, database_name};
    use common::transcript;
    let Some(cluster) = PgCluster::shared() else {
        return;
    };
    let url = cluster.database("serve_replicas");
    let scratch = Scratch::new();
    scratch.write(
        "aquaregia.json",
        &json!({"sessions": {"postgres": url}}).to_string(),
    );
    let model = MockServer::start().await;
    model
        .push(Reply::tool_call(
            "call-1",
            "notes__lookup",
            json!({"topic": "rust"}),
        ))
        .push(Reply::text("Your notes mention rust."))
        .push(Reply::Hang)
        .push(Reply::text("We talked about rust."));
    let first = Served::start(&scratch, &model, &[]).await;
    // The second replica shares only the database: a data dir of its own.
    let mut command = cli(&scratch);
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("AQUAREGIA_SERVE_TOKEN", TOKEN)
        .env("AQUAREGIA_DATA_DIR", scratch.path.join("replica-b"));
    use_mock(&mut command, &model);
    let second = Served::spawn(command).await;

    let mut client = Client::start();
    client.connect("a", &first).await;
    let session = client
        .new_session("a", cwd(&scratch), json!(["$notes"]))
        .await;
    let answer = client
        .ok(Client::prompt("a", &session, "What do my notes say?"))
        .await;
    assert_eq!(answer["stopReason"], "end_turn", "{}", first.stderr());
    // The second turn is at the model when the first replica is killed outright.
    let hanging = client
        .send(Client::prompt("a", &session, "And what else?"))
        .await;
    model.wait_requests(3).await;
    let mut first = first;
    first.child.start_kill().unwrap();
    first.child.wait().await.unwrap();
    let outcome = client.result(hanging).await;
    assert!(outcome.get("error").is_some(), "{outcome}");

    client.connect("b", &second).await;
    let listed = client
        .ok(Client::request(
            "b",
            "session/list",
            json!({"cwd": cwd(&scratch)}),
        ))
        .await;
    let listed = listed["sessions"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["sessionId"], session.as_str());
    assert_eq!(listed[0]["title"], "What do my notes say?");
    client
        .ok(Client::request(
            "b",
            "session/load",
            json!({"sessionId": session, "cwd": cwd(&scratch), "mcpServers": ["$notes"]}),
        ))
        .await;
    let replayed = client.seen("b").await["updates"].clone();
    // The completed turn, all of it; the one cut off is not there.
    assert_eq!(
        texts(&replayed, "user_message_chunk"),
        ["What do my notes say?"]
    );
    assert_eq!(
        texts(&replayed, "agent_message_chunk"),
        ["Your notes mention rust."]
    );
    let calls: Vec<&Value> = replayed
        .as_array()
        .unwrap()
        .iter()
        .map(|params| &params["update"])
        .filter(|update| update["toolCallId"] == "call-1")
        .collect();
    assert_eq!(calls[0]["sessionUpdate"], "tool_call", "{calls:?}");
    assert_eq!(calls[0]["rawInput"], json!({"topic": "rust"}));
    assert_eq!(calls.last().unwrap()["status"], "completed", "{calls:?}");

    let answer = client
        .ok(Client::prompt("b", &session, "What did we talk about?"))
        .await;
    assert_eq!(answer["stopReason"], "end_turn", "{}", second.stderr());
    let texts: Vec<String> = transcript(&model.bodies()[3])
        .into_iter()
        .map(|(_, text)| text)
        .filter(|text| !text.is_empty())
        .collect();
    assert_eq!(
        texts,
        [
            "What do my notes say?",
            "note about rust, kept by a",
            "Your notes mention rust.",
            "What did we talk about?"
        ],
        "the second replica continued from the stored turn"
    );
    assert_eq!(
        cluster.sql(
            database_name(&url),
            "SELECT count(*) FROM aquaregia_session_turns"
        ),
        "2"
    );
    client.stop().await;
    second.stop().await;
}
