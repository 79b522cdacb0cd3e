//! Sending a request and reading the answer: whole, or as a stream of SSE events decoded by
//! the wire API's [`StreamDecoder`].

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::header::CONTENT_TYPE;

use super::encode::{RequestCache, encode_request};
use super::{StreamDecoder, WireApi, output_call_as_text, read_error};
use crate::error::Error;
use crate::http::sse::{SseDecoder, SseEvent};
use crate::http::{HttpConfig, HttpResponse};
use crate::message::ContentPart;
use crate::model::{
    FinishReason, ModelRequest, ModelResponse, ModelStream, StreamEvent, ToolChoice,
};
use crate::structured::OutputSchema;

/// One model call, waiting for the whole answer.
pub(crate) async fn generate<P: WireApi>(
    http: &HttpConfig,
    request: &ModelRequest,
    cache: &mut RequestCache,
) -> Result<ModelResponse, Error> {
    let body = encode_request::<P>(request, false, cache)?;
    let url = http.endpoint(
        &http
            .route
            .path(&P::path(&request.model, false), &request.model),
    )?;
    let response = http
        .post_json(&url, body, read_error::<P>)
        .await
        .map_err(context_overflow)?;
    let bytes = http.read_body(response).await?;
    let mut response = P::parse_response(&bytes)?;
    if let Some(schema) = output_tool_schema::<P>(request) {
        output_call_as_text(schema, &mut response);
    }
    AnswerChecks::new(request).apply(P::NAME, &mut response);
    Ok(response)
}

/// What compatible servers get wrong without saying so, checked on every answer:
/// - a reply that used exactly `max_output_tokens` but claims it ended normally was cut off
///   (llama.cpp's Responses API still says `completed`), so it finishes with
///   [`FinishReason::Length`];
/// - a named or required `tool_choice` the answer ignored (llama.cpp treats a named one as
///   `auto`) is logged as a warning naming it.
struct AnswerChecks {
    model: String,
    max_output_tokens: Option<u32>,
    /// `None` when the choice is not checked (no tools, or a structured answer's tool).
    tool_choice: Option<ToolChoice>,
}

impl AnswerChecks {
    fn new(request: &ModelRequest) -> Self {
        let checked = !request.tools.is_empty() && request.output_schema.is_none();
        Self {
            model: request.model.clone(),
            max_output_tokens: request.max_output_tokens,
            tool_choice: checked.then(|| request.tool_choice.clone()),
        }
    }

    fn apply(&self, provider: &'static str, response: &mut ModelResponse) {
        let at_limit = self
            .max_output_tokens
            .is_some_and(|max| max > 0 && u64::from(max) == response.usage.output_tokens);
        if at_limit
            && matches!(
                response.finish_reason,
                FinishReason::Stop | FinishReason::ToolCalls
            )
        {
            tracing::debug!(
                provider,
                output_tokens = response.usage.output_tokens,
                "the answer used all of max_output_tokens; taking it as cut off"
            );
            response.finish_reason = FinishReason::Length;
        }
        let mut calls = response.message.tool_calls();
        match &self.tool_choice {
            Some(ToolChoice::Tool(name)) if !calls.any(|call| &call.name == name) => {
                tracing::warn!(
                    provider,
                    model = %self.model,
                    tool = %name,
                    "tool_choice named `{name}` but the answer did not call it: the server may \
                     not support a named tool_choice (llama.cpp treats it as `auto`)"
                );
            }
            Some(ToolChoice::Required) if calls.next().is_none() => tracing::warn!(
                provider,
                model = %self.model,
                "tool_choice required a tool call but the answer made none: the server may not \
                 support `required`"
            ),
            _ => {}
        }
    }
}

/// A provider's refusal of a request too long for the model's context window, as
/// [`Error::ContextWindowExceeded`] with the numbers it gave:
/// - llama.cpp: HTTP 400, `type: "exceed_context_size_error"`, `n_prompt_tokens`, `n_ctx`;
/// - OpenAI: `code: "context_length_exceeded"`, "This model's maximum context length is N
///   tokens. However, your messages resulted in M tokens..." (the Responses API's message
///   has no numbers);
/// - Anthropic: `invalid_request_error`, "prompt is too long: M tokens > N maximum".
///
/// Every other error is returned as it was.
pub(crate) fn context_overflow(error: Error) -> Error {
    let Error::Provider {
        provider,
        status,
        ref message,
        ref code,
        ref body,
        ..
    } = error
    else {
        return error;
    };
    if !matches!(status, 400 | 413) {
        return error;
    }
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let detail = parsed
        .as_ref()
        .map(|value| value.get("error").unwrap_or(value));
    let number = |key: &str| {
        detail
            .and_then(|d| d.get(key))
            .and_then(serde_json::Value::as_u64)
    };
    let (request_tokens, limit) = match code.as_deref() {
        Some("exceed_context_size_error") => (number("n_prompt_tokens"), number("n_ctx")),
        Some("context_length_exceeded") => openai_overflow_numbers(message),
        _ if message.starts_with("prompt is too long") => anthropic_overflow_numbers(message),
        _ => return error,
    };
    Error::ContextWindowExceeded {
        request_tokens,
        limit,
        provider: Some(provider),
    }
}

/// "This model's maximum context length is 128000 tokens. However, your messages resulted in
/// 130532 tokens..." as `(Some(130532), Some(128000))`.
fn openai_overflow_numbers(message: &str) -> (Option<u64>, Option<u64>) {
    let limit = number_after(message, "maximum context length is ");
    let request = number_after(message, "resulted in ");
    (request, limit)
}

/// "prompt is too long: 208950 tokens > 200000 maximum" as `(Some(208950), Some(200000))`.
fn anthropic_overflow_numbers(message: &str) -> (Option<u64>, Option<u64>) {
    (
        number_after(message, "prompt is too long: "),
        number_after(message, "tokens > "),
    )
}

/// The whole number right after `prefix` in `text`.
fn number_after(text: &str, prefix: &str) -> Option<u64> {
    let (_, rest) = text.split_once(prefix)?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The schema of the structured-answer tool, when `request` uses one on this wire API.
fn output_tool_schema<P: WireApi>(request: &ModelRequest) -> Option<&OutputSchema> {
    request.output_schema.as_ref().filter(|_| P::OUTPUT_AS_TOOL)
}

/// Applies [`output_call_as_text`] and [`AnswerChecks`] to the stream's final response.
fn with_output_text<P: WireApi>(request: &ModelRequest, stream: ModelStream) -> ModelStream {
    let schema = output_tool_schema::<P>(request).cloned();
    let checks = AnswerChecks::new(request);
    Box::pin(stream.map(move |event| match event {
        Ok(StreamEvent::Finish(mut response)) => {
            if let Some(schema) = &schema {
                output_call_as_text(schema, &mut response);
            }
            checks.apply(P::NAME, &mut response);
            Ok(StreamEvent::Finish(response))
        }
        other => other,
    }))
}

/// One model call, streamed.
pub(crate) async fn stream<P: WireApi>(
    http: &HttpConfig,
    request: &ModelRequest,
    cache: &mut RequestCache,
) -> Result<ModelStream, Error> {
    let body = encode_request::<P>(request, true, cache)?;
    let url = http.endpoint(
        &http
            .route
            .path(&P::path(&request.model, true), &request.model),
    )?;
    let response = http
        .post_json(&url, body, read_error::<P>)
        .await
        .map_err(context_overflow)?;
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json {
        return Ok(with_output_text::<P>(
            request,
            decode_stream::<P>(response, http.timeout),
        ));
    }
    // Some compatible servers ignore `stream: true`; their whole answer is one event.
    let bytes = http.read_body(response).await?;
    let mut response = P::parse_response(&bytes)?;
    if let Some(schema) = output_tool_schema::<P>(request) {
        output_call_as_text(schema, &mut response);
    }
    AnswerChecks::new(request).apply(P::NAME, &mut response);
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

/// How a streamed body is cut into events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// Server-sent events.
    Sse,
    /// AWS's `application/vnd.amazon.eventstream` binary frames; each message becomes an
    /// [`SseEvent`] named by its `:event-type` (or `:exception-type`) header with its payload
    /// as data.
    #[cfg(feature = "bedrock")]
    EventStream,
}

/// A [`Framing`]'s decoder.
enum Framer {
    Sse(SseDecoder),
    #[cfg(feature = "bedrock")]
    EventStream(super::bedrock::EventStreamFramer),
}

impl Framer {
    fn new(framing: Framing) -> Self {
        match framing {
            Framing::Sse => Self::Sse(SseDecoder::new()),
            #[cfg(feature = "bedrock")]
            Framing::EventStream => Self::EventStream(super::bedrock::EventStreamFramer::default()),
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        match self {
            Self::Sse(sse) => sse.feed(bytes),
            #[cfg(feature = "bedrock")]
            Self::EventStream(framer) => framer.feed(bytes),
        }
    }

    /// The next whole event; an event over the size limit is an error of `provider`.
    fn next_event(&mut self, provider: &'static str) -> Result<Option<SseEvent>, Error> {
        match self {
            Self::Sse(sse) => sse
                .next_event()
                .map_err(|error| too_large(provider, error.limit)),
            #[cfg(feature = "bedrock")]
            Self::EventStream(framer) => framer.next_event(),
        }
    }

    /// The event the body's last bytes make, at its end.
    fn finish(&mut self, provider: &'static str) -> Result<Option<SseEvent>, Error> {
        match self {
            Self::Sse(sse) => sse
                .finish()
                .map_err(|error| too_large(provider, error.limit)),
            #[cfg(feature = "bedrock")]
            Self::EventStream(framer) => framer.finish(),
        }
    }
}

fn too_large(provider: &'static str, limit: usize) -> Error {
    super::decode_error(
        provider,
        &format!("a stream event is larger than {limit} bytes"),
        b"",
    )
}

struct StreamState<D> {
    body: Pin<Box<dyn Stream<Item = Result<Bytes, Error>> + Send>>,
    sse: Framer,
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

fn decode_stream<P: WireApi>(response: HttpResponse, idle_timeout: Duration) -> ModelStream {
    let state = StreamState {
        body: response.into_stream(),
        sse: Framer::new(P::FRAMING),
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
                Ok(Some(Err(error))) => state.end(Err(error)),
                Ok(Some(Ok(bytes))) => {
                    state.sse.feed(&bytes);
                    match drain_events::<P>(&mut state.sse, decoder, &mut state.queue, false) {
                        Ok(complete) => state.complete = complete,
                        Err(error) => state.end(Err(error)),
                    }
                }
                Ok(None) => {
                    let outcome =
                        drain_events::<P>(&mut state.sse, decoder, &mut state.queue, true);
                    state.end(outcome);
                }
            }
        }
    }))
}

fn drain_events<P: WireApi>(
    sse: &mut Framer,
    decoder: &mut P::Decoder,
    queue: &mut VecDeque<StreamEvent>,
    at_eof: bool,
) -> Result<bool, Error> {
    while let Some(event) = sse.next_event(P::NAME)? {
        if decoder.on_event(event, queue)? {
            return Ok(true);
        }
    }
    if at_eof && let Some(event) = sse.finish(P::NAME)? {
        return decoder.on_event(event, queue);
    }
    Ok(false)
}
