//! Your own agent over ACP in a few lines: a model, instructions and a Rust tool, plus every
//! MCP server the editor passes to the session.
//!
//! Point an editor at `cargo run -p aquaregia-acp --example custom_agent` (the model comes
//! from `AQUAREGIA_MODEL`, e.g. `openai-chat:gpt-4o-mini`, or the provider whose key is set).

use aquaregia::{Client, tool};
use aquaregia_acp::AcpServer;
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // stdout carries the protocol; logs go to stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let (client, model) = Client::from_env()?;
    let word_count = tool("word_count")
        .description("Counts the words in a text")
        .raw_schema(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"]
        }))
        .execute_raw(|args| async move {
            Ok(args["text"]
                .as_str()
                .unwrap_or_default()
                .split_whitespace()
                .count())
        });
    AcpServer::new(move |session| {
        client
            .agent(model.clone())
            .instructions(format!(
                "You are a concise assistant working in {}.",
                session.cwd.display()
            ))
            .tool(word_count.clone())
    })
    .serve_stdio()
    .await?;
    Ok(())
}
