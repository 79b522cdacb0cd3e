//! A request that cannot fit the context window even after compaction fails with a typed
//! error before anything is sent.

use crate::common;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{Error, Message};
use common::scripted_agent;

#[tokio::test]
async fn an_oversized_request_fails_before_it_is_sent() {
    let model = ScriptedModel::new().repeat_with(|| ScriptedReply::text("should not be asked"));
    let agent = scripted_agent(&model)
        .context_window(2_000)
        .build()
        .unwrap();
    // One message of ~5,000 tokens: nothing older to elide or summarise.
    let error = agent
        .run(Message::user("too long ".repeat(2_300)))
        .await
        .unwrap_err();
    let Error::ContextWindowExceeded {
        request_tokens: Some(request_tokens),
        limit,
        provider: None,
        ..
    } = error
    else {
        panic!("{error:?}");
    };
    assert_eq!(
        limit,
        Some(1_500),
        "the window minus a quarter reserved for output"
    );
    assert!(request_tokens > 5_000, "{request_tokens}");
    assert_eq!(model.call_count(), 0, "nothing was sent");
}
