//! The connect-based MCP-over-ACP binding (the original RFD; older SDKs), against a
//! hand-written JSON-RPC client: no SDK on the client side, raw newline-delimited JSON.

use crate::support;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::Notify;

use aquaregia_test_support::mock_model::{MockServer, Reply, tool_names};
use support::raw::{RawClient, error, ok};
use support::{agent_for, tool_updates, updates};

/// The client's side of the binding: answers the stateless probe with -32601, then serves
/// a 2025-11-25 MCP session per `mcp/connect`.
#[derive(Default)]
struct Editor {
    connections: usize,
    extra_tool: bool,
    calls: Vec<(String, Value)>,
}

impl Editor {
    fn handle(&mut self, request: &Value) -> Option<Value> {
        let params = &request["params"];
        match request["method"].as_str()? {
            // The stateless probe: this client does not know that binding.
            "mcp/message" if params.get("connectionId").is_none() => {
                Some(error(request, -32601, "Method not found"))
            }
            "mcp/connect" => {
                self.connections += 1;
                Some(ok(
                    request,
                    json!({"connectionId": format!("conn-{}", self.connections)}),
                ))
            }
            "mcp/disconnect" => Some(ok(request, json!({}))),
            "mcp/message" => Some(self.mcp(request)),
            "session/request_permission" => Some(ok(
                request,
                json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
            )),
            _ => None,
        }
    }

    /// One inner MCP request: the ACP result is the MCP result, MCP errors are ACP errors.
    fn mcp(&mut self, request: &Value) -> Value {
        let params = &request["params"];
        match params["method"].as_str().unwrap_or_default() {
            "server/discover" => error(request, -32601, "Method not found"),
            "initialize" => ok(
                request,
                json!({"protocolVersion": "2025-11-25",
                       "capabilities": {"tools": {"listChanged": true}},
                       "serverInfo": {"name": "raw-editor", "version": "1"}}),
            ),
            "tools/list" => {
                let mut tools = vec![json!({
                    "name": "lookup", "description": "Looks a symbol up",
                    "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
                })];
                if self.extra_tool {
                    tools.push(json!({
                        "name": "added", "description": "Appeared later",
                        "inputSchema": {"type": "object"},
                    }));
                }
                ok(request, json!({"tools": tools}))
            }
            "tools/call" => {
                let name = params["params"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                self.calls
                    .push((name.clone(), params["params"]["arguments"].clone()));
                ok(
                    request,
                    json!({"content": [{"type": "text", "text": format!("{name} answered")}]}),
                )
            }
            "ping" => ok(request, json!({})),
            _ => error(request, -32601, "Method not found"),
        }
    }
}

fn acp_entry(name: &str, server_id: &str) -> Value {
    json!({"type": "acp", "name": name, "serverId": server_id})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_connect_based_binding_runs_a_full_mcp_session() {
    let mock = MockServer::start().await;
    let gate = Arc::new(Notify::new());
    mock.push(Reply::tool_call(
        "call-1",
        "editor__lookup",
        json!({"query": "main"}),
    ))
    .push(Reply::Gated(
        gate.clone(),
        Box::new(Reply::tool_call(
            "call-2",
            "editor__lookup",
            json!({"query": "again"}),
        )),
    ))
    .push(Reply::text("Found it."));

    let client = RawClient::connect(agent_for(&mock));
    let editor = Arc::new(Mutex::new(Editor::default()));
    client.set_handler({
        let editor = editor.clone();
        move |request| editor.lock().unwrap().handle(request)
    });
    client.initialize().await;
    let session = client
        .new_session("/tmp", json!([acp_entry("editor", "srv-1")]))
        .await;

    // Probe, fallback, connect, then the MCP handshake over the connection.
    let log = client.log();
    let probe = log
        .iter()
        .position(|m| m["method"] == "mcp/message" && m["params"]["serverId"] == "srv-1")
        .expect("a stateless probe");
    assert_eq!(log[probe]["params"]["method"], "server/discover");
    assert!(log[probe]["params"]["requestId"].is_string());
    let connect = log
        .iter()
        .position(|m| m["method"] == "mcp/connect")
        .expect("mcp/connect");
    assert!(probe < connect);
    assert_eq!(
        log[connect]["params"],
        json!({"acpId": "srv-1", "serverId": "srv-1"})
    );
    let inner: Vec<(&str, bool)> = log
        .iter()
        .filter(|m| m["method"] == "mcp/message" && m["params"]["connectionId"] == "conn-1")
        .map(|m| {
            (
                m["params"]["method"].as_str().unwrap(),
                m.get("id").is_some(),
            )
        })
        .collect();
    assert_eq!(
        &inner[..3],
        [
            ("server/discover", true),
            ("initialize", true),
            ("notifications/initialized", false)
        ],
        "{inner:?}"
    );
    let initialize = log
        .iter()
        .find(|m| m["params"]["method"] == "initialize")
        .unwrap();
    assert_eq!(
        initialize["params"]["params"]["protocolVersion"],
        "2025-11-25"
    );

    // A client -> agent MCP request on the connection is answered.
    let ping = client
        .request(
            "mcp/message",
            json!({"connectionId": "conn-1", "method": "ping", "params": {}}),
        )
        .await;
    assert_eq!(ping["result"], json!({}), "{ping}");

    // The prompt; the tool list changes while step 2 is pending.
    let prompt = client.start_prompt(&session, "Look main up").await;
    mock.wait_requests(2).await;
    editor.lock().unwrap().extra_tool = true;
    client
        .notify(
            "mcp/message",
            json!({"connectionId": "conn-1", "method": "notifications/tools/list_changed"}),
        )
        .await;
    support::settle().await;
    gate.notify_one();
    let answer = client.response(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let requests = mock.bodies();
    assert_eq!(requests.len(), 3);
    assert_eq!(tool_names(&requests[0]), ["editor__lookup"]);
    assert_eq!(tool_names(&requests[1]), ["editor__lookup"]);
    assert_eq!(
        tool_names(&requests[2]),
        ["editor__lookup", "editor__added"],
        "the request after list_changed lists the new tool"
    );
    assert_eq!(
        editor.lock().unwrap().calls,
        [
            ("lookup".to_owned(), json!({"query": "main"})),
            ("lookup".to_owned(), json!({"query": "again"}))
        ]
    );
    let statuses: Vec<String> = tool_updates(&updates(&client.log(), &session))
        .iter()
        .map(|u| format!("{}:{}", u["toolCallId"], u["status"]))
        .collect();
    assert_eq!(
        statuses,
        [
            r#""call-1":"pending""#,
            r#""call-1":"in_progress""#,
            r#""call-1":"completed""#,
            r#""call-2":"pending""#,
            r#""call-2":"in_progress""#,
            r#""call-2":"completed""#
        ]
    );

    // The binding is remembered: a later session's acp server is connected without a probe.
    let second = client
        .new_session("/tmp", json!([acp_entry("other", "srv-2")]))
        .await;
    let log = client.log();
    assert!(
        !log.iter()
            .any(|m| m["method"] == "mcp/message" && m["params"]["serverId"] == "srv-2"),
        "no stateless probe the second time"
    );
    assert!(
        log.iter()
            .any(|m| m["method"] == "mcp/connect" && m["params"]["serverId"] == "srv-2")
    );

    // Closing the first session disconnects its connection (and only it).
    let closed = client
        .request("session/close", json!({"sessionId": session}))
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    support::eventually("mcp/disconnect for conn-1", || {
        client.log().iter().any(|m| {
            m["method"] == "mcp/disconnect" && m["params"] == json!({"connectionId": "conn-1"})
        })
    })
    .await;
    assert!(
        !client
            .log()
            .iter()
            .any(|m| m["method"] == "mcp/disconnect" && m["params"]["connectionId"] == "conn-2")
    );
    // The closed session is gone; the other one still answers.
    let gone = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    assert!(gone.get("error").is_some(), "{gone}");
    mock.push(Reply::text("Still here."));
    let still = client.prompt(&second, "hi").await;
    assert_eq!(still["result"]["stopReason"], "end_turn", "{still}");

    client.finish().await.expect("clean end of input");
}
