//! Anthropic requests carry `cache_control` breakpoints where configured (system prompt,
//! last tool, latest turn, moving forward every step) and nowhere otherwise; the cache reads
//! the mock reports show in `Usage`.

use crate::common;

use aquaregia::{PromptCaching, Tool, tool};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{fixture, fixture_json, provider_client};
use serde_json::{Value, json};

const SYSTEM: &str = "You are a concise weather assistant. Use the tools when they help.";

fn fixture_tools() -> Vec<Tool> {
    fixture_json("anthropic/request_tools.json")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            tool(t["name"].as_str().unwrap())
                .description(t["description"].as_str().unwrap())
                .raw_schema(t["input_schema"].clone())
                .execute_raw(|_| async { Ok(json!({"ok": true})) })
        })
        .collect()
}

/// Runs a two-step agent (the fixture's tool calls, then the same answer with 400 tokens
/// read from the cache) and returns the mock and the output.
async fn run(caching: PromptCaching) -> (MockServer, aquaregia::AgentOutput) {
    let first = fixture_json("anthropic/response_tool_use.json");
    let mut second = first.clone();
    second["usage"]["cache_read_input_tokens"] = json!(400);
    let server = MockServer::with_replies([Reply::json(first), Reply::json(second)]).await;
    let output = provider_client("anthropic", &server)
        .agent("claude-sonnet-4-5")
        .instructions(SYSTEM)
        .tools(fixture_tools())
        .max_steps(2)
        .prompt_caching(caching)
        .build()
        .unwrap()
        .run("What's the weather in Paris?")
        .await
        .unwrap();
    (server, output)
}

/// Every `cache_control` in `body`, as sorted JSON pointers.
fn breakpoints(body: &Value) -> Vec<String> {
    fn walk(value: &Value, path: &str, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    if key == "cache_control" {
                        assert_eq!(value, &json!({"type": "ephemeral"}));
                        out.push(path.to_owned());
                    } else {
                        walk(value, &format!("{path}/{key}"), out);
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(body, "", &mut out);
    // Key order depends on serde_json's `preserve_order` feature.
    out.sort();
    out
}

#[tokio::test]
async fn all_breakpoints_move_with_the_latest_turn() {
    let (server, output) = run(PromptCaching::breakpoints()).await;
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);

    // Step 1: the user's question is the latest turn, a plain string made a text block.
    assert_eq!(
        breakpoints(&bodies[0]),
        ["/messages/0/content/0", "/system/0", "/tools/1"]
    );
    assert_eq!(
        bodies[0]["system"],
        json!([{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        bodies[0]["messages"][0]["content"][0]["text"],
        "What's the weather in Paris?"
    );

    // Step 2: the breakpoint moved to the last tool result; the question is back to a string.
    assert_eq!(
        breakpoints(&bodies[1]),
        ["/messages/2/content/1", "/system/0", "/tools/1"]
    );
    assert_eq!(
        bodies[1]["messages"][0]["content"],
        "What's the weather in Paris?"
    );
    assert_eq!(
        bodies[1]["messages"][2]["content"][1]["type"],
        "tool_result"
    );
    assert!(breakpoints(&bodies[1]).len() <= 4, "Anthropic allows 4");

    // The cache read the mock reported.
    assert_eq!(output.steps[0].usage.cached_input_tokens, 0);
    assert_eq!(output.steps[1].usage.cached_input_tokens, 400);
    assert_eq!(output.steps[1].usage.input_tokens, 512 + 400);
}

#[tokio::test]
async fn only_configured_breakpoints_are_sent() {
    let (server, _) = run(PromptCaching::none().system(true)).await;
    for body in server.bodies() {
        assert_eq!(breakpoints(&body), ["/system/0"]);
    }
    let (server, _) = run(PromptCaching::none().tools(true).latest_turn(true)).await;
    let bodies = server.bodies();
    assert_eq!(
        breakpoints(&bodies[1]),
        ["/messages/2/content/1", "/tools/1"]
    );
    assert_eq!(bodies[1]["system"], SYSTEM);
}

#[tokio::test]
async fn nothing_is_marked_by_default() {
    let (server, _) = run(PromptCaching::default()).await;
    for body in server.bodies() {
        assert!(!body.to_string().contains("cache_control"), "{body}");
        assert_eq!(body["system"], SYSTEM);
    }
}

#[tokio::test]
async fn streamed_requests_are_marked_the_same() {
    let server = MockServer::with_replies([Reply::sse(fixture(
        "anthropic/stream_thinking_text_tool_use.sse",
    ))])
    .await;
    let agent = provider_client("anthropic", &server)
        .agent("claude-sonnet-4-5")
        .instructions(SYSTEM)
        .tools(fixture_tools())
        .max_steps(1)
        .prompt_caching(PromptCaching::breakpoints())
        .build()
        .unwrap();
    let mut events = agent.stream("What's the weather in Paris?");
    while let Some(event) = futures::StreamExt::next(&mut events).await {
        event.unwrap();
    }
    let body = &server.bodies()[0];
    assert_eq!(body["stream"], true);
    assert_eq!(
        breakpoints(body),
        ["/messages/0/content/0", "/system/0", "/tools/1"]
    );
}
