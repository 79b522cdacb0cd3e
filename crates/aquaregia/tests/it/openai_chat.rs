//! Chat Completions against a mock server speaking the real wire format.

use crate::common;

use std::time::{Duration, Instant};

use aquaregia::{
    ContentBlock, ContentPart, Error, FinishReason, Message, ModelRequest, Role, StreamEvent,
    ToolCall, ToolChoice, ToolOutput, ToolResult, tool,
};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{chat_client, fixture, fixture_json};
use futures::StreamExt;
use serde_json::json;

fn weather_request() -> ModelRequest {
    let fixture = fixture_json("openai_chat/request_tools.json");
    let tools = fixture["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let f = &t["function"];
            tool(f["name"].as_str().unwrap())
                .description(f["description"].as_str().unwrap())
                .raw_schema(f["parameters"].clone())
                .execute_raw(|_| async { Ok(json!(null)) })
        })
        .collect::<Vec<_>>();
    ModelRequest::new(
        "gpt-4o",
        vec![Message::user(
            "What's the weather in Paris right now? Also chart the last three daily highs.",
        )],
    )
    .instructions("You are a concise weather assistant. Use the tools when they help.")
    .tools(tools)
}

async fn collect(stream: aquaregia::ModelStream) -> Vec<Result<StreamEvent, Error>> {
    stream.collect().await
}

#[tokio::test]
async fn parses_parallel_tool_calls_and_usage() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json(
        "openai_chat/response_parallel_tool_calls.json",
    )));
    let response = chat_client(&server)
        .generate(&weather_request())
        .await
        .unwrap();
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(
        calls[0].arguments,
        json!({"location": "Paris", "unit": "celsius"})
    );
    assert_eq!(calls[1].id, "call_Hc4dJ8uQe2nWz6RtY1oPx5vB");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 118);
    assert_eq!(response.usage.output_tokens, 52);
    assert_eq!(response.model.as_deref(), Some("gpt-4o-2024-08-06"));
}

#[tokio::test]
async fn request_matches_the_wire_format() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json("openai_chat/response_text.json")));
    let response = chat_client(&server)
        .generate(&weather_request())
        .await
        .unwrap();
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert!(!response.text().is_empty());

    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.headers["authorization"], "Bearer test-key");
    let expected = fixture_json("openai_chat/request_tools.json");
    assert_eq!(request.body["messages"], expected["messages"]);
    for (sent, want) in request.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .zip(expected["tools"].as_array().unwrap())
    {
        assert_eq!(sent["type"], "function");
        assert_eq!(sent["function"]["name"], want["function"]["name"]);
        // Schemas go out exactly as the tool holds them.
        assert_eq!(
            sent["function"]["parameters"],
            want["function"]["parameters"]
        );
    }
    assert_eq!(request.body["tool_choice"], "auto");
    assert!(request.body.get("stream").is_none());
}

#[tokio::test]
async fn image_tool_results_go_in_a_user_message() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json("openai_chat/response_text.json")));
    let fixture = fixture_json("openai_chat/request_tool_results_with_image.json");
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGMwTjsDAAI1AWaKkkQyAAAAAElFTkSuQmCC";
    let mut request = weather_request();
    request.messages.push(Message::new(
        Role::Assistant,
        vec![
            ContentPart::ToolCall(ToolCall {
                id: "call_9pXq2VwR1mZk4TfYb7LcN3sA".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "Paris", "unit": "celsius"}),
            }),
            ContentPart::ToolCall(ToolCall {
                id: "call_Hc4dJ8uQe2nWz6RtY1oPx5vB".into(),
                name: "render_chart".into(),
                arguments: json!({"title": "Paris daily highs", "values": [17, 19, 18]}),
            }),
        ],
    ));
    request.messages.push(Message::new(
        Role::Tool,
        vec![
            ContentPart::ToolResult(ToolResult {
                call_id: "call_9pXq2VwR1mZk4TfYb7LcN3sA".into(),
                name: "get_weather".into(),
                output: ToolOutput::text("{\"location\":\"Paris\",\"temperature\":18,\"unit\":\"celsius\",\"conditions\":\"partly cloudy\"}"),
                is_error: false,
            }),
            ContentPart::ToolResult(ToolResult {
                call_id: "call_Hc4dJ8uQe2nWz6RtY1oPx5vB".into(),
                name: "render_chart".into(),
                output: ToolOutput::Content(vec![
                    ContentBlock::text("Chart rendered. The PNG is attached in the next user message."),
                    ContentBlock::image("image/png", png),
                ]),
                is_error: false,
            }),
        ],
    ));
    chat_client(&server).generate(&request).await.unwrap();

    let mut expected = fixture["messages"].clone();
    // `detail` is optional; aquaregia leaves it to the provider's default.
    expected[5]["content"][1]["image_url"]
        .as_object_mut()
        .unwrap()
        .remove("detail");
    assert_eq!(server.requests()[0].body["messages"], expected);
}

#[tokio::test]
async fn streams_text_split_at_any_boundary() {
    for chunk in [1, 3, 64, usize::MAX] {
        let server = MockServer::start().await;
        server.push(Reply::Sse {
            body: fixture("openai_chat/stream_text.sse"),
            chunk,
            delay: Duration::ZERO,
        });
        let stream = chat_client(&server)
            .stream(&weather_request())
            .await
            .unwrap();
        let events = collect(stream).await;
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                Ok(StreamEvent::TextDelta(t)) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        let Some(Ok(StreamEvent::Finish(response))) = events.last() else {
            panic!("stream did not finish: {events:?}");
        };
        assert_eq!(response.text(), text, "chunk {chunk}");
        assert!(text.starts_with("It's 18"), "{text}");
        assert_eq!(response.finish_reason, FinishReason::Stop);
        assert!(response.usage.output_tokens > 0);
        let body = &server.requests()[0].body;
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
    }
}

#[tokio::test]
async fn streams_parallel_tool_calls() {
    let server = MockServer::start().await;
    server.push(Reply::Sse {
        body: fixture("openai_chat/stream_tool_calls.sse"),
        chunk: 5,
        delay: Duration::ZERO,
    });
    let events = collect(
        chat_client(&server)
            .stream(&weather_request())
            .await
            .unwrap(),
    )
    .await;
    let starts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCallStart { id, name }) => Some((id.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [
            ("call_9pXq2VwR1mZk4TfYb7LcN3sA", "get_weather"),
            ("call_Hc4dJ8uQe2nWz6RtY1oPx5vB", "render_chart")
        ]
    );
    let Some(Ok(StreamEvent::Finish(response))) = events.last() else {
        panic!("no finish: {events:?}");
    };
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(
        calls[0].arguments,
        json!({"location": "Paris", "unit": "celsius"})
    );
    assert_eq!(
        calls[1].arguments,
        json!({"title": "Paris daily highs", "values": [17, 19, 18]})
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn error_inside_the_stream_is_reported() {
    let server = MockServer::start().await;
    server.push(Reply::sse(fixture(
        "openai_chat/stream_error_midstream.sse",
    )));
    let events = collect(
        chat_client(&server)
            .stream(&weather_request())
            .await
            .unwrap(),
    )
    .await;
    assert!(matches!(events[0], Ok(StreamEvent::TextDelta(_))));
    match events.last() {
        Some(Err(Error::Stream { message, code, .. })) => {
            assert!(message.contains("The server had an error"));
            assert_eq!(code.as_deref(), Some("server_error"));
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
}

#[tokio::test]
async fn truncated_stream_is_a_decode_error() {
    let server = MockServer::start().await;
    let full = fixture("openai_chat/stream_tool_calls.sse");
    server.push(Reply::sse(&full[..full.len() / 2]));
    let events = collect(
        chat_client(&server)
            .stream(&weather_request())
            .await
            .unwrap(),
    )
    .await;
    assert!(
        matches!(events.last(), Some(Err(Error::Decode { .. }))),
        "{events:?}"
    );
}

#[tokio::test]
async fn http_errors_carry_status_message_and_body() {
    let server = MockServer::start().await;
    server.push(
        Reply::error(
            400,
            fixture_json("openai_chat/error_400_invalid_request.json"),
        )
        .with_header("x-request-id", "req_123"),
    );
    let error = chat_client(&server)
        .generate(&weather_request())
        .await
        .unwrap_err();
    match &error {
        Error::Provider {
            status,
            message,
            code,
            body,
            request_id,
            ..
        } => {
            assert_eq!(*status, 400);
            assert!(message.starts_with("Invalid parameter"));
            assert_eq!(code.as_deref(), Some("invalid_request_error"));
            assert!(body.contains("messages.[2].role"));
            assert_eq!(request_id.as_deref(), Some("req_123"));
        }
        other => panic!("unexpected {other:?}"),
    }
    // 400 is never retried.
    assert_eq!(server.request_count(), 1);
    assert!(!error.to_string().contains("test-key"));
}

#[tokio::test]
async fn rate_limit_honours_retry_after_then_succeeds() {
    let server = MockServer::start().await;
    server.push(
        Reply::error(429, fixture_json("openai_chat/error_429_rate_limit.json"))
            .with_header("retry-after", "1"),
    );
    server.push(Reply::json(fixture_json("openai_chat/response_text.json")));
    let started = Instant::now();
    let response = chat_client(&server)
        .generate(&weather_request())
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_up_to_the_limit() {
    let server = MockServer::start().await;
    for _ in 0..3 {
        server.push(
            Reply::error(
                503,
                json!({"error": {"message": "busy", "type": "server_error"}}),
            )
            .with_header("retry-after-ms", "10"),
        );
    }
    let error = chat_client(&server)
        .generate(&weather_request())
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::Provider { status: 503, .. }),
        "{error:?}"
    );
    assert_eq!(server.request_count(), 3, "one try plus max_retries(2)");
}

#[tokio::test]
async fn unauthorized_is_not_retried() {
    let server = MockServer::start().await;
    server.push(Reply::error(
        401,
        json!({"error": {"message": "Incorrect API key", "type": "invalid_request_error"}}),
    ));
    let error = chat_client(&server)
        .generate(&weather_request())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Provider { status: 401, .. }));
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn malformed_json_is_a_decode_error_with_the_body() {
    let server = MockServer::start().await;
    server.push(Reply::Raw {
        status: 200,
        body: "{\"id\": \"x\", \"choices\": [".into(),
        content_type: "application/json",
    });
    match chat_client(&server).generate(&weather_request()).await {
        Err(Error::Decode { body, .. }) => assert!(body.contains("\"choices\"")),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn request_timeout_is_reported() {
    let server = MockServer::start().await;
    server.push(Reply::Hang);
    let client = aquaregia::Client::openai_chat()
        .base_url(&server.url)
        .timeout(Duration::from_millis(300))
        .max_retries(0)
        .build()
        .unwrap();
    let error = client.generate(&weather_request()).await.unwrap_err();
    assert!(matches!(error, Error::Timeout { .. }), "{error:?}");
}

#[tokio::test]
async fn connection_refused_is_a_transport_error() {
    let closed = aquaregia_test_support::deps::ClosedPort::new();
    let port = closed.port();
    let client = aquaregia::Client::openai_chat()
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .max_retries(0)
        .build()
        .unwrap();
    let error = client.generate(&weather_request()).await.unwrap_err();
    assert!(matches!(error, Error::Transport { .. }), "{error:?}");
    // The HTTP client's error is kept as the source (its chain ends in the refused
    // connection), and it does not repeat the URL.
    let source = std::error::Error::source(&error).unwrap();
    assert!(!source.to_string().contains(&port.to_string()), "{source}");
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source);
    let mut refused = false;
    while let Some(error) = cause {
        refused |= error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
        cause = error.source();
    }
    assert!(refused, "{source:?}");

    // On a client of the caller's own (reqwest), the source is reqwest's error, without its URL.
    let client = aquaregia::Client::openai_chat()
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .http_client(reqwest::Client::new())
        .max_retries(0)
        .build()
        .unwrap();
    let error = client.generate(&weather_request()).await.unwrap_err();
    let source = std::error::Error::source(&error).unwrap();
    let reqwest = source.downcast_ref::<reqwest::Error>().unwrap();
    assert!(reqwest.is_connect(), "{reqwest:?}");
    assert!(reqwest.url().is_none());
}

#[tokio::test]
async fn tool_choice_and_options_are_sent() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json("openai_chat/response_text.json")));
    let request = weather_request()
        .tool_choice(ToolChoice::Tool("get_weather".into()))
        .temperature(0.2)
        .max_output_tokens(100)
        .extra_body(serde_json::from_value(json!({"seed": 7})).unwrap());
    chat_client(&server).generate(&request).await.unwrap();
    let body = &server.requests()[0].body;
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
    assert!((body["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    assert_eq!(body["max_completion_tokens"], 100);
    assert_eq!(body["seed"], 7);
}

#[tokio::test]
async fn reasoning_content_from_compatible_servers_is_kept() {
    let server = MockServer::start().await;
    let stream = [
        json!({"choices": [{"index": 0, "delta": {"reasoning_content": "Let me think."}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "42"}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]
    .iter()
    .map(|chunk| format!("data: {chunk}\n\n"))
    .collect::<String>()
        + "data: [DONE]\n\n";
    server.push(Reply::sse(stream));
    let events = collect(
        chat_client(&server)
            .stream(&weather_request())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        events[0].as_ref().unwrap(),
        &StreamEvent::ReasoningDelta("Let me think.".into())
    );
    let Some(Ok(StreamEvent::Finish(response))) = events.last() else {
        panic!("{events:?}")
    };
    assert!(
        matches!(&response.message.content[0], ContentPart::Reasoning(r) if r.text == "Let me think.")
    );
    assert_eq!(response.text(), "42");
}

/// A client on the caller's own `reqwest::Client` sends every request through it (plain-HTTP
/// base URLs included): whole answers, streams, and retried errors.
#[tokio::test]
async fn a_custom_http_client_carries_answers_streams_and_retries() {
    let server = MockServer::start().await;
    server.push(
        Reply::error(503, json!({"error": {"message": "busy"}})).with_header("retry-after-ms", "1"),
    );
    server.push(Reply::json(fixture_json("openai_chat/response_text.json")));
    server.push(Reply::Sse {
        body: fixture("openai_chat/stream_text.sse"),
        chunk: 7,
        delay: Duration::ZERO,
    });
    // A header only this client adds shows which client sent each request.
    let mut marker = reqwest::header::HeaderMap::new();
    marker.insert("x-custom-client", "yes".parse().unwrap());
    let custom = reqwest::Client::builder()
        .default_headers(marker)
        .build()
        .unwrap();
    let client = aquaregia::Client::openai_chat()
        .base_url(&server.url)
        .api_key("test-key")
        .http_client(custom)
        .build()
        .unwrap();
    let response = client.generate(&weather_request()).await.unwrap();
    assert!(response.text().starts_with("It's 18"));
    let events = collect(client.stream(&weather_request()).await.unwrap()).await;
    assert!(matches!(events.last(), Some(Ok(StreamEvent::Finish(_)))));
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "one retry, one answer, one stream");
    for request in &requests {
        assert_eq!(request.headers["x-custom-client"], "yes");
        assert_eq!(request.headers["authorization"], "Bearer test-key");
    }
    assert_eq!(requests[2].body["stream"], true);
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

/// llama.cpp's tool-call answers as captured: `content: ""` (whole) or `null` (streamed)
/// beside the calls, ids of 32 random characters without `call_`, cached tokens and an extra
/// `timings` object.
#[tokio::test]
async fn llama_cpp_tool_calls_decode() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json("llamacpp/chat_tool_call.json")));
    server.push(Reply::sse(fixture("llamacpp/chat_stream_tool_call.sse")));
    let client = chat_client(&server);

    let response = client.generate(&echo_request()).await.unwrap();
    assert_eq!(
        response.message.content,
        [ContentPart::ToolCall(ToolCall {
            id: "MYWZhDUfi7g1FuKPtWMbHYkzGS6dmqhb".into(),
            name: "echo".into(),
            arguments: json!({"message": "Hello, World!"}),
        })],
        "no empty text part"
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 258);
    assert_eq!(response.usage.cached_input_tokens, 257);
    assert_eq!(response.usage.output_tokens, 31);

    let events = collect(client.stream(&echo_request()).await.unwrap()).await;
    let Some(Ok(StreamEvent::Finish(response))) = events.last() else {
        panic!("no finish: {events:?}");
    };
    assert_eq!(
        response.message.content,
        [ContentPart::ToolCall(ToolCall {
            id: "I7XQrX0USKlgT3oRl4USKtmUvSM67A7y".into(),
            name: "echo".into(),
            arguments: json!({"message": "Hello, World!"}),
        })]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.output_tokens, 31);
}

/// Context overflow, from llama.cpp (captured: `exceed_context_size_error` with
/// `n_prompt_tokens` and `n_ctx`) and from OpenAI (its documented `context_length_exceeded`
/// message), whole and streamed, is `ContextWindowExceeded` with the numbers.
#[tokio::test]
async fn context_overflow_is_context_window_exceeded() {
    let openai = json!({"error": {
        "message": "This model's maximum context length is 128000 tokens. However, your \
                    messages resulted in 130532 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}});
    let llama = fixture_json("llamacpp/error_400_exceed_context_size.json");
    let server = MockServer::start().await;
    let client = chat_client(&server);
    for (body, tokens, limit) in [(llama, 5010, 4096), (openai, 130_532, 128_000)] {
        server.push(Reply::error(400, body.clone()));
        let error = client.generate(&echo_request()).await.unwrap_err();
        assert_overflow(&error, tokens, limit);
        server.push(Reply::error(400, body));
        let Err(error) = client.stream(&echo_request()).await else {
            panic!("the stream started");
        };
        assert_overflow(&error, tokens, limit);
    }
    // Any other 400 stays a provider error.
    server.push(Reply::error(
        400,
        fixture_json("openai_chat/error_400_invalid_request.json"),
    ));
    let error = client.generate(&echo_request()).await.unwrap_err();
    assert!(
        matches!(error, Error::Provider { status: 400, .. }),
        "{error:?}"
    );
}

fn assert_overflow(error: &Error, tokens: u64, limit: u64) {
    let text = error.to_string();
    assert!(
        matches!(error, Error::ContextWindowExceeded { .. }),
        "{error:?}"
    );
    assert!(
        text.contains(&tokens.to_string()) && text.contains(&limit.to_string()),
        "{text}"
    );
    let Error::ContextWindowExceeded {
        request_tokens,
        limit: max,
        provider,
        ..
    } = error
    else {
        unreachable!()
    };
    assert_eq!(*request_tokens, Some(tokens));
    assert_eq!(*max, Some(limit));
    assert_eq!(*provider, Some("openai-chat"));
}

/// Everything logged at INFO and above while `f` runs on this thread.
async fn logs_of<F: std::future::Future>(f: F) -> (F::Output, String) {
    #[derive(Clone, Default)]
    struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Logs {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let logs = Logs::default();
    let writer = logs.clone();
    let output = {
        let _logging = tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_writer(move || writer.clone())
                .with_max_level(tracing::Level::INFO)
                .with_ansi(false)
                .finish(),
        );
        f.await
    };
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    (output, text)
}

/// llama.cpp treats a named `tool_choice` as `auto` and answers in text (captured): the
/// answer is kept, and a warning names the tool that was asked for. An answer that calls it
/// says nothing.
#[tokio::test]
async fn an_ignored_named_tool_choice_is_reported() {
    let server = MockServer::start().await;
    server.push(Reply::json(fixture_json(
        "llamacpp/chat_named_tool_choice_ignored.json",
    )));
    server.push(Reply::json(fixture_json("llamacpp/chat_tool_call.json")));
    let client = chat_client(&server);
    let request = echo_request().tool_choice(ToolChoice::Tool("echo".into()));
    let (response, logs) = logs_of(client.generate(&request)).await;
    assert_eq!(response.unwrap().text(), "The capital of France is Paris.");
    assert_eq!(
        server.requests()[0].body["tool_choice"]["function"]["name"],
        "echo"
    );
    assert!(logs.contains("WARN"), "{logs}");
    assert!(logs.contains("tool_choice named `echo`"), "{logs}");

    let (response, logs) = logs_of(client.generate(&request)).await;
    assert_eq!(response.unwrap().message.tool_calls().count(), 1);
    assert!(!logs.contains("tool_choice"), "{logs}");
}

/// Configuration errors are typed, so callers can branch on them, and never show a
/// credential: not a header's value, not the user info or query of a base URL.
#[test]
fn configuration_errors_are_typed_and_show_no_credentials() {
    use aquaregia::{Client, ConfigError, Error};

    let error = Client::openai_chat()
        .api_key("test-key")
        .header("x-gateway-key", "secret-value\n")
        .build()
        .unwrap_err();
    assert!(
        matches!(&error, Error::Config(ConfigError::InvalidHeaderValue { name }) if name == "x-gateway-key"),
        "{error:?}"
    );
    assert!(!error.to_string().contains("secret-value"), "{error}");

    let error = Client::openai_chat()
        .api_key("test-key")
        .base_url("http://user:hunter2@[::1/v1?key=abc")
        .build()
        .unwrap_err();
    assert!(
        matches!(&error, Error::Config(ConfigError::InvalidUrl { .. })),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        !text.contains("hunter2") && !text.contains("key=abc"),
        "{text}"
    );
    // A password with an unencoded `/`.
    let error = Client::openai_chat()
        .api_key("test-key")
        .base_url("http://user:hun/ter2@[::1/v1")
        .build()
        .unwrap_err();
    let text = error.to_string();
    assert!(!text.contains("hun") && !text.contains("ter2"), "{text}");

    let error = Client::from_model_spec("openai-chat:").unwrap_err();
    assert!(
        matches!(&error, Error::Config(ConfigError::NoModel { spec }) if spec == "openai-chat:"),
        "{error:?}"
    );
}
