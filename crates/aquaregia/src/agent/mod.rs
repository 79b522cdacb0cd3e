//! The agent loop: call the model, run the tools it asks for, repeat.

mod approval;
mod builder;
mod context;
mod hooks;
mod machine;
mod run;
mod steering;
mod step;
mod stepper;
mod subagent;
mod typed;

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::context::{CompactionReport, OutputBudget, ToolDeferral, ToolOutputStore};
use crate::error::Error;
use crate::message::{Message, ToolCall};
use crate::model::{FinishReason, LanguageModel, ToolChoice, Usage};
use crate::pricing::{Cost, PriceTable};
use crate::prompt_cache::PromptCaching;
use crate::structured::OutputSchema;
use crate::telemetry::Telemetry;
use crate::tool::{ToolExecError, ToolOutput, ToolRegistry};

pub use approval::{
    Approval, ApprovalDecision, ApprovalKey, MIN_APPROVAL_KEY_BYTES, PAUSED_RUN_METADATA_KEY,
};
pub use builder::AgentBuilder;
pub(crate) use builder::PrepareStepFn;
pub use hooks::{AgentHooks, ToolCallDecision};
pub use machine::{AGENT_RUN_FORMAT_VERSION, AgentRun, NextAction};
pub use steering::{Steering, SteeringId, SteeringMessage};
pub use step::{StepContext, StepOverrides};
pub use stepper::RunStepper;
pub use subagent::SubAgentSetup;
pub use typed::TypedOutput;

/// What a failing tool call does to the run.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ToolErrorPolicy {
    /// The error text goes back to the model as the tool's result, so it can recover.
    #[default]
    ReturnToModel,
    /// The run stops with [`Error::Tool`].
    FailFast,
}

/// A configured agent: a model, instructions, tools and loop settings. Cheap to clone.
///
/// Build one with [`Client::agent`](crate::Client::agent) or, on any [`LanguageModel`],
/// [`AgentBuilder::new`]; run it with [`Agent::run`] or [`Agent::stream`].
#[derive(Clone)]
pub struct Agent {
    inner: Arc<AgentConfig>,
}

#[derive(Clone)]
pub(crate) struct AgentConfig {
    pub(crate) language_model: Arc<dyn LanguageModel>,
    /// `language_model`'s id, what each step asks for unless `prepare_step` says otherwise.
    pub(crate) model: String,
    pub(crate) instructions: Option<String>,
    pub(crate) tools: Arc<ToolRegistry>,
    pub(crate) max_steps: usize,
    pub(crate) max_tool_concurrency: usize,
    pub(crate) tool_error_policy: ToolErrorPolicy,
    /// Tools (by name) whose calls wait for an [`Approval`].
    pub(crate) approval_required: Vec<String>,
    /// The key [`Approval`]s of those calls are checked with.
    pub(crate) approval_key: Option<ApprovalKey>,
    pub(crate) prepare_step: Option<Arc<PrepareStepFn>>,
    pub(crate) hooks: Option<Arc<dyn AgentHooks>>,
    pub(crate) cancellation: Option<CancellationToken>,
    /// Messages injected at tool boundaries.
    pub(crate) steering: Option<Steering>,
    pub(crate) temperature: Option<f32>,
    pub(crate) max_output_tokens: Option<u32>,
    pub(crate) tool_choice: ToolChoice,
    pub(crate) extra_body: Option<Map<String, Value>>,
    pub(crate) prices: Option<Arc<PriceTable>>,
    pub(crate) prompt_caching: PromptCaching,
    /// Set by [`Agent::run_typed`] for its runs only.
    pub(crate) output_schema: Option<OutputSchema>,
    pub(crate) output_budget: Option<OutputBudget>,
    pub(crate) output_store: Option<ToolOutputStore>,
    pub(crate) context_window: Option<u64>,
    pub(crate) deferral: ToolDeferral,
    pub(crate) telemetry: Telemetry,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.inner.model)
            .field(
                "tools",
                &self
                    .inner
                    .tools
                    .tools()
                    .iter()
                    .map(|t| t.name())
                    .collect::<Vec<_>>(),
            )
            .field("max_steps", &self.inner.max_steps)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// The agent's model id.
    pub fn model(&self) -> &str {
        &self.inner.model
    }

    /// The model the agent runs on.
    pub fn language_model(&self) -> &Arc<dyn LanguageModel> {
        &self.inner.language_model
    }

    /// The context window the agent fits `model`'s requests to, when it is known rather than
    /// assumed: the one set with [`AgentBuilder::context_window`](crate::AgentBuilder::context_window),
    /// else (for the agent's own model) the model's
    /// ([`LanguageModel::context_window`](crate::LanguageModel::context_window)), else the one
    /// [`known_context_window`](crate::known_context_window) knows for the name. `None`: the
    /// agent assumes [`DEFAULT_CONTEXT_WINDOW`](crate::DEFAULT_CONTEXT_WINDOW).
    pub fn context_window(&self, model: &str) -> Option<u64> {
        self.inner
            .context_window
            .or_else(|| {
                (model == self.inner.model)
                    .then(|| self.inner.language_model.context_window())
                    .flatten()
            })
            .or_else(|| crate::known_context_window(model))
    }

    /// This agent with `steering` as its queue of messages to inject into its runs (see
    /// [`Steering`]); the agent it was made from keeps its own.
    #[must_use]
    pub fn with_steering(&self, steering: Steering) -> Self {
        let mut config = (*self.inner).clone();
        config.steering = Some(steering);
        Self {
            inner: Arc::new(config),
        }
    }

    /// The queue of messages this agent injects into its runs, if it has one.
    pub fn steering(&self) -> Option<&Steering> {
        self.inner.steering.as_ref()
    }

    /// The agent's tools.
    pub fn tools(&self) -> &ToolRegistry {
        &self.inner.tools
    }

    /// Compacts a conversation now, whatever its size (what a `/compact` command does): older
    /// tool results are elided and everything before the latest user turn is summarised by
    /// the model, as the run does on its own when a request would not fit the window. Returns
    /// the compacted conversation, to continue with [`run`](Self::run), and what was done
    /// (with the summarising call's tokens in [`CompactionReport::usage`]).
    pub async fn compact(
        &self,
        messages: &[Message],
    ) -> Result<(Vec<Message>, CompactionReport), Error> {
        context::compact(&self.inner, messages).await
    }

    /// Runs to the end and returns the output.
    ///
    /// A cancelled run returns `Ok` with [`StopReason::Cancelled`].
    pub async fn run(&self, input: impl Into<AgentInput>) -> Result<AgentOutput, Error> {
        run::drive(&self.inner, self.inner.start(input.into()), None).await
    }

    /// Runs while streaming [`AgentEvent`]s; the last item is [`AgentEvent::Finish`] or an error.
    ///
    /// The stream drives the run: dropping it stops the run (and its tool calls).
    pub fn stream(&self, input: impl Into<AgentInput>) -> AgentStream {
        self.resume_stream(self.inner.start(input.into()))
    }

    /// A run of `input` that has not called the model yet: drive it with
    /// [`resume`](Self::resume), [`resume_stream`](Self::resume_stream) or step by step with
    /// [`stepper`](Self::stepper), or save it (it is serde data). `agent.resume(agent.start(x))`
    /// is `agent.run(x)`.
    pub fn start(&self, input: impl Into<AgentInput>) -> AgentRun {
        self.inner.start(input.into())
    }

    /// Runs a started or saved run (see [`AgentRun`]) to its end, like [`run`](Self::run).
    /// The run keeps its own step limit; everything else (model, tools, hooks, `prepare_step`,
    /// budgets) is this agent's. A run that already ended returns its output at once.
    pub async fn resume(&self, mut run: AgentRun) -> Result<AgentOutput, Error> {
        self.inner.recheck_approvals(&mut run);
        run::drive(&self.inner, run, None).await
    }

    /// [`resume`](Self::resume) while streaming [`AgentEvent`]s, like [`stream`](Self::stream).
    pub fn resume_stream(&self, mut run: AgentRun) -> AgentStream {
        self.inner.recheck_approvals(&mut run);
        let (sender, receiver) = mpsc::unbounded_channel();
        let config = self.inner.clone();
        let driver: BoxFuture<'static, Result<AgentOutput, Error>> =
            Box::pin(async move { run::drive(&config, run, Some(&sender)).await });
        AgentStream {
            driver: Some(driver),
            events: receiver,
        }
    }

    /// Drives `run` one action at a time: each model call and each tool call is one call of
    /// yours, with the run saveable between any two (see [`RunStepper`]).
    pub fn stepper(&self, mut run: AgentRun) -> RunStepper {
        self.inner.recheck_approvals(&mut run);
        RunStepper::new(self.clone(), run)
    }
}

impl AgentConfig {
    /// Derives again which calls of a loaded run wait for approval (see
    /// [`AgentBuilder::require_approval`]).
    fn recheck_approvals(&self, run: &mut AgentRun) {
        if self.approval_required.is_empty() {
            return;
        }
        let key = self.approval_key.as_ref();
        run.recheck_approvals(&self.approval_required, |approval, call| {
            key.is_some_and(|key| key.approves(approval, call))
        });
    }

    /// A run of `input` on this agent, before its first step.
    fn start(&self, input: AgentInput) -> AgentRun {
        let cost =
            (self.prices.is_some() || self.language_model.price().is_some()).then(Cost::default);
        AgentRun::new(input.into_messages(), self.max_steps, cost)
    }
}

/// The stream returned by [`Agent::stream`]. It runs the agent on the task that polls it.
#[must_use = "the run only makes progress while the stream is polled"]
pub struct AgentStream {
    driver: Option<BoxFuture<'static, Result<AgentOutput, Error>>>,
    events: mpsc::UnboundedReceiver<AgentEvent>,
}

impl fmt::Debug for AgentStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentStream")
            .field("running", &self.driver.is_some())
            .finish()
    }
}

impl Stream for AgentStream {
    type Item = Result<AgentEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // Events are only sent while the driver is being polled here, so checking the queue
        // before and after each driver poll never misses one.
        if let Ok(event) = self.events.try_recv() {
            return Poll::Ready(Some(Ok(event)));
        }
        let Some(driver) = self.driver.as_mut() else {
            return Poll::Ready(None);
        };
        let outcome = driver.as_mut().poll(cx);
        if let Ok(event) = self.events.try_recv() {
            if let Poll::Ready(outcome) = outcome {
                // Deliver the queued events first; the outcome follows as a final event.
                self.driver = Some(Box::pin(std::future::ready(outcome)));
            }
            return Poll::Ready(Some(Ok(event)));
        }
        match outcome {
            Poll::Pending => Poll::Pending,
            Poll::Ready(outcome) => {
                self.driver = None;
                Poll::Ready(Some(outcome.map(AgentEvent::Finish)))
            }
        }
    }
}

/// What to run an agent on: a prompt, or a whole conversation to continue.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentInput {
    /// One user message.
    Text(String),
    /// A conversation (e.g. a previous [`AgentOutput::messages`] plus a new user message).
    Messages(Vec<Message>),
}

impl AgentInput {
    fn into_messages(self) -> Vec<Message> {
        match self {
            Self::Text(text) => vec![Message::user(text)],
            Self::Messages(messages) => messages,
        }
    }
}

impl From<&str> for AgentInput {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<String> for AgentInput {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&String> for AgentInput {
    fn from(text: &String) -> Self {
        Self::Text(text.clone())
    }
}

impl From<Vec<Message>> for AgentInput {
    fn from(messages: Vec<Message>) -> Self {
        Self::Messages(messages)
    }
}

impl From<Message> for AgentInput {
    fn from(message: Message) -> Self {
        Self::Messages(vec![message])
    }
}

/// Why a run ended.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered without asking for more tool calls.
    Finished,
    /// The run reached `max_steps` while the model still wanted tools.
    MaxSteps,
    /// The model hit its output token limit.
    Length,
    /// The model refused, or a content filter stopped it.
    Refusal,
    /// The run was cancelled.
    Cancelled,
}

/// One tool call and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallOutcome {
    /// The call as the model made it.
    pub call: ToolCall,
    /// The result, or why it failed.
    pub result: Result<ToolOutput, ToolExecError>,
}

/// One model call and the tool calls it led to.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// The step number, from 0.
    pub index: usize,
    /// The model used.
    pub model: String,
    /// The text of the model's answer.
    pub text: String,
    /// The model's reasoning text, if it showed any.
    pub reasoning: String,
    /// The tool calls, in the model's order, with their results.
    pub tool_calls: Vec<ToolCallOutcome>,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// Tokens used by this step.
    pub usage: Usage,
    /// What this step cost, when the agent has a [`PriceTable`] with a price for its model.
    pub cost: Option<Cost>,
}

/// The result of a run.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOutput {
    /// The text of the last model answer.
    pub text: String,
    /// Every step, in order.
    pub steps: Vec<StepResult>,
    /// Tokens used by all model calls: every step's, compaction summaries', and those of the
    /// subagents its tool calls ran ([`Agent::into_tool`]).
    pub usage: Usage,
    /// What all model calls cost (compaction summaries and subagents included), when the
    /// agent has a [`PriceTable`] pricing every call's model.
    pub cost: Option<Cost>,
    /// The whole conversation, input included; pass it (plus a new message) to continue.
    pub messages: Vec<Message>,
    /// Why the run ended.
    pub stop_reason: StopReason,
}

/// Progress of a streamed run.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// More answer text.
    TextDelta(String),
    /// More reasoning text.
    ReasoningDelta(String),
    /// A tool call is about to run (hooks may still deny or rewrite it).
    ToolCallStart {
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments the model gave.
        arguments: Value,
    },
    /// A tool call finished.
    ToolCallFinish {
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
        /// What it returned, or why it failed.
        result: Result<ToolOutput, ToolExecError>,
    },
    /// A model call answered: its token usage, and the run's so far. Sent after every model
    /// call, before its tool calls run, and after the summarising call of a compaction
    /// (`compaction: true`).
    Usage {
        /// The step number, from 0 (for a compaction: the step it made room for).
        step: usize,
        /// Whether this was the summarising call of a compaction rather than the step's own
        /// model call; its tokens count in `total` but in no [`StepResult`].
        compaction: bool,
        /// Tokens used by this model call.
        usage: Usage,
        /// Tokens used by the run so far, this call included.
        total: Usage,
        /// What this call cost, when the agent's [`PriceTable`] prices its model.
        cost: Option<Cost>,
        /// What the run cost so far, when every call so far was priced.
        total_cost: Option<Cost>,
    },
    /// The conversation was compacted before a model call so the request fits the context
    /// window (see [`AgentBuilder::context_window`]).
    Compacted {
        /// The estimated request tokens before.
        before_tokens: u64,
        /// The estimated request tokens after.
        after_tokens: u64,
        /// How many older tool results were replaced by a short marker.
        elided_tool_results: usize,
        /// How many older messages were replaced by a model-written summary.
        summarized_messages: usize,
        /// Tokens used by the summarising model call (zero when nothing was summarised).
        usage: Usage,
    },
    /// A running tool call reported progress (MCP `notifications/progress`, or a tool using
    /// [`ProgressReporter`](crate::ProgressReporter)).
    ToolProgress {
        /// The call id.
        id: String,
        /// The progress so far.
        progress: f64,
        /// The total, when known.
        total: Option<f64>,
        /// What is happening.
        message: Option<String>,
    },
    /// A message sent with [`Steering`] joined the conversation at a tool boundary, before
    /// step `step`'s model call: the model sees it in that request.
    Steered {
        /// The id [`Steering::send`] gave it.
        id: SteeringId,
        /// The step whose request carries it first, from 0.
        step: usize,
        /// The user message.
        message: Message,
    },
    /// A step finished.
    StepFinish(StepResult),
    /// An event of a subagent's run (an agent made a tool with [`Agent::into_tool`]), sent
    /// as it happens, nested under the parent's tool call that runs the subagent (between
    /// that call's [`ToolCallStart`](Self::ToolCallStart) and
    /// [`ToolCallFinish`](Self::ToolCallFinish)). A subagent's subagent nests one level more.
    SubAgent {
        /// The parent's tool call id.
        id: String,
        /// The subagent tool's name.
        name: String,
        /// The subagent's event (never [`Finish`](Self::Finish): its result is the call's).
        event: Box<AgentEvent>,
    },
    /// The run finished; always the last event of a successful stream.
    Finish(AgentOutput),
}
