//! Stateless MCP-over-ACP with the official Rust SDK's client role: an in-process ACP client
//! that serves an MCP server (`McpServer::new_service`, attached to `session/new` with
//! `with_mcp_server`) to the agent over in-memory byte streams, with a mock model calling the
//! client's tool.

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::mcp_server::{
    McpOutcome, McpRequest, McpRequestContext, McpServer, McpService,
};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, InitializeRequest, McpError, StopReason,
};
use agent_client_protocol::v1::{ActiveSession, SessionMessage, SessionSetup};
use agent_client_protocol::{Agent, ByteStreams, Client, Dispatch, Error, NullRun};
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio::sync::Notify;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use aquaregia_test_support::mock_model::{MockServer, Reply, tool_names};
use support::{BOUND, agent_for, serve_in_memory, tool_updates};

/// Open `subscriptions/listen` requests: subscription id and the request's context.
type Listeners = Arc<Mutex<Vec<(String, McpRequestContext<Agent>)>>>;

/// The client's MCP server: `write_file` (and `grep` once enabled), recording every call and
/// keeping `subscriptions/listen` streams open to announce list changes.
#[derive(Clone, Default)]
struct Workspace {
    methods: Arc<Mutex<Vec<String>>>,
    calls: Arc<Mutex<Vec<(String, Value)>>>,
    grep_enabled: Arc<AtomicBool>,
    /// `wait_forever` calls that saw their cancellation.
    cancelled: Arc<Mutex<Vec<String>>>,
    listeners: Listeners,
}

fn object(value: Value) -> Option<Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

impl Workspace {
    fn tools(&self) -> Value {
        let mut tools = vec![json!({
            "name": "write_file",
            "description": "Writes a file in the editor's workspace",
            "inputSchema": {"type": "object",
                            "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                            "required": ["path", "text"]},
        })];
        tools.push(json!({
            "name": "wait_forever",
            "description": "Never answers",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true},
        }));
        if self.grep_enabled.load(Ordering::SeqCst) {
            tools.push(json!({
                "name": "grep",
                "description": "Searches the workspace",
                "inputSchema": {"type": "object", "properties": {"pattern": {"type": "string"}}},
                "annotations": {"readOnlyHint": true},
            }));
        }
        json!({"resultType": "complete", "tools": tools})
    }

    /// Announces a tool list change on every open subscription; returns how many there were.
    async fn announce_list_changed(&self) -> usize {
        let listeners = self.listeners.lock().unwrap().clone();
        for (subscription, context) in &listeners {
            context
                .send_notification(
                    "notifications/tools/list_changed",
                    object(
                        json!({"_meta": {"io.modelcontextprotocol/subscriptionId": subscription}}),
                    ),
                )
                .await
                .expect("list_changed sent");
        }
        listeners.len()
    }
}

impl McpService<Agent> for Workspace {
    fn execute(
        &self,
        request: McpRequest,
        context: McpRequestContext<Agent>,
    ) -> BoxFuture<'static, Result<McpOutcome, Error>> {
        let this = self.clone();
        Box::pin(async move {
            this.methods.lock().unwrap().push(request.method.clone());
            let params = Value::Object(request.params.unwrap_or_default());
            let outcome = match request.method.as_str() {
                "server/discover" => McpOutcome::Result(json!({
                    "resultType": "complete",
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {"listChanged": true}},
                    "ttlMs": 0,
                    "cacheScope": "private",
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "workspace", "version": "1"}},
                })),
                "tools/list" => McpOutcome::Result(this.tools()),
                "tools/call" => {
                    let name = params["name"].as_str().unwrap_or_default().to_owned();
                    let arguments = params["arguments"].clone();
                    this.calls
                        .lock()
                        .unwrap()
                        .push((name.clone(), arguments.clone()));
                    if name == "wait_forever" {
                        let cancelled = tokio::time::timeout(
                            BOUND,
                            context.operation_cancellation().cancelled(),
                        )
                        .await;
                        if cancelled.is_ok() {
                            this.cancelled.lock().unwrap().push(name);
                        }
                        return Err(Error::request_cancelled());
                    }
                    McpOutcome::Result(json!({
                        "resultType": "complete",
                        "content": [{"type": "text",
                                     "text": format!("{name} ran in the client with {arguments}")}],
                    }))
                }
                "subscriptions/listen" => {
                    // The subscription id is the inner request id.
                    let subscription = context.request_id().to_string();
                    context
                        .send_notification(
                            "notifications/subscriptions/acknowledged",
                            object(json!({
                                "notifications": params["notifications"],
                                "_meta": {"io.modelcontextprotocol/subscriptionId": subscription},
                            })),
                        )
                        .await?;
                    this.listeners
                        .lock()
                        .unwrap()
                        .push((subscription, context.clone()));
                    context.operation_cancellation().cancelled().await;
                    return Err(Error::request_cancelled());
                }
                _ => McpOutcome::Error(McpError::new(-32601, "Method not found")),
            };
            Ok(outcome)
        })
    }
}

/// What one prompt turn produced, in arrival order.
#[derive(Debug)]
enum Seen {
    Update(Value),
    Permission(Value),
}

/// Reads one turn: answers permission requests with `answer` (an option id), collects
/// updates, returns them with the stop reason.
async fn read_turn(
    session: &mut ActiveSession<'_, Agent>,
    answer: &str,
) -> Result<(Vec<Seen>, StopReason), Error> {
    let mut seen = Vec::new();
    loop {
        let message = tokio::time::timeout(BOUND, session.read_update())
            .await
            .expect("the turn went on too long")?;
        match message {
            SessionMessage::Message(Dispatch::Request(request, responder)) => {
                assert_eq!(request.method(), "session/request_permission");
                seen.push(Seen::Permission(request.params().clone()));
                responder
                    .respond(json!({"outcome": {"outcome": "selected", "optionId": answer}}))?;
            }
            SessionMessage::Message(Dispatch::Notification(notification)) => {
                assert_eq!(notification.method(), "session/update");
                seen.push(Seen::Update(notification.params()["update"].clone()));
            }
            SessionMessage::PromptResponse(response) => {
                return Ok((seen, response?.stop_reason));
            }
            other => panic!("unexpected session message {other:?}"),
        }
    }
}

fn permissions(seen: &[Seen]) -> Vec<&Value> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::Permission(p) => Some(p),
            Seen::Update(_) => None,
        })
        .collect()
}

fn updates(seen: &[Seen]) -> Vec<Value> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::Update(u) => Some(u.clone()),
            Seen::Permission(_) => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_rust_sdk_client_serves_tools_to_the_agent_over_acp() {
    let mock = MockServer::start().await;
    let write = |id: &str, path: &str| {
        Reply::tool_call(id, "ws__write_file", json!({"path": path, "text": "hello"}))
    };
    // Prompt 1: one call, allowed once. Prompt 2: asked again, allowed always.
    mock.push(write("call-1", "/work/a.txt"))
        .push(Reply::text("Wrote a.txt."));
    mock.push(write("call-2", "/work/b.txt"))
        .push(Reply::text("Wrote b.txt."));
    // Prompt 3: no question; the list changes while step 2 is pending.
    let gate = Arc::new(Notify::new());
    mock.push(write("call-3", "/work/c.txt"))
        .push(Reply::Gated(
            gate.clone(),
            Box::new(write("call-4", "/work/d.txt")),
        ))
        .push(Reply::text("All written."));

    let (client_end, serve) = serve_in_memory(agent_for(&mock));
    let (read, write_half) = tokio::io::split(client_end);
    let transport = ByteStreams::new(write_half.compat_write(), read.compat());
    // "Always" answers are kept in the session directory's `.aquaregia/`: a scratch one.
    let scratch = tempfile::tempdir().unwrap();
    let cwd = scratch.path().to_path_buf();
    let workspace = Workspace::default();
    let service = workspace.clone();
    let mock_ref = &mock;
    let workspace_ref = &workspace;

    let outcome = Client
        .v1()
        .connect_with(transport, async move |cx| {
            let workspace = workspace_ref;
            let init = cx
                .send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let init = serde_json::to_value(&init).unwrap();
            assert_eq!(init["agentCapabilities"]["mcpCapabilities"]["acp"], true);

            cx.build_session(cwd.clone())
                .with_mcp_server(McpServer::new_service("ws", service, NullRun))?
                .block_task()
                .run_until(async |setup| {
                    let SessionSetup { mut session, .. } = setup;

                    // Prompt 1: permission asked, allowed once; the tool runs in the client.
                    session.send_prompt("Write a.txt")?;
                    let (seen, stop) = read_turn(&mut session, "allow_once").await?;
                    assert_eq!(stop, StopReason::EndTurn);
                    let asked = permissions(&seen);
                    assert_eq!(asked.len(), 1, "{seen:#?}");
                    assert_eq!(asked[0]["toolCall"]["toolCallId"], "call-1");
                    assert_eq!(
                        asked[0]["toolCall"]["rawInput"],
                        json!({"path": "/work/a.txt", "text": "hello"}),
                        "the arguments are shown before approval"
                    );
                    let kinds: Vec<String> = asked[0]["options"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|o| o["kind"].as_str().unwrap().to_owned())
                        .collect();
                    assert_eq!(
                        kinds,
                        ["allow_once", "allow_always", "reject_once", "reject_always"]
                    );
                    // tool_call (pending) -> permission -> in_progress -> completed.
                    let order: Vec<String> = seen
                        .iter()
                        .filter_map(|s| match s {
                            Seen::Permission(_) => Some("permission".to_owned()),
                            Seen::Update(u) if u["toolCallId"] == "call-1" => Some(format!(
                                "{}:{}",
                                u["sessionUpdate"].as_str().unwrap(),
                                // A `tool_call` without status is `pending`, the default.
                                u["status"].as_str().unwrap_or(
                                    if u["sessionUpdate"] == "tool_call" {
                                        "pending"
                                    } else {
                                        "-"
                                    }
                                )
                            )),
                            Seen::Update(_) => None,
                        })
                        .collect();
                    assert_eq!(
                        order,
                        [
                            "tool_call:pending",
                            "permission",
                            "tool_call_update:in_progress",
                            "tool_call_update:completed"
                        ]
                    );
                    let calls = tool_updates(&updates(&seen));
                    assert_eq!(calls[0]["title"], "write_file: /work/a.txt");
                    assert_eq!(
                        calls[0]["rawInput"],
                        json!({"path": "/work/a.txt", "text": "hello"})
                    );
                    let completed = &calls[2];
                    let text = completed["content"][0]["content"]["text"]
                        .as_str()
                        .unwrap_or_default();
                    assert!(text.contains("write_file ran in the client"), "{completed}");
                    assert_eq!(
                        workspace.calls.lock().unwrap().clone(),
                        [(
                            "write_file".to_owned(),
                            json!({"path": "/work/a.txt", "text": "hello"})
                        )]
                    );
                    let answer: String = updates(&seen)
                        .iter()
                        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
                        .filter_map(|u| u["content"]["text"].as_str().map(str::to_owned))
                        .collect();
                    assert_eq!(answer, "Wrote a.txt.");

                    // Prompt 2: "allow once" was not remembered; answer "allow always".
                    session.send_prompt("Write b.txt")?;
                    let (seen, stop) = read_turn(&mut session, "allow_always").await?;
                    assert_eq!(stop, StopReason::EndTurn);
                    assert_eq!(permissions(&seen).len(), 1, "{seen:#?}");

                    // Prompt 3: remembered, no question; a list change mid-prompt reaches the
                    // next model request.
                    session.send_prompt("Write c.txt and d.txt")?;
                    let (turn, ()) = tokio::join!(read_turn(&mut session, "reject_once"), async {
                        // Step 2's model request is pending behind the gate.
                        mock_ref.wait_requests(6).await;
                        workspace.grep_enabled.store(true, Ordering::SeqCst);
                        assert_eq!(
                            workspace.announce_list_changed().await,
                            1,
                            "the agent keeps one subscriptions/listen open"
                        );
                        support::settle().await;
                        gate.notify_one();
                    });
                    let (seen, stop) = turn?;
                    assert_eq!(stop, StopReason::EndTurn);
                    assert!(
                        permissions(&seen).is_empty(),
                        "allow_always is remembered: {seen:#?}"
                    );
                    let statuses: Vec<Value> = tool_updates(&updates(&seen))
                        .iter()
                        .filter(|u| u["status"] == "completed")
                        .map(|u| u["toolCallId"].clone())
                        .collect();
                    assert_eq!(statuses, [json!("call-3"), json!("call-4")]);
                    Ok(())
                })
                .await
        })
        .await;
    outcome.expect("the client ran to completion");

    // The client closed the connection: `serve` returns.
    tokio::time::timeout(BOUND, serve)
        .await
        .expect("serve returned")
        .expect("no panic")
        .expect("clean end");

    let requests = mock.bodies();
    assert_eq!(requests.len(), 7);
    for (index, request) in requests.iter().enumerate() {
        assert_eq!(request["stream"], true);
        let names = tool_names(request);
        assert!(names.contains(&"ws__write_file".to_owned()), "{names:?}");
        assert_eq!(
            names.contains(&"ws__grep".to_owned()),
            index == 6,
            "request {index}: only the one after the list change has grep: {names:?}"
        );
    }
    assert_eq!(workspace.calls.lock().unwrap().len(), 4);
    // The stateless binding: no `initialize`, discovery and a list-change subscription.
    let methods = workspace.methods.lock().unwrap().clone();
    assert!(!methods.contains(&"initialize".to_owned()), "{methods:?}");
    assert!(
        methods.contains(&"server/discover".to_owned()),
        "{methods:?}"
    );
    assert!(
        methods.contains(&"subscriptions/listen".to_owned()),
        "{methods:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelling_a_prompt_cancels_the_clients_mcp_request() {
    let mock = MockServer::start().await;
    mock.push(Reply::tool_call("call-1", "ws__wait_forever", json!({})));
    let (client_end, serve) = serve_in_memory(agent_for(&mock).trust_server("ws"));
    let (read, write_half) = tokio::io::split(client_end);
    let transport = ByteStreams::new(write_half.compat_write(), read.compat());
    let scratch = tempfile::tempdir().unwrap();
    let cwd = scratch.path().to_path_buf();
    let workspace = Workspace::default();
    let service = workspace.clone();
    let workspace_ref = &workspace;

    Client
        .v1()
        .connect_with(transport, async move |cx| {
            let workspace = workspace_ref;
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            cx.build_session(cwd.clone())
                .with_mcp_server(McpServer::new_service("ws", service, NullRun))?
                .block_task()
                .run_until(async |setup| {
                    let SessionSetup { mut session, .. } = setup;
                    session.send_prompt("Wait")?;
                    support::eventually("the call to reach the client", || {
                        !workspace.calls.lock().unwrap().is_empty()
                    })
                    .await;
                    session
                        .connection()
                        .send_notification(CancelNotification::new(session.session_id().clone()))?;
                    let (seen, stop) = read_turn(&mut session, "reject_once").await?;
                    assert_eq!(stop, StopReason::Cancelled, "{seen:#?}");
                    let last = tool_updates(&updates(&seen)).pop().unwrap();
                    assert_eq!(last["status"], "failed", "{seen:#?}");
                    // The agent withdrew the inner request: the client's operation was
                    // cancelled rather than left running.
                    support::eventually("the client's operation to be cancelled", || {
                        !workspace.cancelled.lock().unwrap().is_empty()
                    })
                    .await;
                    Ok(())
                })
                .await
        })
        .await
        .expect("the client ran to completion");
    tokio::time::timeout(BOUND, serve)
        .await
        .expect("serve returned")
        .expect("no panic")
        .expect("clean end");
}
