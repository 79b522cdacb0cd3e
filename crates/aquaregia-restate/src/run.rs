//! The data a durable run takes and gives back over Restate's ingress.

use aquaregia::{AgentOutput, StopReason, ToolCall, Usage};
use serde::{Deserialize, Serialize};

/// What starts a durable run: the body of the workflow's `run` handler.
///
/// ```
/// let request = aquaregia_restate::RunRequest::new("What is 2 + 2?");
/// assert_eq!(
///     serde_json::to_value(&request).unwrap(),
///     serde_json::json!({"prompt": "What is 2 + 2?"})
/// );
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRequest {
    /// The user's prompt.
    pub prompt: String,
}

impl RunRequest {
    /// A run of `prompt`.
    pub fn new(prompt: impl Into<String>) -> Self {
        Self {
            prompt: prompt.into(),
        }
    }
}

/// What a durable run ends with: the answer of the workflow's `run` handler.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The text of the last model answer.
    pub text: String,
    /// Why the run ended.
    pub stop_reason: StopReason,
    /// How many steps (model calls) the run made.
    pub steps: usize,
    /// Tokens used by all model calls of the run.
    pub usage: Usage,
}

impl From<&AgentOutput> for RunResult {
    fn from(output: &AgentOutput) -> Self {
        Self {
            text: output.text.clone(),
            stop_reason: output.stop_reason,
            steps: output.steps.len(),
            usage: output.usage,
        }
    }
}

/// The tool calls a paused run waits on: the answer of the workflow's `pending` handler. Sign
/// a decision on each ([`ApprovalKey::approve`](aquaregia::ApprovalKey::approve) or
/// [`deny`](aquaregia::ApprovalKey::deny)) and send it to the `approve` handler.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PendingApprovals {
    /// The step (from 0) whose calls wait.
    pub step: usize,
    /// The calls waiting for a decision, in the model's order; empty when none waits.
    pub calls: Vec<ToolCall>,
}
