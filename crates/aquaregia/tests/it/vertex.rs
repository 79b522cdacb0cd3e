//! Google Vertex AI (Gemini and Anthropic's Claude) against a mock model replaying the
//! documented wire shapes, with access tokens minted from credentials files at a mock Google
//! token endpoint that checks each service-account JWT's RS256 signature with the public half
//! of a test-only key: the project and location in the URL, the bearer token on every request,
//! one token exchange for many calls (and one under concurrency), renewal before expiry, and
//! clear errors for bad key files, a missing project and a refusing token endpoint.

use std::path::PathBuf;
use std::time::Duration;

use aquaregia::{
    AgentEvent, Client, ClientBuilder, ConfigError, ContentBlock, Error, FinishReason, Message,
    ModelRequest, StopReason, tool,
};
use aquaregia_test_support::google_token_server::{
    CLIENT_EMAIL, GoogleTokenServer, KEY_ID, SCOPE, TEST_ONLY_OTHER_PRIVATE_KEY,
    TEST_ONLY_PRIVATE_KEY,
};
use aquaregia_test_support::mock_model::{MockServer, Recorded, Reply};
use futures::StreamExt;
use serde_json::{Value, json};

const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGMwTjsDAAI1AWaKkkQyAAAAAElFTkSuQmCC";
const GEMINI: &str = "gemini-2.5-flash";
const CLAUDE: &str = "claude-sonnet-4-5@20250929";

/// A credentials file in a scratch directory (kept alive by the returned guard).
fn credentials_file(content: &Value) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("credentials.json");
    std::fs::write(&path, serde_json::to_vec_pretty(content).unwrap()).unwrap();
    (dir, path)
}

fn builder(spec: &str, server: &MockServer) -> ClientBuilder {
    Client::builder_from_model_spec(spec)
        .unwrap()
        .0
        .base_url(server.root())
        .max_retries(0)
        .timeout(Duration::from_secs(20))
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

/// Gemini's stream as Vertex AI sends it (`alt=sse`, events `\r\n\r\n`-separated).
fn gemini_sse(chunks: &[Value]) -> Reply {
    let body: String = chunks
        .iter()
        .map(|chunk| format!("data: {chunk}\r\n\r\n"))
        .collect();
    Reply::Sse {
        body,
        chunk: 37,
        delay: Duration::ZERO,
    }
}

/// Anthropic's Messages stream (what `streamRawPredict` answers).
fn anthropic_sse(events: &[Value]) -> Reply {
    let body: String = events
        .iter()
        .map(|event| {
            format!(
                "event: {}\ndata: {event}\n\n",
                event["type"].as_str().unwrap()
            )
        })
        .collect();
    Reply::Sse {
        body,
        chunk: 41,
        delay: Duration::ZERO,
    }
}

fn gemini_usage(prompt: u64, candidates: u64) -> Value {
    json!({"promptTokenCount": prompt, "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates, "trafficType": "ON_DEMAND",
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
        "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": candidates}]})
}

fn gemini_text_answer(text: &str) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": "STOP", "avgLogprobs": -0.12}],
        "usageMetadata": gemini_usage(9, 3),
        "modelVersion": GEMINI, "createTime": "2026-01-05T10:00:00.123456Z",
        "responseId": "vrtx-text"})
}

fn claude_text_answer(text: &str) -> Value {
    json!({"id": "msg_vrtx_01Text", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 9, "output_tokens": 3}})
}

/// Runs `agent` streamed: the text, the tools started, the output.
async fn run_streamed(agent: &aquaregia::Agent) -> (String, Vec<String>, aquaregia::AgentOutput) {
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
    (text, started, output.unwrap())
}

fn bearer(request: &Recorded) -> &str {
    request.headers["authorization"].to_str().unwrap()
}

#[tokio::test]
async fn a_gemini_agent_loop_with_a_service_account_key() {
    let tokens = GoogleTokenServer::start().await;
    let (_dir, key_file) = credentials_file(&tokens.service_account_key("key-project"));
    let server = MockServer::start().await;
    server.push(gemini_sse(&[
        json!({"candidates": [{"content": {"role": "model",
                "parts": [{"text": "Let me chart that."}]}}],
            "usageMetadata": gemini_usage(31, 4), "modelVersion": GEMINI,
            "createTime": "2026-01-05T10:00:00.123456Z", "responseId": "vrtx-1"}),
        json!({"candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "render_chart", "args": {"values": [17, 19]}}}]},
                "finishReason": "STOP"}],
            "usageMetadata": gemini_usage(31, 12), "modelVersion": GEMINI,
            "createTime": "2026-01-05T10:00:00.123456Z", "responseId": "vrtx-1"}),
    ]));
    server.push(gemini_sse(&[
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Char"}]}}],
            "usageMetadata": gemini_usage(290, 1), "modelVersion": GEMINI,
            "responseId": "vrtx-2"}),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "ted."}]},
                "finishReason": "STOP"}],
            "usageMetadata": gemini_usage(290, 3), "modelVersion": GEMINI,
            "responseId": "vrtx-2"}),
    ]));
    let client = builder(&format!("vertex:{GEMINI}"), &server)
        .google_credentials_file(&key_file)
        .google_cloud_location("us-central1")
        .build()
        .unwrap();
    let agent = client
        .agent(GEMINI)
        .instructions("You chart numbers.")
        .tool(chart_tool())
        .build()
        .unwrap();
    let (text, started, output) = run_streamed(&agent).await;
    assert_eq!(text, "Let me chart that.Charted.");
    assert_eq!(started, ["render_chart"]);
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(
        output.steps[0].tool_calls[0].call.arguments,
        json!({"values": [17, 19]})
    );
    assert_eq!(
        (output.usage.input_tokens, output.usage.output_tokens),
        (31 + 290, 12 + 3)
    );

    // One token for the whole run, minted from a JWT the endpoint verified.
    assert_eq!(tokens.exchanges(), 1, "{:?}", tokens.rejections());
    let assertion = &tokens.assertions()[0];
    assert_eq!(assertion.iss, CLIENT_EMAIL);
    assert_eq!(assertion.aud, tokens.token_uri());
    assert_eq!(assertion.scope, SCOPE);
    assert_eq!(assertion.kid.as_deref(), Some(KEY_ID));

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(
            request.path,
            "/v1/projects/key-project/locations/us-central1/publishers/google/models/\
             gemini-2.5-flash:streamGenerateContent"
        );
        assert_eq!(request.query, "alt=sse");
        assert_eq!(bearer(request), "Bearer ya29.test-access-token-1");
        assert!(request.headers.get("x-goog-api-key").is_none());
        let body = &request.body;
        assert!(body.get("model").is_none());
        assert_eq!(
            body["systemInstruction"],
            json!({"parts": [{"text": "You chart numbers."}]})
        );
        assert_eq!(
            body["tools"][0]["functionDeclarations"][0]["name"],
            "render_chart"
        );
        assert_eq!(
            body["toolConfig"],
            json!({"functionCallingConfig": {"mode": "AUTO"}})
        );
    }
    let contents = requests[1].body["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3);
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(
        contents[1]["parts"][1]["functionCall"],
        json!({"name": "render_chart", "args": {"values": [17, 19]}})
    );
    // Vertex AI's v1 API has no call ids: the one made for the call is not sent.
    let response = &contents[2]["parts"][0]["functionResponse"];
    assert!(response.get("id").is_none(), "{response}");
    assert_eq!(response["name"], "render_chart");
    assert_eq!(
        response["response"],
        json!({"output": "Rendered (PNG attached)."})
    );
    assert_eq!(
        response["parts"],
        json!([{"inlineData": {"mimeType": "image/png", "data": PNG}}])
    );
}

#[tokio::test]
async fn a_claude_agent_loop_with_gcloud_user_credentials() {
    let tokens = GoogleTokenServer::start().await;
    let (_dir, adc_file) = credentials_file(&tokens.authorized_user("quota-project"));
    let server = MockServer::start().await;
    let message_start = |id: &str, input: u64| {
        json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0, "output_tokens": 1}}})
    };
    server.push(anthropic_sse(&[
        message_start("msg_vrtx_01A", 40),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Let me chart that."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use",
            "id": "toolu_vrtx_01Chart", "name": "render_chart", "input": {}}}),
        json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": "{\"values\": [17,"}}),
        json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": " 19]}"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use",
            "stop_sequence": null}, "usage": {"output_tokens": 30}}),
        json!({"type": "message_stop"}),
    ]));
    server.push(anthropic_sse(&[
        message_start("msg_vrtx_01B", 120),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Charted."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
            "stop_sequence": null}, "usage": {"output_tokens": 4}}),
        json!({"type": "message_stop"}),
    ]));
    let client = builder(&format!("vertex-anthropic:{CLAUDE}"), &server)
        .google_credentials_file(&adc_file)
        .google_cloud_location("global")
        .build()
        .unwrap();
    let agent = client
        .agent(CLAUDE)
        .instructions("You chart numbers.")
        .tool(chart_tool())
        .max_output_tokens(1024)
        .build()
        .unwrap();
    let (text, started, output) = run_streamed(&agent).await;
    assert_eq!(text, "Let me chart that.Charted.");
    assert_eq!(started, ["render_chart"]);
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(
        (output.usage.input_tokens, output.usage.output_tokens),
        (40 + 120, 30 + 4)
    );
    // The refresh-token grant, once.
    assert_eq!(tokens.exchanges(), 1, "{:?}", tokens.rejections());
    assert!(tokens.assertions().is_empty());

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(
            request.path,
            "/v1/projects/quota-project/locations/global/publishers/anthropic/models/\
             claude-sonnet-4-5@20250929:streamRawPredict"
        );
        assert_eq!(bearer(request), "Bearer ya29.test-access-token-1");
        // The quota project of user credentials is billed.
        assert_eq!(request.headers["x-goog-user-project"], "quota-project");
        assert!(request.headers.get("x-api-key").is_none());
        assert!(request.headers.get("anthropic-version").is_none());
        let body = &request.body;
        assert_eq!(body["anthropic_version"], "vertex-2023-10-16");
        assert!(body.get("model").is_none());
        assert_eq!(body["stream"], true);
        assert_eq!(body["max_tokens"], 1024);
        assert_eq!(body["system"], "You chart numbers.");
        assert_eq!(body["tools"][0]["name"], "render_chart");
        assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    }
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_vrtx_01Chart", "name": "render_chart",
            "input": {"values": [17, 19]}})
    );
    assert_eq!(
        messages[2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_vrtx_01Chart", "content": [
            {"type": "text", "text": "Rendered (PNG attached)."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                "data": PNG}}]})
    );
}

#[tokio::test]
async fn whole_answers_with_a_given_access_token() {
    let server = MockServer::start().await;
    server.push(Reply::json(json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "render_chart", "args": {"values": [1, 2]}}}]},
            "finishReason": "STOP"}],
        "usageMetadata": gemini_usage(20, 6), "modelVersion": GEMINI,
        "createTime": "2026-01-05T10:00:00.123456Z", "responseId": "vrtx-whole"
    })));
    server.push(Reply::json(json!({
        "id": "msg_vrtx_01Whole", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "tool_use", "id": "toolu_vrtx_02", "name": "render_chart",
            "input": {"values": [1, 2]}}],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 25, "output_tokens": 7}
    })));
    let request = |model: &str| {
        ModelRequest::new(model, vec![Message::user("Chart 1 and 2.")]).tools(vec![chart_tool()])
    };
    // No credentials file anywhere is read: the token is given.
    let gemini = builder(&format!("vertex:{GEMINI}"), &server)
        .bearer_token("ya29.given-gemini-token")
        .google_cloud_project("given-project")
        .google_cloud_location("europe-west4")
        .build()
        .unwrap();
    let response = gemini.generate(&request(GEMINI)).await.unwrap();
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls[0].arguments, json!({"values": [1, 2]}));
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (20, 6)
    );

    let claude = builder(&format!("vertex-anthropic:{CLAUDE}"), &server)
        .bearer_token("ya29.given-claude-token")
        .google_cloud_project("given-project")
        .google_cloud_location("us-east5")
        .build()
        .unwrap();
    let response = claude.generate(&request(CLAUDE)).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage.input_tokens, 25);

    let requests = server.requests();
    assert_eq!(
        requests[0].path,
        "/v1/projects/given-project/locations/europe-west4/publishers/google/models/\
         gemini-2.5-flash:generateContent"
    );
    assert_eq!(requests[0].query, "");
    assert_eq!(bearer(&requests[0]), "Bearer ya29.given-gemini-token");
    assert_eq!(
        requests[1].path,
        "/v1/projects/given-project/locations/us-east5/publishers/anthropic/models/\
         claude-sonnet-4-5@20250929:rawPredict"
    );
    assert_eq!(bearer(&requests[1]), "Bearer ya29.given-claude-token");
    assert_eq!(requests[1].body["anthropic_version"], "vertex-2023-10-16");
    assert!(requests[1].body.get("stream").is_none());
    assert!(requests[1].body.get("model").is_none());
}

#[tokio::test]
async fn the_default_endpoints_are_regional_or_global() {
    let (_dir, key) = credentials_file(&json!({
        "type": "service_account", "project_id": "p-1", "private_key": TEST_ONLY_PRIVATE_KEY,
        "client_email": CLIENT_EMAIL, "token_uri": "https://oauth2.googleapis.com/token"
    }));
    let base = |spec: &str, location: &str| {
        Client::builder_from_model_spec(spec)
            .unwrap()
            .0
            .google_credentials_file(&key)
            .google_cloud_location(location)
            .build()
            .unwrap()
            .base_url()
            .to_owned()
    };
    assert_eq!(
        base("vertex:gemini-2.5-flash", "us-central1"),
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p-1/locations/us-central1"
    );
    assert_eq!(
        base("vertex-anthropic:claude-sonnet-4-5", "global"),
        "https://aiplatform.googleapis.com/v1/projects/p-1/locations/global"
    );
    // No location set anywhere: `global`, as Google's Gen AI SDK picks.
    if std::env::var_os("GOOGLE_CLOUD_LOCATION").is_none() {
        let client = Client::builder_from_model_spec("vertex:gemini-2.5-flash")
            .unwrap()
            .0
            .google_credentials_file(&key)
            .build()
            .unwrap();
        assert_eq!(
            client.base_url(),
            "https://aiplatform.googleapis.com/v1/projects/p-1/locations/global"
        );
    }
}

#[tokio::test]
async fn one_token_exchange_for_concurrent_and_later_calls() {
    let tokens = GoogleTokenServer::start().await;
    let (_dir, key_file) = credentials_file(&tokens.service_account_key("key-project"));
    let server = MockServer::start().await;
    server.set_fallback(Reply::json(gemini_text_answer("Hi.")));
    let client = builder(&format!("vertex:{GEMINI}"), &server)
        .google_credentials_file(&key_file)
        .build()
        .unwrap();
    let request = ModelRequest::new(GEMINI, vec![Message::user("Hi")]);
    // The exchange is held until every call waits for a token.
    let gate = tokens.hold();
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let (client, request) = (client.clone(), request.clone());
            tokio::spawn(async move { client.generate(&request).await })
        })
        .collect();
    tokens.wait_exchanges(1).await;
    gate.notify_waiters();
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap().text(), "Hi.");
    }
    for _ in 0..3 {
        client.generate(&request).await.unwrap();
    }
    assert_eq!(tokens.exchanges(), 1, "{:?}", tokens.rejections());
    let requests = server.requests();
    assert_eq!(requests.len(), 11);
    assert!(
        requests
            .iter()
            .all(|r| bearer(r) == "Bearer ya29.test-access-token-1")
    );
}

#[tokio::test]
async fn a_token_is_renewed_before_it_expires() {
    let tokens = GoogleTokenServer::start().await;
    // Tokens that live less than the renewal margin (3 min 45 s) are due at once.
    tokens.set_expires_in(200);
    let (_dir, key_file) = credentials_file(&tokens.service_account_key("key-project"));
    let server = MockServer::start().await;
    server.set_fallback(Reply::json(claude_text_answer("Hi.")));
    let client = builder(&format!("vertex-anthropic:{CLAUDE}"), &server)
        .google_credentials_file(&key_file)
        .build()
        .unwrap();
    let request = ModelRequest::new(CLAUDE, vec![Message::user("Hi")]);
    client.generate(&request).await.unwrap();
    client.generate(&request).await.unwrap();
    assert_eq!(tokens.exchanges(), 2);
    // A token that lives long is kept from then on.
    tokens.set_expires_in(3599);
    client.generate(&request).await.unwrap();
    client.generate(&request).await.unwrap();
    client.generate(&request).await.unwrap();
    assert_eq!(tokens.exchanges(), 3, "{:?}", tokens.rejections());
    let sent: Vec<_> = server
        .requests()
        .iter()
        .map(|r| bearer(r).to_owned())
        .collect();
    assert_eq!(
        sent,
        [
            "Bearer ya29.test-access-token-1",
            "Bearer ya29.test-access-token-2",
            "Bearer ya29.test-access-token-3",
            "Bearer ya29.test-access-token-3",
            "Bearer ya29.test-access-token-3",
        ]
    );
}

/// The credentials error of building a `vertex:` client from this file's content.
fn credentials_error(content: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key.json");
    std::fs::write(&path, content).unwrap();
    let result = Client::builder_from_model_spec("vertex:gemini-2.5-flash")
        .unwrap()
        .0
        .google_credentials_file(&path)
        .google_cloud_project("p")
        .build();
    match result {
        Err(Error::Config(ConfigError::Credentials(message))) => {
            assert!(message.contains(&path.display().to_string()), "{message}");
            message
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_key_files_are_clear_errors() {
    let message = credentials_error("{not json");
    assert!(
        message.contains("is not a Google credentials file"),
        "{message}"
    );

    let key = |private_key: &str| {
        json!({"type": "service_account", "private_key": private_key,
            "client_email": CLIENT_EMAIL, "project_id": "p"})
        .to_string()
    };
    let message = credentials_error(&key(
        "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n",
    ));
    assert!(message.contains("is not an RSA private key"), "{message}");
    assert!(!message.contains("bm90IGEga2V5"), "{message}");

    let message = credentials_error(
        &json!({"type": "service_account", "private_key": TEST_ONLY_PRIVATE_KEY}).to_string(),
    );
    assert!(message.contains("has no `client_email`"), "{message}");

    let message = credentials_error(
        &json!({"type": "external_account", "audience": "//iam.googleapis.com/x"}).to_string(),
    );
    assert!(
        message.contains("credentials of type `external_account`"),
        "{message}"
    );
    assert!(
        message.contains("GOOGLE_APPLICATION_CREDENTIALS"),
        "{message}"
    );

    let message = credentials_error(
        &json!({"type": "authorized_user", "client_id": "id", "client_secret": "s"}).to_string(),
    );
    assert!(message.contains("has no `refresh_token`"), "{message}");

    // A file that is not there.
    let result = Client::builder_from_model_spec("vertex:gemini-2.5-flash")
        .unwrap()
        .0
        .google_credentials_file("/nonexistent/aquaregia/key.json")
        .build();
    match result {
        Err(Error::Config(ConfigError::Credentials(message))) => {
            assert!(message.contains("cannot read /nonexistent/aquaregia/key.json"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_missing_project_or_location_is_a_clear_error() {
    let (_dir, key) = credentials_file(&json!({
        "type": "service_account", "private_key": TEST_ONLY_PRIVATE_KEY,
        "client_email": CLIENT_EMAIL
    }));
    if std::env::var_os("GOOGLE_CLOUD_PROJECT").is_none() {
        let error = Client::builder_from_model_spec("vertex:gemini-2.5-flash")
            .unwrap()
            .0
            .google_credentials_file(&key)
            .build()
            .unwrap_err();
        match &error {
            Error::Config(ConfigError::MissingProject { provider, env_var }) => {
                assert_eq!((*provider, *env_var), ("vertex", "GOOGLE_CLOUD_PROJECT"));
            }
            other => panic!("{other:?}"),
        }
        assert!(error.to_string().contains("set GOOGLE_CLOUD_PROJECT"));
    }
    let error = Client::builder_from_model_spec("vertex-anthropic:claude-sonnet-4-5")
        .unwrap()
        .0
        .google_credentials_file(&key)
        .google_cloud_project("p")
        .google_cloud_location("evil.example/x")
        .build()
        .unwrap_err();
    assert!(
        matches!(
            &error,
            Error::Config(ConfigError::InvalidSetting {
                setting: "location",
                ..
            })
        ),
        "{error:?}"
    );
}

#[test]
fn missing_credentials_say_what_to_set() {
    let home_adc = std::env::var_os("HOME").map(|home| {
        PathBuf::from(home).join(".config/gcloud/application_default_credentials.json")
    });
    let clean = [
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_CLOUD_ACCESS_TOKEN",
        "CLOUDSDK_CONFIG",
    ]
    .iter()
    .all(|var| std::env::var_os(var).is_none())
        && home_adc.is_some_and(|path| !path.exists());
    if !clean {
        return; // This machine has Google credentials: nothing is missing.
    }
    let error = Client::builder_from_model_spec("vertex-anthropic:claude-sonnet-4-5")
        .unwrap()
        .0
        .google_cloud_project("p")
        .build()
        .unwrap_err();
    match &error {
        Error::Config(ConfigError::Credentials(message)) => {
            assert!(
                message.starts_with("no Google Cloud credentials"),
                "{message}"
            );
            for what in [
                "GOOGLE_APPLICATION_CREDENTIALS",
                "gcloud auth application-default login",
                "GOOGLE_CLOUD_ACCESS_TOKEN",
            ] {
                assert!(message.contains(what), "{message}");
            }
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn token_endpoint_refusals_are_clear_errors() {
    let tokens = GoogleTokenServer::start().await;
    let server = MockServer::start().await;
    server.set_fallback(Reply::json(gemini_text_answer("never")));
    let request = ModelRequest::new(GEMINI, vec![Message::user("Hi")]);

    // A JWT signed with another key: the endpoint's signature check refuses it.
    let mut key = tokens.service_account_key("key-project");
    key["private_key"] = json!(TEST_ONLY_OTHER_PRIVATE_KEY);
    let (_dir, key_file) = credentials_file(&key);
    let client = builder(&format!("vertex:{GEMINI}"), &server)
        .google_credentials_file(&key_file)
        .build()
        .unwrap();
    match client.generate(&request).await.unwrap_err() {
        Error::Provider {
            provider,
            status,
            code,
            message,
            ..
        } => {
            assert_eq!((provider, status), ("google-oauth", 400));
            assert_eq!(code.as_deref(), Some("invalid_grant"));
            assert!(
                message.contains(tokens.token_uri())
                    && message.contains("refused the service account's signed JWT")
                    && message.contains("InvalidSignature"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(tokens.rejections().len(), 1);

    // Google's own answer to a disabled account, for the right key.
    tokens.refuse(
        400,
        json!({"error": "invalid_grant", "error_description": "Invalid grant: account not found"}),
    );
    let (_dir, key_file) = credentials_file(&tokens.service_account_key("key-project"));
    let client = builder(&format!("vertex:{GEMINI}"), &server)
        .google_credentials_file(&key_file)
        .max_retries(2)
        .build()
        .unwrap();
    let error = client.generate(&request).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("invalid_grant: Invalid grant: account not found"),
        "{error}"
    );
    // A 400 is not retried, and no model request was sent.
    assert_eq!(tokens.exchanges(), 2);
    assert!(server.requests().is_empty());
    // Nothing secret in the client's Debug.
    let debug = format!("{client:?}");
    assert!(!debug.contains("PRIVATE KEY"), "{debug}");
}

#[tokio::test]
async fn tokens_and_secrets_stay_out_of_debug_and_errors() {
    let tokens = GoogleTokenServer::start().await;
    let (_dir, adc_file) = credentials_file(&tokens.authorized_user("quota-project"));
    let server = MockServer::start().await;
    // The model server echoes the token it was sent in its error.
    server.push(Reply::error(
        403,
        json!({"error": {"code": 403, "status": "PERMISSION_DENIED",
            "message": "Permission denied for token ya29.test-access-token-1"}}),
    ));
    let client = builder(&format!("vertex:{GEMINI}"), &server)
        .google_credentials_file(&adc_file)
        .build()
        .unwrap();
    let error = client
        .generate(&ModelRequest::new(GEMINI, vec![Message::user("Hi")]))
        .await
        .unwrap_err();
    let text = format!("{error} {error:?} {client:?}");
    assert!(
        matches!(error, Error::Provider { status: 403, .. }),
        "{error:?}"
    );
    assert!(!text.contains("ya29.test-access-token-1"), "{text}");
    assert!(!text.contains(aquaregia_test_support::google_token_server::USER_REFRESH_TOKEN));
    assert!(!text.contains(aquaregia_test_support::google_token_server::USER_CLIENT_SECRET));
}
