//! An agent with two Rust tools: one typed, one over raw JSON.
//!
//! `cargo run -p aquaregia --example tools -- "What is 17 * 23, and what time is it in UTC?"`
#![allow(clippy::print_stdout)]

mod support;

use aquaregia::tool;
use serde::Deserialize;
use serde_json::json;

/// Arguments of the `multiply` tool.
#[derive(Deserialize, schemars::JsonSchema)]
struct Multiply {
    /// First factor
    a: f64,
    /// Second factor
    b: f64,
}

#[tokio::main]
async fn main() {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "What is 17 * 23, and what time is it in UTC?".to_owned());
    let (client, model) = support::model().unwrap_or_else(|e| support::exit_with(&e));

    let multiply = tool("multiply")
        .description("Multiplies two numbers")
        .input::<Multiply>()
        .execute(|m: Multiply| async move { Ok(m.a * m.b) });
    let clock = tool("utc_now")
        .description("The current time as seconds since the Unix epoch, in UTC")
        .raw_schema(json!({"type": "object", "properties": {}}))
        .execute_raw(|_| async {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_err(|e| e.to_string())?;
            Ok(json!({"unix_seconds": now.as_secs()}))
        });

    let agent = client
        .agent(model)
        .instructions("Use the tools for arithmetic and time. Answer briefly.")
        .tools(vec![multiply, clock])
        .build()
        .unwrap_or_else(|e| support::exit_with(&e));
    match agent.run(prompt).await {
        Ok(output) => {
            for step in &output.steps {
                for outcome in &step.tool_calls {
                    eprintln!(
                        "[tool] {}({}) -> {:?}",
                        outcome.call.name, outcome.call.arguments, outcome.result
                    );
                }
            }
            println!("{}", output.text);
        }
        Err(error) => support::exit_with(&error),
    }
}
