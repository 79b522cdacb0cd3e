//! One client-side MCP registration (one `serverId`, stateless binding) declared in two
//! sessions: the agent keeps its inner `requestId`s unique per server across sessions (the
//! SDKs reject duplicates among active requests), routes each subscription's notifications
//! to its own session, and closing one session leaves the other's routing intact.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::Notify;

use aquaregia_test_support::mock_model::{MockServer, Reply, tool_names};
use support::agent_for;
use support::raw::{RawClient, error, ok};

const SERVER: &str = "shared-registration";

#[derive(Default)]
struct Registry {
    /// Active (unanswered) inner requests: `requestId` -> outer id.
    active: HashMap<String, Value>,
    violations: Vec<Value>,
    /// `subscriptions/listen` request ids, in arrival order.
    listens: Vec<String>,
    extra_tool: bool,
}

fn notification(request_id: &str, method: &str, params: Value) -> Value {
    let mut message = json!({"jsonrpc": "2.0", "method": "mcp/message", "params": {
        "serverId": SERVER, "requestId": request_id, "method": method}});
    message["params"]["params"] = params;
    message
}

impl Registry {
    fn handle(&mut self, request: &Value) -> Option<Value> {
        let params = &request["params"];
        if request["method"] != "mcp/message" || params["serverId"] != SERVER {
            return None;
        }
        let request_id = params["requestId"].as_str()?.to_owned();
        if self.active.contains_key(&request_id) {
            self.violations.push(request.clone());
            return Some(error(request, -32602, "duplicate active MCP request ID"));
        }
        let outcome = match params["method"].as_str().unwrap_or_default() {
            "subscriptions/listen" => {
                self.active
                    .insert(request_id.clone(), request["id"].clone());
                self.listens.push(request_id.clone());
                // Acknowledged, and kept open.
                return Some(json!([notification(
                    &request_id,
                    "notifications/subscriptions/acknowledged",
                    json!({"notifications": params["params"]["notifications"],
                           "_meta": {"io.modelcontextprotocol/subscriptionId": request_id}}),
                )]));
            }
            "tools/list" => {
                let mut tools = vec![json!({"name": "probe", "inputSchema": {"type": "object"},
                                            "annotations": {"readOnlyHint": true}})];
                if self.extra_tool {
                    tools.push(json!({"name": "extra", "inputSchema": {"type": "object"},
                                      "annotations": {"readOnlyHint": true}}));
                }
                json!({"result": {"resultType": "complete", "tools": tools}})
            }
            "tools/call" => json!({"result": {"resultType": "complete",
                                              "content": [{"type": "text", "text": "probed"}]}}),
            _ => json!({"error": {"code": -32601, "message": "Method not found"}}),
        };
        Some(ok(request, outcome))
    }
}

/// Runs a prompt in `session` whose first model step (a call to `ws__probe`) is held until
/// the tool list has changed and `subscription` was told; returns the tools of both steps.
async fn prompt_with_change(
    client: &RawClient,
    mock: &MockServer,
    registry: &Mutex<Registry>,
    session: &str,
    subscription: &str,
) -> (Vec<String>, Vec<String>) {
    let gate = Arc::new(Notify::new());
    let before = mock.request_count();
    mock.push(Reply::Gated(
        gate.clone(),
        Box::new(Reply::tool_call("call", "ws__probe", json!({}))),
    ))
    .push(Reply::text("Done."));
    let prompt = client.start_prompt(session, "probe").await;
    mock.wait_requests(before + 1).await;
    registry.lock().unwrap().extra_tool = true;
    client
        .send(&notification(
            subscription,
            "notifications/tools/list_changed",
            json!({"_meta": {"io.modelcontextprotocol/subscriptionId": subscription}}),
        ))
        .await;
    support::settle().await;
    gate.notify_one();
    let answer = client.response(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = mock.bodies();
    (
        tool_names(&requests[before]),
        tool_names(&requests[before + 1]),
    )
}

fn declaration() -> Value {
    json!([{"type": "acp", "name": "ws", "serverId": SERVER}])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_registration_in_two_sessions() {
    let mock = MockServer::start().await;
    let client = RawClient::connect(agent_for(&mock).trust_server("ws"));
    let registry = Arc::new(Mutex::new(Registry::default()));
    client.set_handler({
        let registry = registry.clone();
        move |request| registry.lock().unwrap().handle(request)
    });
    client.initialize().await;
    let first = client.new_session("/tmp", declaration()).await;
    // Subscriptions open in the background: the first one is in before the second session
    // starts, so `listens` is in session order.
    aquaregia_test_support::acp_client::eventually("the first subscription", || {
        !registry.lock().unwrap().listens.is_empty()
    })
    .await;
    let second = client.new_session("/tmp", declaration()).await;
    // Subscriptions open in the background: connecting never waits for their acknowledgment.
    aquaregia_test_support::acp_client::eventually("both subscriptions", || {
        registry.lock().unwrap().listens.len() >= 2
    })
    .await;
    let (listen_first, listen_second) = {
        let registry = registry.lock().unwrap();
        assert!(
            registry.violations.is_empty(),
            "active requestIds collided: {:#?}",
            registry.violations
        );
        assert_eq!(registry.listens.len(), 2, "each session subscribes");
        (registry.listens[0].clone(), registry.listens[1].clone())
    };
    assert_ne!(listen_first, listen_second);

    // Both sessions have seen the tool list.
    mock.push(Reply::text("First done."));
    let answer = client.prompt(&first, "hello").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(tool_names(&mock.bodies()[0]), ["ws__probe"]);

    // A change announced on the second session's subscription reaches the second session...
    let (before, after) =
        prompt_with_change(&client, &mock, &registry, &second, &listen_second).await;
    assert_eq!(before, ["ws__probe"]);
    assert_eq!(after, ["ws__probe", "ws__extra"]);

    // ...and not the first one, which was not told.
    mock.push(Reply::text("First again."));
    let answer = client.prompt(&first, "hello again").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(tool_names(&mock.bodies()[3]), ["ws__probe"]);

    // Closing the second session leaves the first one's subscription routed.
    let closed = client
        .request("session/close", json!({"sessionId": second}))
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    registry.lock().unwrap().extra_tool = false;
    let (before, after) =
        prompt_with_change(&client, &mock, &registry, &first, &listen_first).await;
    assert_eq!(before, ["ws__probe"]);
    assert_eq!(after, ["ws__probe", "ws__extra"]);
    assert!(registry.lock().unwrap().violations.is_empty());
    client.finish().await.unwrap();
}
