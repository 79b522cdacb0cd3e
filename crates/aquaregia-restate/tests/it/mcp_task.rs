//! A tool call an MCP server runs as a task, with the service killed while the task runs: the
//! task's handle was journaled when the server made it, so the resumed run polls that same
//! task to its end instead of calling the tool again.

use aquaregia_test_support::mcp_servers::http::HttpMcpServer;
use aquaregia_test_support::mcp_servers::task_server::TaskServer;
use serde_json::json;

use crate::support::{Setup, answer, call_with, eventually};

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs restate-server (scripts/test-deps.sh restate): --features real-peers"
)]
async fn an_mcp_task_running_when_the_service_dies_is_resumed_not_called_again() {
    let tasks = TaskServer::default();
    let mcp = HttpMcpServer::start(tasks.clone()).await;
    let mut setup = Setup::start_with(
        vec![
            call_with("call-1", "gated", json!({})),
            answer("The gate opened."),
        ],
        vec![("DURABLE_AGENT_MCP_URL", mcp.url.clone())],
    )
    .await;

    setup.send_run("gated", "Go through the gate.").await;
    // Polled only after its handle is journaled (the step that follows the task starts when
    // Restate has acknowledged the one that recorded it).
    eventually("the task polled", || tasks.polls("task-1") >= 1).await;
    setup.service.kill().await;
    let polled = tasks.polls("task-1");
    setup.service.restart().await;
    eventually("the same task polled by the resumed run", || {
        tasks.polls("task-1") > polled
    })
    .await;
    tasks.release();

    let result = setup.result("gated").await;
    assert_eq!(result["text"], "The gate opened.");
    assert_eq!(result["steps"], 2);
    assert_eq!(tasks.tasks(), ["task-1"], "the tool was called once");
    assert_eq!(tasks.cancelled(), Vec::<String>::new());
    let bodies = setup.model.bodies();
    assert_eq!(bodies.len(), 2, "model requests: {bodies:#?}");
    assert!(
        bodies[1].to_string().contains("gate opened"),
        "the model got the task's result: {}",
        bodies[1]
    );
}
