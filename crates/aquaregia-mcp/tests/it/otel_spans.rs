//! OpenTelemetry (feature `otel`): a run that calls an in-process MCP server's tool exports
//! `invoke_agent`, `chat`, `execute_tool` and MCP `tools/call` spans with the GenAI and MCP
//! semantic conventions' attributes, in one trace; the server receives that trace's
//! `traceparent` in the `tools/call` `_meta`; prompts and answers are recorded only when asked.

use std::sync::{Arc, Mutex};

use crate::common::chat_client;
use aquaregia::{Agent, StopReason, TELEMETRY_TARGET, Telemetry};
use aquaregia_mcp::{self as mcp, HttpOptions, McpConnection};
use aquaregia_test_support::mcp_servers::test_server::TestServer;
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text, chat_tool_calls};
use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry::trace::{SpanId, SpanKind, Status, TracerProvider as _};
use opentelemetry::{Array, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry};

/// Spans exported while `run` runs, with a subscriber that sends only aquaregia's GenAI spans
/// to OpenTelemetry (the filter a user would set).
async fn traced<F: Future>(run: F) -> (F::Output, Vec<SpanData>) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("aquaregia-test"))
        .with_filter(Targets::new().with_target(TELEMETRY_TARGET, Level::INFO));
    let subscriber = Registry::default().with(layer);
    let guard = tracing::subscriber::set_default(subscriber);
    let output = run.await;
    drop(guard);
    provider.force_flush().expect("flush");
    let spans = exporter.get_finished_spans().expect("spans");
    provider.shutdown().expect("shutdown");
    (output, spans)
}

async fn connect(server: &TestServer) -> McpConnection {
    mcp::Connector::new()
        .name("test")
        .transport(server.serve_duplex())
        .await
        .expect("connects")
}

/// The model calls the MCP `echo` tool, then answers.
async fn agent(model: &MockServer, connection: &McpConnection, telemetry: Telemetry) -> Agent {
    model.push(Reply::json(chat_tool_calls(&[(
        "call_1",
        "echo",
        json!({"text": "secret-argument"}),
    )])));
    model.push(Reply::json(chat_text("secret-answer")));
    chat_client(model)
        .agent("mock-model")
        .instructions("secret-instructions")
        .tools(connection.tools().await.unwrap())
        .telemetry(telemetry)
        .build()
        .unwrap()
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn string(span: &SpanData, key: &str) -> String {
    match attribute(span, key) {
        Some(value) => value.as_str().into_owned(),
        None => panic!("span `{}` has no `{key}`: {:?}", span.name, span.attributes),
    }
}

fn int(span: &SpanData, key: &str) -> i64 {
    match attribute(span, key) {
        Some(Value::I64(value)) => *value,
        other => panic!("span `{}`: `{key}` is {other:?}", span.name),
    }
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|span| span.name == name).collect()
}

fn one<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    let found = named(spans, name);
    assert_eq!(
        found.len(),
        1,
        "one `{name}` span in {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found[0]
}

#[tokio::test]
async fn a_run_exports_agent_chat_tool_and_mcp_spans_in_one_trace() {
    let model = MockServer::start().await;
    let server = TestServer::new();
    let connection = connect(&server).await;
    let agent = agent(&model, &connection, Telemetry::new()).await;

    let (output, spans) = traced(agent.run("secret-prompt")).await;
    let output = output.unwrap();
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(output.text, "secret-answer");

    // The run.
    let run = one(&spans, "invoke_agent");
    assert_eq!(run.parent_span_id, SpanId::INVALID, "the run is the root");
    assert_eq!(string(run, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(string(run, "gen_ai.provider.name"), "openai");
    assert_eq!(string(run, "gen_ai.request.model"), "mock-model");
    assert_eq!(int(run, "gen_ai.usage.input_tokens"), 20);
    assert_eq!(int(run, "gen_ai.usage.output_tokens"), 10);
    let trace_id = run.span_context.trace_id();

    // Two model calls, children of the run.
    let chats = named(&spans, "chat mock-model");
    assert_eq!(chats.len(), 2, "{spans:#?}");
    let mut reasons = Vec::new();
    for chat in &chats {
        assert_eq!(chat.span_context.trace_id(), trace_id);
        assert_eq!(chat.parent_span_id, run.span_context.span_id());
        assert_eq!(chat.span_kind, SpanKind::Client);
        assert_eq!(string(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(string(chat, "gen_ai.provider.name"), "openai");
        assert_eq!(string(chat, "gen_ai.system"), "openai");
        assert_eq!(string(chat, "gen_ai.request.model"), "mock-model");
        assert_eq!(string(chat, "gen_ai.response.model"), "mock-model");
        assert_eq!(string(chat, "gen_ai.response.id"), "chatcmpl-test");
        assert_eq!(string(chat, "server.address"), "127.0.0.1");
        assert_eq!(int(chat, "gen_ai.usage.input_tokens"), 10);
        assert_eq!(int(chat, "gen_ai.usage.output_tokens"), 5);
        assert!(attribute(chat, "gen_ai.usage.cache_read.input_tokens").is_none());
        match attribute(chat, "gen_ai.response.finish_reasons") {
            Some(Value::Array(Array::String(values))) => {
                reasons.extend(values.iter().map(|v| v.as_str().to_owned()));
            }
            other => panic!("finish reasons: {other:?}"),
        }
    }
    reasons.sort();
    assert_eq!(reasons, ["stop", "tool_calls"]);

    // The tool call, a child of the run.
    let tool = one(&spans, "execute_tool echo");
    assert_eq!(tool.span_context.trace_id(), trace_id);
    assert_eq!(tool.parent_span_id, run.span_context.span_id());
    assert_eq!(string(tool, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(string(tool, "gen_ai.tool.name"), "echo");
    assert_eq!(string(tool, "gen_ai.tool.call.id"), "call_1");
    assert_eq!(string(tool, "gen_ai.tool.type"), "function");
    assert_eq!(tool.status, Status::Unset);

    // The MCP request, a child of the tool call.
    let call = one(&spans, "tools/call echo");
    assert_eq!(call.span_context.trace_id(), trace_id);
    assert_eq!(call.parent_span_id, tool.span_context.span_id());
    assert_eq!(call.span_kind, SpanKind::Client);
    assert_eq!(string(call, "mcp.method.name"), "tools/call");
    assert_eq!(string(call, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(string(call, "gen_ai.tool.name"), "echo");
    assert_eq!(string(call, "mcp.protocol.version"), "2026-07-28");
    assert_eq!(string(call, "aquaregia.mcp.server"), "test");
    assert!(!string(call, "jsonrpc.request.id").is_empty());

    // The server got the MCP span's context.
    let meta = server.last_call_meta().expect("the server was called");
    let expected = format!("00-{}-{}-01", trace_id, call.span_context.span_id());
    assert_eq!(meta["traceparent"], json!(expected), "{meta}");

    // No content without `record_content`.
    for span in &spans {
        for kv in &span.attributes {
            let value = kv.value.as_str();
            assert!(
                !value.contains("secret"),
                "span `{}` records content in `{}`: {value}",
                span.name,
                kv.key
            );
        }
        for key in [
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        ] {
            assert!(attribute(span, key).is_none(), "{} has {key}", span.name);
        }
    }
    connection.close().await;
}

#[tokio::test]
async fn content_is_recorded_only_when_enabled() {
    let model = MockServer::start().await;
    let server = TestServer::new();
    let connection = connect(&server).await;
    let agent = agent(
        &model,
        &connection,
        Telemetry::new().record_content(true).agent_name("helper"),
    )
    .await;

    let (output, spans) = traced(agent.run("secret-prompt")).await;
    output.unwrap();

    let run = one(&spans, "invoke_agent helper");
    assert_eq!(string(run, "gen_ai.agent.name"), "helper");
    let chats = named(&spans, "chat mock-model");
    assert_eq!(chats.len(), 2);
    let first = chats
        .iter()
        .find(|chat| !string(chat, "gen_ai.input.messages").contains("tool_call_response"))
        .expect("the first call");
    let input: serde_json::Value =
        serde_json::from_str(&string(first, "gen_ai.input.messages")).unwrap();
    assert_eq!(
        input,
        json!([{"role": "user", "parts": [{"type": "text", "content": "secret-prompt"}]}])
    );
    let instructions: serde_json::Value =
        serde_json::from_str(&string(first, "gen_ai.system_instructions")).unwrap();
    assert_eq!(
        instructions,
        json!([{"type": "text", "content": "secret-instructions"}])
    );
    let output: serde_json::Value =
        serde_json::from_str(&string(first, "gen_ai.output.messages")).unwrap();
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["finish_reason"], "tool_calls");
    assert_eq!(output[0]["parts"][0]["type"], "tool_call");
    assert_eq!(output[0]["parts"][0]["name"], "echo");
    assert_eq!(
        output[0]["parts"][0]["arguments"],
        json!({"text": "secret-argument"})
    );

    let tool = one(&spans, "execute_tool echo");
    assert_eq!(
        string(tool, "gen_ai.tool.call.arguments"),
        r#"{"text":"secret-argument"}"#
    );
    assert_eq!(string(tool, "gen_ai.tool.call.result"), "secret-argument");
    connection.close().await;
}

#[tokio::test]
async fn a_failing_tool_call_marks_its_spans_as_errors() {
    let model = MockServer::start().await;
    let server = TestServer::new();
    let connection = connect(&server).await;
    model.push(Reply::json(chat_tool_calls(&[(
        "call_1",
        "fails",
        json!({}),
    )])));
    model.push(Reply::json(chat_text("done")));
    let agent = chat_client(&model)
        .agent("mock-model")
        .tools(connection.tools().await.unwrap())
        .build()
        .unwrap();

    let (output, spans) = traced(agent.run("go")).await;
    output.unwrap();

    let tool = one(&spans, "execute_tool fails");
    assert!(
        matches!(tool.status, Status::Error { .. }),
        "{:?}",
        tool.status
    );
    assert_eq!(string(tool, "error.type"), "tool_error");
    let call = one(&spans, "tools/call fails");
    assert!(
        matches!(call.status, Status::Error { .. }),
        "{:?}",
        call.status
    );
    assert_eq!(string(call, "error.type"), "tool_error");
    assert_eq!(call.parent_span_id, tool.span_context.span_id());
    connection.close().await;
}

/// A 2025-11-25 Streamable HTTP server with session `sess-42` and one tool, `work`; keeps the
/// `_meta` of the last `tools/call`.
fn http_server(meta: &Arc<Mutex<Option<serde_json::Value>>>) -> Router {
    let meta = meta.clone();
    fn answer(id: &serde_json::Value, result: &serde_json::Value) -> Response {
        (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::HeaderName::from_static("mcp-session-id"), "sess-42"),
            ],
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})),
        )
            .into_response()
    }
    Router::new().route(
        "/mcp",
        post(
            move |headers: HeaderMap, axum::Json(message): axum::Json<serde_json::Value>| {
                let meta = meta.clone();
                async move {
                    let id = message.get("id").cloned().unwrap_or_default();
                    let method = message["method"].as_str().unwrap_or_default();
                    let in_session = headers
                        .get("mcp-session-id")
                        .is_some_and(|value| value == "sess-42");
                    match method {
                        "initialize" => answer(
                            &id,
                            &json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                   "serverInfo": {"name": "http-test", "version": "1"}}),
                        ),
                        "tools/list" if in_session => answer(
                            &id,
                            &json!({"tools": [{"name": "work", "inputSchema": {"type": "object"}}]}),
                        ),
                        "tools/call" if in_session => {
                            *meta.lock().unwrap() = Some(message["params"]["_meta"].clone());
                            answer(&id, &json!({"content": [{"type": "text", "text": "done"}]}))
                        }
                        "server/discover" => (
                            [(header::CONTENT_TYPE, "application/json")],
                            axum::Json(json!({"jsonrpc": "2.0", "id": id,
                                "error": {"code": -32601, "message": "Method not found"}})),
                        )
                            .into_response(),
                        _ if message.get("id").is_none() => StatusCode::ACCEPTED.into_response(),
                        _ => StatusCode::NOT_FOUND.into_response(),
                    }
                }
            },
        )
        .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
        .delete(|| async { StatusCode::OK }),
    )
}

#[tokio::test]
async fn an_http_call_reports_its_session_and_server_and_sends_the_trace_context() {
    let meta = Arc::new(Mutex::new(None));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = http_server(&meta);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let connection = mcp::Connector::new()
        .name("remote")
        .http(format!("http://{address}/mcp"), HttpOptions::new())
        .await
        .unwrap();
    let tools = connection.tools().await.unwrap();
    let work = tools.iter().find(|tool| tool.name() == "work").unwrap();

    let (output, spans) = traced(work.execute(json!({}))).await;
    assert_eq!(output.unwrap().to_string(), "done");

    let call = one(&spans, "tools/call work");
    assert_eq!(call.parent_span_id, SpanId::INVALID);
    assert_eq!(string(call, "mcp.session.id"), "sess-42");
    assert_eq!(string(call, "mcp.protocol.version"), "2025-11-25");
    assert_eq!(string(call, "network.transport"), "tcp");
    assert_eq!(string(call, "server.address"), "127.0.0.1");
    assert_eq!(int(call, "server.port"), i64::from(address.port()));
    assert_eq!(string(call, "aquaregia.mcp.server"), "remote");
    let sent = meta.lock().unwrap().clone().expect("the tool was called");
    assert_eq!(
        sent["traceparent"],
        json!(format!(
            "00-{}-{}-01",
            call.span_context.trace_id(),
            call.span_context.span_id()
        ))
    );
    connection.close().await;
    task.abort();
}

#[tokio::test]
async fn a_failed_model_call_marks_the_chat_and_run_spans_as_errors() {
    let model = MockServer::start().await;
    model.push(Reply::error(
        400,
        json!({"error": {"message": "bad request", "type": "invalid_request_error"}}),
    ));
    let agent = chat_client(&model).agent("mock-model").build().unwrap();

    let (output, spans) = traced(agent.run("go")).await;
    assert!(output.is_err());

    let chat = one(&spans, "chat mock-model");
    assert!(
        matches!(chat.status, Status::Error { .. }),
        "{:?}",
        chat.status
    );
    assert_eq!(string(chat, "error.type"), "400");
    assert!(attribute(chat, "gen_ai.usage.input_tokens").is_none());
    let run = one(&spans, "invoke_agent");
    assert!(
        matches!(run.status, Status::Error { .. }),
        "{:?}",
        run.status
    );
    assert_eq!(string(run, "error.type"), "400");
    assert_eq!(chat.parent_span_id, run.span_context.span_id());
}
