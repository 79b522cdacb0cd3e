//! A `notifications/tools/list_changed` a server sends just before a tool's answer is counted
//! by the time the answer is handed over, so the agent's next step sees the new tool.
//!
//! rmcp runs its notification handler on a task of its own; counting there raced the answer
//! (seen as `run_agent::a_tool_added_mid_run_reaches_the_next_step` failing on a fresh clone).
//! The test body runs as a task on a one-worker runtime: the woken caller then runs before any
//! task spawned meanwhile, which is where the race was lost.

use aquaregia::Tool;
use aquaregia_mcp as mcp;
use serde_json::json;
use tokio::process::Command;

fn test_server() -> Command {
    let mut command = Command::new("python3");
    command
        .arg(aquaregia_test_support::deps::python_server(
            "mcp_test_server.py",
        ))
        .env("AQUAREGIA_TEST_LIST_CHANGED", "1");
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_change_sent_before_an_answer_is_counted_when_the_answer_arrives() {
    tokio::spawn(async {
        let connection = mcp::connect_stdio(test_server()).await.unwrap();
        let tools = connection.tools().await.unwrap();
        let greet: &Tool = tools.iter().find(|tool| tool.name() == "greet").unwrap();
        let before = *connection.tools_changed().borrow();

        greet.execute(json!({"name": "Ann"})).await.unwrap();

        assert_ne!(*connection.tools_changed().borrow(), before);
        let names: Vec<String> = connection
            .tools()
            .await
            .unwrap()
            .iter()
            .map(|tool| tool.name().to_owned())
            .collect();
        assert!(names.contains(&"later".to_owned()), "{names:?}");
        connection.close().await;
    })
    .await
    .unwrap();
}
