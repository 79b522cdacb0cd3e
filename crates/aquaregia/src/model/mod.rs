//! Provider-neutral request and response types: what goes to a model and what comes back; and
//! [`LanguageModel`], what answers them.

mod fallback;
mod generate;
mod language_model;
mod window;

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Error;
use crate::message::Message;
use crate::prompt_cache::PromptCaching;
use crate::structured::OutputSchema;
use crate::tool::ToolDescriptor;

pub(crate) use crate::usage::Usage;
pub use fallback::Fallback;
pub use generate::{GeneratedObject, generate_object};
pub(crate) use language_model::response_events;
pub use language_model::{LanguageModel, ModelState};
pub use window::{DEFAULT_CONTEXT_WINDOW, context_window_for, known_context_window};

/// Which wire API a [`Client`](crate::Client) speaks.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// OpenAI Responses API (`POST /responses`).
    OpenAiResponses,
    /// Chat Completions (`POST /chat/completions`): OpenAI and every compatible server.
    OpenAiChat,
    /// Anthropic Messages API (`POST /v1/messages`).
    Anthropic,
    /// Google Gemini API (`POST /v1beta/models/{model}:generateContent`).
    Gemini,
    /// Amazon Bedrock's Converse API (`POST /model/{modelId}/converse`), with the `bedrock`
    /// feature.
    Bedrock,
}

/// One call to a model: what the agent loop sends each step, also usable directly with
/// [`LanguageModel::generate`], [`Client::generate`](crate::Client::generate) and
/// [`Client::stream`](crate::Client::stream).
#[non_exhaustive]
#[derive(Debug, Clone, Default)]
pub struct ModelRequest {
    /// The model id (`gpt-4o-mini`, `claude-sonnet-4-5`...).
    pub model: String,
    /// System instructions.
    pub instructions: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call, described (the request never needs their executors).
    pub tools: Vec<Arc<ToolDescriptor>>,
    /// Whether and which tools the model must call.
    pub tool_choice: ToolChoice,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Upper bound on generated tokens.
    pub max_output_tokens: Option<u32>,
    /// Extra top-level fields merged into the request body (provider-specific options such as
    /// Anthropic `thinking` or OpenAI `reasoning`). They override fields aquaregia sets.
    pub extra_body: Option<Map<String, Value>>,
    /// What the provider should cache (off by default).
    pub prompt_caching: PromptCaching,
    /// The JSON schema the answer must follow, if any; see
    /// [`Client::generate_object`](crate::Client::generate_object).
    pub output_schema: Option<OutputSchema>,
}

impl ModelRequest {
    /// A request for `model` with `messages`.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            messages,
            ..Self::default()
        }
    }

    /// Sets the system instructions.
    #[must_use]
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Sets the tools: [`ToolDescriptor`]s, or `Arc`s of them (what
    /// [`Tool::shared_descriptor`](crate::Tool::shared_descriptor) gives).
    #[must_use]
    pub fn tools<I>(mut self, tools: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<Arc<ToolDescriptor>>,
    {
        self.tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the tool choice.
    #[must_use]
    pub fn tool_choice(mut self, tool_choice: ToolChoice) -> Self {
        self.tool_choice = tool_choice;
        self
    }

    /// Sets the temperature.
    #[must_use]
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Sets the output token limit.
    #[must_use]
    pub fn max_output_tokens(mut self, max_output_tokens: u32) -> Self {
        self.max_output_tokens = Some(max_output_tokens);
        self
    }

    /// Sets what the provider should cache.
    #[must_use]
    pub fn prompt_caching(mut self, prompt_caching: PromptCaching) -> Self {
        self.prompt_caching = prompt_caching;
        self
    }

    /// Asks for an answer that is a JSON value of `schema`.
    #[must_use]
    pub fn output_schema(mut self, schema: OutputSchema) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Sets extra top-level body fields.
    #[must_use]
    pub fn extra_body(mut self, extra_body: Map<String, Value>) -> Self {
        self.extra_body = Some(extra_body);
        self
    }
}

/// Whether the model may, must or must not call tools.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool must be called.
    Tool(String),
}

/// A complete model answer.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// The assistant message: text, reasoning and tool calls in order.
    pub message: Message,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
    /// Token usage of this call.
    pub usage: Usage,
    /// The provider's response id.
    pub id: Option<String>,
    /// The model that answered, as the provider reports it.
    pub model: Option<String>,
}

impl ModelResponse {
    /// An answer: `message` (text, reasoning and tool calls in order), why it stopped; no
    /// usage, id or model (set them with the setters below).
    ///
    /// ```
    /// use aquaregia::{FinishReason, Message, ModelResponse};
    /// let response = ModelResponse::new(Message::assistant("Hi."), FinishReason::Stop)
    ///     .with_model("my-model");
    /// assert_eq!(response.text(), "Hi.");
    /// ```
    pub fn new(message: Message, finish_reason: FinishReason) -> Self {
        Self {
            message,
            finish_reason,
            usage: Usage::default(),
            id: None,
            model: None,
        }
    }

    /// Sets the token usage.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// Sets the provider's response id.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the model that answered.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The concatenated text of the answer.
    pub fn text(&self) -> String {
        self.message.text()
    }
}

/// Why the model stopped generating.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end of the answer.
    Stop,
    /// The model wants tool results.
    ToolCalls,
    /// The output token limit was reached.
    Length,
    /// The model refused or a content filter stopped it.
    ContentFilter,
    /// Anything else the provider said.
    Other(String),
}

/// An increment of a streamed model answer.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More answer text.
    TextDelta(String),
    /// More reasoning text.
    ReasoningDelta(String),
    /// A tool call began; its arguments follow in [`StreamEvent::ToolCallDelta`]s.
    ToolCallStart {
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// A fragment of a tool call's JSON arguments.
    ToolCallDelta {
        /// The call id.
        id: String,
        /// The next piece of the arguments' JSON text.
        arguments: String,
    },
    /// The answer is complete; always the last event of a successful stream.
    Finish(ModelResponse),
}

/// A streamed model answer.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, Error>> + Send>>;
