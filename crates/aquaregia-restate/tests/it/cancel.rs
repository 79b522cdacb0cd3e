//! Cancelling a run while a tool call is in flight: the call is dropped at once (its MCP task
//! cancelled on the server) and the run ends as cancelled, without waiting for the call.

use std::time::Duration;

use aquaregia_test_support::mcp_servers::http::HttpMcpServer;
use aquaregia_test_support::mcp_servers::task_server::TaskServer;
use serde_json::json;

use crate::support::{Setup, answer, call_with, eventually};

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs restate-server (scripts/test-deps.sh restate): --features real-peers"
)]
async fn cancelling_a_run_stops_the_tool_call_in_flight() {
    let tasks = TaskServer::default();
    let mcp = HttpMcpServer::start(tasks.clone()).await;
    let setup = Setup::start_with(
        vec![
            call_with("call-1", "endless", json!({})),
            answer("never sent"),
        ],
        vec![("DURABLE_AGENT_MCP_URL", mcp.url.clone())],
    )
    .await;

    let invocation = setup.send_run("endless", "Run forever.").await;
    eventually("the task polled", || tasks.polls("task-1") >= 1).await;
    let status = setup.server.cancel(&invocation).await;
    assert!((200..300).contains(&status), "cancel: {status}");

    // The task never ends by itself: only a cancelled call lets the run end this soon.
    let (status, body) = setup
        .server
        .attach("AgentRun", "endless", Duration::from_secs(30))
        .await;
    assert_eq!(status, 409, "a cancelled run fails as cancelled: {body}");
    eventually("tasks/cancel", || tasks.cancelled() == ["task-1"]).await;
    assert_eq!(tasks.tasks(), ["task-1"]);
    assert_eq!(
        setup.model.request_count(),
        1,
        "no model call after the cancel"
    );
}
