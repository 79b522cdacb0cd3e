//! HTTP transports: Streamable HTTP (rmcp) with a fallback to legacy HTTP+SSE.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{
    ClientJsonRpcMessage, ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, JsonRpcVersion2_0,
    RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::streamable_http_client::SseError;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::error::McpError;

/// Default cap on one JSON response body or SSE event from an HTTP server.
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Settings for HTTP servers: headers, a bearer token, a response size cap.
///
/// ```
/// use aquaregia::mcp::HttpOptions;
/// let options = HttpOptions::new()
///     .bearer_token("secret-token")
///     .header("X-Tenant", "acme");
/// assert!(!format!("{options:?}").contains("secret-token"));
/// ```
#[derive(Clone)]
#[must_use]
pub struct HttpOptions {
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) bearer_token: Option<String>,
    pub(crate) max_response_bytes: usize,
    pub(crate) http_client: Option<reqwest::Client>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            headers: Vec::new(),
            bearer_token: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            http_client: None,
        }
    }
}

impl fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values are often credentials too: show only their names.
        f.debug_struct("HttpOptions")
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field("max_response_bytes", &self.max_response_bytes)
            .finish_non_exhaustive()
    }
}

impl HttpOptions {
    /// No headers, no token, 16 MiB response cap.
    pub fn new() -> Self {
        Self::default()
    }

    /// A header sent with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sends `Authorization: Bearer <token>` (give the token without the `Bearer ` prefix).
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }

    /// The largest response body (or SSE event) accepted, in bytes (default 16 MiB).
    pub fn max_response_size(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Uses this `reqwest::Client` (proxies, custom TLS...).
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// The custom headers plus the bearer token, checked; values are marked sensitive.
    pub(crate) fn header_map(&self) -> Result<HeaderMap, McpError> {
        let mut map = HeaderMap::new();
        for (name, value) in &self.headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| McpError::Connect(format!("invalid HTTP header name `{name}`")))?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                McpError::Connect(format!("invalid value for HTTP header `{name}`"))
            })?;
            value.set_sensitive(true);
            map.insert(header, value);
        }
        if let Some(token) = &self.bearer_token {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                McpError::Connect("the bearer token has characters not allowed in a header".into())
            })?;
            value.set_sensitive(true);
            map.insert(AUTHORIZATION, value);
        }
        Ok(map)
    }

    pub(crate) fn client(&self) -> reqwest::Client {
        self.http_client.clone().unwrap_or_default()
    }
}

/// rmcp's reqwest client with three repairs, each keeping one bad response from hanging a
/// call or ending the session:
/// - a response over the size limit fails only its own request, with an error naming the limit;
/// - an unknown-session error without an id (servers that answer 400 instead of 404) counts as
///   an expired session, so the session is re-established and the request retried once;
/// - any other error response without an id is given the request's id, so the call fails at
///   once with the server's message instead of waiting for its timeout.
#[derive(Clone)]
pub(crate) struct RepairingClient(pub(crate) reqwest::Client);

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

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
        self.0
            .post_message(uri, message, session_id, auth_header, custom_headers)
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
        let id = match &message {
            JsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let session = session_id.as_deref().map(str::to_owned);
        let had_session = session.is_some();
        let result = self
            .0
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        let Some(id) = id else {
            return result;
        };
        match result {
            Err(StreamableHttpError::ResponseBodyTooLarge { max_size }) => Ok(
                StreamableHttpPostResponse::Json(too_large(id, max_size), session),
            ),
            Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Error(mut error), session))
                if error.id.is_none() =>
            {
                if had_session && error.error.message.to_lowercase().contains("session") {
                    return Err(StreamableHttpError::SessionExpired);
                }
                error.id = Some(id);
                Ok(StreamableHttpPostResponse::Json(
                    JsonRpcMessage::Error(error),
                    session,
                ))
            }
            Ok(StreamableHttpPostResponse::Sse(stream, session)) => {
                Ok(StreamableHttpPostResponse::Sse(
                    answer_oversized_events(stream, id, limits.max_sse_event_size),
                    session,
                ))
            }
            other => other,
        }
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<reqwest::Error>>> + Send + '_ {
        self.0
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
        self.0
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
        self.0.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}

/// The JSON-RPC error that replaces a response over the size limit.
fn too_large(id: RequestId, max_size: usize) -> ServerJsonRpcMessage {
    JsonRpcMessage::Error(JsonRpcError {
        jsonrpc: JsonRpcVersion2_0,
        id: Some(id),
        error: ErrorData::new(
            ErrorCode::INTERNAL_ERROR,
            format!(
                "the response was larger than {max_size} bytes \
                 (raise the limit with HttpOptions::max_response_size)"
            ),
            None,
        ),
    })
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
                if error.to_string().contains("exceeded the maximum size") =>
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
