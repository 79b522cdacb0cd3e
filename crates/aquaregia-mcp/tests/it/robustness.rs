//! Bad servers and process hygiene: crashes, garbage, refusals, limits, and no orphans.

use std::time::{Duration, Instant};

use aquaregia::ToolOutput;
use aquaregia_mcp::{self as mcp, HttpOptions, McpError};

use crate::common::mcp_error;
use aquaregia_test_support::deps::{self, Background, dep};
use aquaregia_test_support::processes::{assert_no_process_left, marker, processes_with_marker};
use serde_json::json;
use tokio::process::Command;

const BOUND: Duration = Duration::from_secs(10);

/// A minimal stdio MCP server in Python (no SDK): answers the handshake and tools/list, and
/// on `tools/call` prints to stderr and exits with status 3. With `garbage`, it also writes
/// lines that are not JSON-RPC to stdout first.
const CRASHING_SERVER: &str = r#"
import json, sys
garbage = "garbage" in sys.argv
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    def reply(result):
        if garbage:
            print("this is not json", flush=True)
            print('{"jsonrpc": "2.0", "oops": true}', flush=True)
        print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}), flush=True)
    if method == "initialize":
        reply({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
               "serverInfo": {"name": "crashy", "version": "1"}})
    elif method == "tools/list":
        reply({"tools": [{"name": "boom", "inputSchema": {"type": "object"}},
                         {"name": "weird", "inputSchema": True}]})
    elif method == "tools/call":
        if msg["params"]["name"] == "weird":
            reply({"content": [{"type": "text", "text": "weird ok"}]})
        else:
            print("panic: the boom tool blew up", file=sys.stderr, flush=True)
            sys.exit(3)
    elif mid is not None:
        print(json.dumps({"jsonrpc": "2.0", "id": mid,
                          "error": {"code": -32601, "message": "Method not found"}}), flush=True)
"#;

fn crashing_server(args: &[&str]) -> Command {
    let mut command = Command::new("python3");
    command.args(["-c", CRASHING_SERVER]).args(args);
    command
}

#[tokio::test]
async fn a_server_that_dies_mid_call_fails_the_call_quickly() {
    // Restarts off: later calls fail (mcp_stdio_restart.rs covers the restart).
    let connection = mcp::Connector::new()
        .max_restarts(0)
        .stdio(crashing_server(&[]))
        .await
        .unwrap();
    let tools = connection.tools().await.unwrap();
    let boom = tools.iter().find(|t| t.name() == "boom").unwrap().clone();
    let started = Instant::now();
    let error = tokio::time::timeout(BOUND, boom.execute(json!({})))
        .await
        .expect("no hang")
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    let Some(McpError::ServerExited(message)) = mcp_error(&error) else {
        panic!("{error:?}")
    };
    assert_eq!(error.to_string(), format!("MCP server {message}"));
    assert!(message.contains("exited with status 3"), "{message}");
    assert!(
        message.contains("the boom tool blew up"),
        "stderr tail: {message}"
    );
    // Later calls fail at once with Disconnected.
    let later = boom.execute(json!({})).await.unwrap_err();
    assert!(
        matches!(mcp_error(&later), Some(McpError::Disconnected)),
        "{later:?}"
    );
    assert!(matches!(
        connection.tools().await,
        Err(McpError::Disconnected)
    ));
}

#[tokio::test]
async fn garbage_on_stdout_and_odd_schemas_do_not_break_the_session() {
    let connection = mcp::connect_stdio(crashing_server(&["garbage"]))
        .await
        .unwrap();
    let tools = connection.tools().await.unwrap();
    // A tool whose schema is not an object is kept, schema as given.
    let weird = tools.iter().find(|t| t.name() == "weird").expect("kept");
    assert_eq!(weird.descriptor().input_schema, json!(true));
    assert_eq!(
        weird.execute(json!({})).await,
        Ok(ToolOutput::text("weird ok"))
    );
    connection.close().await;
}

#[tokio::test]
async fn a_server_that_exits_at_once_reports_its_stderr() {
    let mut command = Command::new("sh");
    command.args(["-c", "echo 'fatal: config file missing' >&2; exit 2"]);
    let error = mcp::Connector::new()
        .name("broken")
        .stdio(command)
        .await
        .unwrap_err();
    let McpError::Connect {
        server, message, ..
    } = &error
    else {
        panic!("{error:?}")
    };
    assert_eq!(server, "broken");
    assert!(message.contains("exited with status 2"), "{message}");
    assert!(message.contains("fatal: config file missing"), "{message}");
}

#[tokio::test]
async fn a_missing_command_is_a_clear_error() {
    let error = mcp::connect_stdio(Command::new("aquaregia-no-such-server"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, McpError::Connect { message, .. } if message.contains("command not found") && message.contains("aquaregia-no-such-server")),
        "{error}"
    );
}

#[tokio::test]
async fn unreachable_http_server_names_the_url() {
    let closed = deps::ClosedPort::new();
    let port = closed.port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let error = mcp::Connector::new()
        .timeout(BOUND)
        .http(&url, HttpOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, McpError::Connect { server, .. } if *server == format!("127.0.0.1:{port}")),
        "{error}"
    );
}

#[tokio::test]
async fn responses_over_the_size_limit_fail_alone() {
    let (_server, port) = Background::server_everything("streamableHttp").await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    // The handshake and the tool list fit in 64 KiB; a 100 KB echo does not.
    let connection = mcp::Connector::new()
        .timeout(BOUND)
        .http(&url, HttpOptions::new().max_response_size(64 * 1024))
        .await
        .unwrap();
    let tools = connection.tools().await.unwrap();
    let echo = tools.iter().find(|t| t.name() == "echo").unwrap();
    let error = echo
        .execute(json!({"message": "x".repeat(100_000)}))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("larger than 65536 bytes"),
        "{error}"
    );
    // Only that call failed: the session goes on.
    assert_eq!(
        echo.execute(json!({"message": "small"})).await,
        Ok(ToolOutput::text("Echo: small"))
    );
    // A limit below the handshake is a clear connect error.
    let error = mcp::Connector::new()
        .timeout(BOUND)
        .http(&url, HttpOptions::new().max_response_size(100))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("larger than 100 bytes"),
        "{error}"
    );
}

#[tokio::test]
async fn no_process_survives_twenty_closed_or_dropped_connections() {
    let marker = marker("twenty-connections");
    let server = dep("AQUAREGIA_SERVER_EVERYTHING");
    let npm_dir = dep("AQUAREGIA_TEST_DEPS") + "/npm";
    let mut connections = Vec::new();
    for i in 0..20 {
        let mut command = if i % 2 == 0 {
            // npx -> node: the server is a grandchild.
            let mut c = Command::new("npx");
            c.args(["--no-install", "mcp-server-everything", "stdio"])
                .current_dir(&npm_dir);
            c
        } else {
            // A shell that forks node and waits for it.
            let mut c = Command::new("sh");
            c.args(["-c", &format!("node '{server}' stdio; exit $?")]);
            c
        };
        command.env("AQUAREGIA_TEST_MARKER", &marker);
        connections.push(mcp::connect_stdio(command).await.unwrap());
    }
    for connection in &connections {
        assert!(!connection.tools().await.unwrap().is_empty());
    }
    assert!(
        processes_with_marker(&marker).len() >= 30,
        "wrappers and servers are running"
    );
    for (i, connection) in connections.into_iter().enumerate() {
        if i % 4 < 2 {
            connection.close().await;
        } else {
            drop(connection);
        }
    }
    assert_no_process_left(&marker, BOUND).await;
}
