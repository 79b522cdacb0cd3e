//! The session's rmcp client handler: it announces aquaregia and the capabilities the
//! [`ServerRequests`] answer, and passes what the server asks (elicitation, sampling) to them.
//! The answers themselves are the upper layer's (`server_requests`): the session only knows
//! this trait.
// Sampling is deprecated by SEP-2577 (2026-07-28), and still what 2025-11-25 servers use.
#![allow(deprecated)]

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    CustomNotification, ElicitRequestParams, ElicitResult, ElicitationCapability,
    ExtensionCapabilities, FormElicitationCapability, Implementation, ProtocolVersion,
    SamplingCapability, TASKS_EXTENSION_ID, UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::Map;

use super::progress::ProgressRoutes;
use crate::transport::compat::elicitation_completed;

/// Answers what a server asks the client: the seam between a session and the handlers above
/// it.
pub(crate) trait ServerRequests: Send + Sync {
    /// Whether questions to the user are answered (the client then advertises elicitation).
    fn elicits(&self) -> bool;
    /// Whether sampling requests are answered (the client then advertises sampling).
    fn samples(&self) -> bool;
    /// Answers a question of `server` to the user (declined when there is nobody to ask).
    fn elicit(&self, server: &str, request: ElicitRequestParams) -> BoxFuture<'_, ElicitResult>;
    /// Answers a sampling request of `server`: the model's reply, or why there is none.
    fn sample(
        &self,
        server: &str,
        request: CreateMessageRequestParams,
    ) -> BoxFuture<'_, Result<CreateMessageResult, String>>;
    /// `server` says its URL-mode question `elicitation_id` is done.
    fn elicitation_completed(&self, server: &str, elicitation_id: &str);
}

/// One server's requests, answered by its [`ServerRequests`]; shared by the session's rmcp
/// handler and its tool calls (which answer `input_required` rounds with the same).
pub(crate) struct ServerInput {
    /// The server's name, for the handlers and for errors.
    pub(crate) server: String,
    pub(crate) requests: Arc<dyn ServerRequests>,
}

impl ServerInput {
    /// Answers an elicitation.
    pub(crate) async fn elicit(&self, request: ElicitRequestParams) -> ElicitResult {
        self.requests.elicit(&self.server, request).await
    }

    /// Answers a sampling request: the reply, or why there is none.
    pub(crate) async fn sample(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, String> {
        self.requests.sample(&self.server, params).await
    }
}

/// rmcp's client handler: announces aquaregia and answers what the server asks.
pub(crate) struct Handler {
    pub(crate) server: String,
    /// Filled by the session's transport (see `Compat`), read by tool calls.
    pub(crate) progress: Arc<ProgressRoutes>,
    pub(crate) input: Arc<ServerInput>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // The 2026-07-28 tasks extension: the server may answer a call with a task.
        let mut capabilities = ClientCapabilities::default();
        capabilities.extensions = Some(ExtensionCapabilities::from([(
            TASKS_EXTENSION_ID.to_owned(),
            Map::new(),
        )]));
        let mut info = ClientConfig::new(
            capabilities,
            Implementation::new("aquaregia", env!("CARGO_PKG_VERSION")),
        );
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        if self.input.requests.elicits() {
            info.capabilities.elicitation = Some(
                ElicitationCapability::new()
                    .with_form(FormElicitationCapability::new())
                    .with_url(UrlElicitationCapability::new()),
            );
        }
        if self.input.requests.samples() {
            info.capabilities.sampling = Some(SamplingCapability::default());
        }
        info
    }

    async fn create_message(
        &self,
        request: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        // A refusal is a JSON-RPC error (code -1, as the specification's examples reject
        // sampling).
        self.input
            .sample(request)
            .await
            .map_err(|message| ErrorData::new(rmcp::model::ErrorCode(-1), message, None))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(self.input.elicit(request).await)
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        // Counted by the transport as it is read (`Compat`), in order with answers.
        tracing::debug!(server = %self.server, "tools/list_changed");
        std::future::ready(())
    }

    fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        match elicitation_completed(&notification) {
            Some(Some(id)) => {
                tracing::debug!(server = %self.server, id, "elicitation complete");
                self.input.requests.elicitation_completed(&self.server, id);
            }
            Some(None) => {
                tracing::warn!(server = %self.server, "an elicitation/complete notification without an elicitationId");
            }
            None => {
                tracing::debug!(server = %self.server, method = %notification.method, "ignoring a notification");
            }
        }
        std::future::ready(())
    }
}
