//! Chat Completions (`POST /chat/completions`): OpenAI and every compatible server.

use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Api, KeyPolicy, ProviderInfo, base_url_as_is, bearer_auth, new_call_id};
use super::{
    AssistantBuilder, OutputPart, StreamDecoder, WireApi, object_schema, output_text,
    parse_arguments, parse_json, system_text, tool_output_parts,
};
use crate::client::ProviderKind;
use crate::error::Error;
use crate::http::sse::SseEvent;
use crate::message::{ContentPart, ImageSource, Message, Reasoning, Role, ToolCall};
use crate::model::{FinishReason, ModelRequest, ModelResponse, StreamEvent, ToolChoice, Usage};
use crate::tool::ToolDescriptor;

/// Chat Completions: OpenAI, or any compatible server at `OPENAI_BASE_URL` (the key is then
/// optional).
pub(crate) static OPENAI_CHAT: ProviderInfo = ProviderInfo {
    id: "openai-chat",
    kind: ProviderKind::OpenAiChat,
    api_key_vars: &["OPENAI_API_KEY"],
    base_url_vars: &["OPENAI_BASE_URL"],
    default_base_url: OPENAI_BASE_URL,
    key: KeyPolicy::UnlessBaseUrl,
    normalize_base_url: base_url_as_is,
    auth_header: bearer_auth,
    static_headers: &[],
    default_model: None,
    api: &Api::<OpenAiChat>::new(),
};

/// OpenAI's API root, shared with the Responses provider.
pub(crate) const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

pub(crate) struct OpenAiChat;

const NAME: &str = "openai-chat";

impl WireApi for OpenAiChat {
    const NAME: &'static str = NAME;
    const PATH: &'static str = "/chat/completions";
    type Decoder = ChatDecoder;

    const HISTORY_FIELD: &'static str = "messages";

    fn leading_item(request: &ModelRequest) -> Option<Value> {
        system_text(request).map(|system| json!({"role": "system", "content": system}))
    }

    fn push_messages(_request: &ModelRequest, messages: &[Message], items: &mut Vec<Value>) {
        for message in messages {
            push_message(items, message);
        }
    }

    fn tool_definition(d: &ToolDescriptor) -> Value {
        json!({"type": "function", "function": {
            "name": d.name,
            "description": d.description,
            "parameters": object_schema(&d.input_schema),
        }})
    }

    fn body_fields(request: &ModelRequest, stream: bool) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("model".into(), request.model.clone().into());
        if !request.tools.is_empty() {
            body.insert("tool_choice".into(), tool_choice(&request.tool_choice));
        }
        if let Some(temperature) = request.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        if let Some(max) = request.max_output_tokens {
            body.insert("max_completion_tokens".into(), json!(max));
        }
        if let Some(schema) = &request.output_schema {
            let (wire, strict) = schema.openai_schema();
            let mut format = json!({"name": schema.name(), "schema": wire, "strict": strict});
            if let Some(description) = schema.description_text() {
                format["description"] = json!(description);
            }
            body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": format}),
            );
        }
        if let Some(key) = &request.prompt_caching.key {
            body.insert("prompt_cache_key".into(), Value::String(key.clone()));
        }
        if stream {
            body.insert("stream".into(), Value::Bool(true));
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        body
    }

    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
        let response: ChatResponse = parse_json(NAME, body)?;
        let choice = response
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| super::decode_error(NAME, "the response has no choices", body))?;
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

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
    }
}

fn push_message(out: &mut Vec<Value>, message: &Message) {
    match message.role {
        Role::System => {} // merged into the leading system message
        Role::User => out.push(json!({"role": "user", "content": user_content(&message.content)})),
        Role::Assistant => {
            let text = message.text();
            let mut value = json!({
                "role": "assistant",
                "content": if text.is_empty() { Value::Null } else { Value::String(text) },
            });
            let calls: Vec<Value> = message
                .tool_calls()
                .map(|call| {
                    json!({"id": call.id, "type": "function", "function": {
                        "name": call.name,
                        "arguments": arguments_text(&call.arguments),
                    }})
                })
                .collect();
            if !calls.is_empty() {
                value["tool_calls"] = Value::Array(calls);
            }
            out.push(value);
        }
        Role::Tool => {
            // Tool messages take text only: images go in one user message right after.
            let mut images = Vec::new();
            for part in &message.content {
                let ContentPart::ToolResult(result) = part else {
                    continue;
                };
                let parts = tool_output_parts(&result.output);
                let mut text = output_text(&parts);
                let before = images.len();
                for part in &parts {
                    if let OutputPart::Image { mime_type, data } = part {
                        if images.len() == before {
                            images.push(json!({"type": "text", "text": format!(
                                "Image returned by {} (tool call {}):", result.name, result.call_id
                            )}));
                        }
                        images.push(image_part(&format!("data:{mime_type};base64,{data}")));
                    }
                }
                if text.is_empty() && images.len() > before {
                    text = "The image is attached in the next user message.".to_owned();
                }
                out.push(json!({"role": "tool", "tool_call_id": result.call_id, "content": text}));
            }
            if !images.is_empty() {
                out.push(json!({"role": "user", "content": images}));
            }
        }
    }
}

fn user_content(parts: &[ContentPart]) -> Value {
    if let [ContentPart::Text { text }] = parts {
        return Value::String(text.clone());
    }
    Value::Array(
        parts
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text { text } => Some(json!({"type": "text", "text": text})),
                ContentPart::Image { source } => Some(image_part(&image_url(source))),
                _ => None,
            })
            .collect(),
    )
}

fn image_part(url: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": url}})
}

pub(crate) fn image_url(source: &ImageSource) -> String {
    match source {
        ImageSource::Base64 { mime_type, data } => format!("data:{mime_type};base64,{data}"),
        ImageSource::Url { url } => url.clone(),
    }
}

/// Arguments go back as the JSON text the model wrote (a string stays a string when it was
/// not JSON).
pub(crate) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        other => other.to_string(),
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
#[derive(Default)]
pub(crate) struct ChatDecoder {
    id: Option<String>,
    model: Option<String>,
    reasoning: String,
    text: AssistantBuilder,
    refused: bool,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Usage,
}

struct PartialCall {
    index: usize,
    id: String,
    name: String,
    arguments: String,
}

impl StreamDecoder for ChatDecoder {
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
        let chunk: ChatChunk = parse_json(NAME, data.as_bytes())?;
        if let Some(error) = chunk.error {
            return Err(super::stream_error(NAME, &error));
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
                provider: NAME,
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

impl ChatDecoder {
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
