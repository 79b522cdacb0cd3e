//! Model providers: one file per provider holds everything about it (wire mapping, key and
//! base-URL variables, auth headers) and ends in a [`ProviderInfo`]; [`PROVIDERS`] registers them.
//!
//! Each wire format implements [`WireApi`]: how a [`ModelRequest`] becomes a body, how a body
//! or an SSE stream becomes a [`ModelResponse`]. [`encode`] builds bodies incrementally,
//! [`stream`] sends them and decodes answers.

pub(crate) mod anthropic;
pub(crate) mod azure;
#[cfg(feature = "bedrock")]
pub(crate) mod bedrock;
pub(crate) mod compatible;
pub(crate) mod encode;
pub(crate) mod gemini;
pub(crate) mod ollama;
pub(crate) mod openai_chat;
pub(crate) mod openai_responses;
pub(crate) mod stream;
#[cfg(feature = "vertex")]
pub(crate) mod vertex;

use std::borrow::Cow;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::Error;
use crate::http::sse::SseEvent;
use crate::http::{HttpConfig, Rejection, Route, header_str, truncate};
use crate::message::{ContentPart, Message, Role};
use crate::model::ProviderKind;
use crate::model::{
    FinishReason, ModelRequest, ModelResponse, ModelState, ModelStream, StreamEvent,
};
use crate::structured::{OutputSchema, WRAPPED_FIELD};
use crate::tool::{ContentBlock, ToolDescriptor, ToolOutput};
pub(crate) use encode::RequestCache;
use encode::{BodyWriter, OpenItem};

/// Every provider, by the prefix of its `provider:model` specs. Adding a provider is one file
/// and one line here.
pub(crate) static PROVIDERS: &[&ProviderInfo] = &[
    &openai_responses::OPENAI,
    &openai_chat::OPENAI_CHAT,
    &anthropic::ANTHROPIC,
    &gemini::GEMINI,
    &ollama::OLLAMA,
    &azure::AZURE,
    &azure::AZURE_RESPONSES,
    #[cfg(feature = "bedrock")]
    &bedrock::BEDROCK,
    #[cfg(feature = "vertex")]
    &vertex::VERTEX,
    #[cfg(feature = "vertex")]
    &vertex::VERTEX_ANTHROPIC,
    &compatible::OPENROUTER,
    &compatible::GROQ,
    &compatible::DEEPSEEK,
    &compatible::MISTRAL,
    &compatible::XAI,
    &compatible::TOGETHER,
    &compatible::FIREWORKS,
    &compatible::CEREBRAS,
    &compatible::LMSTUDIO,
    &compatible::VLLM,
    &compatible::LLAMACPP,
];

/// The provider whose specs start with `id`.
pub(crate) fn provider(id: &str) -> Option<&'static ProviderInfo> {
    PROVIDERS.iter().copied().find(|provider| provider.id == id)
}

/// The ids of all providers, for error messages: `openai, openai-chat, ...`.
pub(crate) fn provider_ids() -> String {
    PROVIDERS
        .iter()
        .map(|provider| provider.id)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Everything a [`Client`](crate::Client) needs to know about one provider.
#[derive(Debug)]
pub(crate) struct ProviderInfo {
    /// The prefix of `provider:model` specs (`openai`, `anthropic`...).
    pub(crate) id: &'static str,
    /// The wire API, as the public enum names it.
    pub(crate) kind: ProviderKind,
    /// Variables holding the API key, first set one wins; empty when there is no key.
    pub(crate) api_key_vars: &'static [&'static str],
    /// Variables holding a bearer token used when no key is set (Azure's Entra ID token);
    /// it goes as `Authorization: Bearer`, whatever [`ProviderInfo::auth_header`] says.
    pub(crate) token_vars: &'static [&'static str],
    /// Variables holding the base URL, first set one wins.
    pub(crate) base_url_vars: &'static [&'static str],
    /// Where requests go when no base URL is configured; empty when there is no default
    /// (a base URL variable must then be set).
    pub(crate) default_base_url: &'static str,
    /// Whether a key is needed.
    pub(crate) key: KeyPolicy,
    /// Sets up a provider whose requests need more than a static auth header: the signer
    /// (Bedrock's SigV4, Vertex's OAuth access tokens) when no key is set, and the base URL
    /// under an account path (Vertex's project and location); `None` for the others.
    pub(crate) signer: Option<MakeSigner>,
    /// Turns a configured base URL into the one requests go to.
    pub(crate) normalize_base_url: fn(&str) -> String,
    /// How request paths hang off the (normalized) base URL.
    pub(crate) route: fn(base_url: &str) -> Route,
    /// The header that carries the key, and its value for `key`.
    pub(crate) auth_header: fn(key: &str) -> (HeaderName, String),
    /// Headers sent with every request (API versions).
    pub(crate) static_headers: &'static [(&'static str, &'static str)],
    /// The model `Client::default_model_spec` picks when this provider's key is set.
    pub(crate) default_model: Option<&'static str>,
    /// What `Client::list_models` answers without asking the server (`None`: it asks
    /// `GET /models`), for providers whose listing does not suit a model picker.
    pub(crate) known_models: Option<&'static [&'static str]>,
    /// The wire API's request functions.
    pub(crate) api: &'static dyn Dispatch,
}

/// Sets up a provider ([`ProviderInfo::signer`]) from what was given to the builder, else
/// from the environment.
pub(crate) type MakeSigner = fn(&SetupInput<'_>) -> Result<Setup, Error>;

/// What a [`MakeSigner`] hook is given.
#[derive(Debug)]
#[cfg_attr(
    not(any(feature = "bedrock", feature = "vertex")),
    allow(dead_code) // only Bedrock and Vertex have hooks
)]
pub(crate) struct SetupInput<'a> {
    /// The base URL, normalized.
    #[cfg_attr(not(feature = "vertex"), allow(dead_code))] // only Vertex places it
    pub(crate) base_url: &'a str,
    /// Whether the base URL was configured (given, or from a variable) rather than the
    /// provider's default.
    #[cfg_attr(not(feature = "vertex"), allow(dead_code))]
    pub(crate) configured: bool,
    /// Whether a key or a bearer token is set: requests then carry it, and need no signer.
    pub(crate) authorized: bool,
    /// The builder's provider-specific settings.
    pub(crate) settings: &'a ProviderSettings,
}

/// What a [`MakeSigner`] hook sets up.
#[derive(Debug, Default)]
pub(crate) struct Setup {
    /// Signs each request; `None` when a key or token is sent as it is.
    pub(crate) signer: Option<std::sync::Arc<dyn crate::http::RequestSigner>>,
    /// The base URL requests go to instead of the normalized one.
    pub(crate) base_url: Option<String>,
}

/// Settings that only some providers read, given to a [`ClientBuilder`](crate::ClientBuilder).
#[derive(Debug, Clone, Default)]
#[cfg_attr(
    not(all(feature = "bedrock", feature = "vertex")),
    allow(dead_code) // each group is read by its provider only
)]
pub(crate) struct ProviderSettings {
    /// Bedrock's static AWS credentials and region.
    pub(crate) aws: Option<crate::http::StaticCredentials>,
    /// Vertex AI's Google Cloud project.
    pub(crate) google_project: Option<String>,
    /// Vertex AI's location (region, or `global`).
    pub(crate) google_location: Option<String>,
    /// A Google credentials file (service-account key or `authorized_user`) for Vertex AI.
    pub(crate) google_credentials_file: Option<std::path::PathBuf>,
}

/// When a provider needs an API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyPolicy {
    /// Always.
    Required,
    /// Unless a base URL is configured (self-hosted compatible servers).
    UnlessBaseUrl,
    /// Never; a key given anyway is sent.
    Never,
}

/// [`Route::Plain`], for every base URL.
pub(crate) fn plain_route(_base_url: &str) -> Route {
    Route::Plain
}

/// `Authorization: Bearer <key>`.
pub(crate) fn bearer_auth(key: &str) -> (HeaderName, String) {
    (AUTHORIZATION, format!("Bearer {key}"))
}

/// A base URL used as configured.
pub(crate) fn base_url_as_is(url: &str) -> String {
    url.to_owned()
}

/// A wire API's request functions behind a trait object, so a client holds one pointer.
///
/// They keep the encoded conversation ([`RequestCache`]) in the run's [`ModelState`].
pub(crate) trait Dispatch: Send + Sync + std::fmt::Debug {
    /// [`stream::generate`] for this wire API.
    fn generate<'a>(
        &self,
        http: &'a HttpConfig,
        request: &'a ModelRequest,
        state: &'a mut ModelState,
    ) -> BoxFuture<'a, Result<ModelResponse, Error>>;

    /// [`stream::stream`] for this wire API.
    fn stream<'a>(
        &self,
        http: &'a HttpConfig,
        request: &'a ModelRequest,
        state: &'a mut ModelState,
    ) -> BoxFuture<'a, Result<ModelStream, Error>>;
}

/// [`Dispatch`] for the wire API `P`.
pub(crate) struct Api<P>(PhantomData<fn() -> P>);

impl<P> Api<P> {
    pub(crate) const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<P: WireApi> std::fmt::Debug for Api<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(P::NAME)
    }
}

impl<P: WireApi> Dispatch for Api<P> {
    fn generate<'a>(
        &self,
        http: &'a HttpConfig,
        request: &'a ModelRequest,
        state: &'a mut ModelState,
    ) -> BoxFuture<'a, Result<ModelResponse, Error>> {
        Box::pin(async move {
            let mut cache = state.take::<RequestCache>().unwrap_or_default();
            let response = stream::generate::<P>(http, request, &mut cache).await;
            state.put(cache);
            response
        })
    }

    fn stream<'a>(
        &self,
        http: &'a HttpConfig,
        request: &'a ModelRequest,
        state: &'a mut ModelState,
    ) -> BoxFuture<'a, Result<ModelStream, Error>> {
        Box::pin(async move {
            let mut cache = state.take::<RequestCache>().unwrap_or_default();
            let stream = stream::stream::<P>(http, request, &mut cache).await;
            state.put(cache);
            stream
        })
    }
}

/// Decodes one wire API's stream into [`StreamEvent`]s and the final [`ModelResponse`].
pub(crate) trait StreamDecoder: Default + Send + 'static {
    /// Handles one SSE event. Returns `true` once the provider said the response is complete.
    fn on_event(&mut self, event: SseEvent, out: &mut VecDeque<StreamEvent>)
    -> Result<bool, Error>;

    /// The assembled response. `complete` says whether a terminal event was seen; an
    /// incomplete stream is an error unless the API allows ending without one.
    fn finish(self, complete: bool) -> Result<ModelResponse, Error>;
}

/// One provider wire format.
///
/// A request body is assembled by [`encode_request`](encode::encode_request) from these
/// pieces, so the conversation and tool definitions can be encoded once and reused across the
/// steps of a run.
pub(crate) trait WireApi: Send + Sync + 'static {
    /// Name used in errors (`openai`, `openai-chat`, `anthropic`).
    const NAME: &'static str;
    /// Appended to the base URL.
    const PATH: &'static str;
    /// What encloses the tool definitions in the `tools` field.
    const TOOLS_OPEN: &'static str = "[";
    /// See [`WireApi::TOOLS_OPEN`].
    const TOOLS_CLOSE: &'static str = "]";
    /// The body field holding the conversation (`messages`, `input`).
    const HISTORY_FIELD: &'static str;
    /// Whether a structured answer comes as the input of a tool the model is made to call
    /// ([`WireApi::output_tool`]) rather than through a native response format.
    const OUTPUT_AS_TOOL: bool = false;
    /// How a streamed answer is cut into events.
    const FRAMING: stream::Framing = stream::Framing::Sse;
    /// The body field holding the tool definitions.
    const TOOLS_FIELD: &'static str = "tools";
    /// Stream decoding state.
    type Decoder: StreamDecoder;

    /// The path for a request on `model` (defaults to [`WireApi::PATH`]).
    fn path(_model: &str, _stream: bool) -> Cow<'static, str> {
        Cow::Borrowed(Self::PATH)
    }

    /// A retry delay an error body asks for (beyond the `Retry-After` headers).
    fn retry_delay(_body: &[u8]) -> Option<Duration> {
        None
    }

    /// Writes the wire item that precedes the conversation (Chat Completions' system message)
    /// after the `[` of the history field.
    fn write_leading_item(_request: &ModelRequest, _out: &mut Vec<u8>) -> Result<(), Error> {
        Ok(())
    }

    /// Encodes `messages`, the conversation after the messages already sealed, as
    /// comma-separated wire items: items nothing can merge into any more are appended to
    /// `sealed`; a wire format that merges messages of one role keeps its last item in `open`
    /// ([`encode_merged`](encode::encode_merged)). Returns how many of `messages` the items
    /// appended to `sealed` cover.
    fn encode_messages(
        request: &ModelRequest,
        messages: &[Message],
        sealed: &mut Vec<u8>,
        open: &mut OpenItem,
    ) -> Result<usize, Error>;

    /// One tool definition.
    fn tool_definition(tool: &ToolDescriptor) -> Value;

    /// The definition of the tool that carries a structured answer (see
    /// [`WireApi::OUTPUT_AS_TOOL`]); sent after the request's tools.
    fn output_tool(_schema: &OutputSchema) -> Value {
        Value::Null
    }

    /// Writes what closes the tool definitions (defaults to [`WireApi::TOOLS_CLOSE`]); wire
    /// APIs that keep the tool choice or a cache point next to the tools write them here.
    fn write_tools_close(_request: &ModelRequest, out: &mut Vec<u8>) -> Result<(), Error> {
        out.extend_from_slice(Self::TOOLS_CLOSE.as_bytes());
        Ok(())
    }

    /// Makes the last tool definition a prompt-cache breakpoint, for wire APIs with explicit
    /// breakpoints ([`PromptCaching::tools`](crate::PromptCaching::tools)).
    fn mark_tools_breakpoint(_definition: &mut Value) {}

    /// Writes every other body field (model, options, tool choice...), in alphabetical order.
    fn body_fields(
        request: &ModelRequest,
        stream: bool,
        body: &mut BodyWriter<'_>,
    ) -> Result<(), Error>;

    /// Decodes a non-streaming response body.
    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error>;
}

/// Reads an error response of wire API `P`.
pub(crate) fn read_error<P: WireApi>(status: u16, headers: &HeaderMap, body: &[u8]) -> Rejection {
    Rejection {
        error: provider_error(P::NAME, status, headers, body),
        retry_after: P::retry_delay(body),
    }
}

/// Builds [`Error::Provider`] from an error response (OpenAI and Anthropic envelopes alike).
/// The message and body are redacted ([`crate::redact`]): providers echo the key they refused.
fn provider_error(provider: &'static str, status: u16, headers: &HeaderMap, body: &[u8]) -> Error {
    let text = crate::redact::redact(&String::from_utf8_lossy(body)).into_owned();
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().map(|v| v.get("error").unwrap_or(v));
    let message = error
        .and_then(|e| match e {
            Value::String(s) => Some(s.clone()),
            other => other
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
        .unwrap_or_else(|| {
            if text.trim().is_empty() {
                format!("HTTP {status} with an empty body")
            } else {
                truncate(&text, 500)
            }
        });
    let code = error.and_then(|e| {
        // Gemini's `code` is the numeric status; its name is in `status`.
        ["code", "type", "status"]
            .into_iter()
            .find_map(|key| e.get(key).and_then(Value::as_str).map(str::to_owned))
    });
    let request_id = header_str(headers, "x-request-id")
        .or_else(|| header_str(headers, "request-id"))
        .map(str::to_owned);
    Error::Provider {
        provider,
        status,
        message: crate::redact::redact(&message).into_owned(),
        code,
        body: text,
        request_id,
        // Set by the HTTP layer, which reads the headers and the body's own delay.
        retry_after: None,
    }
}

pub(crate) fn decode_error(provider: &'static str, what: &str, body: &[u8]) -> Error {
    Error::Decode {
        provider,
        message: what.to_owned(),
        body: truncate(&crate::redact::redact(&String::from_utf8_lossy(body)), 4096),
    }
}

/// Parses a JSON body, keeping the raw text on failure.
///
/// The body is checked to be UTF-8 once, as a whole: parsing bytes would check every string
/// in it on its own, which costs more than the check of the whole body.
pub(crate) fn parse_json<'a, T: Deserialize<'a>>(
    provider: &'static str,
    body: &'a [u8],
) -> Result<T, Error> {
    let malformed = |error: &dyn std::fmt::Display| {
        decode_error(provider, &format!("malformed JSON: {error}"), body)
    };
    let text = std::str::from_utf8(body).map_err(|error| malformed(&error))?;
    serde_json::from_str(text).map_err(|error| malformed(&error))
}

/// Tool-call arguments from the JSON text a model produced; empty text means no arguments.
///
/// Text that is not JSON is kept as a JSON string so the schema check reports it to the model.
pub(crate) fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// A tool's schema as providers require it: an object schema with `properties`.
///
/// Only copies when something has to be added; the tool's own schema is never changed.
pub(crate) fn object_schema(schema: &Value) -> Cow<'_, Value> {
    match schema {
        Value::Object(map)
            if map.get("type").and_then(Value::as_str) == Some("object")
                && map.contains_key("properties") =>
        {
            Cow::Borrowed(schema)
        }
        Value::Object(map) if map.get("type").is_none_or(|t| t == "object") => {
            let mut map = map.clone();
            map.insert("type".to_owned(), Value::String("object".to_owned()));
            map.entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            Cow::Owned(Value::Object(map))
        }
        _ => Cow::Owned(serde_json::json!({"type": "object", "properties": {}})),
    }
}

/// Tool-call arguments as the JSON object Anthropic's `input` and Gemini's `args` require.
///
/// Arguments that are JSON text of an object are sent as that object; anything else (text that
/// was not JSON, an array...) becomes `{}`: such a call already failed the tool's schema check
/// and its tool result tells the model why.
pub(crate) fn arguments_object(arguments: &Value) -> Cow<'_, Value> {
    match arguments {
        Value::Object(_) => Cow::Borrowed(arguments),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => Cow::Owned(object),
            _ => Cow::Owned(Value::Object(Map::new())),
        },
        _ => Cow::Owned(Value::Object(Map::new())),
    }
}

/// A piece of a tool result as the provider should see it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OutputPart<'a> {
    Text(Cow<'a, str>),
    Image { mime_type: &'a str, data: &'a str },
}

/// A tool output as text and image parts: text as is, JSON as compact text, content blocks
/// one by one (images as images, every other block as its text form).
pub(crate) fn tool_output_parts(output: &ToolOutput) -> Vec<OutputPart<'_>> {
    match output {
        ToolOutput::Text(text) => vec![OutputPart::Text(Cow::Borrowed(text))],
        ToolOutput::Json(value) => vec![OutputPart::Text(Cow::Owned(value.to_string()))],
        ToolOutput::Content(blocks)
        | ToolOutput::Structured {
            content: blocks, ..
        } => blocks
            .iter()
            .map(|block| match block {
                ContentBlock::Image { mime_type, data } => OutputPart::Image { mime_type, data },
                other => OutputPart::Text(other.to_text()),
            })
            .collect(),
    }
}

/// The text of a tool output that has no parts to send apart: text as is, JSON as compact
/// text; `None` for content blocks (see [`tool_output_parts`]).
pub(crate) fn plain_output_text(output: &ToolOutput) -> Option<Cow<'_, str>> {
    match output {
        ToolOutput::Text(text) => Some(Cow::Borrowed(text)),
        ToolOutput::Json(value) => Some(Cow::Owned(value.to_string())),
        ToolOutput::Content(_) | ToolOutput::Structured { .. } => None,
    }
}

/// All text parts of a tool output joined by newlines; images are left out.
pub(crate) fn output_text(parts: &[OutputPart<'_>]) -> String {
    let mut out = String::new();
    for part in parts {
        if let OutputPart::Text(text) = part {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
    }
    out
}

/// What providers send for a failed tool call that returned no text: they reject empty
/// error results.
pub(crate) const EMPTY_ERROR_TEXT: &str = "The tool failed without output.";

/// `data:<mime>;base64,<data>` as `(mime, data)`; `None` for any other URL.
pub(crate) fn split_data_url(url: &str) -> Option<(&str, &str)> {
    let (meta, data) = url.strip_prefix("data:")?.split_once(',')?;
    Some((meta.strip_suffix(";base64")?, data))
}

/// A fresh tool-call id for providers that send none: random, so ids stay unique across
/// the whole conversation (a per-response counter would repeat `call_0` every step).
pub(crate) fn new_call_id() -> String {
    format!("call_{:016x}", fastrand::u64(..))
}

/// The instructions plus any system messages of the conversation, in order, joined by blank
/// lines (borrowed when there are only instructions).
pub(crate) fn system_text(request: &ModelRequest) -> Option<Cow<'_, str>> {
    let mut systems = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .peekable();
    if systems.peek().is_none() {
        return request.instructions.as_deref().map(Cow::Borrowed);
    }
    let mut text = request.instructions.clone();
    for message in systems {
        let more = message.text();
        match &mut text {
            Some(text) => {
                text.push_str("\n\n");
                text.push_str(&more);
            }
            None => text = Some(more),
        }
    }
    text.map(Cow::Owned)
}

/// Turns the call of the structured-answer tool of `schema` into the answer's text, so the
/// answer reads the same whatever the provider: the call is not a tool call to run, and text
/// the model wrote beside it is preamble, not part of the answer. A wrapped answer (see
/// [`OutputSchema::object_schema`]) is unwrapped.
pub(crate) fn output_call_as_text(schema: &OutputSchema, response: &mut ModelResponse) {
    let content = &mut response.message.content;
    let Some(position) = content
        .iter()
        .position(|part| matches!(part, ContentPart::ToolCall(call) if call.name == schema.name()))
    else {
        return;
    };
    if let Some(ContentPart::ToolCall(call)) = content.get(position) {
        let wrapped = schema.object_schema().1;
        let arguments = match &call.arguments {
            Value::Object(map) if wrapped => map.get(WRAPPED_FIELD).unwrap_or(&Value::Null),
            arguments => arguments,
        };
        // Arguments that were not JSON are kept as the text the model wrote.
        let answer = ContentPart::text(match arguments {
            Value::String(text) if !wrapped => text.clone(),
            arguments => arguments.to_string(),
        });
        if let Some(slot) = content.get_mut(position) {
            *slot = answer;
        }
    }
    let mut index = 0;
    content.retain(|part| {
        let keep = index == position || !matches!(part, ContentPart::Text { .. });
        index += 1;
        keep
    });
    if response.message.tool_calls().next().is_none() {
        response.finish_reason = FinishReason::Stop;
    }
}

/// Assembles an assistant message from streamed or decoded pieces, keeping their order.
#[derive(Debug, Default)]
pub(crate) struct AssistantBuilder {
    pub(crate) parts: Vec<ContentPart>,
}

impl AssistantBuilder {
    pub(crate) fn push_text(&mut self, text: &str) {
        if let Some(ContentPart::Text { text: last }) = self.parts.last_mut() {
            last.push_str(text);
        } else {
            self.parts.push(ContentPart::text(text));
        }
    }

    pub(crate) fn into_message(self) -> Message {
        Message::new(Role::Assistant, self.parts)
    }

    pub(crate) fn has_tool_calls(&self) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, ContentPart::ToolCall(_)))
    }
}

/// [`Error::Stream`] from an error object inside a stream (`{"message","type"|"code"}`, or the
/// same nested under `"error"`).
pub(crate) fn stream_error(provider: &'static str, error: &Value) -> Error {
    let inner = error
        .get("error")
        .filter(|e| e.is_object())
        .unwrap_or(error);
    let field = |key: &str| inner.get(key).and_then(Value::as_str).map(str::to_owned);
    Error::Stream {
        provider,
        message: field("message").unwrap_or_else(|| inner.to_string()),
        code: field("code").or_else(|| field("type")),
    }
}
