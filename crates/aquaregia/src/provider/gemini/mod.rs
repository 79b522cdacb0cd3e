//! Google Gemini API (`POST /v1beta/models/{model}:generateContent`, and
//! `:streamGenerateContent?alt=sse` for streams).
//!
//! Thought signatures: a signature arrives on a thought part, a text part or a `functionCall`
//! part, and must go back on the same part. A signed thought is a [`Reasoning`] with its text
//! and signature. A signature on any other part is kept as a [`Reasoning`] with empty text
//! placed just before that part (or last, for the signed empty text part that ends a stream),
//! and is sent back on the part that follows it.

mod response;
mod schema;

use std::borrow::Cow;
use std::time::Duration;

use reqwest::header::HeaderName;
use serde_json::{Map, Value, json};

use super::{
    Api, EMPTY_ERROR_TEXT, KeyPolicy, OutputPart, ProviderInfo, WireApi, object_schema,
    output_text, split_data_url, system_text, tool_output_parts,
};
use crate::client::ProviderKind;
use crate::error::Error;
use crate::message::{ContentPart, ImageSource, Message, Role, ToolResult};
use crate::model::{ModelRequest, ModelResponse, ToolChoice};
use crate::tool::ToolDescriptor;
use response::GeminiDecoder;

/// The Gemini API (Google AI Studio keys).
pub(crate) static GEMINI: ProviderInfo = ProviderInfo {
    id: "gemini",
    kind: ProviderKind::Gemini,
    api_key_vars: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    base_url_vars: &["GOOGLE_GEMINI_BASE_URL"],
    default_base_url: "https://generativelanguage.googleapis.com",
    key: KeyPolicy::Required,
    normalize_base_url: gemini_base_url,
    auth_header: |key| (HeaderName::from_static("x-goog-api-key"), key.to_owned()),
    static_headers: &[],
    default_model: Some("gemini-2.5-flash"),
    api: &Api::<Gemini>::new(),
};

pub(crate) struct Gemini;

const NAME: &str = "gemini";

/// Google's SDKs take the base URL without the API version; one given with it works too.
fn gemini_base_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    url.strip_suffix("/v1beta").unwrap_or(url).to_owned()
}

impl WireApi for Gemini {
    const NAME: &'static str = NAME;
    const PATH: &'static str = "/v1beta/models";
    /// All declarations go in one `tools` entry (separate entries can be rejected).
    const TOOLS_OPEN: &'static str = "[{\"functionDeclarations\":[";
    const TOOLS_CLOSE: &'static str = "]}]";
    const HISTORY_FIELD: &'static str = "contents";
    type Decoder = GeminiDecoder;

    fn path(model: &str, stream: bool) -> Cow<'static, str> {
        let model = model.strip_prefix("models/").unwrap_or(model);
        Cow::Owned(if stream {
            format!("/v1beta/models/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("/v1beta/models/{model}:generateContent")
        })
    }

    fn retry_delay(body: &[u8]) -> Option<Duration> {
        retry_info(body)
    }

    fn push_messages(_request: &ModelRequest, messages: &[Message], items: &mut Vec<Value>) {
        for message in messages {
            let (role, parts) = match message.role {
                Role::System => continue, // sent as `systemInstruction`
                Role::User | Role::Tool => ("user", user_parts(&message.content)),
                Role::Assistant => ("model", model_parts(&message.content)),
            };
            if parts.is_empty() {
                continue; // the API rejects contents without parts
            }
            if let Some(Value::Array(last)) = items
                .last_mut()
                .filter(|last| last["role"] == role)
                .and_then(|last| last.get_mut("parts"))
            {
                last.extend(parts);
            } else {
                items.push(json!({"role": role, "parts": parts}));
            }
        }
    }

    fn tool_definition(tool: &ToolDescriptor) -> Value {
        let mut declaration = Map::new();
        declaration.insert("name".into(), json!(tool.name));
        if !tool.description.is_empty() {
            declaration.insert("description".into(), json!(tool.description));
        }
        if let Some((field, schema)) =
            schema::declaration_schema(&object_schema(&tool.input_schema))
        {
            declaration.insert(field.into(), schema);
        }
        Value::Object(declaration)
    }

    fn body_fields(request: &ModelRequest, _stream: bool) -> Map<String, Value> {
        let mut body = Map::new();
        if let Some(system) = system_text(request) {
            body.insert(
                "systemInstruction".into(),
                json!({"parts": [{"text": system}]}),
            );
        }
        if !request.tools.is_empty() {
            body.insert(
                "toolConfig".into(),
                json!({"functionCallingConfig": function_calling_config(&request.tool_choice)}),
            );
        }
        let mut config = Map::new();
        if let Some(temperature) = request.temperature {
            config.insert("temperature".into(), json!(temperature));
        }
        if let Some(max) = request.max_output_tokens {
            config.insert("maxOutputTokens".into(), json!(max));
        }
        if let Some(schema) = &request.output_schema {
            config.insert("responseMimeType".into(), json!("application/json"));
            config.insert("responseJsonSchema".into(), schema.plain_schema());
        }
        if !config.is_empty() {
            body.insert("generationConfig".into(), Value::Object(config));
        }
        body
    }

    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
        response::parse_response(body)
    }
}

fn function_calling_config(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({"mode": "AUTO"}),
        ToolChoice::None => json!({"mode": "NONE"}),
        ToolChoice::Required => json!({"mode": "ANY"}),
        ToolChoice::Tool(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
    }
}

/// `RetryInfo.retryDelay` (a Duration string such as `"27s"` or `"1.5s"`) from an error body.
fn retry_info(body: &[u8]) -> Option<Duration> {
    let body: Value = serde_json::from_slice(body).ok()?;
    let details = body.get("error")?.get("details")?.as_array()?;
    details.iter().find_map(|detail| {
        let kind = detail.get("@type")?.as_str()?;
        if !kind.ends_with("google.rpc.RetryInfo") {
            return None;
        }
        let seconds: f64 = detail
            .get("retryDelay")?
            .as_str()?
            .strip_suffix('s')?
            .parse()
            .ok()?;
        Duration::try_from_secs_f64(seconds).ok()
    })
}

/// [`Error::Stream`] from a `google.rpc.Status` (`{"code": 400, "message", "status"}`).
fn wire_error(error: &Value) -> Error {
    let inner = error
        .get("error")
        .filter(|e| e.is_object())
        .unwrap_or(error);
    Error::Stream {
        provider: NAME,
        message: inner
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| inner.to_string(), str::to_owned),
        code: inner
            .get("status")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| inner.get("code").map(Value::to_string)),
    }
}

/// The parts of a user message or of tool results (both are `user` contents).
fn user_parts(content: &[ContentPart]) -> Vec<Value> {
    let mut parts = Vec::new();
    for part in content {
        match part {
            ContentPart::Text { text } if !text.is_empty() => parts.push(json!({"text": text})),
            ContentPart::Image { source } => parts.push(image_part(source)),
            ContentPart::ToolResult(result) => parts.push(function_response(result)),
            _ => {}
        }
    }
    parts
}

/// The parts of a model turn, with each signature on the part it came with.
fn model_parts(content: &[ContentPart]) -> Vec<Value> {
    let mut parts = Vec::new();
    let mut pending: Option<&str> = None;
    for part in content {
        let mut value = match part {
            ContentPart::Reasoning(reasoning) => {
                if reasoning.text.is_empty() {
                    // A signature of the next part; two in a row: the first was on an empty text.
                    let signature = reasoning.signature.as_deref().filter(|s| !s.is_empty());
                    if let Some(earlier) = signature.and_then(|s| pending.replace(s)) {
                        parts.push(json!({"text": "", "thoughtSignature": earlier}));
                    }
                    continue;
                }
                json!({"text": reasoning.text, "thought": true})
            }
            ContentPart::Text { text } => json!({"text": text}),
            ContentPart::ToolCall(call) => {
                json!({"functionCall": {"name": call.name, "args": call_args(&call.arguments), "id": call.id}})
            }
            _ => continue,
        };
        let signature = match part {
            ContentPart::Reasoning(reasoning) => reasoning.signature.as_deref(),
            _ => pending.take(),
        };
        if let Some(signature) = signature.filter(|s| !s.is_empty()) {
            value["thoughtSignature"] = json!(signature);
        }
        parts.push(value);
    }
    if let Some(signature) = pending {
        parts.push(json!({"text": "", "thoughtSignature": signature}));
    }
    parts
}

/// `args` must be an object; arguments that are JSON text of one are sent as it.
fn call_args(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => object,
            _ => Value::Object(Map::new()),
        },
        _ => Value::Object(Map::new()),
    }
}

fn image_part(source: &ImageSource) -> Value {
    match source {
        ImageSource::Base64 { mime_type, data } => inline_data(mime_type, data),
        ImageSource::Url { url } => match split_data_url(url) {
            Some((mime_type, data)) => inline_data(mime_type, data),
            None => json!({"fileData": {"fileUri": url}}),
        },
    }
}

fn inline_data(mime_type: &str, data: &str) -> Value {
    json!({"inlineData": {"mimeType": mime_type, "data": data}})
}

/// `functionResponse {id, name, response: {output | error}}`; images ride in its `parts`
/// (Gemini 3 and later).
fn function_response(result: &ToolResult) -> Value {
    let parts = tool_output_parts(&result.output);
    let images: Vec<Value> = parts
        .iter()
        .filter_map(|part| match part {
            OutputPart::Image { mime_type, data } => Some(inline_data(mime_type, data)),
            OutputPart::Text(_) => None,
        })
        .collect();
    let output = match &result.output {
        crate::tool::ToolOutput::Json(value) => escape_refs(value),
        _ => Value::String(output_text(&parts)),
    };
    let key = if result.is_error { "error" } else { "output" };
    let output = match output {
        Value::String(text) if text.is_empty() && result.is_error => json!(EMPTY_ERROR_TEXT),
        other => other,
    };
    let mut response = json!({
        "id": result.call_id,
        "name": result.name,
        "response": {key: output},
    });
    if !images.is_empty() {
        response["parts"] = Value::Array(images);
    }
    json!({"functionResponse": response})
}

/// The API reads any `$ref` key inside a function response as a reference to one of its
/// parts and rejects the request, so such keys are renamed.
fn escape_refs(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    let key = if key == "$ref" {
                        "_$ref".to_owned()
                    } else {
                        key.clone()
                    };
                    (key, escape_refs(value))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(escape_refs).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::response::signed;
    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn retry_info_durations() {
        let body = |delay: &str| {
            json!({"error": {"code": 429, "details": [
                {"@type": "type.googleapis.com/google.rpc.Help"},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
            ]}})
            .to_string()
        };
        assert_eq!(
            retry_info(body("27s").as_bytes()),
            Some(Duration::from_secs(27))
        );
        assert_eq!(
            retry_info(body("1.5s").as_bytes()),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(retry_info(body("soon").as_bytes()), None);
        assert_eq!(retry_info(b"not json"), None);
    }

    #[test]
    fn ref_keys_in_tool_output_are_renamed() {
        let result = ToolResult {
            call_id: "c".into(),
            name: "t".into(),
            output: crate::tool::ToolOutput::Json(json!({"a": [{"$ref": "#/x"}]})),
            is_error: false,
        };
        assert_eq!(
            function_response(&result)["functionResponse"]["response"],
            json!({"output": {"a": [{"_$ref": "#/x"}]}})
        );
    }

    #[test]
    fn base_url_and_paths() {
        assert_eq!(
            gemini_base_url("https://proxy.example/v1beta/"),
            "https://proxy.example"
        );
        assert_eq!(
            Gemini::path("models/gemini-2.5-flash", true),
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
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
        let parts = model_parts(&[
            signed(String::new(), "S1".into()),
            call("a"),
            call("b"),
            ContentPart::text("done"),
            signed(String::new(), "S2".into()),
        ]);
        assert_eq!(parts[0]["thoughtSignature"], "S1");
        assert!(parts[1].get("thoughtSignature").is_none());
        assert!(parts[2].get("thoughtSignature").is_none());
        assert_eq!(parts[3], json!({"text": "", "thoughtSignature": "S2"}));
    }
}
