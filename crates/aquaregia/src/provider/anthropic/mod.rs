//! Anthropic Messages API (`POST /v1/messages`).

mod response;

use reqwest::header::HeaderName;
use serde_json::{Map, Value, json};

use super::{
    Api, EMPTY_ERROR_TEXT, KeyPolicy, OutputPart, ProviderInfo, WireApi, base_url_as_is,
    object_schema, output_text, split_data_url, system_text, tool_output_parts,
};
use crate::client::ProviderKind;
use crate::error::Error;
use crate::message::{ContentPart, ImageSource, Message, Reasoning, Role, ToolResult};
use crate::model::{ModelRequest, ModelResponse, ToolChoice};
use crate::structured::OutputSchema;
use crate::tool::ToolDescriptor;
use response::AnthropicDecoder;

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

impl WireApi for Anthropic {
    const NAME: &'static str = NAME;
    const PATH: &'static str = "/v1/messages";
    type Decoder = AnthropicDecoder;

    const HISTORY_FIELD: &'static str = "messages";
    const OUTPUT_AS_TOOL: bool = true;

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

    fn output_tool(schema: &OutputSchema) -> Value {
        json!({
            "name": schema.name(),
            "description": schema
                .description_text()
                .unwrap_or("Gives the final answer. Its input is the answer."),
            "input_schema": schema.object_schema().0,
        })
    }

    fn mark_tools_breakpoint(definition: &mut Value) {
        if let Value::Object(definition) = definition {
            definition.insert("cache_control".into(), ephemeral());
        }
    }

    /// The breakpoint goes on the message's last block that may carry one (thinking blocks
    /// may not); a plain-string message becomes one text block for it.
    fn mark_turn_breakpoint(item: &mut Value) {
        let Some(content) = item.get_mut("content") else {
            return;
        };
        if let Value::String(text) = content {
            *content = json!([{"type": "text", "text": text, "cache_control": ephemeral()}]);
            return;
        }
        if let Some(Value::Object(block)) = content.as_array_mut().and_then(|blocks| {
            blocks.iter_mut().rev().find(|block| {
                !matches!(
                    block["type"].as_str(),
                    Some("thinking" | "redacted_thinking")
                )
            })
        }) {
            block.insert("cache_control".into(), ephemeral());
        }
    }

    fn body_fields(request: &ModelRequest, stream: bool) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("model".into(), request.model.clone().into());
        body.insert(
            "max_tokens".into(),
            json!(request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
        );
        if let Some(system) = system_text(request) {
            let system = if request.prompt_caching.system {
                json!([{"type": "text", "text": system, "cache_control": ephemeral()}])
            } else {
                Value::String(system)
            };
            body.insert("system".into(), system);
        }
        if let Some(schema) = &request.output_schema {
            body.insert("tool_choice".into(), output_tool_choice(request, schema));
        } else if !request.tools.is_empty() {
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
        response::parse_response(body)
    }
}

/// The model must answer through the output tool; with other tools it may call those first
/// (`any`), unless the tool choice says otherwise.
fn output_tool_choice(request: &ModelRequest, schema: &OutputSchema) -> Value {
    let answer = json!({"type": "tool", "name": schema.name()});
    if request.tools.is_empty() {
        return answer;
    }
    match &request.tool_choice {
        ToolChoice::Auto | ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::None => answer,
        other => tool_choice(other),
    }
}

/// A prompt-cache breakpoint with the default (5 minute) lifetime.
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
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
