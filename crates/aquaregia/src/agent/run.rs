//! The loop's driver: runs an [`AgentRun`] to its end (or one action at a time), doing the
//! I/O the machine asks for. See the [`machine`](super::machine) module for what is decided
//! where.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::context::{self, Estimates, ReaderOffer};
use super::machine::{AgentRun, Phase, tool_result};
use super::subagent::{CallScope, NestedUsage};
use super::{
    AgentConfig, AgentEvent, AgentOutput, StepContext, StopReason, ToolCallDecision,
    ToolErrorPolicy,
};
use crate::context::{Deferral, READ_TOOL_OUTPUT};
use crate::error::Error;
use crate::message::{Message, ToolCall};
use crate::model::{LanguageModel, ModelRequest, ModelResponse, ModelState, StreamEvent, Usage};
use crate::pricing::Cost;
use crate::telemetry;
use crate::tool::{
    ProgressReporter, Tool, ToolDescriptor, ToolExecError, ToolOutput, ToolProgress, ToolRegistry,
};

pub(super) type Events<'a> = Option<&'a UnboundedSender<AgentEvent>>;

fn emit(events: Events<'_>, event: impl FnOnce() -> AgentEvent) {
    if let Some(sender) = events {
        // The receiver lives in the stream that polls us, so it cannot be gone while we run.
        let _ = sender.send(event());
    }
}

/// Runs `state` to its end.
pub(super) async fn drive(
    config: &AgentConfig,
    state: AgentRun,
    events: Events<'_>,
) -> Result<AgentOutput, Error> {
    let span = telemetry::agent_span(&*config.language_model, &config.model, &config.telemetry);
    let result = drive_run(config, state, events)
        .instrument(span.clone())
        .await;
    telemetry::record_run(
        &span,
        result.as_ref().ok().map(|output| &output.usage),
        &result,
    );
    result
}

async fn drive_run(
    config: &AgentConfig,
    mut state: AgentRun,
    events: Events<'_>,
) -> Result<AgentOutput, Error> {
    let cancel = config.cancellation.clone().unwrap_or_default();
    let mut cache = StepCache::new(config, &state);
    let mut driver = Driver {
        config,
        events,
        cancel: &cancel,
        state: &mut state,
        cache: &mut cache,
    };
    while !driver.advance().await? {}
    finish(config, state).await
}

/// The output of an ended run, after the hooks' `on_finish`.
pub(super) async fn finish(config: &AgentConfig, state: AgentRun) -> Result<AgentOutput, Error> {
    let Some(stop_reason) = state.stop_reason() else {
        return Err(Error::InvalidRequest(
            "the agent run has not ended; drive it until `next_action` is `Done`".into(),
        ));
    };
    let output = AgentOutput {
        text: state.last_text(),
        steps: state.steps,
        usage: state.usage,
        cost: state.cost,
        messages: state.messages,
        stop_reason,
    };
    if let Some(hooks) = &config.hooks {
        hooks.on_finish(&output).await;
    }
    Ok(output)
}

/// What a driver keeps from step to step that is not part of the run: caches, rebuilt empty
/// when a saved run is resumed.
pub(super) struct StepCache {
    /// The request sent each step; between steps its `messages` are empty (the conversation
    /// lives in the run and is moved in for the length of a model call).
    request: ModelRequest,
    /// What the model keeps from call to call (aquaregia's providers: the encoded conversation
    /// and tools, extended step by step).
    model_state: ModelState,
    /// The registry whose tools `request.tools` holds.
    request_tools: Arc<ToolRegistry>,
    /// Which tools the requests carry when there are too many to send them all.
    deferral: Deferral,
    estimates: Estimates,
    reader: ReaderOffer,
    /// The tools the current step's calls may run (unset: the agent's).
    exec_tools: Option<Arc<ToolRegistry>>,
    /// Whether the current step's request carries messages of its own (from `prepare_step`).
    step_local: bool,
    /// What the current step's tool calls spent in subagents.
    pub(super) nested: NestedUsage,
    /// The model `prepare_step` chose for the current step, if not the agent's.
    step_model: Option<Arc<dyn LanguageModel>>,
    /// The last model `prepare_step` chose, with its own state across the steps it runs.
    other_model: Option<(Arc<dyn LanguageModel>, ModelState)>,
}

impl StepCache {
    /// The model for the current step's call, and its state: `step_state` when the step
    /// carries messages of its own, the chosen model's own state when `prepare_step` chose
    /// one, otherwise the run's.
    fn model_and_state<'s>(
        &'s mut self,
        config: &AgentConfig,
        step_state: &'s mut ModelState,
    ) -> (Arc<dyn LanguageModel>, &'s mut ModelState) {
        let Self {
            model_state,
            step_local,
            step_model,
            other_model,
            ..
        } = self;
        let Some(model) = step_model else {
            let state = if *step_local { step_state } else { model_state };
            return (config.language_model.clone(), state);
        };
        let model = model.clone();
        if *step_local {
            return (model, step_state);
        }
        if !other_model
            .as_ref()
            .is_some_and(|(other, _)| Arc::ptr_eq(other, &model))
        {
            *other_model = Some((model.clone(), ModelState::new()));
        }
        match other_model {
            Some((_, state)) => (model, state),
            None => (model, step_state),
        }
    }

    pub(super) fn new(config: &AgentConfig, state: &AgentRun) -> Self {
        let deferral = Deferral::new(&config.deferral, &state.messages);
        deferral.restore_loaded(&state.loaded_tools);
        Self {
            request: ModelRequest {
                model: config.model.clone(),
                instructions: config.instructions.clone(),
                messages: Vec::new(),
                tools: Vec::new(),
                tool_choice: config.tool_choice.clone(),
                temperature: config.temperature,
                max_output_tokens: config.max_output_tokens,
                extra_body: config.extra_body.clone(),
                prompt_caching: config.prompt_caching.clone(),
                output_schema: config.output_schema.clone(),
            },
            model_state: ModelState::new(),
            request_tools: Arc::default(),
            deferral,
            estimates: Estimates::default(),
            reader: ReaderOffer::default(),
            exec_tools: None,
            step_local: false,
            nested: NestedUsage::default(),
            step_model: None,
            other_model: None,
        }
    }
}

/// One run's driver, borrowing its parts for the length of one or more actions.
pub(super) struct Driver<'a> {
    pub(super) config: &'a AgentConfig,
    pub(super) events: Events<'a>,
    pub(super) cancel: &'a CancellationToken,
    pub(super) state: &'a mut AgentRun,
    pub(super) cache: &'a mut StepCache,
}

impl Driver<'_> {
    /// Does what the run needs next: a step's model call (and its tool calls), or the rest of
    /// a step's tool calls. Returns whether the run has ended.
    pub(super) async fn advance(&mut self) -> Result<bool, Error> {
        match &self.state.phase {
            Phase::Done { .. } => return Ok(true),
            Phase::Model => {
                if self.state.steps.len() >= self.state.max_steps {
                    self.state.stop(StopReason::MaxSteps);
                    return Ok(true);
                }
                if self.cancel.is_cancelled() {
                    self.state.stop(StopReason::Cancelled);
                    return Ok(true);
                }
                let index = self.state.steps.len();
                let span = tracing::debug_span!("agent_step", step = index);
                self.step(index).instrument(span).await?;
            }
            Phase::Tools(tools) => {
                let span = tracing::debug_span!("agent_step", step = tools.step.index);
                if self.state.blocked_on_approval() {
                    return Err(Error::InvalidRequest(
                        "the run waits for approval of tool calls; drive it with \
                         `Agent::stepper`, save it, and apply the approvals with \
                         `RunStepper::approve`"
                            .into(),
                    ));
                }
                async {
                    self.run_tools().await?;
                    if self.state.tool_phase().is_none() {
                        self.step_finished().await;
                    }
                    Ok::<_, Error>(())
                }
                .instrument(span)
                .await?;
            }
        }
        Ok(self.state.stop_reason().is_some())
    }

    /// One model call and its tool calls.
    async fn step(&mut self, index: usize) -> Result<(), Error> {
        if !self.prepare(index).await? {
            self.state.stop(StopReason::Cancelled);
            return Ok(());
        }
        let config = self.config;
        let mut partial_text = String::new();
        // A step with its own messages must not touch the state of the run's conversation.
        let mut step_state = ModelState::new();
        // The request is moved out for the call, so the cache can lend the model's state.
        let request = std::mem::take(&mut self.cache.request);
        let (model, model_state) = self.cache.model_and_state(config, &mut step_state);
        let response = tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            response = call_model(config, &*model, &request, self.events, model_state, &mut partial_text) => Some(response),
        };
        self.cache.request = request;
        self.restore_messages();
        let Some(response) = response else {
            if !partial_text.is_empty() {
                self.state.messages.push(Message::assistant(partial_text));
            }
            self.state.stop(StopReason::Cancelled);
            return Ok(());
        };
        self.record_response(response?).await;
        if self.state.tool_phase().is_some() {
            self.run_tools().await?;
            if self.state.tool_phase().is_none() {
                self.step_finished().await;
            }
        }
        Ok(())
    }

    /// Takes the model's answer for the step being prepared: counts its usage and hands it to
    /// the run, ending the step when it has no tool calls.
    pub(super) async fn record_response(&mut self, response: ModelResponse) {
        let ModelResponse {
            message,
            finish_reason,
            usage,
            ..
        } = response;
        let index = self.state.steps.len();
        let cost = self.account(index, usage, false);
        let model = self.cache.request.model.clone();
        let approval_required = &self.config.approval_required;
        self.state
            .model_responded(model, message, finish_reason, usage, cost, |call| {
                approval_required.contains(&call.name)
            });
        if self.state.tool_phase().is_none() {
            self.step_finished().await;
        }
    }

    /// Everything before a step's model call: `prepare_step`, the tools the request carries,
    /// compaction, `on_step_start`. Leaves the request in the cache with its messages (the
    /// run's conversation moved in, or the step's own); `false` when cancelled.
    pub(super) async fn prepare(&mut self, index: usize) -> Result<bool, Error> {
        let config = self.config;
        self.take_steering(index);
        let base_tools = &config.tools;

        let overrides = match &config.prepare_step {
            Some(prepare) => {
                let ctx = StepContext {
                    step: index,
                    model: &config.model,
                    messages: &self.state.messages,
                    steps: &self.state.steps,
                    tools: base_tools.tools(),
                };
                let future = prepare(&ctx);
                tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => return Ok(false),
                    overrides = future => Some(overrides?),
                }
            }
            None => None,
        };
        let cache = &mut *self.cache;
        let mut registry = base_tools.clone();
        let mut step_messages = None;
        cache.request.model.clone_from(&config.model);
        cache.request.instructions.clone_from(&config.instructions);
        cache.request.tool_choice.clone_from(&config.tool_choice);
        cache.step_model = None;
        if let Some(overrides) = overrides {
            if let Some(model) = overrides.language_model {
                model.model_id().clone_into(&mut cache.request.model);
                cache.step_model = Some(model);
            }
            if overrides.tools.is_some() || overrides.active_tools.is_some() {
                let mut step_registry = match overrides.tools {
                    Some(tools) => ToolRegistry::from_tools(tools)?,
                    None => (**base_tools).clone(),
                };
                if let Some(active) = &overrides.active_tools {
                    step_registry = step_registry.retain_names(active);
                }
                if let Some(read) = config.tools.get(READ_TOOL_OUTPUT)
                    && step_registry.get(READ_TOOL_OUTPUT).is_none()
                {
                    let mut tools = step_registry.tools().to_vec();
                    tools.push(read.clone());
                    step_registry = ToolRegistry::from_tools(tools)?;
                }
                registry = Arc::new(step_registry);
            }
            if let Some(model) = overrides.model {
                cache.request.model = model;
            }
            if let Some(instructions) = overrides.instructions {
                cache.request.instructions = Some(instructions);
            }
            if let Some(tool_choice) = overrides.tool_choice {
                cache.request.tool_choice = tool_choice;
            }
            step_messages = overrides.messages;
        }
        // Too many tools: the request carries some, the calls may use all.
        let (advertised, registry) = cache.deferral.select(&registry)?;
        let advertised = cache.reader.offered(config, advertised)?;
        // Copy the tool list into the request only when it differs from the last step's.
        if !Arc::ptr_eq(&advertised, &cache.request_tools) {
            cache.request.tools = descriptors(&advertised);
            cache.estimates.tools = context::tools_tokens(advertised.tools());
            cache.request_tools = advertised.clone();
        }
        cache.exec_tools = Some(registry);

        let step_local = step_messages.is_some();
        cache.step_local = step_local;
        cache.request.messages = match step_messages {
            Some(messages) => messages,
            None => std::mem::take(&mut self.state.messages),
        };
        let fitted = tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            fitted = context::fit_window(config, &mut cache.request, &mut cache.estimates, step_local, cache.step_model.as_deref()) => Some(fitted),
        };
        let fitted = match fitted {
            None => {
                self.restore_messages();
                return Ok(false);
            }
            Some(Err(error)) => {
                self.restore_messages();
                return Err(error);
            }
            Some(Ok(fitted)) => fitted,
        };
        if let Some(report) = fitted {
            if report.summarized_messages > 0 {
                self.account(index, report.usage, true);
            }
            if !step_local {
                self.cache.model_state = ModelState::new();
                self.cache.other_model = None;
            }
            emit(self.events, || AgentEvent::Compacted {
                before_tokens: report.before_tokens,
                after_tokens: report.after_tokens,
                elided_tool_results: report.elided_tool_results,
                summarized_messages: report.summarized_messages,
                usage: report.usage,
            });
        }

        if let Some(hooks) = &config.hooks {
            let ctx = StepContext {
                step: index,
                model: &self.cache.request.model,
                messages: &self.cache.request.messages,
                steps: &self.state.steps,
                tools: advertised.tools(),
            };
            hooks.on_step_start(&ctx).await;
        }
        Ok(true)
    }

    /// The tool boundary: appends every message queued in the agent's [`Steering`] to the
    /// conversation, so step `index`'s request carries them.
    ///
    /// [`Steering`]: super::Steering
    fn take_steering(&mut self, index: usize) {
        let Some(steering) = &self.config.steering else {
            return;
        };
        if !self.state.at_boundary() {
            return;
        }
        for queued in steering.take_pending() {
            tracing::debug!(
                step = index,
                steering_id = queued.id.0,
                "steering message injected"
            );
            self.state.inject(queued.message.clone());
            emit(self.events, || AgentEvent::Steered {
                id: queued.id,
                step: index,
                message: queued.message,
            });
        }
    }

    /// The request [`prepare`](Self::prepare) left in the cache (its messages moved back out).
    pub(super) fn request(&self) -> &ModelRequest {
        &self.cache.request
    }

    /// Moves the run's conversation back out of the request (or drops the step's own).
    pub(super) fn restore_messages(&mut self) {
        let messages = std::mem::take(&mut self.cache.request.messages);
        if !self.cache.step_local {
            self.state.messages = messages;
        }
    }

    /// The model for the current step's call, and its state (`step_state` when the step
    /// carries messages of its own).
    pub(super) fn model_and_state<'s>(
        &'s mut self,
        step_state: &'s mut ModelState,
    ) -> (Arc<dyn LanguageModel>, &'s mut ModelState) {
        self.cache.model_and_state(self.config, step_state)
    }

    /// After a step ended: saves the deferred tools found, then `on_step_finish` and
    /// [`AgentEvent::StepFinish`].
    pub(super) async fn step_finished(&mut self) {
        if let Some(loaded) = self.cache.deferral.loaded() {
            self.state.loaded_tools = loaded;
        }
        let Some(step) = self.state.steps.last() else {
            return;
        };
        if let Some(hooks) = &self.config.hooks {
            hooks.on_step_finish(step).await;
        }
        if let Some(sender) = self.events {
            let _ = sender.send(AgentEvent::StepFinish(step.clone()));
        }
    }

    /// Adds a model call's usage (and cost) to the run's, and reports both. Returns the call's
    /// cost.
    fn account(&mut self, step: usize, usage: Usage, compaction: bool) -> Option<Cost> {
        let state = &mut *self.state;
        state.usage += usage;
        let config = self.config;
        let model = &self.cache.request.model;
        // A compaction summary before the step is that step's model's call too.
        let step_model = self.cache.step_model.as_ref();
        let cost = config
            .prices
            .as_ref()
            .and_then(|prices| prices.cost(model, &usage))
            .or_else(|| {
                match step_model {
                    Some(step_model) => step_model.price(),
                    None => (*model == config.model)
                        .then(|| config.language_model.price())
                        .flatten(),
                }
                .map(|price| usage.cost(&price))
            });
        state.cost = state.cost.zip(cost).map(|(total, cost)| total + cost);
        emit(self.events, || AgentEvent::Usage {
            step,
            compaction,
            usage,
            total: state.usage,
            cost,
            total_cost: state.cost,
        });
        cost
    }

    /// The tools the current step's calls run against.
    pub(super) fn exec_tools(&mut self) -> Result<Arc<ToolRegistry>, Error> {
        if let Some(registry) = &self.cache.exec_tools {
            return Ok(registry.clone());
        }
        // A run resumed in its tool phase: the agent's tools (a deferred one stays callable).
        let (_, registry) = self.cache.deferral.select(&self.config.tools)?;
        self.cache.exec_tools = Some(registry.clone());
        Ok(registry)
    }

    /// Runs the current step's calls still to run (up to `max_tool_concurrency` at once) and
    /// ends the step's tool phase (see [`complete_tools`](Self::complete_tools)).
    async fn run_tools(&mut self) -> Result<(), Error> {
        let config = self.config;
        let events = self.events;
        let cancel = self.cancel;
        let nested = &self.cache.nested.clone();
        let registry = self.exec_tools()?;
        let Some(tools) = self.state.tool_phase() else {
            return Ok(());
        };
        let to_run: Vec<usize> = (0..tools.calls.len())
            .filter(|&position| tools.calls[position].ready())
            .collect();

        let mut cancelled = false;
        // Results of concurrent calls, recorded once none of them borrows the run any more.
        let mut finished: Vec<(usize, Result<ToolOutput, ToolExecError>)> = Vec::new();
        if let [position] = to_run.as_slice() {
            // One call, the usual case: no queue of calls to set up.
            let position = *position;
            let call = &tools.calls[position].call;
            let result = tokio::select! {
                biased;
                () = self.cancel.cancelled() => None,
                result = run_tool(config, &registry, call, events, cancel, nested) => Some(result),
            };
            match result {
                Some(result) => {
                    fail_fast(config, call, &result)?;
                    self.state.set_result(position, result);
                }
                None => cancelled = true,
            }
        } else if !to_run.is_empty() {
            // Collected first: a lazily mapped iterator held across awaits trips the
            // compiler's `Send` inference for the whole run future.
            let calls_in_flight: Vec<_> = to_run
                .iter()
                .map(|&position| {
                    let call = &tools.calls[position].call;
                    let registry = &registry;
                    async move {
                        let result = run_tool(config, registry, call, events, cancel, nested).await;
                        (position, result)
                    }
                })
                .collect();
            let mut pending =
                futures::stream::iter(calls_in_flight).buffered(config.max_tool_concurrency);
            loop {
                let next = tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => { cancelled = true; break; }
                    next = pending.next() => next,
                };
                let Some((position, result)) = next else {
                    break;
                };
                if let Some(pending) = tools.calls.get(position) {
                    fail_fast(config, &pending.call, &result)?;
                }
                finished.push((position, result));
            }
        }
        for (position, result) in finished {
            self.state.set_result(position, result);
        }
        // Calls waiting for approval keep the step open, unless the run was cancelled.
        if cancelled || self.state.tools_done() {
            self.complete_tools(&registry, cancelled).await;
        }
        Ok(())
    }

    /// Ends the step's tool phase once every call has its result.
    pub(super) async fn complete_if_done(&mut self) -> Result<(), Error> {
        if self.state.tools_done() {
            let registry = self.exec_tools()?;
            self.complete_tools(&registry, false).await;
            self.step_finished().await;
        }
        Ok(())
    }

    /// Ends the step's tool phase: reports the cut-off call and the calls a cancellation left
    /// unfinished, cuts the results to their budgets and appends them to the conversation, in
    /// call order.
    pub(super) async fn complete_tools(&mut self, registry: &ToolRegistry, cancelled: bool) {
        let config = self.config;
        let events = self.events;
        // What subagents spent counts in the run's totals (their calls are not steps).
        if let Some((usage, cost)) = self.cache.nested.take() {
            self.state.usage += usage;
            self.state.cost = self.state.cost.zip(cost).map(|(total, cost)| total + cost);
        }
        let Some(tools) = self.state.tool_phase() else {
            return;
        };
        if tools.cut_off
            && let Some(last) = tools.calls.last()
            && let Some(result) = &last.result
        {
            // Hosts see the call the model made, and that it ended without running.
            let call = &last.call;
            emit(events, || AgentEvent::ToolCallStart {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
            emit(events, || AgentEvent::ToolCallFinish {
                id: call.id.clone(),
                name: call.name.clone(),
                result: result.clone(),
            });
        }
        let cancelled_result = Err(ToolExecError::Cancelled);
        let mut parts = Vec::with_capacity(tools.calls.len());
        for pending in &tools.calls {
            let call = &pending.call;
            let own = match pending.same_as {
                Some(original) => tools.calls.get(original).and_then(|c| c.result.as_ref()),
                None => pending.result.as_ref(),
            };
            let result = own.unwrap_or_else(|| {
                // Cancelled before it finished: say so, so the UI and the transcript agree
                // (a duplicate never started).
                if pending.same_as.is_none() {
                    emit(events, || AgentEvent::ToolCallFinish {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        result: Err(ToolExecError::Cancelled),
                    });
                }
                &cancelled_result
            });
            let mut part = tool_result(call, result);
            context::fit_result(config, registry, &mut part).await;
            self.cache.deferral.note_called(&call.name);
            parts.push(part);
        }
        self.state.finish_tools(parts, cancelled);
    }
}

/// The run's error when `result` stops a [`ToolErrorPolicy::FailFast`] run.
pub(super) fn fail_fast(
    config: &AgentConfig,
    call: &ToolCall,
    result: &Result<ToolOutput, ToolExecError>,
) -> Result<(), Error> {
    match result {
        Err(error)
            if config.tool_error_policy == ToolErrorPolicy::FailFast && is_failure(error) =>
        {
            Err(Error::Tool {
                name: call.name.clone(),
                source: error.clone(),
            })
        }
        _ => Ok(()),
    }
}

/// Errors that stop a [`ToolErrorPolicy::FailFast`] run; a denial is a decision, not a failure.
fn is_failure(error: &ToolExecError) -> bool {
    !matches!(error, ToolExecError::Denied(_) | ToolExecError::Cancelled)
}

pub(super) async fn run_tool(
    config: &AgentConfig,
    registry: &ToolRegistry,
    call: &ToolCall,
    events: Events<'_>,
    cancel: &CancellationToken,
    nested: &NestedUsage,
) -> Result<ToolOutput, ToolExecError> {
    emit(events, || AgentEvent::ToolCallStart {
        id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
    });
    let tool = registry.get(&call.name);
    let content = config.telemetry.record_content;
    let span = telemetry::tool_span(call, content);
    let started = Instant::now();
    let result = async {
        let decision = match &config.hooks {
            Some(hooks) => hooks.on_tool_call_start(call, tool).await,
            None => ToolCallDecision::Allow,
        };
        let arguments = match decision {
            ToolCallDecision::Allow => None,
            ToolCallDecision::Rewrite(arguments) => Some(arguments),
            ToolCallDecision::Deny(reason) => return Err(ToolExecError::Denied(reason)),
        };
        let Some(tool) = tool else {
            return Err(ToolExecError::UnknownTool(call.name.clone()));
        };
        let scope = CallScope::new(call, events, config.hooks.as_ref(), cancel, nested);
        let execution =
            scope.scope(tool.execute(arguments.unwrap_or_else(|| call.arguments.clone())));
        match events {
            Some(sender) => {
                progress_reporter(sender.clone(), call.id.clone())
                    .scope(execution)
                    .await
            }
            None => execution.await,
        }
    }
    .instrument(span.clone())
    .await;
    telemetry::record_tool(&span, &result, content);
    span.in_scope(|| match &result {
        Ok(_) => tracing::debug!(
            tool = %call.name,
            id = %call.id,
            elapsed = ?started.elapsed(),
            "tool call finished"
        ),
        Err(error) => tracing::debug!(
            tool = %call.name,
            id = %call.id,
            elapsed = ?started.elapsed(),
            %error,
            "tool call failed"
        ),
    });
    if let Some(hooks) = &config.hooks {
        hooks.on_tool_call_finish(call, &result).await;
    }
    emit(events, || AgentEvent::ToolCallFinish {
        id: call.id.clone(),
        name: call.name.clone(),
        result: result.clone(),
    });
    result
}

/// Turns a tool call's progress reports into [`AgentEvent::ToolProgress`].
fn progress_reporter(sender: UnboundedSender<AgentEvent>, id: String) -> ProgressReporter {
    ProgressReporter::new(move |progress: ToolProgress| {
        let _ = sender.send(AgentEvent::ToolProgress {
            id: id.clone(),
            progress: progress.progress,
            total: progress.total,
            message: progress.message,
        });
    })
}

/// Calls the model in a `chat` span: streamed when events are wanted, so text arrives as it
/// is generated.
pub(super) async fn call_model(
    config: &AgentConfig,
    model: &dyn LanguageModel,
    request: &ModelRequest,
    events: Events<'_>,
    state: &mut ModelState,
    partial_text: &mut String,
) -> Result<ModelResponse, Error> {
    let content = config.telemetry.record_content;
    let span = telemetry::chat_span(model, request, events.is_some(), content);
    let result = model_call(model, request, events, state, partial_text)
        .instrument(span.clone())
        .await;
    telemetry::record_chat(&span, &result, content);
    result
}

async fn model_call(
    model: &dyn LanguageModel,
    request: &ModelRequest,
    events: Events<'_>,
    state: &mut ModelState,
    partial_text: &mut String,
) -> Result<ModelResponse, Error> {
    let Some(sender) = events else {
        return model.generate(request, state).await;
    };
    let mut stream = model.stream(request, state).await?;
    while let Some(event) = stream.next().await {
        match event? {
            StreamEvent::TextDelta(text) => {
                partial_text.push_str(&text);
                let _ = sender.send(AgentEvent::TextDelta(text));
            }
            StreamEvent::ReasoningDelta(text) => {
                let _ = sender.send(AgentEvent::ReasoningDelta(text));
            }
            StreamEvent::Finish(response) => return Ok(response),
            _ => {}
        }
    }
    Err(Error::Decode {
        provider: "stream",
        message: "the model stream ended without a final response".into(),
        body: String::new(),
    })
}

/// What the model is told about a registry's tools.
fn descriptors(registry: &ToolRegistry) -> Vec<Arc<ToolDescriptor>> {
    registry
        .tools()
        .iter()
        .map(Tool::shared_descriptor)
        .collect()
}
