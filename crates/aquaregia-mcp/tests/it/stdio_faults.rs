//! stdio servers that real deployments produce and that used to hang or break the session:
//! slow starts, response lines a JSON-RPC reader must drop, task-only tools, and servers
//! that do not (or never) acknowledge list-change subscriptions. The server is a scripted
//! Python program (`servers/raw_stdio_server.py`), so each fault is exact.

use std::path::Path;
use std::time::{Duration, Instant};

use aquaregia::Tool;
use aquaregia_mcp::{self as mcp, McpConnection};
use serde_json::json;
use tempfile::TempPath;
use tokio::process::Command;

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/servers/raw_stdio_server.py"
);

/// A fresh (empty) file the server appends every method it receives to, removed when dropped.
fn method_log() -> TempPath {
    tempfile::NamedTempFile::new()
        .expect("a scratch file")
        .into_temp_path()
}

fn methods(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn server(mode: &str, log: &Path) -> Command {
    let mut command = Command::new("python3");
    command.arg(SCRIPT).arg(mode).arg(log);
    command
}

async fn connect(mode: &str, log: &Path) -> McpConnection {
    mcp::Connector::new()
        .name("raw")
        .stdio(server(mode, log))
        .await
        .expect("connects")
}

fn find(tools: &[Tool], name: &str) -> Tool {
    tools
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool `{name}`"))
        .clone()
}

/// Fault 2: rmcp's Auto handshake gives up on `server/discover` after 10 s and sends
/// `initialize` on the same pipe; the late answer to the discover used to fail the connect.
#[tokio::test]
async fn a_legacy_server_slower_than_ten_seconds_still_connects() {
    let log = method_log();
    let mut command = Command::new("sh");
    command.args([
        "-c",
        "sleep 12; exec python3 \"$0\" legacy \"$1\"",
        SCRIPT,
        log.to_str().unwrap(),
    ]);
    let started = Instant::now();
    let connection = mcp::Connector::new()
        .name("slow")
        .stdio(command)
        .await
        .expect("a slow 2025-11-25 server connects within the default 30 s");
    assert!(started.elapsed() < Duration::from_secs(25));
    assert_eq!(connection.server_info().protocol_version, "2025-11-25");
    let tools = connection.tools().await.unwrap();
    assert_eq!(
        find(&tools, "ok").execute(json!({})).await,
        Ok(aquaregia::ToolOutput::text("fine"))
    );
    connection.close().await;
}

/// Fault 3: a line rmcp drops must fail its call at once, saying what was wrong, and leave
/// the session usable.
#[tokio::test]
async fn undecodable_response_lines_fail_the_call_at_once() {
    let log = method_log();
    let connection = connect("legacy", &log).await;
    let tools = connection.tools().await.unwrap();
    for (tool, expected) in [
        ("badutf8", "UTF-8"),
        ("deep", "nested"),
        ("big", "larger than"),
    ] {
        let started = Instant::now();
        let error = tokio::time::timeout(
            Duration::from_secs(20),
            find(&tools, tool).execute(json!({})),
        )
        .await
        .unwrap_or_else(|_| panic!("`{tool}` hung"))
        .unwrap_err();
        let elapsed = started.elapsed();
        assert!(
            elapsed < Duration::from_secs(5),
            "`{tool}` took {elapsed:?}"
        );
        let message = error.to_string();
        assert!(message.contains(expected), "`{tool}`: {message}");
        // The session goes on.
        assert_eq!(
            find(&tools, "ok").execute(json!({})).await,
            Ok(aquaregia::ToolOutput::text("fine"))
        );
    }
    connection.close().await;
}

/// Fault 9: tools that can only run as tasks are offered, and run as tasks: called with a
/// `task` parameter and fetched with `tasks/result` on a 2025-11-25 server that declares the
/// tasks capability, followed with `tasks/get` when a 2026-07-28 server makes a task.
#[tokio::test]
async fn task_only_tools_are_offered_and_run_as_tasks() {
    for (mode, fetched_with) in [("legacy", "tasks/result"), ("modern", "tasks/get")] {
        let log = method_log();
        let connection = connect(mode, &log).await;
        let tools = connection.tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(Tool::name).collect();
        assert!(names.contains(&"tasky"), "{mode}: {names:?}");
        let output = find(&tools, "tasky").execute(json!({})).await;
        assert_eq!(
            output,
            Ok(aquaregia::ToolOutput::text("fine as a task")),
            "{mode}"
        );
        let methods = methods(&log);
        assert!(
            methods.iter().any(|m| m == "tasks/get"),
            "{mode}: {methods:?}"
        );
        assert_eq!(
            methods.last().map(String::as_str),
            Some(fetched_with),
            "{mode}: {methods:?}"
        );
        connection.close().await;
    }
}

/// Fault 10a: no `subscriptions/listen` to a server that does not advertise list changes.
#[tokio::test]
async fn no_subscription_without_list_changed() {
    let log = method_log();
    let connection = connect("modern", &log).await;
    assert_eq!(connection.server_info().protocol_version, "2026-07-28");
    // A round trip after the connect: anything sent during it has been read by now.
    connection.tools().await.unwrap();
    let seen = methods(&log);
    assert!(seen.contains(&"tools/list".to_owned()), "{seen:?}");
    assert!(
        !seen.contains(&"subscriptions/listen".to_owned()),
        "{seen:?}"
    );
    connection.close().await;
}

/// Fault 10b: a subscription that is never acknowledged does not hold up the connect.
#[tokio::test]
async fn an_unacknowledged_subscription_does_not_delay_connect() {
    let log = method_log();
    let started = Instant::now();
    let connection = connect("modern-noack", &log).await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(5), "connect took {elapsed:?}");
    let tools = connection.tools().await.unwrap();
    assert_eq!(
        find(&tools, "ok").execute(json!({})).await,
        Ok(aquaregia::ToolOutput::text("fine"))
    );
    connection.close().await;
}

/// A 2025-11-25 server that does not declare the tasks capability must not get task-augmented
/// calls (MCP 2025-11-25), so its task-only tool cannot be called correctly: it is not offered,
/// and `left_out_tools` says why; the other tools are.
#[tokio::test]
async fn a_task_only_tool_of_a_server_without_tasks_is_left_out() {
    let log = method_log();
    let connection = connect("legacy-notasks", &log).await;
    let tools = connection.tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(Tool::name).collect();
    assert!(!names.contains(&"tasky"), "{names:?}");
    assert!(names.contains(&"ok"), "{names:?}");
    let left_out = connection.left_out_tools();
    assert_eq!(left_out.len(), 1, "{left_out:?}");
    assert_eq!(left_out[0].name, "tasky");
    assert!(
        left_out[0].reason.contains("tasks capability"),
        "{left_out:?}"
    );
    connection.close().await;
}
