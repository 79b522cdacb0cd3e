//! The typed dispatcher, the one module that knows every handler family: each client request
//! is parsed into the schema's [`ClientRequest`], checked (`initialize` first, a key before
//! sessions when the agent needs one) and handed to its family: the connection
//! ([`initialize`]), the session lifecycle ([`lifecycle`], forks included), the prompt ([`turn`]), the
//! session's settings ([`modes`]) and MCP-over-ACP ([`crate::mcp_over_acp`]). Only
//! `mcp/message` (whose envelope the SDK does not type for this direction) and the raw
//! `mcpServers` entries (read one by one, so a bad entry does not sink the session) stay JSON.
//!
//! The SDK runs handlers one at a time, so anything that waits (connecting servers, a prompt,
//! a request back to the client) runs in a task spawned on the connection (it ends with it),
//! and the handler returns at once.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{ClientNotification, ClientRequest};
use agent_client_protocol::v1::{ConnectionTo, Dispatch, Responder};
use agent_client_protocol::{Client, JsonRpcMessage};
use serde_json::{Value, json};

use crate::connection::Connection;
use crate::rpc::{bounded, invalid_params, spawn};
use crate::{initialize, lifecycle, modes, steering, turn};

/// Hands one incoming message to its handler.
pub(crate) fn dispatch(connection: &Arc<Connection>, message: Dispatch, cx: &ConnectionTo<Client>) {
    match message {
        Dispatch::Request(message, responder) => {
            let (method, params) = message.into_parts();
            request(connection, &method, params, responder, cx);
        }
        Dispatch::Notification(message) => {
            let (method, params) = message.into_parts();
            notification(connection, &method, &params);
        }
        Dispatch::Response(result, router) => {
            let _ = router.route_with_result(result);
        }
    }
}

fn request(
    connection: &Arc<Connection>,
    method: &str,
    mut params: Value,
    responder: Responder,
    cx: &ConnectionTo<Client>,
) {
    if method == "mcp/message" {
        connection.acp.request(&params, responder);
        return;
    }
    if matches!(method, steering::STEER | steering::REVOKE) {
        if !connection.initialized() {
            let _ = responder.respond_with_error(
                agent_client_protocol::Error::invalid_request()
                    .data(json!({"reason": "`initialize` must come first"})),
            );
        } else if initialize::needs_key(connection) {
            let _ = responder.respond_with_error(agent_client_protocol::Error::auth_required());
        } else {
            steering::request(connection, method, params, responder, cx);
        }
        return;
    }
    // Read one by one by the lifecycle; the typed request sees an empty list.
    let servers = match take_servers(method, &mut params) {
        Ok(servers) => servers,
        Err(error) => {
            let _ = responder.respond_with_error(error);
            return;
        }
    };
    let request = match ClientRequest::parse_message(method, &params) {
        Ok(request) => request,
        Err(error) => {
            let _ = responder.respond_with_error(bounded(error));
            return;
        }
    };
    let has_store = connection.settings.store.is_some();
    match request {
        ClientRequest::InitializeRequest(request) => {
            let _ = responder
                .cast()
                .respond(initialize::initialize(connection, &request));
        }
        _ if !connection.initialized() => {
            let _ = responder.respond_with_error(
                agent_client_protocol::Error::invalid_request()
                    .data(json!({"reason": "`initialize` must come first"})),
            );
        }
        ClientRequest::AuthenticateRequest(request) => {
            let _ = responder
                .cast()
                .respond_with_result(initialize::authenticate(connection, &request));
        }
        ClientRequest::LogoutRequest(_) => {
            let _ = responder
                .cast()
                .respond_with_result(initialize::logout(connection));
        }
        ClientRequest::NewSessionRequest(_)
        | ClientRequest::LoadSessionRequest(_)
        | ClientRequest::ResumeSessionRequest(_)
        | ClientRequest::ForkSessionRequest(_)
        | ClientRequest::PromptRequest(_)
            if initialize::needs_key(connection) =>
        {
            let _ = responder.respond_with_error(agent_client_protocol::Error::auth_required());
        }
        ClientRequest::NewSessionRequest(request) => {
            let (connection, responder, task_cx) =
                (connection.clone(), responder.cast(), cx.clone());
            spawn(cx, async move {
                lifecycle::new(connection, request, servers, responder, task_cx).await;
            });
        }
        ClientRequest::LoadSessionRequest(request) if has_store => {
            let (connection, responder, task_cx) =
                (connection.clone(), responder.cast(), cx.clone());
            spawn(cx, async move {
                lifecycle::load(connection, request, servers, responder, task_cx).await;
            });
        }
        ClientRequest::ResumeSessionRequest(request) if has_store => {
            let (connection, responder, task_cx) =
                (connection.clone(), responder.cast(), cx.clone());
            spawn(cx, async move {
                lifecycle::resume(connection, request, servers, responder, task_cx).await;
            });
        }
        ClientRequest::ForkSessionRequest(request) => {
            let (connection, responder, task_cx) =
                (connection.clone(), responder.cast(), cx.clone());
            spawn(cx, async move {
                lifecycle::fork(connection, request, servers, responder, task_cx).await;
            });
        }
        ClientRequest::DeleteSessionRequest(request) if has_store => {
            let (connection, responder) = (connection.clone(), responder.cast());
            spawn(cx, async move {
                let id = request.session_id.0.to_string();
                let _ = responder.respond_with_result(lifecycle::delete(connection, id).await);
            });
        }
        ClientRequest::ListSessionsRequest(request) => {
            let (connection, responder) = (connection.clone(), responder.cast());
            spawn(cx, async move {
                let _ = responder.respond_with_result(lifecycle::list(connection, request).await);
            });
        }
        ClientRequest::CloseSessionRequest(request) => {
            lifecycle::close(connection, &request, responder.cast(), cx);
        }
        ClientRequest::PromptRequest(request) => {
            turn::start(connection, request, Some(responder.cast()), cx);
        }
        ClientRequest::SetSessionModeRequest(request) => {
            let _ = responder
                .cast()
                .respond_with_result(modes::set_mode(connection, &request, cx));
        }
        ClientRequest::SetSessionConfigOptionRequest(request) => {
            let _ = responder
                .cast()
                .respond_with_result(modes::set_config_option(connection, &request, cx));
        }
        _ => {
            let _ = responder.respond_with_error(agent_client_protocol::Error::method_not_found());
        }
    }
}

fn notification(connection: &Connection, method: &str, params: &Value) {
    if method == "mcp/message" {
        connection.acp.notification(params);
        return;
    }
    match ClientNotification::parse_message(method, params) {
        Ok(ClientNotification::CancelNotification(cancel)) => turn::cancel(connection, &cancel),
        // Unknown notifications, custom `_` ones included, are ignored as the spec says.
        Ok(_) => {}
        Err(error) => tracing::debug!(method, error = %error.message, "notification ignored"),
    }
}

/// Takes the raw `mcpServers` out of a session request (replacing them with `[]`), to be read
/// entry by entry.
fn take_servers(
    method: &str,
    params: &mut Value,
) -> Result<Vec<Value>, agent_client_protocol::Error> {
    if !matches!(
        method,
        "session/new" | "session/load" | "session/resume" | "session/fork"
    ) {
        return Ok(Vec::new());
    }
    let Some(object) = params.as_object_mut() else {
        return Ok(Vec::new());
    };
    match object.insert("mcpServers".into(), json!([])) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(entries)) => Ok(entries),
        Some(_) => Err(invalid_params("`mcpServers` must be an array")),
    }
}
