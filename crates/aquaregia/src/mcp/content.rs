//! `CallToolResult` -> the tool's `Value` (the mapping table in the module docs).

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{Map, Value};

use crate::tool::ToolExecError;

/// One content block, reduced to what the mapping needs.
enum Block {
    Text(String),
    Item(Value),
    Audio,
}

/// Maps a typed result.
pub(crate) fn map_result(result: CallToolResult) -> Result<Value, ToolExecError> {
    let blocks = result.content.into_iter().map(typed_block).collect();
    finish(
        result.is_error.unwrap_or(false),
        result.structured_content,
        blocks,
    )
}

/// Maps a result rmcp could not type (a content block type newer than rmcp knows): known
/// blocks as usual, unknown ones kept as JSON.
pub(crate) fn map_raw_result(mut result: Value) -> Result<Value, ToolExecError> {
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let structured = result
        .as_object_mut()
        .and_then(|object| object.remove("structuredContent"));
    let blocks = match result.get_mut("content").map(Value::take) {
        Some(Value::Array(blocks)) => blocks.into_iter().map(raw_block).collect(),
        _ => Vec::new(),
    };
    finish(is_error, structured, blocks)
}

fn finish(
    is_error: bool,
    structured: Option<Value>,
    blocks: Vec<Block>,
) -> Result<Value, ToolExecError> {
    if is_error {
        let texts: Vec<&str> = blocks
            .iter()
            .filter_map(|block| match block {
                Block::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        return Err(ToolExecError::Execution(if texts.is_empty() {
            "the tool reported an error without a message".to_owned()
        } else {
            texts.join("\n")
        }));
    }
    // Structured content is the result; servers repeat it as text, which is not sent twice.
    if let Some(structured) = structured {
        return Ok(structured);
    }
    if blocks.iter().any(|block| matches!(block, Block::Audio)) {
        return Err(ToolExecError::Execution(
            "the tool returned audio content, which aquaregia does not pass to models yet".into(),
        ));
    }
    let mut blocks = blocks;
    if let [Block::Text(_)] = blocks.as_slice()
        && let Some(Block::Text(text)) = blocks.pop()
    {
        return Ok(Value::String(text));
    }
    if blocks.is_empty() {
        return Ok(Value::String(String::new()));
    }
    Ok(Value::Array(
        blocks
            .into_iter()
            .filter_map(|block| match block {
                Block::Text(text) => {
                    let mut item = Map::new();
                    item.insert("type".into(), "text".into());
                    item.insert("text".into(), text.into());
                    Some(Value::Object(item))
                }
                Block::Item(item) => Some(item),
                Block::Audio => None, // reported above
            })
            .collect(),
    ))
}

fn typed_block(block: ContentBlock) -> Block {
    match block {
        ContentBlock::Text(text) => Block::Text(text.text),
        ContentBlock::Image(image) => Block::Item(image_item(image.mime_type, image.data)),
        ContentBlock::Audio(_) => Block::Audio,
        ContentBlock::Resource(embedded) => Block::Item(match embedded.resource {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => resource_item(uri, mime_type, "text", text),
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => resource_item(uri, mime_type, "blob", blob),
            other => unknown_item(&other),
        }),
        ContentBlock::ResourceLink(link) => Block::Item(resource_link_item(
            link.uri,
            link.name,
            link.mime_type,
            link.description,
        )),
        other => Block::Item(unknown_item(&other)),
    }
}

fn raw_block(block: Value) -> Block {
    let field = |name: &str| block.get(name).and_then(Value::as_str).map(str::to_owned);
    match block.get("type").and_then(Value::as_str) {
        Some("text") => match field("text") {
            Some(text) => Block::Text(text),
            None => Block::Item(block),
        },
        Some("image") => match (field("mimeType"), field("data")) {
            (Some(mime_type), Some(data)) => Block::Item(image_item(mime_type, data)),
            _ => Block::Item(block),
        },
        Some("audio") => Block::Audio,
        Some("resource") => {
            let resource = block.get("resource");
            let get = |name: &str| {
                resource
                    .and_then(|r| r.get(name))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            match (get("uri"), get("text"), get("blob")) {
                (Some(uri), Some(text), _) => {
                    Block::Item(resource_item(uri, get("mimeType"), "text", text))
                }
                (Some(uri), None, Some(blob)) => {
                    Block::Item(resource_item(uri, get("mimeType"), "blob", blob))
                }
                _ => Block::Item(block),
            }
        }
        Some("resource_link") => match (field("uri"), field("name")) {
            (Some(uri), Some(name)) => Block::Item(resource_link_item(
                uri,
                name,
                field("mimeType"),
                field("description"),
            )),
            _ => Block::Item(block),
        },
        _ => Block::Item(block),
    }
}

fn image_item(mime_type: String, data: String) -> Value {
    let mut item = Map::new();
    item.insert("type".into(), "image".into());
    item.insert("mime_type".into(), mime_type.into());
    item.insert("data".into(), data.into());
    Value::Object(item)
}

fn resource_item(uri: String, mime_type: Option<String>, kind: &str, body: String) -> Value {
    let mut item = Map::new();
    item.insert("type".into(), "resource".into());
    item.insert("uri".into(), uri.into());
    if let Some(mime_type) = mime_type {
        item.insert("mime_type".into(), mime_type.into());
    }
    item.insert(kind.into(), body.into());
    Value::Object(item)
}

fn resource_link_item(
    uri: String,
    name: String,
    mime_type: Option<String>,
    description: Option<String>,
) -> Value {
    let mut item = Map::new();
    item.insert("type".into(), "resource_link".into());
    item.insert("uri".into(), uri.into());
    item.insert("name".into(), name.into());
    if let Some(mime_type) = mime_type {
        item.insert("mime_type".into(), mime_type.into());
    }
    if let Some(description) = description {
        item.insert("description".into(), description.into());
    }
    Value::Object(item)
}

/// A block this version does not map: kept as its wire JSON, never dropped.
fn unknown_item<T: serde::Serialize>(block: &T) -> Value {
    serde_json::to_value(block).unwrap_or(Value::Null)
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
        assert_eq!(
            map_raw_result(result),
            Ok(json!([{"type": "text", "text": "a"}, {"type": "hologram", "frames": 3}]))
        );
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
            Ok(json!([
                {"type": "image", "mime_type": "image/png", "data": "AA=="},
                {"type": "resource", "uri": "file:///a", "mime_type": "text/plain", "text": "hi"},
                {"type": "resource_link", "uri": "file:///b", "name": "b"}
            ]))
        );
        assert_eq!(
            map_raw_result(json!({"isError": true, "content": [{"type": "text", "text": "x"}]})),
            Err(ToolExecError::Execution("x".into()))
        );
    }
}
