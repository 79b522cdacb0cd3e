//! Gemini API against a mock server replaying the checked fixtures.

use crate::common;

use std::time::{Duration, Instant};

use aquaregia::{
    AgentEvent, Client, ContentBlock, ContentPart, Error, FinishReason, Message, ModelRequest,
    Reasoning, Role, StreamEvent, Tool, ToolCall, ToolChoice, tool,
};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{fixture, fixture_json};
use futures::StreamExt;
use serde_json::{Value, json};

const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGMwTjsDAAI1AWaKkkQyAAAAAElFTkSuQmCC";
const SYSTEM: &str = "You are a concise weather assistant. Use the tools when they help.";
const QUESTION: &str =
    "What's the weather in Paris right now? Also chart the last three daily highs.";
const MODEL: &str = "gemini-3.7-flash";
const CALL_SIGNATURE: &str =
    "EvvvCv5nZW1pbmktZml4dHVyZS10aG91Z2h0LXNpZ25hdHVyZS1mYy10dXJuLW5vdC1yZWFs+/++";
const STREAM_SIGNATURE: &str =
    "EvvvCv5nZW1pbmktZml4dHVyZS10aG91Z2h0LXNpZ25hdHVyZS1zdHJlYW0tdGV4dC10dXJuLW5vdC1yZWFs+/++";
const THOUGHT: &str = "**Planning the tool calls**\n\nThe user wants the current weather in Paris and a chart of the last three daily highs. I'll call get_weather and render_chart in parallel.\n\n\n";

fn client(server: &MockServer, max_retries: u32) -> Client {
    Client::gemini()
        .base_url(server.root())
        .api_key("test-key")
        .max_retries(max_retries)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client builds")
}

/// The fixtures' two tools with their JSON schemas; `get_weather` answers JSON and
/// `render_chart` text plus a PNG, as in `request_function_responses_with_image.json`.
fn fixture_tools() -> Vec<Tool> {
    let request = fixture_json("gemini/request_tools_parameters_json_schema.json");
    request["tools"][0]["functionDeclarations"]
        .as_array()
        .expect("declarations")
        .iter()
        .map(|t| {
            let name = t["name"].as_str().expect("name");
            let builder = tool(name)
                .description(t["description"].as_str().expect("description"))
                .raw_schema(t["parametersJsonSchema"].clone());
            if name == "get_weather" {
                builder.execute_raw(|_| async {
                    Ok(json!({
                        "location": "Paris",
                        "temperature": 18,
                        "unit": "celsius",
                        "conditions": "partly cloudy"
                    }))
                })
            } else {
                builder.execute_raw(|_| async {
                    Ok(vec![
                        ContentBlock::text("Rendered chart 'Paris daily highs' (PNG attached)."),
                        ContentBlock::image("image/png", PNG),
                    ])
                })
            }
        })
        .collect()
}

fn weather_request() -> ModelRequest {
    ModelRequest::new(MODEL, vec![Message::user(QUESTION)])
        .instructions(SYSTEM)
        .tools(fixture_tools())
        .max_output_tokens(1024)
}

/// A fixture request body without `thinkingConfig` (a provider option left to `extra_body`).
fn without_thinking(mut body: Value) -> Value {
    body["generationConfig"]
        .as_object_mut()
        .expect("generationConfig")
        .remove("thinkingConfig");
    body
}

/// The model turn of `response_function_calls.json`, as the agent loop keeps it.
fn model_turn() -> Message {
    Message::new(
        Role::Assistant,
        vec![
            ContentPart::Reasoning(Reasoning {
                text: THOUGHT.into(),
                ..Reasoning::default()
            }),
            ContentPart::Reasoning(Reasoning {
                signature: Some(CALL_SIGNATURE.into()),
                ..Reasoning::default()
            }),
            ContentPart::ToolCall(ToolCall {
                id: "call_4718203".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "Paris", "unit": "celsius"}),
            }),
            ContentPart::ToolCall(ToolCall {
                id: "call_4718377".into(),
                name: "render_chart".into(),
                arguments: json!({"title": "Paris daily highs", "values": [17, 19, 18]}),
            }),
        ],
    )
}

/// Keys the `parameters` subset rejects.
fn assert_openapi_subset(schema: &Value) {
    const ALLOWED: &[&str] = &[
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "items",
        "minItems",
        "maxItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "anyOf",
        "propertyOrdering",
        "default",
        "example",
    ];
    let map = schema.as_object().expect("a schema object");
    for (key, value) in map {
        assert!(ALLOWED.contains(&key.as_str()), "`{key}` in {schema}");
        match key.as_str() {
            "properties" => value
                .as_object()
                .expect("properties")
                .values()
                .for_each(assert_openapi_subset),
            "items" => assert_openapi_subset(value),
            "anyOf" => value
                .as_array()
                .expect("anyOf")
                .iter()
                .for_each(assert_openapi_subset),
            "enum" => assert!(value.as_array().expect("enum").iter().all(Value::is_string)),
            "type" => assert!(value.is_string()),
            _ => {}
        }
    }
}

#[tokio::test]
async fn sends_the_key_the_model_path_and_the_documented_body() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json(
        "gemini/response_function_calls.json",
    )));
    client(&server, 0)
        .generate(&weather_request())
        .await
        .unwrap();
    let request = &server.requests()[0];
    assert_eq!(
        request.path,
        "/v1beta/models/gemini-3.7-flash:generateContent"
    );
    assert_eq!(request.headers["x-goog-api-key"], "test-key");
    assert!(request.headers.get("authorization").is_none());
    assert_eq!(
        request.body,
        without_thinking(fixture_json(
            "gemini/request_tools_parameters_json_schema.json"
        ))
    );
}

#[tokio::test]
async fn parses_parallel_function_calls_with_ids_signature_and_usage() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json(
        "gemini/response_function_calls.json",
    )));
    let response = client(&server, 0)
        .generate(&weather_request())
        .await
        .unwrap();
    assert_eq!(response.message, model_turn());
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 118);
    assert_eq!(response.usage.output_tokens, 52 + 148);
    assert_eq!(response.usage.reasoning_tokens, 148);
    assert_eq!(response.usage.total_tokens(), 318);
    assert_eq!(response.id.as_deref(), Some("qW9kaoG3Ho3Tz7IPl6e_sAg"));
    assert_eq!(response.model.as_deref(), Some(MODEL));
}

#[tokio::test]
async fn parses_a_signed_text_answer() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json("gemini/response_text.json")));
    let response = client(&server, 0)
        .generate(&weather_request())
        .await
        .unwrap();
    assert_eq!(
        response.text(),
        "It's 18 °C and partly cloudy in Paris. The chart shows highs of 17, 19 and 18 °C over the last three days."
    );
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(response.usage.input_tokens, 421);
    assert_eq!(response.usage.output_tokens, 31 + 61);
    // The signature goes back on the text part it came with.
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json("gemini/response_text.json")));
    let mut request = weather_request();
    request.messages.push(response.message.clone());
    request.messages.push(Message::user("Thanks"));
    client(&server, 0).generate(&request).await.unwrap();
    let body = &server.bodies()[0];
    let model = &body["contents"][1];
    assert_eq!(model["role"], "model");
    assert_eq!(
        model["parts"],
        fixture_json("gemini/response_text.json")["candidates"][0]["content"]["parts"]
    );
}

#[tokio::test]
async fn sends_function_responses_with_an_image_and_the_signature_back() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json("gemini/response_text.json")));
    let mut request = weather_request();
    request.messages.push(model_turn());
    request.messages.push(Message::new(
        Role::Tool,
        vec![
            ContentPart::ToolResult(aquaregia::ToolResult {
                call_id: "call_4718203".into(),
                name: "get_weather".into(),
                output: json!({
                    "location": "Paris", "temperature": 18,
                    "unit": "celsius", "conditions": "partly cloudy"
                })
                .into(),
                is_error: false,
            }),
            ContentPart::ToolResult(aquaregia::ToolResult {
                call_id: "call_4718377".into(),
                name: "render_chart".into(),
                output: vec![
                    ContentBlock::text("Rendered chart 'Paris daily highs' (PNG attached)."),
                    ContentBlock::image("image/png", PNG),
                ]
                .into(),
                is_error: false,
            }),
        ],
    ));
    client(&server, 0).generate(&request).await.unwrap();
    let expected = fixture_json("gemini/request_function_responses_with_image.json");
    let body = &server.bodies()[0];
    assert_eq!(body["contents"], expected["contents"]);
    assert_eq!(body["systemInstruction"], expected["systemInstruction"]);
    assert_eq!(body["toolConfig"], expected["toolConfig"]);
}

#[tokio::test]
async fn streams_text_with_crlf_framing() {
    let server = MockServer::start().await;
    let sse = fixture("gemini/stream_text.sse");
    assert!(sse.contains("\r\n\r\n"), "the fixture keeps its CRLF bytes");
    server.push(Reply::sse(sse));
    let events: Vec<StreamEvent> = client(&server, 0)
        .stream(&weather_request())
        .await
        .expect("stream opens")
        .map(|e| e.expect("no stream error"))
        .collect()
        .await;
    let request = &server.requests()[0];
    assert_eq!(
        request.path,
        "/v1beta/models/gemini-3.7-flash:streamGenerateContent"
    );
    assert_eq!(request.query, "alt=sse");
    assert_eq!(
        server.bodies()[0],
        without_thinking(fixture_json(
            "gemini/request_tools_parameters_json_schema.json"
        ))
    );
    assert_eq!(events.len(), 3);
    assert_eq!(
        events[0],
        StreamEvent::TextDelta("It's 18 °C and partly cloudy in Paris.".into())
    );
    let StreamEvent::Finish(response) = &events[2] else {
        panic!("last event is Finish: {events:?}");
    };
    assert_eq!(
        response.text(),
        "It's 18 °C and partly cloudy in Paris. The chart shows highs of 17, 19 and 18 °C over the last three days."
    );
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(response.usage.output_tokens, 31 + 61);
    assert_eq!(
        response.message.content.last(),
        Some(&ContentPart::Reasoning(Reasoning {
            signature: Some(STREAM_SIGNATURE.into()),
            ..Reasoning::default()
        }))
    );
}

#[tokio::test]
async fn streams_parallel_function_calls() {
    let server = MockServer::start().await;
    server.push(Reply::sse(fixture("gemini/stream_function_calls.sse")));
    let events: Vec<StreamEvent> = client(&server, 0)
        .stream(&weather_request())
        .await
        .expect("stream opens")
        .map(|e| e.expect("no stream error"))
        .collect()
        .await;
    assert_eq!(events[0], StreamEvent::ReasoningDelta(THOUGHT.into()));
    assert_eq!(
        events[1],
        StreamEvent::ToolCallStart {
            id: "call_4718203".into(),
            name: "get_weather".into()
        }
    );
    let StreamEvent::Finish(response) = events.last().expect("events") else {
        panic!("last event is Finish");
    };
    assert_eq!(response.message, model_turn());
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 118);
    assert_eq!(response.usage.reasoning_tokens, 148);
}

async fn agent_loop(streaming: bool) {
    let server = MockServer::start().await;
    if streaming {
        server.push(Reply::sse(fixture("gemini/stream_function_calls.sse")));
        server.push(Reply::sse(fixture("gemini/stream_text.sse")));
    } else {
        server.push(Reply::json(fixture_json(
            "gemini/response_function_calls.json",
        )));
        server.push(Reply::json(fixture_json("gemini/response_text.json")));
    }
    let agent = client(&server, 0)
        .agent(MODEL)
        .instructions(SYSTEM)
        .tools(fixture_tools())
        .max_output_tokens(1024)
        .build()
        .unwrap();
    let output = if streaming {
        let events: Vec<AgentEvent> = agent
            .stream(QUESTION)
            .map(|e| e.expect("no error"))
            .collect()
            .await;
        let Some(AgentEvent::Finish(output)) = events.last().cloned() else {
            panic!("last event is Finish");
        };
        output
    } else {
        agent.run(QUESTION).await.unwrap()
    };
    assert_eq!(output.steps.len(), 2);
    assert!(
        output
            .text
            .starts_with("It's 18 °C and partly cloudy in Paris.")
    );
    assert_eq!(output.usage.input_tokens, 118 + 421);

    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    let expected = fixture_json("gemini/request_function_responses_with_image.json");
    assert_eq!(bodies[1]["contents"], expected["contents"]);
    assert_eq!(
        bodies[1]["tools"],
        fixture_json("gemini/request_tools_parameters_json_schema.json")["tools"]
    );
    let paths: Vec<String> = server
        .requests()
        .into_iter()
        .map(|r| format!("{}?{}", r.path, r.query))
        .collect();
    let suffix = if streaming {
        ":streamGenerateContent?alt=sse"
    } else {
        ":generateContent?"
    };
    assert!(paths.iter().all(|p| p.ends_with(suffix)), "{paths:?}");
}

#[tokio::test]
async fn agent_loop_calls_tools_then_answers() {
    agent_loop(false).await;
}

#[tokio::test]
async fn agent_loop_calls_tools_then_answers_streaming() {
    agent_loop(true).await;
}

#[tokio::test]
async fn http_429_with_retry_info_is_retried_after_the_delay() {
    let server = MockServer::start().await;
    let mut limited = fixture_json("gemini/error_429_resource_exhausted.json");
    limited["error"]["details"][2]["retryDelay"] = json!("0.4s");
    server.push(Reply::error(429, limited));
    server.push(Reply::error(
        503,
        fixture_json("gemini/error_503_unavailable.json"),
    ));
    server.push(Reply::json(fixture_json("gemini/response_text.json")));
    let started = Instant::now();
    let response = client(&server, 2)
        .generate(&weather_request())
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn http_errors_carry_the_status_name() {
    let server = MockServer::start().await;
    server.push(Reply::error(
        400,
        fixture_json("gemini/error_400_missing_thought_signature.json"),
    ));
    let error = client(&server, 2)
        .generate(&weather_request())
        .await
        .unwrap_err();
    assert_eq!(server.request_count(), 1, "a 400 is not retried");
    match error {
        Error::Provider {
            status,
            code,
            message,
            ..
        } => {
            assert_eq!(status, 400);
            assert_eq!(code.as_deref(), Some("INVALID_ARGUMENT"));
            assert!(message.contains("thought_signature"));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn an_error_inside_a_stream_is_a_stream_error() {
    let server = MockServer::start().await;
    let error = json!({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}});
    server.push(Reply::sse(format!("data: {error}\r\n\r\n")));
    let events: Vec<Result<StreamEvent, Error>> = client(&server, 0)
        .stream(&weather_request())
        .await
        .expect("stream opens")
        .collect()
        .await;
    match events.last() {
        Some(Err(Error::Stream { code, message, .. })) => {
            assert_eq!(code.as_deref(), Some("UNAVAILABLE"));
            assert_eq!(message, "overloaded");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn calls_without_ids_get_unique_ones() {
    let server = MockServer::start().await;
    let mut response = fixture_json("gemini/response_function_calls.json");
    for part in response["candidates"][0]["content"]["parts"]
        .as_array_mut()
        .unwrap()
    {
        if let Some(call) = part.get_mut("functionCall") {
            call.as_object_mut().unwrap().remove("id");
        }
    }
    server.push(Reply::json(response.clone()));
    server.push(Reply::json(response));
    let client = client(&server, 0);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let answer = client.generate(&weather_request()).await.unwrap();
        for part in &answer.message.content {
            if let ContentPart::ToolCall(call) = part {
                ids.push(call.id.clone());
            }
        }
    }
    assert_eq!(ids.len(), 4);
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 4, "{ids:?}");
}

#[tokio::test]
async fn maps_tool_choice_and_temperature() {
    let server = MockServer::start().await;
    server.set_fallback(Reply::json(fixture_json("gemini/response_text.json")));
    let client = client(&server, 0);
    for choice in [
        ToolChoice::None,
        ToolChoice::Required,
        ToolChoice::Tool("get_weather".into()),
    ] {
        let request = weather_request().tool_choice(choice).temperature(0.5);
        client.generate(&request).await.unwrap();
    }
    let bodies = server.bodies();
    let configs: Vec<&Value> = bodies
        .iter()
        .map(|b| &b["toolConfig"]["functionCallingConfig"])
        .collect();
    assert_eq!(configs[0], &json!({"mode": "NONE"}));
    assert_eq!(configs[1], &json!({"mode": "ANY"}));
    assert_eq!(
        configs[2],
        &json!({"mode": "ANY", "allowedFunctionNames": ["get_weather"]})
    );
    assert_eq!(
        bodies[0]["generationConfig"],
        json!({"temperature": 0.5, "maxOutputTokens": 1024})
    );
}

/// An MCP server's `inputSchema` with `$schema`, `$defs`/`$ref`, `additionalProperties`,
/// `anyOf` and `const`.
fn mcp_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "mode": {"anyOf": [{"const": "read"}, {"const": "write"}], "default": "read"},
            "limit": {"anyOf": [{"type": "integer", "exclusiveMinimum": 0}, {"type": "null"}]},
            "filter": {"$ref": "#/$defs/Filter"}
        },
        "required": ["path"],
        "additionalProperties": false,
        "$defs": {
            "Filter": {
                "type": "object",
                "properties": {
                    "glob": {"type": "string"},
                    "kind": {"type": "string", "enum": ["file", "dir"]}
                },
                "additionalProperties": false
            }
        }
    })
}

#[tokio::test]
async fn mcp_schemas_make_valid_declarations() {
    let server = MockServer::start().await;
    server.set_fallback(Reply::json(fixture_json("gemini/response_text.json")));
    let client = client(&server, 0);
    let resolvable = tool("read").raw_schema(mcp_schema());
    let mut dangling = mcp_schema();
    dangling["properties"]["other"] = json!({"$ref": "#/$defs/Missing"});
    let fitted = tool("read_too").raw_schema(dangling);
    let noop = |_| async { Ok(json!(null)) };
    let request = ModelRequest::new(MODEL, vec![Message::user("go")]).tools([
        resolvable.execute_raw(noop),
        fitted.execute_raw(noop),
        tool("ping").execute_raw(noop),
    ]);
    client.generate(&request).await.unwrap();
    let body = &server.bodies()[0];
    assert_eq!(
        body["tools"].as_array().unwrap().len(),
        1,
        "one tools entry"
    );
    let declarations = body["tools"][0]["functionDeclarations"].as_array().unwrap();

    // Every reference resolves: the schema goes as JSON Schema, unchanged.
    assert_eq!(declarations[0]["parametersJsonSchema"], mcp_schema());
    assert!(declarations[0].get("parameters").is_none());

    // A dangling reference: fitted to the OpenAPI subset instead, never both fields.
    assert!(declarations[1].get("parametersJsonSchema").is_none());
    let parameters = &declarations[1]["parameters"];
    assert_openapi_subset(parameters);
    assert_eq!(
        parameters["properties"]["mode"],
        json!({"anyOf": [{"type": "STRING", "enum": ["read"]}, {"type": "STRING", "enum": ["write"]}], "default": "read"})
    );
    assert_eq!(
        parameters["properties"]["limit"],
        json!({"type": "INTEGER", "minimum": 0, "nullable": true})
    );
    assert_eq!(
        parameters["properties"]["filter"]["properties"]["kind"],
        json!({"type": "STRING", "enum": ["file", "dir"]})
    );
    assert_eq!(parameters["required"], json!(["path"]));

    // A tool without parameters sends neither field.
    assert_eq!(declarations[2], json!({"name": "ping"}));
}
