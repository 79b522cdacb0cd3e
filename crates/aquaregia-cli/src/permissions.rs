//! Which tool calls run without asking: the SDK's [`PermissionPolicy`] built from `--deny`,
//! `--policy`, `--yes`, `--allow` and the read-only rule (see [`PermissionPolicy::standard`]).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use aquaregia::policy::{CedarPolicy, Decision, PermissionPolicy, PolicyRequest, StandardRules};
use aquaregia::{READ_TOOL_OUTPUT, SEARCH_TOOLS, Tool, ToolCall};

/// The permission rules of a run or chat.
#[derive(Debug, Clone)]
pub(crate) struct Permissions {
    policy: Arc<PermissionPolicy>,
}

impl Default for Permissions {
    fn default() -> Self {
        Self::new(false, false, Vec::new(), Vec::new(), None, None).unwrap_or_else(|_| Self {
            policy: Arc::new(PermissionPolicy::new()),
        })
    }
}

/// What to do with one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allow,
    Deny(String),
    Ask,
}

impl Permissions {
    /// `yes`: allow everything not denied; `ask_all`: ask for read-only tools too; `allow` and
    /// `deny`: tool globs; `policy` and `shadow`: Cedar files, enforced and logged only.
    ///
    /// # Errors
    /// A policy file that cannot be read or is not valid Cedar.
    pub(crate) fn new(
        yes: bool,
        ask_all: bool,
        mut allow: Vec<String>,
        deny: Vec<String>,
        policy: Option<&Path>,
        shadow: Option<&Path>,
    ) -> anyhow::Result<Self> {
        // The agent's own built-ins (reading a kept output, searching tools) touch nothing.
        allow.extend([READ_TOOL_OUTPUT.to_owned(), SEARCH_TOOLS.to_owned()]);
        let load = |path: &Path| {
            CedarPolicy::from_file(path)
                .with_context(|| format!("cannot use the policy {}", path.display()))
        };
        let mut rules = StandardRules::default();
        rules.yes = yes;
        rules.ask_all = ask_all;
        rules.allow = allow;
        rules.deny = deny;
        rules.cedar = policy.map(load).transpose()?;
        rules.shadow = shadow.map(load).transpose()?.into_iter().collect();
        Ok(Self {
            policy: Arc::new(PermissionPolicy::standard(rules)),
        })
    }

    pub(crate) fn verdict(&self, call: &ToolCall, tool: &Tool) -> Verdict {
        let request = PolicyRequest::new("cli", call, Some(tool)).front_end("cli");
        match self.policy.decide(&request) {
            Decision::Allow => Verdict::Allow,
            Decision::Deny(reason) => Verdict::Deny(reason),
            _ => Verdict::Ask,
        }
    }
}

/// The policy of `aquaregia acp`: the Cedar file's decisions first, and whatever it does not
/// match (or asks about) left to the session's mode; the shadow file only logged.
///
/// # Errors
/// A policy file that cannot be read or is not valid Cedar.
pub(crate) fn acp_policy(
    policy: Option<&Path>,
    shadow: Option<&Path>,
) -> anyhow::Result<PermissionPolicy> {
    let load = |path: &Path| {
        CedarPolicy::from_file(path)
            .with_context(|| format!("cannot use the policy {}", path.display()))
    };
    let mut rules = PermissionPolicy::new();
    if let Some(path) = policy {
        rules = rules.cedar(load(path)?);
    }
    if let Some(path) = shadow {
        rules = rules.shadow(load(path)?);
    }
    Ok(rules)
}
