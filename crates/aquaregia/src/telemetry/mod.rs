//! Spans that follow the OpenTelemetry GenAI semantic conventions: `invoke_agent` for a run,
//! `chat` for each model call, `execute_tool` for each tool call (the MCP client adds its own
//! `tools/call` spans under them). They are `tracing` spans with the target
//! [`TELEMETRY_TARGET`], so they cost next to nothing while no subscriber wants them; with the
//! `otel` feature, `tracing-opentelemetry` turns them into OpenTelemetry spans (`otel.name`,
//! `otel.kind` and `otel.status_code` fields are its conventions).

mod content;
#[cfg(feature = "otel")]
pub(crate) mod otel;

use tracing::Span;
use tracing::field::Empty;

use crate::error::Error;
use crate::message::ToolCall;
use crate::model::{FinishReason, LanguageModel, ModelRequest, ModelResponse, Usage};
use crate::tool::{ToolExecError, ToolOutput};

/// The `tracing` target of aquaregia's GenAI spans (`invoke_agent`, `chat`, `execute_tool`,
/// and MCP `tools/call`): enable it at `INFO` for the layer that exports them, e.g.
/// `tracing_subscriber::filter::Targets::new().with_target(aquaregia::TELEMETRY_TARGET, Level::INFO)`.
pub const TELEMETRY_TARGET: &str = "gen_ai";

/// What the agent's spans record beyond the GenAI semantic conventions' defaults.
///
/// Prompts, answers, tool arguments and tool results are only recorded when
/// [`record_content`](Self::record_content) is set: they may hold secrets or personal data.
///
/// ```
/// let telemetry = aquaregia::Telemetry::new().agent_name("support").record_content(true);
/// # let _ = telemetry;
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct Telemetry {
    /// Record `gen_ai.input.messages`, `gen_ai.output.messages`,
    /// `gen_ai.system_instructions`, `gen_ai.tool.call.arguments` and
    /// `gen_ai.tool.call.result`.
    pub record_content: bool,
    /// `gen_ai.agent.name`, also in the `invoke_agent` span's name.
    pub agent_name: Option<String>,
    /// `gen_ai.conversation.id`: the session or thread the run belongs to.
    pub conversation_id: Option<String>,
}

impl Telemetry {
    /// Nothing beyond the conventions' defaults: no content.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records prompts, answers and tool arguments and results on the spans.
    pub fn record_content(mut self, record: bool) -> Self {
        self.record_content = record;
        self
    }

    /// Names the agent (`gen_ai.agent.name`).
    pub fn agent_name(mut self, name: impl Into<String>) -> Self {
        self.agent_name = Some(name.into());
        self
    }

    /// Sets the conversation id (`gen_ai.conversation.id`).
    pub fn conversation_id(mut self, id: impl Into<String>) -> Self {
        self.conversation_id = Some(id.into());
        self
    }
}

/// The span of a whole run on `language_model`, asking for `model`.
pub(crate) fn agent_span(
    language_model: &dyn LanguageModel,
    model: &str,
    telemetry: &Telemetry,
) -> Span {
    let provider = language_model.provider_name();
    let name = telemetry.agent_name.as_deref();
    tracing::info_span!(
        target: TELEMETRY_TARGET,
        "invoke_agent",
        otel.name = %format_args!("invoke_agent{}{}", if name.is_some() { " " } else { "" }, name.unwrap_or_default()),
        otel.status_code = Empty,
        otel.status_description = Empty,
        error.type = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.provider.name = provider,
        gen_ai.system = provider,
        gen_ai.request.model = model,
        gen_ai.agent.name = name,
        gen_ai.conversation.id = telemetry.conversation_id.as_deref(),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        gen_ai.usage.reasoning.output_tokens = Empty,
    )
}

/// Records a run's total usage, or its error.
pub(crate) fn record_run<T>(span: &Span, usage: Option<&Usage>, result: &Result<T, Error>) {
    if span.is_disabled() {
        return;
    }
    if let Some(usage) = usage {
        record_usage(span, usage);
    }
    if let Err(error) = result {
        record_error(span, error);
    }
}

/// The span of one call of `model`. `content` records the request's messages and
/// instructions.
pub(crate) fn chat_span(
    model: &dyn LanguageModel,
    request: &ModelRequest,
    streaming: bool,
    content: bool,
) -> Span {
    let provider = model.provider_name();
    let server = model.server_address();
    let span = tracing::info_span!(
        target: TELEMETRY_TARGET,
        "chat",
        otel.name = %format_args!("chat {}", request.model),
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
        error.type = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.system = provider,
        gen_ai.request.model = %request.model,
        gen_ai.request.max_tokens = request.max_output_tokens.map(i64::from),
        gen_ai.request.temperature = request.temperature.map(f64::from),
        gen_ai.request.stream = streaming,
        gen_ai.output.type = request.output_schema.as_ref().map(|_| "json"),
        server.address = server.map(|(host, _)| host),
        server.port = server.and_then(|(_, port)| port).map(i64::from),
        gen_ai.response.id = Empty,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        gen_ai.usage.reasoning.output_tokens = Empty,
        gen_ai.system_instructions = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if content {
        if let Some(instructions) = &request.instructions {
            span.record(
                "gen_ai.system_instructions",
                content::instructions(instructions).as_str(),
            );
        }
        span.record(
            "gen_ai.input.messages",
            content::messages(&request.messages).as_str(),
        );
    }
    span
}

/// Records a model call's outcome on its span.
pub(crate) fn record_chat(span: &Span, result: &Result<ModelResponse, Error>, content: bool) {
    if span.is_disabled() {
        return;
    }
    let response = match result {
        Ok(response) => response,
        Err(error) => {
            record_error(span, error);
            return;
        }
    };
    if let Some(id) = &response.id {
        span.record("gen_ai.response.id", id.as_str());
    }
    if let Some(model) = &response.model {
        span.record("gen_ai.response.model", model.as_str());
    }
    record_usage(span, &response.usage);
    let reason = finish_reason(&response.finish_reason);
    #[cfg(feature = "otel")]
    otel::set_finish_reasons(span, reason);
    if content {
        span.record(
            "gen_ai.output.messages",
            content::output(&response.message, reason).as_str(),
        );
    }
}

/// An OpenTelemetry int: `tracing-opentelemetry` records `u64` fields as strings, `i64` as
/// ints.
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Input and output tokens always; cache reads and writes and reasoning tokens when there
/// were some.
fn record_usage(span: &Span, usage: &Usage) {
    span.record("gen_ai.usage.input_tokens", int(usage.input_tokens));
    span.record("gen_ai.usage.output_tokens", int(usage.output_tokens));
    for (field, tokens) in [
        (
            "gen_ai.usage.cache_read.input_tokens",
            usage.cached_input_tokens,
        ),
        (
            "gen_ai.usage.cache_creation.input_tokens",
            usage.cache_write_tokens,
        ),
        (
            "gen_ai.usage.reasoning.output_tokens",
            usage.reasoning_tokens,
        ),
    ] {
        if tokens > 0 {
            span.record(field, int(tokens));
        }
    }
}

/// `gen_ai.response.finish_reasons` values.
fn finish_reason(reason: &FinishReason) -> &str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(other) => other,
    }
}

fn record_error(span: &Span, error: &Error) {
    span.record("otel.status_code", "error");
    span.record("otel.status_description", error.to_string().as_str());
    let kind = match error {
        Error::Provider { status, .. } => return record_status(span, *status),
        Error::Stream { .. } => "stream_error",
        Error::Transport { .. } => "transport_error",
        Error::Timeout { .. } => "timeout",
        Error::Decode { .. } => "decode_error",
        Error::InvalidRequest(_) => "invalid_request",
        Error::Config(_) | Error::MissingApiKey { .. } | Error::ToolRegistry(_) => "config_error",
        Error::Tool { .. } => "tool_error",
        Error::StructuredOutput { .. } => "structured_output_error",
        Error::ContextWindowExceeded { .. } => "context_window_exceeded",
        Error::Cancelled => "cancelled",
        _ => "_OTHER",
    };
    span.record("error.type", kind);
}

fn record_status(span: &Span, status: u16) {
    span.record("error.type", status.to_string().as_str());
}

/// The span of one tool call.
pub(crate) fn tool_span(call: &ToolCall, content: bool) -> Span {
    let span = tracing::info_span!(
        target: TELEMETRY_TARGET,
        "execute_tool",
        otel.name = %format_args!("execute_tool {}", call.name),
        otel.status_code = Empty,
        otel.status_description = Empty,
        error.type = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = "function",
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
    );
    if content && !span.is_disabled() {
        span.record(
            "gen_ai.tool.call.arguments",
            call.arguments.to_string().as_str(),
        );
    }
    span
}

/// Records a tool call's outcome on its span.
pub(crate) fn record_tool(span: &Span, result: &Result<ToolOutput, ToolExecError>, content: bool) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(output) => {
            if content {
                span.record("gen_ai.tool.call.result", output.to_text().as_str());
            }
        }
        Err(error) => {
            let kind = match error {
                ToolExecError::Execution(_) | ToolExecError::Failed(_) => "tool_error",
                ToolExecError::InvalidArguments(_) => "invalid_arguments",
                ToolExecError::Timeout => "timeout",
                ToolExecError::UnknownTool(_) => "unknown_tool",
                ToolExecError::Denied(_) => "denied",
                ToolExecError::Cancelled => "cancelled",
            };
            span.record("otel.status_code", "error");
            span.record("otel.status_description", error.to_string().as_str());
            span.record("error.type", kind);
        }
    }
}
