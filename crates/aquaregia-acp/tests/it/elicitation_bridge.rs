//! Elicitation: an MCP server's question to the user (form or URL) reaches the official Rust
//! SDK's client role as `elicitation/create` when it advertises elicitation, tied to the tool
//! call that asked, and the client's answer returns to the server. A client without the
//! capability gets simple questions (a URL, a form its defaults answer) as
//! `session/request_permission`, and the rest are declined without asking.

use crate::support;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ElicitationCapabilities, ElicitationFormCapabilities,
    ElicitationUrlCapabilities, EnvVariable, InitializeRequest, McpServer, McpServerStdio,
    NewSessionRequest, StopReason,
};
use agent_client_protocol::v1::{ActiveSession, SessionMessage, SessionSetup};
use agent_client_protocol::{Agent, ByteStreams, Client, Dispatch, Error};
use serde_json::{Value, json};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::model::{Model, tool_results};
use support::raw::{RawClient, ok};
use support::{BOUND, serve_in_memory};

/// A 2025-11-25 stdio MCP server whose read-only tool `ask {mode}` asks the user through
/// `elicitation/create` (`form`: a name, required, and an age; `confirm`: a yes/no with a
/// default; `url`: a sign-in page) and returns what came back: the action, then the content
/// as sorted JSON. It refuses to ask a client that did not advertise elicitation. When the
/// sign-in page is accepted, it says the sign-in is done (`notifications/elicitation/complete`
/// for `e-1`), after a completion for an id it never asked about (`e-other`).
const ASKING_SERVER: &str = r#"
import json, sys
SCHEMAS = {
    "form": {"type": "object", "properties": {
        "name": {"type": "string", "title": "Your name"},
        "age": {"type": "integer", "default": 30}}, "required": ["name"]},
    "confirm": {"type": "object", "properties": {
        "proceed": {"type": "boolean", "title": "Proceed?", "default": True}},
        "required": ["proceed"]},
}
def send(message):
    print(json.dumps(message), flush=True)
def answer(mid, text):
    send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
capabilities, pending, asked, url_asks = {}, {}, 0, set()
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method is None and mid in pending:
        call = pending.pop(mid)
        if "error" in msg:
            answer(call, "error " + msg["error"]["message"])
        else:
            result = msg["result"]
            text = result["action"]
            if mid in url_asks and text == "accept":
                for done in ["e-other", "e-1"]:
                    send({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                          "params": {"elicitationId": done}})
            if result.get("content") is not None:
                text += " " + json.dumps(result["content"], sort_keys=True)
            answer(call, text)
    elif method == "initialize":
        capabilities = msg["params"].get("capabilities") or {}
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "asker", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "ask", "description": "Asks the user",
             "inputSchema": {"type": "object", "properties": {"mode": {"type": "string"}}},
             "annotations": {"readOnlyHint": True}}]}})
    elif method == "tools/call":
        mode = (msg["params"].get("arguments") or {}).get("mode", "form")
        if "elicitation" not in capabilities:
            answer(mid, "the client cannot be asked")
            continue
        asked += 1
        ask_id = "ask-%d" % asked
        pending[ask_id] = mid
        if mode == "url":
            url_asks.add(ask_id)
            params = {"mode": "url", "message": "Sign in to continue",
                      "url": "https://auth.example/start", "elicitationId": "e-1"}
        else:
            params = {"mode": "form", "message": "Who are you?" if mode == "form" else "Go on?",
                      "requestedSchema": SCHEMAS[mode]}
        send({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create", "params": params})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})
"#;

fn asker(marker: &str) -> McpServer {
    McpServer::Stdio(
        McpServerStdio::new("asker", "python3")
            .args(vec!["-c".into(), ASKING_SERVER.into()])
            .env(vec![EnvVariable::new("AQUAREGIA_TEST_MARKER", marker)]),
    )
}

/// What the client saw during one turn: requests from the agent by method, with their
/// params, in order.
type Asked = Vec<(String, Value)>;

/// Reads one turn, answering each request from the agent with `answer(method, params)`.
async fn read_turn(
    session: &mut ActiveSession<'_, Agent>,
    mut answer: impl FnMut(&str, &Value) -> Value,
) -> Result<(Asked, StopReason), Error> {
    let mut asked = Vec::new();
    loop {
        let message = tokio::time::timeout(BOUND, session.read_update())
            .await
            .expect("the turn went on too long")?;
        match message {
            SessionMessage::Message(Dispatch::Request(request, responder)) => {
                let method = request.method().to_owned();
                let params = request.params().clone();
                responder.respond(answer(&method, &params))?;
                asked.push((method, params));
            }
            SessionMessage::Message(Dispatch::Notification(_)) => {}
            SessionMessage::PromptResponse(response) => {
                return Ok((asked, response?.stop_reason));
            }
            other => panic!("unexpected session message {other:?}"),
        }
    }
}

/// The result the model was given for tool call `id`, in the last request.
fn result_of(model: &Model, id: &str) -> String {
    let requests = model.requests();
    let last = requests.last().expect("the model was called");
    tool_results(last)
        .into_iter()
        .find(|(call, _)| call == id)
        .unwrap_or_else(|| panic!("no result for {id}: {last:?}"))
        .1
}

async fn run_client(
    model: &Model,
    capabilities: ClientCapabilities,
    marker: &str,
    turns: impl AsyncFnOnce(&mut ActiveSession<'_, Agent>) -> Result<(), Error>,
) {
    let (client_end, serve) = serve_in_memory(model.agent().trust_server("asker"));
    let (read, write) = tokio::io::split(client_end);
    let transport = ByteStreams::new(write.compat_write(), read.compat());
    Client
        .v1()
        .connect_with(transport, async move |cx| {
            cx.send_request(
                InitializeRequest::new(ProtocolVersion::V1).client_capabilities(capabilities),
            )
            .block_task()
            .await?;
            let cwd = std::env::temp_dir();
            cx.build_session_from(NewSessionRequest::new(&cwd).mcp_servers(vec![asker(marker)]))
                .block_task()
                .run_until(async move |setup| {
                    let SessionSetup { mut session, .. } = setup;
                    turns(&mut session).await
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
    assert_no_process_left(marker, BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_servers_question_reaches_the_client_and_its_answer_returns_to_the_server() {
    let model = Model::new();
    model
        .tool_call("call-1", "asker__ask", json!({"mode": "form"}))
        .text("Hello, Ann.");
    model
        .tool_call("call-2", "asker__ask", json!({"mode": "url"}))
        .text("Not signed in.");
    let capabilities = ClientCapabilities::new().elicitation(
        ElicitationCapabilities::new()
            .form(ElicitationFormCapabilities::new())
            .url(ElicitationUrlCapabilities::new()),
    );
    let marker = marker("elicitation-bridge");
    let model_ref = &model;
    run_client(&model, capabilities, &marker, async move |session| {
        let model = model_ref;
        session.send_prompt("Greet me")?;
        let (asked, stop) = read_turn(session, |method, _| {
            assert_eq!(method, "elicitation/create");
            json!({"action": "accept", "content": {"name": "Ann", "age": 41}})
        })
        .await?;
        assert_eq!(stop, StopReason::EndTurn);
        let [(_, form)] = asked.as_slice() else {
            panic!("one question: {asked:#?}");
        };
        assert_eq!(form["mode"], "form");
        assert_eq!(form["sessionId"], &*session.session_id().0);
        assert_eq!(form["toolCallId"], "call-1", "tied to the call that asked");
        let message = form["message"].as_str().unwrap();
        assert!(
            message.contains("Who are you?") && message.contains("asker"),
            "{message}"
        );
        assert_eq!(
            form["requestedSchema"]["properties"]["name"]["title"],
            "Your name"
        );
        assert_eq!(form["requestedSchema"]["properties"]["age"]["default"], 30);
        assert_eq!(form["requestedSchema"]["required"], json!(["name"]));
        // The server got the client's answer and returned it as the tool's result.
        assert_eq!(
            result_of(model, "call-1"),
            r#"accept {"age": 41, "name": "Ann"}"#
        );

        session.send_prompt("Sign me in")?;
        let (asked, stop) = read_turn(session, |method, _| {
            assert_eq!(method, "elicitation/create");
            json!({"action": "decline"})
        })
        .await?;
        assert_eq!(stop, StopReason::EndTurn);
        let [(_, url)] = asked.as_slice() else {
            panic!("one question: {asked:#?}");
        };
        assert_eq!(url["mode"], "url");
        assert_eq!(url["url"], "https://auth.example/start");
        assert_eq!(url["elicitationId"], "e-1");
        assert_eq!(url["toolCallId"], "call-2");
        assert_eq!(result_of(model, "call-2"), "decline");
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_capability_simple_questions_become_permission_requests() {
    let model = Model::new();
    model
        .tool_call("c-confirm", "asker__ask", json!({"mode": "confirm"}))
        .tool_call("c-form", "asker__ask", json!({"mode": "form"}))
        .tool_call("c-url", "asker__ask", json!({"mode": "url"}))
        .text("Done.");
    let marker = marker("elicitation-fallback");
    let model_ref = &model;
    run_client(
        &model,
        ClientCapabilities::new(),
        &marker,
        async move |session| {
            let model = model_ref;
            session.send_prompt("Ask away")?;
            let (asked, stop) = read_turn(session, |method, params| {
                assert_eq!(method, "session/request_permission", "{params}");
                let option = match params["toolCall"]["toolCallId"].as_str() {
                    Some("c-confirm") => "accept",
                    _ => "decline",
                };
                json!({"outcome": {"outcome": "selected", "optionId": option}})
            })
            .await?;
            assert_eq!(stop, StopReason::EndTurn);
            let calls: Vec<&str> = asked
                .iter()
                .map(|(_, params)| params["toolCall"]["toolCallId"].as_str().unwrap())
                .collect();
            // The form that needs a name is not asked: nothing here could answer it.
            assert_eq!(calls, ["c-confirm", "c-url"], "{asked:#?}");
            let confirm = &asked[0].1;
            let question = confirm["toolCall"]["content"].to_string();
            assert!(
                question.contains("Go on?") && question.contains("asker"),
                "{question}"
            );
            assert!(
                confirm["toolCall"].get("title").is_none(),
                "the call keeps its title: {confirm}"
            );
            let options: Vec<&str> = confirm["options"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["optionId"].as_str().unwrap())
                .collect();
            assert_eq!(options, ["accept", "decline"]);
            let shown = asked[1].1["toolCall"]["content"].to_string();
            assert!(
                shown.contains("https://auth.example/start"),
                "the URL is shown: {shown}"
            );

            assert_eq!(result_of(model, "c-confirm"), r#"accept {"proceed": true}"#);
            assert_eq!(result_of(model, "c-form"), "decline");
            assert_eq!(result_of(model, "c-url"), "decline");
            Ok(())
        },
    )
    .await;
}

/// A URL question the client was shown and accepted: when the server says it is done, the
/// client gets `elicitation/complete` with its id; a completion of anything else is not
/// passed on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_completed_url_question_is_announced_to_the_client() {
    let model = Model::new();
    model
        .tool_call("call-url", "asker__ask", json!({"mode": "url"}))
        .text("Signed in.");
    let marker = marker("elicitation-complete");
    let client = RawClient::connect(model.agent().trust_server("asker"));
    client.set_handler(|request| match request["method"].as_str() {
        Some("elicitation/create") => Some(ok(request, json!({"action": "accept"}))),
        _ => None,
    });
    let initialized = client
        .request(
            "initialize",
            json!({"protocolVersion": 1,
                   "clientCapabilities": {"elicitation": {"url": {}}}}),
        )
        .await;
    assert!(initialized["result"].is_object(), "{initialized}");
    let servers = json!([{"name": "asker", "command": "python3", "args": ["-c", ASKING_SERVER],
                          "env": [{"name": "AQUAREGIA_TEST_MARKER", "value": marker}]}]);
    let cwd = std::env::temp_dir();
    let session = client.new_session(cwd.to_str().unwrap(), servers).await;
    let response = client.prompt(&session, "Sign me in").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(result_of(&model, "call-url"), "accept");

    let complete = client
        .wait_for("elicitation/complete", |message| {
            message["method"] == "elicitation/complete"
        })
        .await;
    assert_eq!(complete["params"], json!({"elicitationId": "e-1"}));
    let completions: Vec<Value> = client
        .log()
        .into_iter()
        .filter(|message| message["method"] == "elicitation/complete")
        .collect();
    // `e-other` was sent first: had it been passed on, it would be here already.
    assert_eq!(completions.len(), 1, "{completions:#?}");
    client.finish().await.expect("clean end");
    assert_no_process_left(&marker, BOUND).await;
}
