//! A structured answer that fails (not JSON, or not the schema) gets one repair round with
//! what was wrong; a second failure is `Error::StructuredOutput` with the raw answer.

use crate::common;

use aquaregia::{Error, Message, ModelRequest};
use aquaregia_test_support::mock_model::{MockServer, Reply, content_text};
use common::{fixture_json, provider_client};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Capital {
    city: String,
    population_millions: f64,
}

fn chat_answer(text: &str) -> Reply {
    let mut reply = fixture_json("openai_chat/response_text.json");
    reply["choices"][0]["message"]["content"] = json!(text);
    Reply::json(reply)
}

fn gemini_answer(text: &str) -> Reply {
    let mut reply = fixture_json("gemini/response_text.json");
    reply["candidates"][0]["content"]["parts"][0]["text"] = json!(text);
    Reply::json(reply)
}

const GOOD: &str = r#"{"city": "Paris", "population_millions": 2.1}"#;
const TRUNCATED: &str = r#"{"city": "Paris", "population_mil"#;
const WRONG_TYPE: &str = r#"{"city": "Paris", "population_millions": "two"}"#;

/// The last message of a request body, as text.
fn last_message(body: &Value) -> String {
    content_text(body["messages"].as_array().unwrap().last().unwrap())
}

#[tokio::test]
async fn run_typed_repairs_a_malformed_answer() {
    let server = MockServer::with_replies([chat_answer(TRUNCATED), chat_answer(GOOD)]).await;
    let typed = provider_client("openai-chat", &server)
        .agent("gpt-4o-mini")
        .build()
        .unwrap()
        .run_typed::<Capital>("The capital of France?")
        .await
        .unwrap();
    assert_eq!(
        typed.value,
        Capital {
            city: "Paris".into(),
            population_millions: 2.1
        }
    );
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    // The repair round sees the bad answer and what was wrong with it.
    let messages = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(messages[messages.len() - 2]["content"], TRUNCATED);
    let repair = last_message(&bodies[1]);
    assert!(repair.contains("not valid JSON"), "{repair}");
    assert!(bodies[1]["response_format"]["json_schema"].is_object());
    // Both rounds are in the output, numbered in order, their usage summed.
    assert_eq!(typed.output.steps.len(), 2);
    assert_eq!(typed.output.steps[1].index, 1);
    assert_eq!(typed.output.usage.input_tokens, 2 * 263);
}

#[tokio::test]
async fn run_typed_second_failure_is_a_typed_error() {
    let server = MockServer::with_replies([chat_answer(TRUNCATED), chat_answer(WRONG_TYPE)]).await;
    let error = provider_client("openai-chat", &server)
        .agent("gpt-4o-mini")
        .build()
        .unwrap()
        .run_typed::<Capital>("The capital of France?")
        .await
        .unwrap_err();
    let Error::StructuredOutput { message, raw } = error else {
        panic!("expected StructuredOutput, got {error:?}");
    };
    assert_eq!(raw, WRONG_TYPE);
    assert!(message.contains("does not match the schema"), "{message}");
    assert!(message.contains("/population_millions"), "{message}");
    assert_eq!(server.request_count(), 2, "one repair round only");
}

#[tokio::test]
async fn generate_object_repairs_then_fails_typed() {
    // A schema violation first, then a good answer.
    let server = MockServer::with_replies([gemini_answer(WRONG_TYPE), gemini_answer(GOOD)]).await;
    let client = provider_client("gemini", &server);
    let request = ModelRequest::new("gemini-3.7-flash", vec![Message::user("France?")]);
    let object = client.generate_object::<Capital>(&request).await.unwrap();
    assert_eq!(object.value.city, "Paris");
    assert_eq!(object.usage.input_tokens, 2 * 421);
    let bodies = server.bodies();
    let repair = bodies[1]["contents"].as_array().unwrap().last().unwrap()["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(repair.contains("does not match the schema"), "{repair}");

    // Two bad answers: the typed error carries the second one.
    let server =
        MockServer::with_replies([gemini_answer(TRUNCATED), gemini_answer("Paris.")]).await;
    let client = provider_client("gemini", &server);
    let error = client
        .generate_object::<Capital>(&request)
        .await
        .unwrap_err();
    let Error::StructuredOutput { message, raw } = error else {
        panic!("expected StructuredOutput, got {error:?}");
    };
    assert_eq!(raw, "Paris.");
    assert!(message.contains("not valid JSON"), "{message}");
    assert_eq!(server.request_count(), 2);
}
