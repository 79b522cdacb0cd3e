//! Anthropic Messages API (`POST /v1/messages`).

mod request;
mod response;

use reqwest::header::HeaderName;
use serde::Serialize;
use serde_json::{Value, json};

use super::encode::{BodyWriter, OpenItem, encode_merged};
use super::{
    Api, KeyPolicy, ProviderInfo, WireApi, base_url_as_is, object_schema, plain_route, system_text,
};
use crate::error::Error;
use crate::message::Message;
use crate::model::ProviderKind;
use crate::model::{ModelRequest, ModelResponse, ToolChoice};
use crate::structured::OutputSchema;
use crate::tool::ToolDescriptor;
use response::AnthropicDecoder;

/// Anthropic's Messages API.
pub(crate) static ANTHROPIC: ProviderInfo = ProviderInfo {
    id: "anthropic",
    kind: ProviderKind::Anthropic,
    api_key_vars: &["ANTHROPIC_API_KEY"],
    token_vars: &[],
    base_url_vars: &["ANTHROPIC_BASE_URL"],
    default_base_url: "https://api.anthropic.com",
    key: KeyPolicy::Required,
    normalize_base_url: base_url_as_is,
    signer: None,
    route: plain_route,
    auth_header: |key| (HeaderName::from_static("x-api-key"), key.to_owned()),
    static_headers: &[("anthropic-version", "2023-06-01")],
    default_model: Some("claude-sonnet-4-5"),
    // Its models endpoint pages with its own versioning; a short current list suits a picker.
    known_models: Some(&["claude-opus-4-1", "claude-sonnet-4-5", "claude-haiku-4-5"]),
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
    const OUTPUT_AS_TOOL: bool = true;

    fn encode_messages(
        request: &ModelRequest,
        messages: &[Message],
        sealed: &mut Vec<u8>,
        open: &mut OpenItem,
    ) -> Result<usize, Error> {
        let mark_latest = request.prompt_caching.latest_turn;
        encode_merged(messages, request::turn, mark_latest, sealed, open)
    }

    fn tool_definition(d: &ToolDescriptor) -> Value {
        json!({
            "name": d.name,
            "description": d.description,
            "input_schema": object_schema(&d.input_schema),
        })
    }

    fn output_tool(schema: &OutputSchema) -> Value {
        json!({
            "name": schema.name(),
            "description": schema
                .description_text()
                .unwrap_or("Gives the final answer. Its input is the answer."),
            "input_schema": schema.object_schema().0,
        })
    }

    fn mark_tools_breakpoint(definition: &mut Value) {
        if let Value::Object(definition) = definition {
            definition.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
    }

    fn body_fields(
        request: &ModelRequest,
        stream: bool,
        body: &mut BodyWriter<'_>,
    ) -> Result<(), Error> {
        write_body_fields(request, stream, body, None)
    }

    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
        response::parse_response(body)
    }
}

/// The body fields of a Messages request. With `version` (Anthropic on Vertex AI), the API
/// version goes in the body as `anthropic_version`, and the model (named by the URL) does not.
pub(crate) fn write_body_fields(
    request: &ModelRequest,
    stream: bool,
    body: &mut BodyWriter<'_>,
    version: Option<&str>,
) -> Result<(), Error> {
    if let Some(version) = version {
        body.field("anthropic_version", version)?;
    }
    let max_tokens = request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    body.field("max_tokens", &max_tokens)?;
    if version.is_none() {
        body.field("model", &request.model)?;
    }
    if stream {
        body.field("stream", &true)?;
    }
    if let Some(system) = system_text(request) {
        if request.prompt_caching.system {
            body.field("system", &[request::cached_text(&system)])?;
        } else {
            body.field("system", &system)?;
        }
    }
    if let Some(temperature) = request.temperature {
        body.field("temperature", &f64::from(temperature))?;
    }
    if let Some(schema) = &request.output_schema {
        body.field("tool_choice", &output_tool_choice(request, schema))?;
    } else if !request.tools.is_empty() {
        body.field("tool_choice", &tool_choice(&request.tool_choice))?;
    }
    Ok(())
}

/// `tool_choice`: `{"type": "auto" | "none" | "any"}` or `{"name", "type": "tool"}`.
#[derive(Serialize)]
struct WireToolChoice<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// The model must answer through the output tool; with other tools it may call those first
/// (`any`), unless the tool choice says otherwise.
fn output_tool_choice<'a>(
    request: &'a ModelRequest,
    schema: &'a OutputSchema,
) -> WireToolChoice<'a> {
    let answer = WireToolChoice {
        name: Some(schema.name()),
        kind: "tool",
    };
    if request.tools.is_empty() {
        return answer;
    }
    match &request.tool_choice {
        ToolChoice::Auto | ToolChoice::Required => WireToolChoice {
            name: None,
            kind: "any",
        },
        ToolChoice::None => answer,
        other => tool_choice(other),
    }
}

fn tool_choice(choice: &ToolChoice) -> WireToolChoice<'_> {
    let (kind, name) = match choice {
        ToolChoice::Auto => ("auto", None),
        ToolChoice::None => ("none", None),
        ToolChoice::Required => ("any", None),
        ToolChoice::Tool(name) => ("tool", Some(name.as_str())),
    };
    WireToolChoice { name, kind }
}
