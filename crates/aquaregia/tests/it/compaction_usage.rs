//! The summarising call of a compaction reports its tokens: an `AgentEvent::Usage` marked as
//! compaction, the usage on `AgentEvent::Compacted`, the run's total, and the report that
//! `Agent::compact` returns.

use crate::common;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{AgentEvent, Message, Usage};
use common::{counts, scripted_agent};
use futures::StreamExt;

/// A text answer with its own token counts.
fn answer(text: &str, input_tokens: u64, output_tokens: u64) -> ScriptedReply {
    ScriptedReply::text(text).with_usage(Usage::new(input_tokens, output_tokens))
}

/// A conversation far over a 4,000-token window, with nothing to elide: it must be summarised.
fn long_conversation() -> Vec<Message> {
    vec![
        Message::user("Tell me everything."),
        Message::assistant("a long answer ".repeat(1_500)),
        Message::user("And now, briefly?"),
    ]
}

#[tokio::test]
async fn the_summary_call_is_reported_in_events_and_the_run_total() {
    let model = ScriptedModel::new()
        .reply(answer("The user asked for everything.", 300, 40))
        .reply(answer("Briefly: done.", 10, 5));
    let agent = scripted_agent(&model)
        .context_window(4_000)
        .max_output_tokens(500)
        .build()
        .unwrap();

    let mut stream = agent.stream(long_conversation());
    let mut usages = Vec::new();
    let mut compacted = Vec::new();
    let mut output = None;
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            AgentEvent::Usage {
                step,
                compaction,
                usage,
                total,
                ..
            } => usages.push((step, compaction, counts(&usage), counts(&total))),
            AgentEvent::Compacted {
                summarized_messages,
                usage,
                ..
            } => compacted.push((summarized_messages, counts(&usage))),
            AgentEvent::Finish(finished) => output = Some(finished),
            _ => {}
        }
    }
    let output = output.unwrap();
    assert_eq!(output.text, "Briefly: done.");
    assert_eq!(compacted, [(2, [300, 40, 0, 0, 0])]);
    assert_eq!(
        usages,
        [
            (0, true, [300, 40, 0, 0, 0], [300, 40, 0, 0, 0]),
            (0, false, [10, 5, 0, 0, 0], [310, 45, 0, 0, 0]),
        ]
    );
    assert_eq!(counts(&output.usage), [310, 45, 0, 0, 0]);
    assert_eq!(output.steps.len(), 1);
    assert_eq!(counts(&output.steps[0].usage), [10, 5, 0, 0, 0]);
    assert_eq!(model.call_count(), 2);
}

#[tokio::test]
async fn agent_compact_returns_the_summary_calls_usage() {
    let model = ScriptedModel::new().reply(answer("The user asked for everything.", 300, 40));
    let agent = scripted_agent(&model).build().unwrap();

    let (messages, report) = agent.compact(&long_conversation()).await.unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(report.summarized_messages, 2);
    assert_eq!(counts(&report.usage), [300, 40, 0, 0, 0]);
    assert_ne!(report.usage, Usage::default());
}
