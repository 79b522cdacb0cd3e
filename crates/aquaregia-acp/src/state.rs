//! One session's changing state as plain data ([`SessionState`]), behind the one lock every
//! part of the session shares ([`SharedState`]): the turn, the permission hook, the editor's
//! tools, the MCP servers' questions and tool reviews.
//!
//! Each access is one short critical section on plain data, never held across an `await`
//! (the closure of [`SharedState::with`] cannot await). The one that does I/O is an "always"
//! answer stored in the project's permission rules, which keeps the rules and their file in
//! step.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::SessionMode;
use aquaregia::Skills;
use aquaregia::permission_rules::PermissionRules;
use aquaregia::sync::lock;
use aquaregia_mcp::ServerPrompt;
use tokio_util::sync::CancellationToken;

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

/// How many URL questions shown to the client are remembered, awaiting their completion (the
/// oldest are forgotten first: a server need not ever complete one).
const SHOWN_URLS: usize = 64;

/// What changes in one session, as plain data.
pub(crate) struct SessionState {
    pub(crate) mode: Mode,
    /// The model picked for this session (`None`: the agent's default).
    pub(crate) model: Option<String>,
    /// The models it may pick from.
    pub(crate) models: Vec<String>,
    /// Its servers' prompts, offered as slash commands.
    pub(crate) commands: Vec<ServerPrompt>,
    /// Its skills (the project's, the user's and the servers'), offered as slash commands
    /// and through the skill tool.
    pub(crate) skills: Skills,
    /// The project's remembered "always" answers (`<cwd>/.aquaregia/permissions.json`).
    pub(crate) always: PermissionRules,
    /// The running prompt's cancellation token.
    prompt: Option<CancellationToken>,
    /// Prompts that arrived while another ran, waiting for their turn, oldest first.
    queued: Vec<CancellationToken>,
    /// Tool calls running now: (tool name, call id), oldest first.
    running: Vec<(String, String)>,
    /// What to tell the user at the start of the next turn (servers that failed...).
    notices: Vec<String>,
    /// Paths outside the workspace the user approved, one entry per approved call.
    outside_approved: Vec<PathBuf>,
    /// `run_command` call ids by arguments, so the tool finds the call id the hook saw.
    runs: HashMap<String, VecDeque<String>>,
    /// The URL questions sent as `elicitation/create`: server and elicitation id.
    shown_urls: VecDeque<(String, String)>,
}

impl SessionState {
    /// A new session's state in `cwd`, with the project's permission rules (a file that
    /// cannot be read is a notice for the first turn).
    pub(crate) fn new(cwd: &Path) -> Self {
        let (always, warning) = PermissionRules::load(cwd);
        let mut state = Self {
            mode: Mode::Default,
            model: None,
            models: Vec::new(),
            commands: Vec::new(),
            skills: Skills::new(),
            always,
            prompt: None,
            queued: Vec::new(),
            running: Vec::new(),
            notices: Vec::new(),
            outside_approved: Vec::new(),
            runs: HashMap::new(),
            shown_urls: VecDeque::new(),
        };
        if let Some(warning) = warning {
            state.add_notice(format!("Permission rules: {warning}\n"));
        }
        state
    }

    /// Keeps `notice` for the start of the next turn.
    pub(crate) fn add_notice(&mut self, notice: String) {
        self.notices.push(notice);
    }

    /// The notices kept so far (each is told once).
    pub(crate) fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Starts a prompt; `None` if one is already running.
    pub(crate) fn begin_prompt(&mut self) -> Option<CancellationToken> {
        if self
            .prompt
            .as_ref()
            .is_some_and(|token| !token.is_cancelled())
        {
            return None;
        }
        let token = CancellationToken::new();
        self.prompt = Some(token.clone());
        Some(token)
    }

    /// Registers a prompt that waits for the session's running one (see `turn::start`).
    pub(crate) fn queue_prompt(&mut self, token: CancellationToken) {
        self.queued.push(token);
    }

    /// Starts the queued prompt `token` now that it has the session's turn: `false` (and it
    /// is no longer queued) when another prompt holds the session, or it was cancelled.
    pub(crate) fn start_queued(&mut self, token: &CancellationToken) -> bool {
        self.queued.retain(|queued| queued != token);
        if token.is_cancelled()
            || self
                .prompt
                .as_ref()
                .is_some_and(|running| !running.is_cancelled())
        {
            return false;
        }
        self.prompt = Some(token.clone());
        true
    }

    /// Forgets the queued prompt `token` (cancelled before its turn came).
    pub(crate) fn unqueue(&mut self, token: &CancellationToken) {
        self.queued.retain(|queued| queued != token);
    }

    /// The running prompt's and every queued prompt's tokens: what `session/cancel` stops.
    pub(crate) fn prompt_tokens(&self) -> Vec<CancellationToken> {
        self.prompt.iter().chain(&self.queued).cloned().collect()
    }

    /// Whether a prompt runs now (not cancelled).
    pub(crate) fn prompt_running(&self) -> bool {
        self.prompt
            .as_ref()
            .is_some_and(|token| !token.is_cancelled())
    }

    /// Ends the prompt `token` started (a later prompt's is left alone).
    pub(crate) fn end_prompt(&mut self, token: &CancellationToken) {
        if self.prompt.as_ref().is_some_and(|current| current == token) {
            self.prompt = None;
            self.running.clear();
        }
    }

    /// The running prompt's cancellation token, if a prompt runs.
    pub(crate) fn prompt_token(&self) -> Option<CancellationToken> {
        self.prompt.clone()
    }

    /// A tool call started running.
    pub(crate) fn call_started(&mut self, name: &str, id: &str) {
        self.running.push((name.to_owned(), id.to_owned()));
    }

    /// A tool call finished.
    pub(crate) fn call_finished(&mut self, id: &str) {
        self.running.retain(|(_, running)| running != id);
    }

    /// The latest running call of one of `server`'s tools (`<server>__<tool>`).
    pub(crate) fn running_call_of(&self, server: &str) -> Option<String> {
        self.running
            .iter()
            .rev()
            .find(|(name, _)| {
                name.strip_prefix(server)
                    .is_some_and(|rest| rest.starts_with("__"))
            })
            .map(|(_, id)| id.clone())
    }

    /// The user approved one call on `path`, outside the workspace.
    pub(crate) fn approve_outside(&mut self, path: PathBuf) {
        self.outside_approved.push(path);
    }

    /// Uses up one approval of `path`; `false` if there is none.
    pub(crate) fn take_outside_approval(&mut self, path: &Path) -> bool {
        match self.outside_approved.iter().position(|p| p == path) {
            Some(index) => {
                self.outside_approved.swap_remove(index);
                true
            }
            None => false,
        }
    }

    /// Remembers the id of a `run_command` call with these `arguments` (as JSON text).
    pub(crate) fn expect_run(&mut self, arguments: String, call_id: String) {
        self.runs.entry(arguments).or_default().push_back(call_id);
    }

    /// The id of the oldest `run_command` call with these `arguments` not yet run.
    pub(crate) fn take_run(&mut self, arguments: &str) -> Option<String> {
        self.runs.get_mut(arguments).and_then(VecDeque::pop_front)
    }

    /// A URL question of `server` was shown to the client.
    pub(crate) fn url_shown(&mut self, server: String, elicitation_id: String) {
        if self.shown_urls.len() == SHOWN_URLS {
            self.shown_urls.pop_front();
        }
        self.shown_urls.push_back((server, elicitation_id));
    }

    /// Forgets a URL question of `server` that is done; `false` if it was never shown.
    pub(crate) fn url_completed(&mut self, server: &str, elicitation_id: &str) -> bool {
        let position = self
            .shown_urls
            .iter()
            .position(|(shown, id)| shown == server && id == elicitation_id);
        position.and_then(|at| self.shown_urls.remove(at)).is_some()
    }
}

/// One session's [`SessionState`] behind its one lock, shared by every part of the session.
/// Cheap to clone; clones share the state.
#[derive(Clone)]
pub(crate) struct SharedState(Arc<Mutex<SessionState>>);

impl SharedState {
    pub(crate) fn new(state: SessionState) -> Self {
        Self(Arc::new(Mutex::new(state)))
    }

    /// Runs `f` on the state under the lock.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut SessionState) -> T) -> T {
        f(&mut lock(&self.0))
    }

    /// The session's mode.
    pub(crate) fn mode(&self) -> Mode {
        self.with(|state| state.mode)
    }

    /// The running prompt's cancellation token, if a prompt runs.
    pub(crate) fn prompt_token(&self) -> Option<CancellationToken> {
        self.with(|state| state.prompt_token())
    }

    /// Keeps `notice` for the start of the next turn.
    pub(crate) fn add_notice(&self, notice: String) {
        self.with(|state| state.add_notice(notice));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_prompt_at_a_time_and_only_its_own_end_releases_it() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let mut state = SessionState::new(dir.path());
        let first = state.begin_prompt().expect("the first prompt starts");
        assert!(state.begin_prompt().is_none(), "one prompt at a time");
        state.call_started("box__echo", "call-1");
        assert_eq!(state.running_call_of("box").as_deref(), Some("call-1"));
        assert_eq!(state.running_call_of("bo"), None, "a whole server name");
        // A cancelled prompt no longer holds the session.
        first.cancel();
        let second = state.begin_prompt().expect("a new prompt after a cancel");
        state.end_prompt(&first);
        assert_eq!(
            state.prompt_token().as_ref(),
            Some(&second),
            "the old prompt's end leaves the new one"
        );
        state.end_prompt(&second);
        assert!(state.prompt_token().is_none());
        assert_eq!(state.running_call_of("box"), None, "running calls cleared");
    }

    #[test]
    fn approvals_and_shown_questions_are_used_up_once() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let mut state = SessionState::new(dir.path());
        state.approve_outside(PathBuf::from("/etc/hosts"));
        assert!(state.take_outside_approval(Path::new("/etc/hosts")));
        assert!(!state.take_outside_approval(Path::new("/etc/hosts")));
        state.expect_run("{}".into(), "call-1".into());
        state.expect_run("{}".into(), "call-2".into());
        assert_eq!(state.take_run("{}").as_deref(), Some("call-1"));
        assert_eq!(state.take_run("{}").as_deref(), Some("call-2"));
        assert_eq!(state.take_run("{}"), None);
        for i in 0..=SHOWN_URLS {
            state.url_shown("s".into(), format!("e-{i}"));
        }
        assert!(!state.url_completed("s", "e-0"), "the oldest was forgotten");
        assert!(state.url_completed("s", "e-1"));
        assert!(!state.url_completed("s", "e-1"));
        assert!(!state.url_completed("other", "e-2"));
    }
}
