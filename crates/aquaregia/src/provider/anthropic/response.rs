//! Anthropic responses: the wire types, whole answers and the stream decoder.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::NAME;
use crate::error::Error;
use crate::http::sse::SseEvent;
use crate::message::{ContentPart, Reasoning, ToolCall};
use crate::model::{FinishReason, ModelResponse, StreamEvent, Usage};
use crate::provider::{
    AssistantBuilder, StreamDecoder, decode_error, parse_arguments, parse_json, stream_error,
};

/// Decodes a whole (non-streamed) answer.
pub(super) fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
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
        let cache_write = self.cache_creation_input_tokens.unwrap_or(0);
        Usage {
            input_tokens: self.input_tokens.unwrap_or(0) + cache_read + cache_write,
            output_tokens: self.output_tokens.unwrap_or(0),
            cached_input_tokens: cache_read,
            cache_write_tokens: cache_write,
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
