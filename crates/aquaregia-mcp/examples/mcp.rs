//! Connects to an MCP server over stdio, lists its tools and runs an agent with them.
//!
//! `cargo run -p aquaregia-mcp --example mcp -- "Add 2 and 40 with the tools."`
//!
//! The server defaults to the reference server `npx -y @modelcontextprotocol/server-everything`;
//! set `MCP_SERVER` to another command line to use another.
#![allow(clippy::print_stdout)]

mod support;

use aquaregia_mcp as mcp;
use tokio::process::Command;

#[tokio::main]
async fn main() {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "Use the get-sum tool to add 2 and 40.".to_owned());
    let server = std::env::var("MCP_SERVER")
        .unwrap_or_else(|_| "npx -y @modelcontextprotocol/server-everything@2026.8.31".to_owned());
    let mut words = server.split_whitespace();
    let Some(program) = words.next() else {
        eprintln!("error: MCP_SERVER is empty");
        std::process::exit(1);
    };
    let mut command = Command::new(program);
    command.args(words);

    let connection = match mcp::connect_stdio(command).await {
        Ok(connection) => connection,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(1);
        }
    };
    let tools = match connection.tools().await {
        Ok(tools) => tools,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(1);
        }
    };
    println!("{} tools from `{}`:", tools.len(), connection.name());
    for tool in &tools {
        let description = tool.descriptor().description.lines().next().unwrap_or("");
        println!("  {:<32} {description}", tool.name());
    }

    let (client, model) = support::model().unwrap_or_else(|e| support::exit_with(&e));
    let agent = client
        .agent(model)
        .tools(tools)
        .build()
        .unwrap_or_else(|e| support::exit_with(&e));
    match agent.run(prompt).await {
        Ok(output) => println!("\n{}", output.text),
        Err(error) => support::exit_with(&error),
    }
    connection.close().await;
}
