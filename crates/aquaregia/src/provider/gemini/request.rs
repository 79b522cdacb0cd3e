//! Gemini `contents`, written straight from the messages through borrowed wire structs.
//!
//! Fields are declared in alphabetical order, the order `serde_json::Value` objects have, so
//! bodies stay byte-identical to the ones built from `Value`s before.

use std::borrow::Cow;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use super::super::encode::{MergeGroup, append_item};
use super::super::{
    EMPTY_ERROR_TEXT, OutputPart, arguments_object, output_text, split_data_url, tool_output_parts,
};
use crate::error::Error;
use crate::message::{ContentPart, ImageSource, Message, Role, ToolResult};
use crate::tool::ToolOutput;

/// One `contents` entry: consecutive messages of one role merged (the API wants roles to
/// alternate).
#[derive(Debug, Serialize)]
pub(super) struct Turn<'a> {
    parts: Vec<Part<'a>>,
    role: &'static str,
}

impl MergeGroup for Turn<'_> {
    fn role(&self) -> &'static str {
        self.role
    }

    fn merge(&mut self, later: Self) {
        self.parts.extend(later.parts);
    }

    /// Gemini caches implicitly: there are no breakpoints to mark.
    fn write(self, out: &mut Vec<u8>, _latest: bool) -> Result<(), Error> {
        append_item(out, &self)
    }
}

/// The turn of one message; `None` when it has no parts (the API rejects contents without
/// parts) or is a system message (sent as `systemInstruction`).
pub(super) fn turn(message: &Message) -> Option<Turn<'_>> {
    let (role, parts) = match message.role {
        Role::System => return None,
        Role::User | Role::Tool => ("user", user_parts(&message.content)),
        Role::Assistant => ("model", model_parts(&message.content)),
    };
    (!parts.is_empty()).then_some(Turn { parts, role })
}

/// [`turn`] without the ids of function calls and responses, for Vertex AI: its v1 API has
/// no `id` in them (calls and responses pair by name and order), and the ids a conversation
/// holds may be aquaregia's own, made for calls that came without one.
#[cfg_attr(not(feature = "vertex"), allow(dead_code))]
pub(super) fn turn_without_ids(message: &Message) -> Option<Turn<'_>> {
    let mut turn = turn(message)?;
    for part in &mut turn.parts {
        if let Some(call) = &mut part.function_call {
            call.id = None;
        }
        if let Some(response) = &mut part.function_response {
            response.id = None;
        }
    }
    Some(turn)
}

/// A `Part`: exactly one of its data fields is set, plus the thought flags.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Part<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    file_data: Option<FileData<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_call: Option<FunctionCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_response: Option<FunctionResponse<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inline_data: Option<InlineData<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thought: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thought_signature: Option<&'a str>,
}

impl<'a> Part<'a> {
    fn text(text: &'a str) -> Self {
        Self {
            text: Some(text),
            ..Self::default()
        }
    }

    fn signed(self, signature: Option<&'a str>) -> Self {
        Self {
            thought_signature: signature.filter(|s| !s.is_empty()),
            ..self
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FileData<'a> {
    file_uri: &'a str,
}

#[derive(Debug, Serialize)]
struct FunctionCall<'a> {
    args: Cow<'a, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    name: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct InlineData<'a> {
    data: &'a str,
    mime_type: &'a str,
}

/// An image riding in a function response's `parts`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct InlinePart<'a> {
    inline_data: InlineData<'a>,
}

/// `functionResponse {id, name, response: {output | error}}`; images ride in its `parts`
/// (Gemini 3 and later).
#[derive(Debug, Serialize)]
pub(super) struct FunctionResponse<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    name: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    parts: Vec<InlinePart<'a>>,
    response: ResponseBody<'a>,
}

#[derive(Debug, Serialize)]
struct ResponseBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Output<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Output<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Output<'a> {
    Text(Cow<'a, str>),
    Json(EscapedRefs<'a>),
}

/// A JSON tool output with every `$ref` key renamed `_$ref`: the API reads any `$ref` key
/// inside a function response as a reference to one of its parts and rejects the request.
#[derive(Debug)]
struct EscapedRefs<'a>(&'a Value);

impl Serialize for EscapedRefs<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => {
                let mut out = serializer.serialize_map(None)?;
                for (key, value) in map {
                    let key = match key.as_str() {
                        // A real `_$ref` key wins over the renamed one.
                        "$ref" if map.contains_key("_$ref") => continue,
                        "$ref" => "_$ref",
                        key => key,
                    };
                    out.serialize_entry(key, &EscapedRefs(value))?;
                }
                out.end()
            }
            Value::Array(items) => serializer.collect_seq(items.iter().map(EscapedRefs)),
            other => other.serialize(serializer),
        }
    }
}

/// The parts of a user message or of tool results (both are `user` contents).
fn user_parts(content: &[ContentPart]) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    for part in content {
        match part {
            ContentPart::Text { text } if !text.is_empty() => parts.push(Part::text(text)),
            ContentPart::Image { source } => parts.push(image_part(source)),
            ContentPart::ToolResult(result) => parts.push(Part {
                function_response: Some(function_response(result)),
                ..Part::default()
            }),
            _ => {}
        }
    }
    parts
}

/// The parts of a model turn, with each signature on the part it came with.
pub(super) fn model_parts(content: &[ContentPart]) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut pending: Option<&str> = None;
    for part in content {
        let (wire, signature) = match part {
            ContentPart::Reasoning(reasoning) => {
                let signature = reasoning.signature.as_deref().filter(|s| !s.is_empty());
                if reasoning.text.is_empty() {
                    // A signature of the next part; two in a row: the first was on an empty text.
                    if let Some(earlier) = signature.and_then(|s| pending.replace(s)) {
                        parts.push(Part::text("").signed(Some(earlier)));
                    }
                    continue;
                }
                let thought = Part {
                    thought: Some(true),
                    ..Part::text(&reasoning.text)
                };
                (thought, signature)
            }
            ContentPart::Text { text } => (Part::text(text), pending.take()),
            ContentPart::ToolCall(call) => {
                let call = FunctionCall {
                    args: arguments_object(&call.arguments),
                    id: Some(&call.id),
                    name: &call.name,
                };
                let wire = Part {
                    function_call: Some(call),
                    ..Part::default()
                };
                (wire, pending.take())
            }
            _ => continue,
        };
        parts.push(wire.signed(signature));
    }
    if let Some(signature) = pending {
        parts.push(Part::text("").signed(Some(signature)));
    }
    parts
}

fn image_part(source: &ImageSource) -> Part<'_> {
    match source {
        ImageSource::Base64 { mime_type, data } => inline_part(mime_type, data),
        ImageSource::Url { url } => match split_data_url(url) {
            Some((mime_type, data)) => inline_part(mime_type, data),
            None => Part {
                file_data: Some(FileData { file_uri: url }),
                ..Part::default()
            },
        },
    }
}

fn inline_part<'a>(mime_type: &'a str, data: &'a str) -> Part<'a> {
    Part {
        inline_data: Some(InlineData { data, mime_type }),
        ..Part::default()
    }
}

pub(super) fn function_response(result: &ToolResult) -> FunctionResponse<'_> {
    let mut parts = Vec::new();
    let output = match &result.output {
        ToolOutput::Json(Value::String(text)) => Output::Text(Cow::Borrowed(text)),
        ToolOutput::Json(value) => Output::Json(EscapedRefs(value)),
        ToolOutput::Text(text) => Output::Text(Cow::Borrowed(text)),
        other => {
            let output = tool_output_parts(other);
            parts.extend(output.iter().filter_map(|part| match part {
                OutputPart::Image { mime_type, data } => Some(InlinePart {
                    inline_data: InlineData { data, mime_type },
                }),
                OutputPart::Text(_) => None,
            }));
            Output::Text(Cow::Owned(output_text(&output)))
        }
    };
    let output = match output {
        Output::Text(text) if text.is_empty() && result.is_error => {
            Output::Text(Cow::Borrowed(EMPTY_ERROR_TEXT))
        }
        other => other,
    };
    let (error, output) = if result.is_error {
        (Some(output), None)
    } else {
        (None, Some(output))
    };
    FunctionResponse {
        id: Some(&result.call_id),
        name: &result.name,
        parts,
        response: ResponseBody { error, output },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::response::signed;
    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn ref_keys_in_tool_output_are_renamed() {
        let result = ToolResult {
            call_id: "c".into(),
            name: "t".into(),
            output: ToolOutput::Json(json!({"a": [{"$ref": "#/x"}]})),
            is_error: false,
        };
        let response = serde_json::to_value(function_response(&result)).unwrap();
        assert_eq!(
            response["response"],
            json!({"output": {"a": [{"_$ref": "#/x"}]}})
        );
    }

    #[test]
    fn signatures_go_back_on_their_parts() {
        let call = |id: &str| {
            ContentPart::ToolCall(ToolCall {
                id: id.into(),
                name: "t".into(),
                arguments: json!({}),
            })
        };
        let content = [
            signed(String::new(), "S1".into()),
            call("a"),
            call("b"),
            ContentPart::text("done"),
            signed(String::new(), "S2".into()),
        ];
        let parts = serde_json::to_value(model_parts(&content)).unwrap();
        assert_eq!(parts[0]["thoughtSignature"], "S1");
        assert!(parts[1].get("thoughtSignature").is_none());
        assert!(parts[2].get("thoughtSignature").is_none());
        assert_eq!(parts[3], json!({"text": "", "thoughtSignature": "S2"}));
    }
}
