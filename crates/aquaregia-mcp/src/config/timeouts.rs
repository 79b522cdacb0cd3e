//! Per-server timeouts: [`McpServerTimeouts`], and reading them from a config entry.

use std::time::Duration;

use serde_json::{Map, Value};

use super::error::ConfigError;

/// How long one server gets: to start and finish its handshake, and per tool call.
///
/// In a config file: `"startupTimeoutMs"` and `"timeout"` (milliseconds, as Claude Desktop's
/// forks spell it). `None` keeps the default of whoever connects ([`McpToolset`]: 30 s to
/// start, 300 s of inactivity per call).
///
/// [`McpToolset`]: crate::McpToolset
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct McpServerTimeouts {
    /// The connect (and handshake) timeout.
    pub connect: Option<Duration>,
    /// The per-call inactivity timeout (restarted by each progress notification).
    pub call: Option<Duration>,
}

impl McpServerTimeouts {
    /// No timeout set.
    pub fn new() -> Self {
        Self::default()
    }

    /// With a connect timeout.
    #[must_use]
    pub fn connect(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.connect = timeout.into();
        self
    }

    /// With a call timeout.
    #[must_use]
    pub fn call(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.call = timeout.into();
        self
    }

    /// Whether neither is set.
    pub fn is_empty(&self) -> bool {
        self.connect.is_none() && self.call.is_none()
    }

    /// The timeouts set here, else those of `fallback`.
    #[must_use]
    pub fn or(self, fallback: Self) -> Self {
        Self {
            connect: self.connect.or(fallback.connect),
            call: self.call.or(fallback.call),
        }
    }
}

/// Takes `"timeout"` and `"startupTimeoutMs"` out of a server entry.
pub(super) fn take_timeouts(
    name: &str,
    entry: &mut Map<String, Value>,
) -> Result<McpServerTimeouts, ConfigError> {
    let millis = |key: &str, value: Option<Value>| match value {
        None => Ok(None),
        Some(Value::Number(number)) => match number.as_u64() {
            Some(0) | None => Err(ConfigError::Invalid(format!(
                "server `{name}`: `{key}` must be a positive number of milliseconds"
            ))),
            Some(ms) => Ok(Some(Duration::from_millis(ms))),
        },
        Some(_) => Err(ConfigError::Invalid(format!(
            "server `{name}`: `{key}` must be a number of milliseconds"
        ))),
    };
    Ok(McpServerTimeouts {
        call: millis("timeout", entry.remove("timeout"))?,
        connect: millis("startupTimeoutMs", entry.remove("startupTimeoutMs"))?,
    })
}
