//! Amazon Bedrock's Converse API (`POST /model/{modelId}/converse` and `/converse-stream`),
//! behind the `bedrock` feature: `bedrock:<model-id>` (a model id, an inference profile such
//! as `us.anthropic.claude-sonnet-4-5-20250929-v1:0`, or an ARN).
//!
//! Requests are signed with SigV4 ([`sigv4`]) from static credentials (environment or the
//! shared credentials file); a Bedrock API key in `AWS_BEARER_TOKEN_BEDROCK` is sent as a
//! bearer token instead. The region comes from `AWS_REGION`, `AWS_DEFAULT_REGION` or the
//! profile's `region` in the shared config file. ConverseStream answers in AWS's binary
//! event-stream framing ([`EventStreamFramer`]).

mod request;
mod response;
pub(crate) mod sigv4;

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Buf;
use serde_json::{Value, json};

use super::encode::{BodyWriter, OpenItem, encode_merged};
use super::stream::Framing;
use super::{
    Api, KeyPolicy, ProviderInfo, Setup, WireApi, bearer_auth, object_schema, plain_route,
};
use super::{stream_error, system_text};
use crate::error::Error;
use crate::http::encode_component;
use crate::http::sse::SseEvent;
use crate::message::Message;
use crate::model::ProviderKind;
use crate::model::{ModelRequest, ModelResponse, ToolChoice};
use crate::structured::OutputSchema;
use crate::tool::ToolDescriptor;
use response::ConverseDecoder;

/// Amazon Bedrock's Converse API.
pub(crate) static BEDROCK: ProviderInfo = ProviderInfo {
    id: "bedrock",
    kind: ProviderKind::Bedrock,
    api_key_vars: &["AWS_BEARER_TOKEN_BEDROCK"],
    token_vars: &[],
    base_url_vars: &["AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "AWS_ENDPOINT_URL"],
    default_base_url: REGIONAL_ENDPOINT,
    // SigV4 credentials take the key's place.
    key: KeyPolicy::Never,
    normalize_base_url: regional_base_url,
    signer: Some(|input| {
        if input.authorized {
            return Ok(Setup::default());
        }
        let signer = match &input.settings.aws {
            Some(given) => sigv4::SigV4Signer::new(
                &given.access_key_id,
                &given.secret_access_key,
                given.session_token.clone(),
                &given.region,
            ),
            None => sigv4::SigV4Signer::from_env()?,
        };
        Ok(Setup {
            signer: Some(Arc::new(signer)),
            base_url: None,
        })
    }),
    route: plain_route,
    auth_header: bearer_auth,
    static_headers: &[],
    default_model: None,
    known_models: Some(&[
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "us.amazon.nova-pro-v1:0",
        "us.amazon.nova-lite-v1:0",
    ]),
    api: &Api::<Converse>::new(),
};

/// The runtime endpoint of the configured region.
const REGIONAL_ENDPOINT: &str = "https://bedrock-runtime.{region}.amazonaws.com";

/// `{region}` replaced by the configured region (`us-east-1` when none is set, which only a
/// bearer-token client reaches: SigV4 signing needs a region and says so).
fn regional_base_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    match url.contains("{region}") {
        true => url.replace(
            "{region}",
            &sigv4::region().unwrap_or_else(|| "us-east-1".to_owned()),
        ),
        false => url.to_owned(),
    }
}

pub(crate) struct Converse;

pub(crate) const NAME: &str = "bedrock";

impl WireApi for Converse {
    const NAME: &'static str = NAME;
    const PATH: &'static str = "/converse";
    const FRAMING: Framing = Framing::EventStream;
    const HISTORY_FIELD: &'static str = "messages";
    const TOOLS_FIELD: &'static str = "toolConfig";
    const TOOLS_OPEN: &'static str = "{\"tools\":[";
    const OUTPUT_AS_TOOL: bool = true;
    type Decoder = ConverseDecoder;

    fn path(model: &str, stream: bool) -> Cow<'static, str> {
        let action = if stream {
            "converse-stream"
        } else {
            "converse"
        };
        Cow::Owned(format!("/model/{}/{action}", encode_component(model)))
    }

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
        json!({"toolSpec": {
            "name": d.name,
            "description": d.description,
            "inputSchema": {"json": object_schema(&d.input_schema)},
        }})
    }

    fn output_tool(schema: &OutputSchema) -> Value {
        json!({"toolSpec": {
            "name": schema.name(),
            "description": schema
                .description_text()
                .unwrap_or("Gives the final answer. Its input is the answer."),
            "inputSchema": {"json": schema.object_schema().0},
        }})
    }

    /// A cache point after the tools, then the tool choice, inside `toolConfig`.
    fn write_tools_close(request: &ModelRequest, out: &mut Vec<u8>) -> Result<(), Error> {
        if request.prompt_caching.tools && !request.tools.is_empty() {
            out.extend_from_slice(b",{\"cachePoint\":{\"type\":\"default\"}}");
        }
        out.push(b']');
        if let Some(choice) = tool_choice(request) {
            out.extend_from_slice(b",\"toolChoice\":");
            serde_json::to_writer(&mut *out, &choice).map_err(|error| {
                Error::InvalidRequest(format!("request body does not serialize: {error}"))
            })?;
        }
        out.push(b'}');
        Ok(())
    }

    fn body_fields(
        request: &ModelRequest,
        _stream: bool,
        body: &mut BodyWriter<'_>,
    ) -> Result<(), Error> {
        let mut inference = serde_json::Map::new();
        if let Some(max) = request.max_output_tokens {
            inference.insert("maxTokens".into(), json!(max));
        }
        if let Some(temperature) = request.temperature {
            inference.insert("temperature".into(), json!(f64::from(temperature)));
        }
        if !inference.is_empty() {
            body.field("inferenceConfig", &inference)?;
        }
        if let Some(system) = system_text(request) {
            body.field(
                "system",
                &request::system_blocks(&system, request.prompt_caching.system),
            )?;
        }
        Ok(())
    }

    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
        response::parse_response(body)
    }
}

/// `toolChoice`: `{"auto":{}}`, `{"any":{}}` or `{"tool":{"name"}}`; none for `auto` (the
/// default) and for `none`, which Converse does not have (the tools must stay defined when
/// the conversation holds tool calls).
fn tool_choice(request: &ModelRequest) -> Option<Value> {
    if let Some(schema) = &request.output_schema {
        return Some(match (&request.tool_choice, request.tools.is_empty()) {
            (ToolChoice::Auto | ToolChoice::Required, false) => json!({"any": {}}),
            (ToolChoice::Tool(name), false) => json!({"tool": {"name": name}}),
            _ => json!({"tool": {"name": schema.name()}}),
        });
    }
    match &request.tool_choice {
        ToolChoice::Required => Some(json!({"any": {}})),
        ToolChoice::Tool(name) => Some(json!({"tool": {"name": name}})),
        _ => None,
    }
}

/// Cuts an `application/vnd.amazon.eventstream` body into events: each message's
/// `:event-type` (or, for `:message-type: exception`, its `:exception-type`) names the event,
/// its payload is the data. Prelude and message CRCs are checked.
#[derive(Debug, Default)]
pub(crate) struct EventStreamFramer {
    buffer: bytes::BytesMut,
    decoder: aws_smithy_eventstream::frame::MessageFrameDecoder,
}

/// The event name of an exception message: the `:exception-type` prefixed, so decoders tell
/// it from a regular event.
pub(crate) const EXCEPTION_PREFIX: &str = "exception:";

impl EventStreamFramer {
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    pub(crate) fn next_event(&mut self) -> Result<Option<SseEvent>, Error> {
        use aws_smithy_eventstream::frame::DecodedFrame;
        let frame = self
            .decoder
            .decode_frame(&mut self.buffer)
            .map_err(|error| {
                super::decode_error(NAME, &format!("malformed event stream: {error}"), b"")
            })?;
        let DecodedFrame::Complete(message) = frame else {
            return Ok(None);
        };
        let header = |name: &str| {
            message
                .headers()
                .iter()
                .find(|h| h.name().as_str() == name)
                .and_then(|h| h.value().as_string().ok())
                .map(|value| value.as_str().to_owned())
        };
        let data = String::from_utf8_lossy(message.payload()).into_owned();
        let event = match header(":message-type").as_deref() {
            Some("exception") | Some("error") => format!(
                "{EXCEPTION_PREFIX}{}",
                header(":exception-type")
                    .or_else(|| header(":error-code"))
                    .unwrap_or_default()
            ),
            _ => header(":event-type").unwrap_or_default(),
        };
        Ok(Some(SseEvent::new(event, data)))
    }

    /// Bytes left at the end that make no whole message are a cut-off stream.
    pub(crate) fn finish(&mut self) -> Result<Option<SseEvent>, Error> {
        if self.buffer.has_remaining() {
            return Err(super::decode_error(
                NAME,
                "the event stream ended inside a message",
                b"",
            ));
        }
        Ok(None)
    }
}

/// An exception event as [`Error::Stream`].
pub(crate) fn exception(kind: &str, data: &str) -> Error {
    let payload: Value = serde_json::from_str(data).unwrap_or_else(|_| json!({"message": data}));
    let mut error = stream_error(NAME, &payload);
    if let Error::Stream { code, .. } = &mut error
        && code.is_none()
        && !kind.is_empty()
    {
        *code = Some(kind.to_owned());
    }
    error
}
