//! `aquaregia mcp call`: one tool call, its mapped result printed (`--json`: the whole result
//! in MCP's shape), errors as exit status 1.

use crate::common;

use aquaregia_test_support::mcp_servers::http::HttpMcpServer;
use aquaregia_test_support::mcp_servers::test_server::TestServer;
use common::{Scratch, cli, run, server_everything_entry, test_server_command, test_server_entry};
use serde_json::{Value, json};

async fn call(scratch: &Scratch, args: &[&str]) -> common::Outcome {
    let mut command = cli(scratch);
    command.args(["mcp", "call", "--stdio", &test_server_command()]);
    command.args(args);
    run(command, "").await
}

#[tokio::test]
async fn prints_text_results_as_text_and_json_on_request() {
    let scratch = Scratch::new();
    let text = call(&scratch, &["greet", r#"{"name": "Ann", "excited": true}"#]).await;
    assert_eq!(text.code, Some(0), "{text:?}");
    assert_eq!(text.stdout, "Hello, Ann!\n");
    assert!(text.stderr.is_empty(), "{text:?}");

    let json = call(&scratch, &["greet", r#"{"name": "Ann"}"#, "--json"]).await;
    assert_eq!(json.code, Some(0), "{json:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&json.stdout).unwrap(),
        json!({"content": [{"type": "text", "text": "Hello, Ann."}], "isError": false})
    );
}

#[tokio::test]
async fn summarises_images_resources_and_links() {
    let scratch = Scratch::new();
    let text = call(&scratch, &["media"]).await;
    assert_eq!(text.code, Some(0), "{text:?}");
    assert_eq!(
        text.stdout,
        "three things:\n[image image/png, 1.2 KB]\n[resource file:///notes.txt text/plain]\nhi\n[link file:///report.pdf]\n"
    );

    let json = call(&scratch, &["media", "--json"]).await;
    let value: Value = serde_json::from_str(&json.stdout).expect("stdout is JSON");
    let blocks = &value["content"];
    assert_eq!(blocks[1]["type"], "image");
    assert_eq!(blocks[1]["mimeType"], "image/png");
    assert_eq!(
        blocks[2],
        json!({"type": "resource",
               "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "hi"}})
    );
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn calls_a_named_server_of_the_config() {
    let scratch = Scratch::new();
    scratch.config(&json!({
        "everything": server_everything_entry(),
        "test": test_server_entry()
    }));
    let mut command = cli(&scratch);
    command.args([
        "mcp",
        "call",
        "everything",
        "get-sum",
        r#"{"a": 2, "b": 40}"#,
    ]);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(outcome.stdout.contains("42"), "{outcome:?}");
}

#[tokio::test]
async fn a_tool_error_exits_1_with_the_error_on_stderr() {
    let scratch = Scratch::new();
    let outcome = call(&scratch, &["fail"]).await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(outcome.stdout.is_empty(), "{outcome:?}");
    assert_eq!(
        outcome.stderr,
        "error: tool `fail` failed: the disk is on fire\n"
    );
}

#[tokio::test]
async fn arguments_are_validated_and_tools_must_exist() {
    let scratch = Scratch::new();
    let invalid = call(&scratch, &["greet", r#"{"nom": "Ann"}"#]).await;
    assert_eq!(invalid.code, Some(1), "{invalid:?}");
    assert!(
        invalid
            .stderr
            .starts_with("error: tool `greet` failed: invalid arguments:"),
        "{invalid:?}"
    );
    assert_eq!(invalid.stderr.lines().count(), 1, "{invalid:?}");

    let not_json = call(&scratch, &["greet", "{name: Ann}"]).await;
    assert_eq!(not_json.code, Some(1), "{not_json:?}");
    assert!(
        not_json
            .stderr
            .starts_with("error: the arguments of `greet`: not valid JSON"),
        "{not_json:?}"
    );

    let unknown = call(&scratch, &["nope"]).await;
    assert_eq!(unknown.code, Some(1), "{unknown:?}");
    assert!(
        unknown
            .stderr
            .contains("has no tool `nope` (its tools: greet, fail, media, spoof, hang)"),
        "{unknown:?}"
    );
}

/// A result with both content blocks (text and an image) and `structuredContent` (what
/// FastMCP's `ToolResult(content=[text, image], structured_content={...})` gives): `--json`
/// prints the whole result, the structured data included; the text output shows both too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_keeps_structured_content_beside_media_blocks() {
    let scratch = Scratch::new();
    let server = HttpMcpServer::start(TestServer::new()).await;
    let url = server.url.clone();
    let mut command = cli(&scratch);
    command.args(["mcp", "call", "--http", &url, "structured_media", "--json"]);
    let json = run(command, "").await;
    assert_eq!(json.code, Some(0), "{json:?}");
    let value: Value = serde_json::from_str(&json.stdout).expect("stdout is JSON");
    assert_eq!(
        value["structuredContent"],
        json!({"days": 7, "peak": "Tuesday"}),
        "{value:#}"
    );
    assert_eq!(
        value["content"][0],
        json!({"type": "text", "text": "a chart of the week"})
    );
    assert_eq!(value["content"][1]["type"], "image", "{value:#}");
    assert_eq!(value["isError"], false);

    let mut command = cli(&scratch);
    command.args(["mcp", "call", "--http", &url, "structured_media"]);
    let text = run(command, "").await;
    assert_eq!(text.code, Some(0), "{text:?}");
    assert!(
        text.stdout.contains("a chart of the week")
            && text.stdout.contains("\"peak\": \"Tuesday\""),
        "{}",
        text.stdout
    );
}
