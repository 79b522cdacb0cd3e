//! Converse answers: whole (`output.message`) and streamed (ConverseStream's events, named by
//! their `:event-type`).

use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::Value;

use super::{EXCEPTION_PREFIX, NAME, exception};
use crate::error::Error;
use crate::http::sse::SseEvent;
use crate::message::{ContentPart, Reasoning, ToolCall};
use crate::model::{FinishReason, ModelResponse, StreamEvent, Usage};
use crate::provider::{AssistantBuilder, StreamDecoder, decode_error, parse_arguments, parse_json};

#[derive(Deserialize)]
struct ConverseResponse {
    output: Option<Output>,
    #[serde(rename = "stopReason")]
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Output {
    message: Option<WireMessage>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Vec<Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    #[serde(default)]
    cache_write_input_tokens: u64,
}

impl WireUsage {
    /// `inputTokens` leaves out the cached tokens (read and written), as Anthropic's does.
    fn into_usage(self) -> Usage {
        Usage {
            input_tokens: self.input_tokens
                + self.cache_read_input_tokens
                + self.cache_write_input_tokens,
            output_tokens: self.output_tokens,
            cached_input_tokens: self.cache_read_input_tokens,
            cache_write_tokens: self.cache_write_input_tokens,
            reasoning_tokens: 0,
        }
    }
}

/// Decodes a whole (non-streamed) answer.
pub(super) fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
    let response: ConverseResponse = parse_json(NAME, body)?;
    let message = response
        .output
        .and_then(|output| output.message)
        .ok_or_else(|| decode_error(NAME, "the response has no output message", body))?;
    let mut builder = AssistantBuilder::default();
    for block in message.content {
        if let Some(text) = block.get("text").and_then(Value::as_str) {
            if !text.is_empty() {
                builder.push_text(text);
            }
        } else if let Some(tool_use) = block.get("toolUse") {
            let field = |key: &str| tool_use.get(key).and_then(Value::as_str).unwrap_or("");
            builder.parts.push(ContentPart::ToolCall(ToolCall {
                id: field("toolUseId").to_owned(),
                name: field("name").to_owned(),
                arguments: tool_use.get("input").cloned().unwrap_or(Value::Null),
            }));
        } else if let Some(reasoning) = block.get("reasoningContent") {
            builder.parts.extend(reasoning_part(reasoning));
        }
    }
    Ok(ModelResponse {
        finish_reason: finish_reason(response.stop_reason.as_deref(), &builder),
        message: builder.into_message(),
        usage: response.usage.unwrap_or_default().into_usage(),
        id: None,
        model: None,
    })
}

/// `reasoningContent`: `reasoningText` (`text`, `signature`) or `redactedContent`.
fn reasoning_part(reasoning: &Value) -> Option<ContentPart> {
    if let Some(text) = reasoning.get("reasoningText") {
        let field = |key: &str| text.get(key).and_then(Value::as_str).map(str::to_owned);
        return Some(ContentPart::Reasoning(Reasoning {
            text: field("text").unwrap_or_default(),
            signature: field("signature"),
            ..Reasoning::default()
        }));
    }
    let redacted = reasoning.get("redactedContent").and_then(Value::as_str)?;
    Some(ContentPart::Reasoning(Reasoning {
        encrypted_content: Some(redacted.to_owned()),
        ..Reasoning::default()
    }))
}

fn finish_reason(reason: Option<&str>, builder: &AssistantBuilder) -> FinishReason {
    match reason {
        Some("tool_use") => FinishReason::ToolCalls,
        Some("end_turn" | "stop_sequence") | None if builder.has_tool_calls() => {
            FinishReason::ToolCalls
        }
        Some("end_turn" | "stop_sequence") | None => FinishReason::Stop,
        Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
        Some("guardrail_intervened" | "content_filtered") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

/// One content block of a stream, by `contentBlockIndex`.
enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        input: String,
    },
    Reasoning {
        text: String,
        signature: String,
        redacted: String,
    },
}

/// ConverseStream state: `messageStart`, `contentBlockStart`/`Delta`/`Stop`, `messageStop`
/// (the stop reason), then `metadata` (usage), which ends the stream.
#[derive(Default)]
pub(crate) struct ConverseDecoder {
    blocks: Vec<(u64, Block)>,
    text: AssistantBuilder,
    stop_reason: Option<String>,
    usage: Usage,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockEvent {
    #[serde(default)]
    content_block_index: u64,
    start: Option<Value>,
    delta: Option<Value>,
}

impl ConverseDecoder {
    fn block(&mut self, index: u64, make: impl FnOnce() -> Block) -> &mut Block {
        let position = match self.blocks.iter().position(|(i, _)| *i == index) {
            Some(position) => position,
            None => {
                self.blocks.push((index, make()));
                self.blocks.len() - 1
            }
        };
        &mut self.blocks[position].1
    }
}

impl StreamDecoder for ConverseDecoder {
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, Error> {
        if let Some(kind) = event.event.strip_prefix(EXCEPTION_PREFIX) {
            return Err(exception(kind, &event.data));
        }
        match event.event.as_str() {
            "contentBlockStart" => {
                let start: BlockEvent = parse_json(NAME, event.data.as_bytes())?;
                if let Some(tool) = start.start.as_ref().and_then(|s| s.get("toolUse")) {
                    let field = |key: &str| {
                        tool.get(key)
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned()
                    };
                    let (id, name) = (field("toolUseId"), field("name"));
                    out.push_back(StreamEvent::ToolCallStart {
                        id: id.clone(),
                        name: name.clone(),
                    });
                    self.block(start.content_block_index, || Block::Tool {
                        id,
                        name,
                        input: String::new(),
                    });
                }
            }
            "contentBlockDelta" => {
                let delta: BlockEvent = parse_json(NAME, event.data.as_bytes())?;
                let index = delta.content_block_index;
                let Some(delta) = delta.delta else {
                    return Ok(false);
                };
                if let Some(text) = delta.get("text").and_then(Value::as_str) {
                    self.block(index, || Block::Text);
                    if !text.is_empty() {
                        self.text.push_text(text);
                        out.push_back(StreamEvent::TextDelta(text.to_owned()));
                    }
                } else if let Some(tool) = delta.get("toolUse") {
                    let piece = tool.get("input").and_then(Value::as_str).unwrap_or("");
                    if let Block::Tool { id, input, .. } = self.block(index, || Block::Tool {
                        id: String::new(),
                        name: String::new(),
                        input: String::new(),
                    }) && !piece.is_empty()
                    {
                        input.push_str(piece);
                        out.push_back(StreamEvent::ToolCallDelta {
                            id: id.clone(),
                            arguments: piece.to_owned(),
                        });
                    }
                } else if let Some(reasoning) = delta.get("reasoningContent") {
                    let field = |key: &str| reasoning.get(key).and_then(Value::as_str);
                    let piece = field("text").unwrap_or("").to_owned();
                    let signature_piece = field("signature").unwrap_or("").to_owned();
                    let redacted_piece = field("redactedContent").unwrap_or("").to_owned();
                    if let Block::Reasoning {
                        text,
                        signature,
                        redacted,
                    } = self.block(index, || Block::Reasoning {
                        text: String::new(),
                        signature: String::new(),
                        redacted: String::new(),
                    }) {
                        text.push_str(&piece);
                        signature.push_str(&signature_piece);
                        redacted.push_str(&redacted_piece);
                    }
                    if !piece.is_empty() {
                        out.push_back(StreamEvent::ReasoningDelta(piece));
                    }
                }
            }
            "messageStop" => {
                let stop: Value = parse_json(NAME, event.data.as_bytes())?;
                self.stop_reason = stop
                    .get("stopReason")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            "metadata" => {
                #[derive(Deserialize)]
                struct Metadata {
                    usage: Option<WireUsage>,
                }
                let metadata: Metadata = parse_json(NAME, event.data.as_bytes())?;
                self.usage = metadata.usage.unwrap_or_default().into_usage();
                return Ok(true);
            }
            // `messageStart`, `contentBlockStop` and events added later carry nothing needed.
            _ => {}
        }
        Ok(false)
    }

    fn finish(self, complete: bool) -> Result<ModelResponse, Error> {
        if !complete && self.stop_reason.is_none() {
            return Err(decode_error(
                NAME,
                "the stream ended before the response was complete",
                b"",
            ));
        }
        let mut builder = AssistantBuilder::default();
        let mut texts = self.text.parts.into_iter();
        for (_, block) in self.blocks {
            match block {
                // The text of all text blocks, in one part where the first one was.
                Block::Text => builder.parts.extend(texts.next()),
                Block::Tool { id, name, input } => {
                    builder.parts.push(ContentPart::ToolCall(ToolCall {
                        id,
                        name,
                        arguments: parse_arguments(&input),
                    }));
                }
                Block::Reasoning {
                    text,
                    signature,
                    redacted,
                } => builder.parts.push(ContentPart::Reasoning(Reasoning {
                    text,
                    signature: (!signature.is_empty()).then_some(signature),
                    encrypted_content: (!redacted.is_empty()).then_some(redacted),
                    ..Reasoning::default()
                })),
            }
        }
        Ok(ModelResponse {
            finish_reason: finish_reason(self.stop_reason.as_deref(), &builder),
            message: builder.into_message(),
            usage: self.usage,
            id: None,
            model: None,
        })
    }
}
