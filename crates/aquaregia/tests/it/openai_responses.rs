//! OpenAI Responses against a mock server speaking the real wire format.

use crate::common;

use std::time::Duration;

use aquaregia::{
    ContentBlock, ContentPart, Error, FinishReason, Message, ModelRequest, Reasoning, Role,
    StreamEvent, ToolCall, ToolOutput, ToolResult, tool,
};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{fixture, fixture_json};
use futures::StreamExt;
use serde_json::{Map, Value, json};

const DIR: &str = "openai_responses";
const REASONING_ID: &str = "rs_68a1f0c3e5a7c9e1f3a5c7e9a1c3e5a7c9e1f3a5c7e9a1c3";
const ENCRYPTED: &str = "gAAAAABoofDD-fixture-opaque-encrypted-reasoning-blob-not-real==";
const SUMMARY: &str = "**Planning tool use**\n\nI need current Paris weather and a chart of three daily highs, so I'll call both tools.";
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGMwTjsDAAI1AWaKkkQyAAAAAElFTkSuQmCC";

fn client(server: &MockServer) -> aquaregia::Client {
    aquaregia::Client::openai()
        .base_url(&server.url)
        .api_key("test-key")
        .build()
        .expect("client builds")
}

fn wire(name: &str) -> Value {
    fixture_json(&format!("{DIR}/{name}"))
}

fn sse(name: &str) -> String {
    fixture(&format!("{DIR}/{name}"))
}

/// The request of `request_tools.json`, built through the public API.
fn weather_request() -> ModelRequest {
    let fixture = wire("request_tools.json");
    let tools = fixture["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            tool(t["name"].as_str().unwrap())
                .description(t["description"].as_str().unwrap())
                .raw_schema(t["parameters"].clone())
                .execute_raw(|_| async { Ok(json!(null)) })
        })
        .collect::<Vec<_>>();
    let mut extra = Map::new();
    extra.insert("reasoning".into(), fixture["reasoning"].clone());
    ModelRequest::new(
        "o4-mini",
        vec![Message::user(
            fixture["input"][0]["content"][0]["text"].as_str().unwrap(),
        )],
    )
    .instructions(fixture["instructions"].as_str().unwrap())
    .tools(tools)
    .max_output_tokens(2048)
    .extra_body(extra)
}

/// The conversation of `request_function_call_output.json`: the first answer echoed back and
/// both tool results, the chart one with an image.
fn follow_up_request() -> ModelRequest {
    let fixture = wire("request_function_call_output.json");
    let input = &fixture["input"];
    let mut request = weather_request();
    request.messages.push(Message::new(
        Role::Assistant,
        vec![
            ContentPart::Reasoning(Reasoning {
                text: SUMMARY.into(),
                id: Some(REASONING_ID.into()),
                encrypted_content: Some(ENCRYPTED.into()),
                ..Reasoning::default()
            }),
            ContentPart::text(input[2]["content"][0]["text"].as_str().unwrap()),
            ContentPart::ToolCall(ToolCall {
                id: "call_Wm3Qz8Lr5Tn1Yb7Kx2Vd9Hs4".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "Paris", "unit": "celsius"}),
            }),
            ContentPart::ToolCall(ToolCall {
                id: "call_Pf6Jc2Ng8Ra4Ue1Io9Bt3Xq7".into(),
                name: "render_chart".into(),
                arguments: json!({"title": "Paris daily highs", "values": [17, 19, 18]}),
            }),
        ],
    ));
    request.messages.push(Message::new(
        Role::Tool,
        vec![
            ContentPart::ToolResult(ToolResult {
                call_id: "call_Wm3Qz8Lr5Tn1Yb7Kx2Vd9Hs4".into(),
                name: "get_weather".into(),
                output: ToolOutput::text(input[5]["output"].as_str().unwrap()),
                is_error: false,
            }),
            ContentPart::ToolResult(ToolResult {
                call_id: "call_Pf6Jc2Ng8Ra4Ue1Io9Bt3Xq7".into(),
                name: "render_chart".into(),
                output: ToolOutput::Content(vec![
                    ContentBlock::text("Rendered chart 'Paris daily highs' (PNG)."),
                    ContentBlock::image("image/png", PNG),
                ]),
                is_error: false,
            }),
        ],
    ));
    request
}

async fn collect(stream: aquaregia::ModelStream) -> Vec<Result<StreamEvent, Error>> {
    stream.collect().await
}

fn chunked(body: String) -> Reply {
    Reply::Sse {
        body,
        chunk: 7,
        delay: Duration::ZERO,
    }
}

/// Checks the answer of the fixture scenario: reasoning, text, then the tool calls.
fn assert_weather_answer(message: &Message, calls: usize) {
    assert_eq!(message.role, Role::Assistant);
    match &message.content[0] {
        ContentPart::Reasoning(reasoning) => {
            assert_eq!(reasoning.id.as_deref(), Some(REASONING_ID));
            assert_eq!(reasoning.text, SUMMARY);
            assert_eq!(reasoning.encrypted_content.as_deref(), Some(ENCRYPTED));
            assert_eq!(reasoning.signature, None);
        }
        other => panic!("expected reasoning first, got {other:?}"),
    }
    assert_eq!(
        message.content[1],
        ContentPart::text("Let me fetch the current weather and draw the chart.")
    );
    let tool_calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(tool_calls.len(), calls);
    assert_eq!(tool_calls[0].id, "call_Wm3Qz8Lr5Tn1Yb7Kx2Vd9Hs4");
    assert_eq!(tool_calls[0].name, "get_weather");
    assert_eq!(
        tool_calls[0].arguments,
        json!({"location": "Paris", "unit": "celsius"})
    );
    assert_eq!(message.content.len(), 2 + calls);
}

#[tokio::test]
async fn parses_reasoning_text_function_calls_and_usage() {
    let server = MockServer::start().await;
    server.push(Reply::json(wire(
        "response_message_and_function_calls.json",
    )));
    let response = client(&server).generate(&weather_request()).await.unwrap();

    assert_weather_answer(&response.message, 2);
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls[1].id, "call_Pf6Jc2Ng8Ra4Ue1Io9Bt3Xq7");
    assert_eq!(calls[1].name, "render_chart");
    assert_eq!(
        calls[1].arguments,
        json!({"title": "Paris daily highs", "values": [17, 19, 18]})
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 142);
    assert_eq!(response.usage.output_tokens, 214);
    assert_eq!(response.usage.cached_input_tokens, 0);
    assert_eq!(response.usage.reasoning_tokens, 128);
    assert_eq!(
        response.id.as_deref(),
        Some("resp_68a1f0c2d4e6f8a0b2c4d6e8f0a2b4c6d8e0f2a4b6c8d0e2")
    );
    assert_eq!(response.model.as_deref(), Some("o4-mini-2025-04-16"));

    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/responses");
    assert_eq!(request.headers["authorization"], "Bearer test-key");
}

#[tokio::test]
async fn request_with_tools_matches_the_wire_format() {
    let server = MockServer::start().await;
    server.push(Reply::json(wire(
        "response_message_and_function_calls.json",
    )));
    client(&server).generate(&weather_request()).await.unwrap();

    let body = &server.requests()[0].body;
    let expected = wire("request_tools.json");
    for key in [
        "model",
        "instructions",
        "input",
        "tool_choice",
        "reasoning",
        "include",
        "store",
        "max_output_tokens",
    ] {
        assert_eq!(body[key], expected[key], "{key}");
    }
    let tools = body["tools"].as_array().unwrap();
    let expected_tools = expected["tools"].as_array().unwrap();
    assert_eq!(tools.len(), expected_tools.len());
    for (tool, expected) in tools.iter().zip(expected_tools) {
        for key in ["type", "name", "description", "parameters"] {
            assert_eq!(tool[key], expected[key], "tool {key}");
        }
        // Caller schemas are not guaranteed to satisfy strict mode.
        assert_eq!(tool["strict"], false);
    }
    assert!(body.get("stream").is_none());
    assert!(body.get("messages").is_none());
}

#[tokio::test]
async fn request_sends_function_call_outputs_with_an_image() {
    let server = MockServer::start().await;
    server.push(Reply::json(wire(
        "response_message_and_function_calls.json",
    )));
    client(&server)
        .generate(&follow_up_request())
        .await
        .unwrap();

    let body = &server.requests()[0].body;
    let input = body["input"].as_array().unwrap();
    let expected = wire("request_function_call_output.json");
    let expected = expected["input"].as_array().unwrap();
    let types = |items: &[Value]| -> Vec<String> {
        items
            .iter()
            .map(|i| i["type"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(types(input), types(expected));
    assert_eq!(input[0], expected[0]);
    // The reasoning item goes back whole so the model keeps its chain of thought.
    assert_eq!(input[1], expected[1]);
    assert_eq!(input[2]["role"], "assistant");
    assert_eq!(input[2]["content"][0]["type"], "output_text");
    assert_eq!(
        input[2]["content"][0]["text"],
        expected[2]["content"][0]["text"]
    );
    for i in 3..=4 {
        for key in ["call_id", "name", "arguments"] {
            assert_eq!(input[i][key], expected[i][key], "item {i} {key}");
        }
        assert!(input[i]["arguments"].is_string());
    }
    assert_eq!(input[5], expected[5]);
    assert!(input[5]["output"].is_string());

    let output = input[6]["output"].as_array().unwrap();
    let expected_output = expected[6]["output"].as_array().unwrap();
    assert_eq!(input[6]["call_id"], expected[6]["call_id"]);
    assert_eq!(output.len(), 2);
    assert_eq!(output[0], expected_output[0]);
    assert_eq!(output[1]["type"], "input_image");
    assert_eq!(output[1]["image_url"], expected_output[1]["image_url"]);
    assert_eq!(
        output[1]["image_url"],
        format!("data:image/png;base64,{PNG}")
    );
    // The image never travels as base64 inside text.
    let text = body.to_string();
    assert_eq!(text.matches(PNG).count(), 1);
}

#[tokio::test]
async fn unstored_reasoning_is_sent_back_only_with_encrypted_content() {
    let server = MockServer::start().await;
    server.push(Reply::json(wire(
        "response_message_and_function_calls.json",
    )));
    server.push(Reply::json(wire(
        "response_message_and_function_calls.json",
    )));
    let client = client(&server);
    let mut assistant = Message::new(
        Role::Assistant,
        vec![
            ContentPart::Reasoning(Reasoning {
                text: "hidden".into(),
                id: Some(REASONING_ID.into()),
                ..Reasoning::default()
            }),
            // Other providers' thinking (here Anthropic's redacted thinking) has no id.
            ContentPart::Reasoning(Reasoning {
                encrypted_content: Some("anthropic-redacted".into()),
                ..Reasoning::default()
            }),
            ContentPart::text("Hi."),
        ],
    );
    let request = ModelRequest::new(
        "gpt-4.1",
        vec![Message::user("hi"), assistant.clone(), Message::user("bye")],
    );
    client.generate(&request).await.unwrap();
    let body = &server.requests()[0].body;
    let types: Vec<_> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["message", "message", "message"]);
    assert_eq!(body["store"], false);
    // Non-reasoning models reject the `include`.
    assert!(body.get("include").is_none());

    // Stored items can be referenced by id.
    assistant.content.pop();
    let mut extra = Map::new();
    extra.insert("store".into(), json!(true));
    let request = ModelRequest::new("o3", vec![Message::user("hi"), assistant]).extra_body(extra);
    client.generate(&request).await.unwrap();
    let body = &server.requests()[1].body;
    assert_eq!(
        body["input"][1],
        json!({"type": "reasoning", "id": REASONING_ID, "summary": [{"type": "summary_text", "text": "hidden"}]})
    );
    assert_eq!(body["input"].as_array().unwrap().len(), 2);
    assert_eq!(body["store"], true);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
}

#[tokio::test]
async fn streams_reasoning_text_and_a_tool_call() {
    let server = MockServer::start().await;
    server.push(chunked(sse("stream_reasoning_text_function_call.sse")));
    let stream = client(&server).stream(&weather_request()).await.unwrap();
    let events: Vec<StreamEvent> = collect(stream)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();

    assert_eq!(server.requests()[0].body["stream"], true);
    let reasoning: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ReasoningDelta(d) => Some(d.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, SUMMARY);
    let text: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(d) => Some(d.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        text,
        [
            "Let me fetch",
            " the current weather",
            " and draw the chart."
        ]
    );
    let call_id = "call_Wm3Qz8Lr5Tn1Yb7Kx2Vd9Hs4";
    assert!(events.contains(&StreamEvent::ToolCallStart {
        id: call_id.into(),
        name: "get_weather".into(),
    }));
    let arguments: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallDelta { id, arguments } if id == call_id => {
                Some(arguments.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(arguments, r#"{"location":"Paris","unit":"celsius"}"#);

    let Some(StreamEvent::Finish(response)) = events.last() else {
        panic!("no finish: {events:?}");
    };
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Finish(_)))
            .count(),
        1
    );
    assert_weather_answer(&response.message, 1);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 142);
    assert_eq!(response.usage.output_tokens, 171);
    assert_eq!(response.usage.reasoning_tokens, 128);
    assert_eq!(response.model.as_deref(), Some("o4-mini-2025-04-16"));
}

/// A completed event without `output`, then a stray `[DONE]`: the answer comes from the
/// streamed items.
#[tokio::test]
async fn stream_falls_back_to_streamed_items_and_tolerates_done() {
    let body = sse("stream_reasoning_text_function_call.sse");
    let (head, completed) = body.rsplit_once("event: response.completed\n").unwrap();
    let data: Value =
        serde_json::from_str(completed.trim().strip_prefix("data: ").unwrap()).unwrap();
    let mut data = data;
    data["response"]["output"] = json!([]);
    let body = format!("{head}event: response.completed\ndata: {data}\n\ndata: [DONE]\n\n");

    let server = MockServer::start().await;
    server.push(chunked(body.clone()));
    let stream = client(&server).stream(&weather_request()).await.unwrap();
    let events = collect(stream).await;
    let Some(Ok(StreamEvent::Finish(response))) = events.last() else {
        panic!("no finish: {events:?}");
    };
    assert_weather_answer(&response.message, 1);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.output_tokens, 171);

    // Without `output_item.done` events the answer is assembled from the deltas.
    let body: String = body
        .split_inclusive("\n\n")
        .filter(|event| !event.starts_with("event: response.output_item.done"))
        .collect();
    server.push(chunked(body));
    let stream = client(&server).stream(&weather_request()).await.unwrap();
    let events = collect(stream).await;
    let Some(Ok(StreamEvent::Finish(response))) = events.last() else {
        panic!("no finish: {events:?}");
    };
    let message = &response.message;
    assert!(matches!(
        &message.content[0],
        ContentPart::Reasoning(r) if r.text == SUMMARY && r.id.as_deref() == Some(REASONING_ID)
    ));
    assert_eq!(
        message.text(),
        "Let me fetch the current weather and draw the chart."
    );
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_Wm3Qz8Lr5Tn1Yb7Kx2Vd9Hs4");
    assert_eq!(
        calls[0].arguments,
        json!({"location": "Paris", "unit": "celsius"})
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn stream_errors_become_stream_errors() {
    let cases = [
        (
            "stream_error_documented.sse",
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
        ),
        (
            "stream_error_observed_nested.sse",
            "Too Many Requests",
            "too_many_requests",
        ),
        (
            "stream_failed.sse",
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
        ),
    ];
    for (file, expected_message, expected_code) in cases {
        let server = MockServer::start().await;
        server.push(chunked(sse(file)));
        let stream = client(&server).stream(&weather_request()).await.unwrap();
        let events = collect(stream).await;
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Ok(StreamEvent::Finish(_)))),
            "{file}"
        );
        match events.last() {
            Some(Err(Error::Stream {
                provider,
                message,
                code,
            })) => {
                assert_eq!(*provider, "openai", "{file}");
                assert_eq!(message, expected_message, "{file}");
                assert_eq!(code.as_deref(), Some(expected_code), "{file}");
            }
            other => panic!("{file}: expected a stream error, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn http_400_is_a_provider_error() {
    let server = MockServer::start().await;
    server.push(Reply::error(400, wire("error_400_invalid_request.json")));
    let error = client(&server)
        .generate(&weather_request())
        .await
        .unwrap_err();
    match error {
        Error::Provider {
            provider,
            status: 400,
            message,
            code,
            body,
            ..
        } => {
            assert_eq!(provider, "openai");
            assert_eq!(
                message,
                "No tool output found for function call call_Pf6Jc2Ng8Ra4Ue1Io9Bt3Xq7."
            );
            assert_eq!(code.as_deref(), Some("invalid_request_error"));
            assert!(body.contains("\"param\":\"input\""), "{body}");
        }
        other => panic!("expected a provider error, got {other:?}"),
    }
    assert_eq!(server.request_count(), 1, "a 400 is not retried");
}

#[tokio::test]
async fn truncated_stream_is_a_decode_error() {
    let body = sse("stream_reasoning_text_function_call.sse");
    let boundary = body.find("event: response.output_text.delta").unwrap();
    // Cut between two events, then in the middle of one.
    for (cut, between_events) in [(boundary, true), (boundary + 60, false)] {
        let server = MockServer::start().await;
        server.push(chunked(body[..cut].to_owned()));
        let stream = client(&server).stream(&weather_request()).await.unwrap();
        let events = collect(stream).await;
        assert!(matches!(
            events.first(),
            Some(Ok(StreamEvent::ReasoningDelta(_)))
        ));
        match events.last() {
            Some(Err(Error::Decode { message, .. })) => {
                if between_events {
                    assert!(message.contains("ended before"), "{message}");
                }
            }
            other => panic!("expected a decode error, got {other:?}"),
        }
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Ok(StreamEvent::Finish(_))))
        );
    }
}

#[tokio::test]
async fn malformed_json_body_is_a_decode_error() {
    let server = MockServer::start().await;
    server.push(Reply::Raw {
        status: 200,
        body: r#"{"id":"resp_1","output":[{"type":"message""#.into(),
        content_type: "application/json",
    });
    let error = client(&server)
        .generate(&weather_request())
        .await
        .unwrap_err();
    match error {
        Error::Decode { provider, body, .. } => {
            assert_eq!(provider, "openai");
            assert!(body.contains("resp_1"), "{body}");
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[tokio::test]
async fn failed_and_incomplete_responses() {
    let server = MockServer::start().await;
    server.push(Reply::json(json!({
        "id": "resp_1", "status": "failed", "output": [],
        "error": {"code": "server_error", "message": "boom"},
    })));
    server.push(Reply::json(json!({
        "id": "resp_2", "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Partial"}]}],
        "usage": {"input_tokens": 3, "output_tokens": 16},
    })));
    server.push(Reply::json(json!({
        "id": "resp_3", "status": "completed",
        "output": [{"type": "message", "role": "assistant",
                    "content": [{"type": "refusal", "refusal": "I can't help with that."}]}],
    })));
    let client = client(&server);
    let request = ModelRequest::new("gpt-4.1", vec![Message::user("hi")]);

    match client.generate(&request).await.unwrap_err() {
        Error::Stream { message, code, .. } => {
            assert_eq!(message, "boom");
            assert_eq!(code.as_deref(), Some("server_error"));
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
    let response = client.generate(&request).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::Length);
    assert_eq!(response.text(), "Partial");
    assert_eq!(response.usage.output_tokens, 16);
    let response = client.generate(&request).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::ContentFilter);
    assert_eq!(response.text(), "I can't help with that.");
}

#[tokio::test]
async fn stream_ending_incomplete_finishes_with_length() {
    let events = [
        json!({"type": "response.in_progress", "sequence_number": 0,
               "response": {"id": "resp_9", "model": "gpt-4.1", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1",
               "output_index": 0, "content_index": 0, "delta": "Partial"}),
        json!({"type": "response.incomplete", "sequence_number": 2,
               "response": {"status": "incomplete", "output": [],
                            "incomplete_details": {"reason": "max_output_tokens"},
                            "usage": {"input_tokens": 5, "output_tokens": 16}}}),
    ];
    let body: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    let server = MockServer::start().await;
    server.push(chunked(body));
    let request = ModelRequest::new("gpt-4.1", vec![Message::user("hi")]);
    let stream = client(&server).stream(&request).await.unwrap();
    let events = collect(stream).await;
    let Some(Ok(StreamEvent::Finish(response))) = events.last() else {
        panic!("no finish: {events:?}");
    };
    assert_eq!(response.finish_reason, FinishReason::Length);
    assert_eq!(response.text(), "Partial");
    assert_eq!(response.id.as_deref(), Some("resp_9"));
    assert_eq!(response.model.as_deref(), Some("gpt-4.1"));
    assert_eq!(response.usage.output_tokens, 16);
}

/// A request like the ones the llama.cpp captures answered.
fn echo_request(max_output_tokens: Option<u32>) -> ModelRequest {
    let echo = tool("echo")
        .description("Echoes back the input")
        .raw_schema(json!({"type": "object",
            "properties": {"message": {"type": "string", "description": "Message to echo"}},
            "required": ["message"]}))
        .execute_raw(|_| async { Ok(json!(null)) });
    let mut request = ModelRequest::new(
        "smollm2",
        vec![Message::user("Call the echo tool with message hello.")],
    )
    .tools(vec![echo]);
    request.max_output_tokens = max_output_tokens;
    request
}

/// llama.cpp's Responses stream, as captured from its server (`llamacpp/`): no
/// `sequence_number` or `output_index` on any event; deltas name their item by `item_id`,
/// items carry ids without the `call_` prefix on the item (`fc_…`).
#[tokio::test]
async fn llama_cpp_stream_without_output_index_decodes() {
    let body = fixture("llamacpp/responses_stream_function_call.sse");
    let server = MockServer::start().await;
    server.push(chunked(body.clone()));
    let stream = client(&server).stream(&echo_request(None)).await.unwrap();
    let events = collect(stream).await;
    let call_id = "call_TteNKQTA0l16oUSXagEFTnQelpymmLnF";
    let Some(Ok(StreamEvent::Finish(response))) = events.last() else {
        panic!("no finish: {events:?}");
    };
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, call_id);
    assert_eq!(calls[0].name, "echo");
    assert_eq!(calls[0].arguments, json!({"message": "Hello, World!"}));
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 258);
    assert_eq!(response.usage.output_tokens, 31);
    // The streamed argument pieces are attributed to the call by its item id.
    let streamed: String = events
        .iter()
        .filter_map(|event| match event {
            Ok(StreamEvent::ToolCallDelta { id, arguments }) if id == call_id => {
                Some(arguments.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(streamed, r#"{"message": "Hello, World!"}"#);

    // Without the final `output`, the answer is assembled from the items, found by id.
    let (head, completed) = body.rsplit_once("event: response.completed\n").unwrap();
    let mut data: Value =
        serde_json::from_str(completed.trim().strip_prefix("data: ").unwrap()).unwrap();
    data["response"]["output"] = json!([]);
    let without_items: String = head
        .split_inclusive("\n\n")
        .filter(|event| !event.starts_with("event: response.output_item.done"))
        .collect();
    server.push(chunked(format!(
        "{without_items}event: response.completed\ndata: {data}\n\n"
    )));
    let stream = client(&server).stream(&echo_request(None)).await.unwrap();
    let Some(Ok(StreamEvent::Finish(response))) = collect(stream).await.pop() else {
        panic!("no finish");
    };
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, call_id);
    assert_eq!(calls[0].arguments, json!({"message": "Hello, World!"}));
}

/// llama.cpp cuts a Responses reply at `max_output_tokens` yet says `status: "completed"`
/// with `incomplete_details: null` (captured, streamed and not): the usage shows the limit
/// was used up, so the reply finishes with `Length`.
#[tokio::test]
async fn llama_cpp_reply_cut_by_max_output_tokens_finishes_with_length() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json(
        "llamacpp/responses_cut_by_max_output_tokens.json",
    )));
    server.push(chunked(fixture(
        "llamacpp/responses_stream_cut_by_max_output_tokens.sse",
    )));
    let request = ModelRequest::new(
        "smollm2",
        vec![Message::user("Write a long story about a cat.")],
    )
    .max_output_tokens(8);
    let client = client(&server);
    let response = client.generate(&request).await.unwrap();
    assert_eq!(response.text(), "Once upon a time, in a land");
    assert_eq!(response.usage.output_tokens, 8);
    assert_eq!(response.finish_reason, FinishReason::Length);

    let events = collect(client.stream(&request).await.unwrap()).await;
    let text: String = events
        .iter()
        .filter_map(|event| match event {
            Ok(StreamEvent::TextDelta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Once upon a time, in a land");
    let Some(Ok(StreamEvent::Finish(response))) = events.last() else {
        panic!("no finish: {events:?}");
    };
    assert_eq!(response.text(), "Once upon a time, in a land");
    assert_eq!(response.finish_reason, FinishReason::Length);

    // A reply that stops below the limit still finishes normally.
    server.push(Reply::json(fixture_json(
        "llamacpp/responses_cut_by_max_output_tokens.json",
    )));
    let response = client
        .generate(&request.clone().max_output_tokens(9))
        .await
        .unwrap();
    assert_eq!(response.finish_reason, FinishReason::Stop);
}

/// Context overflow from llama.cpp's Responses endpoint (captured) has numbers; OpenAI's own
/// (`context_length_exceeded`, documented) has none: both are `ContextWindowExceeded`.
#[tokio::test]
async fn context_overflow_is_context_window_exceeded() {
    let openai = json!({"error": {
        "message": "Your input exceeds the context window of this model. Please adjust your \
                    input and try again.",
        "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}});
    let llama = fixture_json("llamacpp/error_400_exceed_context_size.json");
    let server = MockServer::start().await;
    let client = client(&server);
    for (body, tokens, limit) in [(llama, Some(5010), Some(4096)), (openai, None, None)] {
        server.push(Reply::error(400, body));
        let error = client.generate(&echo_request(None)).await.unwrap_err();
        let Error::ContextWindowExceeded {
            request_tokens,
            limit: max,
            provider,
            ..
        } = &error
        else {
            panic!("{error:?}");
        };
        assert_eq!(*request_tokens, tokens);
        assert_eq!(*max, limit);
        assert_eq!(*provider, Some("openai"));
        assert!(error.to_string().contains("too long"), "{error}");
    }
}
