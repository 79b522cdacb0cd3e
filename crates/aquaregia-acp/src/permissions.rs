//! Permission: the hooks that turn the agent's tool calls into `tool_call` updates, decide
//! them with the [`PermissionPolicy`] (the session modes are its built-in rules, see
//! [`PermissionPolicy::with_session_modes`]) and, when it says ask,
//! `session/request_permission`.

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionId, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use aquaregia::permission_rules::{PermissionRule, RuleEffect};
use aquaregia::policy::{Decision, PermissionPolicy, PolicyRequest};
use aquaregia::{AgentHooks, SubAgentSetup, Tool, ToolCall, ToolCallDecision};

use crate::builtins;
use crate::rpc::CancelOnDrop;
use crate::session::Session;
use crate::subagents::{self, Children};
use crate::trust::Trust;
use crate::updates;

/// Turns the agent's tool calls into ACP: the `tool_call` update, the permission request when
/// the policy asks for one, and `in_progress` once it runs. A subagent's calls get hooks of
/// their own that say all that on its child session (see [`subagents`]).
#[derive(Clone)]
pub(crate) struct AcpHooks {
    pub(crate) cx: ConnectionTo<Client>,
    pub(crate) session: Arc<Session>,
    /// The one decision point: the user's policy inside the session modes.
    pub(crate) policy: Arc<PermissionPolicy>,
    /// Which servers' hints are believed.
    pub(crate) trust: Arc<Trust>,
    /// The connection's subagent runs.
    pub(crate) children: Arc<Children>,
    /// Whether the client sees subagents as child sessions.
    pub(crate) subagents_exposed: bool,
    /// The child session these hooks speak for (`None`: the session's own calls).
    pub(crate) child: Option<String>,
}

const REJECTED: &str = "the user rejected this tool call";

/// What a permission question offers besides "allow once" and "reject".
struct Offer {
    /// Readable "always" rules for the call.
    always: bool,
    /// Trusting this server's hints (an untrusted server's tool that says it is read-only).
    trust_server: Option<String>,
}

#[aquaregia::async_trait]
impl AgentHooks for AcpHooks {
    async fn on_subagent_start(&self, call: &ToolCall) -> SubAgentSetup {
        let parent = self.session_id();
        let exposed = self.subagents_exposed;
        let (id, token) = self.children.start(parent, &call.id, exposed);
        if exposed {
            subagents::announce(&self.cx, parent, &id, call);
        }
        let hooks = Self {
            child: exposed.then_some(id).or_else(|| self.child.clone()),
            ..self.clone()
        };
        SubAgentSetup::new()
            .hooks(Arc::new(hooks))
            .cancellation(token)
    }

    async fn on_tool_call_start(&self, call: &ToolCall, tool: Option<&Tool>) -> ToolCallDecision {
        let session = &self.session;
        let session_id = self.session_id();
        let builtin = matches!(
            call.name.as_str(),
            builtins::READ | builtins::WRITE | builtins::EDIT | builtins::RUN
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
            if call.name == builtins::RUN {
                session.editor.expect_run(call);
            }
            session.editor.present(call).await
        } else {
            (Vec::new(), Vec::new())
        };
        updates::send(
            &self.cx,
            session_id,
            updates::tool_call(&call.id, &title, kind, &call.arguments, presented.clone()),
        );
        let server = session.toolset.server_of(&call.name);
        // A server's hints count when it is trusted: its tools say so when the listing knew
        // (the application or the pin file), the trust list when it was trusted since.
        let trusted = tool.is_none_or(Tool::hints_trusted)
            || server
                .as_deref()
                .is_some_and(|server| self.trust.trusts(server));
        let mut request = PolicyRequest::new(session.id.to_string(), call, tool)
            .front_end("acp")
            .hints_trusted(trusted)
            .mode(session.state.mode())
            // Only the agent's own file edits, which the workspace boundary judges: an MCP
            // tool whose name sounds like an edit can do anything its server lets it.
            .edit(matches!(
                call.name.as_str(),
                builtins::WRITE | builtins::EDIT
            ))
            .remembered(self.remembered(call));
        if let Some(server) = &server {
            request = request.server(server.clone());
        }
        if matches!(
            call.name.as_str(),
            builtins::READ | builtins::WRITE | builtins::EDIT
        ) {
            // Where the path really leads: outside asks whatever the mode, and a policy may
            // refuse writes outside outright.
            request = request.inside_workspace(outside.is_none());
        }
        let says_read_only = tool.is_some_and(|t| t.annotations().read_only == Some(true));
        let allowed = match self.policy.decide(&request) {
            Decision::Allow => true,
            Decision::Deny(reason) => return ToolCallDecision::Deny(reason),
            _ => {
                let offer = Offer {
                    // Outside the workspace is asked each time: no "always".
                    always: outside.is_none(),
                    trust_server: server.filter(|_| says_read_only && !trusted),
                };
                self.ask(call, &title, kind, presented, offer).await
            }
        };
        if !allowed {
            return ToolCallDecision::Deny(REJECTED.into());
        }
        if let Some(path) = outside {
            session.editor.approve_outside(path.into_path());
        }
        updates::send(&self.cx, session_id, updates::in_progress(&call.id));
        session
            .state
            .with(|state| state.call_started(&call.name, &call.id));
        ToolCallDecision::Allow
    }
}

impl AcpHooks {
    /// The session the updates and questions of these hooks' calls go to.
    fn session_id(&self) -> &str {
        self.child.as_deref().unwrap_or(&self.session.id)
    }

    /// What the project's remembered rules say about this call (`None`: nothing).
    fn remembered(&self, call: &ToolCall) -> Option<RuleEffect> {
        self.session
            .state
            .with(|state| state.always.decide(&call.name, &call.arguments))
    }

    /// Keeps an "always" answer as a rule for the project; a rule that cannot be stored is
    /// still kept for this session, and the user is told at the next turn.
    fn remember(&self, rule: PermissionRule) {
        // Under the session's lock, so the rules and their file stay in step; a rare write.
        self.session.state.with(|state| {
            if let Err(error) = state.always.add(rule) {
                state.add_notice(format!("Could not store the permission rule: {error}\n"));
            }
        });
    }

    /// Trusts `server`'s hints from now on; trust that cannot be stored still holds until the
    /// agent stops, and the user is told at the next turn.
    fn trust_server(&self, server: &str) {
        tracing::info!(session = %self.session.id, server, "server trusted by the user");
        if let Err(error) = self.trust.trust(server) {
            self.session.state.add_notice(format!(
                "Could not store that MCP server `{server}` is trusted: {error}\n"
            ));
        }
    }

    /// `session/request_permission`, showing what the call will do (the full command, the
    /// diff, the resolved path); "always" answers (offered when `offer.always`) are remembered
    /// as a rule for the call (see [`PermissionRule::for_call`]) in the project's settings,
    /// and trusting the server (offered for an untrusted server's read-only tool) is kept
    /// with its pins.
    async fn ask(
        &self,
        call: &ToolCall,
        title: &str,
        kind: ToolKind,
        (content, locations): (Vec<ToolCallContent>, Vec<ToolCallLocation>),
        offer: Offer,
    ) -> bool {
        let allow_rule = PermissionRule::for_call(&call.name, &call.arguments, RuleEffect::Allow);
        let reject_rule = PermissionRule::for_call(&call.name, &call.arguments, RuleEffect::Reject);
        let option = |id: &'static str, name: String, kind| {
            PermissionOption::new(PermissionOptionId::new(id), name, kind)
        };
        let mut options = vec![option(
            "allow_once",
            "Allow once".into(),
            PermissionOptionKind::AllowOnce,
        )];
        if offer.always {
            options.push(option(
                "allow_always",
                format!("Always allow {}", allow_rule.short()),
                PermissionOptionKind::AllowAlways,
            ));
        }
        if let Some(server) = &offer.trust_server {
            options.push(option(
                "trust_server",
                format!(
                    "Always allow read-only tools of MCP server `{server}` (trust its \
                     readOnlyHint; {})",
                    self.trust.kept_where()
                ),
                PermissionOptionKind::AllowAlways,
            ));
        }
        options.push(option(
            "reject_once",
            "Reject".into(),
            PermissionOptionKind::RejectOnce,
        ));
        if offer.always {
            options.push(option(
                "reject_always",
                format!("Always reject {}", reject_rule.short()),
                PermissionOptionKind::RejectAlways,
            ));
        }
        let mut content = content;
        if let Some(server) = &offer.trust_server {
            // Why a tool that says it only reads is asked about.
            content.push(ToolCallContent::from(updates::text_block(&format!(
                "MCP server `{server}` says this tool only reads, but the server is not \
                 trusted, so that is not taken on its word."
            ))));
        }
        let request = RequestPermissionRequest::new(
            self.session_id().to_owned(),
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
            options,
        );
        let sent = self.cx.send_request(updates::redacted(request));
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
        match option {
            Some("allow_once") => true,
            Some("allow_always") if offer.always => {
                self.remember(allow_rule);
                true
            }
            Some("trust_server") => match &offer.trust_server {
                Some(server) => {
                    self.trust_server(server);
                    true
                }
                None => false,
            },
            Some("reject_always") if offer.always => {
                self.remember(reject_rule);
                false
            }
            _ => false,
        }
    }
}
