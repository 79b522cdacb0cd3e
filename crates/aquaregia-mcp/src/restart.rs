//! Restarting a stdio server that died: the next tool call starts it again (a few tries,
//! with backoff, logged) and runs on the new session.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::process::Command;

use super::error::McpError;
use super::{Connector, McpConnection};

/// Tries per restart: the first at once, then after 200 ms and 800 ms.
const TRIES: u32 = 3;
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

type Start = Arc<dyn Fn() -> BoxFuture<'static, Result<McpConnection, McpError>> + Send + Sync>;

/// How to start a server again, and the session that replaced the first one.
pub(crate) struct Restart {
    start: Start,
    /// Restarts left for the life of the connection.
    left: AtomicU32,
    replacement: tokio::sync::Mutex<Option<McpConnection>>,
    name: String,
}

impl Restart {
    /// Restarts `command` with `connector`'s settings, at most `max` times.
    pub(crate) fn stdio(connector: &Connector, command: &Command, name: &str, max: u32) -> Self {
        let template = Mutex::new(super::connector::rebuild(command.as_std()));
        let connector = connector.clone().max_restarts(0).name(name);
        let start: Start = Arc::new(move || {
            let command = {
                let template = template.lock().unwrap_or_else(|p| p.into_inner());
                super::connector::rebuild(template.as_std())
            };
            let connector = connector.clone();
            Box::pin(async move { connector.stdio(command).await })
        });
        Self {
            start,
            left: AtomicU32::new(max),
            replacement: tokio::sync::Mutex::new(None),
            name: name.to_owned(),
        }
    }

    /// The live session that replaces the dead one: the current replacement, or a new one
    /// (then `true`).
    pub(crate) async fn session(&self) -> Result<(McpConnection, bool), McpError> {
        let mut replacement = self.replacement.lock().await;
        if let Some(connection) = replacement.as_ref()
            && !connection.is_closed()
        {
            return Ok((connection.clone(), false));
        }
        if let Some(dead) = replacement.take() {
            Box::pin(dead.close()).await;
        }
        let claimed = self
            .left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            });
        if claimed.is_err() {
            tracing::warn!(server = %self.name, "the MCP server died and will not be restarted again");
            return Err(McpError::Disconnected);
        }
        let mut backoff = FIRST_BACKOFF;
        let mut last = McpError::Disconnected;
        for attempt in 1..=TRIES {
            tracing::warn!(server = %self.name, attempt, "restarting the MCP server");
            match (self.start)().await {
                Ok(connection) => {
                    tracing::info!(server = %self.name, "MCP server restarted");
                    *replacement = Some(connection.clone());
                    return Ok((connection, true));
                }
                Err(error) => {
                    tracing::warn!(server = %self.name, attempt, %error, "restart failed");
                    last = error;
                }
            }
            if attempt < TRIES {
                tokio::time::sleep(backoff).await;
                backoff *= 4;
            }
        }
        Err(last)
    }

    /// Closes the replacement, if any.
    pub(crate) async fn close(&self) {
        let replacement = self.replacement.lock().await.take();
        if let Some(connection) = replacement {
            // A replacement has no restart of its own: this recursion is one level deep.
            Box::pin(connection.close()).await;
        }
    }
}
