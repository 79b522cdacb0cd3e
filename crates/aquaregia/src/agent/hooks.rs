//! Hooks: observe and steer an agent run.

use serde_json::Value;

use super::{AgentOutput, StepContext, StepResult};
use crate::message::ToolCall;
use crate::tool::{Tool, ToolExecError};

/// What to do with a tool call, decided by [`AgentHooks::on_tool_call_start`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCallDecision {
    /// Run the call as the model asked.
    Allow,
    /// Do not run it; the model is told the call was rejected, with this reason.
    Deny(String),
    /// Run it with these arguments instead.
    Rewrite(Value),
}

/// Callbacks around an agent run. Every method has a no-op default; implement the ones you need.
///
/// Hooks run inside the loop: a slow hook slows the run, and a pending hook is abandoned when
/// the run is cancelled.
///
/// ```
/// use aquaregia::{AgentHooks, Tool, ToolCall, ToolCallDecision};
///
/// struct NoDeletes;
///
/// #[aquaregia::async_trait]
/// impl AgentHooks for NoDeletes {
///     async fn on_tool_call_start(&self, call: &ToolCall, _tool: Option<&Tool>) -> ToolCallDecision {
///         if call.name.contains("delete") {
///             ToolCallDecision::Deny("deleting is not allowed here".into())
///         } else {
///             ToolCallDecision::Allow
///         }
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait AgentHooks: Send + Sync {
    /// Before each model call, after `prepare_step`.
    async fn on_step_start(&self, _ctx: &StepContext<'_>) {}

    /// Before each tool call runs (calls of one step may be in flight together). `tool` is
    /// `None` when the model named a tool that does not exist.
    async fn on_tool_call_start(&self, _call: &ToolCall, _tool: Option<&Tool>) -> ToolCallDecision {
        ToolCallDecision::Allow
    }

    /// After each tool call, with its result.
    async fn on_tool_call_finish(&self, _call: &ToolCall, _result: &Result<Value, ToolExecError>) {}

    /// After each step: the model call and its tool calls.
    async fn on_step_finish(&self, _step: &StepResult) {}

    /// Once, when the run ends with an output (also when cancelled).
    async fn on_finish(&self, _output: &AgentOutput) {}
}
