//! Permission policies: one decision point for every tool call.
//!
//! A [`PermissionPolicy`] is an ordered list of rules. Each rule looks at a
//! [`PolicyRequest`] (who asks, which tool, its annotations, the call's arguments) and either
//! decides or passes; the first rule that decides wins, and a request no rule decides gets the
//! fallback, [`Decision::Ask`] unless set otherwise. The built-in rules reproduce the CLI's
//! flags (`--deny` globs, `--allow` globs, `--yes`, read-only tools run without asking);
//! user rules can be written in [Cedar](https://www.cedarpolicy.com) (feature `cedar`, see
//! [`CedarPolicy`]). Shadow policies are evaluated and logged (target
//! [`POLICY_TARGET`]) but never change a decision.
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

/// One tool call, as a policy sees it.
///
/// In Cedar terms: the principal is `Session::"<principal>"` (with attribute `front_end`), the
/// action is `Action::"call"`, the resource is `Tool::"<tool>"` (with attributes `name`,
/// `server` when known, `annotations` and `hints_trusted`), and the context holds `args` and,
/// when the caller filled it, `inside_workspace`.
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
        }
    }
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

    /// The decision for one request: the first rule that decides, else the fallback. Shadow
    /// policies are evaluated and logged after it.
    pub fn decide(&self, request: &PolicyRequest) -> Decision {
        let decision = self
            .rules
            .iter()
            .find_map(|rule| rule.decide(request))
            .unwrap_or_else(|| self.fallback.clone());
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
