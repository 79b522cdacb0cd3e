//! What `prepare_step` sees and what it may change.

use crate::message::Message;
use crate::model::ToolChoice;
use crate::tool::Tool;

use super::StepResult;

/// The state of a run just before a model call.
#[derive(Debug)]
pub struct StepContext<'a> {
    pub(crate) step: usize,
    pub(crate) model: &'a str,
    pub(crate) messages: &'a [Message],
    pub(crate) steps: &'a [StepResult],
    pub(crate) tools: &'a [Tool],
}

impl<'a> StepContext<'a> {
    /// The step number, from 0.
    pub fn step(&self) -> usize {
        self.step
    }

    /// The model this step uses.
    pub fn model(&self) -> &'a str {
        self.model
    }

    /// The conversation so far (input messages plus every earlier step).
    pub fn messages(&self) -> &'a [Message] {
        self.messages
    }

    /// The steps already finished.
    pub fn steps(&self) -> &'a [StepResult] {
        self.steps
    }

    /// The tools available to this step.
    pub fn tools(&self) -> &'a [Tool] {
        self.tools
    }
}

/// Per-step changes returned by `prepare_step`. Unset fields keep the agent's settings.
///
/// ```
/// use aquaregia::{StepOverrides, ToolChoice};
/// let overrides = StepOverrides::new().active_tools(["search"]).tool_choice(ToolChoice::Required);
/// # let _ = overrides;
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct StepOverrides {
    pub(crate) tools: Option<Vec<Tool>>,
    pub(crate) active_tools: Option<Vec<String>>,
    pub(crate) model: Option<String>,
    pub(crate) instructions: Option<String>,
    pub(crate) messages: Option<Vec<Message>>,
    pub(crate) tool_choice: Option<ToolChoice>,
}

impl StepOverrides {
    /// No changes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the tool set for this step (validated like the agent's tools). Returning a
    /// fresh list each step is how an MCP server's changed tools reach a running agent.
    pub fn tools(mut self, tools: Vec<Tool>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// Offers only these tools (by name) to this step's model call.
    pub fn active_tools<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.active_tools = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Uses another model for this step.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Uses other instructions for this step.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Sends these messages instead of the conversation for this step's model call (e.g. a
    /// compacted history). The model's answer and tool results are still appended to the
    /// run's conversation.
    pub fn messages(mut self, messages: Vec<Message>) -> Self {
        self.messages = Some(messages);
        self
    }

    /// Sets the tool choice for this step.
    pub fn tool_choice(mut self, tool_choice: ToolChoice) -> Self {
        self.tool_choice = Some(tool_choice);
        self
    }
}
