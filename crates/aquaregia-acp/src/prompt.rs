//! `session/prompt` content blocks as model input.

use aquaregia::ContentPart;
use serde_json::Value;

/// The prompt's blocks as message parts: text and images as they are, resources and links as
/// text the model can read. Nothing is dropped silently: a block the model cannot take is
/// described in text.
pub(crate) fn parts(blocks: &[Value]) -> Vec<ContentPart> {
    blocks.iter().map(part).collect()
}

fn part(block: &Value) -> ContentPart {
    let field = |name: &str| block.get(name).and_then(Value::as_str);
    match field("type") {
        Some("text") => ContentPart::text(field("text").unwrap_or_default()),
        Some("image") => match (field("data"), field("mimeType")) {
            (Some(data), Some(mime)) => ContentPart::image(mime, data),
            _ => match field("uri") {
                Some(uri) => ContentPart::image_url(uri),
                None => ContentPart::text("[an image without data]"),
            },
        },
        Some("resource_link") => {
            let uri = field("uri").unwrap_or_default();
            let name = field("name").unwrap_or(uri);
            let mut text = format!("[Resource link: {name} ({uri})");
            if let Some(mime) = field("mimeType") {
                text.push_str(&format!(", {mime}"));
            }
            if let Some(description) = field("description") {
                text.push_str(&format!(": {description}"));
            }
            text.push(']');
            ContentPart::text(text)
        }
        Some("resource") => {
            let resource = block.get("resource");
            let get = |name: &str| resource.and_then(|r| r.get(name)).and_then(Value::as_str);
            let uri = get("uri").unwrap_or_default();
            match (get("text"), get("blob"), get("mimeType")) {
                (Some(text), _, _) => {
                    ContentPart::text(format!("<resource uri=\"{uri}\">\n{text}\n</resource>"))
                }
                (None, Some(blob), Some(mime)) if mime.starts_with("image/") => {
                    ContentPart::image(mime, blob)
                }
                (None, Some(blob), mime) => ContentPart::text(format!(
                    "[Binary resource {uri} ({}), {} bytes base64]",
                    mime.unwrap_or("unknown type"),
                    blob.len()
                )),
                (None, None, _) => ContentPart::text(format!("[Resource {uri}]")),
            }
        }
        Some("audio") => {
            ContentPart::text("[The user attached audio, which this agent cannot play.]")
        }
        _ => ContentPart::text(block.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_reach_the_model() {
        let parts = parts(&[
            json!({"type": "text", "text": "look"}),
            json!({"type": "image", "data": "AA==", "mimeType": "image/png"}),
            json!({"type": "resource_link", "uri": "file:///a.rs", "name": "a.rs"}),
            json!({"type": "resource", "resource": {"uri": "file:///b.rs", "text": "fn b() {}"}}),
        ]);
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
