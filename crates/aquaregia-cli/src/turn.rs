//! One agent turn, shared by `run` and `chat`: the agent built from the common flags, its
//! events streamed as text or JSON, and the JSON summaries of `--output json|stream-json`.

use anyhow::Context;
use aquaregia::{
    Agent, AgentEvent, AgentOutput, CancellationToken, Client, Cost, Message, OutputBudget,
    PriceTable, StepResult, StopReason, Tool, ToolExecError, ToolOutput, Usage,
};
use aquaregia_mcp::McpToolset;
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::Arc;

use anyhow::bail;

use crate::agent_args::{AgentArgs, OutputFormat};
use crate::console::{Console, ConsoleHooks};
use crate::output::{self, Styles};
use crate::{prices, prompt_cache, telemetry};
use aquaregia::redact::StreamRedactor;

/// What one tool result may put into the model's context.
const TOOL_OUTPUT_BUDGET_TOKENS: u64 = 25_000;

/// The `task` subagent's tool (`--subagents`).
const TASK: &str = "task";

/// What the `task` subagent's tool tells the model.
const TASK_DESCRIPTION: &str = "Hands a self-contained task to a subagent: a fresh agent with \
     the same tools and no view of this conversation, which works on it step by step and \
     answers with its result. Use it for work that needs many tool calls whose details the \
     conversation does not need. Say in `task` everything the subagent needs to know.";

/// The model in use (`chat` switches it with `/model`).
pub(crate) struct Model {
    pub(crate) client: Client,
    /// The model id the provider knows.
    pub(crate) id: String,
    /// `provider:model`, as given.
    pub(crate) spec: String,
}

impl Model {
    pub(crate) fn new(spec: &str) -> anyhow::Result<Self> {
        let (client, id) =
            Client::from_model_spec(spec).with_context(|| format!("cannot use model `{spec}`"))?;
        Ok(Self {
            client,
            id,
            spec: spec.to_owned(),
        })
    }
}

/// Builds the agent for one turn; its requests share the provider's prompt cache under
/// `cache_key` (the conversation's, a fork's being its parent's).
pub(crate) fn agent(
    args: &AgentArgs,
    (model, cache_key): (&Model, &str),
    prices: &PriceTable,
    tools: Vec<Tool>,
    toolset: &McpToolset,
    console: &Arc<Console>,
    cancel: CancellationToken,
) -> anyhow::Result<Agent> {
    let client = &model.client;
    let base = || {
        let mut agent = client
            .agent(&model.id)
            .price_table(prices.clone())
            // Tools added or removed mid-run (`tools/list_changed`) reach the next step.
            .prepare_step(toolset.prepare_step())
            .prompt_caching(prompt_cache::for_session(client, cache_key))
            // Long tool results reach the model cut to head and tail; `read_tool_output`
            // reads on.
            .tool_output_budget(OutputBudget::tokens(TOOL_OUTPUT_BUDGET_TOKENS))
            .telemetry(telemetry::agent_telemetry());
        if let Some(system) = &args.system {
            agent = agent.instructions(system);
        }
        if !args.yes {
            // One question at a time, and no spinner redrawing over a question.
            agent = agent.max_tool_concurrency(1);
        }
        agent
    };
    let mut tools = tools;
    if args.subagents {
        // Its calls are asked about and shown by the turn's console (one level in).
        let task = base()
            .tools(tools.clone())
            .max_steps(args.subagent_max_steps as usize)
            .build()?;
        tools.push(task.into_tool(TASK, TASK_DESCRIPTION));
    }
    Ok(base()
        .tools(tools)
        .max_steps(args.max_steps as usize)
        .cancellation_token(cancel)
        .hooks(ConsoleHooks::new(console.clone()))
        .build()?)
}

/// Runs one turn on `messages` (the history plus the new prompt), printing as `format` says;
/// returns the output (whatever its stop reason).
pub(crate) async fn run(
    agent: &Agent,
    messages: Vec<Message>,
    console: &Console,
    format: OutputFormat,
    show_reasoning: bool,
) -> anyhow::Result<AgentOutput> {
    let styles = Styles::stderr();
    // Reasoning goes to stderr, dimmed, and only to a person watching.
    let show_reasoning = show_reasoning && format == OutputFormat::Text && styles.enabled();
    let mut reasoning_open = false;
    // Streamed text is redacted piece by piece, holding back what could begin a secret; what
    // is held is shown before anything else is.
    let (mut text_held, mut reasoning_held) = (StreamRedactor::new(), StreamRedactor::new());
    let mut events = agent.stream(messages);
    console.start_thinking();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                console.stop_thinking();
                return Err(error.into());
            }
        };
        match &event {
            // The model is called again with the tools' results.
            AgentEvent::StepFinish(step) if !step.tool_calls.is_empty() => {
                console.start_thinking();
            }
            AgentEvent::StepFinish(_) => {}
            _ => console.stop_thinking(),
        }
        if format == OutputFormat::StreamJson {
            let lines = match &event {
                AgentEvent::TextDelta(text) => {
                    vec![json!({"type": "text", "text": text_held.push(text)})]
                }
                AgentEvent::ReasoningDelta(text) => {
                    vec![json!({"type": "reasoning", "text": reasoning_held.push(text)})]
                }
                _ => [
                    json!({"type": "text", "text": text_held.finish()}),
                    json!({"type": "reasoning", "text": reasoning_held.finish()}),
                ]
                .into_iter()
                .chain(event_json(&event))
                .collect(),
            };
            for line in lines {
                if line["text"] != "" {
                    output::write_stdout(&format!("{line}\n"))?;
                }
            }
        }
        if show_reasoning && !matches!(event, AgentEvent::ReasoningDelta(_)) {
            let held = reasoning_held.finish();
            if !held.is_empty() {
                eprint!("{}", styles.dim(&output::clean(&held)));
                reasoning_open = !held.ends_with('\n');
            }
        }
        match event {
            AgentEvent::ReasoningDelta(text) if show_reasoning => {
                let text = reasoning_held.push(&text);
                if !text.is_empty() {
                    eprint!("{}", styles.dim(&output::clean(&text)));
                    reasoning_open = !text.ends_with('\n');
                }
            }
            AgentEvent::TextDelta(text) if format == OutputFormat::Text => {
                if std::mem::take(&mut reasoning_open) {
                    eprintln!();
                }
                console.answer.write(&text)?;
            }
            AgentEvent::ToolProgress {
                id,
                progress,
                total,
                message,
            } => console.tool_progress(0, &id, progress, total, message.as_deref()),
            AgentEvent::ToolCallFinish { id, result, .. } => console.abandoned(0, &id, &result),
            AgentEvent::SubAgent { event, .. } => subagent_event(console, 1, *event),
            AgentEvent::Finish(output) => {
                if format == OutputFormat::Text {
                    console.answer.end()?;
                }
                return Ok(output);
            }
            _ => {}
        }
    }
    console.stop_thinking();
    bail!("the agent stopped without an answer")
}

/// A subagent's event, `depth` levels in: its calls' progress and the calls it gave up on.
fn subagent_event(console: &Console, depth: usize, event: AgentEvent) {
    match event {
        AgentEvent::ToolProgress {
            id,
            progress,
            total,
            message,
        } => console.tool_progress(depth, &id, progress, total, message.as_deref()),
        AgentEvent::ToolCallFinish { id, result, .. } => console.abandoned(depth, &id, &result),
        AgentEvent::SubAgent { event, .. } => subagent_event(console, depth + 1, *event),
        _ => {}
    }
}

/// One `stream-json` line for an event (`None` for the final one, printed by the caller with
/// the session id).
fn event_json(event: &AgentEvent) -> Option<Value> {
    Some(match event {
        AgentEvent::TextDelta(text) => json!({"type": "text", "text": text}),
        AgentEvent::ReasoningDelta(text) => json!({"type": "reasoning", "text": text}),
        AgentEvent::ToolCallStart {
            id,
            name,
            arguments,
        } => json!({"type": "tool_call", "id": id, "name": name, "arguments": arguments}),
        AgentEvent::ToolCallFinish { id, name, result } => {
            let mut line = result_json(result);
            line["type"] = json!("tool_result");
            line["id"] = json!(id);
            line["name"] = json!(name);
            line
        }
        AgentEvent::ToolProgress {
            id,
            progress,
            total,
            message,
        } => json!({"type": "tool_progress", "id": id, "progress": progress, "total": total,
                    "message": message}),
        AgentEvent::StepFinish(step) => step_json(step),
        AgentEvent::SubAgent { id, name, event } => {
            json!({"type": "subagent", "id": id, "name": name, "event": event_json(event)?})
        }
        _ => return None,
    })
}

fn step_json(step: &StepResult) -> Value {
    json!({
        "type": "step",
        "index": step.index,
        "model": step.model,
        "finishReason": step.finish_reason,
        "usage": usage_json(&step.usage),
    })
}

/// `{"output": ..., "isError": ...}` for a tool call's result.
fn result_json(result: &Result<ToolOutput, ToolExecError>) -> Value {
    match result {
        Ok(output) => json!({"output": output.to_value(), "isError": false}),
        Err(error) => json!({"output": error.to_string(), "isError": true}),
    }
}

pub(crate) fn usage_json(usage: &Usage) -> Value {
    json!({
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cachedInputTokens": usage.cached_input_tokens,
        "reasoningTokens": usage.reasoning_tokens,
        "totalTokens": usage.total_tokens(),
    })
}

pub(crate) fn stop_reason_name(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Finished => "finished",
        StopReason::MaxSteps => "max_steps",
        StopReason::Length => "length",
        StopReason::Refusal => "refusal",
        StopReason::Cancelled => "cancelled",
        _ => "other",
    }
}

/// `tokens: ...` for `--usage` and `/usage`, and the cost when the model's price is known.
pub(crate) fn usage_line(usage: &Usage, cost: Option<&Cost>) -> String {
    let mut line = format!(
        "tokens: {} in ({} cached), {} out ({} reasoning), {} total",
        usage.input_tokens,
        usage.cached_input_tokens,
        usage.output_tokens,
        usage.reasoning_tokens,
        usage.total_tokens()
    );
    if let Some(cost) = cost {
        line.push_str(&format!("; cost {}", prices::dollars(cost)));
    }
    line
}

/// `{"total": ..., "input": ..., ...}` in USD, or `null` when the model has no known price.
pub(crate) fn cost_json(cost: Option<&Cost>) -> Value {
    cost.map_or(Value::Null, |cost| {
        json!({
            "currency": "USD",
            "total": cost.total(),
            "input": cost.input,
            "cachedInput": cost.cached_input,
            "cacheWrite": cost.cache_write,
            "output": cost.output,
        })
    })
}

/// The `--output json` object (and the last `stream-json` line, `"type": "result"`).
pub(crate) fn summary_json(output: &AgentOutput, model: &str, session: Option<&str>) -> Value {
    let tool_calls: Vec<Value> = output
        .steps
        .iter()
        .flat_map(|step| &step.tool_calls)
        .map(|outcome| {
            let mut call = result_json(&outcome.result);
            call["id"] = json!(outcome.call.id);
            call["name"] = json!(outcome.call.name);
            call["arguments"] = outcome.call.arguments.clone();
            call
        })
        .collect();
    json!({
        "type": "result",
        "text": output.text,
        "stopReason": stop_reason_name(output.stop_reason),
        "toolCalls": tool_calls,
        "usage": usage_json(&output.usage),
        "cost": cost_json(output.cost.as_ref()),
        "steps": output.steps.len(),
        "model": model,
        "sessionId": session,
    })
}
