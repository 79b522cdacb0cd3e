//! The Streamable HTTP POST repair: rmcp's Streamable HTTP client transport over a
//! [`StreamableHttpClient`] of ours that keeps per-request failures per request.
//!
//! Remove when rmcp's `StreamableHttpClient` (its reqwest implementation) fails only the
//! request an HTTP error status, an oversized JSON body or SSE event, or an id-less JSON-RPC
//! error belongs to (today they end the session as transport errors), answers a legacy
//! server's 4xx to `server/discover` as method-not-found, and keeps `tools/list` results
//! whole (see [`super::execution`]).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue, WWW_AUTHENTICATE};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
    ServerResult,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError, StreamableHttpClient,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use serde_json::Value;
use sse_stream::{Sse, SseStream};

use super::execution::{keeping_execution, keeping_tasks_capability};
use super::fault::LocalFault;
use crate::transport::http::{Reconnects, SessionIdSlot, parse_challenge};

/// The Streamable HTTP client: rmcp's `POST` handling, with the HTTP status kept where
/// rmcp would turn it into a session-ending transport error. For a request:
/// - an error status fails only that request, with the status and the start of the body
///   ([`McpError::Http`](crate::McpError::Http)), or with the server's JSON-RPC error when the body is one;
/// - a response over the size limit fails only that request, with an error naming the limit;
/// - a JSON-RPC error without an id is given the request's id, so the call fails at once;
///   on a session, from a server that answers an unknown session with 400 rather than 404,
///   it counts as an expired session, so the session is re-established and the request
///   retried once.
///
/// `GET` streams and `DELETE` are rmcp's own.
///
/// It also counts the sessions it re-initialises ([`Reconnects`]) and keeps the session id
/// last sent or received in a [`SessionIdSlot`] for spans.
#[derive(Clone)]
pub(crate) struct RepairingClient {
    http: reqwest::Client,
    reconnects: Arc<Reconnects>,
    session_id: SessionIdSlot,
}

impl RepairingClient {
    pub(crate) fn new(http: reqwest::Client, session_id: SessionIdSlot) -> Self {
        Self {
            http,
            reconnects: Arc::default(),
            session_id,
        }
    }

    /// The sessions this client re-established.
    pub(crate) fn reconnects(&self) -> Arc<Reconnects> {
        self.reconnects.clone()
    }
}

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

/// How much of an error body is kept.
const ERROR_BODY_BYTES: usize = 4096;
const SESSION_HEADER: &str = "mcp-session-id";
const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";

impl StreamableHttpClient for RepairingClient {
    type Error = reqwest::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = PostResult> + Send + '_ {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> PostResult {
        let initialize = matches!(&message, JsonRpcMessage::Request(request)
            if matches!(request.request, ClientRequest::InitializeRequest(_)));
        if initialize {
            self.reconnects.initializing(&uri);
        }
        let (id, discover, list_tools) = match &message {
            JsonRpcMessage::Request(request) => (
                Some(request.id.clone()),
                matches!(request.request, ClientRequest::DiscoverRequest(_)),
                matches!(request.request, ClientRequest::ListToolsRequest(_)),
            ),
            _ => (None, false, false),
        };
        let mut request = self
            .http
            .post(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"))
            .json(&message);
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some(session) = &session_id {
            request = request.header(SESSION_HEADER, session.as_ref());
            self.session_id.set(session);
        }
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        let status = response.status();
        let challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        match (status, challenge) {
            (StatusCode::UNAUTHORIZED, Some(header)) => {
                return Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(
                    header,
                )));
            }
            (StatusCode::FORBIDDEN, Some(header)) => {
                let scope = parse_challenge(&header).scope;
                return Err(StreamableHttpError::InsufficientScope(
                    InsufficientScopeError::new(header, scope),
                ));
            }
            _ => {}
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        if let Some(session) = &session {
            self.session_id.set(session);
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let media_type = |expected: &str| {
            content_type.as_deref().is_some_and(|value| {
                value
                    .split(';')
                    .next()
                    .is_some_and(|media| media.trim().eq_ignore_ascii_case(expected))
            })
        };
        let Some(id) = id else {
            // Notifications and responses: nothing waits for an answer.
            if status.is_success() {
                return Ok(StreamableHttpPostResponse::Accepted);
            }
            return Err(HttpStatusError::new(status.as_u16(), None).into());
        };
        if !status.is_success() {
            let body = read_body(response, ERROR_BODY_BYTES).await;
            let text = String::from_utf8_lossy(&body.bytes).into_owned();
            let mut message = match serde_json::from_slice::<ServerJsonRpcMessage>(&body.bytes) {
                Ok(JsonRpcMessage::Error(error)) => Some(error),
                _ => None,
            };
            if let Some(error) = &mut message
                && error.id.is_none()
            {
                if session_id.is_some() && status == StatusCode::BAD_REQUEST {
                    return Err(StreamableHttpError::SessionExpired);
                }
                error.id = Some(id.clone());
            }
            let answer = match message {
                Some(error) => JsonRpcMessage::Error(error),
                // A legacy server rejecting `server/discover`: a plain JSON-RPC error, so
                // the handshake falls back to `initialize`.
                None if discover && status.is_client_error() && !is_auth(status) => {
                    JsonRpcMessage::error(
                        rmcp::model::ErrorData::method_not_found::<
                            rmcp::model::DiscoverRequestMethod,
                        >(),
                        Some(id),
                    )
                }
                None => LocalFault::Http {
                    url: uri.to_string(),
                    status: status.as_u16(),
                    body: text.trim().to_owned(),
                }
                .into_response(id),
            };
            return Ok(StreamableHttpPostResponse::Json(answer, session));
        }
        if initialize {
            self.reconnects.established();
        }
        if media_type(EVENT_STREAM) {
            let events = SseStream::from_bytes_stream(EventSizeLimit::new(
                response.bytes_stream().boxed(),
                limits.max_sse_event_size,
            ))
            .boxed();
            let answer_id = id.clone();
            let mut events = answer_oversized_events(events, id, limits.max_sse_event_size);
            if list_tools {
                events = keep_raw(events, &answer_id, |result| Some(keeping_execution(result)));
            } else if initialize {
                events = keep_raw(events, &answer_id, keeping_tasks_capability);
            }
            return Ok(StreamableHttpPostResponse::Sse(events, session));
        }
        if !media_type(JSON) {
            return Err(StreamableHttpError::UnexpectedContentType(content_type));
        }
        let max = limits.max_json_response_size;
        let body = read_body(response, max).await;
        if body.truncated {
            return Ok(StreamableHttpPostResponse::Json(
                too_large(id, max),
                session,
            ));
        }
        if let Some(error) = body.error {
            return Err(StreamableHttpError::Client(error));
        }
        let answer = match serde_json::from_slice::<ServerJsonRpcMessage>(&body.bytes) {
            Ok(JsonRpcMessage::Error(mut error)) if error.id.is_none() => {
                error.id = Some(id);
                JsonRpcMessage::Error(error)
            }
            // `initialize` answers keep what rmcp's types drop (`capabilities.tasks`), as over
            // stdio.
            Ok(JsonRpcMessage::Response(mut response)) if initialize => {
                if let Ok(Value::Object(mut raw)) = serde_json::from_slice::<Value>(&body.bytes)
                    && let Some(result) = raw.remove("result")
                    && let Some(kept) = keeping_tasks_capability(result)
                {
                    response.result = kept;
                }
                JsonRpcMessage::Response(response)
            }
            // `tools/list` answers keep what rmcp's types drop (`execution`), as over stdio.
            Ok(JsonRpcMessage::Response(mut response)) if list_tools => {
                if let Ok(Value::Object(mut raw)) = serde_json::from_slice::<Value>(&body.bytes)
                    && let Some(result) = raw.remove("result")
                {
                    response.result = keeping_execution(result);
                }
                JsonRpcMessage::Response(response)
            }
            Ok(message) => message,
            Err(error) => LocalFault::InvalidResponse {
                reason: format!("the response is not a JSON-RPC message: {error}"),
            }
            .into_response(id),
        };
        Ok(StreamableHttpPostResponse::Json(answer, session))
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<reqwest::Error>>> + Send + '_ {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<
        Output = Result<
            BoxStream<'static, Result<Sse, SseError>>,
            StreamableHttpError<reqwest::Error>,
        >,
    > + Send
    + '_ {
        self.http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<
        Output = Result<
            BoxStream<'static, Result<Sse, SseError>>,
            StreamableHttpError<reqwest::Error>,
        >,
    > + Send
    + '_ {
        self.http.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}

fn is_auth(status: StatusCode) -> bool {
    matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
}

/// A response body read up to a limit.
struct Body {
    bytes: Vec<u8>,
    /// The body was longer than the limit.
    truncated: bool,
    error: Option<reqwest::Error>,
}

async fn read_body(response: reqwest::Response, limit: usize) -> Body {
    // Sized once when the length is announced (and within the limit).
    let announced = response
        .content_length()
        .and_then(|length| usize::try_from(length).ok())
        .map_or(0, |length| length.min(limit));
    let mut body = Body {
        bytes: Vec::with_capacity(announced),
        truncated: false,
        error: None,
    };
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) => {
                let room = limit - body.bytes.len();
                if chunk.len() > room {
                    body.bytes.extend_from_slice(&chunk[..room]);
                    body.truncated = true;
                    break;
                }
                body.bytes.extend_from_slice(&chunk);
            }
            Err(error) => {
                body.error = Some(error);
                break;
            }
        }
    }
    body
}

/// The JSON-RPC error that replaces a response over the size limit.
fn too_large(id: RequestId, max_size: usize) -> ServerJsonRpcMessage {
    LocalFault::InvalidResponse {
        reason: format!(
            "the response was larger than {max_size} bytes \
             (raise the limit with HttpOptions::max_response_size)"
        ),
    }
    .into_response(id)
}

/// Why [`EventSizeLimit`] failed.
#[derive(Debug, thiserror::Error)]
enum EventStreamError {
    #[error(transparent)]
    Read(reqwest::Error),
    #[error("an SSE event exceeded {0} bytes")]
    TooLarge(usize),
}

/// A byte stream that fails once more than `max` bytes arrive without an event boundary (a
/// blank line), so one event never grows without bound.
struct EventSizeLimit<S> {
    inner: S,
    max: usize,
    /// Bytes since the last event boundary.
    pending: usize,
    /// Whether the current line has anything but `\r`.
    line_content: bool,
    failed: bool,
}

impl<S> EventSizeLimit<S> {
    fn new(inner: S, max: usize) -> Self {
        Self {
            inner,
            max,
            pending: 0,
            line_content: false,
            failed: false,
        }
    }
}

impl<S> Stream for EventSizeLimit<S>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Unpin,
{
    type Item = Result<Bytes, EventStreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        let chunk = match self.inner.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => chunk,
            Poll::Ready(Some(Err(error))) => {
                return Poll::Ready(Some(Err(EventStreamError::Read(error))));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        let mut start = 0;
        let mut too_large = false;
        for newline in memchr::memchr_iter(b'\n', &chunk) {
            let line = &chunk[start..newline];
            let content = self.line_content || line.iter().any(|&b| b != b'\r');
            self.pending += newline + 1 - start;
            too_large |= self.pending > self.max;
            if !content {
                self.pending = 0;
            }
            self.line_content = false;
            start = newline + 1;
        }
        let tail = &chunk[start..];
        self.pending += tail.len();
        self.line_content |= tail.iter().any(|&b| b != b'\r');
        if too_large || self.pending > self.max {
            self.failed = true;
            return Poll::Ready(Some(Err(EventStreamError::TooLarge(self.max))));
        }
        Poll::Ready(Some(Ok(chunk)))
    }
}

/// An SSE response stream in which an event over the size limit becomes an error response
/// to the request, and ends the stream (rmcp would otherwise end the session).
fn answer_oversized_events(
    stream: BoxStream<'static, Result<Sse, SseError>>,
    id: RequestId,
    max_size: usize,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let mut id = Some(id);
    stream
        .map(move |item| match item {
            Err(SseError::Body(error))
                if matches!(
                    error.downcast_ref::<EventStreamError>(),
                    Some(EventStreamError::TooLarge(_))
                ) =>
            {
                let id = id.take()?;
                Some(Ok(Sse {
                    event: Some("message".to_owned()),
                    data: serde_json::to_string(&too_large(id, max_size)).ok(),
                    ..Sse::default()
                }))
            }
            other => Some(other),
        })
        .take_while(|item| std::future::ready(item.is_some()))
        .filter_map(std::future::ready)
        .boxed()
}

/// An event stream whose answer to `id` keeps what rmcp's types drop, as JSON answers and
/// stdio lines do: `keep` makes the raw result into the one rmcp gets (`None`: as it came);
/// see [`keeping_execution`] and [`keeping_tasks_capability`].
fn keep_raw(
    stream: BoxStream<'static, Result<Sse, SseError>>,
    id: &RequestId,
    keep: fn(Value) -> Option<ServerResult>,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let id = serde_json::to_value(id).unwrap_or_default();
    stream
        .map(move |item| {
            let mut event = item?;
            let raw = event
                .data
                .as_deref()
                .and_then(|data| serde_json::from_str::<Value>(data).ok());
            if let Some(Value::Object(mut message)) = raw
                && message.get("id") == Some(&id)
                && let Some(result) = message.get("result").cloned()
                && let Some(kept) = keep(result)
                && let Ok(kept) = serde_json::to_value(kept)
            {
                message.insert("result".to_owned(), kept);
                event.data = serde_json::to_string(&message).ok();
            }
            Ok(event)
        })
        .boxed()
}
