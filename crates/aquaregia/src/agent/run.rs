//! The loop itself.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::context::{self, Estimates, ReaderOffer};
use super::{
    AgentConfig, AgentEvent, AgentOutput, StepContext, StepResult, StopReason, ToolCallDecision,
    ToolCallOutcome, ToolErrorPolicy,
};
use crate::context::{Deferral, READ_TOOL_OUTPUT};
use crate::error::Error;
use crate::message::{ContentPart, Message, Role, ToolCall, ToolResult};
use crate::model::{FinishReason, ModelRequest, ModelResponse, ModelState, StreamEvent, Usage};
use crate::pricing::Cost;
use crate::telemetry;
use crate::tool::{
    ProgressReporter, Tool, ToolDescriptor, ToolExecError, ToolOutput, ToolProgress, ToolRegistry,
};

type Events<'a> = Option<&'a UnboundedSender<AgentEvent>>;

fn emit(events: Events<'_>, event: impl FnOnce() -> AgentEvent) {
    if let Some(sender) = events {
        // The receiver lives in the stream that polls us, so it cannot be gone while we run.
        let _ = sender.send(event());
    }
}

pub(super) async fn drive(
    config: &AgentConfig,
    messages: Vec<Message>,
    events: Events<'_>,
) -> Result<AgentOutput, Error> {
    let span = telemetry::agent_span(&*config.language_model, &config.model, &config.telemetry);
    let result = drive_run(config, messages, events)
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
    messages: Vec<Message>,
    events: Events<'_>,
) -> Result<AgentOutput, Error> {
    let cancel = config.cancellation.clone().unwrap_or_default();
    let deferral = Deferral::new(&config.deferral, &messages);
    let mut run = Run {
        config,
        events,
        cancel,
        request: ModelRequest {
            model: config.model.clone(),
            instructions: config.instructions.clone(),
            messages,
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
        steps: Vec::new(),
        usage: Usage::default(),
        cost: (config.prices.is_some() || config.language_model.price().is_some())
            .then(Cost::default),
        deferral,
        estimates: Estimates::default(),
        reader: ReaderOffer::default(),
        cut_off_call: false,
    };
    let stop_reason = run.steps_loop().await?;
    let output = AgentOutput {
        text: run
            .request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(Message::text)
            .unwrap_or_default(),
        steps: run.steps,
        usage: run.usage,
        cost: run.cost,
        messages: run.request.messages,
        stop_reason,
    };
    if let Some(hooks) = &config.hooks {
        hooks.on_finish(&output).await;
    }
    Ok(output)
}

struct Run<'a> {
    config: &'a AgentConfig,
    events: Events<'a>,
    cancel: CancellationToken,
    /// The request sent each step; `request.messages` is the conversation.
    request: ModelRequest,
    /// What the model keeps from call to call (aquaregia's providers: the encoded conversation
    /// and tools, extended step by step).
    model_state: ModelState,
    /// The registry whose tools `request.tools` holds.
    request_tools: Arc<ToolRegistry>,
    steps: Vec<StepResult>,
    usage: Usage,
    /// The run's cost so far; `None` without prices or once a step had no price.
    cost: Option<Cost>,
    /// Which tools the requests carry when there are too many to send them all.
    deferral: Deferral,
    estimates: Estimates,
    reader: ReaderOffer,
    /// Whether the last step's answer was cut off by the output limit inside a tool call.
    cut_off_call: bool,
}

/// What one step's tool phase ended with.
enum ToolPhase {
    Done,
    Cancelled,
}

impl Run<'_> {
    async fn steps_loop(&mut self) -> Result<StopReason, Error> {
        let config = self.config;
        for index in 0..config.max_steps {
            if self.cancel.is_cancelled() {
                return Ok(StopReason::Cancelled);
            }
            let span = tracing::debug_span!("agent_step", step = index);
            let outcome = self.step(index).instrument(span).await?;
            if let Some(stop) = outcome {
                return Ok(stop);
            }
        }
        Ok(StopReason::MaxSteps)
    }

    /// One model call and its tool calls; `Some` when the run ends here.
    async fn step(&mut self, index: usize) -> Result<Option<StopReason>, Error> {
        let config = self.config;
        let base_tools = &config.tools;

        // prepare_step and the per-step request.
        let overrides = match &config.prepare_step {
            Some(prepare) => {
                let ctx = StepContext {
                    step: index,
                    model: &config.model,
                    messages: &self.request.messages,
                    steps: &self.steps,
                    tools: base_tools.tools(),
                };
                let future = prepare(&ctx);
                tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => return Ok(Some(StopReason::Cancelled)),
                    overrides = future => Some(overrides?),
                }
            }
            None => None,
        };
        let mut registry = base_tools.clone();
        let mut saved_messages = None;
        self.request.model.clone_from(&config.model);
        self.request.instructions.clone_from(&config.instructions);
        self.request.tool_choice.clone_from(&config.tool_choice);
        if let Some(overrides) = overrides {
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
                self.request.model = model;
            }
            if let Some(instructions) = overrides.instructions {
                self.request.instructions = Some(instructions);
            }
            if let Some(tool_choice) = overrides.tool_choice {
                self.request.tool_choice = tool_choice;
            }
            if let Some(messages) = overrides.messages {
                saved_messages = Some(std::mem::replace(&mut self.request.messages, messages));
            }
        }
        // Too many tools: the request carries some, the calls may use all.
        let (advertised, registry) = self.deferral.select(&registry)?;
        let advertised = self.reader.offered(config, advertised)?;
        // Copy the tool list into the request only when it differs from the last step's.
        if !Arc::ptr_eq(&advertised, &self.request_tools) {
            self.request.tools = descriptors(&advertised);
            self.estimates.tools = context::tools_tokens(advertised.tools());
            self.request_tools = advertised.clone();
        }

        let step_local = saved_messages.is_some();
        let fitted = tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            fitted = context::fit_window(config, &mut self.request, &mut self.estimates, step_local) => Some(fitted),
        };
        let Some(fitted) = fitted else {
            if let Some(saved) = saved_messages {
                self.request.messages = saved;
            }
            return Ok(Some(StopReason::Cancelled));
        };
        let fitted = match fitted {
            Ok(fitted) => fitted,
            Err(error) => {
                if let Some(saved) = saved_messages {
                    self.request.messages = saved;
                }
                return Err(error);
            }
        };
        if let Some(report) = fitted {
            if report.summarized_messages > 0 {
                self.account(index, report.usage, true);
            }
            if !step_local {
                self.model_state = ModelState::new();
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
                model: &self.request.model,
                messages: &self.request.messages,
                steps: &self.steps,
                tools: advertised.tools(),
            };
            hooks.on_step_start(&ctx).await;
        }

        // The model call.
        let mut partial_text = String::new();
        // A step with its own messages must not touch the state of the run's conversation.
        let mut step_state = ModelState::new();
        let model_state = if saved_messages.is_some() {
            &mut step_state
        } else {
            &mut self.model_state
        };
        let response = tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            response = call_model(config, &self.request, self.events, model_state, &mut partial_text) => Some(response),
        };
        if let Some(saved) = saved_messages {
            self.request.messages = saved;
        }
        let Some(response) = response else {
            if !partial_text.is_empty() {
                self.request.messages.push(Message::assistant(partial_text));
            }
            return Ok(Some(StopReason::Cancelled));
        };
        let ModelResponse {
            message,
            finish_reason,
            usage,
            ..
        } = response?;
        let cost = self.account(index, usage, false);

        let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
        let mut step = StepResult {
            index,
            model: self.request.model.clone(),
            text: message.text(),
            reasoning: reasoning_text(&message),
            tool_calls: Vec::with_capacity(calls.len()),
            finish_reason: finish_reason.clone(),
            usage,
            cost,
        };
        self.request.messages.push(message);

        let mut stop = None;
        if calls.is_empty() {
            stop = Some(match finish_reason {
                FinishReason::Length => StopReason::Length,
                FinishReason::ContentFilter => StopReason::Refusal,
                _ => StopReason::Finished,
            });
        } else {
            // An answer cut off by the output limit stopped inside its last call, whose
            // arguments may be incomplete (llama.cpp sends `{`) or cut yet valid JSON: it is
            // not run, and the model is told so and asked again. Twice in a row, the run ends:
            // the limit is too small for the call.
            let cut_off = finish_reason == FinishReason::Length;
            let phase = self.run_tools(&registry, calls, cut_off, &mut step).await?;
            if matches!(phase, ToolPhase::Cancelled) {
                stop = Some(StopReason::Cancelled);
            } else if cut_off && self.cut_off_call {
                stop = Some(StopReason::Length);
            }
            self.cut_off_call = cut_off;
        }

        if let Some(hooks) = &config.hooks {
            hooks.on_step_finish(&step).await;
        }
        if let Some(sender) = self.events {
            let _ = sender.send(AgentEvent::StepFinish(step.clone()));
        }
        self.steps.push(step);
        Ok(stop)
    }

    /// Adds a model call's usage (and cost) to the run's, and reports both. Returns the call's
    /// cost.
    fn account(&mut self, step: usize, usage: Usage, compaction: bool) -> Option<Cost> {
        self.usage += usage;
        let config = self.config;
        let model = &self.request.model;
        let cost = config
            .prices
            .as_ref()
            .and_then(|prices| prices.cost(model, &usage))
            .or_else(|| {
                (*model == config.model)
                    .then(|| config.language_model.price())
                    .flatten()
                    .map(|price| usage.cost(&price))
            });
        self.cost = self.cost.zip(cost).map(|(total, cost)| total + cost);
        emit(self.events, || AgentEvent::Usage {
            step,
            compaction,
            usage,
            total: self.usage,
            cost,
            total_cost: self.cost,
        });
        cost
    }

    /// Runs the calls (up to `max_tool_concurrency` at once), appends their results in call
    /// order, and records them in `step`. With `cut_off`, the last call is not run (see
    /// [`CUT_OFF_CALL`]); a call identical to an earlier one of the same answer (name and
    /// arguments: small models repeat themselves) is not run either and gets that one's
    /// result, so every call id still has its result.
    async fn run_tools(
        &mut self,
        registry: &ToolRegistry,
        calls: Vec<ToolCall>,
        cut_off: bool,
        step: &mut StepResult,
    ) -> Result<ToolPhase, Error> {
        let config = self.config;
        let events = self.events;
        let mut results: Vec<Option<Result<ToolOutput, ToolExecError>>> = vec![None; calls.len()];
        let mut same_as: Vec<Option<usize>> = vec![None; calls.len()];
        let last = calls.len().saturating_sub(1);
        for (position, call) in calls.iter().enumerate() {
            if cut_off && position == last {
                results[position] = Some(Err(ToolExecError::InvalidArguments(
                    CUT_OFF_CALL.to_owned(),
                )));
                continue;
            }
            same_as[position] = calls[..position].iter().position(|earlier| {
                earlier.name == call.name && earlier.arguments == call.arguments
            });
        }
        let to_run: Vec<usize> = (0..calls.len())
            .filter(|&position| results[position].is_none() && same_as[position].is_none())
            .collect();

        let mut cancelled = false;
        if let [position] = to_run.as_slice() {
            // One call, the usual case: no queue of calls to set up.
            let position = *position;
            let call = &calls[position];
            let result = tokio::select! {
                biased;
                () = self.cancel.cancelled() => None,
                result = run_tool(config, registry, call, events) => Some(result),
            };
            match result {
                Some(result) => {
                    fail_fast(config, call, &result)?;
                    results[position] = Some(result);
                }
                None => cancelled = true,
            }
        } else if !to_run.is_empty() {
            // Collected first: a lazily mapped iterator held across awaits trips the
            // compiler's `Send` inference for the whole run future.
            let calls_in_flight: Vec<_> = to_run
                .iter()
                .map(|&position| {
                    let call = &calls[position];
                    async move { (position, run_tool(config, registry, call, events).await) }
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
                if let Some(call) = calls.get(position) {
                    fail_fast(config, call, &result)?;
                }
                if let Some(slot) = results.get_mut(position) {
                    *slot = Some(result);
                }
            }
        }
        if cut_off && let (Some(call), Some(Some(result))) = (calls.last(), results.last()) {
            // Hosts see the call the model made, and that it ended without running.
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
        for (position, original) in same_as.iter().enumerate() {
            if let Some(original) = *original {
                results[position] = results[original].clone();
            }
        }

        let mut parts = Vec::with_capacity(calls.len());
        for ((call, result), duplicate) in calls.into_iter().zip(results).zip(same_as) {
            let result = result.unwrap_or_else(|| {
                // Cancelled before it finished: say so, so the UI and the transcript agree
                // (a duplicate never started).
                if duplicate.is_none() {
                    emit(events, || AgentEvent::ToolCallFinish {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        result: Err(ToolExecError::Cancelled),
                    });
                }
                Err(ToolExecError::Cancelled)
            });
            let mut part = tool_result(&call, &result);
            context::fit_result(config, registry, &mut part).await;
            self.deferral.note_called(&call.name);
            parts.push(ContentPart::ToolResult(part));
            step.tool_calls.push(ToolCallOutcome { call, result });
        }
        self.request.messages.push(Message::new(Role::Tool, parts));
        Ok(if cancelled {
            ToolPhase::Cancelled
        } else {
            ToolPhase::Done
        })
    }
}

/// The run's error when `result` stops a [`ToolErrorPolicy::FailFast`] run.
fn fail_fast(
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

/// What the model is told about a call its answer was cut off in (the output token limit).
const CUT_OFF_CALL: &str = "the answer was cut off by the output token limit while writing \
    this call, so it was not run; call the tool again with complete arguments";

/// Errors that stop a [`ToolErrorPolicy::FailFast`] run; a denial is a decision, not a failure.
fn is_failure(error: &ToolExecError) -> bool {
    !matches!(error, ToolExecError::Denied(_) | ToolExecError::Cancelled)
}

fn tool_result(call: &ToolCall, result: &Result<ToolOutput, ToolExecError>) -> ToolResult {
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

async fn run_tool(
    config: &AgentConfig,
    registry: &ToolRegistry,
    call: &ToolCall,
    events: Events<'_>,
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
        let execution = tool.execute(arguments.unwrap_or_else(|| call.arguments.clone()));
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
async fn call_model(
    config: &AgentConfig,
    request: &ModelRequest,
    events: Events<'_>,
    state: &mut ModelState,
    partial_text: &mut String,
) -> Result<ModelResponse, Error> {
    let content = config.telemetry.record_content;
    let span = telemetry::chat_span(&*config.language_model, request, events.is_some(), content);
    let result = model_call(config, request, events, state, partial_text)
        .instrument(span.clone())
        .await;
    telemetry::record_chat(&span, &result, content);
    result
}

async fn model_call(
    config: &AgentConfig,
    request: &ModelRequest,
    events: Events<'_>,
    state: &mut ModelState,
    partial_text: &mut String,
) -> Result<ModelResponse, Error> {
    let model = &*config.language_model;
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

fn reasoning_text(message: &Message) -> String {
    let mut out = String::new();
    for part in &message.content {
        if let ContentPart::Reasoning(reasoning) = part {
            out.push_str(&reasoning.text);
        }
    }
    out
}

/// What the model is told about a registry's tools.
fn descriptors(registry: &ToolRegistry) -> Vec<Arc<ToolDescriptor>> {
    registry
        .tools()
        .iter()
        .map(Tool::shared_descriptor)
        .collect()
}
