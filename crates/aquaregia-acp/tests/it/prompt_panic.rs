//! A prompt that panics (here: a tool of a custom agent) is answered with an error and
//! releases its session, so the next prompt runs instead of "a prompt is already running".

use crate::support;

use std::time::Duration;

use std::sync::Arc;

use aquaregia::{AgentBuilder, ToolAnnotations, tool};
use aquaregia_acp::AcpServer;
use serde_json::json;
use support::model::Model;
use support::raw::RawClient;

#[tokio::test]
async fn a_panicking_prompt_is_answered_and_releases_its_session() {
    let model = Model::new();
    let scripted: Arc<dyn aquaregia::LanguageModel> = Arc::new(model.scripted().clone());
    let server = AcpServer::new(move |_session| {
        // Read-only, so the default mode runs it without asking for permission.
        let boom = tool("boom")
            .annotations(ToolAnnotations::new().read_only(true))
            .execute_raw(|_| async {
                if true {
                    panic!("the tool blew up");
                }
                Ok("unreachable")
            });
        AgentBuilder::new(scripted.clone()).tool(boom).max_steps(4)
    });
    let acp = RawClient::connect(server);
    acp.initialize().await;
    let session = acp.new_session("/tmp", json!([])).await;

    model.tool_call("call-1", "boom", json!({}));
    let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]});
    let first = tokio::time::timeout(
        Duration::from_secs(30),
        acp.request("session/prompt", prompt.clone()),
    )
    .await
    .expect("the panicked prompt is answered");
    assert!(
        first["error"].to_string().contains("the tool blew up"),
        "an error that says what happened: {first}"
    );

    model.text("fine again");
    let second = tokio::time::timeout(
        Duration::from_secs(30),
        acp.request("session/prompt", prompt),
    )
    .await
    .expect("the second prompt is answered");
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
}
