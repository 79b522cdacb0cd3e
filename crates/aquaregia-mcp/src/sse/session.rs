//! Connecting over the legacy transport: open the event stream within the connect timeout,
//! then the `initialize` handshake.

use std::time::Duration;

use super::{BearerSource, SseTransport};
use crate::error::McpError;
use crate::handshake::{Handshake, HttpTarget, establish};
use crate::input::Handlers;
use crate::{HttpOptions, McpConnection};

/// The legacy HTTP+SSE server being connected, and how.
pub(crate) struct SseSession<'a> {
    pub(crate) url: &'a str,
    pub(crate) name: &'a str,
    pub(crate) options: &'a HttpOptions,
    pub(crate) timeout: Duration,
    pub(crate) handlers: &'a Handlers,
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
            self.handlers.clone(),
        )
        .await
        .map_err(|failed| failed.error)
    }
}
