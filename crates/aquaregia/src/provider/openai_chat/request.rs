//! Chat Completions `messages`, written straight from the messages through borrowed wire
//! structs.
//!
//! Fields are declared in alphabetical order, the order `serde_json::Value` objects have, so
//! bodies stay byte-identical to the ones built from `Value`s before.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::super::encode::append_item;
use super::super::{OutputPart, output_text, plain_output_text, tool_output_parts};
use crate::error::Error;
use crate::message::{ContentPart, ImageSource, Message, Role};

#[derive(Debug, Serialize)]
pub(super) struct WireMessage<'a> {
    /// `null` for an assistant message with tool calls only.
    content: Option<Content<'a>>,
    /// An assistant message's reasoning, for dialects that want it back.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<Cow<'a, str>>,
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
}

impl<'a> WireMessage<'a> {
    pub(super) fn new(role: &'static str, content: Content<'a>) -> Self {
        Self {
            content: Some(content),
            reasoning_content: None,
            role,
            tool_call_id: None,
            tool_calls: Vec::new(),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

/// A `text` or `image_url` content part.
#[derive(Debug, Serialize)]
pub(super) struct Part<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    image_url: Option<ImageUrl<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<Cow<'a, str>>,
    #[serde(rename = "type")]
    kind: &'static str,
}

impl<'a> Part<'a> {
    fn text(text: Cow<'a, str>) -> Self {
        Self {
            image_url: None,
            text: Some(text),
            kind: "text",
        }
    }

    fn image(url: Cow<'a, str>) -> Self {
        Self {
            image_url: Some(ImageUrl { url }),
            text: None,
            kind: "image_url",
        }
    }
}

#[derive(Debug, Serialize)]
pub(super) struct ImageUrl<'a> {
    url: Cow<'a, str>,
}

#[derive(Debug, Serialize)]
pub(super) struct WireToolCall<'a> {
    function: Function<'a>,
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Debug, Serialize)]
struct Function<'a> {
    arguments: Cow<'a, str>,
    name: &'a str,
}

/// Appends the wire messages of `message`; with `reasoning_back`, an assistant message's
/// reasoning goes as `reasoning_content` (empty for a tool-calling message without any).
pub(super) fn write_message(
    out: &mut Vec<u8>,
    message: &Message,
    reasoning_back: bool,
) -> Result<(), Error> {
    match message.role {
        Role::System => Ok(()), // merged into the leading system message
        Role::User => append_item(
            out,
            &WireMessage::new("user", user_content(&message.content)),
        ),
        Role::Assistant => {
            let text = joined_text(&message.content);
            let tool_calls = message
                .tool_calls()
                .map(|call| WireToolCall {
                    function: Function {
                        arguments: arguments_text(&call.arguments),
                        name: &call.name,
                    },
                    id: &call.id,
                    kind: "function",
                })
                .collect::<Vec<_>>();
            let reasoning_content = if reasoning_back {
                let reasoning = joined_reasoning(&message.content);
                (!reasoning.is_empty() || !tool_calls.is_empty()).then_some(reasoning)
            } else {
                None
            };
            let wire = WireMessage {
                content: (!text.is_empty()).then_some(Content::Text(text)),
                reasoning_content,
                role: "assistant",
                tool_call_id: None,
                tool_calls,
            };
            append_item(out, &wire)
        }
        Role::Tool => write_tool_results(out, &message.content),
    }
}

/// Tool messages take text only: images go in one user message right after.
fn write_tool_results(out: &mut Vec<u8>, content: &[ContentPart]) -> Result<(), Error> {
    let mut images = Vec::new();
    for part in content {
        let ContentPart::ToolResult(result) = part else {
            continue;
        };
        let (mut text, parts) = match plain_output_text(&result.output) {
            Some(text) => (text, Vec::new()),
            None => {
                let parts = tool_output_parts(&result.output);
                (Cow::Owned(output_text(&parts)), parts)
            }
        };
        let before = images.len();
        for part in &parts {
            if let OutputPart::Image { mime_type, data } = part {
                if images.len() == before {
                    images.push(Part::text(Cow::Owned(format!(
                        "Image returned by {} (tool call {}):",
                        result.name, result.call_id
                    ))));
                }
                images.push(Part::image(Cow::Owned(format!(
                    "data:{mime_type};base64,{data}"
                ))));
            }
        }
        if text.is_empty() && images.len() > before {
            text = Cow::Borrowed("The image is attached in the next user message.");
        }
        let wire = WireMessage {
            tool_call_id: Some(&result.call_id),
            ..WireMessage::new("tool", Content::Text(text))
        };
        append_item(out, &wire)?;
    }
    if !images.is_empty() {
        append_item(out, &WireMessage::new("user", Content::Parts(images)))?;
    }
    Ok(())
}

fn user_content(parts: &[ContentPart]) -> Content<'_> {
    if let [ContentPart::Text { text }] = parts {
        return Content::Text(Cow::Borrowed(text));
    }
    Content::Parts(
        parts
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text { text } => Some(Part::text(Cow::Borrowed(text))),
                ContentPart::Image { source } => Some(Part::image(image_url(source))),
                _ => None,
            })
            .collect(),
    )
}

/// The text parts of a message, concatenated (borrowed when there is only one).
fn joined_text(parts: &[ContentPart]) -> Cow<'_, str> {
    joined(parts.iter().filter_map(|part| match part {
        ContentPart::Text { text } => Some(text.as_str()),
        _ => None,
    }))
}

/// The reasoning parts of a message, concatenated.
fn joined_reasoning(parts: &[ContentPart]) -> Cow<'_, str> {
    joined(parts.iter().filter_map(|part| match part {
        ContentPart::Reasoning(reasoning) => Some(reasoning.text.as_str()),
        _ => None,
    }))
}

/// `texts` concatenated (borrowed when there is only one).
fn joined<'a>(mut texts: impl Iterator<Item = &'a str>) -> Cow<'a, str> {
    let Some(first) = texts.next() else {
        return Cow::Borrowed("");
    };
    match texts.next() {
        None => Cow::Borrowed(first),
        Some(second) => {
            let mut text = [first, second].concat();
            texts.for_each(|more| text.push_str(more));
            Cow::Owned(text)
        }
    }
}

/// An image's URL: as given, or a data URL for inline data.
pub(crate) fn image_url(source: &ImageSource) -> Cow<'_, str> {
    match source {
        ImageSource::Base64 { mime_type, data } => {
            Cow::Owned(format!("data:{mime_type};base64,{data}"))
        }
        ImageSource::Url { url } => Cow::Borrowed(url),
    }
}

/// Arguments go back as the JSON text the model wrote (a string stays a string when it was
/// not JSON).
pub(crate) fn arguments_text(arguments: &Value) -> Cow<'_, str> {
    match arguments {
        Value::String(text) => Cow::Borrowed(text),
        other => Cow::Owned(other.to_string()),
    }
}
