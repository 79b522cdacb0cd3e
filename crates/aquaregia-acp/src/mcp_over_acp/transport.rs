//! The rmcp transport over the ACP connection: inner MCP messages out as `mcp/message`
//! requests and notifications (either binding), answers and client messages back in.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::ConnectionTo;
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

use aquaregia::sync::lock;

use super::routes::{Route, Routes, modern_meta};

pub(super) enum Target {
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
    routes: Arc<Routes>,
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

impl AcpTransport {
    pub(super) fn new(
        cx: ConnectionTo<Client>,
        target: Target,
        route: Route,
        routes: Arc<Routes>,
        received: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                cx,
                target,
                route,
                in_flight: Mutex::default(),
                closed: CancellationToken::new(),
                routes,
            }),
            received,
        }
    }
}

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
                self.routes
                    .remove_stateless(server_id, self.route.transport);
            }
            Target::Connection { connection_id } => {
                self.routes.remove_connection(connection_id);
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
}
