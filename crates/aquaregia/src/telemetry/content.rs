//! Prompt and answer content in the GenAI conventions' JSON shapes (`gen_ai.input.messages`,
//! `gen_ai.output.messages`, `gen_ai.system_instructions`), recorded only when asked for.

use serde_json::{Value, json};

use crate::message::{ContentPart, ImageSource, Message, Role};

/// `gen_ai.system_instructions`.
pub(super) fn instructions(text: &str) -> String {
    json!([{"type": "text", "content": text}]).to_string()
}

/// `gen_ai.input.messages`.
pub(super) fn messages(messages: &[Message]) -> String {
    Value::Array(messages.iter().map(|m| message(m, None)).collect()).to_string()
}

/// `gen_ai.output.messages`: the one answer, with its finish reason.
pub(super) fn output(answer: &Message, finish_reason: &str) -> String {
    Value::Array(vec![message(answer, Some(finish_reason))]).to_string()
}

fn message(message: &Message, finish_reason: Option<&str>) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let parts: Vec<Value> = message.content.iter().map(part).collect();
    let mut value = json!({"role": role, "parts": parts});
    if let (Some(reason), Value::Object(object)) = (finish_reason, &mut value) {
        object.insert("finish_reason".into(), reason.into());
    }
    value
}

fn part(part: &ContentPart) -> Value {
    match part {
        ContentPart::Text { text } => json!({"type": "text", "content": text}),
        ContentPart::Reasoning(reasoning) => {
            json!({"type": "reasoning", "content": reasoning.text})
        }
        ContentPart::ToolCall(call) => json!({
            "type": "tool_call",
            "id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }),
        ContentPart::ToolResult(result) => json!({
            "type": "tool_call_response",
            "id": result.call_id,
            "response": result.output.to_text(),
        }),
        // Image bytes are left out: they would dwarf everything else on the span.
        ContentPart::Image { source, .. } => match source {
            ImageSource::Url { url } if !url.starts_with("data:") => {
                json!({"type": "uri", "modality": "image", "uri": url})
            }
            ImageSource::Base64 { mime_type, .. } => {
                json!({"type": "blob", "modality": "image", "mime_type": mime_type})
            }
            _ => json!({"type": "blob", "modality": "image"}),
        },
    }
}
