//! The agent loop's side of context management: budgets on tool results, and compaction
//! before a model call that would not fit.

use std::sync::Arc;

use crate::context::estimator_kind;
use crate::context::{
    Compaction, CompactionReport, DEFAULT_RESERVED_OUTPUT_TOKENS, Deferral, MIN_BUDGET_TOKENS,
    OutputBudget, READ_TOOL_OUTPUT, context_window_for, estimate_descriptor_tokens,
    estimate_messages_tokens, estimate_tokens, fit_output,
};
use crate::error::Error;
use crate::message::{Message, ToolResult};
use crate::model::{LanguageModel, ModelRequest};
use crate::tool::{Tool, ToolRegistry};

use super::AgentConfig;

/// Running token estimates, so a step only estimates what is new.
#[derive(Debug, Default)]
pub(super) struct Estimates {
    /// Messages of the conversation already counted, and their tokens.
    counted: usize,
    counted_tokens: u64,
    /// Tokens of the tool definitions the request carries.
    pub(super) tools: u64,
}

impl Estimates {
    /// Forgets the counted messages (after the conversation was rewritten).
    pub(super) fn reset_messages(&mut self) {
        self.counted = 0;
        self.counted_tokens = 0;
    }
}

/// The step's tools without `read_tool_output` while there is nothing to read: it is offered
/// from the first step after an output was cut or elided.
#[derive(Debug, Default)]
pub(super) struct ReaderOffer {
    /// The registry `without` was made from.
    source: Option<Arc<ToolRegistry>>,
    without: Arc<ToolRegistry>,
}

impl ReaderOffer {
    pub(super) fn offered(
        &mut self,
        config: &AgentConfig,
        registry: Arc<ToolRegistry>,
    ) -> Result<Arc<ToolRegistry>, Error> {
        let Some(store) = &config.output_store else {
            return Ok(registry);
        };
        if !store.is_empty() || registry.get(READ_TOOL_OUTPUT).is_none() {
            return Ok(registry);
        }
        if let Some(source) = &self.source
            && Arc::ptr_eq(source, &registry)
        {
            return Ok(self.without.clone());
        }
        let tools = registry
            .tools()
            .iter()
            .filter(|tool| tool.name() != READ_TOOL_OUTPUT)
            .cloned()
            .collect();
        self.without = Arc::new(ToolRegistry::from_tools(tools)?);
        self.source = Some(registry);
        Ok(self.without.clone())
    }
}

/// The estimated tokens of tool definitions.
pub(super) fn tools_tokens(tools: &[Tool]) -> u64 {
    tools
        .iter()
        .map(|tool| estimate_descriptor_tokens(tool.descriptor()))
        .sum()
}

/// Cuts a tool result to its budget (the tool's own, else the agent's), keeping the full
/// output in the agent's store. `read_tool_output` reads are bounded already.
pub(super) async fn fit_result(
    config: &AgentConfig,
    registry: &ToolRegistry,
    result: &mut ToolResult,
) {
    if result.name == READ_TOOL_OUTPUT {
        return;
    }
    let budget: Option<OutputBudget> = registry
        .get(&result.name)
        .and_then(Tool::output_budget)
        .or(config.output_budget);
    let Some(budget) = budget else {
        return;
    };
    // A tool's own budget is not validated like the agent's: never below the minimum.
    let budget = OutputBudget::tokens(budget.max_tokens().max(MIN_BUDGET_TOKENS));
    let Some(fitted) = fit_output(
        &result.output,
        &result.call_id,
        budget,
        estimator_kind(&*config.language_model),
    ) else {
        return;
    };
    tracing::debug!(
        tool = %result.name,
        id = %result.call_id,
        bytes = fitted.full_text.len(),
        "tool output cut to its budget"
    );
    if let Some(store) = &config.output_store {
        store.put(&result.call_id, fitted.full_text).await;
    }
    result.output = fitted.output;
}

/// The window and the output reserve for `model`: the agent's window, else the model's own
/// (when `model` is the agent's model), else the one known for `model`'s name.
pub(super) fn window_and_reserve(
    config: &AgentConfig,
    model: &str,
    step_model: Option<&dyn LanguageModel>,
) -> (u64, u64) {
    let window = config
        .context_window
        .or_else(|| match step_model {
            Some(step_model) => step_model.context_window(),
            None => (model == config.model)
                .then(|| config.language_model.context_window())
                .flatten(),
        })
        .unwrap_or_else(|| context_window_for(model));
    let reserve = config
        .max_output_tokens
        .map_or_else(|| DEFAULT_RESERVED_OUTPUT_TOKENS.min(window / 4), u64::from);
    (window, reserve)
}

/// [`Agent::compact`](super::Agent::compact): a forced compaction of `messages`.
pub(super) async fn compact(
    config: &AgentConfig,
    messages: &[Message],
) -> Result<(Vec<Message>, CompactionReport), Error> {
    let (window, reserve) = window_and_reserve(config, &config.model, None);
    let (advertised, _) = Deferral::new(&config.deferral, messages).select(&config.tools)?;
    let fixed = config.instructions.as_deref().map_or(0, estimate_tokens)
        + tools_tokens(advertised.tools());
    let compaction = Compaction {
        model: &*config.language_model,
        model_id: &config.model,
        fixed_tokens: fixed,
        target: window.saturating_sub(reserve),
        reserve,
        store: config.output_store.as_ref(),
        record_content: config.telemetry.record_content,
    };
    let mut messages = messages.to_vec();
    let report = compaction.run(&mut messages, true).await?;
    Ok((messages, report))
}

/// Compacts `request.messages` if the request would not fit the window minus the reserved
/// output. `step_local` messages (from `prepare_step`) are estimated afresh each time.
pub(super) async fn fit_window(
    config: &AgentConfig,
    request: &mut ModelRequest,
    estimates: &mut Estimates,
    step_local: bool,
    step_model: Option<&dyn LanguageModel>,
) -> Result<Option<CompactionReport>, Error> {
    let provider = estimator_kind(step_model.unwrap_or(&*config.language_model));
    let (window, reserve) = window_and_reserve(config, &request.model, step_model);
    let target = window.saturating_sub(reserve);
    let fixed = request.instructions.as_deref().map_or(0, estimate_tokens) + estimates.tools;
    let messages = if step_local {
        estimate_messages_tokens(&request.messages, provider)
    } else {
        if estimates.counted > request.messages.len() {
            estimates.reset_messages();
        }
        let new = request
            .messages
            .get(estimates.counted..)
            .unwrap_or_default();
        estimates.counted_tokens += estimate_messages_tokens(new, provider);
        estimates.counted = request.messages.len();
        estimates.counted_tokens
    };
    if fixed + messages <= target {
        return Ok(None);
    }
    // The step's model summarises: the request names it.
    let compaction = Compaction {
        model: step_model.unwrap_or(&*config.language_model),
        model_id: &request.model,
        fixed_tokens: fixed,
        target,
        reserve,
        store: config.output_store.as_ref(),
        record_content: config.telemetry.record_content,
    };
    // Changed in place step by step, so a cancelled compaction leaves a valid conversation.
    let outcome = compaction.run(&mut request.messages, false).await;
    estimates.reset_messages();
    let report = outcome?;
    tracing::info!(
        before = report.before_tokens,
        after = report.after_tokens,
        elided = report.elided_tool_results,
        summarized = report.summarized_messages,
        "conversation compacted"
    );
    Ok(Some(report))
}
