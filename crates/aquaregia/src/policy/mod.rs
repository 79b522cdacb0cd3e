//! Permission policies: one decision point for every tool call.
//!
//! A [`PermissionPolicy`] is an ordered list of rules. Each rule looks at a
//! [`PolicyRequest`] (who asks, which tool, its annotations, the call's arguments) and either
//! decides or passes; the first rule that decides wins, and a request no rule decides gets the
//! fallback, [`Decision::Ask`] unless set otherwise. The built-in rules reproduce the CLI's
//! flags (`--deny` globs, `--allow` globs, `--yes`, read-only tools run without asking);
//! user rules can be written in [Cedar](https://www.cedarpolicy.com) (feature `cedar`, see
//! [`CedarPolicy`]). The session modes of an editor agent ([`PermissionMode`]: `default`,
//! `accept_edits`, `bypass_permissions`, `plan`) and the project's remembered "always" answers
//! are built-in rules too ([`PermissionPolicy::with_session_modes`]). Shadow policies are
//! evaluated and logged (target [`POLICY_TARGET`]) but never change a decision.
//!
//! [`PolicyHooks`] puts a policy into an agent as [`AgentHooks`](crate::AgentHooks).
//!
//! ```
//! use aquaregia::policy::{Decision, PermissionPolicy, PolicyRequest};
//! use aquaregia::ToolCall;
//! use serde_json::json;
//!
//! let policy = PermissionPolicy::new().deny(["shell_*"]).allow(["search"]);
//! let call = ToolCall { id: "1".into(), name: "shell_exec".into(), arguments: json!({}) };
//! let request = PolicyRequest::new("session-1", &call, None);
//! assert!(matches!(policy.decide(&request), Decision::Deny(_)));
//! ```

#[cfg(feature = "cedar")]
mod cedar;
mod hooks;

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

#[cfg(feature = "cedar")]
pub use cedar::{CedarPolicy, PolicyError};
pub use hooks::{AskHandler, PolicyHooks};

use crate::message::ToolCall;
use crate::permission_rules::RuleEffect;
use crate::tool::{Tool, ToolAnnotations};

/// The `tracing` target of the policy's log lines (shadow decisions, Cedar evaluation errors).
pub const POLICY_TARGET: &str = "aquaregia::policy";

/// What a policy decided for one tool call.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run the call without asking.
    Allow,
    /// Do not run it; the model is told the call was refused, with this reason.
    Deny(String),
    /// Ask the user (or the front end's own rules) before running it.
    Ask,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Allow => f.write_str("allow"),
            Self::Deny(reason) => write!(f, "deny ({reason})"),
            Self::Ask => f.write_str("ask"),
        }
    }
}

/// How much of a session runs without asking: the modes an editor agent offers, decided by
/// [`PermissionPolicy::with_session_modes`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PermissionMode {
    /// Ask before tool calls, except read-only tools whose hints are trusted.
    Default,
    /// Like `Default`, but file edits inside the workspace run without asking.
    AcceptEdits,
    /// Run every tool without asking (a file outside the workspace still asks).
    BypassPermissions,
    /// Read-only tools only: anything else is refused, nothing is changed.
    Plan,
}

impl PermissionMode {
    /// Every mode, in the order they are offered.
    pub const ALL: [PermissionMode; 4] = [
        PermissionMode::Default,
        PermissionMode::AcceptEdits,
        PermissionMode::BypassPermissions,
        PermissionMode::Plan,
    ];

    /// The mode's id: `default`, `accept_edits`, `bypass_permissions` or `plan`.
    pub fn id(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "accept_edits",
            Self::BypassPermissions => "bypass_permissions",
            Self::Plan => "plan",
        }
    }

    /// The mode with this [`id`](Self::id), if there is one.
    pub fn parse(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.id() == id)
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One tool call, as a policy sees it.
///
/// In Cedar terms: the principal is `Session::"<principal>"` (with attribute `front_end`), the
/// action is `Action::"call"`, the resource is `Tool::"<tool>"` (with attributes `name`,
/// `server` when known, `annotations` and `hints_trusted`), and the context holds `args` and,
/// when the caller filled them, `inside_workspace` and `mode`.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyRequest {
    /// Who asks: the session id.
    pub principal: String,
    /// The front end the session runs in (`"sdk"` unless set: the CLI says `"cli"`, the ACP
    /// agent `"acp"`).
    pub front_end: String,
    /// The tool's name, as the model called it.
    pub tool: String,
    /// The MCP server the tool comes from, when the caller knows it.
    pub server: Option<String>,
    /// The tool's annotations (empty for a tool that does not exist).
    pub annotations: ToolAnnotations,
    /// Whether the tool's annotations can be believed (the tool's author, or a server the user
    /// trusts). The built-in read-only rule only allows read-only tools whose hints are
    /// trusted.
    pub hints_trusted: bool,
    /// Whether the tool exists at all.
    pub exists: bool,
    /// The call's arguments.
    pub arguments: Value,
    /// For file tools: whether the resolved path is inside the workspace (`None`: not a file
    /// operation, or not checked by the caller).
    pub inside_workspace: Option<bool>,
    /// The session's mode (`None`: the front end has no modes; the session-mode rules then
    /// pass).
    pub mode: Option<PermissionMode>,
    /// Whether the front end counts the call as a file edit (what
    /// [`PermissionMode::AcceptEdits`] runs without asking).
    pub edit: bool,
    /// What the project's remembered "always" answers say about the call (`None`: none
    /// matches, or the front end keeps none).
    pub remembered: Option<RuleEffect>,
}

impl PolicyRequest {
    /// The request for `call` of `tool` (`None`: the model named a tool that does not exist)
    /// in session `principal`, front end `"sdk"`.
    pub fn new(principal: impl Into<String>, call: &ToolCall, tool: Option<&Tool>) -> Self {
        Self {
            principal: principal.into(),
            front_end: "sdk".into(),
            tool: call.name.clone(),
            server: None,
            annotations: tool.map(|t| t.annotations().clone()).unwrap_or_default(),
            // A tool's own hints count only when its source is trusted (see `Tool::hints_trusted`).
            hints_trusted: tool.is_none_or(Tool::hints_trusted),
            exists: tool.is_some(),
            arguments: call.arguments.clone(),
            inside_workspace: None,
            mode: None,
            edit: false,
            remembered: None,
        }
    }

    /// Sets the front end.
    #[must_use]
    pub fn front_end(mut self, front_end: impl Into<String>) -> Self {
        self.front_end = front_end.into();
        self
    }

    /// Sets the MCP server the tool comes from.
    #[must_use]
    pub fn server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    /// Sets whether the tool's annotations can be believed.
    #[must_use]
    pub fn hints_trusted(mut self, trusted: bool) -> Self {
        self.hints_trusted = trusted;
        self
    }

    /// Sets whether the file operation's resolved path is inside the workspace.
    #[must_use]
    pub fn inside_workspace(mut self, inside: bool) -> Self {
        self.inside_workspace = Some(inside);
        self
    }

    /// Sets the session's mode.
    #[must_use]
    pub fn mode(mut self, mode: PermissionMode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Sets whether the call is a file edit.
    #[must_use]
    pub fn edit(mut self, edit: bool) -> Self {
        self.edit = edit;
        self
    }

    /// Sets what the project's remembered answers say about the call.
    #[must_use]
    pub fn remembered(mut self, effect: Option<RuleEffect>) -> Self {
        self.remembered = effect;
        self
    }

    /// The built-in read-only rule: the tool says it is read-only and that can be believed.
    pub fn is_trusted_read_only(&self) -> bool {
        self.annotations.read_only == Some(true) && self.hints_trusted
    }
}

/// A rule of its own: decides (`Some`) or passes (`None`).
pub type CustomRule = dyn Fn(&PolicyRequest) -> Option<Decision> + Send + Sync;

#[derive(Clone)]
enum Rule {
    Deny(Vec<String>),
    Allow(Vec<String>),
    AllowAll,
    AllowReadOnly,
    #[cfg(feature = "cedar")]
    Cedar(Arc<CedarPolicy>),
    Custom(Arc<CustomRule>),
    SessionModes(Arc<PermissionPolicy>),
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deny(globs) => f.debug_tuple("Deny").field(globs).finish(),
            Self::Allow(globs) => f.debug_tuple("Allow").field(globs).finish(),
            Self::AllowAll => f.write_str("AllowAll"),
            Self::AllowReadOnly => f.write_str("AllowReadOnly"),
            #[cfg(feature = "cedar")]
            Self::Cedar(policy) => f.debug_tuple("Cedar").field(policy).finish(),
            Self::Custom(_) => f.write_str("Custom"),
            Self::SessionModes(inner) => f.debug_tuple("SessionModes").field(inner).finish(),
        }
    }
}

impl Rule {
    fn decide(&self, request: &PolicyRequest) -> Option<Decision> {
        match self {
            Self::Deny(globs) => globs
                .iter()
                .find(|glob| glob_match(glob, &request.tool))
                .map(|glob| Decision::Deny(format!("blocked by the deny rule `{glob}`"))),
            Self::Allow(globs) => globs
                .iter()
                .any(|glob| glob_match(glob, &request.tool))
                .then_some(Decision::Allow),
            Self::AllowAll => Some(Decision::Allow),
            Self::AllowReadOnly => request.is_trusted_read_only().then_some(Decision::Allow),
            #[cfg(feature = "cedar")]
            Self::Cedar(policy) => policy.decide(request),
            Self::Custom(rule) => rule(request),
            Self::SessionModes(inner) => Some(session_modes(inner, request)),
        }
    }
}

/// Why a call that is not read-only is refused in plan mode (not the user's doing).
pub const PLAN_MODE_REFUSAL: &str =
    "not run: the session is in plan mode, where only read-only tools run and nothing is changed";

/// Why a call a remembered "always reject" rule matches is refused.
pub const REMEMBERED_REJECTION: &str = "the user rejected this tool call";

/// The session modes around the rules of `inner`, in this order (the first that decides
/// wins):
/// 1. `inner` denies: refused with its reason;
/// 2. plan mode, and the tool does not say it is read-only: refused ([`PLAN_MODE_REFUSAL`]);
/// 3. a file outside the workspace: asked, whatever the mode or `inner`;
/// 4. `inner` allows: run;
/// 5. bypass mode, or plan mode with a trusted read-only tool: run;
/// 6. a remembered answer: run or refused ([`REMEMBERED_REJECTION`]);
/// 7. a read-only tool whose hints are trusted, or a tool that does not exist (its call
///    fails as such): run;
/// 8. accept-edits mode and a file edit: run;
/// 9. anything else: asked.
///
/// Without a mode in the request, `inner` alone decides.
fn session_modes(inner: &PermissionPolicy, request: &PolicyRequest) -> Decision {
    let decided = inner.decide_quietly(request);
    let Some(mode) = request.mode else {
        return decided;
    };
    if let Decision::Deny(_) = decided {
        return decided;
    }
    let says_read_only = request.annotations.read_only == Some(true);
    if mode == PermissionMode::Plan && !says_read_only {
        return Decision::Deny(PLAN_MODE_REFUSAL.into());
    }
    if request.inside_workspace == Some(false) {
        return Decision::Ask;
    }
    if decided == Decision::Allow {
        return Decision::Allow;
    }
    match mode {
        PermissionMode::BypassPermissions => return Decision::Allow,
        PermissionMode::Plan if request.is_trusted_read_only() => return Decision::Allow,
        _ => {}
    }
    match request.remembered {
        Some(RuleEffect::Allow) => return Decision::Allow,
        Some(RuleEffect::Reject) => return Decision::Deny(REMEMBERED_REJECTION.into()),
        _ => {}
    }
    if request.is_trusted_read_only() || !request.exists {
        return Decision::Allow;
    }
    if mode == PermissionMode::AcceptEdits && request.edit {
        return Decision::Allow;
    }
    Decision::Ask
}

/// An ordered list of rules; the first that decides wins (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct PermissionPolicy {
    rules: Vec<Rule>,
    fallback: Decision,
    shadow: Vec<Rule>,
}

impl Default for PermissionPolicy {
    fn default() -> Self {
        Self::new()
    }
}

impl PermissionPolicy {
    /// No rules: every call gets the fallback, [`Decision::Ask`].
    pub fn new() -> Self {
        Self {
            rules: Vec::new(),
            fallback: Decision::Ask,
            shadow: Vec::new(),
        }
    }

    /// The CLI's rules, in this order: `deny` globs refuse; then the user's Cedar `policy`
    /// (when given) decides what it matches; then `--yes` allows everything; then `allow`
    /// globs allow; then read-only tools whose hints are trusted run unless `ask_all`; the
    /// rest asks.
    pub fn standard(rules: StandardRules) -> Self {
        let mut policy = Self::new().deny(rules.deny);
        #[cfg(feature = "cedar")]
        if let Some(cedar) = rules.cedar {
            policy = policy.cedar(cedar);
        }
        if rules.yes {
            policy = policy.allow_all();
        }
        policy = policy.allow(rules.allow);
        if !rules.ask_all {
            policy = policy.allow_read_only();
        }
        #[cfg(feature = "cedar")]
        for shadow in rules.shadow {
            policy = policy.shadow(shadow);
        }
        policy
    }

    /// Adds a rule refusing tools whose name matches one of these globs (`*` any run, `?` one
    /// character).
    #[must_use]
    pub fn deny<S: Into<String>>(mut self, globs: impl IntoIterator<Item = S>) -> Self {
        let globs: Vec<String> = globs.into_iter().map(Into::into).collect();
        if !globs.is_empty() {
            self.rules.push(Rule::Deny(globs));
        }
        self
    }

    /// Adds a rule allowing tools whose name matches one of these globs.
    #[must_use]
    pub fn allow<S: Into<String>>(mut self, globs: impl IntoIterator<Item = S>) -> Self {
        let globs: Vec<String> = globs.into_iter().map(Into::into).collect();
        if !globs.is_empty() {
            self.rules.push(Rule::Allow(globs));
        }
        self
    }

    /// Adds a rule allowing every call that reaches it.
    #[must_use]
    pub fn allow_all(mut self) -> Self {
        self.rules.push(Rule::AllowAll);
        self
    }

    /// Adds the read-only rule: tools annotated read-only, whose hints are trusted, are
    /// allowed ([`PolicyRequest::is_trusted_read_only`]).
    #[must_use]
    pub fn allow_read_only(mut self) -> Self {
        self.rules.push(Rule::AllowReadOnly);
        self
    }

    /// Adds a Cedar policy set as a rule: it decides the requests its policies match and
    /// passes the rest (see [`CedarPolicy`]).
    #[cfg(feature = "cedar")]
    #[must_use]
    pub fn cedar(mut self, policy: CedarPolicy) -> Self {
        self.rules.push(Rule::Cedar(Arc::new(policy)));
        self
    }

    /// Adds a rule of its own: `Some(decision)` decides, `None` passes to the next rule.
    #[must_use]
    pub fn rule(
        mut self,
        rule: impl Fn(&PolicyRequest) -> Option<Decision> + Send + Sync + 'static,
    ) -> Self {
        self.rules.push(Rule::Custom(Arc::new(rule)));
        self
    }

    /// Sets what a request no rule decides gets (default [`Decision::Ask`]).
    #[must_use]
    pub fn fallback(mut self, decision: Decision) -> Self {
        self.fallback = decision;
        self
    }

    /// Adds a Cedar policy in shadow mode: every request is also evaluated against it and what
    /// it would decide is logged at `info` (target [`POLICY_TARGET`]), with a `warn` when it
    /// differs from the enforced decision; it never changes the decision.
    #[cfg(feature = "cedar")]
    #[must_use]
    pub fn shadow(mut self, policy: CedarPolicy) -> Self {
        self.shadow.push(Rule::Cedar(Arc::new(policy)));
        self
    }

    /// This policy inside the session modes: the one decision point of an editor agent whose
    /// sessions have a [`PermissionMode`] (set with [`PolicyRequest::mode`]). This policy's
    /// denials win over everything; plan mode then refuses what is not read-only; a file
    /// outside the workspace then asks even where this policy or the mode would allow it;
    /// this policy's permits then run; then the mode, the project's remembered answers
    /// ([`PolicyRequest::remembered`]), trusted read-only tools and accept-edits decide, in
    /// that order, and the rest asks. A request without a mode gets this policy's decision.
    /// Shadow policies keep being logged, against the final decision.
    ///
    /// ```
    /// use aquaregia::policy::{Decision, PermissionMode, PermissionPolicy, PolicyRequest};
    /// use aquaregia::ToolCall;
    /// use serde_json::json;
    ///
    /// let policy = PermissionPolicy::new().deny(["rm_*"]).with_session_modes();
    /// let call = ToolCall { id: "1".into(), name: "write_file".into(), arguments: json!({}) };
    /// let plan = PolicyRequest::new("s", &call, None).mode(PermissionMode::Plan);
    /// assert!(matches!(policy.decide(&plan), Decision::Deny(_)));
    /// let bypass = PolicyRequest::new("s", &call, None).mode(PermissionMode::BypassPermissions);
    /// assert_eq!(policy.decide(&bypass), Decision::Allow);
    /// let outside = bypass.inside_workspace(false);
    /// assert_eq!(policy.decide(&outside), Decision::Ask);
    /// ```
    #[must_use]
    pub fn with_session_modes(mut self) -> Self {
        let shadow = std::mem::take(&mut self.shadow);
        Self {
            rules: vec![Rule::SessionModes(Arc::new(self))],
            fallback: Decision::Ask,
            shadow,
        }
    }

    /// The first rule's decision, else the fallback; no shadow logging.
    fn decide_quietly(&self, request: &PolicyRequest) -> Decision {
        self.rules
            .iter()
            .find_map(|rule| rule.decide(request))
            .unwrap_or_else(|| self.fallback.clone())
    }

    /// The decision for one request: the first rule that decides, else the fallback. Shadow
    /// policies are evaluated and logged after it.
    pub fn decide(&self, request: &PolicyRequest) -> Decision {
        let decision = self.decide_quietly(request);
        for shadow in &self.shadow {
            let would = shadow.decide(request).unwrap_or(Decision::Ask);
            if would == decision {
                tracing::info!(
                    target: POLICY_TARGET,
                    tool = %request.tool,
                    session = %request.principal,
                    "shadow policy would decide {would}, as enforced"
                );
            } else {
                tracing::warn!(
                    target: POLICY_TARGET,
                    tool = %request.tool,
                    session = %request.principal,
                    "shadow policy would decide {would}, not enforced (enforced: {decision})"
                );
            }
        }
        decision
    }
}

/// The inputs of [`PermissionPolicy::standard`].
#[non_exhaustive]
#[derive(Debug, Clone, Default)]
pub struct StandardRules {
    /// Allow everything not denied (`--yes`).
    pub yes: bool,
    /// Ask for read-only tools too (`--ask-all`).
    pub ask_all: bool,
    /// Globs of tools allowed without asking.
    pub allow: Vec<String>,
    /// Globs of tools never run; they win over everything else.
    pub deny: Vec<String>,
    /// The user's Cedar policy, decided after the deny globs.
    #[cfg(feature = "cedar")]
    pub cedar: Option<CedarPolicy>,
    /// Cedar policies evaluated in shadow mode.
    #[cfg(feature = "cedar")]
    pub shadow: Vec<CedarPolicy>,
}

/// The globs tool rules are written in (policies, `--disable-tool`, MCP toolsets' disabled
/// tools): `*` matches any run of characters, `?` one character, anything else itself.
///
/// ```
/// use aquaregia::policy::glob_match;
/// assert!(glob_match("fs__*", "fs__read_file"));
/// assert!(glob_match("e?ho", "echo"));
/// assert!(!glob_match("echo", "echo2"));
/// ```
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (pattern, text): (Vec<char>, Vec<char>) =
        (pattern.chars().collect(), text.chars().collect());
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        match (pattern.get(p), text.get(t)) {
            (Some(&c), Some(&x)) if c == '?' || (c != '*' && c == x) => {
                p += 1;
                t += 1;
            }
            (Some('*'), _) => {
                backtrack = Some((p, t));
                p += 1;
            }
            _ => match backtrack {
                Some((star, matched)) => {
                    p = star + 1;
                    t = matched + 1;
                    backtrack = Some((star, matched + 1));
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .unwrap_or_default()
        .iter()
        .all(|&c| c == '*')
}

#[cfg(test)]
mod glob_tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("fs__*", "fs__read_file"));
        assert!(glob_match("*write*", "fs__write_file"));
        assert!(glob_match("echo", "echo"));
        assert!(glob_match("e?ho", "echo"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("fs__*", "git__status"));
        assert!(!glob_match("echo", "echo2"));
        assert!(!glob_match("a*b", "a"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool;
    use serde_json::json;

    fn request(mode: PermissionMode, tool: Option<&Tool>, trusted: bool) -> PolicyRequest {
        let call = ToolCall {
            id: "1".into(),
            name: "t".into(),
            arguments: json!({}),
        };
        PolicyRequest::new("s", &call, tool)
            .mode(mode)
            .hints_trusted(trusted)
    }

    fn read_only() -> Tool {
        let mut annotations = ToolAnnotations::new();
        annotations.read_only = Some(true);
        tool("t")
            .annotations(annotations)
            .execute_raw(|_| async { Ok("") })
    }

    #[test]
    fn session_modes_decide_as_the_acp_modes_did() {
        use PermissionMode::{AcceptEdits, BypassPermissions, Default, Plan};
        let modes = PermissionPolicy::new().with_session_modes();
        let plain = tool("t").execute_raw(|_| async { Ok("") });
        let ro = read_only();
        let deny = |d: Decision| matches!(d, Decision::Deny(_));

        // Read-only tools: run when trusted, asked when not (plan included).
        for mode in PermissionMode::ALL {
            assert_eq!(
                modes.decide(&request(mode, Some(&ro), true)),
                Decision::Allow,
                "{mode}"
            );
        }
        assert_eq!(
            modes.decide(&request(Default, Some(&ro), false)),
            Decision::Ask
        );
        assert_eq!(
            modes.decide(&request(Plan, Some(&ro), false)),
            Decision::Ask
        );
        assert_eq!(
            modes.decide(&request(BypassPermissions, Some(&ro), false)),
            Decision::Allow
        );

        // Plan refuses anything else, not in the user's name.
        let refused = modes.decide(&request(Plan, Some(&plain), true));
        assert_eq!(refused, Decision::Deny(PLAN_MODE_REFUSAL.into()));
        assert!(!PLAN_MODE_REFUSAL.contains("rejected"));
        assert!(deny(modes.decide(&request(Plan, None, true))));

        // Default asks; accept-edits runs edits only; bypass runs everything.
        assert_eq!(
            modes.decide(&request(Default, Some(&plain), true)),
            Decision::Ask
        );
        assert_eq!(
            modes.decide(&request(AcceptEdits, Some(&plain), true)),
            Decision::Ask
        );
        assert_eq!(
            modes.decide(&request(AcceptEdits, Some(&plain), true).edit(true)),
            Decision::Allow
        );
        assert_eq!(
            modes.decide(&request(Default, Some(&plain), true).edit(true)),
            Decision::Ask
        );
        assert_eq!(
            modes.decide(&request(BypassPermissions, Some(&plain), true)),
            Decision::Allow
        );
        // A tool that does not exist is let through, to fail as unknown.
        assert_eq!(modes.decide(&request(Default, None, true)), Decision::Allow);

        // Remembered answers: after bypass, before the read-only rule.
        let remembered = |mode, effect| {
            modes.decide(&request(mode, Some(&plain), true).remembered(Some(effect)))
        };
        assert_eq!(remembered(Default, RuleEffect::Allow), Decision::Allow);
        assert_eq!(
            remembered(Default, RuleEffect::Reject),
            Decision::Deny(REMEMBERED_REJECTION.into())
        );
        assert_eq!(
            remembered(BypassPermissions, RuleEffect::Reject),
            Decision::Allow
        );

        // Outside the workspace asks in every mode but plan (which refuses writes first).
        for mode in [Default, AcceptEdits, BypassPermissions] {
            let outside = request(mode, Some(&ro), true).inside_workspace(false);
            assert_eq!(modes.decide(&outside), Decision::Ask, "{mode}");
            let edit = request(mode, Some(&plain), true)
                .edit(true)
                .inside_workspace(false)
                .remembered(Some(RuleEffect::Allow));
            assert_eq!(modes.decide(&edit), Decision::Ask, "{mode}");
        }
        let outside = request(Plan, Some(&ro), true).inside_workspace(false);
        assert_eq!(modes.decide(&outside), Decision::Ask);
    }

    #[test]
    fn the_users_rules_deny_first_and_allow_after_the_guards() {
        use PermissionMode::{BypassPermissions, Default, Plan};
        let policy = PermissionPolicy::new().deny(["t"]).with_session_modes();
        let plain = tool("t").execute_raw(|_| async { Ok("") });
        assert_eq!(
            policy.decide(&request(BypassPermissions, Some(&plain), true)),
            Decision::Deny("blocked by the deny rule `t`".into())
        );
        let denied_outside = request(Default, Some(&plain), true).inside_workspace(false);
        assert!(matches!(policy.decide(&denied_outside), Decision::Deny(_)));

        let allowing = PermissionPolicy::new().allow(["t"]).with_session_modes();
        assert_eq!(
            allowing.decide(&request(Default, Some(&plain), true)),
            Decision::Allow
        );
        assert_eq!(
            allowing.decide(&request(Plan, Some(&plain), true)),
            Decision::Deny(PLAN_MODE_REFUSAL.into())
        );
        let outside = request(Default, Some(&plain), true).inside_workspace(false);
        assert_eq!(allowing.decide(&outside), Decision::Ask);

        // Without a mode, the user's policy alone.
        let call = ToolCall {
            id: "1".into(),
            name: "other".into(),
            arguments: json!({}),
        };
        assert_eq!(
            allowing.decide(&PolicyRequest::new("s", &call, None)),
            Decision::Ask
        );
    }
}
