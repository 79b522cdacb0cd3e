//! The legacy MCP "HTTP with SSE" client transport (protocol revision 2024-11-05).
//!
//! The client GETs an event stream. The server's first event, `endpoint`, carries the URL
//! (usually relative) to POST client messages to; every later `message` event carries one
//! JSON-RPC message from the server. rmcp dropped this transport, but many deployed servers
//! still speak only it.
//!
//! A background task reads the event stream and hands the decoded messages to
//! [`Transport::receive`] through a bounded channel; each [`Transport::send`] is one POST.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::McpError;
use crate::transport::http::parse_challenge;
use crate::transport::http_options::HttpOptions;
use aquaregia::http::reqwest_message;
use aquaregia::http::sse::{SseDecoder, SseEvent};

/// Server messages decoded but not yet received; the reader waits when it is full.
const CHANNEL_CAPACITY: usize = 64;
/// How much of an error response body goes into an error message.
const ERROR_BODY_PREFIX: usize = 512;
/// How much of a successful POST's body is read (and dropped) so the connection can be reused.
const DRAIN_LIMIT: usize = 64 << 10;

/// Gives the current access token (refreshed when it is about to expire), if there is one,
/// or a new one after the server refused it.
pub(crate) type BearerSource =
    Arc<dyn Fn(Renew) -> BoxFuture<'static, Option<String>> + Send + Sync>;

/// What a [`BearerSource`] is asked for.
pub(crate) enum Renew {
    /// The current token.
    No,
    /// A refreshed one: the server rejected the current one.
    Refresh,
    /// One from a new authorization answering the server's challenge (`WWW-Authenticate`):
    /// the token could not be refreshed, or has too little scope.
    Authorize(
        // Only an OAuth source reads it, and only `oauth` builds one.
        #[cfg_attr(not(feature = "oauth"), allow(dead_code))] String,
    ),
}

/// A client transport for servers that speak the legacy HTTP+SSE transport.
pub(crate) struct SseTransport {
    client: reqwest::Client,
    /// The options' headers (values marked sensitive), sent with every POST.
    headers: HeaderMap,
    /// OAuth: the token sent with the GET and every POST.
    bearer: Option<BearerSource>,
    /// Where to POST messages, from the `endpoint` event.
    endpoint: Url,
    messages: mpsc::Receiver<ServerJsonRpcMessage>,
    /// Reads the event stream into `messages`.
    reader: JoinHandle<()>,
}

impl fmt::Debug for SseTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseTransport")
            .field("endpoint", &self.endpoint.as_str())
            .finish_non_exhaustive()
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl SseTransport {
    /// GETs `url` as an event stream, waits for the `endpoint` event and starts reading server
    /// messages in the background.
    ///
    /// Does not time out by itself: the caller bounds it with its connect timeout.
    pub(crate) async fn open(
        url: &str,
        options: &HttpOptions,
        bearer: Option<BearerSource>,
    ) -> Result<SseTransport, McpError> {
        let connect_error = |what: String| McpError::connect(url, what);
        let base =
            Url::parse(url).map_err(|error| connect_error(format!("invalid URL: {error}")))?;
        let headers = options.header_map()?;
        let client = options.client();

        let mut get_headers = headers.clone();
        get_headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(value) = authorization(bearer.as_ref(), Renew::No).await {
            get_headers.insert(AUTHORIZATION, value);
        }
        let response = client
            .get(base.clone())
            .headers(get_headers)
            .send()
            .await
            .map_err(|error| {
                connect_error(format!(
                    "the SSE GET request failed: {}",
                    reqwest_message(&error)
                ))
            })?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            let challenge = response
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|value| value.to_str().ok())
                .map(parse_challenge);
            if challenge.is_some() || !options.has_credentials() {
                let challenge = challenge.unwrap_or_default();
                return Err(McpError::AuthRequired {
                    url: url.to_owned(),
                    resource_metadata: challenge.resource_metadata,
                    scope: challenge.scope,
                });
            }
            return Err(McpError::Http {
                url: url.to_owned(),
                status: status.as_u16(),
                body: body_prefix(response)
                    .await
                    .trim_start_matches(": ")
                    .to_owned(),
            });
        }
        if !status.is_success() {
            let body = body_prefix(response).await;
            return Err(connect_error(format!(
                "the SSE GET request got HTTP {status}{body}"
            )));
        }
        if let Some(content_type) = response.headers().get(CONTENT_TYPE) {
            let content_type = String::from_utf8_lossy(content_type.as_bytes());
            let media_type = content_type.split(';').next().unwrap_or_default().trim();
            if !media_type.eq_ignore_ascii_case("text/event-stream") {
                return Err(connect_error(format!(
                    "expected an event stream (text/event-stream), got `{}`",
                    truncate(&content_type, 100)
                )));
            }
        }

        let mut body = Box::pin(response.bytes_stream());
        let mut events = EventReader::new(options.max_response_bytes);
        let endpoint = loop {
            if let Some(event) = events.next_event() {
                if event.event == "endpoint" {
                    break resolve_endpoint(&base, &event.data).map_err(connect_error)?;
                }
                tracing::warn!(
                    url,
                    event = %event.event,
                    "ignoring an SSE event the MCP server sent before its `endpoint` event"
                );
                continue;
            }
            match body.next().await {
                Some(Ok(chunk)) => events.feed(&chunk),
                Some(Err(error)) => {
                    return Err(connect_error(format!(
                        "the event stream failed before the `endpoint` event: {}",
                        reqwest_message(&error)
                    )));
                }
                None => {
                    return Err(connect_error(
                        "the event stream ended before the `endpoint` event".to_owned(),
                    ));
                }
            }
        };
        tracing::debug!(url, endpoint = %endpoint, "MCP SSE session open");

        let (sender, messages) = mpsc::channel(CHANNEL_CAPACITY);
        let reader = tokio::spawn(read_messages(body, events, sender, url.to_owned()));
        Ok(SseTransport {
            client,
            headers,
            bearer,
            endpoint,
            messages,
            reader,
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseSendError;

    fn name() -> Cow<'static, str> {
        "legacy HTTP+SSE".into()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let client = self.client.clone();
        let headers = self.headers.clone();
        let bearer = self.bearer.clone();
        let endpoint = self.endpoint.clone();
        async move {
            let body = serde_json::to_vec(&item).map_err(SseSendError::Serialize)?;
            let post = |token: Option<HeaderValue>| {
                let mut headers = headers.clone();
                if let Some(value) = token {
                    headers.insert(AUTHORIZATION, value);
                }
                client
                    .post(endpoint.clone())
                    .headers(headers)
                    .header(CONTENT_TYPE, "application/json")
                    .body(body.clone())
                    .send()
            };
            let sent = |result: reqwest::Result<reqwest::Response>| {
                result.map_err(|error| SseSendError::Request(reqwest_message(&error)))
            };
            let mut response = sent(post(authorization(bearer.as_ref(), Renew::No).await).await)?;
            // A rejected OAuth token: refreshed once, and the message sent again.
            if response.status() == StatusCode::UNAUTHORIZED
                && let Some(token) = authorization(bearer.as_ref(), Renew::Refresh).await
            {
                response = sent(post(Some(token)).await)?;
            }
            // Still refused with a challenge (no refresh possible, or too little scope): one
            // new authorization with what it asks for, and the message sent again.
            if matches!(
                response.status(),
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
            ) && let Some(challenge) = response
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
                && let Some(token) =
                    authorization(bearer.as_ref(), Renew::Authorize(challenge)).await
            {
                response = sent(post(Some(token)).await)?;
            }
            let status = response.status();
            if status.is_success() {
                drain(response).await;
                return Ok(());
            }
            Err(SseSendError::Status {
                status: status.as_u16(),
                body: body_prefix(response).await,
            })
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.messages.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.messages.close();
        Ok(())
    }
}

/// The `Authorization` header for the token `bearer` gives when asked for `renew`, marked
/// sensitive.
async fn authorization(bearer: Option<&BearerSource>, renew: Renew) -> Option<HeaderValue> {
    let token = bearer?(renew).await?;
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Why [`SseTransport`] could not deliver a message to the server.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SseSendError {
    /// The message did not serialize (should not happen).
    #[error("could not serialize the message: {0}")]
    Serialize(#[source] serde_json::Error),
    /// The POST did not get an answer.
    #[error("POST to the MCP message endpoint failed: {0}")]
    Request(String),
    /// The server answered the POST with a non-2xx status; `body` is a prefix of its body
    /// (with a leading `: `), or empty.
    #[error("the MCP message endpoint answered HTTP {status}{body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// `": <start of the body>"`, or empty.
        body: String,
    },
}

/// Reads the rest of the event stream, forwarding server messages until the stream ends or
/// fails, or the transport goes away.
async fn read_messages<S>(
    mut body: S,
    mut events: EventReader,
    sender: mpsc::Sender<ServerJsonRpcMessage>,
    url: String,
) where
    S: Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    let mut ended = false;
    loop {
        while let Some(event) = events.next_event() {
            for message in parse_messages(&event, &url) {
                if sender.send(message).await.is_err() {
                    return; // the transport is gone
                }
            }
        }
        if ended {
            tracing::debug!(url, "the MCP server closed its SSE event stream");
            return;
        }
        let next = tokio::select! {
            next = body.next() => next,
            () = sender.closed() => return,
        };
        match next {
            Some(Ok(chunk)) => events.feed(&chunk),
            Some(Err(error)) => {
                tracing::warn!(
                    url,
                    error = %reqwest_message(&error),
                    "the MCP server's SSE event stream failed"
                );
                return;
            }
            None => {
                events.finish();
                ended = true;
            }
        }
    }
}

/// The JSON-RPC messages in one event (a legacy server may send a batch); malformed ones are
/// logged and skipped.
fn parse_messages(event: &SseEvent, url: &str) -> Vec<ServerJsonRpcMessage> {
    match event.event.as_str() {
        "" | "message" => {}
        "endpoint" => {
            tracing::debug!(url, "ignoring a repeated `endpoint` event");
            return Vec::new();
        }
        other => {
            tracing::debug!(url, event = other, "ignoring an unknown SSE event");
            return Vec::new();
        }
    }
    let data = event.data.trim();
    if data.is_empty() {
        return Vec::new();
    }
    let parsed = if data.starts_with('[') {
        serde_json::from_str::<Vec<ServerJsonRpcMessage>>(data)
    } else {
        serde_json::from_str::<ServerJsonRpcMessage>(data).map(|message| vec![message])
    };
    parsed.unwrap_or_else(|error| {
        tracing::warn!(
            url,
            %error,
            data = %truncate(data, 200),
            "skipping a malformed JSON-RPC message from the MCP server"
        );
        Vec::new()
    })
}

/// The message URL from the `endpoint` event's data, resolved against the SSE URL. It must
/// have the same origin: the POSTs carry the same credentials as the GET.
fn resolve_endpoint(base: &Url, data: &str) -> Result<Url, String> {
    let data = data.trim();
    if data.is_empty() {
        return Err("the `endpoint` event is empty".to_owned());
    }
    let endpoint = base.join(data).map_err(|error| {
        format!(
            "the `endpoint` event holds an invalid URL `{}`: {error}",
            truncate(data, 200)
        )
    })?;
    if endpoint.origin() != base.origin() {
        return Err(format!(
            "the `endpoint` event points to another origin ({}); refusing to send messages there",
            endpoint.origin().ascii_serialization()
        ));
    }
    Ok(endpoint)
}

/// [`SseDecoder`] with the response size limit as its event limit: an oversized event is
/// skipped (with a warning) without being buffered.
#[derive(Debug)]
struct EventReader {
    decoder: SseDecoder,
    ended: bool,
}

impl EventReader {
    fn new(max_event_bytes: usize) -> Self {
        Self {
            decoder: SseDecoder::with_max_event_bytes(max_event_bytes),
            ended: false,
        }
    }

    /// Appends received bytes.
    fn feed(&mut self, chunk: &[u8]) {
        self.decoder.feed(chunk);
    }

    /// Call at the end of the stream: a last event not followed by a blank line comes next.
    fn finish(&mut self) {
        self.ended = true;
    }

    /// The next complete event.
    fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            let next = if self.ended {
                self.decoder.finish()
            } else {
                self.decoder.next_event()
            };
            match next {
                Ok(event) => return event,
                Err(error) => tracing::warn!(
                    limit = error.limit,
                    "skipping an SSE event from the MCP server larger than the response size limit"
                ),
            }
        }
    }
}

/// `": <start of the body>"` for an error message, or empty when the body is empty or
/// unreadable. Reads no more than it shows.
async fn body_prefix(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < ERROR_BODY_PREFIX {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {}", truncate(text, ERROR_BODY_PREFIX))
    }
}

/// `text` cut to at most `max` bytes (on a character boundary), with `…` when cut.
fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Reads a small successful response to its end so the connection can be reused.
async fn drain(mut response: reqwest::Response) {
    let mut read = 0;
    while read <= DRAIN_LIMIT {
        match response.chunk().await {
            Ok(Some(chunk)) => read += chunk.len(),
            Ok(None) | Err(_) => break,
        }
    }
}

#[cfg(test)]
mod tests;
