//! Anthropic Messages API (`POST /v1/messages`).

mod request;
mod response;

use reqwest::header::HeaderName;
use serde_json::{Map, Value, json};

use super::encode::{OpenItem, encode_merged};
use super::{Api, KeyPolicy, ProviderInfo, WireApi, base_url_as_is, object_schema, system_text};
use crate::client::ProviderKind;
use crate::error::Error;
use crate::message::Message;
use crate::model::{ModelRequest, ModelResponse, ToolChoice};
use crate::tool::ToolDescriptor;
use response::AnthropicDecoder;

/// Anthropic's Messages API.
pub(crate) static ANTHROPIC: ProviderInfo = ProviderInfo {
    id: "anthropic",
    kind: ProviderKind::Anthropic,
    api_key_vars: &["ANTHROPIC_API_KEY"],
    base_url_vars: &["ANTHROPIC_BASE_URL"],
    default_base_url: "https://api.anthropic.com",
    key: KeyPolicy::Required,
    normalize_base_url: base_url_as_is,
    auth_header: |key| (HeaderName::from_static("x-api-key"), key.to_owned()),
    static_headers: &[("anthropic-version", "2023-06-01")],
    default_model: Some("claude-sonnet-4-5"),
    api: &Api::<Anthropic>::new(),
};

pub(crate) struct Anthropic;

const NAME: &str = "anthropic";

/// `max_tokens` is mandatory in this API; this applies when the request sets no limit.
const DEFAULT_MAX_TOKENS: u32 = 8192;

impl WireApi for Anthropic {
    const NAME: &'static str = NAME;
    const PATH: &'static str = "/v1/messages";
    type Decoder = AnthropicDecoder;

    const HISTORY_FIELD: &'static str = "messages";

    fn encode_messages(
        _request: &ModelRequest,
        messages: &[Message],
        sealed: &mut Vec<u8>,
        open: &mut OpenItem,
    ) -> Result<usize, Error> {
        encode_merged(messages, request::turn, sealed, open)
    }

    fn tool_definition(d: &ToolDescriptor) -> Value {
        json!({
            "name": d.name,
            "description": d.description,
            "input_schema": object_schema(&d.input_schema),
        })
    }

    fn body_fields(request: &ModelRequest, stream: bool) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("model".into(), request.model.clone().into());
        body.insert(
            "max_tokens".into(),
            json!(request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
        );
        if let Some(system) = system_text(request) {
            body.insert("system".into(), Value::String(system));
        }
        if !request.tools.is_empty() {
            body.insert("tool_choice".into(), tool_choice(&request.tool_choice));
        }
        if let Some(temperature) = request.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        if stream {
            body.insert("stream".into(), Value::Bool(true));
        }
        body
    }

    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
        response::parse_response(body)
    }
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
    }
}
