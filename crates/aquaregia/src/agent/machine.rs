//! [`AgentRun`]: the loop's state as data, and the pure part of its progress.
//!
//! The split between this machine and its drivers ([`Agent::run`](super::Agent::run),
//! [`Agent::stream`](super::Agent::stream), [`RunStepper`](super::RunStepper)):
//!
//! - **The machine** (no I/O, no settings beyond the step limit it was started with): the
//!   conversation, the finished steps, usage and cost so far, which step comes next, the tool
//!   calls of the current step and their results, and every decision taken from a model answer
//!   or from tool results: whether the run ends (and why), which calls run (a call repeated in
//!   one answer runs once; a call cut off by the output limit does not run), the order of the
//!   results in the conversation, and a second cut-off answer in a row ending the run; which
//!   calls wait for an approval, and what a checked approval or denial does to them (the
//!   signature and the binding to the exact call are checked in `approval.rs`, also without
//!   I/O).
//! - **The drivers**: everything that needs the agent's settings or does I/O: `prepare_step`,
//!   which tools a request carries (deferral, `read_tool_output`), compaction before a model
//!   call, the model call itself with its per-run request cache ([`ModelState`](crate::ModelState),
//!   rebuilt empty after a resume), hooks, running tools (concurrency, progress, cancellation),
//!   cutting tool results to their budgets, pricing, telemetry spans and streamed events.
//!   None of these is saved: a resumed run asks `prepare_step` and the hooks again from the
//!   next step on, as a continued conversation would. Saving a paused run in a
//!   `SessionStore` is the caller's step (`AgentRun::save_paused`), never the loop's.

use serde::{Deserialize, Serialize};

use super::{StepResult, StopReason, ToolCallOutcome};
use crate::message::{ContentPart, Message, Role, ToolCall, ToolResult};
use crate::model::{FinishReason, Usage};
use crate::pricing::Cost;
use crate::tool::{ToolExecError, ToolOutput};

/// The format version an [`AgentRun`] is saved with; loading another one fails.
pub const AGENT_RUN_FORMAT_VERSION: u32 = 1;

/// What the model is told about a call its answer was cut off in (the output token limit).
pub(super) const CUT_OFF_CALL: &str = "the answer was cut off by the output token limit while \
    writing this call, so it was not run; call the tool again with complete arguments";

/// An agent run as data: the conversation, the finished steps, usage and cost so far, and
/// where the run is (before a model call, in the middle of a step's tool calls, or done).
///
/// Serialize it (serde, e.g. JSON) at any point between two steps, or between two tool calls
/// of one step, and load it later, in another process, to continue with
/// [`Agent::resume`](super::Agent::resume) or step by step with
/// [`Agent::stepper`](super::Agent::stepper). Saved runs carry a format version
/// ([`AGENT_RUN_FORMAT_VERSION`]); loading a run of another version, or one whose parts do not
/// fit together, fails with a serde error.
///
/// ```
/// # fn demo(agent: aquaregia::Agent) -> Result<(), serde_json::Error> {
/// let run = agent.start("What is the weather in Paris?");
/// let saved = serde_json::to_string(&run)?;
/// let loaded: aquaregia::AgentRun = serde_json::from_str(&saved)?;
/// assert_eq!(loaded, run);
/// assert_eq!(loaded.next_action(), aquaregia::NextAction::CallModel { step: 0 });
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SavedRun")]
pub struct AgentRun {
    pub(super) format_version: u32,
    pub(super) max_steps: usize,
    pub(super) messages: Vec<Message>,
    pub(super) steps: Vec<StepResult>,
    pub(super) usage: Usage,
    pub(super) cost: Option<Cost>,
    /// Whether the last step's answer was cut off by the output limit inside a tool call.
    pub(super) cut_off_call: bool,
    /// Deferred tools the model found or called (see [`ToolDeferral`](crate::ToolDeferral)),
    /// in the order found; saved when a step ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) loaded_tools: Vec<String>,
    pub(super) phase: Phase,
}

/// Where a run is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub(super) enum Phase {
    /// The next step's model call is due.
    Model,
    /// The current step's tool calls are running.
    Tools(Box<ToolPhase>),
    /// The run ended.
    Done {
        /// Why.
        stop_reason: StopReason,
    },
}

/// A step between its model answer and the end of its tool calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct ToolPhase {
    /// The step so far (its `tool_calls` are filled when the phase ends).
    pub(super) step: StepResult,
    /// The answer's calls, in its order.
    pub(super) calls: Vec<PendingCall>,
    /// Whether the answer was cut off by the output limit inside its last call.
    pub(super) cut_off: bool,
}

/// One call of the current step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct PendingCall {
    pub(super) call: ToolCall,
    /// The earlier call of the same answer with the same name and arguments, whose result
    /// this one gets instead of running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) same_as: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) result: Option<Result<ToolOutput, ToolExecError>>,
    /// Whether the call waits for an [`Approval`](super::Approval) before it may run. Not
    /// trusted when loaded: drivers derive it again from the agent's settings and the
    /// approval kept below (see `AgentRun::recheck_approvals`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) awaiting_approval: bool,
    /// The approval that let this call run, checked again whenever the run is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) approval: Option<super::Approval>,
}

impl PendingCall {
    /// Whether this call still needs a result (by running, or by a decision).
    pub(super) fn to_run(&self) -> bool {
        self.same_as.is_none() && self.result.is_none()
    }

    /// Whether this call may run now.
    pub(super) fn ready(&self) -> bool {
        self.to_run() && !self.awaiting_approval
    }
}

/// What a run needs next, from [`AgentRun::next_action`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum NextAction {
    /// Call the model for step `step` (from 0): [`RunStepper::model_request`](super::RunStepper::model_request)
    /// builds the request.
    CallModel {
        /// The step number, from 0.
        step: usize,
    },
    /// Run these tool calls of step `step`, the ones without a result yet, in the model's
    /// order, and report each result with [`RunStepper::tool_finished`](super::RunStepper::tool_finished).
    RunTools {
        /// The step number, from 0.
        step: usize,
        /// The calls still to run.
        calls: Vec<ToolCall>,
    },
    /// These tool calls of step `step` wait for a decision (the agent requires approval of
    /// their tools, [`AgentBuilder::require_approval`](super::AgentBuilder::require_approval)):
    /// save the run, and apply each signed [`Approval`](super::Approval) with
    /// [`RunStepper::approve`](super::RunStepper::approve), in this process or another.
    AwaitApproval {
        /// The step number, from 0.
        step: usize,
        /// The calls waiting.
        calls: Vec<ToolCall>,
    },
    /// The run ended; [`RunStepper::finish`](super::RunStepper::finish) gives its output.
    Done(StopReason),
}

impl AgentRun {
    /// A run of `messages` that has not called the model yet.
    pub(super) fn new(messages: Vec<Message>, max_steps: usize, cost: Option<Cost>) -> Self {
        let phase = if max_steps == 0 {
            Phase::Done {
                stop_reason: StopReason::MaxSteps,
            }
        } else {
            Phase::Model
        };
        Self {
            format_version: AGENT_RUN_FORMAT_VERSION,
            max_steps,
            messages,
            steps: Vec::new(),
            usage: Usage::default(),
            cost,
            cut_off_call: false,
            loaded_tools: Vec::new(),
            phase,
        }
    }

    /// What the run needs next.
    pub fn next_action(&self) -> NextAction {
        match &self.phase {
            Phase::Model => NextAction::CallModel {
                step: self.steps.len(),
            },
            Phase::Tools(tools) => {
                let calls = |wanted: fn(&PendingCall) -> bool| -> Vec<ToolCall> {
                    tools
                        .calls
                        .iter()
                        .filter(|pending| wanted(pending))
                        .map(|pending| pending.call.clone())
                        .collect()
                };
                let ready = calls(PendingCall::ready);
                if ready.is_empty() && tools.calls.iter().any(|p| p.awaiting_approval) {
                    NextAction::AwaitApproval {
                        step: tools.step.index,
                        calls: calls(|pending| pending.to_run() && pending.awaiting_approval),
                    }
                } else {
                    NextAction::RunTools {
                        step: tools.step.index,
                        calls: ready,
                    }
                }
            }
            Phase::Done { stop_reason } => NextAction::Done(*stop_reason),
        }
    }

    /// The conversation so far, input included. In the middle of a step's tool calls it ends
    /// with the model's answer; the results are appended together when the last call ends.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The finished steps, in order.
    pub fn steps(&self) -> &[StepResult] {
        &self.steps
    }

    /// The number of the current step (from 0): the one whose tool calls are running, else the
    /// next one to call the model.
    pub fn step(&self) -> usize {
        match &self.phase {
            Phase::Tools(tools) => tools.step.index,
            _ => self.steps.len(),
        }
    }

    /// The most steps (model calls) this run makes, from the agent it was started on.
    pub fn max_steps(&self) -> usize {
        self.max_steps
    }

    /// Tokens used by all model calls so far (compaction summaries included).
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// What the run cost so far, when every call was priced.
    pub fn cost(&self) -> Option<Cost> {
        self.cost
    }

    /// Why the run ended, once it has.
    pub fn stop_reason(&self) -> Option<StopReason> {
        match &self.phase {
            Phase::Done { stop_reason } => Some(*stop_reason),
            _ => None,
        }
    }

    /// The current step's tool calls with the results they have so far (`None`: still to
    /// run), in the model's order; empty outside a step's tool calls. A call repeated in one
    /// answer shows the result of its first occurrence.
    pub fn tool_calls(&self) -> Vec<(&ToolCall, Option<&Result<ToolOutput, ToolExecError>>)> {
        let Phase::Tools(tools) = &self.phase else {
            return Vec::new();
        };
        tools
            .calls
            .iter()
            .map(|pending| {
                let result = pending
                    .same_as
                    .and_then(|original| tools.calls.get(original))
                    .unwrap_or(pending)
                    .result
                    .as_ref();
                (&pending.call, result)
            })
            .collect()
    }

    /// The text of the last model answer.
    pub(super) fn last_text(&self) -> String {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(Message::text)
            .unwrap_or_default()
    }

    /// Whether a steering message may join the conversation now: between steps (or before
    /// the first), never inside a step's tool calls or after the run ended.
    pub(super) fn at_boundary(&self) -> bool {
        matches!(self.phase, Phase::Model)
    }

    /// Appends a steering message; only [`at_boundary`](Self::at_boundary).
    pub(super) fn inject(&mut self, message: Message) {
        if self.at_boundary() {
            self.messages.push(message);
        }
    }

    /// Ends the run.
    pub(super) fn stop(&mut self, stop_reason: StopReason) {
        self.phase = Phase::Done { stop_reason };
    }

    /// Takes a model answer for step `steps.len()`: appends it to the conversation and either
    /// ends the step (no tool calls) or enters its tool phase.
    pub(super) fn model_responded(
        &mut self,
        model: String,
        message: Message,
        finish_reason: FinishReason,
        usage: Usage,
        cost: Option<Cost>,
        needs_approval: impl Fn(&ToolCall) -> bool,
    ) {
        let index = self.steps.len();
        let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
        let stop = match finish_reason {
            FinishReason::Length => StopReason::Length,
            FinishReason::ContentFilter => StopReason::Refusal,
            _ => StopReason::Finished,
        };
        let cut_off = finish_reason == FinishReason::Length;
        let step = StepResult {
            index,
            model,
            text: message.text(),
            reasoning: reasoning_text(&message),
            tool_calls: Vec::with_capacity(calls.len()),
            finish_reason,
            usage,
            cost,
        };
        self.messages.push(message);
        if calls.is_empty() {
            self.end_step(step, Some(stop));
            return;
        }
        // An answer cut off by the output limit stopped inside its last call, whose arguments
        // may be incomplete (llama.cpp sends `{`) or cut yet valid JSON: it is not run, and
        // the model is told so and asked again. Twice in a row, the run ends: the limit is too
        // small for the call.
        let last = calls.len() - 1;
        let mut pending: Vec<PendingCall> = Vec::with_capacity(calls.len());
        for (position, call) in calls.into_iter().enumerate() {
            if cut_off && position == last {
                pending.push(PendingCall {
                    call,
                    same_as: None,
                    result: Some(Err(ToolExecError::InvalidArguments(
                        CUT_OFF_CALL.to_owned(),
                    ))),
                    awaiting_approval: false,
                    approval: None,
                });
                continue;
            }
            // Small models repeat themselves: an identical call gets the earlier one's result.
            let same_as = pending.iter().position(|earlier| {
                earlier.call.name == call.name && earlier.call.arguments == call.arguments
            });
            let awaiting_approval = same_as.is_none() && needs_approval(&call);
            pending.push(PendingCall {
                call,
                same_as,
                result: None,
                awaiting_approval,
                approval: None,
            });
        }
        self.phase = Phase::Tools(Box::new(ToolPhase {
            step,
            calls: pending,
            cut_off,
        }));
    }

    /// The current step's tool phase.
    pub(super) fn tool_phase(&self) -> Option<&ToolPhase> {
        match &self.phase {
            Phase::Tools(tools) => Some(tools),
            _ => None,
        }
    }

    /// Records the result of the call at `position`; `false` when there is no such call
    /// waiting for one.
    pub(super) fn set_result(
        &mut self,
        position: usize,
        result: Result<ToolOutput, ToolExecError>,
    ) -> bool {
        let Phase::Tools(tools) = &mut self.phase else {
            return false;
        };
        match tools.calls.get_mut(position) {
            Some(pending) if pending.ready() => {
                pending.result = Some(result);
                true
            }
            _ => false,
        }
    }

    /// The position of the call `id` that may run now.
    pub(super) fn position_to_run(&self, id: &str) -> Option<usize> {
        self.tool_phase()?
            .calls
            .iter()
            .position(|pending| pending.ready() && pending.call.id == id)
    }

    /// The position of the call `id` waiting for approval.
    pub(super) fn position_awaiting(&self, id: &str) -> Option<usize> {
        self.tool_phase()?.calls.iter().position(|pending| {
            pending.to_run() && pending.awaiting_approval && pending.call.id == id
        })
    }

    /// Applies a (checked) approval to the waiting call at `position`.
    pub(super) fn decide(&mut self, position: usize, approval: &super::Approval) {
        let Phase::Tools(tools) = &mut self.phase else {
            return;
        };
        let Some(pending) = tools.calls.get_mut(position) else {
            return;
        };
        pending.awaiting_approval = false;
        match &approval.decision {
            super::ApprovalDecision::Denied { reason } => {
                pending.result = Some(Err(ToolExecError::Denied(reason.clone())));
            }
            _ => pending.approval = Some(approval.clone()),
        }
    }

    /// Derives again which calls of the current step wait for approval: a call still to run
    /// whose tool is in `required` waits unless it holds an approval that `verify` accepts
    /// for it. A loaded run's own flags are not trusted, so a store edit cannot let a call
    /// skip its approval.
    pub(super) fn recheck_approvals(
        &mut self,
        required: &[String],
        verify: impl Fn(&super::Approval, &ToolCall) -> bool,
    ) {
        let Phase::Tools(tools) = &mut self.phase else {
            return;
        };
        for pending in &mut tools.calls {
            if !pending.to_run() {
                continue;
            }
            let approved = pending
                .approval
                .as_ref()
                .is_some_and(|approval| verify(approval, &pending.call));
            pending.awaiting_approval = required.contains(&pending.call.name) && !approved;
        }
    }

    /// Whether every call of the tool phase has its result (the phase can end).
    pub(super) fn tools_done(&self) -> bool {
        self.tool_phase()
            .is_some_and(|tools| !tools.calls.iter().any(PendingCall::to_run))
    }

    /// Whether the tool phase has calls waiting for approval and none that may run.
    pub(super) fn blocked_on_approval(&self) -> bool {
        self.tool_phase().is_some_and(|tools| {
            !tools.calls.iter().any(PendingCall::ready)
                && tools
                    .calls
                    .iter()
                    .any(|p| p.to_run() && p.awaiting_approval)
        })
    }

    /// Ends the tool phase: appends `parts` (the results as the model sees them, in call
    /// order) as one tool message, records each call's result in the step and ends it; a
    /// `cancelled` phase ends the run.
    pub(super) fn finish_tools(&mut self, parts: Vec<ToolResult>, cancelled: bool) {
        let Phase::Tools(tools) = std::mem::replace(&mut self.phase, Phase::Model) else {
            return;
        };
        let ToolPhase {
            mut step,
            mut calls,
            cut_off,
        } = *tools;
        for position in 0..calls.len() {
            if let Some(original) = calls[position].same_as {
                calls[position].result = calls.get(original).and_then(|c| c.result.clone());
            }
        }
        for pending in calls {
            step.tool_calls.push(ToolCallOutcome {
                call: pending.call,
                result: pending.result.unwrap_or(Err(ToolExecError::Cancelled)),
            });
        }
        self.messages.push(Message::new(
            Role::Tool,
            parts.into_iter().map(ContentPart::ToolResult).collect(),
        ));
        let stop = if cancelled {
            Some(StopReason::Cancelled)
        } else if cut_off && self.cut_off_call {
            Some(StopReason::Length)
        } else {
            None
        };
        self.cut_off_call = cut_off;
        self.end_step(step, stop);
    }

    fn end_step(&mut self, step: StepResult, stop: Option<StopReason>) {
        self.steps.push(step);
        self.phase = match stop {
            Some(stop_reason) => Phase::Done { stop_reason },
            None if self.steps.len() >= self.max_steps => Phase::Done {
                stop_reason: StopReason::MaxSteps,
            },
            None => Phase::Model,
        };
    }
}

/// How a tool result reads to the model.
pub(super) fn tool_result(
    call: &ToolCall,
    result: &Result<ToolOutput, ToolExecError>,
) -> ToolResult {
    let (output, is_error) = match result {
        Ok(value) => (value.clone(), false),
        Err(ToolExecError::Denied(reason)) => (
            ToolOutput::Text(format!("The tool call was rejected: {reason}")),
            false,
        ),
        Err(error) => (ToolOutput::Text(error.to_string()), true),
    };
    ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        output,
        is_error,
    }
}

fn reasoning_text(message: &Message) -> String {
    let mut out = String::new();
    for part in &message.content {
        if let ContentPart::Reasoning(reasoning) = part {
            out.push_str(&reasoning.text);
        }
    }
    out
}

/// An [`AgentRun`] as loaded, before its parts are checked.
#[derive(Deserialize)]
struct SavedRun {
    format_version: u32,
    max_steps: usize,
    messages: Vec<Message>,
    steps: Vec<StepResult>,
    usage: Usage,
    cost: Option<Cost>,
    #[serde(default)]
    cut_off_call: bool,
    #[serde(default)]
    loaded_tools: Vec<String>,
    phase: Phase,
}

impl TryFrom<SavedRun> for AgentRun {
    type Error = String;

    fn try_from(saved: SavedRun) -> Result<Self, Self::Error> {
        if saved.format_version != AGENT_RUN_FORMAT_VERSION {
            return Err(format!(
                "agent run format version {} is not supported (this build reads version \
                 {AGENT_RUN_FORMAT_VERSION})",
                saved.format_version
            ));
        }
        if let Some(position) = saved
            .steps
            .iter()
            .enumerate()
            .position(|(position, step)| step.index != position)
        {
            return Err(format!(
                "step {position} of the agent run is numbered out of order"
            ));
        }
        if let Phase::Tools(tools) = &saved.phase {
            if tools.step.index != saved.steps.len() {
                return Err("the agent run's tool phase is not for its next step".into());
            }
            if tools.calls.is_empty() {
                return Err("the agent run's tool phase has no tool calls".into());
            }
            for (position, pending) in tools.calls.iter().enumerate() {
                if let Some(original) = pending.same_as
                    && (original >= position
                        || tools
                            .calls
                            .get(original)
                            .is_none_or(|c| c.same_as.is_some()))
                {
                    return Err(format!(
                        "tool call {position} of the agent run repeats a call that is not an \
                         earlier original"
                    ));
                }
            }
        }
        Ok(Self {
            format_version: saved.format_version,
            max_steps: saved.max_steps,
            messages: saved.messages,
            steps: saved.steps,
            usage: saved.usage,
            cost: saved.cost,
            cut_off_call: saved.cut_off_call,
            loaded_tools: saved.loaded_tools,
            phase: saved.phase,
        })
    }
}
