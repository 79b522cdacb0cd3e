//! Every workaround for what rmcp does not do (yet), in one place, each with the rmcp change
//! that would remove it. Nothing outside this module works around rmcp.
//!
//! | piece | what it does | remove when rmcp... |
//! |---|---|---|
//! | [`Compat`] | the one wrapper around every session's transport: drops the late answer to an abandoned `server/discover`; hands progress and list-change notifications over in reading order | ...drops the answer to a `server/discover` its Auto lifecycle gave up on, and runs notifications in order, before the answers that follow them |
//! | [`lines`] | the stdio line reader | ...fails the request whose answer line it cannot decode instead of dropping the line |
//! | [`http_post`] | the Streamable HTTP POST repair | ...fails only the request an HTTP error status, an oversized body or an id-less JSON-RPC error belongs to |
//! | [`execution`] | a tool's `execution` kept in its `_meta` | ...keeps `execution` in its `Tool` |
//! | [`fault`] | local faults as marked JSON-RPC errors | ...lets a transport fail one request with a typed error |
//! | [`lost_in_reinit`] | a request lost to a re-initialised HTTP session, told by its error text | ...gives that request a typed error |
//! | [`task_augmented_call`], [`tasks_result`] | 2025-11-25 task-augmented `tools/call` and `tasks/result` as custom requests | ...has typed requests for them |
//! | [`elicitation_completed`] | `notifications/elicitation/complete` read from a custom notification | ...has a typed notification for it |
//! | `oauth_discovery` (feature `oauth`) | 2025-03-26 authorization discovery for servers whose metadata rmcp rejects for its issuer | ...falls back to the 2025-03-26 rules itself |
//! | `run_not_send` (feature `oauth`) | rmcp's client-credentials exchange driven on a blocking thread | ...makes that exchange future `Send` |

pub(crate) mod execution;
pub(crate) mod fault;
pub(crate) mod http_post;
pub(crate) mod lines;
#[cfg(feature = "oauth")]
pub(crate) mod oauth_discovery;

use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, CustomNotification, CustomRequest,
    ErrorCode, ErrorData, JsonRpcMessage, RequestId, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Map, Value, json};

/// Told of each server notification as the transport reads it, before rmcp's handler sees it.
pub(crate) type NotificationTap = Arc<dyn Fn(&ServerNotification) + Send + Sync>;

/// The wrapper under every session, whatever its transport.
///
/// - It drops the answer to a `server/discover` that rmcp gave up on (its Auto lifecycle
///   sends `initialize` after 10 s without an answer), which would otherwise fail the
///   `initialize` as an uncorrelated response. Remove when rmcp drops it itself.
/// - It hands each notification to its [`NotificationTap`] as it is read: rmcp's handler runs
///   notifications on tasks of their own, in no particular order, so a call would see its
///   progress after its answer, and a list change sent just before a tool's answer would be
///   missed by the agent's next step. Remove when rmcp runs notifications in reading order,
///   before the answers that follow them.
pub(crate) struct Compat<T> {
    inner: T,
    tap: NotificationTap,
    /// A `server/discover` not answered yet.
    discover: Option<RequestId>,
    /// A `server/discover` rmcp stopped waiting for.
    abandoned: Option<RequestId>,
}

impl<T> Compat<T> {
    pub(crate) fn new(inner: T, tap: NotificationTap) -> Self {
        Self {
            inner,
            tap,
            discover: None,
            abandoned: None,
        }
    }
}

fn answered_id(message: &ServerJsonRpcMessage) -> Option<&RequestId> {
    match message {
        JsonRpcMessage::Response(response) => Some(&response.id),
        JsonRpcMessage::Error(error) => error.id.as_ref(),
        _ => None,
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Compat<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(request) = &item {
            match &request.request {
                ClientRequest::DiscoverRequest(_) => self.discover = Some(request.id.clone()),
                ClientRequest::InitializeRequest(_) => self.abandoned = self.discover.take(),
                _ => {}
            }
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await?;
            if let JsonRpcMessage::Notification(notification) = &message {
                (self.tap)(&notification.notification);
            }
            if self.discover.is_none() && self.abandoned.is_none() {
                return Some(message);
            }
            let id = answered_id(&message);
            if id.is_some() && id == self.abandoned.as_ref() {
                tracing::debug!("dropping the late answer to an abandoned server/discover");
                self.abandoned = None;
                continue;
            }
            if id.is_some() && id == self.discover.as_ref() {
                self.discover = None;
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// The error rmcp's Streamable HTTP transport gives a request whose answer was pending when
/// it re-initialised the session.
const REINITIALIZED: &str =
    "streamable HTTP session was re-initialized before the response arrived";

/// Whether `error` is the one a pending request gets when its HTTP session is replaced (rmcp
/// tells it only by its text).
pub(crate) fn lost_in_reinit(error: &ErrorData) -> bool {
    error.code == ErrorCode::INTERNAL_ERROR && error.message == REINITIALIZED
}

/// A 2025-11-25 task-augmented `tools/call` (SEP-1686): `params` with an empty `task` object,
/// which rmcp's `CallToolRequestParams` has no field for.
pub(crate) fn task_augmented_call(params: &CallToolRequestParams) -> Option<ClientRequest> {
    let Ok(Value::Object(mut raw)) = serde_json::to_value(params) else {
        return None;
    };
    raw.insert("task".to_owned(), Value::Object(Map::new()));
    Some(ClientRequest::CustomRequest(CustomRequest::new(
        "tools/call",
        Some(Value::Object(raw)),
    )))
}

/// A 2025-11-25 `tasks/result` request for task `id`, which waits for the task's result.
pub(crate) fn tasks_result(id: &str) -> ClientRequest {
    ClientRequest::CustomRequest(CustomRequest::new(
        "tasks/result",
        Some(json!({"taskId": id})),
    ))
}

/// Runs the future `start` makes, which need not be `Send`, from async code that must be: on a
/// blocking thread that drives it on this runtime. rmcp's client-credentials exchange future
/// is not `Send` once its JWT support is compiled in (it keeps a non-`Send` form serializer
/// across an await).
#[cfg(feature = "oauth")]
pub(crate) async fn run_not_send<T, Fut>(
    start: impl FnOnce() -> Fut + Send + 'static,
) -> Result<T, tokio::task::JoinError>
where
    Fut: Future<Output = T>,
    T: Send + 'static,
{
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || runtime.block_on(start())).await
}

/// The method of MCP's URL elicitation completion notification.
const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

/// The `elicitationId` of a `notifications/elicitation/complete` (rmcp hands it over as a
/// custom notification): `Some(None)` when it has none, `None` for another notification.
pub(crate) fn elicitation_completed(notification: &CustomNotification) -> Option<Option<&str>> {
    (notification.method == ELICITATION_COMPLETE).then(|| {
        notification
            .params
            .as_ref()
            .and_then(|params| params.get("elicitationId"))
            .and_then(Value::as_str)
    })
}
