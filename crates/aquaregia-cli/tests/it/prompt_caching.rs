//! The front ends ask for prompt caching: `run` on Anthropic marks the system prompt and the
//! latest turn, `acp` on OpenAI sends the session id as `prompt_cache_key`, and a compatible
//! server that is not OpenAI gets no key.

use crate::common;

use std::time::Duration;

use aquaregia_test_support::acp_client::RawClient;
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, run, use_mock};
use serde_json::json;

/// A streamed Anthropic text answer.
fn anthropic_answer(text: &str) -> Reply {
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
            "stop_reason": null, "usage": {"input_tokens": 20, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 3}}),
        json!({"type": "message_stop"}),
    ];
    Reply::sse(
        events
            .iter()
            .map(|event| {
                format!(
                    "event: {}\ndata: {event}\n\n",
                    event["type"].as_str().unwrap()
                )
            })
            .collect::<String>(),
    )
}

/// A streamed OpenAI Responses text answer.
fn responses_answer(text: &str) -> Reply {
    let delta = json!({"type": "response.output_text.delta", "item_id": "msg_1",
        "output_index": 0, "content_index": 0, "delta": text});
    let completed = json!({"type": "response.completed", "response": {
        "id": "resp_1", "status": "completed", "model": "gpt-5-mini",
        "output": [{"id": "msg_1", "type": "message", "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": 5, "output_tokens": 2}}});
    Reply::sse(format!(
        "event: response.output_text.delta\ndata: {delta}\n\n\
         event: response.completed\ndata: {completed}\n\n"
    ))
}

#[tokio::test]
async fn run_on_anthropic_marks_breakpoints() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![anthropic_answer("Hi.")]).await;
    let mut command = cli(&scratch);
    command
        .args(["run", "--yes", "--system", "Be brief.", "--model"])
        .arg("anthropic:claude-sonnet-4-5")
        .arg("Say hi.")
        .env("ANTHROPIC_BASE_URL", model.root())
        .env("ANTHROPIC_API_KEY", "test");
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Hi.\n");

    let body = &model.bodies()[0];
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(body["system"][0]["text"], "Be brief.");
    assert_eq!(body["system"][0]["cache_control"], ephemeral);
    assert_eq!(body["messages"][0]["content"][0]["text"], "Say hi.");
    assert_eq!(
        body["messages"][0]["content"][0]["cache_control"],
        ephemeral
    );
}

#[tokio::test]
async fn compatible_servers_get_no_cache_key() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![Reply::text("Hi.")]).await;
    let mut command = cli(&scratch);
    command.args(["run", "--yes", "Say hi."]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let body = &model.bodies()[0];
    assert!(body.get("prompt_cache_key").is_none(), "{body}");
    assert!(!body.to_string().contains("cache_control"), "{body}");
}

#[tokio::test]
async fn acp_sessions_send_their_id_as_openai_cache_key() {
    let scratch = Scratch::new();
    let model =
        MockServer::with_replies(vec![responses_answer("One."), responses_answer("Two.")]).await;
    let mut command = cli(&scratch);
    command
        .args(["acp", "--model", "openai:gpt-5-mini"])
        .env("OPENAI_BASE_URL", &model.url)
        .env("OPENAI_API_KEY", "test");
    let client = RawClient::spawn(tokio::process::Command::from(command));
    client.initialize().await;
    let cwd = scratch.path.to_string_lossy().into_owned();
    let first = client.new_session(&cwd, json!([])).await;
    let second = client.new_session(&cwd, json!([])).await;
    assert_ne!(first, second);
    for session in [&first, &second] {
        let response = client.prompt(session, "Count.").await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    let bodies = model.bodies();
    assert_eq!(bodies[0]["prompt_cache_key"], first.as_str());
    assert_eq!(bodies[1]["prompt_cache_key"], second.as_str());

    client.close_write().await;
    assert!(client.wait_exit(Duration::from_secs(10)).await.success());
}
