//! OpenAI requests (Responses and Chat Completions) carry the configured `prompt_cache_key`,
//! and the cached tokens the mock reports show in `Usage`.

use crate::common;

use aquaregia::{Message, ModelRequest, PromptCaching};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{fixture_json, provider_client};
use serde_json::json;

#[tokio::test]
async fn chat_and_responses_send_the_session_key() {
    let mut chat = fixture_json("openai_chat/response_text.json");
    chat["usage"]["prompt_tokens_details"]["cached_tokens"] = json!(192);
    let mut responses = fixture_json("openai_responses/response_message_and_function_calls.json");
    responses["usage"]["input_tokens_details"]["cached_tokens"] = json!(128);

    for (id, model, reply, cached) in [
        ("openai-chat", "gpt-4o-mini", chat, 192),
        ("openai", "gpt-5-mini", responses, 128),
    ] {
        let server = MockServer::with_replies([Reply::json(reply)]).await;
        let output = provider_client(id, &server)
            .agent(model)
            .max_steps(1)
            .prompt_caching(PromptCaching::none().key("session-7"))
            .build()
            .unwrap()
            .run("hi")
            .await
            .unwrap();
        assert_eq!(server.bodies()[0]["prompt_cache_key"], "session-7", "{id}");
        assert_eq!(output.usage.cached_input_tokens, cached, "{id}");
    }
}

#[tokio::test]
async fn no_key_unless_configured() {
    for id in ["openai-chat", "openai"] {
        let reply = if id == "openai" {
            fixture_json("openai_responses/response_message_and_function_calls.json")
        } else {
            fixture_json("openai_chat/response_text.json")
        };
        let server = MockServer::with_replies([Reply::json(reply)]).await;
        // Anthropic breakpoints mean nothing to OpenAI: nothing is added either.
        let request = ModelRequest::new("gpt-4o-mini", vec![Message::user("hi")])
            .instructions("be brief")
            .prompt_caching(PromptCaching::breakpoints());
        provider_client(id, &server)
            .generate(&request)
            .await
            .unwrap();
        let body = &server.bodies()[0];
        assert!(body.get("prompt_cache_key").is_none(), "{id}: {body}");
        assert!(!body.to_string().contains("cache_control"), "{id}: {body}");
    }
}
