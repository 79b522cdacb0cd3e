//! Streams a model's answer to a prompt.
//!
//! `cargo run -p aquaregia --example chat -- "Why is the sky blue?"`
#![allow(clippy::print_stdout)]

mod support;

use std::io::Write;

use aquaregia::AgentEvent;
use futures::StreamExt;

#[tokio::main]
async fn main() {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "Say hello in three languages.".to_owned());
    let (client, model) = support::model().unwrap_or_else(|e| support::exit_with(&e));
    let agent = client
        .agent(model)
        .instructions("You are concise.")
        .build()
        .unwrap_or_else(|e| support::exit_with(&e));

    let mut events = agent.stream(prompt);
    while let Some(event) = events.next().await {
        match event {
            Ok(AgentEvent::TextDelta(text)) => {
                print!("{text}");
                let _ = std::io::stdout().flush();
            }
            Ok(AgentEvent::Finish(output)) => {
                println!();
                eprintln!(
                    "[{:?}, {} input + {} output tokens]",
                    output.stop_reason, output.usage.input_tokens, output.usage.output_tokens
                );
            }
            Ok(_) => {}
            Err(error) => support::exit_with(&error),
        }
    }
}
