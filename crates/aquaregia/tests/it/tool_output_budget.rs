//! A 2 MB tool result reaches the model as head + tail within the agent's output budget, and
//! a `read_tool_output` call returns the middle.

use crate::common;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{ModelRequest, OutputBudget, READ_TOOL_OUTPUT, ToolOutput, tool};
use common::{scripted_agent, tool_results};
use serde_json::json;

const BUDGET_TOKENS: u64 = 25_000;

/// The names of the tools a request offered.
fn tool_names(request: &ModelRequest) -> Vec<String> {
    request.tools.iter().map(|tool| tool.name.clone()).collect()
}

/// 2 MB of numbered 16-byte lines: any slice says where it comes from.
fn big_output() -> String {
    (0..131_072).map(|n| format!("line {n:010}\n")).collect()
}

#[tokio::test]
async fn big_result_is_cut_to_head_and_tail_and_the_middle_can_be_read() {
    let full = big_output();
    assert_eq!(full.len(), 2 << 20);
    let model = ScriptedModel::new().id("gpt-4o");
    model.push(ScriptedReply::tool_calls([("call_big", "dump", json!({}))]));
    // The middle: 4 KB from 1 MiB on.
    model.push(ScriptedReply::tool_calls([(
        "call_read",
        READ_TOOL_OUTPUT,
        json!({"id": "call_big", "offset": 1 << 20, "length": 4096}),
    )]));
    model.push(ScriptedReply::text("Read it."));

    let output_for_tool = full.clone();
    let dump = tool("dump")
        .description("Dumps a big log")
        .execute_raw(move |_| {
            let text = output_for_tool.clone();
            async move { Ok(text) }
        });
    let agent = scripted_agent(&model)
        .tool(dump)
        .tool_output_budget(OutputBudget::tokens(BUDGET_TOKENS))
        .build()
        .unwrap();
    let output = agent.run("Look at the log").await.unwrap();
    assert_eq!(output.text, "Read it.");
    // The caller still gets the whole output.
    assert_eq!(
        output.steps[0].tool_calls[0].result,
        Ok(ToolOutput::Text(full.clone()))
    );

    let bodies = model.requests();
    assert_eq!(bodies.len(), 3);
    // The built-in tool is offered once there is something to read.
    assert_eq!(tool_names(&bodies[0]), ["dump"]);
    assert_eq!(tool_names(&bodies[1]), ["dump", READ_TOOL_OUTPUT]);

    // Request 2: head + marker + tail, within the budget.
    let results = tool_results(&bodies[1]);
    assert_eq!(results.len(), 1);
    let (id, sent, _) = &results[0];
    assert_eq!(id, "call_big");
    assert!(
        sent.len() as u64 <= OutputBudget::tokens(BUDGET_TOKENS).max_bytes(),
        "{} bytes sent",
        sent.len()
    );
    assert!(
        sent.len() > 90_000,
        "the budget is used: {} bytes",
        sent.len()
    );
    let marker_at = sent.find("\n\n[... ").expect("a cut marker");
    let (head, rest) = sent.split_at(marker_at);
    assert!(full.starts_with(head), "the head is the output's start");
    let tail = &rest[rest.find(" ...]\n\n").expect("marker end") + " ...]\n\n".len()..];
    assert!(full.ends_with(tail), "the tail is the output's end");
    assert!(head.len() > 40_000 && tail.len() > 40_000);
    assert!(
        rest.contains("read_tool_output {\"id\": \"call_big\""),
        "{}",
        &rest[..300]
    );
    assert!(!sent.contains("line 0000065536"), "the middle is cut");

    // Request 3: the read returns the middle, byte for byte.
    let results = tool_results(&bodies[2]);
    let (id, read, _) = &results[1];
    assert_eq!(id, "call_read");
    let middle = &full[1 << 20..(1 << 20) + 4096];
    assert!(read.starts_with(middle), "{}", &read[..64]);
    assert!(read.starts_with("line 0000065536\n"));
    assert!(read.ends_with(&format!(
        "[bytes 1048576..1052672 of {}; more follows]",
        2 << 20
    )));
}
