//! What servers ask the client, answered by the handlers given to a
//! [`Connector`](crate::Connector): questions to the user ([`elicitation`]) and requests to
//! sample the model ([`sampling`]). [`Handlers`] is what the session sees of them, through
//! its [`ServerRequests`] seam.
// Sampling is deprecated by SEP-2577 (2026-07-28), and still what 2025-11-25 servers use.
#![allow(deprecated)]

pub(crate) mod elicitation;
pub(crate) mod sampling;

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
};

use crate::session::handler::ServerRequests;
use elicitation::{ElicitationComplete, ElicitationCompleteHandler, ElicitationHandler};
use sampling::{SamplingHandler, SamplingRequest, SamplingResponse};

/// The handlers of a connector; without one, questions are declined and sampling refused.
#[derive(Clone, Default)]
pub(crate) struct Handlers {
    pub(crate) elicitation: Option<ElicitationHandler>,
    pub(crate) elicitation_complete: Option<ElicitationCompleteHandler>,
    pub(crate) sampling: Option<SamplingHandler>,
}

impl Handlers {
    /// As the session's seam.
    pub(crate) fn requests(&self) -> Arc<dyn ServerRequests> {
        Arc::new(self.clone())
    }
}

impl ServerRequests for Handlers {
    fn elicits(&self) -> bool {
        self.elicitation.is_some()
    }

    fn samples(&self) -> bool {
        self.sampling.is_some()
    }

    fn elicit(&self, server: &str, request: ElicitRequestParams) -> BoxFuture<'_, ElicitResult> {
        let server = server.to_owned();
        Box::pin(
            async move { elicitation::answer(self.elicitation.as_ref(), &server, request).await },
        )
    }

    fn sample(
        &self,
        server: &str,
        request: CreateMessageRequestParams,
    ) -> BoxFuture<'_, Result<CreateMessageResult, String>> {
        let request = SamplingRequest::from_params(server, request);
        Box::pin(async move {
            let Some(handler) = &self.sampling else {
                tracing::debug!(server = %request.server, "declining a sampling request: no handler");
                return Err("no sampling handler is set".to_owned());
            };
            match handler(request).await {
                SamplingResponse::Reply(reply) => Ok(reply.into_result()),
                SamplingResponse::Decline => {
                    Err("the user declined the sampling request".to_owned())
                }
                SamplingResponse::Failed(message) => Err(message),
            }
        })
    }

    fn elicitation_completed(&self, server: &str, elicitation_id: &str) {
        if let Some(hook) = &self.elicitation_complete {
            hook(ElicitationComplete {
                server: server.to_owned(),
                elicitation_id: elicitation_id.to_owned(),
            });
        }
    }
}
