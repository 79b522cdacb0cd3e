//! Tool calls that run as tasks (2026-07-28 tasks extension): polled to the end with their
//! status reported as progress, and cancelled with `tasks/cancel` when the call is dropped
//! (the agent cancelled it) or times out. The 2025-11-25 form (task augmentation) is covered
//! in `mcp_stdio_faults` and `mcp_http_faults`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aquaregia::{ProgressReporter, Tool, ToolCheckpoint, ToolExecError, ToolOutput};
use aquaregia_mcp::{Connector, McpConnection};
use aquaregia_test_support::mcp_servers::task_server::TaskServer;
use serde_json::json;

const BOUND: Duration = Duration::from_secs(20);

async fn connect(server: &TaskServer) -> McpConnection {
    Connector::new()
        .name("tasks")
        .transport(server.serve_duplex())
        .await
        .unwrap()
}

async fn tool(connection: &McpConnection, name: &str) -> Tool {
    let tools = connection.tools().await.unwrap();
    tools.into_iter().find(|tool| tool.name() == name).unwrap()
}

/// Waits (boundedly) until `condition` holds.
async fn eventually(what: &str, condition: impl Fn() -> bool) {
    for _ in 0..200 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{what} did not happen within 5 s");
}

#[tokio::test]
async fn a_task_completes_and_its_status_is_reported_as_progress() {
    let server = TaskServer::default();
    let connection = connect(&server).await;
    let research = tool(&connection, "research").await;

    let reported = Arc::new(Mutex::new(Vec::new()));
    let sink = reported.clone();
    let reporter = ProgressReporter::new(move |progress| {
        sink.lock()
            .unwrap()
            .push(progress.message.unwrap_or_default());
    });
    let output = tokio::time::timeout(BOUND, reporter.scope(research.execute(json!({}))))
        .await
        .expect("no hang");
    assert_eq!(output, Ok(ToolOutput::text("report ready")));
    assert_eq!(
        *reported.lock().unwrap(),
        [
            "task working: queued",
            "task working: gathering",
            "task working: writing",
            "task completed: done"
        ]
    );
    assert_eq!(server.cancelled(), Vec::<String>::new());
    connection.close().await;
}

#[tokio::test]
async fn a_dropped_call_cancels_its_task() {
    let server = TaskServer::default();
    let connection = connect(&server).await;
    let endless = tool(&connection, "endless").await;
    // The agent cancelling a call drops its future.
    let abandoned = tokio::time::timeout(Duration::from_millis(300), endless.execute(json!({})));
    assert!(abandoned.await.is_err(), "the task never ends");
    eventually("tasks/cancel", || server.cancelled() == ["task-1"]).await;
    connection.close().await;
}

#[tokio::test]
async fn a_task_that_times_out_is_cancelled() {
    let server = TaskServer::default();
    let connection = connect(&server)
        .await
        .with_call_timeout(Duration::from_millis(300));
    // A task that keeps going past the timeout without news is given up and cancelled.
    let endless = tool(&connection, "endless").await;
    let outcome = tokio::time::timeout(BOUND, endless.execute(json!({})))
        .await
        .expect("the call timeout ends it");
    assert_eq!(outcome, Err(ToolExecError::Timeout));
    assert_eq!(
        server.cancelled(),
        ["task-1"],
        "cancelled before the call returns"
    );
    connection.close().await;
}

#[tokio::test]
async fn a_cancelled_task_fails_the_call() {
    let server = TaskServer::default();
    let connection = connect(&server).await;
    let endless = tool(&connection, "endless").await;
    let call = tokio::spawn(async move { endless.execute(json!({})).await });
    eventually("the task starts", || !server.tasks().is_empty()).await;
    // Cancelled by someone else (another client, an operator): the next poll says so.
    let peer = connection.peer().clone();
    let cancel = aquaregia_mcp::rmcp::model::ClientRequest::CancelTaskRequest(
        aquaregia_mcp::rmcp::model::CancelTaskRequest::new(
            aquaregia_mcp::rmcp::model::CancelTaskParams::new("task-1"),
        ),
    );
    peer.send_request(cancel).await.unwrap();
    let outcome = tokio::time::timeout(BOUND, call)
        .await
        .expect("no hang")
        .unwrap();
    let Err(ToolExecError::Execution(message)) = outcome else {
        panic!("{outcome:?}");
    };
    assert!(message.contains("cancelled the task"), "{message}");
    connection.close().await;
}

/// A call made under a durable runner's checkpoint records its task, and when the call is
/// dropped (the runner's process died) the task is left running; the next attempt of the
/// same call, in a new session, follows that task instead of calling the tool again.
#[tokio::test]
async fn a_checkpointed_task_outlives_its_call_and_the_next_attempt_resumes_it() {
    let server = TaskServer::default();
    let recorded = Arc::new(Mutex::new(None));
    let sink = recorded.clone();
    let checkpoint = ToolCheckpoint::new(None, move |state| *sink.lock().unwrap() = Some(state));
    let first = connect(&server).await;
    let gated = tool(&first, "gated").await;
    let abandoned = tokio::time::timeout(
        Duration::from_millis(300),
        checkpoint.scope(gated.execute(json!({}))),
    );
    assert!(abandoned.await.is_err(), "the gate is closed");
    let state = recorded
        .lock()
        .unwrap()
        .clone()
        .expect("the task was recorded");
    assert_eq!(
        state,
        json!({"mcpTask": {"server": "tasks", "taskId": "task-1"}})
    );
    let polled_before = server.polls("task-1");

    // The next attempt: another session, the recorded state handed back. The gate opens
    // only after the resumed call polled twice, 100 ms apart: long after a `tasks/cancel` the
    // dropped call would have sent on the first session, which is still open.
    let second = connect(&server).await;
    let gated = tool(&second, "gated").await;
    let gate = server.clone();
    let opener = tokio::spawn(async move {
        eventually("two polls of the resumed task", || {
            gate.polls("task-1") >= polled_before + 2
        })
        .await;
        gate.release();
    });
    let resumed = ToolCheckpoint::new(Some(state), |_| {});
    let output = tokio::time::timeout(BOUND, resumed.scope(gated.execute(json!({}))))
        .await
        .expect("no hang");
    opener.await.unwrap();
    assert_eq!(output, Ok(ToolOutput::text("gate opened")));
    assert_eq!(server.tasks(), ["task-1"], "the tool was not called again");
    assert_eq!(
        server.cancelled(),
        Vec::<String>::new(),
        "a recorded task is not cancelled when its call is dropped"
    );
    first.close().await;
    second.close().await;
}

/// A resumed call whose task the server no longer knows fails with a clear error rather
/// than calling a tool that may have had its effect already.
#[tokio::test]
async fn a_resumed_task_the_server_forgot_is_not_called_again() {
    let server = TaskServer::default();
    let connection = connect(&server).await;
    let gated = tool(&connection, "gated").await;
    let resumed = ToolCheckpoint::new(
        Some(json!({"mcpTask": {"server": "tasks", "taskId": "task-9"}})),
        |_| {},
    );
    let output = tokio::time::timeout(BOUND, resumed.scope(gated.execute(json!({}))))
        .await
        .expect("no hang");
    let Err(ToolExecError::Execution(message)) = output else {
        panic!("expected a failed call, got {output:?}");
    };
    assert!(
        message.contains("no longer knows task `task-9`") && message.contains("not made again"),
        "{message}"
    );
    assert_eq!(server.tasks(), Vec::<String>::new(), "no new task");
    connection.close().await;
}

/// A runner that gives a call up for good (its run was cancelled) before dropping it: the
/// task the call recorded is cancelled on the server, not kept for an attempt that will never
/// come.
#[tokio::test]
async fn a_checkpointed_call_its_runner_cancels_cancels_its_task() {
    let server = TaskServer::default();
    let connection = connect(&server).await;
    let gated = tool(&connection, "gated").await;
    let checkpoint = ToolCheckpoint::new(None, |_| {});
    let runner = checkpoint.clone();
    let mut call = Box::pin(checkpoint.scope(gated.execute(json!({}))));
    tokio::select! {
        output = &mut call => panic!("the gate is closed, yet: {output:?}"),
        () = eventually("the task polled", || server.polls("task-1") >= 1) => {}
    }
    runner.cancel();
    drop(call);
    eventually("tasks/cancel", || server.cancelled() == ["task-1"]).await;
    connection.close().await;
}
