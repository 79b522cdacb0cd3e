//! `run_typed` returns a typed value from every provider's mock, each asked for the schema
//! its own way: OpenAI `json_schema` formats (strict), an Anthropic answer tool, Gemini
//! `responseJsonSchema`, Ollama's `response_format`.

use crate::common;

use aquaregia::{
    ContentPart, FinishReason, Message, ModelRequest, OutputSchema, StreamEvent, Tool, tool,
};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{fixture, fixture_json, provider_client};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Conditions {
    Sunny,
    Cloudy,
    Rain,
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct WeatherReport {
    city: String,
    high_celsius: f64,
    conditions: Conditions,
    note: Option<String>,
}

fn expected() -> WeatherReport {
    WeatherReport {
        city: "Paris".into(),
        high_celsius: 18.5,
        conditions: Conditions::Cloudy,
        note: None,
    }
}

/// What a strict-mode model writes: every property, `null` for the absent note.
fn answer() -> Value {
    json!({"city": "Paris", "high_celsius": 18.5, "conditions": "cloudy", "note": null})
}

async fn run_typed(id: &str, model: &str, replies: Vec<Reply>, tools: Vec<Tool>) -> MockServer {
    let server = MockServer::with_replies(replies).await;
    let typed = provider_client(id, &server)
        .agent(model)
        .tools(tools)
        .build()
        .unwrap()
        .run_typed::<WeatherReport>("Tomorrow in Paris?")
        .await
        .unwrap();
    assert_eq!(typed.value, expected(), "{id}");
    server
}

fn assert_strict(schema: &Value) {
    assert_eq!(schema["additionalProperties"], false);
    let mut required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort_unstable();
    assert_eq!(required, ["city", "conditions", "high_celsius", "note"]);
    assert!(schema.get("$schema").is_none());
}

#[tokio::test]
async fn openai_chat_response_format() {
    let mut reply = fixture_json("openai_chat/response_text.json");
    reply["choices"][0]["message"]["content"] = json!(answer().to_string());
    let server = run_typed(
        "openai-chat",
        "gpt-4o-mini",
        vec![Reply::json(reply)],
        vec![],
    )
    .await;
    let format = &server.bodies()[0]["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["name"], "WeatherReport");
    assert_eq!(format["json_schema"]["strict"], true);
    assert_strict(&format["json_schema"]["schema"]);
}

#[tokio::test]
async fn openai_responses_text_format() {
    let mut reply = fixture_json("openai_responses/response_message_and_function_calls.json");
    let output = reply["output"].as_array().unwrap()[..2].to_vec();
    reply["output"] = Value::Array(output);
    reply["output"][1]["content"][0]["text"] = json!(answer().to_string());
    let server = run_typed("openai", "gpt-5-mini", vec![Reply::json(reply)], vec![]).await;
    let format = &server.bodies()[0]["text"]["format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["name"], "WeatherReport");
    assert_eq!(format["strict"], true);
    assert_strict(&format["schema"]);
}

/// An Anthropic answer calling the output tool with `input`, after some preamble text.
fn anthropic_answer(input: &Value) -> Value {
    let mut reply = fixture_json("anthropic/response_tool_use.json");
    reply["content"] = json!([
        {"type": "text", "text": "Here is the report."},
        {"type": "tool_use", "id": "toolu_01Answer", "name": "WeatherReport", "input": input}
    ]);
    reply
}

#[tokio::test]
async fn anthropic_forced_answer_tool() {
    let server = run_typed(
        "anthropic",
        "claude-sonnet-4-5",
        vec![Reply::json(anthropic_answer(&answer()))],
        vec![],
    )
    .await;
    let body = &server.bodies()[0];
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "WeatherReport"})
    );
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["name"], "WeatherReport");
    assert_eq!(
        tools[0]["input_schema"]["properties"]["city"]["type"],
        "string"
    );
}

#[tokio::test]
async fn anthropic_non_object_answers_are_wrapped() {
    // A tool's input must be an object: a list answer travels as {"value": [...]}, with the
    // definitions its items refer to kept at the root.
    let mut reply = anthropic_answer(&json!({"value": ["sunny", "rain"]}));
    reply["content"][1]["name"] = json!("Array_of_Conditions");
    let server = MockServer::with_replies([Reply::json(reply)]).await;
    let typed = provider_client("anthropic", &server)
        .agent("claude-sonnet-4-5")
        .build()
        .unwrap()
        .run_typed::<Vec<Conditions>>("This week?")
        .await
        .unwrap();
    assert_eq!(typed.value, [Conditions::Sunny, Conditions::Rain]);
    let schema = &server.bodies()[0]["tools"][0]["input_schema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["required"], json!(["value"]));
    assert_eq!(schema["properties"]["value"]["type"], "array");
    let reference = schema["properties"]["value"]["items"]["$ref"]
        .as_str()
        .unwrap();
    assert!(schema.pointer(&reference[1..]).is_some(), "{schema}");
}

#[tokio::test]
async fn anthropic_tools_first_then_the_answer() {
    let weather = tool("get_weather")
        .description("Current weather")
        .raw_schema(json!({"type": "object", "properties": {"location": {"type": "string"}}}))
        .execute_raw(|_| async { Ok(json!({"high": 18.5, "sky": "cloudy"})) });
    let mut first = fixture_json("anthropic/response_tool_use.json");
    let calls = first["content"].as_array().unwrap()[..2].to_vec();
    first["content"] = Value::Array(calls);
    let server = run_typed(
        "anthropic",
        "claude-sonnet-4-5",
        vec![
            Reply::json(first),
            Reply::json(anthropic_answer(&json!({
                "city": "Paris", "high_celsius": 18.5, "conditions": "cloudy"
            }))),
        ],
        vec![weather],
    )
    .await;
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    for body in &bodies {
        // With tools, the model must call one: get_weather first, the answer tool last.
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
        let names: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["get_weather", "WeatherReport"]);
    }
    assert_eq!(
        bodies[1]["messages"][2]["content"][0]["type"], "tool_result",
        "the weather tool ran before the answer"
    );
}

#[tokio::test]
async fn anthropic_streamed_answer_is_the_tool_input() {
    // The fixture's streamed tool call, renamed to the answer tool: its input is the answer,
    // the text before it is dropped, the signed thinking kept.
    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Place {
        location: String,
        unit: String,
    }
    let sse =
        fixture("anthropic/stream_thinking_text_tool_use.sse").replace("get_weather", "Place");
    let server = MockServer::with_replies([Reply::sse(sse)]).await;
    let request = ModelRequest::new("claude-sonnet-4-5", vec![Message::user("Where?")])
        .output_schema(OutputSchema::of::<Place>());
    let mut stream = provider_client("anthropic", &server)
        .stream(&request)
        .await
        .unwrap();
    let mut finished = None;
    while let Some(event) = stream.next().await {
        if let StreamEvent::Finish(response) = event.unwrap() {
            finished = Some(response);
        }
    }
    let response = finished.unwrap();
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(response.message.tool_calls().count(), 0);
    assert!(
        response
            .message
            .content
            .iter()
            .any(|p| matches!(p, ContentPart::Reasoning(_)))
    );
    let place: Place = serde_json::from_str(&response.text()).unwrap();
    assert_eq!(
        place,
        Place {
            location: "Paris".into(),
            unit: "celsius".into()
        }
    );
    let body = &server.bodies()[0];
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "Place"})
    );
}

#[tokio::test]
async fn gemini_response_json_schema() {
    let mut reply = fixture_json("gemini/response_text.json");
    reply["candidates"][0]["content"]["parts"][0]["text"] =
        json!(r#"{"city": "Paris", "high_celsius": 18.5, "conditions": "cloudy"}"#);
    let server = run_typed(
        "gemini",
        "gemini-3.7-flash",
        vec![Reply::json(reply)],
        vec![],
    )
    .await;
    let config = &server.bodies()[0]["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json");
    let schema = &config["responseJsonSchema"];
    assert_eq!(schema["properties"]["city"]["type"], "string");
    assert!(schema.get("$schema").is_none());
}

#[tokio::test]
async fn ollama_response_format_and_fenced_answer() {
    let mut reply = fixture_json("openai_chat/response_text.json");
    reply["choices"][0]["message"]["content"] = json!(format!("```json\n{}\n```", answer()));
    let server = run_typed("ollama", "qwen3:8b", vec![Reply::json(reply)], vec![]).await;
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.body["response_format"]["type"], "json_schema");
    assert_eq!(
        request.body["response_format"]["json_schema"]["name"],
        "WeatherReport"
    );
}
