//! OpenAI Responses (`POST /responses`), used statelessly: `store: false`, with the previous
//! output items (reasoning included) sent back as input on every call.

mod request;
mod response;

use serde::Serialize;
use serde_json::{Value, json};

use super::encode::{BodyWriter, OpenItem};
use super::openai_chat::OPENAI_BASE_URL;
use super::{Api, KeyPolicy, ProviderInfo, base_url_as_is, bearer_auth, plain_route};
use super::{WireApi, object_schema, system_text};
use crate::error::Error;
use crate::message::Message;
use crate::model::ProviderKind;
use crate::model::{ModelRequest, ModelResponse, ToolChoice};
use crate::tool::ToolDescriptor;
use response::Decoder;

/// OpenAI's Responses API, or a compatible server at `OPENAI_BASE_URL` (llama.cpp, vLLM...;
/// the key is then optional, as for Chat Completions).
pub(crate) static OPENAI: ProviderInfo = ProviderInfo {
    id: "openai",
    kind: ProviderKind::OpenAiResponses,
    api_key_vars: &["OPENAI_API_KEY"],
    token_vars: &[],
    base_url_vars: &["OPENAI_BASE_URL"],
    default_base_url: OPENAI_BASE_URL,
    key: KeyPolicy::UnlessBaseUrl,
    normalize_base_url: base_url_as_is,
    signer: None,
    route: plain_route,
    auth_header: bearer_auth,
    static_headers: &[],
    default_model: Some("gpt-5-mini"),
    known_models: None,
    api: &Api::<OpenAiResponses>::new(),
};

pub(crate) struct OpenAiResponses;

const NAME: &str = "openai";

impl WireApi for OpenAiResponses {
    const NAME: &'static str = NAME;
    const PATH: &'static str = "/responses";
    type Decoder = Decoder;

    const HISTORY_FIELD: &'static str = "input";

    fn encode_messages(
        request: &ModelRequest,
        messages: &[Message],
        sealed: &mut Vec<u8>,
        _open: &mut OpenItem,
    ) -> Result<usize, Error> {
        // Stored items can be referenced by id alone; with `store: false` (our default) a
        // reasoning item is only accepted back with its `encrypted_content`.
        let stored = request
            .extra_body
            .as_ref()
            .and_then(|extra| extra.get("store"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        for message in messages {
            request::write_items(sealed, message, stored)?;
        }
        Ok(messages.len())
    }

    fn tool_definition(d: &ToolDescriptor) -> Value {
        json!({
            "type": "function",
            "name": d.name,
            "description": d.description,
            "parameters": object_schema(&d.input_schema),
            "strict": false,
        })
    }

    fn body_fields(
        request: &ModelRequest,
        stream: bool,
        body: &mut BodyWriter<'_>,
    ) -> Result<(), Error> {
        if wants_encrypted_reasoning(request) {
            body.field("include", &["reasoning.encrypted_content"])?;
        }
        if let Some(system) = system_text(request) {
            body.field("instructions", &system)?;
        }
        if let Some(max) = request.max_output_tokens {
            body.field("max_output_tokens", &max)?;
        }
        body.field("model", &request.model)?;
        if let Some(key) = &request.prompt_caching.key {
            body.field("prompt_cache_key", key)?;
        }
        body.field("store", &false)?;
        if stream {
            body.field("stream", &true)?;
        }
        if let Some(temperature) = request.temperature {
            body.field("temperature", &f64::from(temperature))?;
        }
        if let Some(schema) = &request.output_schema {
            let (wire, strict) = schema.openai_schema();
            let mut format = json!({
                "type": "json_schema",
                "name": schema.name(),
                "schema": wire,
                "strict": strict,
            });
            if let Some(description) = schema.description_text() {
                format["description"] = json!(description);
            }
            body.field("text", &json!({"format": format}))?;
        }
        if !request.tools.is_empty() {
            body.field("tool_choice", &tool_choice(&request.tool_choice))?;
        }
        Ok(())
    }

    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
        response::parse_response(body)
    }
}

/// Asks for `encrypted_content` so reasoning survives stateless calls, but only for reasoning
/// models: the others (gpt-4o, gpt-4.1, gpt-5-chat...) reject the `include` with a 400.
/// `extra_body` can always set `include` itself.
fn wants_encrypted_reasoning(request: &ModelRequest) -> bool {
    if request
        .extra_body
        .as_ref()
        .is_some_and(|extra| extra.contains_key("reasoning"))
    {
        return true;
    }
    let model = request.model.rsplit('/').next().unwrap_or_default();
    ["o1", "o3", "o4", "gpt-5", "codex"]
        .iter()
        .any(|family| model.starts_with(family))
        && !model.contains("chat")
}

/// `tool_choice`: a mode, or `{"name", "type": "function"}`.
#[derive(Serialize)]
#[serde(untagged)]
enum WireToolChoice<'a> {
    Mode(&'static str),
    Function {
        name: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
}

fn tool_choice(choice: &ToolChoice) -> WireToolChoice<'_> {
    match choice {
        ToolChoice::Auto => WireToolChoice::Mode("auto"),
        ToolChoice::None => WireToolChoice::Mode("none"),
        ToolChoice::Required => WireToolChoice::Mode("required"),
        ToolChoice::Tool(name) => WireToolChoice::Function {
            name,
            kind: "function",
        },
    }
}
