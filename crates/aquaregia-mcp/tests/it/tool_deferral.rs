//! 2,000 MCP tools: requests carry fewer than 128 tools, the model finds one with
//! `search_tools` and calls it.

use std::sync::Arc;

use crate::common::chat_client;
use aquaregia::SEARCH_TOOLS;
use aquaregia_mcp::McpToolset;
use aquaregia_test_support::mock_model::{
    MockServer, Reply, chat_text, chat_tool_calls, tool_names, tool_results,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

const TOOLS: usize = 2_000;
const TOPICS: [&str; 8] = [
    "files", "mail", "calendar", "billing", "crm", "tickets", "deploy", "metrics",
];
const WEATHER: &str = "get_weather_forecast";

/// Serves 2,000 tools; one of them, `get_weather_forecast`, is about the weather.
#[derive(Clone)]
struct ManyTools;

impl ServerHandler for ManyTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = Arc::new(
            json!({"type": "object", "properties": {"city": {"type": "string"}}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        let tools = (0..TOOLS)
            .map(|n| {
                if n == 1_234 {
                    return McpTool::new(
                        WEATHER,
                        "Weather forecast for a city: temperature and rain",
                        schema.clone(),
                    );
                }
                let topic = TOPICS[n % TOPICS.len()];
                McpTool::new(
                    format!("{topic}_op_{n:04}"),
                    format!("Operation {n} of the {topic} service"),
                    schema.clone(),
                )
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let city = request
            .arguments
            .as_ref()
            .and_then(|args| args.get("city"))
            .and_then(Value::as_str)
            .unwrap_or("nowhere")
            .to_owned();
        let text = format!("{} says: sunny in {city}", request.name);
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

fn many_tools_pipe() -> tokio::io::DuplexStream {
    let (client, server) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(running) = ManyTools.serve(server).await {
            let _ = running.waiting().await;
        }
    });
    client
}

#[tokio::test]
async fn two_thousand_tools_are_deferred_and_a_found_one_is_called() {
    let toolset = McpToolset::builder()
        .connect_with("many", |connector| async move {
            connector.transport(many_tools_pipe()).await
        })
        .connect()
        .await
        .unwrap();
    let tools = toolset.tools().await.unwrap();
    assert_eq!(tools.len(), TOOLS);

    let model = MockServer::start().await;
    model.push(Reply::json(chat_tool_calls(&[(
        "call_search",
        SEARCH_TOOLS,
        json!({"query": "weather forecast"}),
    )])));
    model.push(Reply::json(chat_tool_calls(&[(
        "call_weather",
        WEATHER,
        json!({"city": "Tokyo"}),
    )])));
    model.push(Reply::json(chat_text("Sunny in Tokyo.")));
    let agent = chat_client(&model)
        .agent("gpt-4o")
        .tools(tools)
        .build()
        .unwrap();
    let output = agent.run("Will it rain in Tokyo?").await.unwrap();
    assert_eq!(output.text, "Sunny in Tokyo.");

    let bodies = model.bodies();
    assert_eq!(bodies.len(), 3);
    for (n, body) in bodies.iter().enumerate() {
        let names = tool_names(body);
        assert!(
            names.len() < 128,
            "request {n} carries {} tools",
            names.len()
        );
        assert!(names.contains(&SEARCH_TOOLS.to_owned()), "request {n}");
    }
    assert!(!tool_names(&bodies[0]).contains(&WEATHER.to_owned()));

    // The search found the tool, best first...
    let results = tool_results(&bodies[1]);
    let found: Value = serde_json::from_str(&results[0].1).unwrap();
    assert_eq!(found["tools"][0]["name"], WEATHER);
    assert_eq!(
        found["tools"][0]["description"],
        "Weather forecast for a city: temperature and rain"
    );
    // ... the next request offers it, after the tools the first one had, in the same order ...
    let (first, second) = (tool_names(&bodies[0]), tool_names(&bodies[1]));
    assert!(second.contains(&WEATHER.to_owned()));
    assert_eq!(second[..first.len()], first[..], "tool order is stable");
    let third = tool_names(&bodies[2]);
    assert_eq!(third, second, "nothing new found, same tool list");
    // ... and the MCP server ran the call.
    let results = tool_results(&bodies[2]);
    assert_eq!(
        results.last().unwrap(),
        &(
            "call_weather".to_owned(),
            format!("{WEATHER} says: sunny in Tokyo")
        )
    );
    toolset.close().await;
}
