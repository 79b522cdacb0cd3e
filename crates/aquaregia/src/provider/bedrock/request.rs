//! Converse `messages`: consecutive messages of one role merged (the API wants strictly
//! alternating roles; a tool message is a user message here), tool results first in theirs,
//! written straight from the messages through borrowed wire structs.
//!
//! Fields are declared in alphabetical order, the order `serde_json::Value` objects have, so
//! bodies stay byte-identical to the ones built from `Value`s before.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::super::encode::{MergeGroup, append_item};
use super::super::{
    EMPTY_ERROR_TEXT, OutputPart, arguments_object, split_data_url, tool_output_parts,
};
use crate::error::Error;
use crate::message::{ContentPart, ImageSource, Message, Role, ToolResult};

/// One wire message.
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

    /// The latest turn, as a prompt-cache point, ends with a `cachePoint` block.
    fn write(self, out: &mut Vec<u8>, latest: bool) -> Result<(), Error> {
        append_item(
            out,
            &WireMessage {
                content: Blocks {
                    results: &self.results,
                    blocks: &self.blocks,
                    cache_point: latest,
                },
                role: self.role,
            },
        )
    }
}

/// The turn of one message; `None` for system messages (sent as `system`) and for messages
/// with no blocks (the API rejects empty content).
pub(super) fn turn(message: &Message) -> Option<Turn<'_>> {
    let mut results = Vec::new();
    let mut blocks = Vec::new();
    let role = match message.role {
        Role::System => return None,
        Role::User | Role::Tool => "user",
        Role::Assistant => "assistant",
    };
    for part in &message.content {
        match part {
            ContentPart::Text { text } if !text.trim().is_empty() => {
                blocks.push(Block::Text(Cow::Borrowed(text)));
            }
            ContentPart::Image { source } => blocks.extend(image_block(source)),
            ContentPart::ToolResult(result) => results.push(tool_result(result)),
            ContentPart::ToolCall(call) if message.role == Role::Assistant => {
                blocks.push(Block::ToolUse(ToolUse {
                    input: arguments_object(&call.arguments),
                    name: &call.name,
                    tool_use_id: &call.id,
                }));
            }
            // Reasoning goes back only with its signature (Claude's rule on Bedrock too).
            ContentPart::Reasoning(reasoning) if message.role == Role::Assistant => {
                if let Some(signature) = reasoning.signature.as_deref().filter(|s| !s.is_empty()) {
                    blocks.push(Block::ReasoningContent(Reasoning::ReasoningText {
                        signature,
                        text: &reasoning.text,
                    }));
                } else if let Some(data) = reasoning
                    .encrypted_content
                    .as_deref()
                    .filter(|d| !d.is_empty())
                {
                    blocks.push(Block::ReasoningContent(Reasoning::RedactedContent(data)));
                }
            }
            _ => {}
        }
    }
    (!results.is_empty() || !blocks.is_empty()).then_some(Turn {
        role,
        results,
        blocks,
    })
}

/// `system`: the text block, and a `cachePoint` after it when the system prompt is cached.
pub(super) fn system_blocks(text: &str, cached: bool) -> impl Serialize + '_ {
    SystemBlocks { text, cached }
}

struct SystemBlocks<'a> {
    text: &'a str,
    cached: bool,
}

impl Serialize for SystemBlocks<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = Block::Text(Cow::Borrowed(self.text));
        serializer.collect_seq(std::iter::once(&text).chain(self.cached.then_some(&CACHE_POINT)))
    }
}

const CACHE_POINT: Block<'static> = Block::CachePoint(CachePoint { kind: "default" });

#[derive(Debug, Serialize)]
struct WireMessage<'t, 'a> {
    content: Blocks<'t, 'a>,
    role: &'static str,
}

/// A message's content blocks: its `toolResult` blocks first, and a `cachePoint` last when
/// it is the latest turn and a prompt-cache point.
#[derive(Debug)]
struct Blocks<'t, 'a> {
    results: &'t [Block<'a>],
    blocks: &'t [Block<'a>],
    cache_point: bool,
}

impl Serialize for Blocks<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let cache_point = self.cache_point.then_some(&CACHE_POINT);
        serializer.collect_seq(self.results.iter().chain(self.blocks).chain(cache_point))
    }
}

/// A content block: an object whose one key names its kind.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
enum Block<'a> {
    CachePoint(CachePoint),
    Image(Image<'a>),
    ReasoningContent(Reasoning<'a>),
    Text(Cow<'a, str>),
    ToolResult(ToolResultBlock<'a>),
    ToolUse(ToolUse<'a>),
}

#[derive(Debug, Serialize)]
struct CachePoint {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Debug, Serialize)]
struct Image<'a> {
    format: &'static str,
    source: ImageBytes<'a>,
}

/// `source.bytes`: base64 in the JSON protocol.
#[derive(Debug, Serialize)]
struct ImageBytes<'a> {
    bytes: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
enum Reasoning<'a> {
    ReasoningText { signature: &'a str, text: &'a str },
    RedactedContent(&'a str),
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolResultBlock<'a> {
    content: Vec<Block<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    tool_use_id: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolUse<'a> {
    input: Cow<'a, Value>,
    name: &'a str,
    tool_use_id: &'a str,
}

/// `image/png` as Converse's `png`; `None` for a type it does not take.
fn image_format(mime_type: &str) -> Option<&'static str> {
    match mime_type {
        "image/png" => Some("png"),
        "image/jpeg" | "image/jpg" => Some("jpeg"),
        "image/gif" => Some("gif"),
        "image/webp" => Some("webp"),
        _ => None,
    }
}

/// An inline image (`source.bytes` is base64 in the JSON protocol); URLs other than data URLs
/// cannot be sent (Converse takes bytes or S3 locations only) and go as a text note.
fn image_block(source: &ImageSource) -> Option<Block<'_>> {
    let (mime_type, data) = match source {
        ImageSource::Base64 { mime_type, data } => (mime_type.as_str(), data.as_str()),
        ImageSource::Url { url } => match split_data_url(url) {
            Some(parts) => parts,
            None => return Some(Block::Text(Cow::Owned(format!("[image: {url}]")))),
        },
    };
    inline_image(mime_type, data)
}

fn inline_image<'a>(mime_type: &str, data: &'a str) -> Option<Block<'a>> {
    let format = image_format(mime_type)?;
    Some(Block::Image(Image {
        format,
        source: ImageBytes { bytes: data },
    }))
}

/// A `toolResult` block: text, JSON and images in order, `status: error` for a failure.
fn tool_result(result: &ToolResult) -> Block<'_> {
    let mut content: Vec<Block<'_>> = tool_output_parts(&result.output)
        .into_iter()
        .filter_map(|part| match part {
            OutputPart::Text(text) => (!text.is_empty()).then_some(Block::Text(text)),
            OutputPart::Image { mime_type, data } => inline_image(mime_type, data),
        })
        .collect();
    if content.is_empty() {
        let text = if result.is_error {
            EMPTY_ERROR_TEXT
        } else {
            ""
        };
        content.push(Block::Text(Cow::Borrowed(text)));
    }
    Block::ToolResult(ToolResultBlock {
        content,
        status: result.is_error.then_some("error"),
        tool_use_id: &result.call_id,
    })
}
