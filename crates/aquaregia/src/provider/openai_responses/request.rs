//! Responses `input` items, written straight from the messages through borrowed wire structs.
//!
//! Fields are declared in alphabetical order, the order `serde_json::Value` objects have, so
//! bodies stay byte-identical to the ones built from `Value`s before.

use std::borrow::Cow;

use serde::Serialize;

use super::super::encode::append_item;
use super::super::openai_chat::{arguments_text, image_url};
use super::super::{OutputPart, output_text, plain_output_text, tool_output_parts};
use crate::error::Error;
use crate::message::{ContentPart, Message, Reasoning, Role};
use crate::tool::ToolOutput;

/// An input item; `kind` says which of the other fields are set.
#[derive(Debug, Default, Serialize)]
struct Item<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<Vec<Part<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Output<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<Vec<Part<'a>>>,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// A content, output or summary part: text or an image.
#[derive(Debug, Serialize)]
struct Part<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image_url: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<Cow<'a, str>>,
    #[serde(rename = "type")]
    kind: &'static str,
}

impl<'a> Part<'a> {
    fn text(kind: &'static str, text: Cow<'a, str>) -> Self {
        Self {
            detail: None,
            image_url: None,
            text: Some(text),
            kind,
        }
    }

    fn image(url: Cow<'a, str>) -> Self {
        Self {
            detail: Some("auto"),
            image_url: Some(url),
            text: None,
            kind: "input_image",
        }
    }
}

/// A tool's output: text, or input text and image parts.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Output<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

/// Appends the input items of `message`. `stored`: whether the API keeps items, so reasoning
/// can go back by id alone.
pub(super) fn write_items(out: &mut Vec<u8>, message: &Message, stored: bool) -> Result<(), Error> {
    match message.role {
        Role::System => Ok(()), // part of `instructions`
        Role::User => {
            let content: Vec<Part<'_>> = message
                .content
                .iter()
                .filter_map(|part| match part {
                    ContentPart::Text { text } => {
                        Some(Part::text("input_text", Cow::Borrowed(text)))
                    }
                    ContentPart::Image { source } => Some(Part::image(image_url(source))),
                    _ => None,
                })
                .collect();
            if content.is_empty() {
                return Ok(());
            }
            append_item(
                out,
                &Item {
                    content: Some(content),
                    role: Some("user"),
                    kind: "message",
                    ..Item::default()
                },
            )
        }
        Role::Assistant => {
            let mut text = Cow::Borrowed("");
            for part in &message.content {
                match part {
                    ContentPart::Text { text: more } if text.is_empty() => {
                        text = Cow::Borrowed(more);
                    }
                    ContentPart::Text { text: more } => text.to_mut().push_str(more),
                    ContentPart::Reasoning(reasoning) => {
                        flush_text(out, &mut text)?;
                        if let Some(item) = reasoning_item(reasoning, stored) {
                            append_item(out, &item)?;
                        }
                    }
                    ContentPart::ToolCall(call) => {
                        flush_text(out, &mut text)?;
                        let item = Item {
                            arguments: Some(arguments_text(&call.arguments)),
                            call_id: Some(&call.id),
                            name: Some(&call.name),
                            kind: "function_call",
                            ..Item::default()
                        };
                        append_item(out, &item)?;
                    }
                    _ => {}
                }
            }
            flush_text(out, &mut text)
        }
        Role::Tool => {
            for part in &message.content {
                let ContentPart::ToolResult(result) = part else {
                    continue;
                };
                let item = Item {
                    call_id: Some(&result.call_id),
                    output: Some(tool_output(&result.output)),
                    kind: "function_call_output",
                    ..Item::default()
                };
                append_item(out, &item)?;
            }
            Ok(())
        }
    }
}

/// Text-only output goes as a string; with images, as input text and image parts in order.
fn tool_output(output: &ToolOutput) -> Output<'_> {
    if let Some(text) = plain_output_text(output) {
        return Output::Text(text);
    }
    let parts = tool_output_parts(output);
    if !parts.iter().any(|p| matches!(p, OutputPart::Image { .. })) {
        return Output::Text(Cow::Owned(output_text(&parts)));
    }
    Output::Parts(
        parts
            .into_iter()
            .map(|part| match part {
                OutputPart::Text(text) => Part::text("input_text", text),
                OutputPart::Image { mime_type, data } => {
                    Part::image(Cow::Owned(format!("data:{mime_type};base64,{data}")))
                }
            })
            .collect(),
    )
}

/// Writes the assistant text gathered so far as an output message, if there is any.
fn flush_text<'a>(out: &mut Vec<u8>, text: &mut Cow<'a, str>) -> Result<(), Error> {
    if text.is_empty() {
        return Ok(());
    }
    let text = std::mem::replace(text, Cow::Borrowed(""));
    append_item(
        out,
        &Item {
            content: Some(vec![Part::text("output_text", text)]),
            role: Some("assistant"),
            kind: "message",
            ..Item::default()
        },
    )
}

/// A reasoning item the API accepts back: it needs its `rs_` id and, unless stored, its
/// encrypted content. Other providers' thinking has no id and is left out.
fn reasoning_item(reasoning: &Reasoning, stored: bool) -> Option<Item<'_>> {
    let id = reasoning.id.as_deref()?;
    if reasoning.encrypted_content.is_none() && !stored {
        return None;
    }
    let summary = if reasoning.text.is_empty() {
        Vec::new()
    } else {
        vec![Part::text("summary_text", Cow::Borrowed(&reasoning.text))]
    };
    Some(Item {
        encrypted_content: reasoning.encrypted_content.as_deref(),
        id: Some(id),
        summary: Some(summary),
        kind: "reasoning",
        ..Item::default()
    })
}
