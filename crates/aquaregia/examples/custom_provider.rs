//! A model provider written outside aquaregia: implement [`LanguageModel`] and run an
//! [`Agent`](aquaregia::Agent) on it, with tools, exactly as on the built-in providers.
//!
//! The "model" here is a tiny rule-based one, so the example runs offline: asked to add two
//! numbers, it calls the `add` tool, then answers with the tool's result. A real provider does
//! the same with an HTTP call in `generate` (and, if it can, a real stream in `stream`; the
//! default one streams the whole answer at once).
//!
//! `cargo run -p aquaregia --example custom_provider -- "What is 2.5 + 4?"`
#![allow(clippy::print_stdout)]

use std::sync::Arc;

use aquaregia::{
    AgentBuilder, ContentPart, Error, FinishReason, LanguageModel, Message, ModelRequest,
    ModelResponse, ModelState, Role, ToolCall, Usage, async_trait, tool,
};
use serde_json::{Value, json};

/// Adds the two numbers of "What is A + B?" with the `add` tool, then says the result.
#[derive(Debug)]
struct Arithmetic;

/// What this model keeps across the calls of one run ([`ModelState`]): how many calls it made.
#[derive(Default)]
struct Calls(u32);

#[async_trait]
impl LanguageModel for Arithmetic {
    fn model_id(&self) -> &str {
        "arithmetic-1"
    }

    fn provider_name(&self) -> &str {
        "example"
    }

    fn context_window(&self) -> Option<u64> {
        Some(4_096)
    }

    async fn generate(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelResponse, Error> {
        let mut calls = state.take::<Calls>().unwrap_or_default();
        calls.0 += 1;
        let call_number = calls.0;
        state.put(calls);

        let last = request
            .messages
            .last()
            .ok_or_else(|| Error::InvalidRequest("no messages".into()))?;
        let message = match last.role {
            // A tool answered: say what it returned.
            Role::Tool => {
                let result = last.content.iter().find_map(|part| match part {
                    ContentPart::ToolResult(result) => Some(result.output.to_text()),
                    _ => None,
                });
                Message::assistant(format!(
                    "The sum is {} (call {call_number} of this run).",
                    result.unwrap_or_default()
                ))
            }
            // A question: ask the tool when it has two numbers in it.
            _ => match numbers(&last.text()) {
                Some((a, b)) if request.tools.iter().any(|t| t.name == "add") => Message::new(
                    Role::Assistant,
                    vec![ContentPart::ToolCall(ToolCall {
                        id: format!("call_{call_number}"),
                        name: "add".into(),
                        arguments: json!({"a": a, "b": b}),
                    })],
                ),
                _ => Message::assistant("Ask me to add two numbers."),
            },
        };
        let finish = if message.tool_calls().next().is_some() {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        };
        Ok(ModelResponse::new(message, finish)
            .with_usage(Usage::new(12, 8))
            .with_model(self.model_id()))
    }
}

/// The first two numbers in `text`.
fn numbers(text: &str) -> Option<(f64, f64)> {
    let mut found = text
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|word| word.parse::<f64>().ok());
    Some((found.next()?, found.next()?))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let question = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "What is 2.5 + 4?".to_owned());
    let add = tool("add")
        .description("Adds two numbers")
        .raw_schema(json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"]
        }))
        .execute_raw(|args: Value| async move {
            Ok(args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0))
        });
    let agent = AgentBuilder::new(Arc::new(Arithmetic)).tool(add).build()?;
    let output = agent.run(question).await?;
    println!("{}", output.text);
    println!(
        "({} steps, {} tokens)",
        output.steps.len(),
        output.usage.total_tokens()
    );
    Ok(())
}
