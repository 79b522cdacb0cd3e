//! End-to-end tests of the real `aquaregia acp` binary: the hand-written ACP client
//! (`aquaregia_test_support::acp_client`) drives it over its stdin/stdout, with the mock model
//! and MCP servers of both kinds in a session (server-everything over stdio, and `acp`
//! servers served by the client itself on the stateless MCP-over-ACP binding).
//!
//! `aquaregia acp` runs with `AQUAREGIA_TEST_MARKER` set, and every stdio server entry of a
//! session gets it in its `env` (servers do not inherit the agent's environment), so every
//! server it starts carries the marker too; each test ends by closing the agent's stdin and
//! checking that the agent exits and no marked process is left.

use crate::common;

use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Notify;

use aquaregia_test_support::acp_client::{
    AcpMcpServer, RawClient, eventually, select_permission, settle, tool_updates, updates,
};
use aquaregia_test_support::mock_model::{
    MockServer, Reply, content_text, tool_messages, tool_names, tool_results,
};
use aquaregia_test_support::processes::{
    KillMarked, assert_no_process_left, marker, processes_with_marker,
};
use common::{Scratch, acp_agent_with, cli, server_everything_acp_entry, use_mock};

/// How long the agent may take to answer a cancelled prompt, or to exit once its input ends.
/// Generous: both take milliseconds (the tests print what they observe).
const PROMPTLY: Duration = Duration::from_secs(5);

/// Whether `pid` is the CLI's reaper (`aquaregia __reaper`).
fn is_reaper(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| cmdline.split(|b| *b == 0).any(|arg| arg == b"__reaper"))
}

/// One `aquaregia acp` process (on the mock model) and its raw client, initialized.
struct Agent {
    client: RawClient,
    marker: String,
    init: Value,
    /// Kills whatever still carries the marker if the test fails half-way.
    _kill: KillMarked,
    scratch: Scratch,
}

impl Deref for Agent {
    type Target = RawClient;

    fn deref(&self) -> &RawClient {
        &self.client
    }
}

impl Agent {
    /// Starts `aquaregia acp` with `args` on `model` and initializes it.
    async fn start(tag: &str, model: &MockServer, args: &[&str]) -> Self {
        let scratch = Scratch::new();
        let marker = marker(tag);
        let kill = KillMarked(marker.clone());
        let client = acp_agent_with(&scratch, model, &marker, args);
        let init = client.initialize().await;
        Self {
            client,
            marker,
            init,
            _kill: kill,
            scratch,
        }
    }

    /// Answers the agent's requests with `handler`.
    fn serve(&self, handler: impl FnMut(&Value) -> Option<Value> + Send + 'static) {
        self.client.set_handler(handler);
    }

    /// `session/new` in the scratch directory with `servers`, the stdio ones marked.
    async fn session(&self, mut servers: Value) -> String {
        for entry in servers.as_array_mut().into_iter().flatten() {
            if entry.get("command").is_some() {
                let marker = json!({"name": "AQUAREGIA_TEST_MARKER", "value": self.marker});
                match entry["env"].as_array_mut() {
                    Some(env) => env.push(marker),
                    None => entry["env"] = json!([marker]),
                }
            }
        }
        let cwd = self.scratch.path.to_str().expect("a UTF-8 temp dir");
        self.client.new_session(cwd, servers).await
    }

    /// The marked processes other than the agent: the servers it started.
    fn servers(&self) -> Vec<u32> {
        let agent = self.client.pid();
        let mut marked = processes_with_marker(&self.marker);
        assert!(
            marked.contains(&agent),
            "the agent carries the marker: {marked:?}"
        );
        // The reaper the agent started with its first stdio server lives as long as the agent.
        marked.retain(|pid| *pid != agent && !is_reaper(*pid));
        marked
    }

    /// Closes the agent's stdin (the client goes away, `when` says in what state): the agent
    /// must exit successfully within [`PROMPTLY`] and leave no marked process. Prints how
    /// long it took to exit.
    async fn disconnect(&self, when: &str) {
        let started = Instant::now();
        self.client.close_write().await;
        let status = self.client.wait_exit(PROMPTLY).await;
        eprintln!(
            "the agent exited {:?} after its input ended {when}",
            started.elapsed()
        );
        assert!(
            status.success(),
            "{status}; stderr: {}",
            self.client.stderr()
        );
        assert_no_process_left(&self.marker, PROMPTLY).await;
    }

    /// Waits until tool call `id` of `session` is reported `in_progress`.
    async fn wait_in_progress(&self, session: &str, id: &str) {
        eventually(&format!("{id} to be in progress"), || {
            self.client
                .tool_statuses(session, id)
                .last()
                .map(String::as_str)
                == Some("in_progress")
        })
        .await;
    }

    /// Sends `session/cancel`; returns the answer to `prompt` and how long it took to come.
    async fn cancel(&self, session: &str, prompt: i64) -> (Value, Duration) {
        let started = Instant::now();
        self.client
            .notify("session/cancel", json!({"sessionId": session}))
            .await;
        let answer = self.client.response(prompt).await;
        (answer, started.elapsed())
    }

    /// The `session/request_permission` requests so far, as the tool call ids they ask about.
    fn asked(&self) -> Vec<String> {
        self.client
            .log()
            .iter()
            .filter(|m| m["method"] == "session/request_permission")
            .filter_map(|m| m["params"]["toolCall"]["toolCallId"].as_str())
            .map(str::to_owned)
            .collect()
    }
}

/// A tool of an `acp` server, read-only or not (the agent asks before the latter).
fn acp_tool(name: &str, read_only: bool) -> Value {
    json!({"name": name, "description": format!("The {name} tool"),
           "inputSchema": {"type": "object", "properties": {"topic": {"type": "string"}}},
           "annotations": {"readOnlyHint": read_only}})
}

fn acp_entry(name: &str, server_id: &str) -> Value {
    json!({"type": "acp", "name": name, "serverId": server_id})
}

/// The content the model was given for tool call `id` (in the request after the call).
fn told(requests: &[Value], id: &str) -> String {
    let results = tool_results(requests.last().expect("a model request"));
    results
        .iter()
        .find(|(call, _)| call == id)
        .map(|(_, content)| content.clone())
        .unwrap_or_else(|| panic!("no result for {id} in {results:?}"))
}

const COMPLETED: [&str; 3] = ["pending", "in_progress", "completed"];
const REJECTED: [&str; 2] = ["pending", "failed"];

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_session_with_server_everything_over_stdio_and_an_acp_server() {
    let mock = MockServer::start().await;
    let agent = Agent::start("acp-bin-both", &mock, &["--trust-server", "everything"]).await;
    assert_eq!(agent.init["agentInfo"]["name"], "aquaregia");
    assert_eq!(
        agent.init["agentCapabilities"]["mcpCapabilities"]["acp"],
        true
    );
    let notes = AcpMcpServer::new(json!([acp_tool("lookup", false)]));
    agent.serve({
        let notes = notes.clone();
        move |request| select_permission(request, "allow_once").or_else(|| notes.handle(request))
    });
    let session = agent
        .session(json!([
            server_everything_acp_entry("everything"),
            acp_entry("notes", "notes-1")
        ]))
        .await;
    assert!(!agent.servers().is_empty(), "server-everything runs");

    // One step calls a tool of each server.
    mock.push(Reply::tool_stream(&[
        (
            "call-echo",
            "everything__echo",
            json!({"message": "hello over stdio"}),
        ),
        ("call-notes", "notes__lookup", json!({"topic": "rust"})),
    ]))
    .push(Reply::text("Both tools answered."));
    let answer = agent.prompt(&session, "Use both servers").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let requests = mock.bodies();
    assert_eq!(requests.len(), 2);
    let names = tool_names(&requests[0]);
    for name in ["everything__echo", "notes__lookup"] {
        assert!(names.contains(&name.to_owned()), "{name} in {names:?}");
    }
    assert!(
        told(&requests, "call-echo").contains("Echo: hello over stdio"),
        "{requests:#?}"
    );
    assert_eq!(told(&requests, "call-notes"), "lookup ran");
    let calls = notes.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["name"], "lookup");
    assert_eq!(calls[0]["arguments"], json!({"topic": "rust"}));
    assert_eq!(agent.tool_statuses(&session, "call-echo"), COMPLETED);
    assert_eq!(agent.tool_statuses(&session, "call-notes"), COMPLETED);
    assert_eq!(
        agent.asked(),
        ["call-notes"],
        "echo is read-only, lookup is not"
    );

    agent.disconnect("with an idle session").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn permission_answers_are_honoured_and_always_is_a_project_rule_for_those_arguments() {
    let mock = MockServer::start().await;
    let agent = Agent::start("acp-bin-permissions", &mock, &["--trust-server", "ed"]).await;
    let editor = AcpMcpServer::new(json!([
        acp_tool("write", false),
        acp_tool("delete", false),
        acp_tool("read", true)
    ]));
    let answers = Arc::new(Mutex::new(VecDeque::from([
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
        "allow_once",
    ])));
    agent.serve({
        let (editor, answers) = (editor.clone(), answers.clone());
        move |request| {
            if request["method"] == "session/request_permission" {
                let option = answers.lock().unwrap().pop_front().expect("an answer left");
                return select_permission(request, option);
            }
            editor.handle(request)
        }
    });
    let session = agent.session(json!([acp_entry("ed", "ed-1")])).await;

    // "Always" covers this tool with these arguments, not the whole tool.
    let script = [
        ("call-1", "ed__write", "call-1"),       // asked: allow_once
        ("call-2", "ed__write", "kept"),         // asked again: allow_always
        ("call-3", "ed__write", "kept"),         // remembered: runs without asking
        ("call-4", "ed__delete", "call-4"),      // asked: reject_once
        ("call-5", "ed__delete", "kept-delete"), // asked again: reject_always
        ("call-6", "ed__delete", "kept-delete"), // remembered: rejected without asking
        ("call-7", "ed__read", "call-7"),        // read-only: never asked
    ];
    for (id, tool, topic) in script {
        mock.push(Reply::tool_call(id, tool, json!({"topic": topic})));
    }
    mock.push(Reply::text("Done."));
    let answer = agent.prompt(&session, "Edit").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    assert_eq!(agent.asked(), ["call-1", "call-2", "call-4", "call-5"]);
    let first = agent
        .log()
        .into_iter()
        .find(|m| m["method"] == "session/request_permission")
        .unwrap();
    let options: Vec<&str> = first["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["optionId"].as_str())
        .collect();
    assert_eq!(
        options,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    assert_eq!(
        first["params"]["toolCall"]["rawInput"],
        json!({"topic": "call-1"})
    );
    let ran: Vec<Value> = editor.calls().iter().map(|c| c["name"].clone()).collect();
    assert_eq!(
        ran,
        ["write", "write", "write", "read"],
        "rejected calls never ran"
    );

    let requests = mock.bodies();
    for id in ["call-1", "call-2", "call-3"] {
        assert_eq!(agent.tool_statuses(&session, id), COMPLETED, "{id}");
        assert_eq!(told(&requests, id), "write ran", "{id}");
    }
    for id in ["call-4", "call-5", "call-6"] {
        assert_eq!(agent.tool_statuses(&session, id), REJECTED, "{id}");
        let text = told(&requests, id);
        assert!(text.contains("rejected"), "{id}: the model is told: {text}");
    }
    assert_eq!(agent.tool_statuses(&session, "call-7"), COMPLETED);

    // The rules are the project's: a new session in the same directory keeps them, and a
    // call they do not cover asks.
    let other = agent.session(json!([acp_entry("ed", "ed-2")])).await;
    mock.push(Reply::tool_call(
        "call-8",
        "ed__write",
        json!({"topic": "kept"}),
    ))
    .push(Reply::tool_call("call-9", "ed__write", json!({})))
    .push(Reply::text("Written."));
    let answer = agent.prompt(&other, "Edit again").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent.asked().last().map(String::as_str), Some("call-9"));
    assert_eq!(agent.tool_statuses(&other, "call-8"), COMPLETED);
    assert_eq!(agent.tool_statuses(&other, "call-9"), COMPLETED);
    assert!(answers.lock().unwrap().is_empty(), "every answer was used");
    agent.disconnect("after two sessions").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_during_a_never_answered_tool_call_stops_the_prompt_promptly() {
    let mock = MockServer::start().await;
    let agent = Agent::start("acp-bin-cancel", &mock, &["--trust-server", "slow"]).await;
    // The client never answers calls to `wait`.
    let slow = AcpMcpServer::new(json!([acp_tool("wait", true)])).hold("wait");
    agent.serve({
        let slow = slow.clone();
        move |request| slow.handle(request)
    });
    let session = agent.session(json!([acp_entry("slow", "slow-1")])).await;

    let mut observed = Vec::new();
    for round in 1..=3 {
        let id = format!("call-{round}");
        mock.push(Reply::tool_call(&id, "slow__wait", json!({})));
        let prompt = agent.start_prompt(&session, "Wait").await;
        // The call reached the client, which leaves it unanswered.
        let call = agent
            .wait_for("the tools/call", |m| {
                m["method"] == "mcp/message" && m["params"]["method"] == "tools/call"
            })
            .await;
        agent.wait_in_progress(&session, &id).await;

        let (answer, took) = agent.cancel(&session, prompt).await;
        observed.push(took);
        assert_eq!(
            answer["result"]["stopReason"], "cancelled",
            "a stop reason, not an error: {answer}"
        );
        assert!(
            took < PROMPTLY,
            "round {round}: answered {took:?} after session/cancel (bound {PROMPTLY:?})"
        );
        assert_eq!(
            agent.tool_statuses(&session, &id),
            ["pending", "in_progress", "failed"]
        );
        let log = agent.log();
        let failed = log
            .iter()
            .position(|m| {
                m["params"]["update"]["toolCallId"] == id.as_str()
                    && m["params"]["update"]["status"] == "failed"
            })
            .unwrap();
        let answered = log
            .iter()
            .position(|m| m["id"] == prompt && m.get("method").is_none())
            .unwrap();
        assert!(failed < answered, "the update comes before the answer");
        // The client is told to stop the call: `$/cancel_request` for the `mcp/message`.
        eventually("$/cancel_request for the tool call", || {
            agent.log().iter().any(|m| {
                m["method"] == "$/cancel_request" && m["params"]["requestId"] == call["id"]
            })
        })
        .await;
    }
    eprintln!("prompt answered after session/cancel in {observed:?}");

    // The session goes on.
    mock.push(Reply::text("Still here."));
    let again = agent.prompt(&session, "Hello?").await;
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
    assert_eq!(slow.calls().len(), 3);
    agent.disconnect("with three calls never answered").await;
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn session_close_and_disconnect_leave_no_child_process() {
    let mock = MockServer::start().await;
    let agent = Agent::start("acp-bin-close", &mock, &["--trust-server", "everything"]).await;
    let first = agent
        .session(json!([server_everything_acp_entry("everything")]))
        .await;
    let servers = agent.servers();
    assert!(!servers.is_empty(), "server-everything carries the marker");

    // session/close ends the session's servers.
    let started = Instant::now();
    let closed = agent
        .request("session/close", json!({"sessionId": first}))
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    eventually("the session's servers to end", || {
        agent.servers().is_empty()
    })
    .await;
    eprintln!(
        "server-everything gone {:?} after session/close",
        started.elapsed()
    );
    let gone = agent.prompt(&first, "Are you there?").await;
    assert!(gone.get("error").is_some(), "the session is gone: {gone}");

    // The client goes away while a tool of another session's server is running.
    let second = agent
        .session(json!([server_everything_acp_entry("everything")]))
        .await;
    assert!(!agent.servers().is_empty());
    mock.push(Reply::tool_call(
        "call-long",
        "everything__trigger-long-running-operation",
        json!({"duration": 600, "steps": 1}),
    ));
    agent.start_prompt(&second, "Take your time").await;
    agent.wait_in_progress(&second, "call-long").await;
    agent.disconnect("during a call to server-everything").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_list_change_mid_prompt_reaches_the_next_model_step() {
    let mock = MockServer::start().await;
    let agent = Agent::start("acp-bin-list-changed", &mock, &["--trust-server", "ws"]).await;
    let workspace = AcpMcpServer::new(json!([acp_tool("probe", true)]));
    agent.serve({
        let workspace = workspace.clone();
        // A tool new since the server's tools were pinned is approved before it is offered.
        move |request| select_permission(request, "approve").or_else(|| workspace.handle(request))
    });
    let session = agent.session(json!([acp_entry("ws", "ws-1")])).await;
    // The subscription opens in the background: connecting never waits for it.
    eventually("the subscription to list changes", || {
        workspace.listens() == 1
    })
    .await;

    // Step 1 is held at the model until the list has changed.
    let gate = Arc::new(Notify::new());
    mock.push(Reply::Gated(
        gate.clone(),
        Box::new(Reply::tool_call("call-1", "ws__probe", json!({}))),
    ))
    .push(Reply::tool_call("call-2", "ws__extra", json!({})))
    .push(Reply::text("Done."));
    let prompt = agent.start_prompt(&session, "Probe").await;
    mock.wait_requests(1).await;
    workspace.set_tools(json!([acp_tool("probe", true), acp_tool("extra", true)]));
    agent.send(&workspace.list_changed()).await;
    // Nothing on the wire tells when the agent has taken the notification in (it only bumps
    // a counter, and the list is fetched again when the next step starts), so give it a
    // moment before letting step 1 finish, as the ACP crate's list-change tests do.
    settle().await;
    gate.notify_one();
    let answer = agent.response(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let requests = mock.bodies();
    assert_eq!(mcp_tool_names(&requests[0]), ["ws__probe"]);
    assert_eq!(
        mcp_tool_names(&requests[1]),
        ["ws__probe", "ws__extra"],
        "the step after list_changed offers the new tool"
    );
    assert_eq!(
        mcp_tool_names(&requests[2]),
        ["ws__probe", "ws__extra"],
        "later steps keep the new list"
    );
    assert_eq!(told(&requests, "call-2"), "extra ran");
    let listings = workspace
        .methods()
        .iter()
        .filter(|m| *m == "tools/list")
        .count();
    assert_eq!(listings, 2, "listed once, then again after the change");
    assert_eq!(agent.asked(), ["pin-review-1"], "the new tool was reviewed");
    agent.disconnect("after a list change").await;
}

/// The MCP tools (`<server>__<tool>`) a request offers, without the agent's built-in editor
/// tools.
fn mcp_tool_names(body: &Value) -> Vec<String> {
    tool_names(body)
        .into_iter()
        .filter(|name| name.contains("__"))
        .collect()
}

/// `aquaregia acp` with `args` for a session in `workspace`, its temp directory `temp`, in
/// `bypass_permissions` mode; returns the client and the session.
async fn sandboxed_agent(
    scratch: &Scratch,
    model: &MockServer,
    marker: &str,
    (workspace, temp): (&std::path::Path, &std::path::Path),
    args: &[&str],
) -> (RawClient, String) {
    let mut command = cli(scratch);
    command.arg("acp").args(args);
    use_mock(&mut command, model);
    command
        .env("AQUAREGIA_TEST_MARKER", marker)
        .env("TMPDIR", temp);
    let client = RawClient::spawn(tokio::process::Command::from(command));
    client.initialize().await;
    let session = client
        .new_session(workspace.to_str().unwrap(), json!([]))
        .await;
    client
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "bypass_permissions"}),
        )
        .await;
    (client, session)
}

/// The content of the `tool_call` update announcing `id`, as JSON text.
fn announced(client: &RawClient, session: &str, id: &str) -> String {
    tool_updates(&updates(&client.log(), session))
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == id)
        .map(|u| u["content"].to_string())
        .unwrap_or_default()
}

/// A `run_command` line that connects to 127.0.0.1:`port` and prints `connected` or the error.
fn connect_line(port: u16) -> Value {
    let python = aquaregia_test_support::deps::dep("AQUAREGIA_PYTHON");
    let script = format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 5)\n    \
         print('connected')\nexcept OSError as e:\n    print('refused:', e)"
    );
    json!({"command": python, "args": ["-c", script]})
}

/// The local `run_command` of `aquaregia acp` (the client has no terminal) runs confined by
/// the binary itself (`aquaregia __sandbox`, Landlock): it writes in the workspace and the
/// temp directory, not elsewhere, and the tool call says so. Skipped (with a message) on a
/// kernel without Landlock, where the tool call must say the command runs unconfined.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_local_command_cannot_write_outside_the_workspace() {
    let scratch = Scratch::new();
    let (workspace, temp, outside) = (
        scratch.path.join("project"),
        scratch.path.join("tmp"),
        scratch.path.join("outside"),
    );
    for dir in [&workspace, &temp, &outside] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let (workspace, temp, outside) = (
        workspace.canonicalize().unwrap(),
        temp.canonicalize().unwrap(),
        outside.canonicalize().unwrap(),
    );
    let marker = marker("acp-bin-sandbox");
    let _kill = KillMarked(marker.clone());
    let mock = MockServer::start().await;
    // The allowed temp directory is the agent's; the outside directory is under neither it
    // nor the workspace.
    let (client, session) =
        sandboxed_agent(&scratch, &mock, &marker, (&workspace, &temp), &[]).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let pwned = outside.join("pwned.txt");
    mock.push(Reply::tool_call(
        "call-1",
        "run_command",
        json!({"command": format!("echo pwned > '{}'", pwned.display())}),
    ))
    .push(Reply::tool_call(
        "call-2",
        "run_command",
        json!({"command": "echo in > inside.txt && echo temp > \"$TMPDIR/t.txt\" && ls -la"}),
    ))
    .push(Reply::tool_call(
        "call-3",
        "run_command",
        connect_line(port),
    ))
    .push(Reply::text("Done."));
    let answer = client.prompt(&session, "go").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let told = announced(&client, &session, "call-1");
    let requests = mock.bodies();
    let denied = content_text(tool_messages(&requests[1]).last().unwrap());
    let allowed = content_text(tool_messages(&requests[2]).last().unwrap());
    let connected = content_text(tool_messages(&requests[3]).last().unwrap());
    client.close_write().await;
    assert!(client.wait_exit(PROMPTLY).await.success());
    if told.contains("Runs unconfined: this kernel has no Landlock.") {
        eprintln!("skipped: this kernel has no Landlock (the tool call says so: {told})");
        return;
    }
    assert!(
        told.contains(&format!(
            "Runs confined (Landlock): writes only to {} and {}.",
            workspace.display(),
            temp.display()
        )),
        "{told}"
    );
    assert!(!pwned.exists(), "written outside the workspace: {denied}");
    assert!(
        denied.contains("Permission denied") && !denied.contains("[exit code 0]"),
        "{denied}"
    );
    assert!(
        allowed.contains("inside.txt") && allowed.contains("[exit code 0]"),
        "{allowed}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("inside.txt")).unwrap(),
        "in\n"
    );
    assert_eq!(
        std::fs::read_to_string(temp.join("t.txt")).unwrap(),
        "temp\n"
    );
    assert!(
        connected.contains("connected"),
        "the network is allowed by default: {connected}"
    );
}

/// `aquaregia acp --no-network`: a local command cannot open a TCP connection (Landlock ABI
/// 4). Skipped (with a message) where the kernel cannot block it, and the tool call must then
/// say so.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_network_keeps_local_commands_off_tcp() {
    let scratch = Scratch::new();
    let (workspace, temp) = (scratch.path.join("project"), scratch.path.join("tmp"));
    for dir in [&workspace, &temp] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let marker = marker("acp-bin-no-network");
    let _kill = KillMarked(marker.clone());
    let mock = MockServer::start().await;
    let (client, session) = sandboxed_agent(
        &scratch,
        &mock,
        &marker,
        (&workspace, &temp),
        &["--no-network"],
    )
    .await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    mock.push(Reply::tool_call(
        "call-1",
        "run_command",
        connect_line(port),
    ))
    .push(Reply::text("Done."));
    let answer = client.prompt(&session, "go").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let told = announced(&client, &session, "call-1");
    let ran = content_text(tool_messages(&mock.bodies()[1]).last().unwrap());
    client.close_write().await;
    assert!(client.wait_exit(PROMPTLY).await.success());
    if told.contains("unconfined") || told.contains("the network is not blocked") {
        eprintln!("skipped: this kernel cannot block TCP (the tool call says so: {told})");
        return;
    }
    assert!(told.contains("; no TCP network."), "{told}");
    assert!(
        ran.contains("refused:") && ran.contains("Permission denied"),
        "{ran}"
    );
}
