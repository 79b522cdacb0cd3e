//! MCP-over-ACP: MCP servers that live in the client, reached through the ACP connection.
//!
//! Both bindings in use are rmcp transports, so `acp` servers go through the same
//! [`aquaregia::mcp::connect`] path (handshake, tools, timeouts, cancellation, list changes)
//! as stdio and HTTP servers:
//!
//! - **stateless** (current SDKs): each MCP request is its own ACP request
//!   `mcp/message {serverId, requestId, method, params}` answered with `{result}` or `{error}`;
//!   inner cancellation is `$/cancel_request` on the outer request; notifications for an active
//!   request (e.g. a `subscriptions/listen` stream) come back as `mcp/message` notifications.
//! - **connect-based** (the original RFD, older SDKs): `mcp/connect` yields a `connectionId`,
//!   then a full MCP session runs over `mcp/message {connectionId, method, params}` in both
//!   directions, and `mcp/disconnect` ends it.
//!
//! The stateless binding is tried first; a client answering -32601, or -32602 about a
//! `connectionId`, gets the connect-based one, and the choice is remembered per client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, RequestCancellationHandle, UntypedMessage};
use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ErrorData, JsonRpcMessage, ProtocolVersion, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::Transport;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Which MCP-over-ACP binding a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binding {
    Stateless,
    ConnectBased,
}

/// Where incoming `mcp/message` traffic for one transport goes.
#[derive(Clone)]
struct Route {
    /// Unique per transport on this connection.
    transport: i64,
    inbox: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    /// Requests from the client (connect-based binding only), answered when rmcp responds.
    incoming: Arc<Mutex<HashMap<RequestId, Responder>>>,
    next_incoming: Arc<AtomicI64>,
    /// Stateless binding: the wire `requestId` of each active inner request, mapped back to
    /// rmcp's id, to route the client's notifications to the transport that owns the
    /// request and to restore ids they name (a subscription's
    /// `io.modelcontextprotocol/subscriptionId`).
    wire_ids: Arc<Mutex<HashMap<String, RequestId>>>,
}

impl Route {
    /// The `requestId` the stateless binding sends for an inner request: a string (the SDKs
    /// reject numbers), prefixed with the transport so requests stay unique per server when
    /// several sessions use the same registration (the SDKs reject duplicate active ids).
    fn wire_id(&self, id: &RequestId) -> String {
        match id {
            RequestId::Number(number) => format!("t{}-{number}", self.transport),
            RequestId::String(text) => format!("t{}-{text}", self.transport),
        }
    }

    /// Puts rmcp's own id back where a stateless notification names its request by the
    /// wire id (a subscription's `io.modelcontextprotocol/subscriptionId`).
    fn restore_ids(&self, params: &mut Value) {
        let Some(subscription) = params
            .get_mut("_meta")
            .and_then(|meta| meta.get_mut("io.modelcontextprotocol/subscriptionId"))
        else {
            return;
        };
        if let Some(original) = subscription
            .as_str()
            .and_then(|wire| lock(&self.wire_ids).get(wire).cloned())
        {
            *subscription = json!(original);
        }
    }
}

/// Per ACP connection: the binding in use and the live MCP-over-ACP transports.
#[derive(Default)]
pub(crate) struct McpOverAcp {
    binding: Mutex<Option<Binding>>,
    /// Stateless transports by server id: several sessions may use one registration.
    by_server: Mutex<HashMap<String, Vec<Route>>>,
    by_connection: Mutex<HashMap<String, Route>>,
    transports: AtomicI64,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The 2026-07-28 metadata every stateless inner request carries.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// A JSON-RPC failure from the client, for binding detection and messages.
fn is_binding_mismatch(error: &agent_client_protocol::Error) -> bool {
    let code: i32 = error.code.into();
    code == -32601
        || (code == -32602
            && (error.message.contains("connectionId")
                || error
                    .data
                    .as_ref()
                    .is_some_and(|data| data.to_string().contains("connectionId"))))
}

impl McpOverAcp {
    /// Opens a transport to the client's server `server_id`, choosing the binding (and
    /// remembering it) on first use.
    pub(crate) async fn open(
        self: &Arc<Self>,
        cx: &ConnectionTo<Client>,
        server_id: &str,
    ) -> Result<AcpTransport, String> {
        let known = *lock(&self.binding);
        let (binding, discover) = match known {
            Some(Binding::ConnectBased) => (Binding::ConnectBased, None),
            _ => match probe_stateless(cx, server_id).await {
                Ok(discover) => (Binding::Stateless, Some(discover)),
                Err(error) if known.is_none() && is_binding_mismatch(&error) => {
                    tracing::info!(
                        server_id,
                        "client speaks the connect-based MCP-over-ACP binding"
                    );
                    (Binding::ConnectBased, None)
                }
                Err(error) => {
                    return Err(format!(
                        "mcp/message to `{server_id}` failed: {}",
                        error.message
                    ));
                }
            },
        };
        *lock(&self.binding) = Some(binding);

        let (inbox, received) = mpsc::unbounded_channel();
        let route = Route {
            transport: self.transports.fetch_add(1, Ordering::Relaxed),
            inbox,
            incoming: Arc::default(),
            next_incoming: Arc::new(AtomicI64::new(1)),
            wire_ids: Arc::default(),
        };
        let target = match binding {
            Binding::Stateless => {
                lock(&self.by_server)
                    .entry(server_id.to_owned())
                    .or_default()
                    .push(route.clone());
                Target::Stateless {
                    server_id: server_id.to_owned(),
                    // A server without `server/discover` is still 2026-07-28: answer for it.
                    synthesize_discover: matches!(discover, Some(false)),
                }
            }
            Binding::ConnectBased => {
                let params = json!({"acpId": server_id, "serverId": server_id});
                let reply = cx
                    .send_request(
                        UntypedMessage::new("mcp/connect", params).map_err(|e| e.message)?,
                    )
                    .block_task()
                    .await
                    .map_err(|error| {
                        format!("mcp/connect `{server_id}` failed: {}", error.message)
                    })?;
                let connection_id = reply
                    .get("connectionId")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("mcp/connect `{server_id}` returned no connectionId"))?
                    .to_owned();
                lock(&self.by_connection).insert(connection_id.clone(), route.clone());
                Target::Connection { connection_id }
            }
        };
        Ok(AcpTransport {
            shared: Arc::new(Shared {
                cx: cx.clone(),
                target,
                route,
                in_flight: Mutex::default(),
                closed: CancellationToken::new(),
                router: self.clone(),
            }),
            received,
        })
    }

    /// An `mcp/message` notification from the client.
    pub(crate) fn notification(&self, params: &Value) {
        let Some(route) = self.route(params) else {
            tracing::debug!(%params, "mcp/message notification for no known server; dropped");
            return;
        };
        let mut inner = params.get("params").cloned().unwrap_or_else(|| json!({}));
        route.restore_ids(&mut inner);
        let message = json!({
            "jsonrpc": "2.0",
            "method": params.get("method").cloned().unwrap_or(Value::Null),
            "params": inner,
        });
        match serde_json::from_value::<ServerJsonRpcMessage>(message) {
            Ok(message) => {
                let _ = route.inbox.send(message);
            }
            Err(error) => tracing::warn!(%error, "malformed mcp/message notification"),
        }
    }

    /// An `mcp/message` request from the client (connect-based binding: `ping` and the like).
    pub(crate) fn request(&self, params: &Value, responder: Responder) {
        let Some(route) = self.route(params) else {
            let _ = responder.respond_with_error(
                agent_client_protocol::Error::invalid_params()
                    .data(json!({"reason": "unknown connectionId or serverId"})),
            );
            return;
        };
        let id = RequestId::Number(route.next_incoming.fetch_add(1, Ordering::Relaxed));
        let message = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": params.get("method").cloned().unwrap_or(Value::Null),
            "params": params.get("params").cloned().unwrap_or_else(|| json!({})),
        });
        match serde_json::from_value::<ServerJsonRpcMessage>(message) {
            Ok(message) => {
                lock(&route.incoming).insert(id, responder);
                let _ = route.inbox.send(message);
            }
            Err(error) => {
                let _ = responder.respond_with_error(
                    agent_client_protocol::Error::invalid_params()
                        .data(json!({"reason": error.to_string()})),
                );
            }
        }
    }

    /// The transport `params` is for: by `connectionId`, or (stateless) by `serverId` and the
    /// active `requestId` it belongs to.
    fn route(&self, params: &Value) -> Option<Route> {
        let field = |name: &str| params.get(name).and_then(Value::as_str);
        if let Some(connection) = field("connectionId") {
            return lock(&self.by_connection).get(connection).cloned();
        }
        let request = field("requestId")?;
        let by_server = lock(&self.by_server);
        by_server
            .get(field("serverId")?)?
            .iter()
            .find(|route| lock(&route.wire_ids).contains_key(request))
            .cloned()
    }
}

/// Sends `server/discover` the stateless way. `Ok(true)`: the server answered it;
/// `Ok(false)`: the binding works but the server has no `server/discover`.
async fn probe_stateless(
    cx: &ConnectionTo<Client>,
    server_id: &str,
) -> Result<bool, agent_client_protocol::Error> {
    // Unique: two sessions may probe the same registration at once.
    static PROBES: AtomicI64 = AtomicI64::new(1);
    let probe = PROBES.fetch_add(1, Ordering::Relaxed);
    let params = json!({
        "serverId": server_id,
        "requestId": format!("aquaregia-probe-{probe}"),
        "method": "server/discover",
        "params": {"_meta": modern_meta()},
    });
    let reply = cx
        .send_request(UntypedMessage::new("mcp/message", params)?)
        .block_task()
        .await?;
    Ok(reply.get("result").is_some())
}

enum Target {
    Stateless {
        server_id: String,
        synthesize_discover: bool,
    },
    Connection {
        connection_id: String,
    },
}

struct Shared {
    cx: ConnectionTo<Client>,
    target: Target,
    route: Route,
    /// Outer requests by inner id, to cancel them. rmcp may run a request's send and the
    /// cancellation of it concurrently, and the SDK forgets a cancel that comes before the
    /// request is published, so each side records what the other may still need.
    in_flight: Mutex<HashMap<RequestId, Flight>>,
    closed: CancellationToken,
    router: Arc<McpOverAcp>,
}

/// Where an outer request stands, seen from whichever side got there first.
enum Flight {
    /// Published; cancelling it sends `$/cancel_request`.
    Published(RequestCancellationHandle),
    /// rmcp cancelled it before it was published: cancel once it is.
    CancelRequested,
    /// Answered before it was recorded as published.
    Answered,
}

/// An rmcp transport over the ACP connection.
pub(crate) struct AcpTransport {
    shared: Arc<Shared>,
    received: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
}

/// Why a message could not go out.
#[derive(Debug, thiserror::Error)]
#[error("MCP-over-ACP: {0}")]
pub(crate) struct AcpTransportError(String);

impl Transport<RoleClient> for AcpTransport {
    type Error = AcpTransportError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let shared = self.shared.clone();
        async move { shared.send(&item) }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        tokio::select! {
            () = self.shared.closed.cancelled() => None,
            message = self.received.recv() => message,
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.shared.close();
        Ok(())
    }
}

impl Drop for AcpTransport {
    fn drop(&mut self) {
        self.shared.close();
    }
}

impl Shared {
    fn send(self: &Arc<Self>, item: &ClientJsonRpcMessage) -> Result<(), AcpTransportError> {
        if self.closed.is_cancelled() {
            return Err(AcpTransportError("the transport is closed".into()));
        }
        let Value::Object(mut item) =
            serde_json::to_value(item).map_err(|e| AcpTransportError(e.to_string()))?
        else {
            return Ok(());
        };
        let method = match item.remove("method") {
            Some(Value::String(method)) => Some(method),
            _ => None,
        };
        let id = item
            .remove("id")
            .and_then(|id| serde_json::from_value::<RequestId>(id).ok());
        let params = item.remove("params");
        match (method, id) {
            (Some(method), Some(id)) => self.send_request(id, &method, params),
            (Some(method), None) => self.send_notification(&method, params),
            (None, Some(id)) => {
                self.answer_client(&id, &Value::Object(item));
                Ok(())
            }
            (None, None) => Ok(()),
        }
    }

    fn send_request(
        self: &Arc<Self>,
        id: RequestId,
        method: &str,
        params: Option<Value>,
    ) -> Result<(), AcpTransportError> {
        let envelope = match &self.target {
            Target::Stateless {
                server_id,
                synthesize_discover,
            } => {
                if *synthesize_discover && method == "server/discover" {
                    self.deliver_result(&id, Ok(local_discover()));
                    return Ok(());
                }
                let mut params = match params {
                    Some(Value::Object(params)) => params,
                    _ => Map::new(),
                };
                // rmcp adds the modern `_meta` itself after discovery; make sure it is there.
                let meta = params
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let (Value::Object(meta), Value::Object(required)) = (meta, modern_meta()) {
                    for (key, value) in required {
                        meta.entry(key).or_insert(value);
                    }
                }
                let wire = self.route.wire_id(&id);
                lock(&self.route.wire_ids).insert(wire.clone(), id.clone());
                json!({"serverId": server_id, "requestId": wire, "method": method, "params": params})
            }
            Target::Connection { connection_id } => {
                let mut envelope = json!({"connectionId": connection_id, "method": method});
                if let Some(params) = params {
                    envelope["params"] = params;
                }
                envelope
            }
        };
        // The envelope is already JSON: build the message directly, without another copy.
        let message = UntypedMessage {
            method: "mcp/message".to_owned(),
            params: envelope,
        };
        let request = self.cx.prepare_request(message);
        let handle = request.cancellation_handle();
        let shared = self.clone();
        let stateless = matches!(self.target, Target::Stateless { .. });
        let reply_id = id.clone();
        // Answered in the connection's own dispatch, in order, with no task per request.
        request
            .on_receiving_result(move |reply| {
                shared.on_reply(&reply_id, reply, stateless);
                std::future::ready(Ok(()))
            })
            .map_err(|e| AcpTransportError(e.message))?;
        // Published now: only from here on does a cancel reach the client.
        let mut in_flight = lock(&self.in_flight);
        match in_flight.remove(&id) {
            Some(Flight::CancelRequested) => {
                let _ = handle.cancel();
            }
            Some(Flight::Answered) => {}
            Some(Flight::Published(_)) | None => {
                in_flight.insert(id, Flight::Published(handle));
            }
        }
        Ok(())
    }

    fn on_reply(
        &self,
        id: &RequestId,
        reply: Result<Value, agent_client_protocol::Error>,
        stateless: bool,
    ) {
        {
            let mut in_flight = lock(&self.in_flight);
            if in_flight.remove(id).is_none() {
                in_flight.insert(id.clone(), Flight::Answered);
            }
        }
        lock(&self.route.wire_ids).remove(&self.route.wire_id(id));
        if self.closed.is_cancelled() {
            return;
        }
        let outcome = match reply {
            // Stateless: the inner outcome is wrapped; connect-based: the result is inner.
            Ok(Value::Object(mut reply)) if stateless => {
                match (reply.remove("result"), reply.remove("error")) {
                    (Some(result), _) => Ok(result),
                    (None, Some(error)) => Err(error),
                    (None, None) => Err(json!({
                        "code": -32603,
                        "message": "mcp/message reply had neither result nor error"
                    })),
                }
            }
            Ok(reply) if stateless => Err(json!({
                "code": -32603,
                "message": format!("mcp/message reply is not an object: {reply}")
            })),
            Ok(reply) => Ok(reply),
            Err(error) => Err(json!({
                "code": i32::from(error.code),
                "message": error.message,
                "data": error.data,
            })),
        };
        self.deliver_result(id, outcome);
    }

    fn send_notification(
        &self,
        method: &str,
        params: Option<Value>,
    ) -> Result<(), AcpTransportError> {
        match &self.target {
            Target::Stateless { .. } => {
                // Inner cancellation is `$/cancel_request` on the outer request; other
                // notifications (`notifications/initialized`...) do not exist in this binding.
                if method == "notifications/cancelled" {
                    let inner = params
                        .as_ref()
                        .and_then(|p| p.get("requestId"))
                        .cloned()
                        .and_then(|id| serde_json::from_value::<RequestId>(id).ok());
                    if let Some(id) = inner {
                        let mut in_flight = lock(&self.in_flight);
                        match in_flight.remove(&id) {
                            Some(Flight::Published(handle)) => {
                                let _ = handle.cancel();
                            }
                            Some(Flight::Answered | Flight::CancelRequested) => {}
                            None => {
                                in_flight.insert(id, Flight::CancelRequested);
                            }
                        }
                    }
                }
                Ok(())
            }
            Target::Connection { connection_id } => {
                let mut envelope = json!({"connectionId": connection_id, "method": method});
                if let Some(params) = params {
                    envelope["params"] = params;
                }
                let message = UntypedMessage::new("mcp/message", envelope)
                    .map_err(|e| AcpTransportError(e.message))?;
                self.cx
                    .send_notification(message)
                    .map_err(|e| AcpTransportError(e.message))
            }
        }
    }

    /// rmcp's answer to a request the client sent us (connect-based binding).
    fn answer_client(&self, id: &RequestId, item: &Value) {
        let Some(responder) = lock(&self.route.incoming).remove(id) else {
            return;
        };
        let _ = match (item.get("result"), item.get("error")) {
            (Some(result), _) => responder.respond(result.clone()),
            (None, Some(error)) => {
                let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                responder.respond_with_error(agent_client_protocol::Error::new(
                    i32::try_from(code).unwrap_or(-32603),
                    message,
                ))
            }
            (None, None) => responder.respond(Value::Null),
        };
    }

    fn deliver_result(&self, id: &RequestId, outcome: Result<Value, Value>) {
        let message = match outcome {
            Ok(result) => serde_json::from_value::<ServerResult>(result)
                .map(|result| JsonRpcMessage::response(result, id.clone())),
            Err(error) => serde_json::from_value::<ErrorData>(error)
                .map(|error| JsonRpcMessage::error(error, Some(id.clone()))),
        };
        let message = message.unwrap_or_else(|error| {
            JsonRpcMessage::error(
                ErrorData::internal_error(format!("malformed MCP reply: {error}"), None),
                Some(id.clone()),
            )
        });
        let _ = self.route.inbox.send(message);
    }

    fn close(&self) {
        if self.closed.is_cancelled() {
            return;
        }
        self.closed.cancel();
        for (_, flight) in lock(&self.in_flight).drain() {
            if let Flight::Published(handle) = flight {
                let _ = handle.cancel();
            }
        }
        match &self.target {
            Target::Stateless { server_id, .. } => {
                let mut by_server = lock(&self.router.by_server);
                if let Some(routes) = by_server.get_mut(server_id) {
                    routes.retain(|route| route.transport != self.route.transport);
                    if routes.is_empty() {
                        by_server.remove(server_id);
                    }
                }
            }
            Target::Connection { connection_id } => {
                lock(&self.router.by_connection).remove(connection_id);
                if let Ok(message) =
                    UntypedMessage::new("mcp/disconnect", json!({"connectionId": connection_id}))
                {
                    // Fire and forget: the answer (or the closed connection) is irrelevant now.
                    self.cx.send_request(message).detach();
                }
            }
        }
    }
}

/// A `server/discover` answer for a stateless server that has none: it speaks 2026-07-28
/// (the binding says so) and may announce tool changes.
fn local_discover() -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": [ProtocolVersion::V_2026_07_28],
        "capabilities": {"tools": {"listChanged": true}},
        "ttlMs": 0,
        "cacheScope": "private",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_discover_result_is_valid() {
        let result: rmcp::model::DiscoverResult = serde_json::from_value(local_discover()).unwrap();
        assert_eq!(result.supported_versions, [ProtocolVersion::V_2026_07_28]);
    }

    #[test]
    fn binding_mismatch_detection() {
        assert!(is_binding_mismatch(
            &agent_client_protocol::Error::method_not_found()
        ));
        assert!(is_binding_mismatch(
            &agent_client_protocol::Error::invalid_params()
                .data(json!({"missing": "connectionId"}))
        ));
        assert!(!is_binding_mismatch(
            &agent_client_protocol::Error::invalid_params()
        ));
    }
}
