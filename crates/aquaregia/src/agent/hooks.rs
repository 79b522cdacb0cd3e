//! Hooks: observe and steer an agent run.

use serde_json::Value;

use super::{AgentOutput, StepContext, StepResult, SubAgentSetup};
use crate::message::ToolCall;
use crate::tool::{Tool, ToolExecError, ToolOutput};

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
    async fn on_tool_call_finish(
        &self,
        _call: &ToolCall,
        _result: &Result<ToolOutput, ToolExecError>,
    ) {
    }

    /// After each step: the model call and its tool calls.
    async fn on_step_finish(&self, _step: &StepResult) {}

    /// Once, when the run ends with an output (also when cancelled).
    async fn on_finish(&self, _output: &AgentOutput) {}

    /// When `call`, a tool call of this run, starts a subagent (an agent made a tool with
    /// [`Agent::into_tool`](crate::Agent::into_tool)), before the subagent's first step: which
    /// hooks decide the subagent's tool calls and whether it has a token of its own (see
    /// [`SubAgentSetup`]). The default: these hooks decide them (`on_tool_call_start` and
    /// `on_tool_call_finish` are called with the subagent's calls), no token of its own.
    async fn on_subagent_start(&self, _call: &ToolCall) -> SubAgentSetup {
        SubAgentSetup::default()
    }
}

/// Several hooks run in the order they were added. The first denial wins; a rewrite is what
/// later hooks see and what runs.
pub(crate) struct HookChain(pub(crate) Vec<std::sync::Arc<dyn AgentHooks>>);

#[async_trait::async_trait]
impl AgentHooks for HookChain {
    async fn on_step_start(&self, ctx: &StepContext<'_>) {
        for hooks in &self.0 {
            hooks.on_step_start(ctx).await;
        }
    }

    async fn on_tool_call_start(&self, call: &ToolCall, tool: Option<&Tool>) -> ToolCallDecision {
        let mut rewritten: Option<ToolCall> = None;
        for hooks in &self.0 {
            let current = rewritten.as_ref().unwrap_or(call);
            match hooks.on_tool_call_start(current, tool).await {
                ToolCallDecision::Allow => {}
                ToolCallDecision::Deny(reason) => return ToolCallDecision::Deny(reason),
                ToolCallDecision::Rewrite(arguments) => {
                    rewritten = Some(ToolCall {
                        arguments,
                        ..current.clone()
                    });
                }
            }
        }
        match rewritten {
            Some(call) => ToolCallDecision::Rewrite(call.arguments),
            None => ToolCallDecision::Allow,
        }
    }

    async fn on_tool_call_finish(
        &self,
        call: &ToolCall,
        result: &Result<ToolOutput, ToolExecError>,
    ) {
        for hooks in &self.0 {
            hooks.on_tool_call_finish(call, result).await;
        }
    }

    async fn on_step_finish(&self, step: &StepResult) {
        for hooks in &self.0 {
            hooks.on_step_finish(step).await;
        }
    }

    async fn on_finish(&self, output: &AgentOutput) {
        for hooks in &self.0 {
            hooks.on_finish(output).await;
        }
    }

    /// Each hook's choice of hooks for the subagent (its own when it has none), chained in
    /// the same order; the first token given.
    async fn on_subagent_start(&self, call: &ToolCall) -> SubAgentSetup {
        let mut chain = Vec::with_capacity(self.0.len());
        let mut cancellation = None;
        for hooks in &self.0 {
            let setup = hooks.on_subagent_start(call).await;
            chain.push(setup.hooks.unwrap_or_else(|| hooks.clone()));
            cancellation = cancellation.or(setup.cancellation);
        }
        SubAgentSetup {
            hooks: Some(std::sync::Arc::new(HookChain(chain))),
            cancellation,
        }
    }
}
