//! Connecting to a Streamable HTTP server with OAuth: stored tokens first, then, on a
//! challenge, an authorization ([`super::authorize`]), then the connect again.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::AuthClient;

use super::OAuth;
use super::authorize::{MAX_AUTHORIZATIONS, authorize, restored_manager};
use super::step_up::StepUpClient;
use crate::error::McpError;
use crate::session::connection::McpConnection;
use crate::session::handler::ServerRequests;
use crate::session::handshake::HandshakeError;
use crate::session::http::streamable_http;
use crate::transport::compat::http_post::RepairingClient;
use crate::transport::http::SessionIdSlot;
use crate::transport::http_options::HttpOptions;

/// The server being connected, and how.
pub(crate) struct Session<'a> {
    pub(crate) url: &'a str,
    pub(crate) name: &'a str,
    pub(crate) options: &'a HttpOptions,
    pub(crate) timeout: Duration,
    pub(crate) requests: &'a Arc<dyn ServerRequests>,
}

/// Connects to a Streamable HTTP server, authorizing with `oauth` when it asks.
pub(crate) async fn connect_with_oauth(
    session: &Session<'_>,
    oauth: &OAuth,
) -> Result<McpConnection, McpError> {
    let Session {
        url,
        name,
        options,
        timeout,
        requests,
    } = *session;
    let mut manager = restored_manager(url, name, oauth).await?;
    let mut authorizations = 0;
    loop {
        let session_id = SessionIdSlot::default();
        let repairing = RepairingClient::new(options.client(), session_id.clone());
        let reconnects = repairing.reconnects();
        let client = StepUpClient::new(AuthClient::new(repairing, manager), url, name, oauth);
        let connected = client.connected();
        let HandshakeError {
            error, challenge, ..
        } = match streamable_http(client, session_id, url, name, options, timeout, requests).await {
            Ok(connection) => {
                connected.store(true, std::sync::atomic::Ordering::SeqCst);
                connection.shared().set_reconnects(reconnects);
                return Ok(connection);
            }
            Err(failed) => failed,
        };
        let Some(challenge) = challenge else {
            return Err(error);
        };
        if authorizations == MAX_AUTHORIZATIONS {
            return Err(error);
        }
        authorizations += 1;
        manager = match authorize(url, name, oauth, &challenge).await? {
            Some(manager) => manager,
            None => return Err(error),
        };
    }
}
