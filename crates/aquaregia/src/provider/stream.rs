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
use crate::http::sse::SseDecoder;
use crate::http::{HttpConfig, transport_error};
use crate::message::ContentPart;
use crate::model::{ModelRequest, ModelResponse, ModelStream, StreamEvent};
use crate::structured::OutputSchema;

/// One model call, waiting for the whole answer.
pub(crate) async fn generate<P: WireApi>(
    http: &HttpConfig,
    request: &ModelRequest,
    cache: &mut RequestCache,
) -> Result<ModelResponse, Error> {
    let body = encode_request::<P>(request, false, cache)?;
    let url = http.url(&P::path(&request.model, false));
    let response = http.post_json(&url, body, read_error::<P>).await?;
    let bytes = http.read_body(response).await?;
    let mut response = P::parse_response(&bytes)?;
    if let Some(schema) = output_tool_schema::<P>(request) {
        output_call_as_text(schema, &mut response);
    }
    Ok(response)
}

/// The schema of the structured-answer tool, when `request` uses one on this wire API.
fn output_tool_schema<P: WireApi>(request: &ModelRequest) -> Option<&OutputSchema> {
    request.output_schema.as_ref().filter(|_| P::OUTPUT_AS_TOOL)
}

/// Applies [`output_call_as_text`] to the stream's final response.
fn with_output_text<P: WireApi>(request: &ModelRequest, stream: ModelStream) -> ModelStream {
    let Some(schema) = output_tool_schema::<P>(request).cloned() else {
        return stream;
    };
    Box::pin(stream.map(move |event| match event {
        Ok(StreamEvent::Finish(mut response)) => {
            output_call_as_text(&schema, &mut response);
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
    let url = http.url(&P::path(&request.model, true));
    let response = http.post_json(&url, body, read_error::<P>).await?;
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
                    let error = transport_error(&state.url, error);
                    state.end(Err(error));
                }
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
    sse: &mut SseDecoder,
    decoder: &mut P::Decoder,
    queue: &mut VecDeque<StreamEvent>,
    at_eof: bool,
) -> Result<bool, Error> {
    let too_large = |limit: usize| {
        super::decode_error(
            P::NAME,
            &format!("a stream event is larger than {limit} bytes"),
            b"",
        )
    };
    loop {
        match sse.next_event() {
            Ok(Some(event)) => {
                if decoder.on_event(event, queue)? {
                    return Ok(true);
                }
            }
            Ok(None) => break,
            Err(error) => return Err(too_large(error.limit)),
        }
    }
    if at_eof {
        match sse.finish() {
            Ok(Some(event)) => return decoder.on_event(event, queue),
            Ok(None) => {}
            Err(error) => return Err(too_large(error.limit)),
        }
    }
    Ok(false)
}
