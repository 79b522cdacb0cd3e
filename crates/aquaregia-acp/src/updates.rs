//! The `session/update` notifications: agent text, thoughts and tool calls.

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, UntypedMessage};
use aquaregia::{ContentBlock, Tool, ToolExecError, ToolOutput};
use serde_json::{Map, Value, json};

/// Sends one `session/update`. A closed connection is not an error worth stopping for.
pub(crate) fn send(cx: &ConnectionTo<Client>, session_id: &str, update: Value) {
    let mut params = Map::new();
    params.insert("sessionId".into(), session_id.into());
    params.insert("update".into(), update);
    match UntypedMessage::new("session/update", params) {
        Ok(message) => {
            if let Err(error) = cx.send_notification(message) {
                tracing::debug!(error = %error.message, "session/update not sent");
            }
        }
        Err(error) => tracing::warn!(error = %error.message, "session/update not serializable"),
    }
}

/// `agent_message_chunk` or `agent_thought_chunk` with text.
pub(crate) fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

/// The title shown for a call: `<tool>: <main argument>`.
pub(crate) fn title(name: &str, tool: Option<&Tool>, arguments: &Value) -> String {
    let display = tool
        .and_then(|tool| tool.annotations().title.clone())
        .unwrap_or_else(|| {
            name.split_once("__")
                .map_or(name, |(_, tool)| tool)
                .to_owned()
        });
    match main_argument(arguments) {
        Some(argument) => format!("{display}: {argument}"),
        None => display,
    }
}

/// The argument that best says what a call does: a path, URL, command or query if there is
/// one, else the first short string.
fn main_argument(arguments: &Value) -> Option<String> {
    let object = arguments.as_object()?;
    const PREFERRED: [&str; 10] = [
        "path", "file", "filename", "url", "uri", "command", "query", "pattern", "name", "message",
    ];
    let value = PREFERRED
        .iter()
        .find_map(|key| object.get(*key).and_then(Value::as_str))
        .or_else(|| object.values().find_map(Value::as_str))?;
    let mut text: String = value.lines().next().unwrap_or_default().to_owned();
    if text.chars().count() > 80 {
        text = text.chars().take(79).collect::<String>() + "…";
    }
    (!text.is_empty()).then_some(text)
}

/// The ACP tool kind from the tool's hints.
pub(crate) fn kind(tool: Option<&Tool>) -> &'static str {
    let annotations = tool.map(Tool::annotations);
    if annotations.and_then(|a| a.read_only) == Some(true) {
        "read"
    } else if annotations.and_then(|a| a.destructive) == Some(true) {
        "delete"
    } else {
        "other"
    }
}

/// A new tool call, waiting (for permission, or to start).
pub(crate) fn tool_call(id: &str, title: &str, kind: &str, raw_input: &Value) -> Value {
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "title": title,
        "kind": kind,
        "status": "pending",
        "rawInput": raw_input,
    })
}

/// The call has started running.
pub(crate) fn in_progress(id: &str) -> Value {
    json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "in_progress"})
}

/// The call finished: its content and raw output, or the failure.
pub(crate) fn finished(id: &str, result: &Result<ToolOutput, ToolExecError>) -> Value {
    match result {
        Ok(output) => json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": id,
            "status": "completed",
            "content": tool_content(output),
            "rawOutput": output.to_value(),
        }),
        Err(error) => json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": id,
            "status": "failed",
            "content": [text_content(&error.to_string())],
            "rawOutput": {"error": error.to_string()},
        }),
    }
}

fn text_content(text: &str) -> Value {
    json!({"type": "content", "content": {"type": "text", "text": text}})
}

/// A tool result as ACP tool-call content: text, images, audio, resources and links as their
/// own blocks; JSON values as pretty-printed text.
pub(crate) fn tool_content(output: &ToolOutput) -> Vec<Value> {
    match output {
        ToolOutput::Text(text) if text.is_empty() => Vec::new(),
        ToolOutput::Text(text) => vec![text_content(text)],
        ToolOutput::Json(value) => vec![text_content(
            &serde_json::to_string_pretty(value).unwrap_or_default(),
        )],
        ToolOutput::Content(blocks) => blocks.iter().map(block_content).collect(),
        other => vec![text_content(&other.to_text())],
    }
}

fn block_content(block: &ContentBlock) -> Value {
    let content = match block {
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Image { mime_type, data } => {
            json!({"type": "image", "data": data, "mimeType": mime_type})
        }
        ContentBlock::Audio { mime_type, data } => {
            json!({"type": "audio", "data": data, "mimeType": mime_type})
        }
        ContentBlock::Resource {
            uri,
            mime_type,
            text,
            blob,
        } => {
            let mut resource = Map::new();
            resource.insert("uri".into(), uri.as_str().into());
            if let Some(mime) = mime_type {
                resource.insert("mimeType".into(), mime.as_str().into());
            }
            if let Some(text) = text {
                resource.insert("text".into(), text.as_str().into());
            } else if let Some(blob) = blob {
                resource.insert("blob".into(), blob.as_str().into());
            }
            json!({"type": "resource", "resource": resource})
        }
        ContentBlock::ResourceLink {
            uri,
            name,
            mime_type,
            description,
        } => {
            let mut link = json!({"type": "resource_link", "uri": uri, "name": name});
            if let Some(mime) = mime_type {
                link["mimeType"] = mime.as_str().into();
            }
            if let Some(description) = description {
                link["description"] = description.as_str().into();
            }
            link
        }
        other => return text_content(&other.to_text()),
    };
    json!({"type": "content", "content": content})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_name_the_main_argument() {
        assert_eq!(
            title(
                "fs__read_file",
                None,
                &json!({"path": "/src/main.rs", "limit": 3})
            ),
            "read_file: /src/main.rs"
        );
        assert_eq!(title("echo", None, &json!({})), "echo");
    }

    #[test]
    fn results_become_acp_content() {
        let blocks = json!([
            {"type": "text", "text": "hi"},
            {"type": "image", "mimeType": "image/png", "data": "AA=="},
            {"type": "resource", "uri": "file:///a", "mimeType": "text/plain", "text": "x"},
            {"type": "resource_link", "uri": "file:///b", "name": "b"}
        ]);
        let content = tool_content(&ToolOutput::Content(
            serde_json::from_value(blocks).expect("blocks"),
        ));
        assert_eq!(
            content[1]["content"],
            json!({"type": "image", "data": "AA==", "mimeType": "image/png"})
        );
        assert_eq!(content[2]["content"]["resource"]["text"], "x");
        assert_eq!(content[3]["content"]["type"], "resource_link");
        assert_eq!(
            tool_content(&ToolOutput::Json(json!({"a": 1})))[0]["content"]["type"],
            "text"
        );
        // A JSON array that looks like content stays JSON.
        let lookalike = json!([{"type": "image", "mimeType": "image/png", "data": "AA=="}]);
        let content = tool_content(&ToolOutput::Json(lookalike));
        assert_eq!(content.len(), 1);
        assert_eq!(content[0]["content"]["type"], "text");
    }
}
