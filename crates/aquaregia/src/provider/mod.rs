//! Provider-neutral request and response types, and the HTTP plumbing every wire API shares.
//!
//! Each wire API lives in its own file and implements [`WireApi`]: how a [`ModelRequest`] becomes
//! a body, how a body or an SSE stream becomes a [`ModelResponse`].

pub(crate) mod anthropic;
pub(crate) mod openai_chat;
pub(crate) mod openai_responses;
pub(crate) mod sse;

use std::borrow::Cow;
use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, is_retryable_status};
use crate::message::{ContentPart, Message, Role};
use crate::tool::Tool;
use sse::{SseDecoder, SseEvent};

/// One call to a model: what the agent loop sends each step, also usable directly with
/// [`Client::generate`](crate::Client::generate) and [`Client::stream`](crate::Client::stream).
#[non_exhaustive]
#[derive(Debug, Clone, Default)]
pub struct ModelRequest {
    /// The model id (`gpt-4o-mini`, `claude-sonnet-4-5`...).
    pub model: String,
    /// System instructions.
    pub instructions: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<Tool>,
    /// Whether and which tools the model must call.
    pub tool_choice: ToolChoice,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Upper bound on generated tokens.
    pub max_output_tokens: Option<u32>,
    /// Extra top-level fields merged into the request body (provider-specific options such as
    /// Anthropic `thinking` or OpenAI `reasoning`). They override fields aquaregia sets.
    pub extra_body: Option<Map<String, Value>>,
}

impl ModelRequest {
    /// A request for `model` with `messages`.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            messages,
            ..Self::default()
        }
    }

    /// Sets the system instructions.
    #[must_use]
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Sets the tools.
    #[must_use]
    pub fn tools(mut self, tools: Vec<Tool>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the tool choice.
    #[must_use]
    pub fn tool_choice(mut self, tool_choice: ToolChoice) -> Self {
        self.tool_choice = tool_choice;
        self
    }

    /// Sets the temperature.
    #[must_use]
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Sets the output token limit.
    #[must_use]
    pub fn max_output_tokens(mut self, max_output_tokens: u32) -> Self {
        self.max_output_tokens = Some(max_output_tokens);
        self
    }

    /// Sets extra top-level body fields.
    #[must_use]
    pub fn extra_body(mut self, extra_body: Map<String, Value>) -> Self {
        self.extra_body = Some(extra_body);
        self
    }
}

/// Whether the model may, must or must not call tools.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool must be called.
    Tool(String),
}

/// A complete model answer.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// The assistant message: text, reasoning and tool calls in order.
    pub message: Message,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
    /// Token usage of this call.
    pub usage: Usage,
    /// The provider's response id.
    pub id: Option<String>,
    /// The model that answered, as the provider reports it.
    pub model: Option<String>,
}

impl ModelResponse {
    /// The concatenated text of the answer.
    pub fn text(&self) -> String {
        self.message.text()
    }
}

/// Why the model stopped generating.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end of the answer.
    Stop,
    /// The model wants tool results.
    ToolCalls,
    /// The output token limit was reached.
    Length,
    /// The model refused or a content filter stopped it.
    ContentFilter,
    /// Anything else the provider said.
    Other(String),
}

/// Token counts. Adds up across steps with `+=`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Generated tokens, reasoning included.
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached_input_tokens: u64,
    /// Generated tokens spent on reasoning.
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Input plus output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

/// An increment of a streamed model answer.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More answer text.
    TextDelta(String),
    /// More reasoning text.
    ReasoningDelta(String),
    /// A tool call began; its arguments follow in [`StreamEvent::ToolCallDelta`]s.
    ToolCallStart {
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// A fragment of a tool call's JSON arguments.
    ToolCallDelta {
        /// The call id.
        id: String,
        /// The next piece of the arguments' JSON text.
        arguments: String,
    },
    /// The answer is complete; always the last event of a successful stream.
    Finish(ModelResponse),
}

/// A streamed model answer.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, Error>> + Send>>;

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
/// A request body is assembled by [`encode_request`] from these pieces, so the conversation
/// and tool definitions can be encoded once and reused across the steps of a run.
pub(crate) trait WireApi: Send + Sync + 'static {
    /// Name used in errors (`openai`, `openai-chat`, `anthropic`).
    const NAME: &'static str;
    /// Appended to the base URL.
    const PATH: &'static str;
    /// The body field holding the conversation (`messages`, `input`).
    const HISTORY_FIELD: &'static str;
    /// Stream decoding state.
    type Decoder: StreamDecoder;

    /// A wire item that precedes the conversation (Chat Completions' system message).
    fn leading_item(_request: &ModelRequest) -> Option<Value> {
        None
    }

    /// Appends the wire items for `messages`. May merge into the last item of `items` (whose
    /// earlier items are already encoded): wire formats that forbid two messages of one role
    /// in a row do that.
    fn push_messages(request: &ModelRequest, messages: &[Message], items: &mut Vec<Value>);

    /// Final form of a wire item that nothing will merge into any more, as it is sent.
    fn seal_item(_item: &mut Value) {}

    /// One tool definition.
    fn tool_definition(tool: &Tool) -> Value;

    /// Every other body field (model, options, tool choice...).
    fn body_fields(request: &ModelRequest, stream: bool) -> Map<String, Value>;

    /// Decodes a non-streaming response body.
    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error>;
}

/// The encoded conversation and tool definitions of earlier requests, so each step of a run
/// only encodes what is new: request building does not grow with the conversation.
///
/// Valid while the conversation only grows by appending; anything else resets it.
#[derive(Debug, Default)]
pub(crate) struct RequestCache {
    provider: &'static str,
    /// Messages encoded so far.
    messages: usize,
    /// Serialized wire items, comma-separated, except the last one.
    history: Vec<u8>,
    /// The last wire item, kept open because the next message may merge into it.
    tail: Option<Value>,
    /// The tools `tools_json` was made from.
    tools: Vec<Tool>,
    tools_json: Vec<u8>,
}

impl RequestCache {
    fn reset(&mut self, provider: &'static str) {
        *self = Self {
            provider,
            ..Self::default()
        };
    }
}

/// The JSON body for `request`, reusing and extending `cache`.
///
/// `extra_body` fields override everything else, the conversation and tools included.
pub(crate) fn encode_request<P: WireApi>(
    request: &ModelRequest,
    stream: bool,
    cache: &mut RequestCache,
) -> Result<Vec<u8>, Error> {
    if cache.provider != P::NAME || cache.messages > request.messages.len() {
        cache.reset(P::NAME);
    }
    if cache.messages < request.messages.len() {
        let mut items: Vec<Value> = cache.tail.take().into_iter().collect();
        P::push_messages(request, &request.messages[cache.messages..], &mut items);
        cache.tail = items.pop();
        for mut item in items {
            P::seal_item(&mut item);
            append_item(&mut cache.history, &item)?;
        }
        cache.messages = request.messages.len();
    }
    let same_tools = cache.tools.len() == request.tools.len()
        && cache
            .tools
            .iter()
            .zip(&request.tools)
            .all(|(a, b)| a.ptr_eq(b));
    if !same_tools {
        cache.tools_json.clear();
        for tool in &request.tools {
            append_item(&mut cache.tools_json, &P::tool_definition(tool))?;
        }
        cache.tools.clone_from(&request.tools);
    }

    let extra = request.extra_body.as_ref();
    let overridden = |key: &str| extra.is_some_and(|extra| extra.contains_key(key));
    let mut out = Vec::with_capacity(cache.history.len() + cache.tools_json.len() + 512);
    out.push(b'{');
    if !overridden(P::HISTORY_FIELD) {
        write_key(&mut out, P::HISTORY_FIELD)?;
        out.push(b'[');
        let mut items = Vec::new();
        if let Some(leading) = P::leading_item(request) {
            append_item(&mut items, &leading)?;
        }
        out.extend_from_slice(&items);
        if !cache.history.is_empty() {
            if !items.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(&cache.history);
        }
        if let Some(tail) = &cache.tail {
            if out.last() != Some(&b'[') {
                out.push(b',');
            }
            let mut tail = tail.clone();
            P::seal_item(&mut tail);
            write_json(&mut out, &tail)?;
        }
        out.push(b']');
    }
    if !request.tools.is_empty() && !overridden("tools") {
        write_key(&mut out, "tools")?;
        out.push(b'[');
        out.extend_from_slice(&cache.tools_json);
        out.push(b']');
    }
    for (key, value) in P::body_fields(request, stream) {
        if !overridden(&key) {
            write_key(&mut out, &key)?;
            write_json(&mut out, &value)?;
        }
    }
    for (key, value) in extra.into_iter().flatten() {
        write_key(&mut out, key)?;
        write_json(&mut out, value)?;
    }
    out.push(b'}');
    Ok(out)
}

/// Writes `"key":`, preceded by a comma unless it is the object's first key.
fn write_key(out: &mut Vec<u8>, key: &str) -> Result<(), Error> {
    if out.last() != Some(&b'{') {
        out.push(b',');
    }
    write_json(out, key)?;
    out.push(b':');
    Ok(())
}

/// Appends a comma-separated item.
fn append_item(out: &mut Vec<u8>, item: &Value) -> Result<(), Error> {
    if !out.is_empty() {
        out.push(b',');
    }
    write_json(out, item)
}

fn write_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), Error> {
    serde_json::to_writer(out, value)
        .map_err(|error| Error::InvalidRequest(format!("request body does not serialize: {error}")))
}

/// HTTP settings shared by every request of a [`Client`](crate::Client).
#[derive(Debug, Clone)]
pub(crate) struct HttpConfig {
    pub(crate) http: reqwest::Client,
    pub(crate) base_url: String,
    /// Auth and custom headers; auth values are marked sensitive.
    pub(crate) headers: HeaderMap,
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u32,
}

const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
const BASE_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(8);

impl HttpConfig {
    fn url<P: WireApi>(&self) -> String {
        format!("{}{}", self.base_url.trim_end_matches('/'), P::PATH)
    }

    /// Sends one request, retrying connect errors, timeouts, 408, 429 and 5xx with backoff.
    async fn send<P: WireApi>(&self, body: Vec<u8>) -> Result<reqwest::Response, Error> {
        let url = self.url::<P>();
        let body = Bytes::from(body);
        let mut attempt = 0u32;
        loop {
            let request = self
                .http
                .post(&url)
                .headers(self.headers.clone())
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body.clone());
            let (error, retry_after) =
                match tokio::time::timeout(self.timeout, request.send()).await {
                    Err(_) => (
                        Error::Timeout {
                            after: self.timeout,
                        },
                        None,
                    ),
                    Ok(Err(error)) => (transport_error(&url, &error), None),
                    Ok(Ok(response)) if response.status().is_success() => return Ok(response),
                    Ok(Ok(response)) => {
                        let status = response.status().as_u16();
                        let headers = response.headers().clone();
                        let body = tokio::time::timeout(self.timeout, response.bytes())
                            .await
                            .ok()
                            .and_then(Result::ok)
                            .unwrap_or_default();
                        let error = provider_error(P::NAME, status, &headers, &body);
                        let retry = match header_str(&headers, "x-should-retry") {
                            Some("true") => true,
                            Some("false") => false,
                            _ => is_retryable_status(status),
                        };
                        if !retry {
                            return Err(error);
                        }
                        (error, retry_after(&headers))
                    }
                };
            if attempt >= self.max_retries || !error.is_retryable() {
                return Err(error);
            }
            let delay = retry_after
                .filter(|delay| *delay <= MAX_RETRY_AFTER)
                .unwrap_or_else(|| backoff(attempt));
            tracing::debug!(provider = P::NAME, attempt, ?delay, %error, "retrying request");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// The whole response body, within the request timeout.
    async fn read_body(&self, response: reqwest::Response) -> Result<Bytes, Error> {
        let url = response.url().to_string();
        tokio::time::timeout(self.timeout, response.bytes())
            .await
            .map_err(|_| Error::Timeout {
                after: self.timeout,
            })?
            .map_err(|error| transport_error(&url, &error))
    }

    pub(crate) async fn generate<P: WireApi>(
        &self,
        request: &ModelRequest,
        cache: &mut RequestCache,
    ) -> Result<ModelResponse, Error> {
        let body = encode_request::<P>(request, false, cache)?;
        let response = self.send::<P>(body).await?;
        let bytes = self.read_body(response).await?;
        P::parse_response(&bytes)
    }

    pub(crate) async fn stream<P: WireApi>(
        &self,
        request: &ModelRequest,
        cache: &mut RequestCache,
    ) -> Result<ModelStream, Error> {
        let body = encode_request::<P>(request, true, cache)?;
        let response = self.send::<P>(body).await?;
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !is_json {
            return Ok(decode_stream::<P>(response, self.timeout));
        }
        // Some compatible servers ignore `stream: true`; their whole answer is one event.
        let bytes = self.read_body(response).await?;
        let response = P::parse_response(&bytes)?;
        let mut events = Vec::new();
        for part in &response.message.content {
            match part {
                ContentPart::Text { text } => events.push(StreamEvent::TextDelta(text.clone())),
                ContentPart::Reasoning(r) if !r.text.is_empty() => {
                    events.push(StreamEvent::ReasoningDelta(r.text.clone()));
                }
                _ => {}
            }
        }
        events.push(StreamEvent::Finish(response));
        Ok(Box::pin(futures::stream::iter(events.into_iter().map(Ok))))
    }
}

struct StreamState<D> {
    url: String,
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    sse: SseDecoder,
    /// `None` once the stream has ended (after the queue and any error are delivered).
    decoder: Option<D>,
    queue: VecDeque<StreamEvent>,
    error: Option<Error>,
    complete: bool,
    idle_timeout: Duration,
}

impl<D: StreamDecoder> StreamState<D> {
    /// Ends the stream: already decoded events are delivered first, then `error` or the
    /// final response.
    fn end(&mut self, outcome: Result<bool, Error>) {
        let Some(decoder) = self.decoder.take() else {
            return;
        };
        match outcome.and_then(|complete| decoder.finish(complete)) {
            Ok(response) => self.queue.push_back(StreamEvent::Finish(response)),
            Err(error) => self.error = Some(error),
        }
    }
}

fn decode_stream<P: WireApi>(response: reqwest::Response, idle_timeout: Duration) -> ModelStream {
    let state = StreamState {
        url: response.url().to_string(),
        body: Box::pin(response.bytes_stream()),
        sse: SseDecoder::new(),
        decoder: Some(P::Decoder::default()),
        queue: VecDeque::new(),
        error: None,
        complete: false,
        idle_timeout,
    };
    Box::pin(futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.queue.pop_front() {
                return Some((Ok(event), state));
            }
            if let Some(error) = state.error.take() {
                return Some((Err(error), state));
            }
            let decoder = state.decoder.as_mut()?;
            if state.complete {
                state.end(Ok(true));
                continue;
            }
            match tokio::time::timeout(state.idle_timeout, state.body.next()).await {
                Err(_) => {
                    let after = state.idle_timeout;
                    state.end(Err(Error::Timeout { after }));
                }
                Ok(Some(Err(error))) => {
                    let error = transport_error(&state.url, &error);
                    state.end(Err(error));
                }
                Ok(Some(Ok(bytes))) => {
                    state.sse.feed(&bytes);
                    match drain_events(&mut state.sse, decoder, &mut state.queue, false) {
                        Ok(complete) => state.complete = complete,
                        Err(error) => state.end(Err(error)),
                    }
                }
                Ok(None) => {
                    let outcome = drain_events(&mut state.sse, decoder, &mut state.queue, true);
                    state.end(outcome);
                }
            }
        }
    }))
}

fn drain_events<D: StreamDecoder>(
    sse: &mut SseDecoder,
    decoder: &mut D,
    queue: &mut VecDeque<StreamEvent>,
    at_eof: bool,
) -> Result<bool, Error> {
    while let Some(event) = sse.next_event() {
        if decoder.on_event(event, queue)? {
            return Ok(true);
        }
    }
    if at_eof && let Some(event) = sse.finish() {
        return decoder.on_event(event, queue);
    }
    Ok(false)
}

fn transport_error(url: &str, error: &reqwest::Error) -> Error {
    Error::Transport {
        url: url.to_owned(),
        message: reqwest_message(error),
    }
}

/// What a reqwest error means, without the URL its own text repeats: the cause chain says
/// what really failed.
pub(crate) fn reqwest_message(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "timed out".to_owned();
    }
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    if causes.is_empty() {
        error.to_string()
    } else {
        causes.join(": ")
    }
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// `retry-after-ms`, then `retry-after` as seconds or an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) =
        header_str(headers, "retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
    {
        return (ms >= 0.0).then(|| Duration::from_secs_f64(ms / 1000.0));
    }
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds >= 0.0 && seconds.is_finite()).then(|| Duration::from_secs_f64(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

/// Exponential backoff with jitter: 0.5 s, 1 s, 2 s... capped at 8 s, each scaled by 0.75-1.
fn backoff(attempt: u32) -> Duration {
    let exp = BASE_BACKOFF.saturating_mul(1u32 << attempt.min(10));
    exp.min(MAX_BACKOFF).mul_f64(0.75 + fastrand::f64() * 0.25)
}

/// Builds [`Error::Provider`] from an error response (OpenAI and Anthropic envelopes alike).
fn provider_error(provider: &'static str, status: u16, headers: &HeaderMap, body: &[u8]) -> Error {
    let text = String::from_utf8_lossy(body).into_owned();
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
        ["code", "type"]
            .into_iter()
            .find_map(|key| e.get(key).and_then(Value::as_str).map(str::to_owned))
    });
    let request_id = header_str(headers, "x-request-id")
        .or_else(|| header_str(headers, "request-id"))
        .map(str::to_owned);
    Error::Provider {
        provider,
        status,
        message,
        code,
        body: text,
        request_id,
    }
}

pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

pub(crate) fn decode_error(provider: &'static str, what: &str, body: &[u8]) -> Error {
    Error::Decode {
        provider,
        message: what.to_owned(),
        body: truncate(&String::from_utf8_lossy(body), 4096),
    }
}

/// Parses a JSON body, keeping the raw text on failure.
pub(crate) fn parse_json<'a, T: Deserialize<'a>>(
    provider: &'static str,
    body: &'a [u8],
) -> Result<T, Error> {
    serde_json::from_slice(body)
        .map_err(|error| decode_error(provider, &format!("malformed JSON: {error}"), body))
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

/// A piece of a tool result as the provider should see it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OutputPart<'a> {
    Text(Cow<'a, str>),
    Image { mime_type: &'a str, data: &'a str },
}

/// Splits a tool output into text and images.
///
/// A string is text; an array of `{"type":"text"}` / `{"type":"image"}` items (the MCP mapping)
/// becomes those parts, other items as JSON text; anything else is compact JSON text.
pub(crate) fn tool_output_parts(output: &Value) -> Vec<OutputPart<'_>> {
    match output {
        Value::String(text) => vec![OutputPart::Text(Cow::Borrowed(text))],
        Value::Array(items)
            if items
                .iter()
                .any(|item| item.get("type").and_then(Value::as_str).is_some()) =>
        {
            items.iter().map(output_item).collect()
        }
        other => vec![OutputPart::Text(Cow::Owned(other.to_string()))],
    }
}

fn output_item(item: &Value) -> OutputPart<'_> {
    let field = |name: &str| item.get(name).and_then(Value::as_str);
    match field("type") {
        Some("text") => match field("text") {
            Some(text) => OutputPart::Text(Cow::Borrowed(text)),
            None => OutputPart::Text(Cow::Owned(item.to_string())),
        },
        Some("image") => match (
            field("mime_type").or_else(|| field("mimeType")),
            field("data"),
        ) {
            (Some(mime_type), Some(data)) => OutputPart::Image { mime_type, data },
            _ => OutputPart::Text(Cow::Owned(item.to_string())),
        },
        _ => OutputPart::Text(Cow::Owned(item.to_string())),
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

/// The instructions plus any system messages of the conversation, in order.
pub(crate) fn system_text(request: &ModelRequest) -> Option<String> {
    let mut parts: Vec<String> = request.instructions.iter().cloned().collect();
    parts.extend(
        request
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(Message::text),
    );
    (!parts.is_empty()).then(|| parts.join("\n\n"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ToolCall, ToolResult};

    fn conversation() -> Vec<Message> {
        let call = |id: &str| {
            ContentPart::ToolCall(ToolCall {
                id: id.into(),
                name: "t".into(),
                arguments: serde_json::json!({"x": 1}),
            })
        };
        let result = |id: &str| {
            ContentPart::ToolResult(ToolResult {
                call_id: id.into(),
                name: "t".into(),
                output: serde_json::json!([{"type": "text", "text": "r"}, {"type": "image", "mime_type": "image/png", "data": "AA=="}]),
                is_error: false,
            })
        };
        vec![
            Message::user("hi"),
            Message::new(
                Role::Assistant,
                vec![ContentPart::text("let me see"), call("a")],
            ),
            Message::new(Role::Tool, vec![result("a")]),
            // A user message right after tool results: Anthropic merges it into the same turn.
            Message::user("also this"),
            Message::new(Role::Assistant, vec![call("b")]),
            Message::new(Role::Tool, vec![result("b")]),
            Message::assistant("done"),
            Message::user("thanks"),
        ]
    }

    /// Encoding step by step with the cache gives exactly the body a fresh encode gives.
    fn incremental_equals_fresh<P: WireApi>() {
        let all = conversation();
        let tool = crate::tool::tool("t").execute_raw(|_| async { Ok(Value::Null) });
        let mut cache = RequestCache::default();
        for n in 1..=all.len() {
            let request = ModelRequest::new("m", all[..n].to_vec())
                .instructions("be brief")
                .tools(vec![tool.clone()]);
            let incremental = encode_request::<P>(&request, false, &mut cache).unwrap();
            let fresh = encode_request::<P>(&request, false, &mut RequestCache::default()).unwrap();
            assert_eq!(
                String::from_utf8(incremental).unwrap(),
                String::from_utf8(fresh).unwrap(),
                "{} after {n} messages",
                P::NAME
            );
        }
    }

    #[test]
    fn cached_encoding_matches_fresh_encoding() {
        incremental_equals_fresh::<openai_chat::OpenAiChat>();
        incremental_equals_fresh::<openai_responses::OpenAiResponses>();
        incremental_equals_fresh::<anthropic::Anthropic>();
    }

    #[test]
    fn extra_body_overrides_every_field() {
        let mut request = ModelRequest::new("m", vec![Message::user("hi")]);
        request.extra_body = Some(
            serde_json::from_value(
                serde_json::json!({"model": "other", "messages": [], "seed": 1}),
            )
            .unwrap(),
        );
        let body = encode_request::<openai_chat::OpenAiChat>(
            &request,
            false,
            &mut RequestCache::default(),
        )
        .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"model": "other", "messages": [], "seed": 1})
        );
    }
}
