//! OpenAI Responses (`POST /responses`), used statelessly: `store: false`, with the previous
//! output items (reasoning included) sent back as input on every call.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::openai_chat::OPENAI_BASE_URL;
use super::openai_chat::{arguments_text, image_url};
use super::{Api, KeyPolicy, ProviderInfo, base_url_as_is, bearer_auth};
use super::{
    AssistantBuilder, OutputPart, StreamDecoder, WireApi, object_schema, output_text,
    parse_arguments, parse_json, stream_error, system_text, tool_output_parts,
};
use crate::client::ProviderKind;
use crate::error::Error;
use crate::http::sse::SseEvent;
use crate::message::{ContentPart, Message, Reasoning, Role, ToolCall};
use crate::model::{FinishReason, ModelRequest, ModelResponse, StreamEvent, ToolChoice, Usage};
use crate::tool::ToolDescriptor;

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
        parse_json::<ResponseBody>(NAME, body)?.into_response()
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

#[derive(Deserialize)]
struct ResponseBody {
    id: Option<String>,
    model: Option<String>,
    status: Option<String>,
    #[serde(default)]
    output: Vec<OutputItem>,
    usage: Option<ResponseUsage>,
    incomplete_details: Option<IncompleteDetails>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutputItem {
    Reasoning {
        id: Option<String>,
        #[serde(default)]
        summary: Vec<TextPart>,
        /// Full reasoning text, sent by open-weight models instead of a summary.
        content: Option<Vec<TextPart>>,
        encrypted_content: Option<String>,
    },
    Message {
        #[serde(default)]
        content: Vec<MessageContent>,
    },
    FunctionCall {
        id: Option<String>,
        call_id: Option<String>,
        #[serde(default)]
        name: String,
        #[serde(default)]
        arguments: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
struct TextPart {
    #[serde(default)]
    text: String,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum MessageContent {
    OutputText {
        #[serde(default)]
        text: String,
    },
    Refusal {
        #[serde(default)]
        refusal: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct ResponseUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    input_tokens_details: Option<InputDetails>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    reasoning_tokens: Option<u64>,
}

impl ResponseUsage {
    fn into_usage(self) -> Usage {
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cached_input_tokens: self
                .input_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            reasoning_tokens: self
                .output_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
        }
    }
}

impl ResponseBody {
    fn into_response(self) -> Result<ModelResponse, Error> {
        if let Some(error) = self.error.filter(|e| !e.is_null()) {
            return Err(stream_error(NAME, &error));
        }
        if self.status.as_deref() == Some("failed") {
            return Err(stream_error(
                NAME,
                &json!({"message": "the response failed"}),
            ));
        }
        let mut builder = AssistantBuilder::default();
        let mut refused = false;
        for item in self.output {
            match item {
                OutputItem::Reasoning {
                    id,
                    summary,
                    content,
                    encrypted_content,
                } => {
                    let mut text = join(&summary, "\n\n");
                    if text.is_empty() {
                        text = join(content.as_deref().unwrap_or_default(), "");
                    }
                    builder.parts.push(ContentPart::Reasoning(Reasoning {
                        text,
                        id,
                        signature: None,
                        encrypted_content,
                    }));
                }
                OutputItem::Message { content } => {
                    for part in content {
                        match part {
                            MessageContent::OutputText { text } => builder.push_text(&text),
                            MessageContent::Refusal { refusal } => {
                                refused = true;
                                builder.push_text(&refusal);
                            }
                            MessageContent::Other => {}
                        }
                    }
                }
                OutputItem::FunctionCall {
                    id,
                    call_id,
                    name,
                    arguments,
                } => builder.parts.push(ContentPart::ToolCall(ToolCall {
                    id: call_id.or(id).unwrap_or_default(),
                    name,
                    arguments: parse_arguments(&arguments),
                })),
                OutputItem::Other => {}
            }
        }
        let reason = self.incomplete_details.and_then(|d| d.reason);
        let finish_reason = match (self.status.as_deref(), reason.as_deref()) {
            (Some("incomplete"), Some("max_output_tokens")) => FinishReason::Length,
            (Some("incomplete"), Some("content_filter")) => FinishReason::ContentFilter,
            (Some("incomplete"), other) => {
                FinishReason::Other(other.unwrap_or("incomplete").to_owned())
            }
            _ if refused => FinishReason::ContentFilter,
            _ if builder.has_tool_calls() => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        };
        Ok(ModelResponse {
            message: builder.into_message(),
            finish_reason,
            usage: self
                .usage
                .map(ResponseUsage::into_usage)
                .unwrap_or_default(),
            id: self.id,
            model: self.model,
        })
    }
}

fn join(parts: &[TextPart], separator: &str) -> String {
    parts
        .iter()
        .map(|p| p.text.as_str())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(separator)
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Event {
    #[serde(rename = "response.created", alias = "response.in_progress")]
    Started { response: ResponseHeader },
    #[serde(rename = "response.output_item.added")]
    ItemAdded {
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.output_item.done")]
    ItemDone {
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.reasoning_summary_part.added")]
    SummaryPartAdded {
        output_index: usize,
        #[serde(default)]
        summary_index: usize,
    },
    #[serde(rename = "response.reasoning_summary_text.delta")]
    SummaryDelta {
        output_index: usize,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.reasoning_text.delta")]
    ReasoningDelta {
        output_index: usize,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.output_text.delta")]
    TextDelta {
        output_index: usize,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.refusal.delta")]
    RefusalDelta {
        output_index: usize,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta {
        output_index: usize,
        item_id: Option<String>,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.completed", alias = "response.incomplete")]
    Completed { response: ResponseBody },
    #[serde(rename = "response.failed")]
    Failed { response: FailedResponse },
    #[serde(rename = "error")]
    Error,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct ResponseHeader {
    id: Option<String>,
    model: Option<String>,
}

#[derive(Deserialize)]
struct FailedResponse {
    error: Option<Value>,
}

/// Streaming state. Output items by `output_index`, built from deltas and replaced by each
/// `output_item.done`; used only when the terminal event carries no `output`.
#[derive(Default)]
pub(crate) struct Decoder {
    id: Option<String>,
    model: Option<String>,
    items: BTreeMap<usize, OutputItem>,
    response: Option<ModelResponse>,
}

impl StreamDecoder for Decoder {
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, Error> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(false);
        }
        match parse_json::<Event>(NAME, data.as_bytes())? {
            Event::Started { response } => {
                self.id = self.id.take().or(response.id);
                self.model = self.model.take().or(response.model);
            }
            Event::ItemAdded { output_index, item } => {
                if let OutputItem::FunctionCall {
                    id, call_id, name, ..
                } = &item
                {
                    out.push_back(StreamEvent::ToolCallStart {
                        id: call_id
                            .as_ref()
                            .or(id.as_ref())
                            .cloned()
                            .unwrap_or_default(),
                        name: name.clone(),
                    });
                }
                self.items.insert(output_index, item);
            }
            Event::ItemDone { output_index, item } => {
                self.items.insert(output_index, item);
            }
            Event::SummaryPartAdded {
                output_index,
                summary_index,
            } => {
                if let OutputItem::Reasoning { summary, .. } = self.item(output_index, reasoning) {
                    summary.push(TextPart::default());
                }
                // Summary parts are paragraphs; keep the streamed text equal to the final one.
                if summary_index > 0 {
                    out.push_back(StreamEvent::ReasoningDelta("\n\n".into()));
                }
            }
            Event::SummaryDelta {
                output_index,
                delta,
            } => {
                if let OutputItem::Reasoning { summary, .. } = self.item(output_index, reasoning) {
                    append(summary, &delta);
                }
                out.push_back(StreamEvent::ReasoningDelta(delta));
            }
            Event::ReasoningDelta {
                output_index,
                delta,
            } => {
                if let OutputItem::Reasoning { content, .. } = self.item(output_index, reasoning) {
                    append(content.get_or_insert_default(), &delta);
                }
                out.push_back(StreamEvent::ReasoningDelta(delta));
            }
            Event::TextDelta {
                output_index,
                delta,
            } => {
                if let OutputItem::Message { content } = self.item(output_index, message) {
                    match content.last_mut() {
                        Some(MessageContent::OutputText { text }) => text.push_str(&delta),
                        _ => content.push(MessageContent::OutputText {
                            text: delta.clone(),
                        }),
                    }
                }
                out.push_back(StreamEvent::TextDelta(delta));
            }
            Event::RefusalDelta {
                output_index,
                delta,
            } => {
                if let OutputItem::Message { content } = self.item(output_index, message) {
                    match content.last_mut() {
                        Some(MessageContent::Refusal { refusal }) => refusal.push_str(&delta),
                        _ => content.push(MessageContent::Refusal {
                            refusal: delta.clone(),
                        }),
                    }
                }
                out.push_back(StreamEvent::TextDelta(delta));
            }
            Event::ArgumentsDelta {
                output_index,
                item_id,
                delta,
            } => {
                let id = match self.items.get_mut(&output_index) {
                    Some(OutputItem::FunctionCall {
                        id,
                        call_id,
                        arguments,
                        ..
                    }) => {
                        arguments.push_str(&delta);
                        call_id.as_ref().or(id.as_ref()).cloned()
                    }
                    _ => None,
                };
                out.push_back(StreamEvent::ToolCallDelta {
                    id: id.or(item_id).unwrap_or_default(),
                    arguments: delta,
                });
            }
            Event::Completed { mut response } => {
                if response.output.is_empty() {
                    response.output = std::mem::take(&mut self.items).into_values().collect();
                }
                response.id = response.id.or(self.id.take());
                response.model = response.model.or(self.model.take());
                self.response = Some(response.into_response()?);
                return Ok(true);
            }
            Event::Failed { response } => {
                let error = response
                    .error
                    .filter(|e| !e.is_null())
                    .unwrap_or_else(|| json!({"message": "the response failed"}));
                return Err(stream_error(NAME, &error));
            }
            Event::Error => {
                let error: Value = parse_json(NAME, data.as_bytes())?;
                return Err(stream_error(NAME, &error));
            }
            Event::Other => {}
        }
        Ok(false)
    }

    fn finish(self, complete: bool) -> Result<ModelResponse, Error> {
        match self.response {
            Some(response) if complete => Ok(response),
            _ => Err(Error::Decode {
                provider: NAME,
                message: "the stream ended before the response was complete".into(),
                body: String::new(),
            }),
        }
    }
}

impl Decoder {
    /// The item at `index`, created with `make` when no `output_item.added` announced it.
    fn item(&mut self, index: usize, make: fn() -> OutputItem) -> &mut OutputItem {
        self.items.entry(index).or_insert_with(make)
    }
}

fn reasoning() -> OutputItem {
    OutputItem::Reasoning {
        id: None,
        summary: Vec::new(),
        content: None,
        encrypted_content: None,
    }
}

fn message() -> OutputItem {
    OutputItem::Message {
        content: Vec::new(),
    }
}

fn append(parts: &mut Vec<TextPart>, delta: &str) {
    match parts.last_mut() {
        Some(part) => part.text.push_str(delta),
        None => parts.push(TextPart {
            text: delta.to_owned(),
        }),
    }
}
