//! Bad `mcpServers` entries and servers that do not start are reported naming them, at the
//! start of the session's first turn (not as stray updates before any prompt, which clients
//! drop), and never fail the session: the other servers' tools are still used.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::json;

use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::model::{Model, tool_names, tool_outputs};
use support::raw::{RawClient, stateless_server};
use support::scripts::{marked_toolbox, toolbox_entry};
use support::{BOUND, updates};

/// The texts of the `agent_message_chunk` updates of `session`.
fn messages(client: &RawClient, session: &str) -> Vec<String> {
    updates(&client.log(), session)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_owned))
        .collect()
}

fn reported(client: &RawClient, session: &str, name: &str) -> String {
    let needle = format!("`{name}`");
    messages(client, session)
        .into_iter()
        .find(|m| m.contains(&needle))
        .unwrap_or_else(|| panic!("a report about {name}: {:?}", messages(client, session)))
}

/// Waits until the session is set up (its commands announced): nothing was said yet.
async fn assert_quiet_until_the_first_prompt(client: &RawClient, session: &str) {
    support::eventually("the available commands", || {
        updates(&client.log(), session)
            .iter()
            .any(|u| u["sessionUpdate"] == "available_commands_update")
    })
    .await;
    assert_eq!(
        messages(client, session),
        Vec::<String>::new(),
        "no message before the first prompt"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn invalid_entries_are_reported_and_the_session_still_works() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    let acp_tools = json!([{"name": "peek", "inputSchema": {"type": "object"}}]);
    client.set_handler(move |request| stateless_server(request, &acp_tools));
    client.initialize().await;
    let marker = marker("invalid-entries");
    let session = client
        .new_session(
            "/tmp",
            json!([
                {"name": "nocmd", "args": []},
                {"type": "carrier-pigeon", "name": "pigeon", "url": "coo://roof"},
                {"type": "acp", "name": "first", "serverId": "dup"},
                {"type": "acp", "name": "second", "serverId": "dup"},
                {"type": "http", "name": "nourl"},
                marked_toolbox("box", &marker),
            ]),
        )
        .await;
    assert_quiet_until_the_first_prompt(&client, &session).await;

    model.text("Works.");
    let answer = client.prompt(&session, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(reported(&client, &session, "nocmd").contains("command"));
    assert!(reported(&client, &session, "pigeon").contains("carrier-pigeon"));
    assert!(reported(&client, &session, "second").contains("dup"));
    assert!(reported(&client, &session, "nourl").contains("url"));
    let said = messages(&client, &session);
    assert_eq!(
        said.last().map(String::as_str),
        Some("Works."),
        "the reports open the turn: {said:?}"
    );
    assert!(
        !messages(&client, &session)
            .iter()
            .any(|m| m.contains("`first`") || m.contains("`box`")),
        "the valid servers are not reported: {:?}",
        messages(&client, &session)
    );
    let names = tool_names(&model.requests()[0]);
    assert!(names.contains(&"first__peek".to_owned()), "{names:?}");
    assert!(names.contains(&"box__echo".to_owned()), "{names:?}");

    // Told once.
    let before = messages(&client, &session).len();
    model.text("Again.");
    client.prompt(&session, "again").await;
    assert_eq!(&messages(&client, &session)[before..], ["Again."]);
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_that_fails_or_hangs_at_startup_does_not_fail_the_session() {
    let model = Model::new();
    let client = RawClient::connect(
        model
            .agent()
            .trust_server("good")
            .connector(aquaregia_mcp::Connector::new().timeout(Duration::from_secs(3))),
    );
    client.initialize().await;
    let marker = marker("failing-servers");
    let env = [("AQUAREGIA_TEST_MARKER", marker.as_str())];
    let hanging = json!({
        "name": "stuck",
        "command": "python3",
        "args": ["-c", "import time\nwhile True: time.sleep(60)"],
        "env": [{"name": "AQUAREGIA_TEST_MARKER", "value": marker}],
    });
    let started = Instant::now();
    let response = client
        .request(
            "session/new",
            json!({"cwd": "/tmp", "mcpServers": [
                toolbox_entry("broken", &["fail"], &env),
                hanging,
                toolbox_entry("good", &[], &env),
            ]}),
        )
        .await;
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{response}"))
        .to_owned();
    assert!(
        started.elapsed() < BOUND,
        "session/new is bounded by the startup timeout, not by the stuck server"
    );

    assert_quiet_until_the_first_prompt(&client, &session).await;

    model
        .tool_call("call-1", "good__read_note", json!({}))
        .text("Read it.");
    let answer = client.prompt(&session, "read the note").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let broken = reported(&client, &session, "broken");
    assert!(
        broken.contains("refusing to start") || broken.contains("status 7"),
        "the failure says why: {broken}"
    );
    let stuck = reported(&client, &session, "stuck");
    assert!(stuck.contains("3"), "the timeout is named: {stuck}");
    let names = tool_names(&model.requests()[0]);
    assert!(names.contains(&"good__read_note".to_owned()), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("broken__") || n.starts_with("stuck__")),
        "{names:?}"
    );
    let tool_message = tool_outputs(&model.requests()[1]);
    assert!(tool_message[0].contains("a note"), "{tool_message:?}");
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}
