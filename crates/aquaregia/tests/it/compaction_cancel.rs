//! Cancelling a run while its summary call is in flight stops it promptly and hands back the
//! conversation unchanged.

use crate::common;

use std::time::Duration;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{CancellationToken, Message, StopReason};
use common::scripted_agent;

#[tokio::test]
async fn cancel_during_the_summary_call_keeps_the_conversation() {
    let model = ScriptedModel::new().reply(ScriptedReply::Hang);
    let token = CancellationToken::new();
    let agent = scripted_agent(&model)
        .context_window(2_000)
        .cancellation_token(token.clone())
        .build()
        .unwrap();
    let messages = vec![
        Message::user("first ".repeat(700)),
        Message::assistant("second ".repeat(600)),
        Message::user("And now?"),
    ];
    let run = tokio::spawn({
        let (agent, messages) = (agent.clone(), messages.clone());
        async move { agent.run(messages).await }
    });
    tokio::time::timeout(Duration::from_secs(10), model.wait_calls(1))
        .await
        .unwrap();
    let asked = &model.requests()[0];
    assert!(
        asked
            .instructions
            .as_deref()
            .is_some_and(|i| i.contains("You compact conversations"))
    );

    token.cancel();
    let output = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(output.stop_reason, StopReason::Cancelled);
    assert_eq!(output.messages, messages);
    assert_eq!(
        model.call_count(),
        1,
        "no model call after the summary call"
    );
}
