//! A stdio server killed between two tool calls is started again by the second call, which
//! then succeeds; closing the connection stops the restarted server; with restarts off the
//! call fails.

use std::path::Path;
use std::time::{Duration, Instant};

use aquaregia_mcp::{Connector, McpConnection};
use serde_json::json;
use tempfile::TempDir;
use tokio::process::Command;

const BOUND: Duration = Duration::from_secs(20);

/// A fresh scratch directory, removed when dropped.
fn scratch() -> TempDir {
    tempfile::tempdir().expect("a scratch directory")
}

/// The raw test server (2025-11-25), through a shell that records each start's pid.
fn server(dir: &Path) -> Command {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/servers/raw_stdio_server.py"
    );
    let mut command = Command::new("sh");
    command.args([
        "-c",
        r#"echo $$ >> "$1/pids"; exec python3 "$0" legacy "$1/methods""#,
        script,
    ]);
    command.arg(dir);
    command
}

fn pids(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("pids"))
        .unwrap_or_default()
        .lines()
        .map(|line| line.trim().parse().unwrap())
        .collect()
}

fn alive(pid: i32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .status()
        .is_ok_and(|status| status.success())
}

fn kill(pid: i32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < BOUND, "{what} did not happen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn call_ok(connection: &McpConnection) -> Result<String, String> {
    let tools = connection.tools().await.map_err(|e| e.to_string())?;
    let ok = tools.iter().find(|t| t.name() == "ok").unwrap().clone();
    tokio::time::timeout(BOUND, ok.execute(json!({})))
        .await
        .expect("no hang")
        .map(|output| output.to_string())
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_killed_stdio_server_is_restarted_on_the_next_call() {
    let dir = scratch();
    let connection = Connector::new()
        .name("raw")
        .stdio(server(dir.path()))
        .await
        .unwrap();
    let tools = connection.tools().await.unwrap();
    let ok = tools.iter().find(|t| t.name() == "ok").unwrap().clone();
    assert_eq!(ok.execute(json!({})).await.unwrap().to_string(), "fine");

    let first = pids(dir.path());
    assert_eq!(first.len(), 1);
    kill(first[0]);
    until("the client noticed the exit", || connection.is_closed()).await;

    // The same tool, made before the crash; the call is told of the restart (the agent sees
    // it as `AgentEvent::ToolProgress`).
    let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = told.clone();
    let reporter = aquaregia::ProgressReporter::new(move |progress| {
        sink.lock()
            .unwrap()
            .push(progress.message.unwrap_or_default());
    });
    let second = tokio::time::timeout(BOUND, reporter.scope(ok.execute(json!({}))))
        .await
        .expect("no hang");
    assert_eq!(second.unwrap().to_string(), "fine");
    assert_eq!(
        *told.lock().unwrap(),
        ["MCP server `raw` stopped and was restarted"]
    );
    let started = pids(dir.path());
    assert_eq!(started.len(), 2, "{started:?}");
    assert!(alive(started[1]));

    connection.close().await;
    until("the restarted server was stopped", || !alive(started[1])).await;
}

#[tokio::test]
async fn without_restarts_the_next_call_fails() {
    let dir = scratch();
    let connection = Connector::new()
        .name("raw")
        .max_restarts(0)
        .stdio(server(dir.path()))
        .await
        .unwrap();
    let tools = connection.tools().await.unwrap();
    assert_eq!(call_ok(&connection).await.unwrap(), "fine");
    kill(pids(dir.path())[0]);
    until("the client noticed the exit", || connection.is_closed()).await;
    let ok = tools.iter().find(|t| t.name() == "ok").unwrap();
    let error = tokio::time::timeout(BOUND, ok.execute(json!({})))
        .await
        .expect("no hang")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("closed") || error.contains("exited"),
        "{error}"
    );
    assert_eq!(pids(dir.path()).len(), 1);
    connection.close().await;
}
