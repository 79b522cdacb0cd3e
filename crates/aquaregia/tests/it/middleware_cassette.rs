//! `Cassette`: an agent run recorded against the loopback mock and replayed with the server
//! gone (the same events), secrets kept out of the file, unknown requests refused by name,
//! record-if-missing.

use std::sync::Arc;

use aquaregia::test_utils::ScriptedModel;
use aquaregia::{
    AgentBuilder, Cassette, CassetteMode, Client, Error, LanguageModel, Message, ModelRequest,
    ModelState, Tool, tool,
};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use futures::StreamExt;
use serde_json::{Value, json};

const API_KEY: &str = "sk-cassettetest0123456789abcdefXYZ";

fn echo() -> Tool {
    tool("echo")
        .description("Echoes its message")
        .raw_schema(json!({
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"]
        }))
        .execute_raw(|args: Value| async move { Ok(args["message"].clone()) })
}

async fn run_events(model: Arc<dyn LanguageModel>, prompt: &str) -> Vec<String> {
    let agent = AgentBuilder::new(model).tool(echo()).build().unwrap();
    agent
        .stream(prompt)
        .map(|event| format!("{:?}", event.unwrap()))
        .collect()
        .await
}

#[tokio::test]
async fn a_run_recorded_against_the_mock_replays_with_the_server_gone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cassettes/echo.json");
    let prompt = format!("Call echo with hello. (My key is {API_KEY}; org my-org-42.)");

    let server = MockServer::with_replies([
        Reply::tool_call("call_1", "echo", json!({"message": "hello"})),
        Reply::text("It said hello."),
    ])
    .await;
    let client = Client::openai_chat()
        .base_url(&server.url)
        .api_key(API_KEY)
        .max_retries(0)
        .build()
        .unwrap();
    let recorder = Cassette::builder(&path)
        .mode(CassetteMode::Record)
        .model(Arc::new(client.model("mock-model")))
        .scrub("my-org-42")
        .build()
        .unwrap();
    let recorded = run_events(Arc::new(recorder), &prompt).await;
    assert_eq!(server.request_count(), 2);
    assert!(
        recorded
            .iter()
            .any(|event| event.starts_with("ToolCallFinish")),
        "{recorded:?}"
    );
    drop(server);

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(API_KEY), "the API key reached the cassette");
    assert!(!text.contains("my-org-42"), "a scrubbed string reached it");
    assert!(text.contains("[REDACTED]"));
    let file: Value = serde_json::from_str(&text).unwrap();
    let interactions = file["interactions"].as_array().unwrap();
    assert_eq!(interactions.len(), 2);
    assert!(interactions[0]["events"].is_array(), "recorded as a stream");
    assert_eq!(file["model"], "mock-model");

    // A fresh agent, no server, no key, no model behind the cassette (the same scrubs, so
    // the prompt holding the scrubbed string matches).
    let player = Cassette::builder(&path).scrub("my-org-42").build().unwrap();
    assert_eq!(player.model_id(), "mock-model");
    let replayed = run_events(Arc::new(player), &prompt).await;
    assert_eq!(replayed, recorded);
}

#[tokio::test]
async fn replay_of_an_unknown_request_names_the_cassette() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("known.json");
    let scripted = ScriptedModel::new().text("recorded");
    let recorder = Cassette::builder(&path)
        .mode(CassetteMode::Record)
        .model(Arc::new(scripted))
        .build()
        .unwrap();
    let request = ModelRequest::new("scripted-model", vec![Message::user("known")]);
    recorder
        .generate(&request, &mut ModelState::new())
        .await
        .unwrap();

    let player = Cassette::builder(&path).build().unwrap();
    let answer = player
        .generate(&request, &mut ModelState::new())
        .await
        .unwrap();
    assert_eq!(answer.text(), "recorded");
    let unknown = ModelRequest::new("scripted-model", vec![Message::user("never recorded")]);
    let error = player
        .generate(&unknown, &mut ModelState::new())
        .await
        .unwrap_err();
    assert!(matches!(&error, Error::Cassette { path: p, .. } if *p == path));
    let message = error.to_string();
    assert!(message.contains("known.json"), "{message}");
    assert!(message.contains("no recorded answer"), "{message}");

    let missing = Cassette::builder(dir.path().join("missing.json"))
        .build()
        .unwrap_err();
    assert!(missing.to_string().contains("missing.json"), "{missing}");
}

#[tokio::test]
async fn record_if_missing_calls_the_model_only_for_what_the_cassette_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lazy.json");
    let scripted = ScriptedModel::new()
        .text("account acct_12345 is open")
        .text("second");
    let cassette = || {
        Cassette::builder(&path)
            .mode(CassetteMode::RecordIfMissing)
            .model(Arc::new(scripted.clone()))
            .scrub_pattern(r"acct_\d+")
            .build()
            .unwrap()
    };
    let first = ModelRequest::new("scripted-model", vec![Message::user("one")]);
    let second = ModelRequest::new("scripted-model", vec![Message::user("two")]);
    let answer = cassette()
        .generate(&first, &mut ModelState::new())
        .await
        .unwrap();
    assert_eq!(answer.text(), "account acct_12345 is open");
    assert_eq!(scripted.call_count(), 1);

    // A new cassette on the same file: the first request is on tape, the second is not.
    let again = cassette();
    let replayed = again
        .generate(&first, &mut ModelState::new())
        .await
        .unwrap();
    assert_eq!(replayed.text(), "account [REDACTED] is open");
    assert_eq!(scripted.call_count(), 1, "answered from the file");
    let new = again
        .generate(&second, &mut ModelState::new())
        .await
        .unwrap();
    assert_eq!(new.text(), "second");
    assert_eq!(scripted.call_count(), 2);

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("acct_12345"));
    let file: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(file["interactions"].as_array().unwrap().len(), 2);

    let bad = Cassette::builder(&path).scrub_pattern("(").build();
    assert!(matches!(bad, Err(Error::Cassette { .. })));
}
