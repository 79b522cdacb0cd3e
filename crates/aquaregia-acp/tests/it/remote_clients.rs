//! An agent served to remote clients: `allow_stdio_servers(false)` refuses the stdio servers a
//! client names (reported, the session opens with its other servers, no process started),
//! `local_tools(false)` keeps the built-in tools to those the client serves, and
//! `serve_messages` (a transport of whole messages, such as WebSocket frames) answers an item
//! that is not one message with a short parse error and goes on, and closes the connection's
//! sessions when its input ends.

use crate::support;

use serde_json::{Value, json};

use aquaregia_test_support::processes::{assert_no_process_left, marker, processes_with_marker};
use support::model::{Model, tool_names};
use support::raw::{RawClient, stateless_server};
use support::scripts::marked_toolbox;
use support::{BOUND, updates};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stdio_servers_and_local_tools_are_refused_when_the_agent_says_so() {
    let model = Model::new();
    let client = RawClient::connect(
        model
            .agent()
            .editor_tools(true)
            .allow_stdio_servers(false)
            .local_tools(false),
    );
    let acp_tools = json!([{"name": "peek", "inputSchema": {"type": "object"}}]);
    client.set_handler(move |request| stateless_server(request, &acp_tools));
    // No `fs`, no `terminal`.
    client.initialize().await;
    let marker = marker("remote-stdio");
    let session = client
        .new_session(
            "/tmp",
            json!([
                {"type": "acp", "name": "editor", "serverId": "editor-1"},
                marked_toolbox("box", &marker),
            ]),
        )
        .await;
    assert!(processes_with_marker(&marker).is_empty());
    model.text("Done.");
    let answer = client.prompt(&session, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let said: String = updates(&client.log(), &session)
        .iter()
        .filter(|update| update["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|update| update["content"]["text"].as_str())
        .collect();
    assert!(
        said.contains("MCP server `box` is unavailable: this agent does not start stdio servers: `python3` would run on the agent's machine"),
        "{said}"
    );
    let tools = tool_names(&model.requests()[0]);
    assert_eq!(tools, ["editor__peek", "update_plan"], "{tools:?}");
    assert_no_process_left(&marker, BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_transport_answers_bad_items_and_closes_sessions_at_its_end() {
    let model = Model::new();
    let (to_agent, incoming) = tokio::sync::mpsc::channel::<std::io::Result<String>>(8);
    let (outgoing, mut from_agent) = futures::channel::mpsc::unbounded::<String>();
    let incoming = futures::stream::unfold(incoming, async |mut receiver| {
        receiver.recv().await.map(|item| (item, receiver))
    });
    let outgoing = futures::SinkExt::sink_map_err(outgoing, |_| std::io::Error::other("closed"));
    let serving = tokio::spawn(model.agent().serve_messages(
        outgoing,
        incoming,
        std::future::pending(),
    ));
    let marker = marker("messages");
    let long = format!("{{\"a\": {}", "x".repeat(1 << 20));
    let two = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}
{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1}}"#;
    let initialize = json!({"jsonrpc": "2.0", "id": 3, "method": "initialize",
                            "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    let new = json!({"jsonrpc": "2.0", "id": 4, "method": "session/new",
                     "params": {"cwd": "/tmp", "mcpServers": [marked_toolbox("box", &marker)]}});
    for item in [
        "not json".to_owned(),
        two.to_owned(),
        long,
        initialize.to_string(),
        new.to_string(),
    ] {
        to_agent.send(Ok(item)).await.unwrap();
    }
    let mut answers: Vec<Value> = Vec::new();
    while !answers.iter().any(|answer| answer["id"] == 4) {
        let message = tokio::time::timeout(BOUND, futures::StreamExt::next(&mut from_agent))
            .await
            .expect("an answer in time")
            .expect("the agent is serving");
        answers.push(serde_json::from_str(&message).expect("one JSON message per item"));
    }
    let parse_errors: Vec<&Value> = answers
        .iter()
        .filter(|answer| answer["error"]["code"] == -32700)
        .collect();
    assert_eq!(parse_errors.len(), 3, "{answers:#?}");
    assert!(
        parse_errors
            .iter()
            .all(|error| error.to_string().len() < 1024),
        "the long item is quoted short: {answers:#?}"
    );
    assert_eq!(
        answers.iter().find(|answer| answer["id"] == 3).unwrap()["result"]["agentInfo"]["name"],
        "aquaregia"
    );
    assert!(!processes_with_marker(&marker).is_empty(), "{answers:#?}");

    // The end of input ends serving, and the session's server with it.
    drop(to_agent);
    tokio::time::timeout(BOUND, serving)
        .await
        .expect("serving ended")
        .expect("no panic")
        .expect("no error");
    assert_no_process_left(&marker, BOUND).await;
}
