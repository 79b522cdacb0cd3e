//! Responses API answers: the wire types, whole answers and the stream decoder.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Deserialize;
use serde_json::{Value, json};

use super::NAME;
use crate::error::Error;
use crate::http::sse::SseEvent;
use crate::message::{ContentPart, Reasoning, ToolCall};
use crate::model::{FinishReason, ModelResponse, StreamEvent, Usage};
use crate::provider::{AssistantBuilder, StreamDecoder, parse_arguments, parse_json, stream_error};

/// Decodes a whole (non-streamed) answer.
pub(super) fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
    parse_json::<ResponseBody>(NAME, body)?.into_response()
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
        id: Option<String>,
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
    /// Newer than the rest; absent from older responses and from streams.
    cache_write_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    reasoning_tokens: Option<u64>,
}

impl ResponseUsage {
    fn into_usage(self) -> Usage {
        let input = self.input_tokens_details.as_ref();
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cached_input_tokens: input.and_then(|d| d.cached_tokens).unwrap_or(0),
            cache_write_tokens: input.and_then(|d| d.cache_write_tokens).unwrap_or(0),
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
                OutputItem::Message { content, .. } => {
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
        output_index: Option<usize>,
        item_id: Option<String>,
        item: OutputItem,
    },
    #[serde(rename = "response.output_item.done")]
    ItemDone {
        output_index: Option<usize>,
        item_id: Option<String>,
        item: OutputItem,
    },
    #[serde(rename = "response.reasoning_summary_part.added")]
    SummaryPartAdded {
        output_index: Option<usize>,
        item_id: Option<String>,
        #[serde(default)]
        summary_index: usize,
    },
    #[serde(rename = "response.reasoning_summary_text.delta")]
    SummaryDelta {
        output_index: Option<usize>,
        item_id: Option<String>,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.reasoning_text.delta")]
    ReasoningDelta {
        output_index: Option<usize>,
        item_id: Option<String>,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.output_text.delta")]
    TextDelta {
        output_index: Option<usize>,
        item_id: Option<String>,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.refusal.delta")]
    RefusalDelta {
        output_index: Option<usize>,
        item_id: Option<String>,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta {
        output_index: Option<usize>,
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
///
/// Compatible servers (llama.cpp) send no `output_index`: their events name the item by
/// `item_id` alone, so items are also found by id, and numbered in order of arrival.
#[derive(Default)]
pub(crate) struct Decoder {
    id: Option<String>,
    model: Option<String>,
    items: BTreeMap<usize, OutputItem>,
    /// Output indexes by item id.
    ids: HashMap<String, usize>,
    /// One past the highest output index seen.
    next_index: usize,
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
            Event::ItemAdded {
                output_index,
                item_id,
                item,
            } => {
                let index = self.position(output_index, item_id.or_else(|| item_id_of(&item)));
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
                self.items.insert(index, item);
            }
            Event::ItemDone {
                output_index,
                item_id,
                item,
            } => {
                let index = self.position(output_index, item_id.or_else(|| item_id_of(&item)));
                self.items.insert(index, item);
            }
            Event::SummaryPartAdded {
                output_index,
                item_id,
                summary_index,
            } => {
                if let OutputItem::Reasoning { summary, .. } =
                    self.item(output_index, item_id, reasoning)
                {
                    summary.push(TextPart::default());
                }
                // Summary parts are paragraphs; keep the streamed text equal to the final one.
                if summary_index > 0 {
                    out.push_back(StreamEvent::ReasoningDelta("\n\n".into()));
                }
            }
            Event::SummaryDelta {
                output_index,
                item_id,
                delta,
            } => {
                if let OutputItem::Reasoning { summary, .. } =
                    self.item(output_index, item_id, reasoning)
                {
                    append(summary, &delta);
                }
                out.push_back(StreamEvent::ReasoningDelta(delta));
            }
            Event::ReasoningDelta {
                output_index,
                item_id,
                delta,
            } => {
                if let OutputItem::Reasoning { content, .. } =
                    self.item(output_index, item_id, reasoning)
                {
                    append(content.get_or_insert_default(), &delta);
                }
                out.push_back(StreamEvent::ReasoningDelta(delta));
            }
            Event::TextDelta {
                output_index,
                item_id,
                delta,
            } => {
                if let OutputItem::Message { content, .. } =
                    self.item(output_index, item_id, message)
                {
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
                item_id,
                delta,
            } => {
                if let OutputItem::Message { content, .. } =
                    self.item(output_index, item_id, message)
                {
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
                let index = self.position(output_index, item_id.clone());
                let id = match self.items.get_mut(&index) {
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
    /// The item an event is about, created with `make` when no `output_item.added` announced
    /// it.
    fn item(
        &mut self,
        output_index: Option<usize>,
        item_id: Option<String>,
        make: fn() -> OutputItem,
    ) -> &mut OutputItem {
        let index = self.position(output_index, item_id);
        self.items.entry(index).or_insert_with(make)
    }

    /// The output index of an event's item: its `output_index`; else the index of the item
    /// with its `item_id`; else a new index after the last (an item seen for the first time),
    /// or the last one (an event naming no item).
    fn position(&mut self, output_index: Option<usize>, item_id: Option<String>) -> usize {
        let index = match (output_index, item_id) {
            (Some(index), Some(id)) => {
                self.ids.insert(id, index);
                index
            }
            (Some(index), None) => index,
            (None, Some(id)) => *self.ids.entry(id).or_insert(self.next_index),
            (None, None) => self.next_index.saturating_sub(1),
        };
        self.next_index = self.next_index.max(index + 1);
        index
    }
}

/// The id an output item carries itself (function calls: the item id, not the call id).
fn item_id_of(item: &OutputItem) -> Option<String> {
    match item {
        OutputItem::Reasoning { id, .. }
        | OutputItem::Message { id, .. }
        | OutputItem::FunctionCall { id, .. } => id.clone(),
        OutputItem::Other => None,
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
        id: None,
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
