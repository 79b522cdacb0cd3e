//! Which tool calls run without asking: read-only tools, `--allow`/`--deny` globs, `--yes`.

use aquaregia::mcp::glob_match;
use aquaregia::{READ_TOOL_OUTPUT, SEARCH_TOOLS, Tool};

/// The permission rules of a run or chat.
#[derive(Debug, Clone, Default)]
pub(crate) struct Permissions {
    /// Allow everything not denied.
    pub(crate) yes: bool,
    /// Ask for read-only tools too.
    pub(crate) ask_all: bool,
    /// Globs of tools allowed without asking.
    pub(crate) allow: Vec<String>,
    /// Globs of tools never run.
    pub(crate) deny: Vec<String>,
}

/// What to do with one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allow,
    Deny(String),
    Ask,
}

impl Permissions {
    pub(crate) fn verdict(&self, tool: &Tool) -> Verdict {
        let name = tool.name();
        if let Some(glob) = self.deny.iter().find(|glob| glob_match(glob, name)) {
            return Verdict::Deny(format!("blocked by the deny rule `{glob}`"));
        }
        let read_only = tool.hints_trusted() && tool.annotations().read_only == Some(true);
        // The agent's own built-ins (reading a kept output, searching tools) touch nothing.
        let builtin = [READ_TOOL_OUTPUT, SEARCH_TOOLS].contains(&name);
        if self.yes
            || builtin
            || self.allow.iter().any(|glob| glob_match(glob, name))
            || (read_only && !self.ask_all)
        {
            Verdict::Allow
        } else {
            Verdict::Ask
        }
    }
}
