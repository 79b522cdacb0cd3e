//! `notifications/progress` of an MCP tool call: they reach the agent as
//! `AgentEvent::ToolProgress` for that call, and each one restarts the call's inactivity timer.

use std::time::Duration;

use crate::common::chat_client;
use aquaregia::{AgentEvent, ToolExecError};
use aquaregia_mcp as mcp;
use aquaregia_test_support::mcp_servers::progress_server::ProgressServer;
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text, chat_tool_calls};
use futures::StreamExt;
use serde_json::json;

#[tokio::test]
async fn progress_of_a_tool_call_reaches_the_agent_events() {
    let model = MockServer::start().await;
    model.push(Reply::json(chat_tool_calls(&[(
        "call_7",
        "work",
        json!({"steps": 3, "delay_ms": 10}),
    )])));
    model.push(Reply::json(chat_text("worked")));
    let connection = mcp::connect(ProgressServer::serve_duplex()).await.unwrap();
    let agent = chat_client(&model)
        .agent("m")
        .tools(connection.tools().await.unwrap())
        .build()
        .unwrap();
    let events: Vec<AgentEvent> = tokio::time::timeout(
        Duration::from_secs(20),
        agent.stream("work").map(|event| event.unwrap()).collect(),
    )
    .await
    .expect("the run finished");

    let progress: Vec<(String, f64, Option<f64>, Option<String>)> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolProgress {
                id,
                progress,
                total,
                message,
            } => Some((id.clone(), *progress, *total, message.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        progress,
        (1..=3)
            .map(|step| (
                "call_7".to_owned(),
                f64::from(step),
                Some(3.0),
                Some(format!("step {step} of 3"))
            ))
            .collect::<Vec<_>>()
    );
    // Between the call's start and its finish.
    let position = |wanted: fn(&AgentEvent) -> bool| events.iter().position(wanted).unwrap();
    let start = position(|e| matches!(e, AgentEvent::ToolCallStart { .. }));
    let first = position(|e| matches!(e, AgentEvent::ToolProgress { .. }));
    let finish = position(|e| matches!(e, AgentEvent::ToolCallFinish { .. }));
    assert!(start < first && first < finish, "{events:?}");
    connection.close().await;
}

#[tokio::test]
async fn progress_restarts_the_call_timeout() {
    let connection = mcp::connect(ProgressServer::serve_duplex())
        .await
        .unwrap()
        .with_call_timeout(Duration::from_millis(800));
    let tools = connection.tools().await.unwrap();
    let tool = |name: &str| tools.iter().find(|t| t.name() == name).unwrap().clone();

    // 8 x 200 ms: twice the timeout in all, but never 800 ms without progress.
    let worked = tool("work")
        .execute(json!({"steps": 8, "delay_ms": 200}))
        .await
        .expect("progress kept the call alive");
    assert_eq!(worked.to_string(), "done");

    // The same time without progress is a timeout.
    let silent = tool("silent").execute(json!({"delay_ms": 1600})).await;
    assert!(matches!(silent, Err(ToolExecError::Timeout)), "{silent:?}");
    connection.close().await;
}
