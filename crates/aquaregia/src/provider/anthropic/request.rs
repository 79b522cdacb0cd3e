//! Anthropic `messages`, written straight from the messages through borrowed wire structs.
//!
//! Fields are declared in alphabetical order, the order `serde_json::Value` objects have, so
//! bodies stay byte-identical to the ones built from `Value`s before.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::super::encode::{MergeGroup, append_item};
use super::super::{
    EMPTY_ERROR_TEXT, OutputPart, arguments_object, output_text, plain_output_text, split_data_url,
    tool_output_parts,
};
use crate::error::Error;
use crate::message::{ContentPart, ImageSource, Message, Reasoning, Role, ToolResult};

/// One message on the wire: consecutive messages of one role merged, as the API wants
/// strictly alternating roles (a tool message is a user message on this wire), with
/// `tool_result` blocks at the start of their user message.
#[derive(Debug)]
pub(super) struct Turn<'a> {
    role: &'static str,
    results: Vec<Block<'a>>,
    blocks: Vec<Block<'a>>,
}

impl MergeGroup for Turn<'_> {
    fn role(&self) -> &'static str {
        self.role
    }

    fn merge(&mut self, later: Self) {
        self.results.extend(later.results);
        self.blocks.extend(later.blocks);
    }

    /// A message of one text block goes as a plain string, the form the API documents,
    /// unless it is the latest turn and a prompt-cache breakpoint: the breakpoint goes on its
    /// last block that may carry one (thinking blocks may not).
    fn write(mut self, out: &mut Vec<u8>, latest: bool) -> Result<(), Error> {
        let breakpoint = self
            .blocks
            .iter_mut()
            .rev()
            .chain(self.results.iter_mut().rev())
            .find(|block| !matches!(block.kind, "thinking" | "redacted_thinking"));
        if let Some(block) = breakpoint.filter(|_| latest) {
            block.cache_control = Some(EPHEMERAL);
        }
        let content = match (self.results.as_slice(), self.blocks.as_slice()) {
            (
                [],
                [
                    Block {
                        cache_control: None,
                        kind: "text",
                        text: Some(text),
                        ..
                    },
                ],
            ) => Content::Text(text),
            (results, blocks) => Content::Blocks(Blocks { results, blocks }),
        };
        append_item(
            out,
            &WireMessage {
                content,
                role: self.role,
            },
        )
    }
}

/// The turn of one message; `None` for system messages (sent as `system`) and for messages
/// with no blocks (the API rejects empty messages).
pub(super) fn turn(message: &Message) -> Option<Turn<'_>> {
    let (role, results, blocks) = match message.role {
        Role::System => return None,
        Role::User | Role::Tool => {
            let (results, blocks) = user_blocks(&message.content);
            ("user", results, blocks)
        }
        Role::Assistant => ("assistant", Vec::new(), assistant_blocks(&message.content)),
    };
    (!results.is_empty() || !blocks.is_empty()).then_some(Turn {
        role,
        results,
        blocks,
    })
}

#[derive(Debug, Serialize)]
struct WireMessage<'t, 'a> {
    content: Content<'t, 'a>,
    role: &'static str,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Content<'t, 'a> {
    Text(&'t str),
    Blocks(Blocks<'t, 'a>),
}

/// A message's content blocks: its `tool_result` blocks first.
#[derive(Debug)]
struct Blocks<'t, 'a> {
    results: &'t [Block<'a>],
    blocks: &'t [Block<'a>],
}

impl Serialize for Blocks<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.results.iter().chain(self.blocks))
    }
}

/// A prompt-cache breakpoint (`cache_control`).
#[derive(Debug, Clone, Copy, Serialize)]
pub(super) struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

/// A breakpoint with the default (5 minute) lifetime.
const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

/// A text block that is a prompt-cache breakpoint (the cached system prompt).
pub(super) fn cached_text(text: &str) -> impl Serialize + '_ {
    Block {
        cache_control: Some(EPHEMERAL),
        ..text_block_of(text.into())
    }
}

/// A content block; `kind` says which of the other fields are set.
#[derive(Debug, Default, Serialize)]
struct Block<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<ResultContent<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<Cow<'a, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_error: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signature: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<Source<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_use_id: Option<&'a str>,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// A tool result's content: text alone, or text and image blocks.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum ResultContent<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
}

/// An image source: `base64` (`data`, `media_type`) or `url`.
#[derive(Debug, Serialize)]
struct Source<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    media_type: Option<&'a str>,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<&'a str>,
}

/// `tool_result` blocks and the other blocks of a user or tool message, kept apart so the
/// results can go first.
fn user_blocks(parts: &[ContentPart]) -> (Vec<Block<'_>>, Vec<Block<'_>>) {
    let mut results = Vec::new();
    let mut blocks = Vec::new();
    for part in parts {
        match part {
            ContentPart::Text { text } => blocks.extend(text_block(text.into())),
            ContentPart::Image { source } => blocks.push(image_block(source)),
            ContentPart::ToolResult(result) => results.push(tool_result_block(result)),
            _ => {}
        }
    }
    (results, blocks)
}

fn assistant_blocks(parts: &[ContentPart]) -> Vec<Block<'_>> {
    let mut blocks = Vec::new();
    for part in parts {
        match part {
            ContentPart::Reasoning(reasoning) => blocks.extend(thinking_block(reasoning)),
            ContentPart::Text { text } => blocks.extend(text_block(text.into())),
            ContentPart::ToolCall(call) => blocks.push(Block {
                id: Some(&call.id),
                input: Some(arguments_object(&call.arguments)),
                name: Some(&call.name),
                kind: "tool_use",
                ..Block::default()
            }),
            _ => {}
        }
    }
    blocks
}

/// Thinking goes back unchanged only with its signature (or as redacted data); the API
/// rejects unsigned thinking, and reasoning from other providers has no signature.
fn thinking_block(reasoning: &Reasoning) -> Option<Block<'_>> {
    if let Some(signature) = reasoning.signature.as_deref().filter(|s| !s.is_empty()) {
        return Some(Block {
            signature: Some(signature),
            thinking: Some(&reasoning.text),
            kind: "thinking",
            ..Block::default()
        });
    }
    reasoning
        .encrypted_content
        .as_deref()
        .filter(|data| !data.is_empty())
        .map(|data| Block {
            data: Some(data),
            kind: "redacted_thinking",
            ..Block::default()
        })
}

/// The API rejects empty and whitespace-only text blocks.
fn text_block(text: Cow<'_, str>) -> Option<Block<'_>> {
    (!text.trim().is_empty()).then(|| text_block_of(text))
}

fn text_block_of(text: Cow<'_, str>) -> Block<'_> {
    Block {
        text: Some(text),
        kind: "text",
        ..Block::default()
    }
}

fn image_block(source: &ImageSource) -> Block<'_> {
    match source {
        ImageSource::Base64 { mime_type, data } => base64_image(mime_type, data),
        // `url` sources must be fetchable, so data URLs are sent inline.
        ImageSource::Url { url } => match split_data_url(url) {
            Some((mime_type, data)) => base64_image(mime_type, data),
            None => image(Source {
                data: None,
                media_type: None,
                kind: "url",
                url: Some(url),
            }),
        },
    }
}

fn base64_image<'a>(mime_type: &'a str, data: &'a str) -> Block<'a> {
    image(Source {
        data: Some(data),
        media_type: Some(mime_type),
        kind: "base64",
        url: None,
    })
}

fn image(source: Source<'_>) -> Block<'_> {
    Block {
        source: Some(source),
        kind: "image",
        ..Block::default()
    }
}

/// Text-only output goes as a string; with images, as text and image blocks in order.
fn tool_result_block(result: &ToolResult) -> Block<'_> {
    let content = match plain_output_text(&result.output) {
        Some(text) => result_text(text, result.is_error),
        None => {
            let parts = tool_output_parts(&result.output);
            if parts.iter().any(|p| matches!(p, OutputPart::Image { .. })) {
                let blocks = parts
                    .into_iter()
                    .filter_map(|part| match part {
                        OutputPart::Text(text) => text_block(text),
                        OutputPart::Image { mime_type, data } => {
                            Some(base64_image(mime_type, data))
                        }
                    })
                    .collect();
                Some(ResultContent::Blocks(blocks))
            } else {
                result_text(output_text(&parts).into(), result.is_error)
            }
        }
    };
    Block {
        content,
        is_error: result.is_error.then_some(true),
        tool_use_id: Some(&result.call_id),
        kind: "tool_result",
        ..Block::default()
    }
}

/// A text result: none when blank, unless it is an error (the API rejects empty error
/// results).
fn result_text(text: Cow<'_, str>, is_error: bool) -> Option<ResultContent<'_>> {
    if !text.trim().is_empty() {
        Some(ResultContent::Text(text))
    } else if is_error {
        Some(ResultContent::Text(Cow::Borrowed(EMPTY_ERROR_TEXT)))
    } else {
        None
    }
}
