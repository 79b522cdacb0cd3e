//! The session settings family: `session/set_mode` and `session/set_config_option` (the
//! `mode` and, when the agent offers a choice, the `model`). A change is told to the client
//! (`current_mode_update`, `config_option_update`) and kept in the store.

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};

use crate::config;
use crate::connection::Connection;
use crate::rpc::invalid_params;
use crate::session::Session;
use crate::state::Mode;
use crate::updates;

/// `session/set_mode`.
pub(crate) fn set_mode(
    connection: &Connection,
    request: &SetSessionModeRequest,
    cx: &ConnectionTo<Client>,
) -> Result<SetSessionModeResponse, agent_client_protocol::Error> {
    let session = connection.sessions.get(&request.session_id.0)?;
    switch_mode(connection, &session, &request.mode_id.0, cx)?;
    updates::send(
        cx,
        &session.id,
        updates::config_options(connection.config_options(&session)),
    );
    Ok(SetSessionModeResponse::new())
}

/// `session/set_config_option`: the mode, or the model among the session's.
pub(crate) fn set_config_option(
    connection: &Connection,
    request: &SetSessionConfigOptionRequest,
    cx: &ConnectionTo<Client>,
) -> Result<SetSessionConfigOptionResponse, agent_client_protocol::Error> {
    let session = connection.sessions.get(&request.session_id.0)?;
    let value = request
        .value
        .as_value_id()
        .map(|value| value.0.to_string())
        .ok_or_else(|| invalid_params("the value must be a value id"))?;
    match &*request.config_id.0 {
        config::MODE => switch_mode(connection, &session, &value, cx)?,
        config::MODEL if connection.settings.models.is_some() => {
            let known = session.state.with(|state| {
                let known = state.models.contains(&value);
                if known {
                    state.model = Some(value.clone());
                }
                known
            });
            if !known {
                return Err(invalid_params(format!("unknown model `{value}`")));
            }
            tracing::info!(session = %session.id, model = %value, "model switched");
            connection.remember(&session, cx);
        }
        other => {
            return Err(invalid_params(format!("unknown config option `{other}`")));
        }
    }
    Ok(SetSessionConfigOptionResponse::new(
        connection.config_options(&session),
    ))
}

/// Switches the mode and tells the client (`current_mode_update`).
fn switch_mode(
    connection: &Connection,
    session: &Arc<Session>,
    id: &str,
    cx: &ConnectionTo<Client>,
) -> Result<(), agent_client_protocol::Error> {
    let mode = Mode::parse(id).ok_or_else(|| invalid_params(format!("unknown mode `{id}`")))?;
    session.state.with(|state| state.mode = mode);
    updates::send(cx, &session.id, updates::current_mode(mode));
    connection.remember(session, cx);
    Ok(())
}
