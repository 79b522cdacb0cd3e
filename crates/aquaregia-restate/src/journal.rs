//! What one journaled step records: a model answer, or a tool call's result. Each is the
//! value of one `ctx.run` entry, so a replay hands back the recorded outcome instead of
//! calling the model or the tool again.

use aquaregia::{FinishReason, Message, ModelResponse, ToolExecError, ToolOutput, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A model answer as the journal keeps it ([`ModelResponse`] is not serde data itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordedResponse {
    message: Message,
    finish_reason: FinishReason,
    usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
}

impl From<ModelResponse> for RecordedResponse {
    fn from(response: ModelResponse) -> Self {
        Self {
            message: response.message,
            finish_reason: response.finish_reason,
            usage: response.usage,
            id: response.id,
            model: response.model,
        }
    }
}

impl From<RecordedResponse> for ModelResponse {
    fn from(recorded: RecordedResponse) -> Self {
        let mut response =
            ModelResponse::new(recorded.message, recorded.finish_reason).with_usage(recorded.usage);
        if let Some(id) = recorded.id {
            response = response.with_id(id);
        }
        if let Some(model) = recorded.model {
            response = response.with_model(model);
        }
        response
    }
}

/// A tool call's result as the journal keeps it: a failed call is recorded too (the model is
/// told about it), so it is not run again on replay either.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordedToolResult {
    pub(crate) result: Result<ToolOutput, ToolExecError>,
}

/// One journaled entry of a tool call: its result, or the handle on work the call started
/// (an MCP task) that a later attempt resumes instead of calling the tool again (see
/// [`aquaregia::ToolCheckpoint`]). A call that records a handle takes two or more entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum RecordedToolStep {
    /// The call ended.
    Finished(RecordedToolResult),
    /// The call started work it can be resumed on; the next entry goes on with it.
    Started {
        /// What the tool recorded.
        checkpoint: Value,
    },
}
