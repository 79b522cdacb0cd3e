//! The agent's model in-process: [`Model`] wraps the SDK's
//! [`ScriptedModel`](aquaregia::test_utils::ScriptedModel) (no HTTP, nothing on the wire), for
//! the tests of the agent's own logic. The tests of what reaches a real provider's wire stay
//! on the loopback mock (`aquaregia_test_support::mock_model`, [`super::agent_for`]).

use std::sync::Arc;
use std::time::Duration;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{ContentPart, ModelRequest};
use aquaregia_acp::AcpServer;
use serde_json::Value;

/// The scripted model, its replies pushed in order (chainable) and the requests it got kept.
/// Its id is `mock-model`, as on the mock, so the usage updates name the same model.
#[derive(Clone)]
pub struct Model {
    scripted: ScriptedModel,
}

impl Default for Model {
    fn default() -> Self {
        Self::new()
    }
}

impl Model {
    /// An empty script.
    pub fn new() -> Self {
        Self {
            scripted: ScriptedModel::new().id("mock-model"),
        }
    }

    /// The scripted model itself (for settings such as its context window).
    pub fn scripted(&self) -> &ScriptedModel {
        &self.scripted
    }

    /// Sets the model's context window (clones made before keep theirs).
    #[must_use]
    pub fn context_window(self, tokens: u64) -> Self {
        Self {
            scripted: self.scripted.context_window(tokens),
        }
    }

    /// Adds a reply.
    pub fn push(&self, reply: ScriptedReply) -> &Self {
        self.scripted.push(reply);
        self
    }

    /// Adds a text answer.
    pub fn text(&self, text: &str) -> &Self {
        self.push(ScriptedReply::text(text))
    }

    /// Adds an answer calling one tool.
    pub fn tool_call(&self, id: &str, name: &str, arguments: Value) -> &Self {
        self.push(ScriptedReply::tool_call(id, name, arguments))
    }

    /// Adds an answer that never comes (until the turn is cancelled).
    pub fn hang(&self) -> &Self {
        self.push(ScriptedReply::Hang)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.scripted.requests()
    }

    /// How many requests arrived.
    pub fn request_count(&self) -> usize {
        self.scripted.call_count()
    }

    /// Waits (bounded) until `count` requests arrived.
    pub async fn wait_requests(&self, count: usize) {
        tokio::time::timeout(super::BOUND, self.scripted.wait_calls(count))
            .await
            .unwrap_or_else(|_| panic!("{count} model requests within the bound"));
    }

    /// An ACP agent on this model (every session, every turn), its servers given 20 s to start.
    pub fn agent(&self) -> AcpServer {
        AcpServer::from_model(Arc::new(self.scripted.clone()))
            .connector(aquaregia_mcp::Connector::new().timeout(Duration::from_secs(20)))
    }
}

/// The names of the tools `request` offered.
pub fn tool_names(request: &ModelRequest) -> Vec<String> {
    request.tools.iter().map(|tool| tool.name.clone()).collect()
}

/// The tool results `request` carries, in order, as `(call id, output text)`.
pub fn tool_results(request: &ModelRequest) -> Vec<(String, String)> {
    request
        .messages
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|part| match part {
            ContentPart::ToolResult(result) => {
                Some((result.call_id.clone(), result.output.to_text()))
            }
            _ => None,
        })
        .collect()
}

/// The output texts of the tool results `request` carries, in order.
pub fn tool_outputs(request: &ModelRequest) -> Vec<String> {
    tool_results(request)
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

/// The output text of the last tool result `request` carries.
pub fn last_tool_output(request: &ModelRequest) -> String {
    tool_outputs(request).pop().expect("a tool result")
}

/// The texts of `request`'s user messages, in order.
pub fn user_texts(request: &ModelRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .filter(|message| message.role == aquaregia::Role::User)
        .map(aquaregia::Message::text)
        .collect()
}

/// The whole conversation `request` carries, as JSON text (for `contains` checks).
pub fn transcript(request: &ModelRequest) -> String {
    serde_json::to_string(&request.messages).expect("messages serialize")
}
