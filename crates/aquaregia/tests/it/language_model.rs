//! The model seam: agents on models written outside the crate, `ScriptedModel`, `ClientModel`
//! and the `Fallback` middleware (against real HTTP failures of a mock provider).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    AgentBuilder, AgentEvent, Client, Error, Fallback, FinishReason, LanguageModel, Message,
    ModelPrice, ModelRequest, ModelResponse, ModelState, StreamEvent, ToolOutput, Usage,
    async_trait, tool,
};
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text};
use futures::StreamExt;
use serde_json::{Value, json};

/// A Chat Completions model on the mock, without retries, so each failure reaches the
/// fallback at once.
fn chat_model(url: &str, id: &str, timeout: Duration) -> Arc<dyn LanguageModel> {
    let client = Client::openai_chat()
        .base_url(url)
        .api_key("test-key")
        .max_retries(0)
        .timeout(timeout)
        .build()
        .unwrap();
    Arc::new(client.model(id))
}

fn echo_tool() -> aquaregia::Tool {
    tool("echo")
        .raw_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}}))
        .execute_raw(|args: Value| async move { Ok(args["text"].clone()) })
}

/// A model of the test's own: counts its calls in the run's [`ModelState`], answers with the
/// count, and fails the calls whose (1-based, across runs) numbers are in `fail`.
#[derive(Debug)]
struct Counting {
    id: &'static str,
    fail: Vec<usize>,
    calls: Mutex<usize>,
    /// The count each call found in its state.
    seen: Mutex<Vec<usize>>,
}

impl Counting {
    fn new(id: &'static str, fail: &[usize]) -> Arc<Self> {
        Arc::new(Self {
            id,
            fail: fail.to_vec(),
            calls: Mutex::new(0),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn seen(&self) -> Vec<usize> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait]
impl LanguageModel for Counting {
    fn model_id(&self) -> &str {
        self.id
    }

    fn provider_name(&self) -> &str {
        "counting"
    }

    async fn generate(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelResponse, Error> {
        let count = state.take::<usize>().unwrap_or(0) + 1;
        state.put(count);
        self.seen.lock().unwrap().push(count);
        let call = {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            *calls
        };
        if self.fail.contains(&call) {
            return Err(Error::Provider {
                provider: "counting",
                status: 503,
                message: "overloaded".into(),
                code: None,
                body: String::new(),
                request_id: None,
                retry_after: None,
            });
        }
        // Call the tool until the conversation has two tool results, then answer.
        let results = request
            .messages
            .iter()
            .filter(|m| m.role == aquaregia::Role::Tool)
            .count();
        let message = if results < 2 {
            Message::new(
                aquaregia::Role::Assistant,
                vec![aquaregia::ContentPart::ToolCall(aquaregia::ToolCall {
                    id: format!("{}_{call}", self.id),
                    name: "echo".into(),
                    arguments: json!({"text": format!("{} {count}", self.id)}),
                })],
            )
        } else {
            Message::assistant(format!("{} answered call {count}", self.id))
        };
        let reason = if results < 2 {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        };
        Ok(ModelResponse::new(message, reason).with_usage(Usage::new(1_000_000, 500_000)))
    }
}

#[tokio::test]
async fn an_agent_runs_on_a_model_written_outside_the_crate() {
    let model = Counting::new("counting-1", &[]);
    let agent = AgentBuilder::new(model.clone())
        .tool(echo_tool())
        .build()
        .unwrap();
    let output = agent.run("go").await.unwrap();
    assert_eq!(output.text, "counting-1 answered call 3");
    assert_eq!(output.steps.len(), 3);
    assert_eq!(
        output.steps[0].tool_calls[0].result,
        Ok(ToolOutput::Json(json!("counting-1 1")))
    );
    assert_eq!(output.steps[0].model, "counting-1");
    // One state per run, kept across its steps.
    agent.run("again").await.unwrap();
    assert_eq!(model.seen(), [1, 2, 3, 1, 2, 3]);
}

#[tokio::test]
async fn the_models_own_price_and_context_window_are_used() {
    let model = ScriptedModel::new()
        .price(ModelPrice::new(1.0, 2.0))
        .text("priced")
        .context_window(50);
    model.push(ScriptedReply::text("priced").with_usage(Usage::new(1_000_000, 500_000)));
    let agent = AgentBuilder::new(Arc::new(model.clone())).build().unwrap();
    // The window: 50 tokens, a quarter of it reserved for the answer; this prompt is far over.
    match agent.run("x".repeat(1_000)).await {
        Err(Error::ContextWindowExceeded { limit, .. }) => assert_eq!(limit, Some(38)),
        other => panic!("expected the model's window to apply, got {other:?}"),
    }
    assert_eq!(model.call_count(), 0, "nothing was sent");
    let output = agent.run("hi").await.unwrap();
    assert_eq!(
        output.cost,
        Some(Usage::default().cost(&ModelPrice::new(1.0, 2.0)))
    );
    let output = agent.run("hi").await.unwrap();
    let cost = output.cost.expect("priced by the model");
    assert!((cost.total() - 2.0).abs() < 1e-9, "{cost:?}");
}

#[tokio::test]
async fn scripted_model_streams_whole_answers_as_events_and_records_calls() {
    let model = ScriptedModel::new()
        .tool_call("c1", "echo", json!({"text": "hi"}))
        .reply(ScriptedReply::Events(vec![
            Ok(StreamEvent::TextDelta("Done".into())),
            Ok(StreamEvent::TextDelta(".".into())),
            Ok(StreamEvent::Finish(ModelResponse::new(
                Message::assistant("Done."),
                FinishReason::Stop,
            ))),
        ]));
    let agent = AgentBuilder::new(Arc::new(model.clone()))
        .tool(echo_tool())
        .build()
        .unwrap();
    let events: Vec<AgentEvent> = agent.stream("go").map(Result::unwrap).collect().await;
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Done", "."]);
    assert!(matches!(
        &events[1],
        AgentEvent::ToolCallStart { name, arguments, .. } if name == "echo" && arguments == &json!({"text": "hi"})
    ));
    let calls = model.calls();
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|call| call.streamed));
    assert_eq!(
        calls[1].request.messages.len(),
        3,
        "user, tool call, tool result"
    );
    assert_eq!(calls[1].request.model, "scripted-model");

    // The whole answer as events, when asked for a stream directly.
    let model = ScriptedModel::new().tool_call("c1", "echo", json!({}));
    let request = ModelRequest::new("m", vec![Message::user("go")]);
    let stream = model
        .stream(&request, &mut ModelState::new())
        .await
        .unwrap();
    let events: Vec<StreamEvent> = stream.map(Result::unwrap).collect().await;
    assert_eq!(events.len(), 3);
    assert_eq!(
        events[0],
        StreamEvent::ToolCallStart {
            id: "c1".into(),
            name: "echo".into()
        }
    );
    assert!(
        matches!(&events[2], StreamEvent::Finish(r) if r.finish_reason == FinishReason::ToolCalls)
    );
}

#[tokio::test]
async fn scripted_model_errors_and_an_empty_script_fail_the_call() {
    let model = ScriptedModel::new()
        .error(Error::Timeout {
            after: Duration::from_secs(1),
        })
        .reply(ScriptedReply::Events(vec![
            Ok(StreamEvent::TextDelta("par".into())),
            Err(Error::Stream {
                provider: "scripted",
                message: "cut".into(),
                code: None,
            }),
        ]));
    let request = ModelRequest::new("m", vec![Message::user("go")]);
    let mut state = ModelState::new();
    assert!(matches!(
        model.generate(&request, &mut state).await,
        Err(Error::Timeout { .. })
    ));
    assert!(matches!(
        model.generate(&request, &mut state).await,
        Err(Error::Stream { message, .. }) if message == "cut"
    ));
    match model.generate(&request, &mut state).await {
        Err(Error::InvalidRequest(message)) => {
            assert!(message.contains("no reply left for call 3"), "{message}");
        }
        other => panic!("expected the script to be used up, got {other:?}"),
    }
    let model = model.repeat_with(|| ScriptedReply::text("again"));
    assert_eq!(
        model.generate(&request, &mut state).await.unwrap().text(),
        "again"
    );
    assert_eq!(model.call_count(), 4);
}

#[tokio::test]
async fn client_model_asks_for_its_own_id_unless_the_request_names_one() {
    let server = MockServer::start().await;
    server.push(Reply::json(chat_text("one")));
    server.push(Reply::json(chat_text("two")));
    let model = chat_model(&server.url, "mock-model", Duration::from_secs(20));
    let mut state = ModelState::new();
    let unnamed = ModelRequest::new("", vec![Message::user("hi")]);
    assert_eq!(
        model.generate(&unnamed, &mut state).await.unwrap().text(),
        "one"
    );
    let named = ModelRequest::new("other-model", vec![Message::user("hi")]);
    assert_eq!(
        model.generate(&named, &mut state).await.unwrap().text(),
        "two"
    );
    let models: Vec<Value> = server.bodies().iter().map(|b| b["model"].clone()).collect();
    assert_eq!(models, [json!("mock-model"), json!("other-model")]);
    assert_eq!(model.provider_name(), "openai");
    assert_eq!(model.kind(), Some(aquaregia::ProviderKind::OpenAiChat));
    assert!(
        model
            .server_address()
            .is_some_and(|(host, _)| host == "127.0.0.1")
    );
}

/// Runs one prompt on `primary` falling back to a scripted `backup`; returns the result.
async fn run_with_backup(
    primary: Arc<dyn LanguageModel>,
    backup: &ScriptedModel,
) -> Result<aquaregia::AgentOutput, Error> {
    let fallback = Fallback::new(primary).or(Arc::new(backup.clone()));
    AgentBuilder::new(Arc::new(fallback))
        .build()
        .unwrap()
        .run("hello")
        .await
}

#[tokio::test]
async fn fallback_tries_the_next_model_after_rate_limits_and_server_errors() {
    for status in [429, 500, 503, 529] {
        let server = MockServer::start().await;
        server.push(Reply::error(
            status,
            json!({"error": {"message": "busy", "type": "server_error"}}),
        ));
        let backup = ScriptedModel::new()
            .id("backup-model")
            .text("from the backup");
        let primary = chat_model(&server.url, "primary-model", Duration::from_secs(20));
        let output = run_with_backup(primary, &backup).await.unwrap();
        assert_eq!(output.text, "from the backup", "after HTTP {status}");
        assert_eq!(server.request_count(), 1);
        let asked = backup.requests();
        assert_eq!(asked.len(), 1);
        assert_eq!(
            asked[0].model, "backup-model",
            "the backup is asked for its own id"
        );
        assert_eq!(asked[0].messages, [Message::user("hello")]);
    }
}

#[tokio::test]
async fn fallback_tries_the_next_model_after_a_timeout_and_a_dropped_connection() {
    // A model that never answers: the client's timeout (a setting) ends the wait.
    let server = MockServer::with_replies([Reply::Hang]).await;
    let backup = ScriptedModel::new().text("after the timeout");
    let primary = chat_model(&server.url, "m", Duration::from_millis(200));
    let output = run_with_backup(primary, &backup).await.unwrap();
    assert_eq!(output.text, "after the timeout");

    // A server that closes every connection it accepts.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let closer = tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            drop(socket);
        }
    });
    let backup = ScriptedModel::new().text("after the dropped connection");
    let primary = chat_model(&url, "m", Duration::from_secs(20));
    let output = run_with_backup(primary, &backup).await.unwrap();
    assert_eq!(output.text, "after the dropped connection");
    closer.abort();
}

#[tokio::test]
async fn fallback_returns_a_request_error_without_trying_the_next_model() {
    for status in [400, 401, 404, 422] {
        let server = MockServer::start().await;
        server.push(Reply::error(
            status,
            json!({"error": {"message": "bad request", "type": "invalid_request_error"}}),
        ));
        let backup = ScriptedModel::new().text("never");
        let primary = chat_model(&server.url, "m", Duration::from_secs(20));
        match run_with_backup(primary, &backup).await {
            Err(Error::Provider { status: got, .. }) => assert_eq!(got, status),
            other => panic!("expected HTTP {status} back, got {other:?}"),
        }
        assert_eq!(backup.call_count(), 0, "HTTP {status} must not fall back");
    }
}

#[tokio::test]
async fn fallback_returns_the_last_error_when_every_model_fails() {
    let first = ScriptedModel::new().id("first").reply(Error::Timeout {
        after: Duration::from_secs(1),
    });
    let second = ScriptedModel::new().id("second").reply(Error::Provider {
        provider: "scripted",
        status: 503,
        message: "second is down".into(),
        code: None,
        body: String::new(),
        request_id: None,
        retry_after: None,
    });
    let fallback = Fallback::new(Arc::new(first.clone())).or(Arc::new(second.clone()));
    let request = ModelRequest::new("first", vec![Message::user("hi")]);
    match fallback.generate(&request, &mut ModelState::new()).await {
        Err(Error::Provider { message, .. }) => assert_eq!(message, "second is down"),
        other => panic!("expected the last model's error, got {other:?}"),
    }
    assert_eq!((first.call_count(), second.call_count()), (1, 1));
}

#[tokio::test]
async fn fallback_keeps_each_models_run_state_apart() {
    // The primary fails its second call; the backup answers that step.
    let primary = Counting::new("primary", &[2]);
    let backup = Counting::new("backup", &[]);
    let fallback = Fallback::new(primary.clone()).or(backup.clone());
    let output = AgentBuilder::new(Arc::new(fallback))
        .tool(echo_tool())
        .build()
        .unwrap()
        .run("go")
        .await
        .unwrap();
    assert_eq!(output.text, "primary answered call 3");
    let results: Vec<_> = output
        .steps
        .iter()
        .flat_map(|step| &step.tool_calls)
        .map(|call| call.result.clone())
        .collect();
    assert_eq!(
        results,
        [
            Ok(ToolOutput::Json(json!("primary 1"))),
            Ok(ToolOutput::Json(json!("backup 1"))),
        ]
    );
    // Each model saw only its own count: the primary's state survived its failed call.
    assert_eq!(primary.seen(), [1, 2, 3]);
    assert_eq!(backup.seen(), [1]);
}

#[tokio::test]
async fn fallback_applies_when_a_stream_cannot_be_opened() {
    let server = MockServer::start().await;
    server.push(Reply::error(
        503,
        json!({"error": {"message": "overloaded"}}),
    ));
    let backup = ScriptedModel::new().text("streamed by the backup");
    let fallback = Fallback::new(chat_model(&server.url, "m", Duration::from_secs(20)))
        .or(Arc::new(backup.clone()));
    let agent = AgentBuilder::new(Arc::new(fallback)).build().unwrap();
    let events: Vec<AgentEvent> = agent.stream("go").map(Result::unwrap).collect().await;
    assert!(events.contains(&AgentEvent::TextDelta("streamed by the backup".into())));
    assert!(backup.calls()[0].streamed);
}

#[tokio::test]
async fn fallback_answers_to_the_first_models_id_and_the_smallest_window() {
    let fallback = Fallback::new(Arc::new(
        ScriptedModel::new().id("big").context_window(1_000),
    ))
    .or(Arc::new(
        ScriptedModel::new().id("small").context_window(500),
    ));
    assert_eq!(fallback.model_id(), "big");
    assert_eq!(fallback.provider_name(), "scripted");
    assert_eq!(fallback.context_window(), Some(500));
    let ids: Vec<&str> = fallback.models().map(|m| m.model_id()).collect();
    assert_eq!(ids, ["big", "small"]);
}
