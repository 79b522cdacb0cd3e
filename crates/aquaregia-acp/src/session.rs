//! One ACP session: what it was opened with (id, cwd, MCP servers, the editor) and its
//! [`SharedState`].

use std::path::PathBuf;
use std::sync::Arc;

use aquaregia::{Conversation, Steering, Tool, ToolOutputStore};
use aquaregia_mcp::McpToolset;
use tokio_util::sync::CancellationToken;

use crate::editor::Editor;
use crate::state::{Mode, SharedState};

/// One open session.
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) cwd: PathBuf,
    /// The prompt-cache key of its requests (the parent's, for a fork).
    pub(crate) cache_key: String,
    pub(crate) toolset: McpToolset,
    /// The editor's files and terminal.
    pub(crate) editor: Arc<Editor>,
    /// Cut tool outputs, readable for the whole session.
    pub(crate) output_store: ToolOutputStore,
    /// Everything that changes, behind the session's one lock.
    pub(crate) state: SharedState,
    /// The conversation and where it is saved: held across the store's I/O (a turn's save,
    /// `/compact`, `/clear`), which the state's lock must never be.
    pub(crate) conversation: tokio::sync::Mutex<Conversation>,
    /// Messages for the running turn (`_session/steering`), injected at its next tool
    /// boundary.
    pub(crate) steering: Steering,
    /// Held by the prompt that runs: prompts arriving meanwhile wait for it in order.
    pub(crate) turn: tokio::sync::Mutex<()>,
}

impl Session {
    /// Releases the session when dropped, however the prompt ends (a panic included).
    pub(crate) fn prompt_guard(self: &Arc<Self>, token: CancellationToken) -> PromptGuard {
        PromptGuard {
            session: self.clone(),
            token,
        }
    }

    /// `session/cancel`: stops the running prompt, if any, the prompts queued behind it, and
    /// drops the steering messages not yet injected.
    pub(crate) fn cancel(&self) {
        for token in self.state.with(|state| state.prompt_tokens()) {
            token.cancel();
        }
        self.steering.take_pending();
    }

    /// Every MCP tool the session has now (in `plan` mode, the read-only ones). A server that
    /// went away is logged and skipped.
    /// Listing may ask the user about new or changed tools: a cancelled prompt stops it (and
    /// gets no tools).
    pub(crate) async fn mcp_tools(&self) -> Vec<Tool> {
        let listing = self.toolset.available_tools();
        let mut tools = match self.state.prompt_token() {
            Some(token) => tokio::select! {
                tools = listing => tools,
                () = token.cancelled() => Vec::new(),
            },
            None => listing.await,
        };
        if self.state.mode() == Mode::Plan {
            tools.retain(|tool| tool.annotations().read_only == Some(true));
        }
        tools
    }

    /// Closes every MCP connection (stdio groups terminated, connect-based ACP servers sent
    /// `mcp/disconnect`).
    pub(crate) async fn close(&self) {
        self.cancel();
        self.toolset.close().await;
    }
}

/// Ends its prompt when dropped: a prompt that panics does not leave its session "running"
/// forever.
pub(crate) struct PromptGuard {
    session: Arc<Session>,
    token: CancellationToken,
}

impl Drop for PromptGuard {
    fn drop(&mut self) {
        self.session
            .state
            .with(|state| state.end_prompt(&self.token));
    }
}
