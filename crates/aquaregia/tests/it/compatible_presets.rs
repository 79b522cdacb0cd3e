//! The OpenAI-compatible presets (OpenRouter, Groq, DeepSeek, Mistral, xAI, Together,
//! Fireworks, Cerebras, LM Studio, vLLM, llama.cpp): for each, an agent run against a mock
//! speaking its Chat Completions stream (a tool call whose result carries an image, usage,
//! an answer), what the request put on the wire, and the preset's defaults.

use std::time::Duration;

use aquaregia::{AgentEvent, Client, ContentBlock, ContentPart, Error, StopReason, tool};
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text};
use futures::StreamExt;
use serde_json::{Value, json};

const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGMwTjsDAAI1AWaKkkQyAAAAAElFTkSuQmCC";

/// One preset as its provider documents it.
struct Preset {
    id: &'static str,
    /// The default base URL.
    url: &'static str,
    /// The variable holding the key, for presets that require one.
    key_var: Option<&'static str>,
    /// The body field carrying the output limit.
    max_tokens: &'static str,
    /// Whether streamed requests carry `stream_options` (Mistral rejects it).
    stream_options: bool,
    /// Whether usage arrives in the chunk with the finish reason (Mistral) rather than in a
    /// chunk of its own after it.
    usage_with_finish: bool,
}

const PRESETS: &[Preset] = &[
    Preset {
        id: "openrouter",
        url: "https://openrouter.ai/api/v1",
        key_var: Some("OPENROUTER_API_KEY"),
        max_tokens: "max_tokens",
        stream_options: true,
        usage_with_finish: false,
    },
    Preset {
        id: "groq",
        url: "https://api.groq.com/openai/v1",
        key_var: Some("GROQ_API_KEY"),
        max_tokens: "max_completion_tokens",
        stream_options: true,
        usage_with_finish: false,
    },
    Preset {
        id: "deepseek",
        url: "https://api.deepseek.com",
        key_var: Some("DEEPSEEK_API_KEY"),
        max_tokens: "max_tokens",
        stream_options: true,
        usage_with_finish: false,
    },
    Preset {
        id: "mistral",
        url: "https://api.mistral.ai/v1",
        key_var: Some("MISTRAL_API_KEY"),
        max_tokens: "max_tokens",
        stream_options: false,
        usage_with_finish: true,
    },
    Preset {
        id: "xai",
        url: "https://api.x.ai/v1",
        key_var: Some("XAI_API_KEY"),
        max_tokens: "max_tokens",
        stream_options: true,
        usage_with_finish: false,
    },
    Preset {
        id: "together",
        url: "https://api.together.xyz/v1",
        key_var: Some("TOGETHER_API_KEY"),
        max_tokens: "max_tokens",
        stream_options: true,
        usage_with_finish: false,
    },
    Preset {
        id: "fireworks",
        url: "https://api.fireworks.ai/inference/v1",
        key_var: Some("FIREWORKS_API_KEY"),
        max_tokens: "max_tokens",
        stream_options: true,
        usage_with_finish: false,
    },
    Preset {
        id: "cerebras",
        url: "https://api.cerebras.ai/v1",
        key_var: Some("CEREBRAS_API_KEY"),
        max_tokens: "max_completion_tokens",
        stream_options: true,
        usage_with_finish: false,
    },
    Preset {
        id: "lmstudio",
        url: "http://127.0.0.1:1234/v1",
        key_var: None,
        max_tokens: "max_tokens",
        stream_options: true,
        usage_with_finish: false,
    },
    Preset {
        id: "vllm",
        url: "http://127.0.0.1:8000/v1",
        key_var: None,
        max_tokens: "max_tokens",
        stream_options: true,
        usage_with_finish: false,
    },
    Preset {
        id: "llamacpp",
        url: "http://127.0.0.1:8080/v1",
        key_var: None,
        max_tokens: "max_tokens",
        stream_options: true,
        usage_with_finish: false,
    },
];

fn chunk(delta: &Value, finish: Option<&str>, usage: Option<Value>) -> String {
    let mut chunk = json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_767_000_000,
        "model": "upstream-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    if let Some(usage) = usage {
        chunk["usage"] = usage;
    }
    format!("data: {chunk}\n\n")
}

/// A stream ending in `finish`, with `usage` where the preset puts it.
fn stream(preset: &Preset, deltas: &[Value], finish: &str, usage: Value) -> String {
    let mut out: String = deltas.iter().map(|d| chunk(d, None, None)).collect();
    if preset.usage_with_finish {
        out.push_str(&chunk(&json!({}), Some(finish), Some(usage)));
    } else {
        out.push_str(&chunk(&json!({}), Some(finish), None));
        let usage_chunk = json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "upstream-model",
            "choices": [], "usage": usage,
        });
        out.push_str(&format!("data: {usage_chunk}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}

fn usage(input: u64, output: u64) -> Value {
    json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output})
}

fn chart_tool() -> aquaregia::Tool {
    tool("render_chart")
        .description("Renders a chart of values as a PNG")
        .raw_schema(json!({
            "type": "object",
            "properties": {"values": {"type": "array", "items": {"type": "number"}}},
            "required": ["values"]
        }))
        .execute_raw(|_| async {
            Ok(vec![
                ContentBlock::text("Rendered (PNG attached)."),
                ContentBlock::image("image/png", PNG),
            ])
        })
}

#[tokio::test]
async fn every_preset_runs_an_agent_loop_on_its_stream() {
    for preset in PRESETS {
        let server = MockServer::start().await;
        server.push(Reply::sse(stream(
            preset,
            &[
                json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                    "id": "call_chart", "type": "function",
                    "function": {"name": "render_chart", "arguments": ""}}]}),
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"values\":"}}]}),
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "[17,19]}"}}]}),
            ],
            "tool_calls",
            usage(100, 20),
        )));
        server.push(Reply::sse(stream(
            preset,
            &[json!({"content": "Charted"}), json!({"content": "."})],
            "stop",
            usage(150, 5),
        )));
        let (builder, model) =
            Client::builder_from_model_spec(&format!("{}:upstream-model", preset.id)).unwrap();
        let client = builder
            .base_url(&server.url)
            .api_key("test-key")
            .max_retries(0)
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap();
        assert_eq!(client.provider_id(), preset.id);
        let agent = client
            .agent(model)
            .tool(chart_tool())
            .max_output_tokens(512)
            .build()
            .unwrap();

        let mut events = agent.stream("Chart 17 and 19.");
        let mut started = Vec::new();
        let mut text = String::new();
        let mut output = None;
        while let Some(event) = events.next().await {
            match event.unwrap_or_else(|e| panic!("{}: {e}", preset.id)) {
                AgentEvent::ToolCallStart { name, .. } => started.push(name),
                AgentEvent::TextDelta(delta) => text.push_str(&delta),
                AgentEvent::Finish(out) => output = Some(out),
                _ => {}
            }
        }
        let output = output.unwrap_or_else(|| panic!("{}: no finish", preset.id));
        assert_eq!(started, ["render_chart"], "{}", preset.id);
        assert_eq!(text, "Charted.", "{}", preset.id);
        assert_eq!(output.stop_reason, StopReason::Finished, "{}", preset.id);
        assert_eq!(
            (output.usage.input_tokens, output.usage.output_tokens),
            (250, 25),
            "{}: usage of both steps",
            preset.id
        );

        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{}", preset.id);
        for request in &requests {
            assert_eq!(request.path, "/v1/chat/completions", "{}", preset.id);
            assert_eq!(
                request.headers["authorization"], "Bearer test-key",
                "{}",
                preset.id
            );
            let body = &request.body;
            assert_eq!(body["model"], "upstream-model", "{}", preset.id);
            assert_eq!(body["stream"], true, "{}", preset.id);
            assert_eq!(body[preset.max_tokens], 512, "{}", preset.id);
            let other = if preset.max_tokens == "max_tokens" {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            assert!(body.get(other).is_none(), "{}: {other} sent", preset.id);
            assert_eq!(
                body.get("stream_options").is_some(),
                preset.stream_options,
                "{}: stream_options",
                preset.id
            );
        }
        // The tool's result goes back under its call id, its image in a user message after.
        let messages = requests[1].body["messages"].as_array().unwrap();
        let tool_at = messages
            .iter()
            .position(|m| m["role"] == "tool")
            .unwrap_or_else(|| panic!("{}: no tool message", preset.id));
        assert_eq!(messages[tool_at]["tool_call_id"], "call_chart");
        assert_eq!(messages[tool_at]["content"], "Rendered (PNG attached).");
        let image = &messages[tool_at + 1];
        assert_eq!(image["role"], "user", "{}", preset.id);
        assert_eq!(
            image["content"][1]["image_url"]["url"],
            format!("data:image/png;base64,{PNG}"),
            "{}",
            preset.id
        );
        assert_eq!(
            messages[tool_at - 1]["tool_calls"][0]["function"]["arguments"],
            "{\"values\":[17,19]}"
        );
    }
}

#[test]
fn every_preset_has_its_documented_defaults() {
    for preset in PRESETS {
        let spec = format!("{}:some-model", preset.id);
        let (builder, model) = Client::builder_from_model_spec(&spec).unwrap();
        assert_eq!(model, "some-model");
        let client = builder.api_key("k").build().unwrap();
        assert_eq!(client.base_url(), preset.url, "{}", preset.id);
        assert_eq!(client.kind(), aquaregia::ProviderKind::OpenAiChat);

        let vars = Client::provider_key_vars();
        let (_, keys) = vars.iter().find(|(id, _)| *id == preset.id).unwrap();
        match preset.key_var {
            Some(var) => {
                assert_eq!(keys.first(), Some(&var), "{}", preset.id);
                if std::env::var_os(var).is_none() {
                    let (builder, _) = Client::builder_from_model_spec(&spec).unwrap();
                    match builder.build() {
                        Err(Error::MissingApiKey { env_var }) => assert_eq!(env_var, var),
                        other => panic!("{}: {other:?}", preset.id),
                    }
                }
            }
            // Local servers need no key.
            None => {
                let (builder, _) = Client::builder_from_model_spec(&spec).unwrap();
                assert!(builder.build().is_ok(), "{}", preset.id);
            }
        }
    }
}

/// DeepSeek's thinking mode: `reasoning_content` in the answer (whole and streamed) is
/// reasoning, not text, and goes back with the tool-calling turn (DeepSeek answers 400 when
/// a tool-calling turn of the conversation lost it).
#[tokio::test]
async fn deepseek_reasoning_is_decoded_and_sent_back() {
    let server = MockServer::start().await;
    server.push(Reply::json(json!({
        "id": "ds-1", "object": "chat.completion", "model": "deepseek-reasoner",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "",
            "reasoning_content": "I should chart the values first.",
            "tool_calls": [{"id": "call_00_chart", "type": "function", "index": 0,
                "function": {"name": "render_chart", "arguments": "{\"values\":[1,2]}"}}]}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52,
            "prompt_cache_hit_tokens": 32, "prompt_cache_miss_tokens": 8,
            "completion_tokens_details": {"reasoning_tokens": 7}}
    })));
    server.push(Reply::sse(
        [
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null,
                "reasoning_content": "The chart is"}}]}),
            json!({"choices": [{"index": 0, "delta": {"reasoning_content": " done."}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "Done."}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 60, "completion_tokens": 6, "total_tokens": 66,
                    "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 60}}),
        ]
        .iter()
        .map(|chunk| format!("data: {chunk}\n\n"))
        .collect::<String>()
            + "data: [DONE]\n\n",
    ));
    let client = Client::builder_from_model_spec("deepseek:deepseek-reasoner")
        .unwrap()
        .0
        .base_url(&server.url)
        .api_key("test-key")
        .max_retries(0)
        .build()
        .unwrap();
    let agent = client
        .agent("deepseek-reasoner")
        .tool(chart_tool())
        .build()
        .unwrap();
    let mut events = agent.stream("Chart 1 and 2.");
    let mut reasoning = String::new();
    let mut text = String::new();
    let mut output = None;
    while let Some(event) = events.next().await {
        match event.unwrap() {
            AgentEvent::ReasoningDelta(delta) => reasoning.push_str(&delta),
            AgentEvent::TextDelta(delta) => text.push_str(&delta),
            AgentEvent::Finish(out) => output = Some(out),
            _ => {}
        }
    }
    let output = output.unwrap();
    assert_eq!(text, "Done.");
    assert!(reasoning.ends_with("The chart is done."), "{reasoning:?}");
    assert_eq!(output.usage.cached_input_tokens, 32);
    assert_eq!(output.usage.reasoning_tokens, 7);
    let last = output.messages.last().unwrap();
    assert!(matches!(
        &last.content[0],
        ContentPart::Reasoning(r) if r.text == "The chart is done."
    ));

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(
        assistant["reasoning_content"],
        "I should chart the values first."
    );
    assert_eq!(assistant["tool_calls"][0]["id"], "call_00_chart");
}

/// Any other Chat Completions provider keeps reasoning to itself.
#[tokio::test]
async fn other_presets_do_not_send_reasoning_back() {
    let server = MockServer::start().await;
    server.push(Reply::json(json!({
        "id": "x-1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "reasoning_content": "Thinking.",
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "render_chart", "arguments": "{\"values\":[1]}"}}]}}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2}
    })));
    server.push(Reply::json(chat_text("Done.")));
    let client = Client::builder_from_model_spec("xai:grok")
        .unwrap()
        .0
        .base_url(&server.url)
        .api_key("test-key")
        .max_retries(0)
        .build()
        .unwrap();
    let output = client
        .agent("grok")
        .tool(chart_tool())
        .build()
        .unwrap()
        .run("Chart 1.")
        .await
        .unwrap();
    assert_eq!(output.text, "Done.");
    let body = &server.requests()[1].body;
    let assistant = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert!(assistant.get("reasoning_content").is_none(), "{assistant}");
}

/// Together AI lists its models as a bare array, not OpenAI's `{"data": [...]}`.
#[tokio::test]
async fn a_bare_model_list_is_read() {
    let server = MockServer::start().await;
    server.push(Reply::Raw {
        status: 200,
        body: json!([
            {"id": "meta-llama/Llama-3.3-70B-Instruct-Turbo", "object": "model", "type": "chat"},
            {"id": "Qwen/Qwen3-235B-A22B", "object": "model", "type": "chat"}
        ])
        .to_string(),
        content_type: "application/json",
    });
    // Not the mock's own `/v1/models`, so the scripted reply answers.
    let client = Client::builder_from_model_spec("together:any")
        .unwrap()
        .0
        .base_url(format!("{}/together", server.url))
        .api_key("test-key")
        .build()
        .unwrap();
    let models = client.list_models().await.unwrap();
    assert_eq!(
        models,
        [
            "meta-llama/Llama-3.3-70B-Instruct-Turbo",
            "Qwen/Qwen3-235B-A22B"
        ]
    );
    assert_eq!(server.requests()[0].path, "/v1/together/models");
}
