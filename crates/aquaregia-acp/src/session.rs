//! One ACP session: its MCP servers, history, mode and permission memory.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::SessionMode;
use aquaregia::permission_rules::PermissionRules;
use aquaregia::{Message, Tool, ToolOutputStore};
use aquaregia_mcp::McpToolset;
use tokio_util::sync::CancellationToken;

use crate::commands::PromptCommand;
use crate::editor::Editor;
pub(crate) use aquaregia::sync::lock;

/// The session modes offered to clients: the policy's built-in session modes.
pub(crate) use aquaregia::policy::PermissionMode as Mode;

/// How a mode is offered to clients.
pub(crate) fn describe(mode: Mode) -> SessionMode {
    let (name, description) = match mode {
        Mode::AcceptEdits => (
            "Accept edits",
            "Edit files without asking; ask before other tools that are not read-only",
        ),
        Mode::BypassPermissions => ("Bypass permissions", "Run every tool without asking"),
        Mode::Plan => (
            "Plan",
            "Read-only tools only: look and plan, change nothing",
        ),
        _ => ("Default", "Ask before running tools that are not read-only"),
    };
    SessionMode::new(mode.id(), name).description(description.to_owned())
}

/// Session state.
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) cwd: PathBuf,
    pub(crate) toolset: McpToolset,
    /// The editor's files and terminal.
    pub(crate) editor: Arc<Editor>,
    pub(crate) history: Mutex<Vec<Message>>,
    /// Cut tool outputs, readable for the whole session.
    pub(crate) output_store: ToolOutputStore,
    mode: Mutex<Mode>,
    /// The model picked for this session (`None`: the agent's default).
    model: Mutex<Option<String>>,
    /// The models it may pick from.
    pub(crate) models: Mutex<Vec<String>>,
    /// Its servers' prompts, offered as slash commands.
    pub(crate) commands: Mutex<Vec<PromptCommand>>,
    /// The project's remembered "always" answers (`<cwd>/.aquaregia/permissions.json`).
    pub(crate) always: Mutex<PermissionRules>,
    /// The running prompt's cancellation token.
    prompt: Mutex<Option<CancellationToken>>,
    /// Tool calls running now: (tool name, call id), oldest first.
    running: Mutex<Vec<(String, String)>>,
    /// What to tell the user at the start of the next turn (servers that failed).
    notices: Mutex<Vec<String>>,
    /// How many turns the store holds for this session.
    stored_turns: AtomicU64,
}

impl Session {
    pub(crate) fn new(id: String, cwd: PathBuf, toolset: McpToolset, editor: Arc<Editor>) -> Self {
        let (rules, warning) = PermissionRules::load(&cwd);
        let session = Self {
            id,
            cwd,
            toolset,
            editor,
            history: Mutex::new(Vec::new()),
            output_store: ToolOutputStore::in_memory(),
            mode: Mutex::new(Mode::Default),
            model: Mutex::new(None),
            models: Mutex::new(Vec::new()),
            commands: Mutex::new(Vec::new()),
            always: Mutex::new(rules),
            prompt: Mutex::new(None),
            running: Mutex::new(Vec::new()),
            notices: Mutex::new(Vec::new()),
            stored_turns: AtomicU64::new(0),
        };
        if let Some(warning) = warning {
            session.add_notice(format!("Permission rules: {warning}\n"));
        }
        session
    }

    /// Keeps `notice` for the start of the next turn.
    pub(crate) fn add_notice(&self, notice: String) {
        lock(&self.notices).push(notice);
    }

    /// The notices kept so far (each is told once).
    pub(crate) fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.notices))
    }

    pub(crate) fn stored_turns(&self) -> u64 {
        self.stored_turns.load(Ordering::Acquire)
    }

    pub(crate) fn set_stored_turns(&self, turns: u64) {
        self.stored_turns.store(turns, Ordering::Release);
    }

    pub(crate) fn mode(&self) -> Mode {
        *lock(&self.mode)
    }

    pub(crate) fn set_mode(&self, mode: Mode) {
        *lock(&self.mode) = mode;
    }

    pub(crate) fn model(&self) -> Option<String> {
        lock(&self.model).clone()
    }

    pub(crate) fn set_model(&self, model: String) {
        *lock(&self.model) = Some(model);
    }

    /// Starts a prompt; `None` if one is already running.
    pub(crate) fn begin_prompt(&self) -> Option<CancellationToken> {
        let mut prompt = lock(&self.prompt);
        if prompt.as_ref().is_some_and(|token| !token.is_cancelled()) {
            return None;
        }
        let token = CancellationToken::new();
        *prompt = Some(token.clone());
        Some(token)
    }

    /// Releases the session when dropped, however the prompt ends (a panic included).
    pub(crate) fn prompt_guard(self: &Arc<Self>, token: CancellationToken) -> PromptGuard {
        PromptGuard {
            session: self.clone(),
            token,
        }
    }

    pub(crate) fn end_prompt(&self, token: &CancellationToken) {
        let mut prompt = lock(&self.prompt);
        if prompt.as_ref().is_some_and(|current| current == token) {
            *prompt = None;
            lock(&self.running).clear();
        }
    }

    /// The running prompt's cancellation token, if a prompt runs.
    pub(crate) fn prompt_token(&self) -> Option<CancellationToken> {
        lock(&self.prompt).clone()
    }

    /// A tool call started running.
    pub(crate) fn call_started(&self, name: &str, id: &str) {
        lock(&self.running).push((name.to_owned(), id.to_owned()));
    }

    /// A tool call finished.
    pub(crate) fn call_finished(&self, id: &str) {
        lock(&self.running).retain(|(_, running)| running != id);
    }

    /// The latest running call of one of `server`'s tools (`<server>__<tool>`).
    pub(crate) fn running_call_of(&self, server: &str) -> Option<String> {
        lock(&self.running)
            .iter()
            .rev()
            .find(|(name, _)| {
                name.strip_prefix(server)
                    .is_some_and(|rest| rest.starts_with("__"))
            })
            .map(|(_, id)| id.clone())
    }

    /// `session/cancel`: stops the running prompt, if any.
    pub(crate) fn cancel(&self) {
        if let Some(token) = lock(&self.prompt).as_ref() {
            token.cancel();
        }
    }

    /// Every MCP tool the session has now (in `plan` mode, the read-only ones). A server that
    /// went away is logged and skipped.
    /// Listing may ask the user about new or changed tools: a cancelled prompt stops it (and
    /// gets no tools).
    pub(crate) async fn mcp_tools(&self) -> Vec<Tool> {
        let listing = self.toolset.available_tools();
        let mut tools = match self.prompt_token() {
            Some(token) => tokio::select! {
                tools = listing => tools,
                () = token.cancelled() => Vec::new(),
            },
            None => listing.await,
        };
        if self.mode() == Mode::Plan {
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
        self.session.end_prompt(&self.token);
    }
}
