//! The `input_required` rounds of a 2026-07-28 tool call (SEP-2322): the server returns its
//! questions (elicitation, sampling, roots) and the client calls again with the answers and
//! the server's `requestState`. The answers are the session's, as for server-to-client
//! requests (2025-11-25).
// Sampling and roots are deprecated by SEP-2577 (2026-07-28), and still asked for.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::model::{InputRequest, InputRequests, InputResponses};
use serde_json::Value;

use crate::error::McpError;
use crate::session::handler::ServerInput;

/// How many `input_required` answers one tool call may get before the call is given up:
/// a server that keeps asking is not allowed to hold a call forever.
pub(crate) const MAX_INPUT_ROUNDS: usize = 10;

impl ServerInput {
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
