//! The steering extension: `_session/steering` puts a message into the turn that is running,
//! in the shape claude-agent-acp and codex-acp ship (advertised as the top-level
//! `InitializeResponse._meta.steering.supported`):
//!
//! - request `{sessionId, prompt: ContentBlock[], _meta?: {steering: {idleBehavior:
//!   "promptRequired"}}}`;
//! - a turn running: the message joins it at its next tool boundary (after the running tool
//!   calls, before the next model call), answered `{outcome: "injected", messageId}`; a
//!   message that comes after the turn's last boundary runs as the next turn of the same
//!   prompt;
//! - no turn running: `{outcome: "promptRequired", reason: "noRunningTurn"}` when the client
//!   opted in, else the message starts a turn of its own: `{outcome: "startedNewTurn"}`.
//!
//! `messageId` is this agent's addition: `_session/revoke_steering {sessionId, messageId}`
//! takes a message back until it is injected (`{outcome: "revoked"}`, else
//! `{outcome: "notPending"}`), as the ACP `session/inject` proposal's `revoke_inject` does.
//! Each message is stored with the turn at its place and replayed on `session/load` as a
//! `user_message_chunk`.

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::schema::{ContentBlock, PromptRequest};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use aquaregia::SteeringId;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::connection::Connection;
use crate::rpc::invalid_params;
use crate::{prompt, turn};

/// The steering request's method.
pub(crate) const STEER: &str = "_session/steering";
/// The revocation request's method.
pub(crate) const REVOKE: &str = "_session/revoke_steering";

/// What `initialize` advertises, in its response's `_meta`.
pub(crate) fn capability() -> Value {
    json!({"supported": true})
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SteerParams {
    session_id: String,
    prompt: Vec<ContentBlock>,
    #[serde(rename = "_meta", default)]
    meta: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RevokeParams {
    session_id: String,
    message_id: String,
}

/// Answers `_session/steering` or `_session/revoke_steering`.
pub(crate) fn request(
    connection: &Arc<Connection>,
    method: &str,
    params: Value,
    responder: Responder,
    cx: &ConnectionTo<Client>,
) {
    let result = if method == REVOKE {
        revoke(connection, params)
    } else {
        steer(connection, params, cx)
    };
    let _ = responder.respond_with_result(result);
}

fn steer(
    connection: &Arc<Connection>,
    params: Value,
    cx: &ConnectionTo<Client>,
) -> Result<Value, agent_client_protocol::Error> {
    let params: SteerParams = serde_json::from_value(params).map_err(|error| {
        invalid_params(format!(
            "`{STEER}` takes {{sessionId, prompt: ContentBlock[]}}: {error}"
        ))
    })?;
    if params.prompt.is_empty() {
        return Err(invalid_params(format!(
            "`{STEER}` needs a non-empty `prompt`"
        )));
    }
    let session = connection.sessions.get(&params.session_id)?;
    // Checked and queued under the session's lock, so the turn cannot end in between
    // unseen: a message queued just after its last boundary runs as the next turn.
    let id = session.state.with(|state| {
        state
            .prompt_running()
            .then(|| session.steering.send_parts(prompt::parts(&params.prompt)))
    });
    if let Some(id) = id {
        tracing::info!(session = %session.id, message = %id, "steering message queued for the running turn");
        return Ok(json!({"outcome": "injected", "messageId": id.to_string()}));
    }
    let prompt_required = params
        .meta
        .as_ref()
        .and_then(|meta| meta.pointer("/steering/idleBehavior"))
        .and_then(Value::as_str)
        == Some("promptRequired");
    if prompt_required {
        return Ok(json!({"outcome": "promptRequired", "reason": "noRunningTurn"}));
    }
    turn::start(
        connection,
        PromptRequest::new(params.session_id, params.prompt),
        None,
        cx,
    );
    Ok(json!({"outcome": "startedNewTurn"}))
}

fn revoke(connection: &Connection, params: Value) -> Result<Value, agent_client_protocol::Error> {
    let params: RevokeParams = serde_json::from_value(params).map_err(|error| {
        invalid_params(format!(
            "`{REVOKE}` takes {{sessionId, messageId}}: {error}"
        ))
    })?;
    let session = connection.sessions.get(&params.session_id)?;
    let id =
        params.message_id.parse().map(SteeringId).map_err(|_| {
            invalid_params(format!("unknown steering message `{}`", params.message_id))
        })?;
    let outcome = if session.steering.revoke(id) {
        "revoked"
    } else {
        "notPending"
    };
    Ok(json!({"outcome": outcome}))
}
