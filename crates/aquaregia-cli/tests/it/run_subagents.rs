//! `aquaregia run --subagents`: the `task` subagent's tool calls shown indented under the
//! `task` call, on stderr; its events nested in `--output stream-json`.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply, tool_names, tool_results};
use common::{Scratch, cli, run, test_server_entry, use_mock};
use serde_json::{Value, json};

/// The parent hands a task over, the child greets, both answer.
async fn delegating_model() -> MockServer {
    MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_task", "task", json!({"task": "Greet Ann."}))]),
        Reply::tool_stream(&[("call_1", "greet", json!({"name": "Ann"}))]),
        Reply::text_stream(&["Greeted Ann."]),
        Reply::text_stream(&["Done."]),
    ])
    .await
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn the_subagents_calls_are_shown_indented_under_the_task_call() {
    let scratch = Scratch::new();
    scratch.config(&json!({"test": test_server_entry()}));
    let model = delegating_model().await;
    let mut command = cli(&scratch);
    command.args([
        "run",
        "--yes",
        "--subagents",
        "Greet Ann through a subagent.",
    ]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Done.\n");
    let lines: Vec<&str> = outcome.stderr.lines().collect();
    let nested = lines
        .iter()
        .position(|line| line.starts_with(r#"    ✓ greet(name: "Ann") ok in "#))
        .unwrap_or_else(|| panic!("the child's call, indented: {outcome:?}"));
    let parent = lines
        .iter()
        .position(|line| line.starts_with(r#"✓ task(task: "Greet Ann.") ok in "#))
        .unwrap_or_else(|| panic!("the task call: {outcome:?}"));
    assert!(nested < parent, "under the running task call: {outcome:?}");
    assert!(lines[parent].contains(": Greeted Ann."), "{outcome:?}");

    let requests = model.bodies();
    assert_eq!(requests.len(), 4);
    let mut offered = tool_names(&requests[0]);
    offered.sort();
    assert!(offered.contains(&"task".to_owned()), "{offered:?}");
    // The child has the tools, not itself, and sees only its task.
    let child_tools = tool_names(&requests[1]);
    assert!(child_tools.contains(&"greet".to_owned()), "{child_tools:?}");
    assert!(!child_tools.contains(&"task".to_owned()), "{child_tools:?}");
    assert_eq!(
        requests[1]["messages"].as_array().unwrap().last().unwrap()["content"],
        "Greet Ann."
    );
    assert_eq!(
        tool_results(&requests[3]),
        [("call_task".to_owned(), "Greeted Ann.".to_owned())]
    );
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn stream_json_nests_the_subagents_events_under_the_task_call() {
    let scratch = Scratch::new();
    scratch.config(&json!({"test": test_server_entry()}));
    let model = delegating_model().await;
    let mut command = cli(&scratch);
    command.args([
        "run",
        "--yes",
        "--subagents",
        "--output",
        "stream-json",
        "Greet Ann through a subagent.",
    ]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let events: Vec<Value> = outcome
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let kinds: Vec<String> = events
        .iter()
        .filter(|e| e["type"] != "text" && e["type"] != "step" && e["event"]["type"] != "step")
        .map(|e| match e["type"].as_str().unwrap() {
            "subagent" => format!(
                "{}> {}",
                e["id"].as_str().unwrap(),
                e["event"]["type"].as_str().unwrap()
            ),
            other => other.to_owned(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "tool_call",
            "call_task> tool_call",
            "call_task> tool_result",
            "call_task> text",
            "tool_result",
            "result"
        ],
        "{events:#?}"
    );
    let nested = events
        .iter()
        .find(|e| e["type"] == "subagent" && e["event"]["type"] == "tool_result")
        .unwrap();
    assert_eq!(nested["name"], "task");
    assert_eq!(nested["event"]["name"], "greet");
}
