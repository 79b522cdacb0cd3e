//! `aquaregia_mcp` against third-party servers installed from the registries:
//! `@modelcontextprotocol/server-everything` (npm) over stdio, Streamable HTTP and legacy SSE,
//! and a Python `mcp` (PyPI) server that speaks 2026-07-28 and returns audio.

use std::time::Duration;

use crate::common::chat_client;
use aquaregia::{ContentBlock, StopReason, Tool, ToolExecError, ToolOutput};
use aquaregia_mcp::{self as mcp, McpConnection};
use aquaregia_test_support::deps::{Background, dep, repo_root};
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text, chat_tool_calls};
use serde_json::{Value, json};
use tokio::process::Command;

const BOUND: Duration = Duration::from_secs(10);

/// The content blocks of an output, as their JSON (camelCase fields).
fn blocks(output: &ToolOutput) -> Vec<Value> {
    match output {
        ToolOutput::Content(blocks)
        | ToolOutput::Structured {
            content: blocks, ..
        } => blocks
            .iter()
            .map(|b| serde_json::to_value(b).expect("serializes"))
            .collect(),
        other => panic!("expected content blocks, got {other:?}"),
    }
}

fn find(tools: &[Tool], name: &str) -> Tool {
    tools
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| {
            panic!(
                "no tool `{name}` in {:?}",
                tools.iter().map(Tool::name).collect::<Vec<_>>()
            )
        })
        .clone()
}

async fn call(
    connection: &McpConnection,
    name: &str,
    args: Value,
) -> Result<ToolOutput, ToolExecError> {
    find(&connection.tools().await.unwrap(), name)
        .execute(args)
        .await
}

fn server_everything_stdio() -> Command {
    let mut command = Command::new("node");
    command.args([dep("AQUAREGIA_SERVER_EVERYTHING"), "stdio".into()]);
    command
}

fn python_server() -> Command {
    let mut command = Command::new(dep("AQUAREGIA_PYTHON"));
    command.arg(repo_root().join("crates/aquaregia-mcp/tests/servers/py_mcp_server.py"));
    command
}

/// The calls every server-everything transport must get right.
async fn exercise_server_everything(connection: &McpConnection) {
    assert_eq!(connection.server_info().protocol_version, "2025-11-25");
    let tools = connection.tools().await.unwrap();
    for name in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "get-structured-content",
    ] {
        find(&tools, name);
    }
    assert_eq!(
        call(connection, "echo", json!({"message": "hi"})).await,
        Ok(ToolOutput::text("Echo: hi"))
    );
    let sum = call(connection, "get-sum", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert!(sum.as_text().unwrap().contains('5'), "{sum}");
    let image = call(connection, "get-tiny-image", json!({})).await.unwrap();
    let items = blocks(&image);
    assert!(
        items
            .iter()
            .any(|i| i["type"] == "image" && i["mimeType"] == "image/png")
    );
    let weather = call(
        connection,
        "get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await
    .unwrap();
    assert!(
        matches!(&weather, ToolOutput::Json(w) if w["temperature"].is_number()),
        "{weather}"
    );
    // Bad arguments come back from the server in-band; our schema check catches them first.
    assert!(matches!(
        call(connection, "get-sum", json!({"a": "x"})).await,
        Err(ToolExecError::InvalidArguments(_))
    ));
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn server_everything_over_stdio() {
    let connection = mcp::connect_stdio(server_everything_stdio()).await.unwrap();
    exercise_server_everything(&connection).await;
    let resource = call(
        &connection,
        "get-resource-reference",
        json!({"resourceType": "Text", "resourceId": 1}),
    )
    .await
    .unwrap();
    assert!(
        blocks(&resource)
            .iter()
            .any(|i| i["type"] == "resource" && i["text"].is_string()),
        "{resource}"
    );
    let links = call(&connection, "get-resource-links", json!({"count": 2}))
        .await
        .unwrap();
    assert!(blocks(&links).iter().any(|i| i["type"] == "resource_link"));
    // Over stdio it announces a list change right after initialisation.
    let mut changed = connection.tools_changed();
    tokio::time::timeout(BOUND, changed.wait_for(|generation| *generation > 0))
        .await
        .expect("tools/list_changed arrived")
        .unwrap();
    connection.close().await;
}

/// Prompts in this crate's own types: the listing names the arguments (required or not), and
/// a rendered prompt is conversation messages, an embedded resource as its text in tags.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn server_everything_prompts_list_and_render() {
    let connection = mcp::connect_stdio(server_everything_stdio()).await.unwrap();
    let prompts = tokio::time::timeout(BOUND, connection.list_prompts())
        .await
        .expect("no hang")
        .unwrap();
    let args = prompts
        .iter()
        .find(|prompt| prompt.name == "args-prompt")
        .unwrap_or_else(|| panic!("{prompts:?}"));
    assert_eq!(args.title.as_deref(), Some("Arguments Prompt"));
    let arguments: Vec<(&str, bool)> = args
        .arguments
        .iter()
        .map(|argument| (argument.name.as_str(), argument.required))
        .collect();
    assert_eq!(arguments, [("city", true), ("state", false)]);

    let city = serde_json::Map::from_iter([("city".to_owned(), json!("Oslo"))]);
    let rendered = connection.get_prompt("args-prompt", city).await.unwrap();
    assert_eq!(rendered.messages.len(), 1);
    assert_eq!(rendered.messages[0].role, aquaregia::Role::User);
    assert_eq!(rendered.messages[0].text(), "What's weather in Oslo?");

    let resource = serde_json::Map::from_iter([
        ("resourceType".to_owned(), json!("Text")),
        ("resourceId".to_owned(), json!("2")),
    ]);
    let rendered = connection
        .get_prompt("resource-prompt", resource)
        .await
        .unwrap();
    let texts: Vec<String> = rendered.messages.iter().map(|m| m.text()).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[1].starts_with("<resource uri=\"demo://resource/dynamic/text/2\">\nResource 2: "),
        "{texts:?}"
    );
    assert!(texts[1].ends_with("\n</resource>"), "{texts:?}");

    // A prompt the server does not have is the server's JSON-RPC error.
    let missing = connection
        .get_prompt("no-such-prompt", serde_json::Map::new())
        .await
        .unwrap_err();
    assert!(
        matches!(
            missing,
            aquaregia_mcp::McpError::Protocol {
                method: "prompts/get",
                ..
            }
        ),
        "{missing:?}"
    );
    connection.close().await;
}

/// A tool that only runs as a task (2025-11-25 task augmentation, SEP-1686): called with a
/// `task` parameter, polled while its stages report their status, its report fetched with
/// `tasks/result`.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn server_everything_runs_a_task_only_tool() {
    let connection = mcp::connect_stdio(server_everything_stdio()).await.unwrap();
    let tools = connection.tools().await.unwrap();
    let research = find(&tools, "simulate-research-query");
    let statuses = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = statuses.clone();
    let reporter = aquaregia::ProgressReporter::new(move |progress| {
        seen.lock()
            .unwrap()
            .push(progress.message.unwrap_or_default());
    });
    let report = tokio::time::timeout(
        Duration::from_secs(30),
        reporter.scope(research.execute(json!({"topic": "ownership"}))),
    )
    .await
    .expect("the task ends")
    .unwrap();
    assert!(
        report.to_string().contains("Research Report: ownership"),
        "{report}"
    );
    let statuses = statuses.lock().unwrap().clone();
    assert!(
        statuses.iter().any(|s| s.starts_with("task working")),
        "{statuses:?}"
    );
    connection.close().await;
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn server_everything_over_streamable_http() {
    let (_server, port) = Background::server_everything("streamableHttp").await;
    let connection = mcp::connect_http(format!("http://127.0.0.1:{port}/mcp"))
        .await
        .unwrap();
    exercise_server_everything(&connection).await;
    connection.close().await;
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn server_everything_over_legacy_sse() {
    let (_server, port) = Background::server_everything("sse").await;
    let url = format!("http://127.0.0.1:{port}/sse");
    let explicit = mcp::connect_sse(&url).await.unwrap();
    exercise_server_everything(&explicit).await;
    explicit.close().await;
    // connect_http falls back to SSE when the server does not speak Streamable HTTP.
    let fallback = mcp::connect_http(&url).await.unwrap();
    exercise_server_everything(&fallback).await;
    fallback.close().await;
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn python_server_speaks_2026_07_28() {
    let connection = mcp::connect_stdio(python_server()).await.unwrap();
    assert_eq!(connection.server_info().protocol_version, "2026-07-28");
    assert_eq!(
        call(&connection, "add", json!({"a": 2, "b": 40})).await,
        Ok(ToolOutput::text("42"))
    );
    assert_eq!(
        call(&connection, "structured_weather", json!({"city": "Oslo"})).await,
        Ok(ToolOutput::Json(
            json!({"city": "Oslo", "temperature_c": 21})
        ))
    );
    match call(&connection, "speak", json!({"text": "hi"})).await {
        Ok(ToolOutput::Content(blocks) | ToolOutput::Structured { content: blocks, .. }) => assert!(
            blocks
                .iter()
                .any(|b| matches!(b, ContentBlock::Audio { mime_type, .. } if mime_type.starts_with("audio/"))),
            "{blocks:?}"
        ),
        other => panic!("audio must come back as an audio block, got {other:?}"),
    }
    assert!(matches!(
        call(&connection, "fail", json!({})).await,
        Err(ToolExecError::Execution(m)) if m.contains("always fails")
    ));
    // List changes arrive on the subscriptions/listen stream.
    let mut changed = connection.tools_changed();
    call(&connection, "enable_extra", json!({})).await.unwrap();
    tokio::time::timeout(BOUND, changed.changed())
        .await
        .expect("tools/list_changed arrived")
        .unwrap();
    assert!(
        connection
            .tools()
            .await
            .unwrap()
            .iter()
            .any(|t| t.name() == "extra_tool")
    );
    connection.close().await;
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn agent_uses_tools_from_both_servers() {
    let everything = mcp::connect_stdio(server_everything_stdio())
        .await
        .unwrap()
        .with_tool_prefix("everything");
    let python = mcp::connect_stdio(python_server())
        .await
        .unwrap()
        .with_tool_prefix("py");
    let mut tools = everything.tools().await.unwrap();
    tools.extend(python.tools().await.unwrap());

    let mock = MockServer::start().await;
    mock.push(Reply::json(chat_tool_calls(&[
        ("c1", "everything_get-sum", json!({"a": 20, "b": 22})),
        ("c2", "py_add", json!({"a": 1, "b": 2})),
        ("c3", "everything_get-tiny-image", json!({})),
    ])));
    mock.push(Reply::json(chat_text("42 and 3")));
    let agent = chat_client(&mock).agent("m").tools(tools).build().unwrap();
    let output = agent.run("add things").await.unwrap();
    assert_eq!(output.stop_reason, StopReason::Finished);
    let results: Vec<_> = output.steps[0]
        .tool_calls
        .iter()
        .map(|o| o.result.clone())
        .collect();
    assert!(
        results[0]
            .as_ref()
            .unwrap()
            .as_text()
            .unwrap()
            .contains("42")
    );
    assert_eq!(results[1], Ok(ToolOutput::text("3")));
    // Tool messages went back in call order, the image as a real image.
    let sent = mock.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let ids: Vec<&str> = sent
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c1", "c2", "c3"]);
    let last = sent.last().unwrap();
    assert!(
        last["content"]
            .to_string()
            .contains("data:image/png;base64,")
    );
    everything.close().await;
    python.close().await;
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn an_expired_http_session_is_reestablished() {
    let (server, port) = Background::server_everything("streamableHttp").await;
    let connection = mcp::connect_http(format!("http://127.0.0.1:{port}/mcp"))
        .await
        .unwrap();
    let echo = find(&connection.tools().await.unwrap(), "echo");
    assert_eq!(
        echo.execute(json!({"message": "one"})).await,
        Ok(ToolOutput::text("Echo: one"))
    );
    // A restarted server no longer knows the session: it answers 404, and the client
    // re-initialises and retries the call once.
    server.stop().await;
    let _server = Background::server_everything_on("streamableHttp", port).await;
    assert_eq!(
        echo.execute(json!({"message": "two"})).await,
        Ok(ToolOutput::text("Echo: two"))
    );
    connection.close().await;
}
