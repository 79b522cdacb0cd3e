//! A structured answer that fails (not JSON, or not the schema) gets one repair round with
//! what was wrong; a second failure is `Error::StructuredOutput` with the raw answer. The
//! rounds' logic runs on a scripted model; `Client::generate_object` on Gemini's wire format.

use crate::common;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{Error, Message, ModelRequest, Role, Usage, generate_object};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{fixture_json, provider_client, scripted_agent};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Capital {
    city: String,
    population_millions: f64,
}

fn answer(text: &str) -> ScriptedReply {
    ScriptedReply::text(text).with_usage(Usage::new(263, 31))
}

fn gemini_answer(text: &str) -> Reply {
    let mut reply = fixture_json("gemini/response_text.json");
    reply["candidates"][0]["content"]["parts"][0]["text"] = json!(text);
    Reply::json(reply)
}

const GOOD: &str = r#"{"city": "Paris", "population_millions": 2.1}"#;
const TRUNCATED: &str = r#"{"city": "Paris", "population_mil"#;
const WRONG_TYPE: &str = r#"{"city": "Paris", "population_millions": "two"}"#;

#[tokio::test]
async fn run_typed_repairs_a_malformed_answer() {
    let model = ScriptedModel::new()
        .reply(answer(TRUNCATED))
        .reply(answer(GOOD));
    let typed = scripted_agent(&model)
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
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    // The repair round sees the bad answer and what was wrong with it.
    let messages = &requests[1].messages;
    assert_eq!(messages[messages.len() - 2], Message::assistant(TRUNCATED));
    let repair = messages.last().unwrap();
    assert_eq!(repair.role, Role::User);
    assert!(
        repair.text().contains("not valid JSON"),
        "{}",
        repair.text()
    );
    // Both rounds ask for the schema.
    for request in &requests {
        assert_eq!(request.output_schema.as_ref().unwrap().name(), "Capital");
    }
    // Both rounds are in the output, numbered in order, their usage summed.
    assert_eq!(typed.output.steps.len(), 2);
    assert_eq!(typed.output.steps[1].index, 1);
    assert_eq!(typed.output.usage.input_tokens, 2 * 263);
}

#[tokio::test]
async fn run_typed_second_failure_is_a_typed_error() {
    let model = ScriptedModel::new()
        .reply(answer(TRUNCATED))
        .reply(answer(WRONG_TYPE));
    let error = scripted_agent(&model)
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
    assert_eq!(model.call_count(), 2, "one repair round only");
}

#[tokio::test]
async fn generate_object_on_any_model_repairs_once() {
    let model = ScriptedModel::new()
        .reply(answer(WRONG_TYPE))
        .reply(answer(GOOD));
    let request = ModelRequest::new("", vec![Message::user("France?")]);
    let object = generate_object::<Capital>(&model, &request).await.unwrap();
    assert_eq!(object.value.population_millions, 2.1);
    assert_eq!(object.usage.input_tokens, 2 * 263);
    let requests = model.requests();
    assert!(requests.iter().all(|r| r.output_schema.is_some()));
    let repair = requests[1].messages.last().unwrap().text();
    assert!(repair.contains("does not match the schema"), "{repair}");
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
