//! What `prepare_step` sees and what it may change.

use std::sync::Arc;

use crate::message::Message;
use crate::model::{LanguageModel, ToolChoice};
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
    pub(crate) language_model: Option<Arc<dyn LanguageModel>>,
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

    /// Asks the agent's model for another model id in this step's request (the same
    /// provider and client; see [`language_model`](Self::language_model) for another model
    /// altogether).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Runs this step on another [`LanguageModel`], e.g. a cheap one for steps that only
    /// call tools. The request names that model's id (unless [`model`](Self::model) names
    /// another); the step's [`StepResult::model`](crate::StepResult::model), its `chat` span
    /// and its cost (the agent's [`PriceTable`](crate::PriceTable), else the model's own
    /// [`price`](LanguageModel::price)) are that model's, and so are the context window the
    /// request is fitted to and the summary call when it must be compacted. The model keeps its own per-run
    /// [`ModelState`](crate::ModelState) across the steps it runs. Nothing of it is stored
    /// in the [`AgentRun`](crate::AgentRun): a resumed run asks `prepare_step` again.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use aquaregia::test_utils::ScriptedModel;
    /// use aquaregia::{AgentBuilder, LanguageModel, StepOverrides};
    ///
    /// let cheap: Arc<dyn LanguageModel> = Arc::new(ScriptedModel::new().id("cheap").text("done"));
    /// let agent = AgentBuilder::new(Arc::new(ScriptedModel::new()))
    ///     .prepare_step(move |ctx| {
    ///         // Every step after the first goes to the cheap model.
    ///         let overrides = if ctx.step() > 0 {
    ///             StepOverrides::new().language_model(cheap.clone())
    ///         } else {
    ///             StepOverrides::new()
    ///         };
    ///         async move { Ok(overrides) }
    ///     })
    ///     .build()?;
    /// # let _ = agent;
    /// # Ok::<(), aquaregia::Error>(())
    /// ```
    pub fn language_model(mut self, model: Arc<dyn LanguageModel>) -> Self {
        self.language_model = Some(model);
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
