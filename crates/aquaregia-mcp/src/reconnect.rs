//! Sessions re-established under a connection: HTTP sessions the transport re-initialised
//! after the server forgot them (404). Each one is logged, and reported to the tool call
//! during which it happened (as [`AgentEvent::ToolProgress`](aquaregia::AgentEvent::ToolProgress)).
//!
//! A call whose answer was still on its way when the session was replaced may or may not
//! have run on the server: it is called again only when its tool is annotated read-only or
//! idempotent. A request the server refused with 404 never ran, and rmcp sends it again on the
//! new session.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rmcp::model::{ErrorCode, ErrorData};

use aquaregia::{ProgressReporter, ToolProgress};

/// The error rmcp's Streamable HTTP transport gives a request whose answer was pending when
/// it re-initialised the session.
const REINITIALIZED: &str =
    "streamable HTTP session was re-initialized before the response arrived";

/// Counts the `initialize` requests sent after one was accepted.
#[derive(Debug, Default)]
pub(crate) struct Reconnects {
    established: AtomicBool,
    count: AtomicU64,
}

impl Reconnects {
    /// Notes an `initialize` sent to `url`: once a session was established, it re-establishes
    /// it. (Before, it is one more try of the handshake, say against a legacy server that
    /// answers 404 to every POST.)
    pub(crate) fn initializing(&self, url: &str) {
        if self.established.load(Ordering::SeqCst) {
            let count = self.count.fetch_add(1, Ordering::SeqCst) + 1;
            tracing::warn!(%url, count, "the MCP session expired; re-initialising it");
        }
    }

    /// Notes that the server accepted an `initialize`.
    pub(crate) fn established(&self) {
        self.established.store(true, Ordering::SeqCst);
    }

    /// How many times the session was re-established.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }
}

/// Whether `error` is the one a pending request gets when its session is replaced.
pub(crate) fn lost_in_reinit(error: &ErrorData) -> bool {
    error.code == ErrorCode::INTERNAL_ERROR && error.message == REINITIALIZED
}

/// Tells the running tool call, if any, that its server was reconnected.
pub(crate) fn report(message: String) {
    if let Some(reporter) = ProgressReporter::current() {
        reporter.report(ToolProgress::new(0.0).message(message));
    }
}
