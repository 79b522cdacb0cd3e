//! Subagents: an [`Agent`] that another agent calls as a tool (see [`Agent::into_tool`]).
//!
//! The loop runs every tool call inside a [`CallScope`] (a task-local value, like the
//! [`ProgressReporter`](crate::ProgressReporter)): the call, where the parent's events go, the
//! parent's hooks and cancellation, and where a subagent's usage is added up. A subagent's
//! executor reads it to nest its events under the call, to put its tool calls before the
//! parent's hooks, to stop with the parent, and to count its tokens in the parent's totals.

use std::fmt;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio_util::sync::CancellationToken;

use super::hooks::HookChain;
use super::{Agent, AgentConfig, AgentEvent, AgentHooks, AgentInput, AgentOutput, StopReason};
use super::{StepContext, StepResult, ToolCallDecision, run};
use crate::error::Error;
use crate::message::ToolCall;
use crate::model::Usage;
use crate::pricing::Cost;
use crate::sync::lock;
use crate::tool::{
    ContentBlock, Tool, ToolAnnotations, ToolCheckpoint, ToolDescriptor, ToolExecError,
    ToolExecutor, ToolOutput,
};

tokio::task_local! {
    static CALL: CallScope;
}

/// How the parent run's hooks set up a subagent run that one of its tool calls starts (see
/// [`AgentHooks::on_subagent_start`]).
#[non_exhaustive]
#[derive(Clone, Default)]
pub struct SubAgentSetup {
    /// The hooks that decide the subagent's tool calls (their `on_tool_call_start` and
    /// `on_tool_call_finish`), after the subagent's own; `None`: the parent run's hooks.
    pub hooks: Option<Arc<dyn AgentHooks>>,
    /// A token that cancels this subagent run alone: its tool call then fails with
    /// [`ToolExecError::Cancelled`] and the parent run goes on.
    pub cancellation: Option<CancellationToken>,
}

impl fmt::Debug for SubAgentSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubAgentSetup")
            .field("hooks", &self.hooks.is_some())
            .field("cancellation", &self.cancellation)
            .finish()
    }
}

impl SubAgentSetup {
    /// The default: the parent's hooks, no token of its own.
    pub fn new() -> Self {
        Self::default()
    }

    /// The hooks that decide the subagent's tool calls.
    #[must_use]
    pub fn hooks(mut self, hooks: Arc<dyn AgentHooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// A token that cancels this subagent run alone.
    #[must_use]
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = Some(token);
        self
    }
}

/// What the tool calls of one run's step spent in subagents, added to the run's usage and cost
/// when the step's tool phase ends.
#[derive(Clone, Default)]
pub(super) struct NestedUsage(Arc<Mutex<NestedTotals>>);

#[derive(Default)]
struct NestedTotals {
    usage: Usage,
    cost: Cost,
    /// Whether a subagent run had no price for one of its calls.
    unpriced: bool,
    /// Whether anything was added since the last [`NestedUsage::take`].
    any: bool,
}

impl NestedUsage {
    fn add(&self, usage: Usage, cost: Option<Cost>) {
        let mut totals = lock(&self.0);
        totals.usage += usage;
        match cost {
            Some(cost) => totals.cost += cost,
            None => totals.unpriced = true,
        }
        totals.any = true;
    }

    /// What was added since the last call: the usage, and the cost (`None` when a subagent
    /// call was not priced); `None` when nothing was added.
    pub(super) fn take(&self) -> Option<(Usage, Option<Cost>)> {
        let mut totals = lock(&self.0);
        if !totals.any {
            return None;
        }
        let taken = std::mem::take(&mut *totals);
        Some((taken.usage, (!taken.unpriced).then_some(taken.cost)))
    }
}

/// What a tool call runs within (see the module docs).
#[derive(Clone)]
pub(super) struct CallScope(Arc<CallScopeInner>);

struct CallScopeInner {
    call: ToolCall,
    events: Option<UnboundedSender<AgentEvent>>,
    hooks: Option<Arc<dyn AgentHooks>>,
    cancel: CancellationToken,
    nested: NestedUsage,
}

impl CallScope {
    pub(super) fn new(
        call: &ToolCall,
        events: Option<&UnboundedSender<AgentEvent>>,
        hooks: Option<&Arc<dyn AgentHooks>>,
        cancel: &CancellationToken,
        nested: &NestedUsage,
    ) -> Self {
        Self(Arc::new(CallScopeInner {
            call: call.clone(),
            events: events.cloned(),
            hooks: hooks.cloned(),
            cancel: cancel.clone(),
            nested: nested.clone(),
        }))
    }

    /// Runs `future` (a tool's execution) within this scope.
    pub(super) async fn scope<F: Future>(self, future: F) -> F::Output {
        CALL.scope(self, future).await
    }

    fn current() -> Option<Self> {
        CALL.try_with(Clone::clone).ok()
    }
}

impl Agent {
    /// This agent as a tool another agent can call: a subagent. The model calls it with
    /// `{"task": "..."}`; the subagent runs the task as its prompt with its own model,
    /// instructions, tools, step limit and budgets, and its final answer is the tool's result
    /// (what the model sees; beside it, as structured data, `{"answer", "stop_reason",
    /// "steps", "usage"}`).
    ///
    /// Run by an agent loop, the subagent is part of the parent run:
    /// - its events arrive on the parent's stream as they happen, each wrapped in an
    ///   [`AgentEvent::SubAgent`] carrying the parent's call id;
    /// - its tool calls go through the parent run's hooks (`on_tool_call_start` and
    ///   `on_tool_call_finish`, after the subagent's own hooks; see
    ///   [`AgentHooks::on_subagent_start`]), so the parent's permission checks decide them;
    /// - its tokens (and cost) are added to the parent run's [`AgentOutput::usage`] (and
    ///   `cost`) when the parent's step ends its tool calls; the parent's
    ///   [`StepResult::usage`] stays the step's own model call, so nothing is counted twice
    ///   (the nested [`AgentEvent::Usage`] events are the subagent's, with its own totals);
    /// - cancelling the parent run stops it; its own token
    ///   ([`AgentBuilder::cancellation_token`](super::AgentBuilder::cancellation_token), or
    ///   one from [`SubAgentSetup::cancellation`]) stops it alone, and the parent sees the
    ///   call fail with [`ToolExecError::Cancelled`].
    ///
    /// A subagent whose run waits for a signed approval
    /// ([`AgentBuilder::require_approval`](super::AgentBuilder::require_approval)) fails its
    /// call: a subagent cannot be paused and resumed on its own.
    ///
    /// ```
    /// # fn demo(researcher: aquaregia::Agent, model: std::sync::Arc<dyn aquaregia::LanguageModel>) -> Result<(), aquaregia::Error> {
    /// let research = researcher.into_tool("research", "Researches a question and answers it");
    /// let lead = aquaregia::AgentBuilder::new(model).tool(research).build()?;
    /// # Ok(()) }
    /// ```
    pub fn into_tool(self, name: impl Into<String>, description: impl Into<String>) -> Tool {
        let name = name.into();
        let descriptor = ToolDescriptor {
            name: name.clone(),
            description: description.into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "task": {
                        "type": "string",
                        "description": "The task, with everything the subagent needs to know: it does not see this conversation."
                    }
                },
                "required": ["task"]
            }),
        };
        let annotations = ToolAnnotations::new().title(name.clone());
        Tool::with_parts(
            descriptor,
            annotations,
            Arc::new(SubAgentExecutor { agent: self, name }),
        )
    }
}

/// Runs a subagent for one tool call.
struct SubAgentExecutor {
    agent: Agent,
    name: String,
}

#[async_trait::async_trait]
impl ToolExecutor for SubAgentExecutor {
    async fn execute(&self, args: Value) -> Result<ToolOutput, ToolExecError> {
        let Some(task) = args.get("task").and_then(Value::as_str) else {
            return Err(ToolExecError::InvalidArguments(
                "`task` must be a string".into(),
            ));
        };
        let scope = CallScope::current();
        let mut config = AgentConfig::clone(&self.agent.inner);
        let own = config.cancellation.take();
        let setup = match &scope {
            Some(CallScope(inner)) => match &inner.hooks {
                Some(hooks) => hooks.on_subagent_start(&inner.call).await,
                None => SubAgentSetup::default(),
            },
            None => SubAgentSetup::default(),
        };
        let parent_hooks = setup
            .hooks
            .or_else(|| scope.as_ref().and_then(|s| s.0.hooks.clone()));
        if let Some(parent_hooks) = parent_hooks {
            let gate: Arc<dyn AgentHooks> = Arc::new(ParentGate(parent_hooks));
            config.hooks = Some(match config.hooks.take() {
                Some(own_hooks) => Arc::new(HookChain(vec![own_hooks, gate])),
                None => gate,
            });
        }
        let token = scope
            .as_ref()
            .map(|s| s.0.cancel.child_token())
            .unwrap_or_default();
        config.cancellation = Some(token.clone());
        let run = config.start(AgentInput::Text(task.to_owned()));
        let events = scope.as_ref().and_then(|s| s.0.events.clone());
        let id = scope
            .as_ref()
            .map(|s| s.0.call.id.clone())
            .unwrap_or_default();
        // The checkpoint of this call, if a durable runner set one, is not its calls'.
        let driving = ToolCheckpoint::hidden(drive(&config, run, events, id, self.name.clone()));
        tokio::pin!(driving);
        let alone = async {
            let own = async {
                match &own {
                    Some(token) => token.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            let setup = async {
                match &setup.cancellation {
                    Some(token) => token.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = own => {}
                () = setup => {}
            }
        };
        // Cancelled alone, the run still ends as runs do (its calls reported cancelled).
        let output = tokio::select! {
            biased;
            output = &mut driving => output,
            () = alone => {
                token.cancel();
                driving.await
            }
        };
        let output = output.map_err(ToolExecError::from)?;
        if let Some(scope) = &scope {
            scope.0.nested.add(output.usage, output.cost);
        }
        result(&output)
    }
}

/// Drives the subagent's run, its events (when the parent streams) wrapped in
/// [`AgentEvent::SubAgent`] and passed on as they come.
async fn drive(
    config: &AgentConfig,
    state: super::AgentRun,
    parent: Option<UnboundedSender<AgentEvent>>,
    id: String,
    name: String,
) -> Result<AgentOutput, Error> {
    let Some(parent) = parent else {
        return run::drive(config, state, None).await;
    };
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let driving = async move {
        let output = run::drive(config, state, Some(&sender)).await;
        drop(sender);
        output
    };
    let forwarding = async {
        while let Some(event) = receiver.recv().await {
            let _ = parent.send(AgentEvent::SubAgent {
                id: id.clone(),
                name: name.clone(),
                event: Box::new(event),
            });
        }
    };
    let (output, ()) = tokio::join!(driving, forwarding);
    output
}

/// The tool's result for the subagent's output.
fn result(output: &AgentOutput) -> Result<ToolOutput, ToolExecError> {
    let stop_reason = match output.stop_reason {
        StopReason::Cancelled => return Err(ToolExecError::Cancelled),
        StopReason::Finished => "finished",
        StopReason::MaxSteps => "max_steps",
        StopReason::Length => "length",
        StopReason::Refusal => "refusal",
    };
    let text = if output.text.is_empty() {
        format!("(the subagent ended without an answer: {stop_reason})")
    } else {
        output.text.clone()
    };
    Ok(ToolOutput::Structured {
        content: vec![ContentBlock::Text { text }],
        structured: json!({
            "answer": output.text,
            "stop_reason": stop_reason,
            "steps": output.steps.len(),
            "usage": output.usage,
        }),
    })
}

/// The parent run's hooks as a subagent sees them: they decide its tool calls; its steps and
/// its end are its own.
struct ParentGate(Arc<dyn AgentHooks>);

#[async_trait::async_trait]
impl AgentHooks for ParentGate {
    async fn on_step_start(&self, _ctx: &StepContext<'_>) {}

    async fn on_tool_call_start(&self, call: &ToolCall, tool: Option<&Tool>) -> ToolCallDecision {
        self.0.on_tool_call_start(call, tool).await
    }

    async fn on_tool_call_finish(
        &self,
        call: &ToolCall,
        result: &Result<ToolOutput, ToolExecError>,
    ) {
        self.0.on_tool_call_finish(call, result).await;
    }

    async fn on_step_finish(&self, _step: &StepResult) {}

    async fn on_finish(&self, _output: &AgentOutput) {}

    async fn on_subagent_start(&self, call: &ToolCall) -> SubAgentSetup {
        let setup = self.0.on_subagent_start(call).await;
        SubAgentSetup {
            hooks: Some(setup.hooks.unwrap_or_else(|| self.0.clone())),
            cancellation: setup.cancellation,
        }
    }
}
