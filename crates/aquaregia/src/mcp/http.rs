//! HTTP transports: Streamable HTTP (rmcp) with a fallback to legacy HTTP+SSE.

use std::fmt;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

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
