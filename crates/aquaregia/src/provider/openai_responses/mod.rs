//! OpenAI Responses (`POST /responses`), used statelessly: `store: false`, with the previous
//! output items (reasoning included) sent back as input on every call.

mod response;

use serde_json::{Map, Value, json};

use super::openai_chat::OPENAI_BASE_URL;
use super::openai_chat::{arguments_text, image_url};
use super::{Api, KeyPolicy, ProviderInfo, base_url_as_is, bearer_auth};
use super::{OutputPart, WireApi, object_schema, output_text, system_text, tool_output_parts};
use crate::client::ProviderKind;
use crate::error::Error;
use crate::message::{ContentPart, Message, Reasoning, Role};
use crate::model::{ModelRequest, ModelResponse, ToolChoice};
use crate::tool::ToolDescriptor;
use response::Decoder;

/// OpenAI's Responses API.
pub(crate) static OPENAI: ProviderInfo = ProviderInfo {
    id: "openai",
    kind: ProviderKind::OpenAiResponses,
    api_key_vars: &["OPENAI_API_KEY"],
    base_url_vars: &["OPENAI_BASE_URL"],
    default_base_url: OPENAI_BASE_URL,
    key: KeyPolicy::Required,
    normalize_base_url: base_url_as_is,
    auth_header: bearer_auth,
    static_headers: &[],
    default_model: Some("gpt-5-mini"),
    api: &Api::<OpenAiResponses>::new(),
};

pub(crate) struct OpenAiResponses;

const NAME: &str = "openai";

impl WireApi for OpenAiResponses {
    const NAME: &'static str = NAME;
    const PATH: &'static str = "/responses";
    type Decoder = Decoder;

    const HISTORY_FIELD: &'static str = "input";

    fn push_messages(request: &ModelRequest, messages: &[Message], items: &mut Vec<Value>) {
        // Stored items can be referenced by id alone; with `store: false` (our default) a
        // reasoning item is only accepted back with its `encrypted_content`.
        let stored = request
            .extra_body
            .as_ref()
            .and_then(|extra| extra.get("store"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        for message in messages {
            push_items(items, message, stored);
        }
    }

    fn tool_definition(d: &ToolDescriptor) -> Value {
        json!({
            "type": "function",
            "name": d.name,
            "description": d.description,
            "parameters": object_schema(&d.input_schema),
            "strict": false,
        })
    }

    fn body_fields(request: &ModelRequest, stream: bool) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("model".into(), request.model.clone().into());
        if let Some(system) = system_text(request) {
            body.insert("instructions".into(), Value::String(system));
        }
        if !request.tools.is_empty() {
            body.insert("tool_choice".into(), tool_choice(&request.tool_choice));
        }
        if let Some(temperature) = request.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        if let Some(max) = request.max_output_tokens {
            body.insert("max_output_tokens".into(), json!(max));
        }
        if let Some(schema) = &request.output_schema {
            let (wire, strict) = schema.openai_schema();
            let mut format = json!({
                "type": "json_schema",
                "name": schema.name(),
                "schema": wire,
                "strict": strict,
            });
            if let Some(description) = schema.description_text() {
                format["description"] = json!(description);
            }
            body.insert("text".into(), json!({"format": format}));
        }
        if let Some(key) = &request.prompt_caching.key {
            body.insert("prompt_cache_key".into(), Value::String(key.clone()));
        }
        body.insert("store".into(), Value::Bool(false));
        if wants_encrypted_reasoning(request) {
            body.insert("include".into(), json!(["reasoning.encrypted_content"]));
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

/// Asks for `encrypted_content` so reasoning survives stateless calls, but only for reasoning
/// models: the others (gpt-4o, gpt-4.1, gpt-5-chat...) reject the `include` with a 400.
/// `extra_body` can always set `include` itself.
fn wants_encrypted_reasoning(request: &ModelRequest) -> bool {
    if request
        .extra_body
        .as_ref()
        .is_some_and(|extra| extra.contains_key("reasoning"))
    {
        return true;
    }
    let model = request.model.rsplit('/').next().unwrap_or_default();
    ["o1", "o3", "o4", "gpt-5", "codex"]
        .iter()
        .any(|family| model.starts_with(family))
        && !model.contains("chat")
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(name) => json!({"type": "function", "name": name}),
    }
}

fn push_items(out: &mut Vec<Value>, message: &Message, stored: bool) {
    match message.role {
        Role::System => {} // part of `instructions`
        Role::User => {
            let content: Vec<Value> = message
                .content
                .iter()
                .filter_map(|part| match part {
                    ContentPart::Text { text } => Some(json!({"type": "input_text", "text": text})),
                    ContentPart::Image { source } => Some(input_image(&image_url(source))),
                    _ => None,
                })
                .collect();
            if !content.is_empty() {
                out.push(json!({"type": "message", "role": "user", "content": content}));
            }
        }
        Role::Assistant => {
            let mut text = String::new();
            for part in &message.content {
                match part {
                    ContentPart::Text { text: t } => text.push_str(t),
                    ContentPart::Reasoning(reasoning) => {
                        flush_text(out, &mut text);
                        if let Some(item) = reasoning_item(reasoning, stored) {
                            out.push(item);
                        }
                    }
                    ContentPart::ToolCall(call) => {
                        flush_text(out, &mut text);
                        out.push(json!({
                            "type": "function_call",
                            "call_id": call.id,
                            "name": call.name,
                            "arguments": arguments_text(&call.arguments),
                        }));
                    }
                    _ => {}
                }
            }
            flush_text(out, &mut text);
        }
        Role::Tool => {
            for part in &message.content {
                let ContentPart::ToolResult(result) = part else {
                    continue;
                };
                let parts = tool_output_parts(&result.output);
                let output = if parts.iter().any(|p| matches!(p, OutputPart::Image { .. })) {
                    let items = parts
                        .iter()
                        .map(|part| match part {
                            OutputPart::Text(text) => json!({"type": "input_text", "text": text}),
                            OutputPart::Image { mime_type, data } => {
                                input_image(&format!("data:{mime_type};base64,{data}"))
                            }
                        })
                        .collect();
                    Value::Array(items)
                } else {
                    Value::String(output_text(&parts))
                };
                out.push(json!({
                    "type": "function_call_output",
                    "call_id": result.call_id,
                    "output": output,
                }));
            }
        }
    }
}

fn flush_text(out: &mut Vec<Value>, text: &mut String) {
    if !text.is_empty() {
        let text = std::mem::take(text);
        out.push(json!({
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        }));
    }
}

/// A reasoning item the API accepts back: it needs its `rs_` id and, unless stored, its
/// encrypted content. Other providers' thinking has no id and is left out.
fn reasoning_item(reasoning: &Reasoning, stored: bool) -> Option<Value> {
    let id = reasoning.id.as_ref()?;
    if reasoning.encrypted_content.is_none() && !stored {
        return None;
    }
    let mut item = json!({"type": "reasoning", "id": id, "summary": []});
    if !reasoning.text.is_empty() {
        item["summary"] = json!([{"type": "summary_text", "text": reasoning.text}]);
    }
    if let Some(encrypted) = &reasoning.encrypted_content {
        item["encrypted_content"] = json!(encrypted);
    }
    Some(item)
}

fn input_image(url: &str) -> Value {
    json!({"type": "input_image", "image_url": url, "detail": "auto"})
}
