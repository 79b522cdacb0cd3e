//! Permission: the hooks that turn the agent's tool calls into `tool_call` updates and, when
//! the session's mode asks for it, `session/request_permission`.

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionId, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use aquaregia::policy::{Decision, PermissionPolicy, PolicyRequest};
use aquaregia::{AgentHooks, Tool, ToolCall, ToolCallDecision};

use crate::editor;
use aquaregia::permission_rules::{PermissionRule, RuleEffect};

use crate::session::{Mode, Session, lock};
use crate::updates;

/// Turns the agent's tool calls into ACP: the `tool_call` update, the permission request when
/// the mode asks for one, and `in_progress` once it runs.
pub(crate) struct AcpHooks {
    pub(crate) cx: ConnectionTo<Client>,
    pub(crate) session: Arc<Session>,
    /// Consulted before the mode: deny refuses, allow runs, ask leaves it to the mode.
    pub(crate) policy: Option<Arc<PermissionPolicy>>,
}

const REJECTED: &str = "the user rejected this tool call";

#[aquaregia::async_trait]
impl AgentHooks for AcpHooks {
    async fn on_tool_call_start(&self, call: &ToolCall, tool: Option<&Tool>) -> ToolCallDecision {
        let session = &self.session;
        let builtin = matches!(
            call.name.as_str(),
            editor::READ | editor::WRITE | editor::EDIT | editor::RUN
        );
        // A built-in file call judged by where its path really leads.
        let outside = if builtin {
            session.editor.outside(call)
        } else {
            None
        };
        let title = match &outside {
            Some(path) => format!("{}: {path}", call.name),
            None => updates::title(&call.name, tool, &call.arguments),
        };
        let kind = updates::kind(&call.name, tool);
        let presented = if builtin {
            if call.name == editor::RUN {
                session.editor.expect_run(call);
            }
            session.editor.present(call).await
        } else {
            (Vec::new(), Vec::new())
        };
        updates::send(
            &self.cx,
            &session.id,
            updates::tool_call(&call.id, &title, kind, &call.arguments, presented.clone()),
        );
        let policy = self.policy.as_ref().map(|policy| {
            let mut request =
                PolicyRequest::new(session.id.to_string(), call, tool).front_end("acp");
            if matches!(
                call.name.as_str(),
                editor::READ | editor::WRITE | editor::EDIT
            ) {
                // Where the path really leads, for policies that refuse writes outside.
                request = request.inside_workspace(outside.is_none());
            }
            policy.decide(&request)
        });
        if let Some(Decision::Deny(reason)) = policy {
            return ToolCallDecision::Deny(reason);
        }
        let remembered = self.remembered(call);
        // ACP sessions' servers come from the editor, which has no way yet to mark one trusted:
        // their read-only hints are still believed here (the CLI believes them only for
        // trusted servers).
        let read_only = tool.is_some_and(|t| t.annotations().read_only == Some(true));
        let allowed = match (session.mode(), remembered) {
            // Only read-only tools are offered in plan mode; anything else is refused.
            (Mode::Plan, _) if !read_only => false,
            // Outside the workspace the user is asked each time, whatever the mode or policy.
            _ if outside.is_some() => self.ask(call, &title, kind, presented, false).await,
            // The policy's permits run without asking.
            _ if policy == Some(Decision::Allow) => true,
            (Mode::BypassPermissions | Mode::Plan, _) => true,
            (_, Some(RuleEffect::Allow)) => true,
            (_, Some(RuleEffect::Reject)) => false,
            (_, None) if read_only || tool.is_none() => true,
            (Mode::AcceptEdits, None) if kind == ToolKind::Edit => true,
            (Mode::Default | Mode::AcceptEdits, None) => {
                self.ask(call, &title, kind, presented, true).await
            }
            (_, Some(_)) => false,
        };
        if !allowed {
            return ToolCallDecision::Deny(REJECTED.into());
        }
        if let Some(path) = outside {
            session.editor.approve_outside(path.into_path());
        }
        updates::send(&self.cx, &session.id, updates::in_progress(&call.id));
        session.call_started(&call.name, &call.id);
        ToolCallDecision::Allow
    }
}

impl AcpHooks {
    /// What the project's remembered rules say about this call (`None`: nothing).
    fn remembered(&self, call: &ToolCall) -> Option<RuleEffect> {
        lock(&self.session.always).decide(&call.name, &call.arguments)
    }

    /// Keeps an "always" answer as a rule for the project; a rule that cannot be stored is
    /// still kept for this session, and the user is told at the next turn.
    fn remember(&self, rule: PermissionRule) {
        if let Err(error) = lock(&self.session.always).add(rule) {
            self.session
                .add_notice(format!("Could not store the permission rule: {error}\n"));
        }
    }

    /// `session/request_permission`, showing what the call will do (the full command, the
    /// diff, the resolved path); "always" answers (offered when `always`) are remembered as a
    /// rule for the call (see [`PermissionRule::for_call`]) in the project's settings.
    async fn ask(
        &self,
        call: &ToolCall,
        title: &str,
        kind: ToolKind,
        (content, locations): (Vec<ToolCallContent>, Vec<ToolCallLocation>),
        always: bool,
    ) -> bool {
        let allow_rule = PermissionRule::for_call(&call.name, &call.arguments, RuleEffect::Allow);
        let reject_rule = PermissionRule::for_call(&call.name, &call.arguments, RuleEffect::Reject);
        let allow_label = format!("Always allow {}", allow_rule.short());
        let reject_label = format!("Always reject {}", reject_rule.short());
        let option = |id: &'static str, name: &str, kind| {
            PermissionOption::new(PermissionOptionId::new(id), name.to_owned(), kind)
        };
        let request = RequestPermissionRequest::new(
            self.session.id.clone(),
            ToolCallUpdate::new(
                call.id.clone(),
                ToolCallUpdateFields::new()
                    .title(title.to_owned())
                    .kind(kind)
                    .status(ToolCallStatus::Pending)
                    .content(content)
                    .locations(locations)
                    .raw_input(call.arguments.clone()),
            ),
            if always {
                vec![
                    option("allow_once", "Allow once", PermissionOptionKind::AllowOnce),
                    option(
                        "allow_always",
                        &allow_label,
                        PermissionOptionKind::AllowAlways,
                    ),
                    option("reject_once", "Reject", PermissionOptionKind::RejectOnce),
                    option(
                        "reject_always",
                        &reject_label,
                        PermissionOptionKind::RejectAlways,
                    ),
                ]
            } else {
                vec![
                    option("allow_once", "Allow once", PermissionOptionKind::AllowOnce),
                    option("reject_once", "Reject", PermissionOptionKind::RejectOnce),
                ]
            },
        );
        let sent = self.cx.send_request(request);
        // If the prompt is cancelled while we wait, this future is dropped: the guard tells the
        // client to stop asking.
        let mut guard = CancelOnDrop(Some(sent.cancellation_handle()));
        let reply = sent.block_task().await;
        guard.0 = None;
        let option = match &reply {
            Ok(RequestPermissionResponse {
                outcome: RequestPermissionOutcome::Selected(selected),
                ..
            }) => Some(&*selected.option_id.0),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(error = %error.message, "session/request_permission failed");
                None
            }
        };
        let (allowed, remember) = match option {
            Some("allow_once") => (true, None),
            Some("allow_always") if always => (true, Some(allow_rule)),
            Some("reject_always") if always => (false, Some(reject_rule)),
            _ => (false, None),
        };
        if let Some(rule) = remember {
            self.remember(rule);
        }
        allowed
    }
}

/// Cancels an outgoing request when dropped before it was answered.
pub(crate) struct CancelOnDrop(pub(crate) Option<agent_client_protocol::RequestCancellationHandle>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            let _ = handle.cancel();
        }
    }
}
