//! What a server asks of the client while it works on a request: elicitation, sampling and
//! roots. The same answers serve server-to-client requests (2025-11-25) and the
//! `input_required` rounds of a 2026-07-28 tool call (SEP-2322), where the server returns
//! its questions and the client calls again with the answers and the server's
//! `requestState`.
// Sampling and roots are deprecated by SEP-2577 (2026-07-28), and still asked for.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    InputRequest, InputRequests, InputResponses,
};
use serde_json::Value;

use super::elicitation::{ElicitationCompleteHandler, ElicitationHandler, answer};
use super::error::McpError;
use super::sampling::{SamplingHandler, SamplingRequest, SamplingResponse};

/// How many `input_required` answers one tool call may get before the call is given up:
/// a server that keeps asking is not allowed to hold a call forever.
pub(crate) const MAX_INPUT_ROUNDS: usize = 10;

/// The handlers given to the [`Connector`](super::Connector) or the toolset.
#[derive(Clone, Default)]
pub(crate) struct Handlers {
    pub(crate) elicitation: Option<ElicitationHandler>,
    pub(crate) elicitation_complete: Option<ElicitationCompleteHandler>,
    pub(crate) sampling: Option<SamplingHandler>,
}

/// One server's requests answered with the [`Handlers`]; shared by the session's rmcp handler
/// and its tool calls.
pub(crate) struct ServerInput {
    /// The server's name, for the handlers and for errors.
    pub(crate) server: String,
    pub(crate) handlers: Handlers,
}

impl ServerInput {
    /// Answers an elicitation (none: declined).
    pub(crate) async fn elicit(&self, request: ElicitRequestParams) -> ElicitResult {
        answer(self.handlers.elicitation.as_ref(), &self.server, request).await
    }

    /// Answers a sampling request: the handler's reply, or why there is none.
    pub(crate) async fn sample(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, String> {
        let Some(handler) = &self.handlers.sampling else {
            tracing::debug!(server = %self.server, "declining a sampling request: no handler");
            return Err("no sampling handler is set".to_owned());
        };
        let request = SamplingRequest::from_params(&self.server, params);
        match handler(request).await {
            SamplingResponse::Reply(reply) => Ok(reply.into_result()),
            SamplingResponse::Decline => Err("the user declined the sampling request".to_owned()),
            SamplingResponse::Failed(message) => Err(message),
        }
    }

    /// A sampling request sent as a server-to-client request: a refusal is a JSON-RPC error
    /// (code -1, as the specification's examples reject sampling).
    pub(crate) async fn sample_request(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.sample(params)
            .await
            .map_err(|message| ErrorData::new(rmcp::model::ErrorCode(-1), message, None))
    }

    /// Answers every request of one `input_required` result, keyed as the server keyed them.
    pub(crate) async fn fulfil(&self, requests: InputRequests) -> Result<InputResponses, McpError> {
        let answers = futures::future::try_join_all(
            requests
                .into_iter()
                .map(|(key, request)| async move { Ok((key, self.fulfil_one(request).await?)) }),
        )
        .await?;
        Ok(answers.into_iter().collect())
    }

    async fn fulfil_one(&self, request: InputRequest) -> Result<Value, McpError> {
        let answer = match request {
            InputRequest::Elicitation(request) => to_value(self.elicit(request.params).await),
            // Roots are deprecated (SEP-2577); this client exposes none.
            #[allow(deprecated)]
            InputRequest::ListRoots(_) => to_value(rmcp::model::ListRootsResult::new(Vec::new())),
            InputRequest::CreateMessage(request) => match self.sample(request.params).await {
                Ok(result) => to_value(result),
                Err(why) => {
                    return Err(self.unanswerable(format!(
                        "asked to sample the model (sampling/createMessage): {why}"
                    )));
                }
            },
            _ => {
                return Err(
                    self.unanswerable("asked for input of a kind this client does not know")
                );
            }
        };
        answer
            .map_err(|error| self.unanswerable(format!("its answer could not be encoded: {error}")))
    }

    pub(crate) fn unanswerable(&self, message: impl Into<String>) -> McpError {
        McpError::InputRequired {
            server: self.server.clone(),
            message: message.into(),
        }
    }
}

fn to_value(result: impl serde::Serialize) -> Result<Value, serde_json::Error> {
    serde_json::to_value(result)
}

/// The pause before retrying after a round that only carried `requestState` (the server is
/// shedding load): 50 ms doubling to 250 ms, as the reference SDKs do.
pub(crate) fn state_only_pause(state_only_rounds: usize) -> Duration {
    let millis = 50u64.saturating_mul(1 << state_only_rounds.min(3)).min(250);
    Duration::from_millis(millis)
}
