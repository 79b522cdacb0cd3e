//! Google Gemini API (`POST /v1beta/models/{model}:generateContent`, and
//! `:streamGenerateContent?alt=sse` for streams).
//!
//! Thought signatures: a signature arrives on a thought part, a text part or a `functionCall`
//! part, and must go back on the same part. A signed thought is a [`Reasoning`] with its text
//! and signature. A signature on any other part is kept as a [`Reasoning`] with empty text
//! placed just before that part (or last, for the signed empty text part that ends a stream),
//! and is sent back on the part that follows it.

mod request;
mod response;
mod schema;

use std::borrow::Cow;
use std::time::Duration;

use reqwest::header::HeaderName;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::encode::{BodyWriter, OpenItem, encode_merged};
use super::{Api, KeyPolicy, ProviderInfo, WireApi, object_schema, plain_route, system_text};
use crate::error::Error;
use crate::message::Message;
use crate::model::ProviderKind;
use crate::model::{ModelRequest, ModelResponse, ToolChoice};
use crate::structured::OutputSchema;
use crate::tool::ToolDescriptor;
use response::GeminiDecoder;

/// The Gemini API (Google AI Studio keys).
pub(crate) static GEMINI: ProviderInfo = ProviderInfo {
    id: "gemini",
    kind: ProviderKind::Gemini,
    api_key_vars: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    token_vars: &[],
    base_url_vars: &["GOOGLE_GEMINI_BASE_URL"],
    default_base_url: "https://generativelanguage.googleapis.com",
    key: KeyPolicy::Required,
    normalize_base_url: gemini_base_url,
    signer: None,
    route: plain_route,
    auth_header: |key| (HeaderName::from_static("x-goog-api-key"), key.to_owned()),
    static_headers: &[],
    default_model: Some("gemini-2.5-flash"),
    known_models: Some(&[
        "gemini-2.5-pro",
        "gemini-2.5-flash",
        "gemini-2.5-flash-lite",
    ]),
    api: &Api::<Gemini>::new(),
};

pub(crate) struct Gemini;

const NAME: &str = "gemini";

/// [`Gemini::encode_messages`] without function call and response ids (Vertex AI).
#[cfg_attr(not(feature = "vertex"), allow(dead_code))]
pub(crate) fn encode_messages_without_ids(
    messages: &[Message],
    sealed: &mut Vec<u8>,
    open: &mut OpenItem,
) -> Result<usize, Error> {
    encode_merged(messages, request::turn_without_ids, false, sealed, open)
}

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

    fn encode_messages(
        _request: &ModelRequest,
        messages: &[Message],
        sealed: &mut Vec<u8>,
        open: &mut OpenItem,
    ) -> Result<usize, Error> {
        encode_merged(messages, request::turn, false, sealed, open)
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

    fn body_fields(
        request: &ModelRequest,
        _stream: bool,
        body: &mut BodyWriter<'_>,
    ) -> Result<(), Error> {
        let schema = request.output_schema.as_ref();
        if request.temperature.is_some() || request.max_output_tokens.is_some() || schema.is_some()
        {
            let config = GenerationConfig {
                max_output_tokens: request.max_output_tokens,
                response_json_schema: schema.map(OutputSchema::plain_schema),
                response_mime_type: schema.map(|_| "application/json"),
                temperature: request.temperature.map(f64::from),
            };
            body.field("generationConfig", &config)?;
        }
        if let Some(system) = system_text(request) {
            let instruction = SystemInstruction {
                parts: [TextPart { text: &system }],
            };
            body.field("systemInstruction", &instruction)?;
        }
        if !request.tools.is_empty() {
            let config = ToolConfig {
                function_calling_config: function_calling_config(&request.tool_choice),
            };
            body.field("toolConfig", &config)?;
        }
        Ok(())
    }

    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
        response::parse_response(body)
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_json_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
}

#[derive(Serialize)]
struct SystemInstruction<'a> {
    parts: [TextPart<'a>; 1],
}

#[derive(Serialize)]
struct TextPart<'a> {
    text: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig<'a> {
    function_calling_config: FunctionCallingConfig<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionCallingConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    allowed_function_names: Option<[&'a str; 1]>,
    mode: &'static str,
}

fn function_calling_config(choice: &ToolChoice) -> FunctionCallingConfig<'_> {
    let (mode, name) = match choice {
        ToolChoice::Auto => ("AUTO", None),
        ToolChoice::None => ("NONE", None),
        ToolChoice::Required => ("ANY", None),
        ToolChoice::Tool(name) => ("ANY", Some([name.as_str()])),
    };
    FunctionCallingConfig {
        allowed_function_names: name,
        mode,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
