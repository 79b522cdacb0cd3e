//! Establishing a session: the `server/discover` / `initialize` handshake under one connect
//! timeout, typed handshake errors, and the list-change subscription.

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{ErrorCode, ErrorData, ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, Peer, ServiceError,
};
use rmcp::transport::IntoTransport;
use rmcp::transport::streamable_http_client::StreamableHttpError;

use super::connection::{Changes, McpConnection};
use super::handler::{Handler, ServerInput, ServerRequests};
use super::progress::ProgressRoutes;
use super::trace::Endpoint;
use crate::error::{ErrorSource, McpError};
use crate::transport::compat::fault::LocalFault;
use crate::transport::compat::{Compat, NotificationTap};
use crate::transport::http::{SessionIdSlot, parse_challenge};
use crate::transport::process::StdioProcess;

/// Which handshake to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handshake {
    /// `server/discover` (2026-07-28) first, falling back to a 2025-11-25 `initialize` when
    /// the server answers like a legacy server. Never an `initialize` claiming 2026-07-28.
    Auto,
    /// Only the 2025-11-25 `initialize` handshake.
    Initialize,
}

/// An HTTP server being connected: for errors that name the URL, and to tell "authorization
/// required" from "credentials refused".
#[derive(Debug, Clone)]
pub(crate) struct HttpTarget {
    pub(crate) url: String,
    /// Whether credentials (a bearer token or an `Authorization` header) are sent.
    pub(crate) credentials: bool,
    /// The Streamable HTTP session id, once known (legacy SSE has none).
    pub(crate) session: Option<SessionIdSlot>,
}

/// A failed handshake.
pub(crate) struct HandshakeError {
    pub(crate) error: McpError,
    /// The server answered `server/discover` with something that is neither a discover
    /// result nor an error (some servers answer unknown methods with `{}`): a fresh
    /// transport with [`Handshake::Initialize`] will likely work.
    pub(crate) discover_confused: bool,
    /// The server asked for authorization: its `WWW-Authenticate` challenge (`Bearer` when
    /// it sent none).
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(crate) challenge: Option<String>,
}

/// Runs the MCP handshake over `transport` and starts watching for list changes.
///
/// `timeout` bounds the whole handshake. The transport is wrapped in [`Compat`], which
/// drops the late answer to a `server/discover` rmcp gave up on, and hands progress and list
/// changes to the session as they are read.
pub(crate) async fn establish<T, E, A>(
    transport: T,
    name: String,
    timeout: Duration,
    process: Option<StdioProcess>,
    handshake: Handshake,
    http: Option<HttpTarget>,
    requests: Arc<dyn ServerRequests>,
) -> Result<McpConnection, HandshakeError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let changes = Arc::new(Changes::new());
    let progress = Arc::<ProgressRoutes>::default();
    let handler = Handler {
        server: name.clone(),
        progress: progress.clone(),
        input: Arc::new(ServerInput {
            server: name.clone(),
            requests,
        }),
    };
    let lifecycle = match handshake {
        Handshake::Auto => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
        Handshake::Initialize => ClientLifecycleMode::Initialize,
    };
    let tap: NotificationTap = {
        let changes = changes.clone();
        Arc::new(move |notification| match notification {
            ServerNotification::ProgressNotification(progress_notification) => {
                progress.deliver(progress_notification.params.clone());
            }
            // Counted here, in reading order, not in rmcp's handler: a change sent just
            // before a tool's answer is then seen by the agent's next step.
            ServerNotification::ToolListChangedNotification(_) => changes.bump(),
            _ => {}
        })
    };
    let transport = Compat::new(transport.into_transport(), tap);
    let started = tokio::time::timeout(timeout, handler.serve_with_lifecycle(transport, lifecycle));
    let mut challenge = None;
    let (error, discover_confused) = match started.await {
        Ok(Ok(service)) => {
            let endpoint = Endpoint::new(
                process.is_some(),
                http.as_ref().map(|target| target.url.as_str()),
                http.as_ref().and_then(|target| target.session.clone()),
            );
            let connection = McpConnection::new(service, name, changes, process, endpoint);
            watch_list_changes(&connection);
            return Ok(connection);
        }
        Ok(Err(error)) => {
            let confused = handshake == Handshake::Auto
                && matches!(
                    error,
                    ClientInitializeError::ExpectedInitResult(_)
                        | ClientInitializeError::ExpectedInitResponse(_)
                        | ClientInitializeError::LegacyFallbackFailed { .. }
                );
            challenge = auth_challenge(&error);
            let error = init_error(&name, error, http.as_ref());
            if challenge.is_none() && matches!(error, McpError::AuthRequired { .. }) {
                challenge = Some("Bearer".to_owned());
            }
            (error, confused)
        }
        Err(_) => (
            McpError::connect(
                &name,
                format!("the server did not complete the MCP handshake within {timeout:?}"),
            ),
            false,
        ),
    };
    let error = match (process, error) {
        (
            Some(process),
            McpError::Connect {
                server,
                message,
                source,
            },
        ) => {
            let exited = process
                .wait_exit(Duration::from_millis(500))
                .await
                .is_some();
            McpError::Connect {
                message: format!("{message}; {}", process.describe_failure(&server)),
                server,
                // A server that died is the cause; the broken pipe it left is in the message
                // already, and as a source it would be printed again after the stderr tail.
                source: if exited { None } else { source },
            }
        }
        (_, error) => error,
    };
    Err(HandshakeError {
        error,
        discover_confused,
        challenge,
    })
}

/// The `WWW-Authenticate` header of a 401 or 403 that ended the handshake.
fn auth_challenge(error: &ClientInitializeError) -> Option<String> {
    match error {
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => auth_challenge(fallback),
        ClientInitializeError::TransportError { error, .. } => match error
            .error
            .downcast_ref::<StreamableHttpError<
            reqwest::Error,
        >>()? {
            StreamableHttpError::AuthRequired(challenge) => {
                Some(challenge.www_authenticate_header.clone())
            }
            StreamableHttpError::InsufficientScope(challenge) => {
                Some(challenge.www_authenticate_header.clone())
            }
            _ => None,
        },
        _ => None,
    }
}

/// The typed error for a failed handshake.
fn init_error(name: &str, error: ClientInitializeError, http: Option<&HttpTarget>) -> McpError {
    let connect = |message: String, source: Option<ErrorSource>| McpError::Connect {
        server: name.to_owned(),
        message,
        source,
    };
    match error {
        // The discover error is expected from a legacy server; the fallback says what failed.
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
            init_error(name, *fallback, http)
        }
        ClientInitializeError::JsonRpcError(data) => match LocalFault::from_error(&data) {
            Some(fault) => http_fault(fault, http, name),
            None => connect(rejected(&data), None),
        },
        ClientInitializeError::TransportError { error, context } => {
            let failure = error
                .error
                .downcast_ref::<StreamableHttpError<reqwest::Error>>();
            if let (Some(http), Some(failure)) = (http, failure)
                && let Some(error) = http_transport_error(failure, http)
            {
                return error;
            }
            // Nothing answers at that address: say so, and not what rmcp was sending.
            if let (Some(http), Some(StreamableHttpError::Client(client))) = (http, failure)
                && client.is_connect()
            {
                let cause = root_cause(client);
                return connect(
                    format!("cannot connect to {}: {cause}", http.url),
                    Some(Arc::new(Unreachable(cause))),
                );
            }
            let source: ErrorSource = Arc::from(error.error);
            connect(
                format!("{context}: {}", chain(source.as_ref())),
                Some(source),
            )
        }
        ClientInitializeError::ConnectionClosed(context) => connect(
            format!("the connection closed while waiting for the {context}"),
            None,
        ),
        other => {
            let message = chain(&other);
            connect(message, Some(Arc::new(other)))
        }
    }
}

/// `JSON-RPC error -32601: Method not found`.
fn rejected(data: &ErrorData) -> String {
    format!(
        "the server answered with error {}: {}",
        data.code.0, data.message
    )
}

/// An HTTP failure the transport turned into an error response.
fn http_fault(fault: LocalFault, http: Option<&HttpTarget>, name: &str) -> McpError {
    match fault {
        LocalFault::Http {
            url, status: 401, ..
        } if !http.is_some_and(|h| h.credentials) => McpError::AuthRequired {
            url,
            resource_metadata: None,
            scope: None,
        },
        fault => fault.into_error(name, "the handshake"),
    }
}

/// An HTTP error rmcp kept typed: authorization challenges.
fn http_transport_error(
    error: &StreamableHttpError<reqwest::Error>,
    http: &HttpTarget,
) -> Option<McpError> {
    let header = match error {
        StreamableHttpError::AuthRequired(challenge) => &challenge.www_authenticate_header,
        StreamableHttpError::InsufficientScope(challenge) => &challenge.www_authenticate_header,
        _ => return None,
    };
    let challenge = parse_challenge(header);
    Some(McpError::AuthRequired {
        url: http.url.clone(),
        resource_metadata: challenge.resource_metadata,
        scope: challenge.scope,
    })
}

/// The innermost cause of `error` (an OS error, say).
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(deeper) = cause.source() {
        cause = deeper;
    }
    cause.to_string()
}

/// Why nothing could be reached at a server's address (the connection was refused, the host
/// not found): the innermost cause's text.
#[derive(Debug)]
struct Unreachable(String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// Whether `error` says nothing could be reached at the server's address: another transport
/// to the same URL would fare no better.
pub(crate) fn is_unreachable(error: &McpError) -> bool {
    matches!(error, McpError::Connect { source: Some(source), .. }
        if source.downcast_ref::<Unreachable>().is_some())
}

/// An error and its causes, `: `-separated.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// On 2026-07-28 sessions list changes only arrive on a `subscriptions/listen` stream. It is
/// opened only when the server advertises `tools.listChanged`, and in the background: a
/// server that never acknowledges it does not hold up the connect.
fn watch_list_changes(connection: &McpConnection) {
    let shared = connection.shared();
    let Some(info) = shared.peer.peer_info() else {
        return;
    };
    let list_changed = info
        .capabilities
        .tools
        .as_ref()
        .and_then(|tools| tools.list_changed)
        .unwrap_or(false);
    if info.protocol_version.has_initialize() || !list_changed {
        return;
    }
    let (peer, closed, name) = (
        shared.peer.clone(),
        shared.closed.clone(),
        shared.name.clone(),
    );
    tokio::spawn(async move {
        tokio::select! {
            () = closed.cancelled() => {}
            () = listen(&peer, &name) => {}
        }
    });
}

async fn listen(peer: &Peer<RoleClient>, name: &str) {
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = match peer.listen(filter).await {
        Ok(subscription) => subscription,
        Err(ServiceError::McpError(error)) if error.code == ErrorCode::METHOD_NOT_FOUND => {
            tracing::debug!(server = %name, "the server does not support subscriptions/listen");
            return;
        }
        Err(error) => {
            tracing::warn!(server = %name, %error, "subscriptions/listen failed; tool list changes will not be seen");
            return;
        }
    };
    loop {
        match subscription.next().await {
            // Counted by the transport as it is read (`Compat`); the stream only has to
            // stay open.
            Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                tracing::debug!(server = %name, "tools/list_changed (subscription)");
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(error) => {
                tracing::debug!(server = %name, %error, "list-change subscription ended");
                break;
            }
        }
    }
}
