//! `CallToolResult` -> [`ToolOutput`] (the mapping table in the module docs).

use rmcp::model::{CallToolResult, ContentBlock as McpBlock, ResourceContents};
use serde_json::Value;

use aquaregia::{ContentBlock, ToolExecError, ToolOutput};

/// Maps a typed result.
pub(crate) fn map_result(result: CallToolResult) -> Result<ToolOutput, ToolExecError> {
    let blocks = result.content.into_iter().map(typed_block).collect();
    finish(
        result.is_error.unwrap_or(false),
        result.structured_content,
        blocks,
    )
}

/// Maps a result rmcp could not type (a content block type newer than rmcp knows): known
/// blocks as usual, unknown ones kept as their JSON text.
pub(crate) fn map_raw_result(mut result: Value) -> Result<ToolOutput, ToolExecError> {
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let structured = result
        .as_object_mut()
        .and_then(|object| object.remove("structuredContent"));
    let blocks = match result.get_mut("content").map(Value::take) {
        Some(Value::Array(blocks)) => blocks.iter().map(raw_block).collect(),
        _ => Vec::new(),
    };
    finish(is_error, structured, blocks)
}

fn finish(
    is_error: bool,
    structured: Option<Value>,
    mut blocks: Vec<ContentBlock>,
) -> Result<ToolOutput, ToolExecError> {
    if is_error {
        let texts: Vec<&str> = blocks
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        return Err(ToolExecError::Execution(if texts.is_empty() {
            "the tool reported an error without a message".to_owned()
        } else {
            texts.join("\n")
        }));
    }
    let has_media = blocks.iter().any(|block| {
        matches!(
            block,
            ContentBlock::Image { .. } | ContentBlock::Audio { .. }
        )
    });
    // Structured content is the result when the blocks are only its text rendering; with
    // images or audio the blocks are what the model must see (the structured value of such
    // results repeats them as base64 text), the structured value kept beside them.
    match structured {
        Some(structured) if !has_media => return Ok(ToolOutput::Json(structured)),
        Some(structured) => {
            return Ok(ToolOutput::Structured {
                content: blocks,
                structured,
            });
        }
        None => {}
    }
    if let [ContentBlock::Text { .. }] = blocks.as_slice()
        && let Some(ContentBlock::Text { text }) = blocks.pop()
    {
        return Ok(ToolOutput::Text(text));
    }
    if blocks.is_empty() {
        return Ok(ToolOutput::Text(String::new()));
    }
    Ok(ToolOutput::Content(blocks))
}

pub(crate) fn typed_block(block: McpBlock) -> ContentBlock {
    match block {
        McpBlock::Text(text) => ContentBlock::Text { text: text.text },
        McpBlock::Image(image) => ContentBlock::Image {
            mime_type: image.mime_type,
            data: image.data,
        },
        McpBlock::Audio(audio) => ContentBlock::Audio {
            mime_type: audio.mime_type,
            data: audio.data,
        },
        McpBlock::Resource(embedded) => match embedded.resource {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => ContentBlock::Resource {
                uri,
                mime_type,
                text: Some(text),
                blob: None,
            },
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => ContentBlock::Resource {
                uri,
                mime_type,
                text: None,
                blob: Some(blob),
            },
            other => unknown_block(&other),
        },
        McpBlock::ResourceLink(link) => ContentBlock::ResourceLink {
            uri: link.uri,
            name: link.name,
            mime_type: link.mime_type,
            description: link.description,
        },
        other => unknown_block(&other),
    }
}

fn raw_block(block: &Value) -> ContentBlock {
    let field = |name: &str| block.get(name).and_then(Value::as_str).map(str::to_owned);
    let mapped = match block.get("type").and_then(Value::as_str) {
        Some("text") => field("text").map(|text| ContentBlock::Text { text }),
        Some("image") => field("mimeType")
            .zip(field("data"))
            .map(|(mime_type, data)| ContentBlock::Image { mime_type, data }),
        Some("audio") => field("mimeType")
            .zip(field("data"))
            .map(|(mime_type, data)| ContentBlock::Audio { mime_type, data }),
        Some("resource") => {
            let resource = block.get("resource");
            let get = |name: &str| {
                resource
                    .and_then(|r| r.get(name))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            let (text, blob) = (get("text"), get("blob"));
            get("uri")
                .filter(|_| text.is_some() || blob.is_some())
                .map(|uri| ContentBlock::Resource {
                    uri,
                    mime_type: get("mimeType"),
                    text,
                    blob,
                })
        }
        Some("resource_link") => {
            field("uri")
                .zip(field("name"))
                .map(|(uri, name)| ContentBlock::ResourceLink {
                    uri,
                    name,
                    mime_type: field("mimeType"),
                    description: field("description"),
                })
        }
        _ => None,
    };
    mapped.unwrap_or_else(|| unknown_block(block))
}

/// A block this version does not map: kept as its wire JSON text, never dropped.
fn unknown_block<T: serde::Serialize>(block: &T) -> ContentBlock {
    ContentBlock::Text {
        text: serde_json::to_string(block).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn raw_results_keep_unknown_blocks() {
        let result = json!({
            "content": [
                {"type": "text", "text": "a"},
                {"type": "hologram", "frames": 3}
            ]
        });
        let Ok(ToolOutput::Content(blocks)) = map_raw_result(result) else {
            panic!("content expected");
        };
        assert_eq!(blocks[0], ContentBlock::text("a"));
        let ContentBlock::Text { text } = &blocks[1] else {
            panic!("the unknown block is kept as text: {blocks:?}");
        };
        let kept: Value = serde_json::from_str(text).expect("its JSON");
        assert_eq!(kept, json!({"type": "hologram", "frames": 3}));
    }

    #[test]
    fn raw_results_map_known_blocks_like_typed_ones() {
        let result = json!({
            "content": [
                {"type": "image", "mimeType": "image/png", "data": "AA=="},
                {"type": "resource", "resource": {"uri": "file:///a", "mimeType": "text/plain", "text": "hi"}},
                {"type": "resource_link", "uri": "file:///b", "name": "b"}
            ]
        });
        assert_eq!(
            map_raw_result(result),
            Ok(ToolOutput::Content(vec![
                ContentBlock::image("image/png", "AA=="),
                ContentBlock::Resource {
                    uri: "file:///a".into(),
                    mime_type: Some("text/plain".into()),
                    text: Some("hi".into()),
                    blob: None,
                },
                ContentBlock::ResourceLink {
                    uri: "file:///b".into(),
                    name: "b".into(),
                    mime_type: None,
                    description: None,
                },
            ]))
        );
        assert_eq!(
            map_raw_result(json!({"isError": true, "content": [{"type": "text", "text": "x"}]})),
            Err(ToolExecError::Execution("x".into()))
        );
    }

    /// FastMCP's text + image + structured result, and server-filesystem's `read_media_file`
    /// (an image whose structured content repeats it as base64): the image reaches the model
    /// as an image.
    #[test]
    fn images_survive_structured_content() {
        let result = json!({
            "content": [
                {"type": "text", "text": "{\"w\":1}"},
                {"type": "image", "mimeType": "image/png", "data": "AA=="}
            ],
            "structuredContent": {"w": 1}
        });
        let output = map_raw_result(result).expect("maps");
        assert!(output.has_images(), "{output:?}");
        let media = json!({
            "content": [{"type": "image", "mimeType": "image/png", "data": "AA=="}],
            "structuredContent": {"content": [{"type": "image", "mimeType": "image/png", "data": "AA=="}]}
        });
        assert_eq!(
            map_raw_result(media),
            Ok(ToolOutput::Structured {
                content: vec![ContentBlock::image("image/png", "AA==")],
                structured: json!({"content": [{"type": "image", "mimeType": "image/png", "data": "AA=="}]}),
            })
        );
        // Without media, the structured value is the result.
        let plain = json!({"content": [{"type": "text", "text": "{\"w\":1}"}], "structuredContent": {"w": 1}});
        assert_eq!(map_raw_result(plain), Ok(ToolOutput::Json(json!({"w": 1}))));
    }
}
