//! One ACP session: its MCP servers, history, mode and permission memory, and the hooks that
//! turn tool calls into ACP updates and permission requests.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, UntypedMessage};
use aquaregia::mcp::McpToolset;
use aquaregia::{AgentHooks, Message, Tool, ToolCall, ToolCallDecision, ToolOutputStore};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::updates;

/// The session modes offered to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Ask before tool calls, except tools annotated read-only.
    Default,
    /// Never ask.
    BypassPermissions,
}

impl Mode {
    pub(crate) const ALL: [Mode; 2] = [Mode::Default, Mode::BypassPermissions];

    pub(crate) fn id(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::BypassPermissions => "bypass_permissions",
        }
    }

    pub(crate) fn parse(id: &str) -> Option<Mode> {
        Self::ALL.into_iter().find(|mode| mode.id() == id)
    }

    pub(crate) fn describe(self) -> Value {
        let (name, description) = match self {
            Mode::Default => ("Default", "Ask before running tools that are not read-only"),
            Mode::BypassPermissions => ("Bypass permissions", "Run every tool without asking"),
        };
        json!({"id": self.id(), "name": name, "description": description})
    }
}

/// What the user answered "always" for a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Always {
    Allow,
    Reject,
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Session state.
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) cwd: PathBuf,
    pub(crate) toolset: McpToolset,
    pub(crate) history: Mutex<Vec<Message>>,
    /// Cut tool outputs, readable for the whole session.
    pub(crate) output_store: ToolOutputStore,
    mode: Mutex<Mode>,
    always: Mutex<HashMap<String, Always>>,
    /// The running prompt's cancellation token.
    prompt: Mutex<Option<CancellationToken>>,
}

impl Session {
    pub(crate) fn new(id: String, cwd: PathBuf, toolset: McpToolset) -> Self {
        Self {
            id,
            cwd,
            toolset,
            history: Mutex::new(Vec::new()),
            output_store: ToolOutputStore::in_memory(),
            mode: Mutex::new(Mode::Default),
            always: Mutex::new(HashMap::new()),
            prompt: Mutex::new(None),
        }
    }

    pub(crate) fn mode(&self) -> Mode {
        *lock(&self.mode)
    }

    pub(crate) fn set_mode(&self, mode: Mode) {
        *lock(&self.mode) = mode;
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
        }
    }

    /// `session/cancel`: stops the running prompt, if any.
    pub(crate) fn cancel(&self) {
        if let Some(token) = lock(&self.prompt).as_ref() {
            token.cancel();
        }
    }

    /// Every MCP tool the session has now. A server that went away is logged and skipped.
    pub(crate) async fn mcp_tools(&self) -> Vec<Tool> {
        self.toolset.available_tools().await
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

/// Turns the agent's tool calls into ACP: the `tool_call` update, the permission request when
/// the mode asks for one, and `in_progress` once it runs.
pub(crate) struct AcpHooks {
    pub(crate) cx: ConnectionTo<Client>,
    pub(crate) session: Arc<Session>,
}

const REJECTED: &str = "the user rejected this tool call";

#[aquaregia::async_trait]
impl AgentHooks for AcpHooks {
    async fn on_tool_call_start(&self, call: &ToolCall, tool: Option<&Tool>) -> ToolCallDecision {
        let session = &self.session;
        let title = updates::title(&call.name, tool, &call.arguments);
        let kind = updates::kind(tool);
        updates::send(
            &self.cx,
            &session.id,
            updates::tool_call(&call.id, &title, kind, &call.arguments),
        );
        let remembered = lock(&session.always).get(&call.name).copied();
        let read_only = tool.is_some_and(|t| t.annotations().read_only == Some(true));
        let allowed = match (session.mode(), remembered) {
            (Mode::BypassPermissions, _) => true,
            (_, Some(Always::Allow)) => true,
            (_, Some(Always::Reject)) => false,
            (Mode::Default, None) if read_only || tool.is_none() => true,
            (Mode::Default, None) => self.ask(call, &title, kind).await,
        };
        if !allowed {
            return ToolCallDecision::Deny(REJECTED.into());
        }
        updates::send(&self.cx, &session.id, updates::in_progress(&call.id));
        ToolCallDecision::Allow
    }
}

impl AcpHooks {
    /// `session/request_permission`; "always" answers are remembered for the session.
    async fn ask(&self, call: &ToolCall, title: &str, kind: &str) -> bool {
        let params = json!({
            "sessionId": self.session.id,
            "toolCall": {
                "toolCallId": call.id,
                "title": title,
                "kind": kind,
                "status": "pending",
                "rawInput": call.arguments,
            },
            "options": [
                {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
                {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
                {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
            ],
        });
        let Ok(message) = UntypedMessage::new("session/request_permission", params) else {
            return false;
        };
        let sent = self.cx.send_request(message);
        // If the prompt is cancelled while we wait, this future is dropped: the guard tells the
        // client to stop asking.
        let mut guard = CancelOnDrop(Some(sent.cancellation_handle()));
        let reply = sent.block_task().await;
        guard.0 = None;
        let option = match &reply {
            Ok(reply) => reply
                .pointer("/outcome/optionId")
                .and_then(Value::as_str)
                .filter(|_| {
                    reply.pointer("/outcome/outcome").and_then(Value::as_str) == Some("selected")
                }),
            Err(error) => {
                tracing::warn!(error = %error.message, "session/request_permission failed");
                None
            }
        };
        let (allowed, always) = match option {
            Some("allow_once") => (true, None),
            Some("allow_always") => (true, Some(Always::Allow)),
            Some("reject_always") => (false, Some(Always::Reject)),
            _ => (false, None),
        };
        if let Some(always) = always {
            lock(&self.session.always).insert(call.name.clone(), always);
        }
        allowed
    }
}

/// Cancels an outgoing request when dropped before it was answered.
struct CancelOnDrop(Option<agent_client_protocol::RequestCancellationHandle>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            let _ = handle.cancel();
        }
    }
}
