//! The one token estimator: cheap, provider-independent for text, provider-specific for images.
//!
//! Text costs one token per [`BYTES_PER_TOKEN`] bytes of UTF-8 (rounded up), which is close to
//! what BPE tokenizers give for English and code and over-estimates most other text, the safe
//! side for fitting a context window. Images cost what each provider documents for their size
//! (read from the PNG or GIF header when present), or a conservative default.

use std::io;

use base64::prelude::{BASE64_STANDARD, Engine};
use serde::Serialize;

use crate::message::{ContentPart, ImageSource, Message};
use crate::model::ProviderKind;
use crate::model::{LanguageModel, ModelRequest};
use crate::tool::{ContentBlock, ToolDescriptor, ToolOutput};

pub use crate::tool::BYTES_PER_TOKEN;

/// Tokens counted for each message's framing (role, separators).
const MESSAGE_OVERHEAD: u64 = 4;

/// The estimated token count of `text`: its UTF-8 length divided by [`BYTES_PER_TOKEN`],
/// rounded up.
///
/// ```
/// assert_eq!(aquaregia::estimate_tokens("12345678"), 2);
/// assert_eq!(aquaregia::estimate_tokens("123456789"), 3);
/// ```
pub fn estimate_tokens(text: &str) -> u64 {
    bytes_to_tokens(text.len())
}

/// The wire API whose rules estimates follow for `model`: its own, else OpenAI's.
pub(crate) fn estimator_kind(model: &dyn LanguageModel) -> ProviderKind {
    model.kind().unwrap_or(ProviderKind::OpenAiChat)
}

pub(crate) fn bytes_to_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(BYTES_PER_TOKEN)
}

/// The estimated token cost of one image for `provider`, from the base64 data of the image
/// (only its first bytes are read, for the dimensions) or `None` for an image by URL.
///
/// OpenAI: 85 + 170 per 512-pixel tile after scaling into 2048×2048 and the short side to 768
/// (high detail). Anthropic: width × height / 750 after scaling into 1568 pixels, at most 1600.
/// Gemini: 258 per 768-pixel tile (258 for images within 384×384). Unknown sizes count as a
/// large image: 765, 1600 and 1032 tokens.
pub fn estimate_image_tokens(provider: ProviderKind, base64_data: Option<&str>) -> u64 {
    let size = base64_data.and_then(image_size);
    match provider {
        ProviderKind::Anthropic => size.map_or(1600, |(w, h)| {
            let (w, h) = scale_into(w, h, 1568.0);
            ((w * h / 750.0).ceil() as u64).clamp(1, 1600)
        }),
        ProviderKind::Gemini => size.map_or(1032, |(w, h)| {
            if w <= 384.0 && h <= 384.0 {
                258
            } else {
                258 * ((w / 768.0).ceil() as u64) * ((h / 768.0).ceil() as u64)
            }
        }),
        _ => size.map_or(765, |(w, h)| {
            let (w, h) = scale_into(w, h, 2048.0);
            let short = w.min(h);
            let (w, h) = if short > 768.0 {
                (w * 768.0 / short, h * 768.0 / short)
            } else {
                (w, h)
            };
            85 + 170 * ((w / 512.0).ceil() as u64) * ((h / 512.0).ceil() as u64)
        }),
    }
}

/// Scales `(w, h)` down (never up) so the longer side is at most `max`.
fn scale_into(w: f64, h: f64, max: f64) -> (f64, f64) {
    let long = w.max(h);
    if long > max {
        (w * max / long, h * max / long)
    } else {
        (w, h)
    }
}

/// Width and height from a PNG or GIF header in the first bytes of base64 data.
fn image_size(base64_data: &str) -> Option<(f64, f64)> {
    let head = BASE64_STANDARD.decode(base64_data.get(..32)?).ok()?;
    let be = |at: usize| -> Option<f64> {
        let bytes: [u8; 4] = head.get(at..at + 4)?.try_into().ok()?;
        Some(f64::from(u32::from_be_bytes(bytes)))
    };
    let le16 = |at: usize| -> Option<f64> {
        let bytes: [u8; 2] = head.get(at..at + 2)?.try_into().ok()?;
        Some(f64::from(u16::from_le_bytes(bytes)))
    };
    let size = if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        (be(16)?, be(20)?)
    } else if head.starts_with(b"GIF8") {
        (le16(6)?, le16(8)?)
    } else {
        return None;
    };
    (size.0 > 0.0 && size.1 > 0.0).then_some(size)
}

/// Counts the bytes a value serializes to, without keeping them.
struct ByteCounter(usize);

impl io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The length of `value`'s compact JSON.
pub(crate) fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = ByteCounter(0);
    // Serializing into a counter cannot fail for the value types used here.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// The estimated tokens of a tool output as a provider receives it.
pub(crate) fn estimate_output_tokens(output: &ToolOutput, provider: ProviderKind) -> u64 {
    match output {
        ToolOutput::Text(text) => estimate_tokens(text),
        ToolOutput::Json(value) => bytes_to_tokens(json_len(value)),
        ToolOutput::Content(blocks)
        | ToolOutput::Structured {
            content: blocks, ..
        } => blocks
            .iter()
            .map(|block| match block {
                ContentBlock::Image { data, .. } => estimate_image_tokens(provider, Some(data)),
                other => estimate_tokens(&other.to_text()),
            })
            .sum(),
    }
}

/// The estimated tokens of one message.
pub(crate) fn estimate_message_tokens(message: &Message, provider: ProviderKind) -> u64 {
    let parts: u64 = message
        .content
        .iter()
        .map(|part| match part {
            ContentPart::Text { text } => estimate_tokens(text),
            ContentPart::Image {
                source: ImageSource::Base64 { data, .. },
            } => estimate_image_tokens(provider, Some(data)),
            ContentPart::Image { .. } => estimate_image_tokens(provider, None),
            ContentPart::Reasoning(reasoning) => {
                estimate_tokens(&reasoning.text)
                    + reasoning
                        .encrypted_content
                        .as_deref()
                        .map_or(0, estimate_tokens)
            }
            ContentPart::ToolCall(call) => {
                estimate_tokens(&call.id)
                    + estimate_tokens(&call.name)
                    + bytes_to_tokens(json_len(&call.arguments))
            }
            ContentPart::ToolResult(result) => {
                estimate_tokens(&result.call_id) + estimate_output_tokens(&result.output, provider)
            }
        })
        .sum();
    parts + MESSAGE_OVERHEAD
}

/// The estimated tokens of messages.
pub(crate) fn estimate_messages_tokens(messages: &[Message], provider: ProviderKind) -> u64 {
    messages
        .iter()
        .map(|message| estimate_message_tokens(message, provider))
        .sum()
}

/// The estimated tokens of one tool definition.
pub(crate) fn estimate_descriptor_tokens(descriptor: &ToolDescriptor) -> u64 {
    estimate_tokens(&descriptor.name)
        + estimate_tokens(&descriptor.description)
        + bytes_to_tokens(json_len(&descriptor.input_schema))
        + MESSAGE_OVERHEAD
}

/// The estimated input tokens of a whole request: instructions, messages and tool definitions.
///
/// ```
/// use aquaregia::{Message, ModelRequest, ProviderKind, estimate_request_tokens};
/// let request = ModelRequest::new("gpt-4o", vec![Message::user("hello there")]);
/// assert!(estimate_request_tokens(&request, ProviderKind::OpenAiChat) >= 3);
/// ```
pub fn estimate_request_tokens(request: &ModelRequest, provider: ProviderKind) -> u64 {
    request.instructions.as_deref().map_or(0, estimate_tokens)
        + estimate_messages_tokens(&request.messages, provider)
        + request
            .tools
            .iter()
            .map(|tool| estimate_descriptor_tokens(tool))
            .sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1x1 PNG.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGMwTjsDAAI1AWaKkkQyAAAAAElFTkSuQmCC";

    #[test]
    fn images_cost_what_each_provider_documents() {
        assert_eq!(image_size(PNG), Some((1.0, 1.0)));
        assert_eq!(
            estimate_image_tokens(ProviderKind::OpenAiChat, Some(PNG)),
            255
        );
        assert_eq!(estimate_image_tokens(ProviderKind::Anthropic, Some(PNG)), 1);
        assert_eq!(estimate_image_tokens(ProviderKind::Gemini, Some(PNG)), 258);
        assert_eq!(estimate_image_tokens(ProviderKind::Anthropic, None), 1600);
        assert_eq!(
            estimate_image_tokens(ProviderKind::OpenAiResponses, Some("!!")),
            765
        );
    }
}
