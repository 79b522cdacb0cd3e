//! A per-server output budget on `McpToolset`: that server's tools carry it, and their long
//! results reach the model cut to it.

use crate::common::chat_client;
use aquaregia::{OutputBudget, READ_TOOL_OUTPUT};
use aquaregia_mcp::McpToolset;
use aquaregia_test_support::mcp_servers::test_server::TestServer;
use aquaregia_test_support::mock_model::{
    MockServer, Reply, chat_text, chat_tool_calls, tool_names, tool_results,
};
use serde_json::json;

#[tokio::test]
async fn a_servers_budget_cuts_its_tools_results() {
    let (limited, free) = (TestServer::new(), TestServer::new());
    let budget = OutputBudget::bytes(2_048);
    let toolset = McpToolset::builder()
        .connect_with("limited", {
            let server = limited.clone();
            move |connector| async move { connector.transport(server.serve_duplex()).await }
        })
        .connect_with("free", {
            let server = free.clone();
            move |connector| async move { connector.transport(server.serve_duplex()).await }
        })
        .output_budget("limited", budget)
        .connect()
        .await
        .unwrap();
    let tools = toolset.tools().await.unwrap();
    let budget_of = |name: &str| {
        tools
            .iter()
            .find(|tool| tool.name() == name)
            .and_then(|tool| tool.output_budget())
    };
    assert_eq!(budget_of("limited__echo"), Some(budget));
    assert_eq!(budget_of("free__echo"), None);

    let long = "0123456789".repeat(2_000);
    let model = MockServer::start().await;
    model.push(Reply::json(chat_tool_calls(&[
        ("call_a", "limited__echo", json!({"text": long})),
        ("call_b", "free__echo", json!({"text": long})),
    ])));
    model.push(Reply::json(chat_text("ok")));
    // No agent budget: only the server's applies, and it brings `read_tool_output` along,
    // offered once something was cut.
    let agent = chat_client(&model)
        .agent("gpt-4o")
        .tools(tools)
        .build()
        .unwrap();
    agent.run("echo twice").await.unwrap();

    let bodies = model.bodies();
    assert!(!tool_names(&bodies[0]).contains(&READ_TOOL_OUTPUT.to_owned()));
    assert!(tool_names(&bodies[1]).contains(&READ_TOOL_OUTPUT.to_owned()));
    let results = tool_results(&bodies[1]);
    let (id, cut) = &results[0];
    assert_eq!(id, "call_a");
    assert!(cut.len() <= 2_048, "{} bytes", cut.len());
    assert!(cut.contains("read_tool_output {\"id\": \"call_a\""));
    assert_eq!(results[1], ("call_b".to_owned(), long));
    toolset.close().await;
}
