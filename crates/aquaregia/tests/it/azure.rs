//! Azure OpenAI / Azure AI Foundry against a mock: the URL, query and auth header each way
//! of reaching a deployment sends (classic deployment URLs with `api-version`, the v1
//! endpoint, `api-key` or an Entra bearer token), a streamed tool round trip, and the
//! Responses API on the v1 endpoint.

use crate::common;

use std::time::Duration;

use aquaregia::{
    AgentEvent, Client, ConfigError, Error, Message, ModelRequest, StopReason, StreamEvent, tool,
};
use aquaregia_test_support::mock_model::{MockServer, Recorded, Reply};
use common::fixture;
use futures::StreamExt;
use serde_json::{Value, json};

const DEPLOYMENT: &str = "my-gpt-4o";

fn builder(spec: &str) -> aquaregia::ClientBuilder {
    Client::builder_from_model_spec(spec)
        .unwrap()
        .0
        .max_retries(0)
        .timeout(Duration::from_secs(20))
}

fn chunk(delta: &Value, finish: Option<&str>) -> String {
    let chunk = json!({"id": "chatcmpl-az", "object": "chat.completion.chunk",
        "model": "gpt-4o-2024-11-20", "choices": [{"index": 0, "delta": delta,
        "finish_reason": finish, "content_filter_results": {}}]});
    format!("data: {chunk}\n\n")
}

/// A stream as Azure sends it: a first chunk with no choices (its prompt filter results),
/// the deltas, the finish, then usage in a chunk of its own.
fn stream(deltas: &[Value], finish: &str, input: u64, output: u64) -> String {
    let mut out = format!(
        "data: {}\n\n",
        json!({"id": "", "object": "", "created": 0, "model": "", "choices": [],
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]})
    );
    for delta in deltas {
        out.push_str(&chunk(delta, None));
    }
    out.push_str(&chunk(&json!({}), Some(finish)));
    out.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"id": "chatcmpl-az", "object": "chat.completion.chunk", "model": "gpt-4o",
            "choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output,
            "total_tokens": input + output}})
    ));
    out
}

fn add_tool() -> aquaregia::Tool {
    tool("add")
        .description("Adds two integers")
        .raw_schema(json!({"type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]}))
        .execute_raw(|args: Value| async move {
            Ok(json!(
                args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap()
            ))
        })
}

/// Runs a streamed agent with the `add` tool against `server` and checks the round trip.
async fn run_round_trip(client: &Client, server: &MockServer) {
    server.push(Reply::sse(stream(
        &[
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_az1",
            "type": "function", "function": {"name": "add", "arguments": "{\"a\":2,"}}]}),
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"b\":40}"}}]}),
        ],
        "tool_calls",
        30,
        9,
    )));
    server.push(Reply::sse(stream(
        &[json!({"content": "42"})],
        "stop",
        50,
        2,
    )));
    let agent = client
        .agent(DEPLOYMENT)
        .tool(add_tool())
        .max_output_tokens(256)
        .build()
        .unwrap();
    let mut events = agent.stream("Add 2 and 40.");
    let mut output = None;
    let mut text = String::new();
    while let Some(event) = events.next().await {
        match event.unwrap() {
            AgentEvent::TextDelta(delta) => text.push_str(&delta),
            AgentEvent::Finish(out) => output = Some(out),
            _ => {}
        }
    }
    let output = output.unwrap();
    assert_eq!(text, "42");
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(
        (output.usage.input_tokens, output.usage.output_tokens),
        (80, 11)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let tool_message = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert_eq!(tool_message["tool_call_id"], "call_az1");
    assert_eq!(tool_message["content"], "42");
    for request in &requests {
        assert_eq!(request.body["model"], DEPLOYMENT);
        assert_eq!(request.body["max_completion_tokens"], 256);
        assert_eq!(request.body["stream_options"]["include_usage"], true);
    }
}

fn api_version_configured() -> bool {
    ["AZURE_OPENAI_API_VERSION", "OPENAI_API_VERSION"]
        .iter()
        .any(|var| std::env::var_os(var).is_some())
}

fn assert_api_key_auth(request: &Recorded) {
    assert_eq!(request.headers["api-key"], "azure-key");
    assert!(request.headers.get("authorization").is_none());
}

#[tokio::test]
async fn classic_deployment_urls_carry_the_api_version_and_the_api_key() {
    let server = MockServer::start().await;
    // The resource endpoint, as the portal shows it (with its trailing slash).
    let client = builder(&format!("azure:{DEPLOYMENT}"))
        .base_url(format!("{}/", server.root()))
        .api_key("azure-key")
        .build()
        .unwrap();
    assert_eq!(client.base_url(), format!("{}/openai", server.root()));
    run_round_trip(&client, &server).await;
    for request in server.requests() {
        assert_eq!(
            request.path,
            format!("/openai/deployments/{DEPLOYMENT}/chat/completions")
        );
        if !api_version_configured() {
            assert_eq!(request.query, "api-version=2024-10-21");
        }
        assert_api_key_auth(&request);
    }
}

#[tokio::test]
async fn the_v1_endpoint_takes_the_deployment_as_model_and_no_api_version() {
    let server = MockServer::start().await;
    let client = builder(&format!("azure:{DEPLOYMENT}"))
        .base_url(format!("{}/openai/v1/", server.root()))
        .api_key("azure-key")
        .build()
        .unwrap();
    run_round_trip(&client, &server).await;
    for request in server.requests() {
        assert_eq!(request.path, "/openai/v1/chat/completions");
        assert_eq!(request.query, "");
        assert_api_key_auth(&request);
    }
}

#[tokio::test]
async fn an_entra_token_goes_as_a_bearer_token_instead_of_the_key() {
    let server = MockServer::start().await;
    server.push(Reply::json(aquaregia_test_support::mock_model::chat_text(
        "hi",
    )));
    let client = builder(&format!("azure:{DEPLOYMENT}"))
        .base_url(server.root())
        .api_key("azure-key")
        .bearer_token("entra-token")
        .build()
        .unwrap();
    let response = client
        .generate(&ModelRequest::new(DEPLOYMENT, vec![Message::user("hi")]))
        .await
        .unwrap();
    assert_eq!(response.text(), "hi");
    let request = &server.requests()[0];
    assert_eq!(request.headers["authorization"], "Bearer entra-token");
    assert!(request.headers.get("api-key").is_none());
    // The token stays out of Debug.
    assert!(!format!("{client:?}").contains("entra-token"));
}

#[tokio::test]
async fn a_deployment_name_cannot_change_the_url() {
    let server = MockServer::start().await;
    server.push(Reply::json(aquaregia_test_support::mock_model::chat_text(
        "hi",
    )));
    let client = builder("azure:x")
        .base_url(server.root())
        .api_key("azure-key")
        .build()
        .unwrap();
    client
        .generate(&ModelRequest::new("a/b?c", vec![Message::user("hi")]))
        .await
        .unwrap();
    let request = &server.requests()[0];
    assert_eq!(
        request.path,
        "/openai/deployments/a%2Fb%3Fc/chat/completions"
    );
    assert!(request.query.starts_with("api-version="));
}

#[test]
fn without_an_endpoint_the_error_names_the_variable() {
    if ["AZURE_OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT"]
        .iter()
        .any(|var| std::env::var_os(var).is_some())
    {
        return;
    }
    let error = builder("azure:d").api_key("k").build().unwrap_err();
    assert!(
        matches!(
            error,
            Error::Config(ConfigError::MissingBaseUrl {
                provider: "azure",
                env_var: "AZURE_OPENAI_ENDPOINT"
            })
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "configuration error: no base URL for azure: set AZURE_OPENAI_ENDPOINT"
    );
}

#[tokio::test]
async fn responses_go_to_the_v1_endpoint() {
    let server = MockServer::start().await;
    server.push(Reply::sse(fixture(
        "openai_responses/stream_reasoning_text_function_call.sse",
    )));
    let client = builder(&format!("azure-responses:{DEPLOYMENT}"))
        .base_url(server.root())
        .api_key("azure-key")
        .build()
        .unwrap();
    assert_eq!(client.base_url(), format!("{}/openai/v1", server.root()));
    let stream = client
        .stream(
            &ModelRequest::new(DEPLOYMENT, vec![Message::user("Weather?")]).tools(vec![add_tool()]),
        )
        .await
        .unwrap();
    let events: Vec<_> = stream.collect().await;
    let Some(Ok(StreamEvent::Finish(response))) = events.last() else {
        panic!("no finish: {events:?}");
    };
    assert_eq!(response.message.tool_calls().count(), 1);
    assert!(response.usage.input_tokens > 0);
    let request = &server.requests()[0];
    assert_eq!(request.path, "/openai/v1/responses");
    assert_eq!(request.query, "");
    assert_eq!(request.body["model"], DEPLOYMENT);
    assert_eq!(request.body["stream"], true);
    assert_api_key_auth(request);
}
