//! Cancelling a run while its summary call is in flight stops it promptly and hands back the
//! conversation unchanged.

use crate::common;

use std::time::Duration;

use aquaregia::{CancellationToken, Message, StopReason};
use aquaregia_test_support::mock_model::{MockServer, Reply, content_text};
use common::chat_client;

#[tokio::test]
async fn cancel_during_the_summary_call_keeps_the_conversation() {
    let server = MockServer::start().await;
    server.push(Reply::Hang);
    let token = CancellationToken::new();
    let agent = chat_client(&server)
        .agent("mock-model")
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
    tokio::time::timeout(Duration::from_secs(10), server.wait_requests(1))
        .await
        .unwrap();
    let asked = &server.bodies()[0];
    assert!(content_text(&asked["messages"][0]).contains("You compact conversations"));

    token.cancel();
    let output = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(output.stop_reason, StopReason::Cancelled);
    assert_eq!(output.messages, messages);
    assert_eq!(
        server.request_count(),
        1,
        "no model call after the summary call"
    );
}
