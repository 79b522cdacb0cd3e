//! Where incoming `mcp/message` traffic goes: one [`Route`] per transport, found by the
//! connect-based binding's `connectionId` or by the stateless binding's server id and active
//! request id ([`Routes`]).

use std::collections::HashMap;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::Responder;
use aquaregia::sync::lock;
use rmcp::model::{RequestId, ServerJsonRpcMessage};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Where incoming `mcp/message` traffic for one transport goes.
#[derive(Clone)]
pub(crate) struct Route {
    /// Unique per transport on this connection.
    pub(crate) transport: i64,
    pub(crate) inbox: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    /// Requests from the client (connect-based binding only), answered when rmcp responds.
    pub(crate) incoming: Arc<Mutex<HashMap<RequestId, Responder>>>,
    pub(crate) next_incoming: Arc<AtomicI64>,
    /// Stateless binding: the wire `requestId` of each active inner request, mapped back to
    /// rmcp's id, to route the client's notifications to the transport that owns the
    /// request and to restore ids they name (a subscription's
    /// `io.modelcontextprotocol/subscriptionId`).
    pub(crate) wire_ids: Arc<Mutex<HashMap<String, RequestId>>>,
}

impl Route {
    /// The `requestId` the stateless binding sends for an inner request: a string (the SDKs
    /// reject numbers), prefixed with the transport so requests stay unique per server when
    /// several sessions use the same registration (the SDKs reject duplicate active ids).
    pub(crate) fn wire_id(&self, id: &RequestId) -> String {
        match id {
            RequestId::Number(number) => format!("t{}-{number}", self.transport),
            RequestId::String(text) => format!("t{}-{text}", self.transport),
        }
    }

    /// Puts rmcp's own id back where a stateless notification names its request by the
    /// wire id (a subscription's `io.modelcontextprotocol/subscriptionId`).
    pub(crate) fn restore_ids(&self, params: &mut Value) {
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

/// The live routes of one ACP connection, by server id (stateless: several sessions may use
/// one registration) and by connection id (connect-based).
#[derive(Default)]
pub(crate) struct Routes {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    by_server: HashMap<String, Vec<Route>>,
    by_connection: HashMap<String, Route>,
}

impl Routes {
    /// A stateless transport to `server_id`.
    pub(crate) fn add_stateless(&self, server_id: &str, route: Route) {
        lock(&self.table)
            .by_server
            .entry(server_id.to_owned())
            .or_default()
            .push(route);
    }

    /// A connect-based transport, `connection_id`.
    pub(crate) fn add_connection(&self, connection_id: String, route: Route) {
        lock(&self.table).by_connection.insert(connection_id, route);
    }

    /// The stateless transport `transport` to `server_id` closed.
    pub(crate) fn remove_stateless(&self, server_id: &str, transport: i64) {
        let mut table = lock(&self.table);
        if let Some(routes) = table.by_server.get_mut(server_id) {
            routes.retain(|route| route.transport != transport);
            if routes.is_empty() {
                table.by_server.remove(server_id);
            }
        }
    }

    /// The connect-based transport `connection_id` closed.
    pub(crate) fn remove_connection(&self, connection_id: &str) {
        lock(&self.table).by_connection.remove(connection_id);
    }

    /// The transport `params` is for: by `connectionId`, or (stateless) by `serverId` and the
    /// active `requestId` it belongs to.
    pub(crate) fn find(&self, params: &Value) -> Option<Route> {
        let field = |name: &str| params.get(name).and_then(Value::as_str);
        let table = lock(&self.table);
        if let Some(connection) = field("connectionId") {
            return table.by_connection.get(connection).cloned();
        }
        let request = field("requestId")?;
        table
            .by_server
            .get(field("serverId")?)?
            .iter()
            .find(|route| lock(&route.wire_ids).contains_key(request))
            .cloned()
    }
}

/// The 2026-07-28 metadata every stateless inner request carries.
pub(crate) fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}
