//! Anthropic Messages API (`POST /v1/messages`).

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Api, KeyPolicy, ProviderInfo, base_url_as_is};
use super::{
    AssistantBuilder, OutputPart, StreamDecoder, WireApi, decode_error, object_schema, output_text,
    parse_arguments, parse_json, stream_error, system_text, tool_output_parts,
};
use crate::client::ProviderKind;
use crate::error::Error;
use crate::http::sse::SseEvent;
use crate::message::{ContentPart, ImageSource, Message, Reasoning, Role, ToolCall, ToolResult};
use crate::model::{FinishReason, ModelRequest, ModelResponse, StreamEvent, ToolChoice, Usage};
use crate::tool::ToolDescriptor;
use reqwest::header::HeaderName;

/// Anthropic's Messages API.
pub(crate) static ANTHROPIC: ProviderInfo = ProviderInfo {
    id: "anthropic",
    kind: ProviderKind::Anthropic,
    api_key_vars: &["ANTHROPIC_API_KEY"],
    base_url_vars: &["ANTHROPIC_BASE_URL"],
    default_base_url: "https://api.anthropic.com",
    key: KeyPolicy::Required,
    normalize_base_url: base_url_as_is,
    auth_header: |key| (HeaderName::from_static("x-api-key"), key.to_owned()),
    static_headers: &[("anthropic-version", "2023-06-01")],
    default_model: Some("claude-sonnet-4-5"),
    api: &Api::<Anthropic>::new(),
};

pub(crate) struct Anthropic;

const NAME: &str = "anthropic";

/// `max_tokens` is mandatory in this API; this applies when the request sets no limit.
const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The API rejects an error result without content.
const EMPTY_ERROR_TEXT: &str = "The tool failed without output.";

impl WireApi for Anthropic {
    const NAME: &'static str = NAME;
    const PATH: &'static str = "/v1/messages";
    type Decoder = AnthropicDecoder;

    const HISTORY_FIELD: &'static str = "messages";

    fn push_messages(_request: &ModelRequest, messages: &[Message], items: &mut Vec<Value>) {
        for message in messages {
            match message.role {
                Role::System => {} // sent as `system`
                Role::User | Role::Tool => {
                    let (results, blocks) = user_blocks(&message.content);
                    push_turn(items, "user", results, blocks);
                }
                Role::Assistant => {
                    push_turn(items, "assistant", Vec::new(), assistant_blocks(message));
                }
            }
        }
    }

    /// A message of one text block goes as a plain string, the form the API documents.
    fn seal_item(item: &mut Value) {
        let single_text = match item.get("content") {
            Some(Value::Array(blocks)) => match blocks.as_slice() {
                [block] if block["type"] == "text" => block.get("text").cloned(),
                _ => None,
            },
            _ => None,
        };
        if let Some(text) = single_text {
            item["content"] = text;
        }
    }

    fn tool_definition(d: &ToolDescriptor) -> Value {
        json!({
            "name": d.name,
            "description": d.description,
            "input_schema": object_schema(&d.input_schema),
        })
    }

    fn body_fields(request: &ModelRequest, stream: bool) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("model".into(), request.model.clone().into());
        body.insert(
            "max_tokens".into(),
            json!(request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
        );
        if let Some(system) = system_text(request) {
            body.insert("system".into(), Value::String(system));
        }
        if !request.tools.is_empty() {
            body.insert("tool_choice".into(), tool_choice(&request.tool_choice));
        }
        if let Some(temperature) = request.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        if stream {
            body.insert("stream".into(), Value::Bool(true));
        }
        body
    }

    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
        let response: MessageResponse = parse_json(NAME, body)?;
        if let Some(error) = response.error {
            return Err(stream_error(NAME, &error));
        }
        let content = response
            .content
            .ok_or_else(|| decode_error(NAME, "the response has no content", body))?;
        let mut builder = AssistantBuilder::default();
        for block in content {
            push_block(&mut builder, block);
        }
        Ok(ModelResponse {
            finish_reason: finish_reason(response.stop_reason.as_deref(), &builder),
            message: builder.into_message(),
            usage: response.usage.unwrap_or_default().into_usage(),
            id: response.id,
            model: response.model,
        })
    }
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
    }
}

/// Appends a message, or merges into the previous one when the role repeats: the API wants
/// strictly alternating roles (a tool message is a user message on this wire), with
/// `tool_result` blocks at the start of their user message.
fn push_turn(items: &mut Vec<Value>, role: &'static str, results: Vec<Value>, blocks: Vec<Value>) {
    if results.is_empty() && blocks.is_empty() {
        return; // the API rejects empty messages
    }
    if let Some(Value::Array(content)) = items
        .last_mut()
        .filter(|last| last["role"] == role)
        .and_then(|last| last.get_mut("content"))
    {
        let at = content
            .iter()
            .take_while(|block| block["type"] == "tool_result")
            .count();
        content.splice(at..at, results);
        content.extend(blocks);
        return;
    }
    let mut content = results;
    content.extend(blocks);
    items.push(json!({"role": role, "content": content}));
}

/// `tool_result` blocks and the other blocks of a user or tool message, kept apart so the
/// results can go first.
fn user_blocks(parts: &[ContentPart]) -> (Vec<Value>, Vec<Value>) {
    let mut results = Vec::new();
    let mut blocks = Vec::new();
    for part in parts {
        match part {
            ContentPart::Text { text } => blocks.extend(text_block(text)),
            ContentPart::Image { source } => blocks.push(image_block(source)),
            ContentPart::ToolResult(result) => results.push(tool_result_block(result)),
            _ => {}
        }
    }
    (results, blocks)
}

fn assistant_blocks(message: &Message) -> Vec<Value> {
    let mut blocks = Vec::new();
    for part in &message.content {
        match part {
            ContentPart::Reasoning(reasoning) => blocks.extend(thinking_block(reasoning)),
            ContentPart::Text { text } => blocks.extend(text_block(text)),
            ContentPart::ToolCall(call) => blocks.push(json!({
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": tool_input(&call.arguments),
            })),
            _ => {}
        }
    }
    blocks
}

/// Thinking goes back unchanged only with its signature (or as redacted data); the API
/// rejects unsigned thinking, and reasoning from other providers has no signature.
fn thinking_block(reasoning: &Reasoning) -> Option<Value> {
    if let Some(signature) = reasoning.signature.as_deref().filter(|s| !s.is_empty()) {
        return Some(json!({
            "type": "thinking",
            "thinking": reasoning.text,
            "signature": signature,
        }));
    }
    reasoning
        .encrypted_content
        .as_deref()
        .filter(|data| !data.is_empty())
        .map(|data| json!({"type": "redacted_thinking", "data": data}))
}

/// The API rejects empty and whitespace-only text blocks.
fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}))
}

fn image_block(source: &ImageSource) -> Value {
    match source {
        ImageSource::Base64 { mime_type, data } => base64_image(mime_type, data),
        // `url` sources must be fetchable, so data URLs are sent inline.
        ImageSource::Url { url } => match split_data_url(url) {
            Some((mime_type, data)) => base64_image(mime_type, data),
            None => json!({"type": "image", "source": {"type": "url", "url": url}}),
        },
    }
}

fn base64_image(mime_type: &str, data: &str) -> Value {
    json!({
        "type": "image",
        "source": {"type": "base64", "media_type": mime_type, "data": data},
    })
}

/// `data:<mime>;base64,<data>` into its parts.
fn split_data_url(url: &str) -> Option<(&str, &str)> {
    let (meta, data) = url.strip_prefix("data:")?.split_once(',')?;
    Some((meta.strip_suffix(";base64")?, data))
}

/// Text-only output goes as a string; with images, as text and image blocks in order.
fn tool_result_block(result: &ToolResult) -> Value {
    let parts = tool_output_parts(&result.output);
    let mut block = json!({"type": "tool_result", "tool_use_id": result.call_id});
    if parts.iter().any(|p| matches!(p, OutputPart::Image { .. })) {
        let content: Vec<Value> = parts
            .iter()
            .filter_map(|part| match part {
                OutputPart::Text(text) => text_block(text),
                OutputPart::Image { mime_type, data } => Some(base64_image(mime_type, data)),
            })
            .collect();
        block["content"] = Value::Array(content);
    } else {
        let text = output_text(&parts);
        if !text.trim().is_empty() {
            block["content"] = Value::String(text);
        } else if result.is_error {
            block["content"] = Value::String(EMPTY_ERROR_TEXT.to_owned());
        }
    }
    if result.is_error {
        block["is_error"] = Value::Bool(true);
    }
    block
}

/// `input` must be an object. Arguments that are JSON text of an object are sent as that
/// object; anything else (text that was not JSON, an array...) becomes `{}`: such a call
/// already failed the tool's schema check and its tool result tells the model why.
fn tool_input(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => object,
            _ => Value::Object(Map::new()),
        },
        _ => Value::Object(Map::new()),
    }
}

fn push_block(builder: &mut AssistantBuilder, block: Block) {
    match block {
        Block::Text { text } => {
            if !text.is_empty() {
                builder.push_text(&text);
            }
        }
        Block::Thinking {
            thinking,
            signature,
        } => {
            if !thinking.is_empty() || !signature.is_empty() {
                builder.parts.push(ContentPart::Reasoning(Reasoning {
                    text: thinking,
                    signature: (!signature.is_empty()).then_some(signature),
                    ..Reasoning::default()
                }));
            }
        }
        Block::RedactedThinking { data } => {
            if !data.is_empty() {
                builder.parts.push(ContentPart::Reasoning(Reasoning {
                    encrypted_content: Some(data),
                    ..Reasoning::default()
                }));
            }
        }
        Block::ToolUse { id, name, input } => {
            builder.parts.push(ContentPart::ToolCall(ToolCall {
                id,
                name,
                arguments: if input.is_null() {
                    Value::Object(Map::new())
                } else {
                    input
                },
            }));
        }
        Block::Other => {}
    }
}

fn finish_reason(reason: Option<&str>, builder: &AssistantBuilder) -> FinishReason {
    match reason {
        None if builder.has_tool_calls() => FinishReason::ToolCalls,
        None | Some("end_turn" | "stop_sequence" | "pause_turn") => FinishReason::Stop,
        Some("tool_use") => FinishReason::ToolCalls,
        Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
        Some("refusal") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

#[derive(Deserialize)]
struct MessageResponse {
    id: Option<String>,
    model: Option<String>,
    content: Option<Vec<Block>>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
    /// An error envelope sent with a success status by some proxies.
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Server tool blocks, citations and anything newer.
    #[serde(other)]
    Other,
}

/// Usage as sent; every field is optional because `message_delta` may carry only some.
#[derive(Deserialize, Default, Clone, Copy)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Takes the fields `newer` has: stream usage is cumulative, not incremental.
    fn update(&mut self, newer: WireUsage) {
        self.input_tokens = newer.input_tokens.or(self.input_tokens);
        self.output_tokens = newer.output_tokens.or(self.output_tokens);
        self.cache_creation_input_tokens = newer
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = newer
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
    }

    /// `input_tokens` excludes cache reads and writes; [`Usage::input_tokens`] includes them.
    fn into_usage(self) -> Usage {
        let cache_read = self.cache_read_input_tokens.unwrap_or(0);
        Usage {
            input_tokens: self.input_tokens.unwrap_or(0)
                + cache_read
                + self.cache_creation_input_tokens.unwrap_or(0),
            output_tokens: self.output_tokens.unwrap_or(0),
            cached_input_tokens: cache_read,
            reasoning_tokens: 0,
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Block,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDeltaBody,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        #[serde(default)]
        error: Value,
    },
    /// `ping`, `content_block_stop` and anything newer.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartMessage {
    id: Option<String>,
    model: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default)]
struct MessageDeltaBody {
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Delta {
    #[serde(rename = "text_delta")]
    Text {
        #[serde(default)]
        text: String,
    },
    #[serde(rename = "thinking_delta")]
    Thinking {
        #[serde(default)]
        thinking: String,
    },
    #[serde(rename = "signature_delta")]
    Signature {
        #[serde(default)]
        signature: String,
    },
    #[serde(rename = "input_json_delta")]
    InputJson {
        #[serde(default)]
        partial_json: String,
    },
    /// `citations_delta` and anything newer.
    #[serde(other)]
    Other,
}

/// Streaming state: content blocks by index as they arrive.
#[derive(Default)]
pub(crate) struct AnthropicDecoder {
    id: Option<String>,
    model: Option<String>,
    usage: WireUsage,
    stop_reason: Option<String>,
    blocks: BTreeMap<usize, PartialBlock>,
}

enum PartialBlock {
    Thinking {
        text: String,
        signature: String,
    },
    Redacted(String),
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The block's initial `input`, used when no `input_json_delta` follows.
        input: Value,
        json: String,
    },
    Other,
}

impl PartialBlock {
    fn into_block(self) -> Block {
        match self {
            Self::Thinking { text, signature } => Block::Thinking {
                thinking: text,
                signature,
            },
            Self::Redacted(data) => Block::RedactedThinking { data },
            Self::Text(text) => Block::Text { text },
            Self::ToolUse {
                id,
                name,
                input,
                json,
            } => Block::ToolUse {
                id,
                name,
                input: if json.trim().is_empty() {
                    input
                } else {
                    parse_arguments(&json)
                },
            },
            Self::Other => Block::Other,
        }
    }
}

impl StreamDecoder for AnthropicDecoder {
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, Error> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        match parse_json::<WireEvent>(NAME, data.as_bytes())? {
            WireEvent::MessageStart { message } => {
                self.id = message.id;
                self.model = message.model;
                if let Some(usage) = message.usage {
                    self.usage.update(usage);
                }
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = start_block(content_block, out);
                self.blocks.insert(index, block);
            }
            WireEvent::ContentBlockDelta { index, delta } => self.on_delta(index, delta, out),
            WireEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(usage) = usage {
                    self.usage.update(usage);
                }
            }
            WireEvent::MessageStop => return Ok(true),
            WireEvent::Error { error } => return Err(stream_error(NAME, &error)),
            WireEvent::Other => {}
        }
        Ok(false)
    }

    fn finish(self, complete: bool) -> Result<ModelResponse, Error> {
        if !complete {
            return Err(Error::Decode {
                provider: NAME,
                message: "the stream ended before the response was complete".into(),
                body: String::new(),
            });
        }
        let mut builder = AssistantBuilder::default();
        for block in self.blocks.into_values() {
            push_block(&mut builder, block.into_block());
        }
        Ok(ModelResponse {
            finish_reason: finish_reason(self.stop_reason.as_deref(), &builder),
            message: builder.into_message(),
            usage: self.usage.into_usage(),
            id: self.id,
            model: self.model,
        })
    }
}

/// The state for a new block; text already present in the start event is emitted.
fn start_block(block: Block, out: &mut VecDeque<StreamEvent>) -> PartialBlock {
    match block {
        Block::Text { text } => {
            if !text.is_empty() {
                out.push_back(StreamEvent::TextDelta(text.clone()));
            }
            PartialBlock::Text(text)
        }
        Block::Thinking {
            thinking,
            signature,
        } => {
            if !thinking.is_empty() {
                out.push_back(StreamEvent::ReasoningDelta(thinking.clone()));
            }
            PartialBlock::Thinking {
                text: thinking,
                signature,
            }
        }
        Block::RedactedThinking { data } => PartialBlock::Redacted(data),
        Block::ToolUse { id, name, input } => {
            out.push_back(StreamEvent::ToolCallStart {
                id: id.clone(),
                name: name.clone(),
            });
            PartialBlock::ToolUse {
                id,
                name,
                input: if input.is_object() {
                    input
                } else {
                    Value::Object(Map::new())
                },
                json: String::new(),
            }
        }
        Block::Other => PartialBlock::Other,
    }
}

impl AnthropicDecoder {
    /// Text and thinking deltas without a start event open their block; other mismatched
    /// deltas are ignored.
    fn on_delta(&mut self, index: usize, delta: Delta, out: &mut VecDeque<StreamEvent>) {
        match delta {
            Delta::Text { text } => {
                let block = self
                    .blocks
                    .entry(index)
                    .or_insert_with(|| PartialBlock::Text(String::new()));
                if let PartialBlock::Text(all) = block
                    && !text.is_empty()
                {
                    all.push_str(&text);
                    out.push_back(StreamEvent::TextDelta(text));
                }
            }
            Delta::Thinking { thinking } => {
                let block = self
                    .blocks
                    .entry(index)
                    .or_insert_with(|| PartialBlock::Thinking {
                        text: String::new(),
                        signature: String::new(),
                    });
                if let PartialBlock::Thinking { text, .. } = block
                    && !thinking.is_empty()
                {
                    text.push_str(&thinking);
                    out.push_back(StreamEvent::ReasoningDelta(thinking));
                }
            }
            Delta::Signature { signature: piece } => {
                if let Some(PartialBlock::Thinking { signature, .. }) = self.blocks.get_mut(&index)
                {
                    signature.push_str(&piece);
                }
            }
            Delta::InputJson { partial_json } => {
                if let Some(PartialBlock::ToolUse { id, json, .. }) = self.blocks.get_mut(&index)
                    && !partial_json.is_empty()
                {
                    json.push_str(&partial_json);
                    out.push_back(StreamEvent::ToolCallDelta {
                        id: id.clone(),
                        arguments: partial_json,
                    });
                }
            }
            Delta::Other => {}
        }
    }
}
