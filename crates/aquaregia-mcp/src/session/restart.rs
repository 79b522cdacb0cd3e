//! Restarting a stdio server that died: the next tool call starts it again (a few tries,
//! with backoff, logged) and runs on the new session. How to start it is the connector's
//! business (a closure); this is the bookkeeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;

use crate::error::McpError;

/// Tries per restart: the first at once, then after 200 ms and 800 ms.
const TRIES: u32 = 3;
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// Starts a new session.
pub(crate) type Start<C> = Arc<dyn Fn() -> BoxFuture<'static, Result<C, McpError>> + Send + Sync>;

/// A session that can stand in for a dead one.
pub(crate) trait Replaceable: Clone + Send + 'static {
    /// Whether it has ended.
    fn is_closed(&self) -> bool;
    /// Ends it.
    fn close(self) -> BoxFuture<'static, ()>;
}

/// How to start a server again, and the session that replaced the first one.
pub(crate) struct Restart<C> {
    start: Start<C>,
    /// Restarts left for the life of the connection.
    left: AtomicU32,
    replacement: tokio::sync::Mutex<Option<C>>,
    name: String,
}

impl<C: Replaceable> Restart<C> {
    /// Starts server `name` again with `start`, at most `max` times.
    pub(crate) fn new(start: Start<C>, name: &str, max: u32) -> Self {
        Self {
            start,
            left: AtomicU32::new(max),
            replacement: tokio::sync::Mutex::new(None),
            name: name.to_owned(),
        }
    }

    /// The live session that replaces the dead one: the current replacement, or a new one
    /// (then `true`).
    pub(crate) async fn session(&self) -> Result<(C, bool), McpError> {
        let mut replacement = self.replacement.lock().await;
        if let Some(connection) = replacement.as_ref()
            && !connection.is_closed()
        {
            return Ok((connection.clone(), false));
        }
        if let Some(dead) = replacement.take() {
            dead.close().await;
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
            connection.close().await;
        }
    }
}
