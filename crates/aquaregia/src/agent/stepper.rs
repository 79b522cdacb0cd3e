//! [`RunStepper`]: an [`AgentRun`] driven one action at a time by its caller.

use std::fmt;

use tokio_util::sync::CancellationToken;

use super::machine::{AgentRun, NextAction, Phase};
use super::run::{self, Driver, StepCache};
use super::{Agent, AgentOutput, Approval};
use crate::error::Error;
use crate::message::ToolCall;
use crate::model::{ModelRequest, ModelResponse, ModelState};
use crate::tool::{ToolExecError, ToolOutput};

/// Drives an [`AgentRun`] one action at a time, for callers that record every step, such as
/// a durable execution engine that journals each model call and each tool call: made by
/// [`Agent::stepper`].
///
/// Ask [`next_action`](Self::next_action) what the run needs, do it, and hand the outcome back:
///
/// - [`NextAction::CallModel`]: [`model_request`](Self::model_request) runs `prepare_step`,
///   picks the tools the request carries, compacts the conversation if it would not fit (a
///   summarising model call of its own) and calls the hooks' `on_step_start`; send the request
///   ([`call_model`](Self::call_model) uses the agent's model, with the run's request cache)
///   and hand the answer to [`model_responded`](Self::model_responded).
/// - [`NextAction::RunTools`]: run each call ([`execute_tool`](Self::execute_tool): the
///   hooks' decision, then the tool) and hand each result to
///   [`tool_finished`](Self::tool_finished); the last one appends the results to the
///   conversation (cut to their budgets) and ends the step.
/// - [`NextAction::AwaitApproval`]: the calls wait for a signed decision
///   ([`AgentBuilder::require_approval`](super::AgentBuilder::require_approval)): save the
///   run ([`AgentRun::save_paused`]) and, once someone holding the
///   [`ApprovalKey`](super::ApprovalKey) decided, hand each [`Approval`] to
///   [`approve`](Self::approve), in this process or another.
/// - [`NextAction::Done`]: [`finish`](Self::finish) gives the output.
///
/// [`advance`](Self::advance) does one whole action itself. Between any two calls,
/// [`run`](Self::run) is the state to save; a stepper made from the loaded state continues
/// where it was. What is not saved is rebuilt or asked again: the model's request cache
/// starts empty, and `prepare_step` and the hooks run again for the steps still to come (a
/// run saved in the middle of a step's tool calls runs the rest on the agent's own tools, not
/// a `prepare_step` tool set). No [`AgentEvent`](super::AgentEvent)s are sent; the agent's
/// cancellation token stops [`model_request`](Self::model_request) and
/// [`advance`](Self::advance).
///
/// ```
/// use aquaregia::{Agent, AgentRun, NextAction};
///
/// # async fn demo(agent: Agent) -> Result<(), Box<dyn std::error::Error>> {
/// let mut saved = serde_json::to_string(&agent.start("What is 2 + 2?"))?;
/// loop {
///     let mut stepper = agent.stepper(serde_json::from_str::<AgentRun>(&saved)?);
///     match stepper.next_action() {
///         NextAction::CallModel { .. } => {
///             let request = stepper.model_request().await?;
///             let response = stepper.call_model(&request).await?; // record this
///             stepper.model_responded(response).await?;
///         }
///         NextAction::RunTools { calls, .. } => {
///             for call in calls {
///                 let result = stepper.execute_tool(&call).await; // record this
///                 stepper.tool_finished(&call.id, result).await?;
///             }
///         }
///         NextAction::Done(_) => {
///             println!("{}", stepper.finish().await?.text);
///             return Ok(());
///         }
///         _ => return Err("an action this loop does not know".into()),
///     }
///     saved = serde_json::to_string(stepper.run())?;
/// }
/// # }
/// ```
pub struct RunStepper {
    agent: Agent,
    state: AgentRun,
    cache: StepCache,
    cancel: CancellationToken,
}

impl fmt::Debug for RunStepper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunStepper")
            .field("agent", &self.agent)
            .field("run", &self.state)
            .finish_non_exhaustive()
    }
}

impl RunStepper {
    pub(super) fn new(agent: Agent, state: AgentRun) -> Self {
        let cache = StepCache::new(&agent.inner, &state);
        let cancel = agent.inner.cancellation.clone().unwrap_or_default();
        Self {
            agent,
            state,
            cache,
            cancel,
        }
    }

    fn driver(&mut self) -> Driver<'_> {
        Driver {
            config: &self.agent.inner,
            events: None,
            cancel: &self.cancel,
            state: &mut self.state,
            cache: &mut self.cache,
        }
    }

    /// The run as it is now: the value to save.
    pub fn run(&self) -> &AgentRun {
        &self.state
    }

    /// The run as it is now, leaving the stepper.
    pub fn into_run(self) -> AgentRun {
        self.state
    }

    /// What the run needs next (see [`AgentRun::next_action`]).
    pub fn next_action(&self) -> NextAction {
        self.state.next_action()
    }

    /// Does the next action whole: a step's model call (with its preparation) and its tool
    /// calls, or the rest of a step's tool calls; nothing once the run ended. Returns whether
    /// the run has ended. A cancellation (the agent's token) ends the run with
    /// [`StopReason::Cancelled`](super::StopReason::Cancelled), as in [`Agent::run`].
    pub async fn advance(&mut self) -> Result<bool, Error> {
        self.driver().advance().await
    }

    /// Prepares the model call of [`NextAction::CallModel`] and returns its request: runs
    /// `prepare_step`, picks the tools the request carries, compacts the conversation if the
    /// request would not fit the context window (a summarising model call, counted in the
    /// run's usage) and calls the hooks' `on_step_start`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when the run is not before a model call; [`Error::Cancelled`]
    /// when the agent's cancellation token fired (the run is unchanged); what `prepare_step`
    /// or compaction failed with.
    pub async fn model_request(&mut self) -> Result<ModelRequest, Error> {
        if !matches!(self.state.phase, Phase::Model) {
            return Err(not_expected("a model request", &self.state));
        }
        let index = self.state.steps.len();
        let mut driver = self.driver();
        if !driver.prepare(index).await? {
            return Err(Error::Cancelled);
        }
        let request = driver.request().clone();
        driver.restore_messages();
        Ok(request)
    }

    /// Sends `request` to the agent's model, or to the one `prepare_step` chose for this step
    /// ([`StepOverrides::language_model`](super::StepOverrides::language_model)), not
    /// streamed, with the run's request cache
    /// ([`ModelState`]). Any other way of getting the answer (a recorded one, another client)
    /// works as well: hand it to [`model_responded`](Self::model_responded).
    ///
    /// # Errors
    ///
    /// What the model call failed with.
    pub async fn call_model(&mut self, request: &ModelRequest) -> Result<ModelResponse, Error> {
        let config = &self.agent.inner;
        let mut step_state = ModelState::new();
        let mut driver = Driver {
            config,
            events: None,
            cancel: &self.cancel,
            state: &mut self.state,
            cache: &mut self.cache,
        };
        let (model, state) = driver.model_and_state(&mut step_state);
        let mut partial_text = String::new();
        run::call_model(config, &*model, request, None, state, &mut partial_text).await
    }

    /// Takes the model's answer for the step [`model_request`](Self::model_request) prepared:
    /// counts its usage, appends it to the conversation, and either ends the step (no tool
    /// calls: the hooks' `on_step_finish`) or makes its tool calls the next action.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when the run is not before a model call.
    pub async fn model_responded(&mut self, response: ModelResponse) -> Result<(), Error> {
        if !matches!(self.state.phase, Phase::Model) {
            return Err(not_expected("a model answer", &self.state));
        }
        let mut driver = self.driver();
        driver.record_response(response).await;
        // An answer whose only call was cut off by the output limit has nothing to run.
        driver.complete_if_done().await
    }

    /// Runs one tool call of [`NextAction::RunTools`]: the hooks' `on_tool_call_start`
    /// decision (deny, rewrite), the tool, then `on_tool_call_finish`. It does not change the
    /// run: hand the result to [`tool_finished`](Self::tool_finished).
    pub async fn execute_tool(&mut self, call: &ToolCall) -> Result<ToolOutput, ToolExecError> {
        let registry = match self.driver().exec_tools() {
            Ok(registry) => registry,
            Err(error) => return Err(ToolExecError::Execution(error.to_string())),
        };
        let nested = self.cache.nested.clone();
        run::run_tool(
            &self.agent.inner,
            &registry,
            call,
            None,
            &self.cancel,
            &nested,
        )
        .await
    }

    /// Records the result of the call `id`; after the step's last call, appends all results
    /// to the conversation (cut to their budgets, in the model's order), ends the step (the
    /// hooks' `on_step_finish`) and decides whether the run goes on.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when no call `id` of the current step is waiting for a
    /// result; [`Error::Tool`] when the agent's policy is
    /// [`ToolErrorPolicy::FailFast`](super::ToolErrorPolicy::FailFast) and the call failed
    /// (the result is not recorded, as [`Agent::run`] would stop there).
    pub async fn tool_finished(
        &mut self,
        id: &str,
        result: Result<ToolOutput, ToolExecError>,
    ) -> Result<(), Error> {
        let Some(position) = self.state.position_to_run(id) else {
            return Err(Error::InvalidRequest(format!(
                "no tool call `{id}` of the current step is waiting for a result"
            )));
        };
        if let Some(tools) = self.state.tool_phase()
            && let Some(pending) = tools.calls.get(position)
        {
            run::fail_fast(&self.agent.inner, &pending.call, &result)?;
        }
        self.state.set_result(position, result);
        self.driver().complete_if_done().await
    }

    /// Applies a signed decision to a call of [`NextAction::AwaitApproval`] (see
    /// [`AgentRun::apply_approval`]), checked with the agent's key
    /// ([`AgentBuilder::require_approval`](super::AgentBuilder::require_approval)): an
    /// approved call becomes one to run, a denied one is answered with the reason; after the
    /// step's last call, the step ends as in [`tool_finished`](Self::tool_finished).
    ///
    /// # Errors
    ///
    /// What [`AgentRun::apply_approval`] refuses (the run is then unchanged);
    /// [`Error::InvalidRequest`] when the agent has no approval key.
    pub async fn approve(&mut self, approval: &Approval) -> Result<(), Error> {
        let Some(key) = &self.agent.inner.approval_key else {
            return Err(Error::InvalidRequest(
                "this agent has no approval key (`AgentBuilder::require_approval`)".into(),
            ));
        };
        self.state.apply_approval(approval, key)?;
        self.driver().complete_if_done().await
    }

    /// The output of an ended run, after the hooks' `on_finish`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when the run has not ended.
    pub async fn finish(self) -> Result<AgentOutput, Error> {
        run::finish(&self.agent.inner, self.state).await
    }
}

fn not_expected(what: &str, state: &AgentRun) -> Error {
    let now = match state.next_action() {
        NextAction::CallModel { .. } => "before a model call",
        NextAction::RunTools { .. } => "running tool calls",
        NextAction::AwaitApproval { .. } => "waiting for approval of tool calls",
        NextAction::Done(_) => "ended",
    };
    Error::InvalidRequest(format!(
        "the agent run does not take {what} now: it is {now}"
    ))
}
