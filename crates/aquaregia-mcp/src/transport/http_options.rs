//! [`HttpOptions`]: headers, a bearer token, a response size cap, the HTTP client.

use std::fmt;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use crate::error::McpError;

/// Default cap on one JSON response body or SSE event from an HTTP server.
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Settings for one HTTP server: headers, a bearer token, a response size cap, the HTTP
/// client. OAuth is the [`Connector`](crate::Connector)'s ([`Connector::oauth`](crate::Connector)),
/// used when these options carry no credentials.
///
/// ```
/// use aquaregia_mcp::HttpOptions;
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
        let mut f = f.debug_struct("HttpOptions");
        f.field(
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
        .field("max_response_bytes", &self.max_response_bytes);
        f.finish_non_exhaustive()
    }
}

impl HttpOptions {
    /// No headers, no token, 16 MiB response cap.
    pub fn new() -> Self {
        Self::default()
    }

    /// A header sent with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        aquaregia::redact::register_header(&name, &value);
        self.headers.push((name, value));
        self
    }

    /// Sends `Authorization: Bearer <token>` (give the token without the `Bearer ` prefix).
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        let token = token.into();
        aquaregia::redact::register(&token);
        self.bearer_token = Some(token);
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
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                McpError::connect(name, format!("invalid HTTP header name `{name}`"))
            })?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                McpError::connect(name, format!("invalid value for HTTP header `{name}`"))
            })?;
            value.set_sensitive(true);
            map.insert(header, value);
        }
        if let Some(token) = &self.bearer_token {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                McpError::connect(
                    "bearer token",
                    "the bearer token has characters not allowed in a header",
                )
            })?;
            value.set_sensitive(true);
            map.insert(AUTHORIZATION, value);
        }
        Ok(map)
    }

    /// Whether credentials are sent: a bearer token or an `Authorization` header.
    pub(crate) fn has_credentials(&self) -> bool {
        self.bearer_token.is_some()
            || self
                .headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case(AUTHORIZATION.as_str()))
    }

    /// The configured client, else one that follows redirects only within the origin and
    /// sends no `Referer`, so the headers above never reach another host.
    pub(crate) fn client(&self) -> reqwest::Client {
        self.http_client.clone().unwrap_or_else(|| {
            aquaregia::http::client_builder()
                .build()
                .unwrap_or_default()
        })
    }
}
