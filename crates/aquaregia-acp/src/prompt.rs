//! `session/prompt` content blocks as model input.

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};
use aquaregia::ContentPart;

/// The prompt's blocks as message parts: text and images as they are, resources and links as
/// text the model can read. Nothing is dropped silently: a block the model cannot take is
/// described in text.
pub(crate) fn parts(blocks: &[ContentBlock]) -> Vec<ContentPart> {
    blocks.iter().map(part).collect()
}

/// The prompt's text blocks, joined: what a slash command is read from.
pub(crate) fn text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn part(block: &ContentBlock) -> ContentPart {
    match block {
        ContentBlock::Text(text) => ContentPart::text(&text.text),
        ContentBlock::Image(image) if !image.data.is_empty() => {
            ContentPart::image(&image.mime_type, &image.data)
        }
        ContentBlock::Image(image) => match &image.uri {
            Some(uri) => ContentPart::image_url(uri),
            None => ContentPart::text("[an image without data]"),
        },
        ContentBlock::ResourceLink(link) => {
            let mut text = format!("[Resource link: {} ({})", link.name, link.uri);
            if let Some(mime) = &link.mime_type {
                text.push_str(&format!(", {mime}"));
            }
            if let Some(description) = &link.description {
                text.push_str(&format!(": {description}"));
            }
            text.push(']');
            ContentPart::text(text)
        }
        ContentBlock::Resource(resource) => match &resource.resource {
            EmbeddedResourceResource::TextResourceContents(contents) => ContentPart::text(format!(
                "<resource uri=\"{}\">\n{}\n</resource>",
                contents.uri, contents.text
            )),
            EmbeddedResourceResource::BlobResourceContents(contents) => {
                match contents.mime_type.as_deref() {
                    Some(mime) if mime.starts_with("image/") => {
                        ContentPart::image(mime, &contents.blob)
                    }
                    mime => ContentPart::text(format!(
                        "[Binary resource {} ({}), {} bytes base64]",
                        contents.uri,
                        mime.unwrap_or("unknown type"),
                        contents.blob.len()
                    )),
                }
            }
            other => ContentPart::text(format!("[Resource {other:?}]")),
        },
        ContentBlock::Audio(_) => {
            ContentPart::text("[The user attached audio, which this agent cannot play.]")
        }
        other => ContentPart::text(serde_json::to_string(other).unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_reach_the_model() {
        let blocks: Vec<ContentBlock> = serde_json::from_value(json!([
            {"type": "text", "text": "look"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///a.rs", "name": "a.rs"},
            {"type": "resource", "resource": {"uri": "file:///b.rs", "text": "fn b() {}"}},
        ]))
        .expect("valid blocks");
        let parts = parts(&blocks);
        assert_eq!(parts[0], ContentPart::text("look"));
        assert_eq!(parts[1], ContentPart::image("image/png", "AA=="));
        assert_eq!(
            parts[2],
            ContentPart::text("[Resource link: a.rs (file:///a.rs)]")
        );
        assert_eq!(
            parts[3],
            ContentPart::text("<resource uri=\"file:///b.rs\">\nfn b() {}\n</resource>")
        );
    }
}
