//! Sessions over HTTP: Streamable HTTP (`server/discover`, then `initialize` on a fresh
//! transport when the server misunderstood it) and the legacy HTTP+SSE transport (open the
//! event stream within the connect timeout, then `initialize`).

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};

use super::connection::McpConnection;
use super::handler::ServerRequests;
use super::handshake::{Handshake, HandshakeError, HttpTarget, establish};
use crate::error::McpError;
use crate::transport::http::SessionIdSlot;
use crate::transport::http_options::HttpOptions;
use crate::transport::sse::{BearerSource, SseTransport};

/// The legacy HTTP+SSE server being connected, and how.
pub(crate) struct SseSession<'a> {
    pub(crate) url: &'a str,
    pub(crate) name: &'a str,
    pub(crate) options: &'a HttpOptions,
    pub(crate) timeout: Duration,
    pub(crate) requests: &'a Arc<dyn ServerRequests>,
}

impl SseSession<'_> {
    /// Connects, sending the token of `bearer` (OAuth) with every request when given.
    pub(crate) async fn connect(
        &self,
        bearer: Option<BearerSource>,
    ) -> Result<McpConnection, McpError> {
        let credentials = self.options.has_credentials() || bearer.is_some();
        let open = SseTransport::open(self.url, self.options, bearer);
        let transport = tokio::time::timeout(self.timeout, open)
            .await
            .map_err(|_| {
                McpError::connect(
                    self.name,
                    format!(
                        "{} sent no endpoint event within {:?}",
                        self.url, self.timeout
                    ),
                )
            })??;
        // Servers of the HTTP+SSE era predate `server/discover`.
        let target = HttpTarget {
            url: self.url.to_owned(),
            credentials,
            session: None,
        };
        establish(
            transport,
            self.name.to_owned(),
            self.timeout,
            None,
            Handshake::Initialize,
            Some(target),
            self.requests.clone(),
        )
        .await
        .map_err(|failed| failed.error)
    }
}

/// Connects over Streamable HTTP with `client`: the `server/discover` handshake, then
/// `initialize` on a fresh transport when the server misunderstood it.
pub(crate) async fn streamable_http<C>(
    client: C,
    session_id: SessionIdSlot,
    url: &str,
    name: &str,
    options: &HttpOptions,
    timeout: Duration,
    requests: &Arc<dyn ServerRequests>,
) -> Result<McpConnection, HandshakeError>
where
    C: StreamableHttpClient + Clone + Send + Sync + 'static,
{
    let headers = options.header_map().map_err(|error| HandshakeError {
        error,
        discover_confused: false,
        challenge: None,
    })?;
    let target = HttpTarget {
        url: url.to_owned(),
        credentials: options.has_credentials(),
        session: Some(session_id),
    };
    let attempt = |handshake| {
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
            .max_json_response_size(options.max_response_bytes)
            .max_sse_event_size(options.max_response_bytes)
            .reinit_on_expired_session(true)
            .custom_headers(
                headers
                    .clone()
                    .into_iter()
                    .filter_map(|(name, value)| Some((name?, value)))
                    .collect(),
            );
        let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
        establish(
            transport,
            name.to_owned(),
            timeout,
            None,
            handshake,
            Some(target.clone()),
            requests.clone(),
        )
    };
    match attempt(Handshake::Auto).await {
        Err(failed) if failed.discover_confused => attempt(Handshake::Initialize).await,
        result => result,
    }
}
