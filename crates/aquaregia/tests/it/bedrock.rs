//! Amazon Bedrock (Converse, ConverseStream) against a mock: an agent loop over a replayed
//! event stream built from the documented event shapes (tool use, an image in the tool
//! result, usage with cache reads, cache points), SigV4 signatures checked on the mock's side,
//! a whole answer, and an exception in the stream.

use std::time::{Duration, SystemTime};

use aquaregia::{
    AgentEvent, Client, ContentBlock, Error, Message, ModelRequest, PromptCaching, StopReason, tool,
};
use aquaregia_test_support::mock_model::{MockServer, Recorded, Reply};
use aws_smithy_types::event_stream::{Header, HeaderValue, Message as Frame};
use futures::StreamExt;
use serde_json::{Value, json};

const MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGMwTjsDAAI1AWaKkkQyAAAAAElFTkSuQmCC";
const ACCESS_KEY: &str = "AKIDBEDROCKTEST";
const SECRET: &str = "bedrock/test/secret/key/value";
const TOKEN: &str = "session-token-for-the-test";
const REGION: &str = "us-west-2";

fn header(name: &'static str, value: &str) -> Header {
    Header::new(name, HeaderValue::String(value.to_owned().into()))
}

/// One event-stream message as Bedrock frames it: `:event-type`, `:content-type`,
/// `:message-type` headers and the JSON payload (with its `p` padding field).
fn event(kind: &str, mut payload: Value) -> Vec<u8> {
    payload["p"] = json!("abcdefghijklmnopqrstuvwxyzABCDEF");
    let frame = Frame::new(payload.to_string().into_bytes())
        .add_header(header(":event-type", kind))
        .add_header(header(":content-type", "application/json"))
        .add_header(header(":message-type", "event"));
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&frame, &mut out).unwrap();
    out
}

fn exception(kind: &str, message: &str) -> Vec<u8> {
    let frame = Frame::new(json!({"message": message}).to_string().into_bytes())
        .add_header(header(":exception-type", kind))
        .add_header(header(":content-type", "application/json"))
        .add_header(header(":message-type", "exception"));
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&frame, &mut out).unwrap();
    out
}

fn stream_reply(events: &[Vec<u8>]) -> Reply {
    Reply::Bytes {
        status: 200,
        body: events.concat(),
        content_type: "application/vnd.amazon.eventstream",
        // Frames split across reads.
        chunk: 7,
    }
}

fn client(server: &MockServer) -> Client {
    Client::builder_from_model_spec(&format!("bedrock:{MODEL}"))
        .unwrap()
        .0
        .base_url(server.root())
        .aws_credentials(ACCESS_KEY, SECRET, Some(TOKEN.to_owned()), REGION)
        .max_retries(0)
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

fn chart_tool() -> aquaregia::Tool {
    tool("render_chart")
        .description("Renders a chart of values as a PNG")
        .raw_schema(json!({"type": "object",
            "properties": {"values": {"type": "array", "items": {"type": "number"}}},
            "required": ["values"]}))
        .execute_raw(|_| async {
            Ok(vec![
                ContentBlock::text("Rendered (PNG attached)."),
                ContentBlock::image("image/png", PNG),
            ])
        })
}

/// Recomputes the request's SigV4 signature with the test's credentials at the time its
/// `x-amz-date` says, over the path, host, content type and body the mock received.
fn assert_signed(server: &MockServer, request: &Recorded) {
    let headers = &request.headers;
    let text = |name: &str| headers[name].to_str().unwrap().to_owned();
    let date = text("x-amz-date");
    // `20260102T081234Z`
    let number = |range: std::ops::Range<usize>| date[range].parse::<u8>().unwrap();
    let year = date[0..4].parse::<i32>().unwrap();
    let month = time::Month::try_from(number(4..6)).unwrap();
    let time = time::Date::from_calendar_date(year, month, number(6..8))
        .unwrap()
        .with_hms(number(9..11), number(11..13), number(13..15))
        .unwrap()
        .assume_utc();
    let time = SystemTime::UNIX_EPOCH + Duration::from_secs(time.unix_timestamp() as u64);
    let identity = aws_credential_types::Credentials::new(
        ACCESS_KEY,
        SECRET,
        Some(TOKEN.to_owned()),
        None,
        "test",
    )
    .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(REGION)
        .name("bedrock")
        .time(time)
        .settings(aws_sigv4::http_request::SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let url = format!("{}{}", server.root(), request.path);
    let content_type = text("content-type");
    let signable = aws_sigv4::http_request::SignableRequest::new(
        "POST",
        &url,
        [("content-type", content_type.as_str())].into_iter(),
        aws_sigv4::http_request::SignableBody::Bytes(&request.raw_body),
    )
    .unwrap();
    let (instructions, _) = aws_sigv4::http_request::sign(signable, &params)
        .unwrap()
        .into_parts();
    let expected = instructions
        .headers()
        .find(|(name, _)| *name == "authorization")
        .map(|(_, value)| value.to_owned())
        .unwrap();
    let sent = text("authorization");
    assert_eq!(sent, expected);
    assert!(
        sent.starts_with(&format!(
            "AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{}/{REGION}/bedrock/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature=",
            &date[..8]
        )),
        "{sent}"
    );
    assert_eq!(text("x-amz-security-token"), TOKEN);
    assert!(!sent.contains(SECRET));
}

#[tokio::test]
async fn an_agent_loop_over_converse_stream() {
    let server = MockServer::start().await;
    server.push(stream_reply(&[
        event("messageStart", json!({"role": "assistant"})),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "Let me chart that."}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 0})),
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": 1, "start": {"toolUse": {
                "toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": "render_chart"}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"values\":"}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": " [17, 19]}"}}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 1})),
        event("messageStop", json!({"stopReason": "tool_use"})),
        event(
            "metadata",
            json!({"usage": {"inputTokens": 20, "outputTokens": 30, "totalTokens": 1580,
                "cacheReadInputTokens": 0, "cacheWriteInputTokens": 1530},
                "metrics": {"latencyMs": 812}}),
        ),
    ]));
    server.push(stream_reply(&[
        event("messageStart", json!({"role": "assistant"})),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "Charted"}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "."}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 0})),
        event("messageStop", json!({"stopReason": "end_turn"})),
        event(
            "metadata",
            json!({"usage": {"inputTokens": 60, "outputTokens": 4, "totalTokens": 1594,
                "cacheReadInputTokens": 1530, "cacheWriteInputTokens": 0},
                "metrics": {"latencyMs": 301}}),
        ),
    ]));
    let agent = client(&server)
        .agent(MODEL)
        .instructions("You chart numbers.")
        .tool(chart_tool())
        .max_output_tokens(1024)
        .prompt_caching(PromptCaching::breakpoints())
        .build()
        .unwrap();
    let mut events = agent.stream("Chart 17 and 19.");
    let mut text = String::new();
    let mut started = Vec::new();
    let mut output = None;
    while let Some(event) = events.next().await {
        match event.unwrap() {
            AgentEvent::TextDelta(delta) => text.push_str(&delta),
            AgentEvent::ToolCallStart { name, .. } => started.push(name),
            AgentEvent::Finish(out) => output = Some(out),
            _ => {}
        }
    }
    let output = output.unwrap();
    assert_eq!(text, "Let me chart that.Charted.");
    assert_eq!(started, ["render_chart"]);
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(
        output.steps[0].tool_calls[0].call.arguments,
        json!({"values": [17, 19]})
    );
    // Inputs count the cached tokens, read and written.
    assert_eq!(
        (
            output.usage.input_tokens,
            output.usage.output_tokens,
            output.usage.cached_input_tokens,
            output.usage.cache_write_tokens
        ),
        (20 + 1530 + 60 + 1530, 34, 1530, 1530)
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(
            request.path,
            "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
        );
        assert_signed(&server, request);
        let body = &request.body;
        assert!(body.get("model").is_none());
        assert_eq!(body["inferenceConfig"], json!({"maxTokens": 1024}));
        assert_eq!(
            body["system"],
            json!([{"text": "You chart numbers."}, {"cachePoint": {"type": "default"}}])
        );
        let tools = body["toolConfig"]["tools"].as_array().unwrap();
        assert_eq!(tools[0]["toolSpec"]["name"], "render_chart");
        assert_eq!(
            tools[0]["toolSpec"]["inputSchema"]["json"]["required"],
            json!(["values"])
        );
        assert_eq!(tools[1], json!({"cachePoint": {"type": "default"}}));
        assert!(body["toolConfig"].get("toolChoice").is_none());
    }
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": [
            {"text": "Let me chart that."},
            {"toolUse": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": "render_chart",
                "input": {"values": [17, 19]}}}]})
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"toolResult": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "content": [
                {"text": "Rendered (PNG attached)."},
                {"image": {"format": "png", "source": {"bytes": PNG}}}]}},
            {"cachePoint": {"type": "default"}}]})
    );
}

#[tokio::test]
async fn a_whole_converse_answer() {
    let server = MockServer::start().await;
    server.push(Reply::json(json!({
        "output": {"message": {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "Chart it.", "signature": "sig=="}}},
            {"toolUse": {"toolUseId": "tooluse_1", "name": "render_chart",
                "input": {"values": [1, 2]}}}]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 12, "outputTokens": 8, "totalTokens": 20},
        "metrics": {"latencyMs": 400}
    })));
    let response = client(&server)
        .generate(
            &ModelRequest::new(MODEL, vec![Message::user("Chart 1 and 2.")])
                .tools(vec![chart_tool()])
                .tool_choice(aquaregia::ToolChoice::Required),
        )
        .await
        .unwrap();
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].arguments, json!({"values": [1, 2]}));
    assert_eq!(response.finish_reason, aquaregia::FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 12);
    assert!(matches!(
        &response.message.content[0],
        aquaregia::ContentPart::Reasoning(r) if r.signature.as_deref() == Some("sig==")
    ));
    let request = &server.requests()[0];
    assert_eq!(
        request.path,
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    );
    assert_eq!(request.body["toolConfig"]["toolChoice"], json!({"any": {}}));
    assert_signed(&server, request);
}

#[tokio::test]
async fn an_exception_in_the_stream_is_an_error() {
    let server = MockServer::start().await;
    server.push(stream_reply(&[
        event("messageStart", json!({"role": "assistant"})),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "Hel"}}),
        ),
        exception("throttlingException", "Too many tokens, please wait."),
    ]));
    let stream = client(&server)
        .stream(&ModelRequest::new(MODEL, vec![Message::user("Hi")]))
        .await
        .unwrap();
    let events: Vec<_> = stream.collect().await;
    match events.last() {
        Some(Err(Error::Stream { message, code, .. })) => {
            assert_eq!(message, "Too many tokens, please wait.");
            assert_eq!(code.as_deref(), Some("throttlingException"));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_bedrock_api_key_is_a_bearer_token() {
    let server = MockServer::start().await;
    server.push(Reply::json(json!({
        "output": {"message": {"role": "assistant", "content": [{"text": "Hi."}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}
    })));
    let client = Client::builder_from_model_spec(&format!("bedrock:{MODEL}"))
        .unwrap()
        .0
        .base_url(server.root())
        .api_key("bedrock-api-key")
        .build()
        .unwrap();
    let response = client
        .generate(&ModelRequest::new(MODEL, vec![Message::user("Hi")]))
        .await
        .unwrap();
    assert_eq!(response.text(), "Hi.");
    let request = &server.requests()[0];
    assert_eq!(request.headers["authorization"], "Bearer bedrock-api-key");
    assert!(request.headers.get("x-amz-date").is_none());
}
