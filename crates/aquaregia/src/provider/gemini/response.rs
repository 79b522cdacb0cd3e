//! Gemini answers: the wire types, whole answers and the stream decoder.

use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{NAME, wire_error};
use crate::error::Error;
use crate::http::sse::SseEvent;
use crate::message::{ContentPart, Reasoning, ToolCall};
use crate::model::{FinishReason, ModelResponse, StreamEvent, Usage};
use crate::provider::{AssistantBuilder, StreamDecoder, decode_error, new_call_id, parse_json};

/// Decodes a whole (non-streamed) answer.
pub(super) fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
    let response: WireResponse = parse_json(NAME, body)?;
    if let Some(error) = response.error {
        return Err(wire_error(&error));
    }
    let mut builder = AssistantBuilder::default();
    let candidate = response.candidates.into_iter().next();
    let (parts, reason) = match candidate {
        Some(candidate) => (
            candidate.content.map(|c| c.parts).unwrap_or_default(),
            candidate.finish_reason,
        ),
        None => match response.prompt_feedback.and_then(|f| f.block_reason) {
            Some(reason) => (Vec::new(), Some(reason)),
            None => return Err(decode_error(NAME, "the response has no candidates", body)),
        },
    };
    for part in parts {
        push_part(&mut builder, part, None);
    }
    Ok(ModelResponse {
        finish_reason: finish_reason(reason.as_deref(), &builder),
        message: builder.into_message(),
        usage: response.usage_metadata.unwrap_or_default().into_usage(),
        id: response.response_id,
        model: response.model_version,
    })
}

/// Appends one response part; streamed text and thoughts also become events in `out`.
fn push_part(
    builder: &mut AssistantBuilder,
    part: WirePart,
    out: Option<&mut VecDeque<StreamEvent>>,
) {
    let signature = part.thought_signature.filter(|s| !s.is_empty());
    if let Some(call) = part.function_call {
        if let Some(signature) = signature {
            builder.parts.push(signed(String::new(), signature));
        }
        let id = call
            .id
            .filter(|id| !id.is_empty())
            .unwrap_or_else(new_call_id);
        let arguments = match call.args {
            Value::Null => Value::Object(Map::new()),
            args => args,
        };
        if let Some(out) = out {
            out.push_back(StreamEvent::ToolCallStart {
                id: id.clone(),
                name: call.name.clone(),
            });
            out.push_back(StreamEvent::ToolCallDelta {
                id: id.clone(),
                arguments: arguments.to_string(),
            });
        }
        builder.parts.push(ContentPart::ToolCall(ToolCall {
            id,
            name: call.name,
            arguments,
        }));
        return;
    }
    let text = part.text.unwrap_or_default();
    if part.thought {
        if !text.is_empty()
            && let Some(out) = out
        {
            out.push_back(StreamEvent::ReasoningDelta(text.clone()));
        }
        // Streamed thought text continues the last unsigned thought.
        if let Some(ContentPart::Reasoning(last)) = builder.parts.last_mut()
            && last.signature.is_none()
            && !last.text.is_empty()
        {
            last.text.push_str(&text);
            last.signature = signature;
        } else if !text.is_empty() || signature.is_some() {
            builder.parts.push(ContentPart::Reasoning(Reasoning {
                text,
                signature,
                ..Reasoning::default()
            }));
        }
        return;
    }
    if let Some(signature) = signature {
        builder.parts.push(signed(String::new(), signature));
    }
    if !text.is_empty() {
        if let Some(out) = out {
            out.push_back(StreamEvent::TextDelta(text.clone()));
        }
        builder.push_text(&text);
    }
}

pub(super) fn signed(text: String, signature: String) -> ContentPart {
    ContentPart::Reasoning(Reasoning {
        text,
        signature: Some(signature),
        ..Reasoning::default()
    })
}

fn finish_reason(reason: Option<&str>, builder: &AssistantBuilder) -> FinishReason {
    match reason {
        _ if builder.has_tool_calls() => FinishReason::ToolCalls,
        None | Some("STOP" | "FINISH_REASON_UNSPECIFIED") => FinishReason::Stop,
        Some("MAX_TOKENS") => FinishReason::Length,
        Some(
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY"
            | "OTHER_SAFETY",
        ) => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse {
    #[serde(default)]
    candidates: Vec<Candidate>,
    prompt_feedback: Option<PromptFeedback>,
    usage_metadata: Option<WireUsage>,
    model_version: Option<String>,
    response_id: Option<String>,
    /// A `google.rpc.Status` inside a stream or a success body.
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    content: Option<WireContent>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    block_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireContent {
    #[serde(default)]
    parts: Vec<WirePart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePart {
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    thought_signature: Option<String>,
    function_call: Option<WireCall>,
}

#[derive(Deserialize)]
struct WireCall {
    #[serde(default)]
    name: String,
    #[serde(default)]
    args: Value,
    id: Option<String>,
}

/// `usageMetadata`; in streams each event repeats the running totals.
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    thoughts_token_count: u64,
    #[serde(default)]
    cached_content_token_count: u64,
    #[serde(default)]
    tool_use_prompt_token_count: u64,
}

impl WireUsage {
    /// `promptTokenCount` includes cached tokens; thoughts are output tokens too.
    fn into_usage(self) -> Usage {
        Usage {
            input_tokens: self.prompt_token_count + self.tool_use_prompt_token_count,
            output_tokens: self.candidates_token_count + self.thoughts_token_count,
            cached_input_tokens: self.cached_content_token_count,
            cache_write_tokens: 0,
            reasoning_tokens: self.thoughts_token_count,
        }
    }
}

/// Streaming state: every event is a whole `GenerateContentResponse` holding the next parts.
#[derive(Default)]
pub(crate) struct GeminiDecoder {
    builder: AssistantBuilder,
    usage: WireUsage,
    finish_reason: Option<String>,
    id: Option<String>,
    model: Option<String>,
    /// Whether any event arrived (a stream may end without a terminal marker).
    started: bool,
}

impl StreamDecoder for GeminiDecoder {
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, Error> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(false);
        }
        let chunk: WireResponse = parse_json(NAME, data.as_bytes())?;
        if let Some(error) = chunk.error {
            return Err(wire_error(&error));
        }
        self.started = true;
        if let Some(usage) = chunk.usage_metadata {
            self.usage = usage;
        }
        self.id = chunk.response_id.or(self.id.take());
        self.model = chunk.model_version.or(self.model.take());
        if let Some(candidate) = chunk.candidates.into_iter().next() {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                push_part(&mut self.builder, part, Some(out));
            }
            if candidate.finish_reason.is_some() {
                self.finish_reason = candidate.finish_reason;
            }
        } else if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
            self.finish_reason = Some(reason);
        }
        Ok(false)
    }

    /// The API sends no terminal event: a stream is complete once a finish reason came.
    fn finish(self, _complete: bool) -> Result<ModelResponse, Error> {
        if self.finish_reason.is_none() {
            return Err(Error::Decode {
                provider: NAME,
                message: if self.started {
                    "the stream ended before a finish reason".into()
                } else {
                    "the stream ended without any event".into()
                },
                body: String::new(),
            });
        }
        Ok(ModelResponse {
            finish_reason: finish_reason(self.finish_reason.as_deref(), &self.builder),
            message: self.builder.into_message(),
            usage: self.usage.into_usage(),
            id: self.id,
            model: self.model,
        })
    }
}
