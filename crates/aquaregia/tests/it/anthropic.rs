//! Anthropic Messages API against a mock server speaking the real wire format.

use crate::common;

use std::time::Duration;

use aquaregia::{
    Client, ContentBlock, ContentPart, Error, FinishReason, Message, ModelRequest, Reasoning, Role,
    StreamEvent, Tool, ToolCall, ToolChoice, ToolOutput, ToolResult, tool,
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

fn client(server: &MockServer, max_retries: u32) -> Client {
    Client::anthropic()
        .base_url(server.root())
        .api_key("test-key")
        .max_retries(max_retries)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client builds")
}

/// The fixtures' two tools, with their exact descriptions and schemas.
fn fixture_tools() -> Vec<Tool> {
    let request = fixture_json("anthropic/request_tools.json");
    request["tools"]
        .as_array()
        .expect("tools array")
        .iter()
        .map(|t| {
            tool(t["name"].as_str().expect("name"))
                .description(t["description"].as_str().expect("description"))
                .raw_schema(t["input_schema"].clone())
                .execute_raw(|_| async { Ok(json!(null)) })
        })
        .collect()
}

fn weather_request() -> ModelRequest {
    ModelRequest::new("claude-sonnet-4-5", vec![Message::user(QUESTION)])
        .instructions(SYSTEM)
        .tools(fixture_tools())
        .max_output_tokens(1024)
}

/// The assistant turn of `response_tool_use.json`, as the agent loop keeps it.
fn assistant_turn() -> Message {
    Message::new(
        Role::Assistant,
        vec![
            ContentPart::text("I'll look up the current weather in Paris and draw the chart."),
            ContentPart::ToolCall(ToolCall {
                id: "toolu_01D7FLrfh4GYq7yT1ULFeyMV".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "Paris", "unit": "celsius"}),
            }),
            ContentPart::ToolCall(ToolCall {
                id: "toolu_01Kq8WbZ3xYtR5vN2mJc4HsP".into(),
                name: "render_chart".into(),
                arguments: json!({"title": "Paris daily highs", "values": [17, 19, 18]}),
            }),
        ],
    )
}

fn without_tool_choice(mut body: Value) -> Value {
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    body.as_object_mut()
        .expect("body is an object")
        .remove("tool_choice");
    body
}

async fn collect(client: &Client, request: &ModelRequest) -> Vec<Result<StreamEvent, Error>> {
    client
        .stream(request)
        .await
        .expect("stream opens")
        .collect()
        .await
}

#[tokio::test]
async fn parses_tool_use_response_usage_and_finish_reason() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json(
        "anthropic/response_tool_use.json",
    )));
    let response = client(&server, 1)
        .generate(&weather_request())
        .await
        .unwrap();
    assert_eq!(response.message, assistant_turn());
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 512);
    assert_eq!(response.usage.output_tokens, 118);
    assert_eq!(response.usage.cached_input_tokens, 0);
    assert_eq!(response.id.as_deref(), Some("msg_01XFDUDYJgAACzvnptvVoYEL"));
    assert_eq!(
        response.model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );
}

#[tokio::test]
async fn sends_auth_headers_and_the_documented_body_to_v1_messages() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json(
        "anthropic/response_tool_use.json",
    )));
    client(&server, 1)
        .generate(&weather_request())
        .await
        .unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.headers["x-api-key"], "test-key");
    assert_eq!(request.headers["anthropic-version"], "2023-06-01");
    assert!(request.headers.get("authorization").is_none());
    assert_eq!(
        without_tool_choice(request.body.clone()),
        fixture_json("anthropic/request_tools.json")
    );
}

#[tokio::test]
async fn sends_tool_results_with_an_image_and_an_error_first_in_one_user_message() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json(
        "anthropic/response_tool_use.json",
    )));
    let tool_message = Message::new(
        Role::Tool,
        vec![
            ContentPart::ToolResult(ToolResult {
                call_id: "toolu_01D7FLrfh4GYq7yT1ULFeyMV".into(),
                name: "get_weather".into(),
                output: ToolOutput::text("Weather service timed out after 10s."),
                is_error: true,
            }),
            ContentPart::ToolResult(ToolResult {
                call_id: "toolu_01Kq8WbZ3xYtR5vN2mJc4HsP".into(),
                name: "render_chart".into(),
                output: ToolOutput::Content(vec![
                    ContentBlock::text("Rendered chart 'Paris daily highs' (PNG)."),
                    ContentBlock::image("image/png", PNG),
                ]),
                is_error: false,
            }),
        ],
    );
    let mut request = weather_request();
    request.messages.push(assistant_turn());
    request.messages.push(tool_message);
    request
        .messages
        .push(Message::user("Use Fahrenheit next time."));
    client(&server, 1).generate(&request).await.unwrap();

    let body = &server.requests()[0].body;
    let expected = fixture_json("anthropic/request_tool_results.json");
    let messages = body["messages"].as_array().expect("messages");
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(messages[0], expected["messages"][0]);
    assert_eq!(messages[1], expected["messages"][1]);

    let content = messages[2]["content"].as_array().expect("content blocks");
    assert_eq!(content.len(), 3);
    let error = &content[0];
    assert_eq!(error["type"], "tool_result");
    assert_eq!(error["tool_use_id"], "toolu_01D7FLrfh4GYq7yT1ULFeyMV");
    assert_eq!(error["is_error"], true);
    assert_eq!(error["content"], "Weather service timed out after 10s.");
    let chart = &content[1];
    assert_eq!(chart, &expected["messages"][2]["content"][1]);
    assert_eq!(chart["content"][1]["source"]["type"], "base64");
    assert_eq!(chart["content"][1]["source"]["data"], PNG);
    assert!(chart.get("is_error").is_none());
    assert_eq!(
        content[2],
        json!({"type": "text", "text": "Use Fahrenheit next time."})
    );
}

#[tokio::test]
async fn maps_reasoning_images_tool_choice_and_odd_arguments() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json(
        "anthropic/response_tool_use.json",
    )));
    let messages = vec![
        Message::system("Be brief."),
        Message::new(
            Role::User,
            vec![
                ContentPart::text("Look:"),
                ContentPart::image_url("https://example.com/a.png"),
                ContentPart::image_url(format!("data:image/png;base64,{PNG}")),
                ContentPart::text("  "),
            ],
        ),
        Message::new(
            Role::Assistant,
            vec![
                ContentPart::Reasoning(Reasoning {
                    text: "signed".into(),
                    signature: Some("sig".into()),
                    ..Reasoning::default()
                }),
                ContentPart::Reasoning(Reasoning {
                    encrypted_content: Some("opaque".into()),
                    ..Reasoning::default()
                }),
                ContentPart::Reasoning(Reasoning {
                    text: "from another provider".into(),
                    ..Reasoning::default()
                }),
                ContentPart::ToolCall(ToolCall {
                    id: "t1".into(),
                    name: "get_weather".into(),
                    arguments: json!("{\"location\": \"Paris\""),
                }),
                ContentPart::ToolCall(ToolCall {
                    id: "t2".into(),
                    name: "get_weather".into(),
                    arguments: json!("{\"location\": \"Oslo\"}"),
                }),
            ],
        ),
        Message::new(
            Role::Tool,
            vec![
                ContentPart::ToolResult(ToolResult {
                    call_id: "t1".into(),
                    name: "get_weather".into(),
                    output: ToolOutput::text(""),
                    is_error: true,
                }),
                ContentPart::ToolResult(ToolResult {
                    call_id: "t2".into(),
                    name: "get_weather".into(),
                    output: ToolOutput::Json(json!({"temp": 3})),
                    is_error: false,
                }),
            ],
        ),
    ];
    let request = ModelRequest::new("claude-haiku-4-5", messages)
        .instructions("You help.")
        .tools(fixture_tools())
        .tool_choice(ToolChoice::Tool("get_weather".into()))
        .temperature(0.5);
    client(&server, 1).generate(&request).await.unwrap();

    let body = &server.requests()[0].body;
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["system"], "You help.\n\nBe brief.");
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "get_weather"})
    );
    assert!(body.get("stream").is_none());
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"type": "text", "text": "Look:"},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ])
    );
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "thinking", "thinking": "signed", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "get_weather", "input": {"location": "Oslo"}},
        ])
    );
    assert_eq!(
        body["messages"][2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "t1", "is_error": true,
             "content": "The tool failed without output."},
            {"type": "tool_result", "tool_use_id": "t2", "content": "{\"temp\":3}"},
        ])
    );
}

#[tokio::test]
async fn tool_choice_variants_and_no_tools() {
    let server = MockServer::start().await;
    for _ in 0..3 {
        server.push(Reply::json(fixture_json(
            "anthropic/response_tool_use.json",
        )));
    }
    let client = client(&server, 1);
    for choice in [ToolChoice::Required, ToolChoice::None] {
        client
            .generate(&weather_request().tool_choice(choice))
            .await
            .unwrap();
    }
    client
        .generate(&ModelRequest::new("m", vec![Message::user("hi")]))
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests[0].body["tool_choice"], json!({"type": "any"}));
    assert_eq!(requests[1].body["tool_choice"], json!({"type": "none"}));
    let plain = &requests[2].body;
    assert!(plain.get("tools").is_none());
    assert!(plain.get("tool_choice").is_none());
    assert!(plain.get("system").is_none());
    assert_eq!(
        plain["messages"],
        json!([{"role": "user", "content": "hi"}])
    );
}

#[tokio::test]
async fn streams_thinking_text_and_tool_use_in_five_byte_chunks() {
    let server = MockServer::start().await;
    server.push(Reply::Sse {
        body: fixture("anthropic/stream_thinking_text_tool_use.sse"),
        chunk: 5,
        delay: Duration::ZERO,
    });
    let mut extra = serde_json::Map::new();
    extra.insert(
        "thinking".into(),
        json!({"type": "enabled", "budget_tokens": 2048}),
    );
    let request = weather_request().max_output_tokens(4096).extra_body(extra);
    let events = collect(&client(&server, 1), &request).await;

    assert_eq!(
        without_tool_choice(server.requests()[0].body.clone()),
        fixture_json("anthropic/request_stream_thinking.json")
    );

    let events: Vec<StreamEvent> = events.into_iter().map(Result::unwrap).collect();
    let mut reasoning = String::new();
    let mut text = String::new();
    let mut arguments = String::new();
    let mut starts = Vec::new();
    for event in &events {
        match event {
            StreamEvent::ReasoningDelta(delta) => reasoning.push_str(delta),
            StreamEvent::TextDelta(delta) => text.push_str(delta),
            StreamEvent::ToolCallStart { id, name } => starts.push((id.clone(), name.clone())),
            StreamEvent::ToolCallDelta {
                id,
                arguments: piece,
            } => {
                assert_eq!(id, "toolu_01D7FLrfh4GYq7yT1ULFeyMV");
                arguments.push_str(piece);
            }
            StreamEvent::Finish(_) => {}
            other => panic!("unexpected event {other:?}"),
        }
    }
    let thinking = "The user wants current weather in Paris and a chart of three daily highs. \
                    I'll call get_weather first.";
    assert_eq!(reasoning, thinking);
    assert_eq!(text, "I'll check the weather in Paris.");
    assert_eq!(
        starts,
        [(
            "toolu_01D7FLrfh4GYq7yT1ULFeyMV".to_owned(),
            "get_weather".to_owned()
        )]
    );
    assert_eq!(arguments, r#"{"location": "Paris", "unit": "celsius"}"#);

    let Some(StreamEvent::Finish(response)) = events.last() else {
        panic!("the stream must end with Finish");
    };
    assert_eq!(
        response.message.content,
        [
            ContentPart::Reasoning(Reasoning {
                text: thinking.into(),
                signature: Some(
                    "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds-fixture-signature-not-real"
                        .into()
                ),
                ..Reasoning::default()
            }),
            ContentPart::text("I'll check the weather in Paris."),
            ContentPart::ToolCall(ToolCall {
                id: "toolu_01D7FLrfh4GYq7yT1ULFeyMV".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "Paris", "unit": "celsius"}),
            }),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 530);
    assert_eq!(response.usage.output_tokens, 96);
    assert_eq!(response.id.as_deref(), Some("msg_01HJ4k2Lm9Pq7Rs5Tv3Wx1Yz"));
    assert_eq!(
        response.model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );
}

#[tokio::test]
async fn stream_error_event_is_a_stream_error_after_the_text_so_far() {
    let server = MockServer::start().await;
    server.push(Reply::Sse {
        body: fixture("anthropic/stream_error_overloaded.sse"),
        chunk: 5,
        delay: Duration::ZERO,
    });
    let events = collect(
        &client(&server, 1),
        &ModelRequest::new("m", vec![Message::user("hi")]),
    )
    .await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(matches!(&events[0], Ok(StreamEvent::TextDelta(t)) if t == "Hello"));
    match &events[1] {
        Err(error @ Error::Stream { message, code, .. }) => {
            assert_eq!(message, "Overloaded");
            assert_eq!(code.as_deref(), Some("overloaded_error"));
            assert!(error.is_retryable());
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
}

#[tokio::test]
async fn truncated_stream_is_a_decode_error() {
    let server = MockServer::start().await;
    let full = fixture("anthropic/stream_thinking_text_tool_use.sse");
    let cut = full
        .find("event: message_delta")
        .expect("fixture has message_delta");
    server.push(Reply::sse(&full[..cut]));
    let events = collect(
        &client(&server, 1),
        &ModelRequest::new("m", vec![Message::user("hi")]),
    )
    .await;
    match events.last() {
        Some(Err(Error::Decode { message, .. })) => {
            assert!(message.contains("stream ended before"), "{message}");
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::Finish(_))))
    );
}

#[tokio::test]
async fn malformed_json_is_a_decode_error() {
    let server = MockServer::start().await;
    server.push(Reply::Raw {
        status: 200,
        body: "{\"id\": \"msg_1\", \"content\": [".into(),
        content_type: "application/json",
    });
    server.push(Reply::sse(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":\n\n",
    ));
    let client = client(&server, 1);
    let request = ModelRequest::new("m", vec![Message::user("hi")]);
    let error = client.generate(&request).await.unwrap_err();
    assert!(
        matches!(&error, Error::Decode { provider: "anthropic", message, .. } if message.contains("malformed JSON")),
        "{error:?}"
    );
    let events = collect(&client, &request).await;
    assert!(
        matches!(events.as_slice(), [Err(Error::Decode { .. })]),
        "{events:?}"
    );
}

#[tokio::test]
async fn http_400_is_a_provider_error_without_retry() {
    let server = MockServer::start().await;
    server.push(
        Reply::error(
            400,
            fixture_json("anthropic/error_400_invalid_request.json"),
        )
        .with_header("request-id", "req_011CSHq7Ab3Cd5Ef7Gh9Ij1K"),
    );
    let error = client(&server, 1)
        .generate(&weather_request())
        .await
        .unwrap_err();
    match error {
        Error::Provider {
            provider,
            status,
            message,
            code,
            request_id,
            ..
        } => {
            assert_eq!(provider, "anthropic");
            assert_eq!(status, 400);
            assert!(
                message.starts_with("messages.2: `tool_use` ids"),
                "{message}"
            );
            assert_eq!(code.as_deref(), Some("invalid_request_error"));
            assert_eq!(request_id.as_deref(), Some("req_011CSHq7Ab3Cd5Ef7Gh9Ij1K"));
        }
        other => panic!("expected a provider error, got {other:?}"),
    }
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn http_429_and_529_are_provider_errors() {
    let server = MockServer::start().await;
    server.push(Reply::error(
        429,
        fixture_json("anthropic/error_429_rate_limit.json"),
    ));
    server.push(Reply::error(
        529,
        fixture_json("anthropic/error_529_overloaded.json"),
    ));
    let client = client(&server, 0);
    let request = ModelRequest::new("m", vec![Message::user("hi")]);
    for (status, code, text) in [
        (
            429,
            "rate_limit_error",
            "This request would exceed the rate limit",
        ),
        (529, "overloaded_error", "Overloaded"),
    ] {
        let error = client.generate(&request).await.unwrap_err();
        assert!(error.is_retryable());
        match error {
            Error::Provider {
                status: got,
                message,
                code: got_code,
                ..
            } => {
                assert_eq!(got, status);
                assert!(message.starts_with(text), "{message}");
                assert_eq!(got_code.as_deref(), Some(code));
            }
            other => panic!("expected a provider error, got {other:?}"),
        }
    }
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn http_429_with_retry_after_is_retried() {
    let server = MockServer::start().await;
    server.push(
        Reply::error(429, fixture_json("anthropic/error_429_rate_limit.json"))
            .with_header("retry-after", "0"),
    );
    server.push(Reply::json(fixture_json(
        "anthropic/response_tool_use.json",
    )));
    let response = client(&server, 1)
        .generate(&weather_request())
        .await
        .unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(server.request_count(), 2);
    assert_eq!(server.requests()[1].body, server.requests()[0].body);
}

/// The echo request the llama.cpp captures (`llamacpp/`) answered.
fn echo_request() -> ModelRequest {
    let echo = tool("echo")
        .description("Echoes back the input")
        .raw_schema(json!({"type": "object",
            "properties": {"message": {"type": "string", "description": "Message to echo"}},
            "required": ["message"]}))
        .execute_raw(|_| async { Ok(json!(null)) });
    ModelRequest::new(
        "smollm2",
        vec![Message::user("Call the echo tool with message hello.")],
    )
    .tools(vec![echo])
}

/// llama.cpp's Messages API as captured: message ids `chatcmpl-…`, tool_use ids without
/// `toolu_`, a streamed `content_block_start` for a tool_use without `input`, and
/// `input_tokens` without the cached tokens (`cache_read_input_tokens`).
#[tokio::test]
async fn llama_cpp_tool_use_decodes() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json(
        "llamacpp/anthropic_tool_use.json",
    )));
    server.push(Reply::sse(fixture(
        "llamacpp/anthropic_stream_tool_use.sse",
    )));
    let client = client(&server, 0);

    let response = client.generate(&echo_request()).await.unwrap();
    assert_eq!(
        response.message.content,
        [ContentPart::ToolCall(ToolCall {
            id: "wTzJYvNW9T5Mh78MGwEhKVW25d8g1btw".into(),
            name: "echo".into(),
            arguments: json!({"message": "Hello, World!"}),
        })]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 258);
    assert_eq!(response.usage.cached_input_tokens, 257);
    assert_eq!(response.usage.output_tokens, 31);

    let events = collect(&client, &echo_request()).await;
    assert!(
        matches!(&events[0], Ok(StreamEvent::ToolCallStart { id, name })
            if id == "wItl931NZ3cxUn4lttwn4GyuchqdKeWn" && name == "echo"),
        "{events:?}"
    );
    let Some(Ok(StreamEvent::Finish(response))) = events.last() else {
        panic!("no finish: {events:?}");
    };
    assert_eq!(
        response.message.content,
        [ContentPart::ToolCall(ToolCall {
            id: "wItl931NZ3cxUn4lttwn4GyuchqdKeWn".into(),
            name: "echo".into(),
            arguments: json!({"message": "Hello, World!"}),
        })]
    );
    assert_eq!(
        response.id.as_deref(),
        Some("chatcmpl-A4mo4wLfEwsYLBo8PdaGiuk6ew1zBnMU")
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 258);
    assert_eq!(response.usage.output_tokens, 31);
}

/// Context overflow from llama.cpp's Messages endpoint (captured) and Anthropic's own
/// documented "prompt is too long: N tokens > M maximum" is `ContextWindowExceeded` with the
/// numbers.
#[tokio::test]
async fn context_overflow_is_context_window_exceeded() {
    let anthropic = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "prompt is too long: 208950 tokens > 200000 maximum"},
        "request_id": "req_011CSHq7Ab3Cd5Ef7Gh9Ij1K"});
    let llama = fixture_json("llamacpp/error_400_exceed_context_size.json");
    let server = MockServer::start().await;
    let client = client(&server, 0);
    for (body, tokens, limit) in [(llama, 5010, 4096), (anthropic, 208_950, 200_000)] {
        server.push(Reply::error(400, body));
        let error = client.generate(&echo_request()).await.unwrap_err();
        let Error::ContextWindowExceeded {
            request_tokens,
            limit: max,
            provider,
            ..
        } = &error
        else {
            panic!("{error:?}");
        };
        assert_eq!(*request_tokens, Some(tokens));
        assert_eq!(*max, Some(limit));
        assert_eq!(*provider, Some("anthropic"));
    }
}
