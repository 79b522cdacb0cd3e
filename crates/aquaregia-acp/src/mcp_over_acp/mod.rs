//! MCP-over-ACP: MCP servers that live in the client, reached through the ACP connection.
//!
//! Both bindings in use are rmcp transports, so `acp` servers go through the same
//! [`aquaregia_mcp::connect`] path (handshake, tools, timeouts, cancellation, list changes)
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

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, UntypedMessage};
use aquaregia::sync::lock;
use rmcp::model::{RequestId, ServerJsonRpcMessage};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use routes::{Route, Routes, modern_meta};
use transport::{AcpTransport, Target};

/// Which MCP-over-ACP binding a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binding {
    Stateless,
    ConnectBased,
}

/// Per ACP connection: the binding in use and the live MCP-over-ACP transports.
#[derive(Default)]
pub(crate) struct McpOverAcp {
    binding: Mutex<Option<Binding>>,
    routes: Arc<Routes>,
    transports: AtomicI64,
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
                self.routes.add_stateless(server_id, route.clone());
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
                self.routes
                    .add_connection(connection_id.clone(), route.clone());
                Target::Connection { connection_id }
            }
        };
        Ok(AcpTransport::new(
            cx.clone(),
            target,
            route,
            self.routes.clone(),
            received,
        ))
    }

    /// An `mcp/message` notification from the client.
    pub(crate) fn notification(&self, params: &Value) {
        let Some(route) = self.routes.find(params) else {
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
        let Some(route) = self.routes.find(params) else {
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

mod routes;
mod transport;

#[cfg(test)]
mod tests {
    use super::*;

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
