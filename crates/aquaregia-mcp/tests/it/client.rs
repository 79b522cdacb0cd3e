//! `aquaregia_mcp` against a real in-process rmcp server over an in-memory pipe: the result
//! mapping, errors, timeouts, cancellation, list changes, prefixes, filters and caching.

use std::time::{Duration, Instant};

use crate::common::{chat_client, mcp_error};
use aquaregia::{
    CancellationToken, Error, StopReason, Tool, ToolExecError, ToolOutput, ToolRegistry,
};
use aquaregia_mcp::{self as mcp, McpConnection, McpError};
use aquaregia_test_support::mcp_servers::test_server::{self, PNG_BASE64, TestServer};
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text, chat_tool_calls};
use serde_json::{Value, json};

/// Generous bound for things that should take milliseconds.
const BOUND: Duration = Duration::from_secs(5);

async fn connect(server: &TestServer) -> McpConnection {
    mcp::Connector::new()
        .name("test")
        .transport(server.serve_duplex())
        .await
        .expect("connects")
}

/// Content blocks from their JSON (camelCase fields).
fn content(blocks: Value) -> ToolOutput {
    ToolOutput::Content(serde_json::from_value(blocks).expect("content blocks"))
}

fn find(tools: &[Tool], name: &str) -> Tool {
    tools
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool `{name}`"))
        .clone()
}

async fn call(
    connection: &McpConnection,
    name: &str,
    args: Value,
) -> Result<ToolOutput, ToolExecError> {
    let tools = connection.tools().await.unwrap();
    find(&tools, name).execute(args).await
}

#[tokio::test]
async fn lists_every_tool_across_pages_with_schemas_verbatim() {
    let server = TestServer::new();
    let connection = connect(&server).await;
    assert_eq!(connection.server_info().protocol_version, "2026-07-28");
    let tools = connection.tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(Tool::name).collect();
    names.sort_unstable();
    assert_eq!(names, test_server::BASE_TOOLS);
    assert!(server.list_calls() >= 3, "pagination was followed");

    let complex = find(&tools, "complex_schema");
    let expected: Value = serde_json::from_str(test_server::COMPLEX_SCHEMA).unwrap();
    assert_eq!(complex.descriptor().input_schema, expected);
    // `$ref` into `$defs` validates before the call is sent.
    assert!(matches!(
        complex.execute(json!({"at": {"y": 1}})).await,
        Err(ToolExecError::InvalidArguments(_))
    ));
    assert_eq!(
        complex.execute(json!({"at": {"x": 1}})).await,
        Ok(ToolOutput::text("ok"))
    );

    let echo = find(&tools, "echo");
    assert_eq!(echo.annotations().read_only, Some(true));
    assert_eq!(find(&tools, "fails").annotations().destructive, Some(true));
    assert_eq!(
        find(&tools, "image").annotations().title.as_deref(),
        Some("Image maker")
    );
    ToolRegistry::from_tools(tools).expect("valid tool set");
}

#[tokio::test]
async fn maps_every_kind_of_result() {
    let server = TestServer::new();
    let c = connect(&server).await;
    assert_eq!(
        call(&c, "echo", json!({"text": "hi"})).await,
        Ok(ToolOutput::text("hi"))
    );
    assert_eq!(
        call(&c, "add", json!({"a": 2, "b": 40})).await,
        Ok(ToolOutput::text("42"))
    );
    assert_eq!(
        call(&c, "two_texts", json!({})).await,
        Ok(content(
            json!([{"type": "text", "text": "first"}, {"type": "text", "text": "second"}])
        ))
    );
    assert_eq!(
        call(&c, "image", json!({})).await,
        Ok(content(json!([
            {"type": "text", "text": "here is an image"},
            {"type": "image", "mimeType": "image/png", "data": PNG_BASE64}
        ])))
    );
    assert_eq!(
        call(&c, "resource_text", json!({})).await,
        Ok(content(
            json!([{"type": "resource", "uri": "file:///notes.txt", "mimeType": "text/plain", "text": "hello notes"}])
        ))
    );
    assert_eq!(
        call(&c, "resource_blob", json!({})).await,
        Ok(content(
            json!([{"type": "resource", "uri": "file:///data.bin", "mimeType": "application/octet-stream", "blob": "AAEC"}])
        ))
    );
    assert_eq!(
        call(&c, "resource_link", json!({})).await,
        Ok(content(
            json!([{"type": "resource_link", "uri": "file:///big.log", "name": "big.log", "mimeType": "text/plain", "description": "a log"}])
        ))
    );
    assert_eq!(
        call(&c, "structured", json!({})).await,
        Ok(ToolOutput::Json(json!({"temperature": 21, "unit": "C"})))
    );
    assert_eq!(call(&c, "empty", json!({})).await, Ok(ToolOutput::text("")));
    assert_eq!(
        call(&c, "audio", json!({})).await,
        Ok(content(
            json!([{"type": "audio", "mimeType": "audio/wav", "data": "UklGRiQAAABXQVZF"}])
        ))
    );
    assert_eq!(
        call(&c, "fails", json!({})).await,
        Err(ToolExecError::Execution("bad thing\nhappened".into()))
    );
    // The connection is still fine after errors.
    assert_eq!(
        call(&c, "echo", json!({"text": "still"})).await,
        Ok(ToolOutput::text("still"))
    );
}

#[tokio::test]
async fn call_timeout_cancels_at_the_server_and_the_connection_survives() {
    let server = TestServer::new();
    let c = connect(&server)
        .await
        .with_call_timeout(Duration::from_millis(200));
    let started = Instant::now();
    assert_eq!(
        call(&c, "never", json!({})).await,
        Err(ToolExecError::Timeout)
    );
    assert!(started.elapsed() < BOUND);
    assert!(
        server.wait_cancelled(1, BOUND).await,
        "server got notifications/cancelled"
    );
    assert_eq!(
        call(&c, "echo", json!({"text": "next"})).await,
        Ok(ToolOutput::text("next"))
    );
}

#[tokio::test]
async fn no_timeout_when_disabled() {
    let server = TestServer::new();
    let c = connect(&server).await.with_call_timeout(None);
    assert_eq!(
        call(&c, "slow", json!({"ms": 300})).await,
        Ok(ToolOutput::text("done"))
    );
}

#[tokio::test]
async fn dropped_connection_fails_calls_instead_of_hanging() {
    let server = TestServer::new();
    let c = connect(&server).await;
    let tools = c.tools().await.unwrap();
    let never = find(&tools, "never");
    let echo = find(&tools, "echo");
    let in_flight = tokio::spawn(async move { never.execute(json!({})).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(c);
    let result = tokio::time::timeout(BOUND, in_flight)
        .await
        .expect("no hang")
        .unwrap();
    // The model sees the error's text; the caller can still match the `McpError` itself.
    let error = result.unwrap_err();
    assert!(error.to_string().contains("closed"), "{error:?}");
    assert!(
        matches!(mcp_error(&error), Some(McpError::Disconnected)),
        "{error:?}"
    );
    let later = tokio::time::timeout(BOUND, echo.execute(json!({"text": "x"})))
        .await
        .expect("no hang")
        .unwrap_err();
    assert!(
        matches!(mcp_error(&later), Some(McpError::Disconnected)),
        "{later:?}"
    );
    assert_eq!(later.to_string(), McpError::Disconnected.to_string());
}

#[tokio::test]
async fn close_ends_the_session_for_every_clone() {
    let server = TestServer::new();
    let c = connect(&server).await;
    let other = c.clone().with_tool_prefix("x");
    let tools = other.tools().await.unwrap();
    c.close().await;
    assert!(other.is_closed());
    assert!(matches!(other.tools().await, Err(McpError::Disconnected)));
    assert!(tools[0].execute(json!({})).await.is_err());
}

#[tokio::test]
async fn list_changes_bump_the_generation_and_refresh_tools() {
    let server = TestServer::new();
    let c = connect(&server).await;
    let before = c.tools().await.unwrap();
    assert!(!before.iter().any(|t| t.name() == "extra"));
    // 2026-07-28 sessions hear about changes on a subscriptions/listen stream.
    assert!(server.wait_subscriptions(1, BOUND).await);
    let mut changed = c.tools_changed();
    server.set_extra_tool(true).await;
    tokio::time::timeout(BOUND, changed.changed())
        .await
        .expect("tools_changed fired")
        .unwrap();
    let after = c.tools().await.unwrap();
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(
        call(&c, "extra", json!({})).await,
        Ok(ToolOutput::text("extra"))
    );
}

#[tokio::test]
async fn repeated_listing_is_served_from_the_cache() {
    let server = TestServer::new();
    let c = connect(&server).await;
    let first = c.tools().await.unwrap();
    let calls = server.list_calls();
    let second = c.tools().await.unwrap();
    assert_eq!(server.list_calls(), calls, "no new tools/list request");
    // The very same tools, so agents can tell nothing changed.
    assert!(
        first
            .iter()
            .zip(&second)
            .all(|(a, b)| format!("{a:?}") == format!("{b:?}"))
    );
    // Concurrent refreshes after a change are coalesced into one listing.
    server.set_extra_tool(true).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let calls = server.list_calls();
    let (a, b, d) = tokio::join!(c.tools(), c.tools(), c.tools());
    assert!(a.is_ok() && b.is_ok() && d.is_ok());
    let pages = (test_server::BASE_TOOLS.len() + 1).div_ceil(test_server::PAGE_SIZE);
    assert_eq!(server.list_calls() - calls, pages, "one paginated listing");
}

#[tokio::test]
async fn prefix_filter_and_meta() {
    let server = TestServer::new();
    let c = connect(&server)
        .await
        .with_tool_prefix("srv")
        .with_tool_filter(|d| d.name != "srv_fails")
        .with_call_meta(serde_json::from_value(json!({"tenant": "acme"})).unwrap());
    let tools = c.tools().await.unwrap();
    assert!(tools.iter().all(|t| t.name().starts_with("srv_")));
    assert!(!tools.iter().any(|t| t.name() == "srv_fails"));
    // The MCP call uses the server's own name, with the configured _meta.
    let echoed = find(&tools, "srv_meta_echo")
        .execute(json!({}))
        .await
        .unwrap();
    assert!(echoed.as_text().unwrap().contains("acme"));
    assert_eq!(server.last_call_meta().unwrap()["tenant"], "acme");
    // The unprefixed view of the same session is unaffected.
    let plain = connect(&server).await;
    assert!(find(&plain.tools().await.unwrap(), "echo").name() == "echo");
}

#[tokio::test]
async fn duplicate_names_across_servers_fail_at_build() {
    let (a, b) = (TestServer::new(), TestServer::new());
    let (ca, cb) = (connect(&a).await, connect(&b).await);
    let mock = MockServer::start().await;
    let mut tools = ca.tools().await.unwrap();
    tools.extend(cb.tools().await.unwrap());
    let error = chat_client(&mock)
        .agent("m")
        .tools(tools)
        .build()
        .unwrap_err();
    assert!(
        matches!(&error, Error::ToolRegistry(m) if m.contains("`echo`")),
        "{error}"
    );
    // With prefixes both servers fit in one agent.
    let mut tools = ca.with_tool_prefix("a").tools().await.unwrap();
    tools.extend(cb.with_tool_prefix("b").tools().await.unwrap());
    assert!(chat_client(&mock).agent("m").tools(tools).build().is_ok());
}

#[tokio::test]
async fn agent_runs_mcp_tools_and_hot_reloads_them() {
    let server = TestServer::new();
    let c = connect(&server).await;
    let mock = MockServer::start().await;
    mock.push(Reply::json(chat_tool_calls(&[("c1", "image", json!({}))])));
    mock.push(Reply::json(chat_tool_calls(&[("c2", "extra", json!({}))])));
    mock.push(Reply::json(chat_text("done")));
    let trigger = server.clone();
    let source = c.clone();
    let agent = chat_client(&mock)
        .agent("m")
        .prepare_step(move |ctx| {
            let (mcp, trigger, step) = (source.clone(), trigger.clone(), ctx.step());
            async move {
                if step == 1 {
                    trigger.set_extra_tool(true).await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(aquaregia::StepOverrides::new().tools(mcp.tools().await?))
            }
        })
        .build()
        .unwrap();
    let output = agent.run("go").await.unwrap();
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(
        output.steps[1].tool_calls[0].result,
        Ok(ToolOutput::text("extra"))
    );
    // The image reached the model as an image, not base64 text.
    let messages = &mock.requests()[1].body["messages"];
    let image_message = messages.as_array().unwrap().last().unwrap();
    assert_eq!(image_message["role"], "user");
    assert_eq!(
        image_message["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{PNG_BASE64}")
    );
}

#[tokio::test]
async fn agent_cancellation_cancels_the_call_at_the_server() {
    let server = TestServer::new();
    let c = connect(&server).await;
    let mock = MockServer::start().await;
    mock.push(Reply::json(chat_tool_calls(&[("c1", "never", json!({}))])));
    let token = CancellationToken::new();
    let agent = chat_client(&mock)
        .agent("m")
        .tools(c.tools().await.unwrap())
        .cancellation_token(token.clone())
        .build()
        .unwrap();
    let run = tokio::spawn(async move { agent.run("go").await });
    let deadline = Instant::now() + BOUND;
    while server.call_count() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    token.cancel();
    let output = tokio::time::timeout(BOUND, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(output.stop_reason, StopReason::Cancelled);
    assert!(
        server.wait_cancelled(1, BOUND).await,
        "server got notifications/cancelled"
    );
}

#[tokio::test]
async fn non_object_arguments_are_rejected_before_sending() {
    let server = TestServer::new();
    let c = connect(&server).await;
    let tools = c.tools().await.unwrap();
    let calls = server.call_count();
    let error = find(&tools, "empty")
        .execute(json!([1, 2]))
        .await
        .unwrap_err();
    assert!(matches!(error, ToolExecError::InvalidArguments(_)));
    assert_eq!(server.call_count(), calls);
}

#[tokio::test]
async fn a_server_that_never_answers_the_handshake_times_out() {
    // The far end of the pipe is held open but nobody speaks.
    let (client, _server_end) = tokio::io::duplex(1024);
    let started = Instant::now();
    let error = mcp::Connector::new()
        .name("mute")
        .timeout(Duration::from_millis(300))
        .transport(client)
        .await
        .unwrap_err();
    assert!(started.elapsed() < BOUND);
    assert!(
        matches!(&error, McpError::Connect { server, message, .. } if server == "mute" && message.contains("handshake")),
        "{error}"
    );
}
