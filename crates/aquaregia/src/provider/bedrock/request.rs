//! Converse `messages`: consecutive messages of one role merged (the API wants strictly
//! alternating roles; a tool message is a user message here), tool results first in theirs.

use serde_json::{Value, json};

use super::super::encode::{MergeGroup, append_item};
use super::super::{
    EMPTY_ERROR_TEXT, OutputPart, arguments_object, split_data_url, tool_output_parts,
};
use crate::error::Error;
use crate::message::{ContentPart, ImageSource, Message, Role, ToolResult};

/// One wire message.
#[derive(Debug)]
pub(super) struct Turn {
    role: &'static str,
    results: Vec<Value>,
    blocks: Vec<Value>,
}

impl MergeGroup for Turn {
    fn role(&self) -> &'static str {
        self.role
    }

    fn merge(&mut self, later: Self) {
        self.results.extend(later.results);
        self.blocks.extend(later.blocks);
    }

    /// The latest turn, as a prompt-cache point, ends with a `cachePoint` block.
    fn write(self, out: &mut Vec<u8>, latest: bool) -> Result<(), Error> {
        let mut content = self.results;
        content.extend(self.blocks);
        if latest {
            content.push(json!({"cachePoint": {"type": "default"}}));
        }
        append_item(out, &json!({"content": content, "role": self.role}))
    }
}

/// The turn of one message; `None` for system messages (sent as `system`) and for messages
/// with no blocks (the API rejects empty content).
pub(super) fn turn(message: &Message) -> Option<Turn> {
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
                blocks.push(json!({"text": text}));
            }
            ContentPart::Image { source } => blocks.extend(image_block(source)),
            ContentPart::ToolResult(result) => results.push(tool_result(result)),
            ContentPart::ToolCall(call) if message.role == Role::Assistant => {
                blocks.push(json!({"toolUse": {
                    "toolUseId": call.id,
                    "name": call.name,
                    "input": arguments_object(&call.arguments),
                }}));
            }
            // Reasoning goes back only with its signature (Claude's rule on Bedrock too).
            ContentPart::Reasoning(reasoning) if message.role == Role::Assistant => {
                if let Some(signature) = reasoning.signature.as_deref().filter(|s| !s.is_empty()) {
                    blocks.push(json!({"reasoningContent": {"reasoningText": {
                        "text": reasoning.text, "signature": signature}}}));
                } else if let Some(data) = reasoning
                    .encrypted_content
                    .as_deref()
                    .filter(|d| !d.is_empty())
                {
                    blocks.push(json!({"reasoningContent": {"redactedContent": data}}));
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
fn image_block(source: &ImageSource) -> Option<Value> {
    let (mime_type, data) = match source {
        ImageSource::Base64 { mime_type, data } => (mime_type.as_str(), data.as_str()),
        ImageSource::Url { url } => match split_data_url(url) {
            Some(parts) => parts,
            None => return Some(json!({"text": format!("[image: {url}]")})),
        },
    };
    inline_image(mime_type, data)
}

fn inline_image(mime_type: &str, data: &str) -> Option<Value> {
    let format = image_format(mime_type)?;
    Some(json!({"image": {"format": format, "source": {"bytes": data}}}))
}

/// A `toolResult` block: text, JSON and images in order, `status: error` for a failure.
fn tool_result(result: &ToolResult) -> Value {
    let mut content: Vec<Value> = tool_output_parts(&result.output)
        .into_iter()
        .filter_map(|part| match part {
            OutputPart::Text(text) => (!text.is_empty()).then(|| json!({"text": text})),
            OutputPart::Image { mime_type, data } => inline_image(mime_type, data),
        })
        .collect();
    if content.is_empty() {
        let text = if result.is_error {
            EMPTY_ERROR_TEXT
        } else {
            ""
        };
        content.push(json!({"text": text}));
    }
    let mut block = json!({"toolUseId": result.call_id, "content": content});
    if result.is_error {
        block["status"] = json!("error");
    }
    json!({"toolResult": block})
}
