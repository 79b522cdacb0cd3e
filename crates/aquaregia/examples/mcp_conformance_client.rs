//! A small MCP client for the official conformance suite
//! (`conformance client --command "<this binary>" --scenario <name>`).
//!
//! The runner appends the server URL as the last argument and names the scenario in
//! `MCP_CONFORMANCE_SCENARIO`. Exit status 0 means the client did its part.

use std::process::ExitCode;

use aquaregia::mcp;
use serde_json::json;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .next_back()
        .ok_or("usage: mcp_conformance_client <server-url>")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let connection = mcp::connect_http(&url).await?;
    let tools = connection.tools().await?;
    eprintln!(
        "connected ({}), {} tools",
        connection.server_info().protocol_version,
        tools.len()
    );
    let call = |name: &str, args: serde_json::Value| {
        let tool = tools.iter().find(|t| t.name() == name).cloned();
        let name = name.to_owned();
        async move {
            let tool = tool.ok_or_else(|| format!("the server has no `{name}` tool"))?;
            let result = tool.execute(args).await.map_err(|e| e.to_string())?;
            eprintln!("{name} -> {result}");
            Ok::<_, String>(result)
        }
    };
    match scenario.as_str() {
        "tools_call" => {
            call("add_numbers", json!({"a": 5, "b": 3})).await?;
        }
        "sse-retry" => {
            call("test_reconnection", json!({})).await?;
        }
        _ => {}
    }
    connection.close().await;
    Ok(())
}
