//! Chat Completions (`POST /chat/completions`): OpenAI and every compatible server.

mod request;

use std::borrow::Cow;
use std::collections::VecDeque;
use std::marker::PhantomData;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::encode::{BodyWriter, OpenItem, append_item};
use super::{Api, KeyPolicy, ProviderInfo, base_url_as_is, bearer_auth, new_call_id, plain_route};
use super::{
    AssistantBuilder, StreamDecoder, WireApi, object_schema, parse_arguments, parse_json,
    system_text,
};
use crate::error::Error;
use crate::http::sse::SseEvent;
use crate::message::{ContentPart, Message, Reasoning, ToolCall};
use crate::model::ProviderKind;
use crate::model::{FinishReason, ModelRequest, ModelResponse, StreamEvent, ToolChoice, Usage};
use crate::tool::ToolDescriptor;
pub(crate) use request::{arguments_text, image_url};

/// Chat Completions: OpenAI, or any compatible server at `OPENAI_BASE_URL` (the key is then
/// optional).
pub(crate) static OPENAI_CHAT: ProviderInfo = ProviderInfo {
    id: "openai-chat",
    kind: ProviderKind::OpenAiChat,
    api_key_vars: &["OPENAI_API_KEY"],
    token_vars: &[],
    base_url_vars: &["OPENAI_BASE_URL"],
    default_base_url: OPENAI_BASE_URL,
    key: KeyPolicy::UnlessBaseUrl,
    normalize_base_url: base_url_as_is,
    signer: None,
    route: plain_route,
    auth_header: bearer_auth,
    static_headers: &[],
    default_model: None,
    known_models: None,
    api: &Api::<OpenAiChat>::new(),
};

/// OpenAI's API root, shared with the Responses provider.
pub(crate) const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// How one server's Chat Completions differs from OpenAI's: the compatible presets
/// ([`compatible`](super::compatible)) and Azure set these.
pub(crate) trait ChatDialect: Send + Sync + 'static {
    /// The provider's name in errors.
    const NAME: &'static str;
    /// The body field holding `max_output_tokens` (`max_tokens` where a server does not know
    /// OpenAI's newer `max_completion_tokens`).
    const MAX_TOKENS_FIELD: &'static str = "max_completion_tokens";
    /// Whether streamed requests ask for usage with `stream_options` (servers that reject
    /// unknown fields and send usage anyway, like Mistral, get none).
    const STREAM_OPTIONS: bool = true;
    /// Whether an assistant message's reasoning goes back as `reasoning_content` (DeepSeek
    /// rejects a conversation whose tool-calling turns lost it).
    const REASONING_BACK: bool = false;

    /// The path of a request on `model`.
    fn path(_model: &str) -> Cow<'static, str> {
        Cow::Borrowed("/chat/completions")
    }
}

/// OpenAI's own Chat Completions (and servers that follow it to the letter).
pub(crate) struct OpenAi;

impl ChatDialect for OpenAi {
    const NAME: &'static str = "openai-chat";
}

/// The Chat Completions wire API as dialect `D` speaks it.
pub(crate) struct OpenAiChat<D = OpenAi>(PhantomData<fn() -> D>);

impl<D: ChatDialect> WireApi for OpenAiChat<D> {
    const NAME: &'static str = D::NAME;
    const PATH: &'static str = "/chat/completions";
    type Decoder = ChatDecoder<D>;

    fn path(model: &str, _stream: bool) -> Cow<'static, str> {
        D::path(model)
    }

    const HISTORY_FIELD: &'static str = "messages";

    fn write_leading_item(request: &ModelRequest, out: &mut Vec<u8>) -> Result<(), Error> {
        match system_text(request) {
            Some(system) => append_item(
                out,
                &request::WireMessage::new("system", request::Content::Text(system)),
            ),
            None => Ok(()),
        }
    }

    fn encode_messages(
        _request: &ModelRequest,
        messages: &[Message],
        sealed: &mut Vec<u8>,
        _open: &mut OpenItem,
    ) -> Result<usize, Error> {
        for message in messages {
            request::write_message(sealed, message, D::REASONING_BACK)?;
        }
        Ok(messages.len())
    }

    fn tool_definition(d: &ToolDescriptor) -> Value {
        json!({"type": "function", "function": {
            "name": d.name,
            "description": d.description,
            "parameters": object_schema(&d.input_schema),
        }})
    }

    fn body_fields(
        request: &ModelRequest,
        stream: bool,
        body: &mut BodyWriter<'_>,
    ) -> Result<(), Error> {
        if let Some(max) = request.max_output_tokens {
            body.field(D::MAX_TOKENS_FIELD, &max)?;
        }
        body.field("model", &request.model)?;
        if let Some(key) = &request.prompt_caching.key {
            body.field("prompt_cache_key", key)?;
        }
        if let Some(schema) = &request.output_schema {
            let (wire, strict) = schema.openai_schema();
            let mut format = json!({"name": schema.name(), "schema": wire, "strict": strict});
            if let Some(description) = schema.description_text() {
                format["description"] = json!(description);
            }
            let format = json!({"type": "json_schema", "json_schema": format});
            body.field("response_format", &format)?;
        }
        if stream {
            body.field("stream", &true)?;
        }
        if stream && D::STREAM_OPTIONS {
            body.field(
                "stream_options",
                &StreamOptions {
                    include_usage: true,
                },
            )?;
        }
        if let Some(temperature) = request.temperature {
            body.field("temperature", &f64::from(temperature))?;
        }
        if !request.tools.is_empty() {
            body.field("tool_choice", &tool_choice(&request.tool_choice))?;
        }
        Ok(())
    }

    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
        let response: ChatResponse = parse_json(D::NAME, body)?;
        let choice = response
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| super::decode_error(D::NAME, "the response has no choices", body))?;
        let mut builder = AssistantBuilder::default();
        if let Some(reasoning) = choice.message.reasoning() {
            builder.parts.push(ContentPart::Reasoning(Reasoning {
                text: reasoning.to_owned(),
                ..Reasoning::default()
            }));
        }
        if let Some(text) = choice.message.content.as_deref().filter(|t| !t.is_empty()) {
            builder.push_text(text);
        }
        if let Some(refusal) = choice.message.refusal.as_deref().filter(|t| !t.is_empty()) {
            builder.push_text(refusal);
        }
        for call in choice.message.tool_calls.unwrap_or_default() {
            builder.parts.push(ContentPart::ToolCall(ToolCall {
                id: call
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(new_call_id),
                name: call.function.name.unwrap_or_default(),
                arguments: parse_arguments(call.function.arguments.as_deref().unwrap_or("")),
            }));
        }
        let refused = choice.message.refusal.is_some_and(|r| !r.is_empty());
        Ok(ModelResponse {
            finish_reason: finish_reason(choice.finish_reason.as_deref(), refused, &builder),
            message: builder.into_message(),
            usage: response
                .usage
                .map(ChatUsage::into_usage)
                .unwrap_or_default(),
            id: response.id,
            model: response.model,
        })
    }
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// `tool_choice`: a mode, or `{"function": {"name"}, "type": "function"}`.
#[derive(Serialize)]
#[serde(untagged)]
enum WireToolChoice<'a> {
    Mode(&'static str),
    Function {
        function: FunctionName<'a>,
        #[serde(rename = "type")]
        kind: &'static str,
    },
}

#[derive(Serialize)]
struct FunctionName<'a> {
    name: &'a str,
}

fn tool_choice(choice: &ToolChoice) -> WireToolChoice<'_> {
    match choice {
        ToolChoice::Auto => WireToolChoice::Mode("auto"),
        ToolChoice::None => WireToolChoice::Mode("none"),
        ToolChoice::Required => WireToolChoice::Mode("required"),
        ToolChoice::Tool(name) => WireToolChoice::Function {
            function: FunctionName { name },
            kind: "function",
        },
    }
}

fn finish_reason(reason: Option<&str>, refused: bool, builder: &AssistantBuilder) -> FinishReason {
    match reason {
        _ if refused => FinishReason::ContentFilter,
        Some("stop") | None if builder.has_tool_calls() => FinishReason::ToolCalls,
        Some("stop") | Some("end_turn") | None => FinishReason::Stop,
        Some("tool_calls") | Some("function_call") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

#[derive(Deserialize)]
struct ChatResponse {
    id: Option<String>,
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChatChoice>,
    usage: Option<ChatUsage>,
}

#[derive(Deserialize)]
struct ChatChoice {
    message: ChatMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChatMessage {
    content: Option<String>,
    refusal: Option<String>,
    /// DeepSeek and vLLM.
    reasoning_content: Option<String>,
    /// Ollama and OpenRouter.
    reasoning: Option<String>,
    tool_calls: Option<Vec<ChatToolCall>>,
}

impl ChatMessage {
    fn reasoning(&self) -> Option<&str> {
        self.reasoning_content
            .as_deref()
            .or(self.reasoning.as_deref())
            .filter(|r| !r.is_empty())
    }
}

#[derive(Deserialize)]
struct ChatToolCall {
    #[serde(default)]
    index: Option<usize>,
    id: Option<String>,
    #[serde(default)]
    function: ChatFunction,
}

#[derive(Deserialize, Default)]
struct ChatFunction {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
    /// DeepSeek's count of cached prompt tokens.
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl ChatUsage {
    fn into_usage(self) -> Usage {
        Usage {
            input_tokens: self.prompt_tokens,
            output_tokens: self.completion_tokens,
            cached_input_tokens: self
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .or(self.prompt_cache_hit_tokens)
                .unwrap_or(0),
            cache_write_tokens: 0,
            reasoning_tokens: self
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
        }
    }
}

#[derive(Deserialize)]
struct ChatChunk {
    id: Option<String>,
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<ChatUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<ChunkDelta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChunkDelta {
    content: Option<String>,
    refusal: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Option<Vec<ChatToolCall>>,
}

/// Streaming state: text, reasoning and tool calls (by `index`) as they arrive.
pub(crate) struct ChatDecoder<D> {
    dialect: PhantomData<fn() -> D>,
    id: Option<String>,
    model: Option<String>,
    reasoning: String,
    text: AssistantBuilder,
    refused: bool,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Usage,
}

impl<D> Default for ChatDecoder<D> {
    fn default() -> Self {
        Self {
            dialect: PhantomData,
            id: None,
            model: None,
            reasoning: String::new(),
            text: AssistantBuilder::default(),
            refused: false,
            calls: Vec::new(),
            finish_reason: None,
            usage: Usage::default(),
        }
    }
}

struct PartialCall {
    index: usize,
    id: String,
    name: String,
    arguments: String,
}

impl<D: ChatDialect> StreamDecoder for ChatDecoder<D> {
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, Error> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: ChatChunk = parse_json(D::NAME, data.as_bytes())?;
        if let Some(error) = chunk.error {
            return Err(super::stream_error(D::NAME, &error));
        }
        if self.id.is_none() {
            self.id = chunk.id;
        }
        if self.model.is_none() {
            self.model = chunk.model;
        }
        if let Some(usage) = chunk.usage {
            self.usage = usage.into_usage();
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                self.on_delta(delta, out);
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        Ok(false)
    }

    fn finish(self, complete: bool) -> Result<ModelResponse, Error> {
        // Some compatible servers end without `[DONE]`; a finish reason is proof enough.
        if !complete && self.finish_reason.is_none() {
            return Err(Error::Decode {
                provider: D::NAME,
                message: "the stream ended before the response was complete".into(),
                body: String::new(),
            });
        }
        let mut builder = AssistantBuilder::default();
        if !self.reasoning.is_empty() {
            builder.parts.push(ContentPart::Reasoning(Reasoning {
                text: self.reasoning,
                ..Reasoning::default()
            }));
        }
        builder.parts.extend(self.text.parts);
        for call in self.calls {
            builder.parts.push(ContentPart::ToolCall(ToolCall {
                id: call.id,
                name: call.name,
                arguments: parse_arguments(&call.arguments),
            }));
        }
        Ok(ModelResponse {
            finish_reason: finish_reason(self.finish_reason.as_deref(), self.refused, &builder),
            message: builder.into_message(),
            usage: self.usage,
            id: self.id,
            model: self.model,
        })
    }
}

impl<D> ChatDecoder<D> {
    fn on_delta(&mut self, delta: ChunkDelta, out: &mut VecDeque<StreamEvent>) {
        if let Some(reasoning) = delta
            .reasoning_content
            .or(delta.reasoning)
            .filter(|r| !r.is_empty())
        {
            self.reasoning.push_str(&reasoning);
            out.push_back(StreamEvent::ReasoningDelta(reasoning));
        }
        for text in [
            delta.content,
            delta.refusal.inspect(|_| self.refused = true),
        ]
        .into_iter()
        .flatten()
        .filter(|t| !t.is_empty())
        {
            self.text.push_text(&text);
            out.push_back(StreamEvent::TextDelta(text));
        }
        for call in delta.tool_calls.unwrap_or_default() {
            let index = call.index.unwrap_or(self.calls.len());
            let position = match self.calls.iter().position(|c| c.index == index) {
                Some(position) => position,
                None => {
                    let id = call
                        .id
                        .clone()
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(new_call_id);
                    let name = call.function.name.clone().unwrap_or_default();
                    out.push_back(StreamEvent::ToolCallStart {
                        id: id.clone(),
                        name: name.clone(),
                    });
                    self.calls.push(PartialCall {
                        index,
                        id,
                        name,
                        arguments: String::new(),
                    });
                    self.calls.len() - 1
                }
            };
            let partial = &mut self.calls[position];
            if let Some(arguments) = call.function.arguments.filter(|a| !a.is_empty()) {
                partial.arguments.push_str(&arguments);
                out.push_back(StreamEvent::ToolCallDelta {
                    id: partial.id.clone(),
                    arguments,
                });
            }
        }
    }
}
