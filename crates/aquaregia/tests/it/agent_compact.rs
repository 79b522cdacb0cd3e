//! `Agent::compact` (what `/compact` runs): older tool results elided, everything before the
//! latest user turn summarised by the model, the latest turn kept.

use crate::common;

use aquaregia::test_utils::ScriptedModel;
use aquaregia::{ContentPart, Message, Role, ToolCall, ToolOutput, ToolResult};
use common::scripted_agent;
use serde_json::json;

fn tool_turn(id: &str, output: &str) -> [Message; 2] {
    [
        Message::new(
            Role::Assistant,
            vec![ContentPart::ToolCall(ToolCall {
                id: id.into(),
                name: "search".into(),
                arguments: json!({"q": id}),
            })],
        ),
        Message::new(
            Role::Tool,
            vec![ContentPart::ToolResult(ToolResult {
                call_id: id.into(),
                name: "search".into(),
                output: ToolOutput::Text(output.into()),
                is_error: false,
            })],
        ),
    ]
}

#[tokio::test]
async fn compact_summarises_all_but_the_latest_turn() {
    let model = ScriptedModel::new()
        .id("gpt-4o")
        .text("Ada searched twice and found the answer is 42.");
    let agent = scripted_agent(&model).build().unwrap();

    let mut messages = vec![Message::user("Find the answer.")];
    messages.extend(tool_turn("c1", &"result one ".repeat(200)));
    messages.extend(tool_turn("c2", &"result two ".repeat(200)));
    messages.push(Message::assistant("It is 42."));
    messages.push(Message::user("And why?"));

    let (compacted, report) = agent.compact(&messages).await.unwrap();
    assert_eq!(compacted.len(), 2);
    assert_eq!(compacted[0].role, Role::User);
    assert!(compacted[0].text().contains("the answer is 42"));
    assert_eq!(compacted[1], Message::user("And why?"));
    assert_eq!(report.summarized_messages, 6);
    assert_eq!(
        report.elided_tool_results, 1,
        "the older of the two results"
    );
    assert!(report.after_tokens < report.before_tokens / 4, "{report:?}");

    // The summary call saw the conversation, the latest results' text included.
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].model, "gpt-4o");
    assert!(
        requests[0]
            .instructions
            .as_deref()
            .is_some_and(|i| i.contains("You compact conversations"))
    );
    let prompt = requests[0].messages[0].text();
    assert!(prompt.contains("Find the answer.") && prompt.contains("result two"));
    assert!(
        !prompt.contains("And why?"),
        "the latest turn is kept, not summarised"
    );
}
