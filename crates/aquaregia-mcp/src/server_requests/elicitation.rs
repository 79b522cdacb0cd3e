//! Questions a server asks the user in the middle of a call (MCP elicitation, form and URL
//! modes), answered by the handler given to [`Connector::on_elicitation`].
//!
//! [`Connector::on_elicitation`]: crate::Connector::on_elicitation

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::Value;

/// What a server asks.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationRequest {
    /// Fill in a form. `schema` is a flat JSON object schema: its `properties` are the
    /// fields (string, number, integer, boolean, enum), with titles, descriptions and
    /// defaults; `required` lists the ones that must be given.
    Form {
        /// The server's name.
        server: String,
        /// What the server wants, for the user.
        message: String,
        /// The fields, as a JSON schema.
        schema: Value,
    },
    /// Go to a URL (a sign-in, a payment...) and come back: the answer only says whether
    /// the user agreed to go; what happens there stays between the user and the server.
    Url {
        /// The server's name.
        server: String,
        /// Why, for the user.
        message: String,
        /// Where to go.
        url: String,
        /// The server's id for this request.
        elicitation_id: String,
    },
}

/// The user's answer.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationResponse {
    /// The user answered: for a form, the values by field name (a JSON object); for a URL,
    /// `None`.
    Accept(Option<Value>),
    /// The user said no; the call may go on without the information.
    Decline,
    /// The user dismissed the question: the whole operation should stop.
    Cancel,
}

/// A server's word that a URL-mode question is done (`notifications/elicitation/complete`):
/// what the user had to do at the URL is finished, so a client showing it can stop.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElicitationComplete {
    /// The server's name.
    pub server: String,
    /// The `elicitation_id` of the [`ElicitationRequest::Url`] it completes.
    pub elicitation_id: String,
}

/// Told of [`ElicitationComplete`]s.
pub(crate) type ElicitationCompleteHandler = Arc<dyn Fn(ElicitationComplete) + Send + Sync>;

/// Answers a server's questions; `Send + Sync`, called once per question.
pub(crate) type ElicitationHandler =
    Arc<dyn Fn(ElicitationRequest) -> BoxFuture<'static, ElicitationResponse> + Send + Sync>;

/// Wraps a closure as a handler.
pub(crate) fn handler<F, Fut>(answer: F) -> ElicitationHandler
where
    F: Fn(ElicitationRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ElicitationResponse> + Send + 'static,
{
    Arc::new(move |request| Box::pin(answer(request)))
}

/// Asks `handler` (none: declines, as a client without a user would).
pub(crate) async fn answer(
    handler: Option<&ElicitationHandler>,
    server: &str,
    request: ElicitRequestParams,
) -> ElicitResult {
    let Some(handler) = handler else {
        tracing::debug!(server, "declining an elicitation: no handler");
        return ElicitResult::new(ElicitationAction::Decline);
    };
    let question = match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => ElicitationRequest::Form {
            server: server.to_owned(),
            message,
            schema: serde_json::to_value(requested_schema).unwrap_or_default(),
        },
        ElicitRequestParams::UrlElicitationParams {
            message,
            url,
            elicitation_id,
            ..
        } => ElicitationRequest::Url {
            server: server.to_owned(),
            message,
            url,
            elicitation_id,
        },
        _ => return ElicitResult::new(ElicitationAction::Decline),
    };
    match handler(question).await {
        ElicitationResponse::Accept(Some(content)) => {
            ElicitResult::new(ElicitationAction::Accept).with_content(content)
        }
        ElicitationResponse::Accept(None) => ElicitResult::new(ElicitationAction::Accept),
        ElicitationResponse::Decline => ElicitResult::new(ElicitationAction::Decline),
        ElicitationResponse::Cancel => ElicitResult::new(ElicitationAction::Cancel),
    }
}
