//! Remembered permission answers ("always allow" / "always reject") as rules a person can read,
//! stored with the project's settings in `<project root>/.aquaregia/permissions.json`.
//!
//! A rule is derived from the call the user answered:
//! - a command tool (arguments with a `command` string): the command's program and, for programs
//!   known to take a subcommand (`cargo`, `git`, `npm`, ...), that subcommand, e.g. `cargo test`.
//!   A command holding shell metacharacters (`;`, `|`, `&`, `` ` ``, `$`, `<`, `>`, newlines,
//!   ...) gets the exact-arguments rule instead;
//! - a file tool (arguments with a `path` string): the path's parent directory; a later call
//!   matches when its path, taken as text with `.` and `..` resolved, lies in that directory or
//!   deeper (a path that climbs out with `..` does not match);
//! - any other tool: this tool with exactly these arguments.

use std::io;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The file, relative to the project root, that holds the rules.
pub const PERMISSIONS_FILE: &str = ".aquaregia/permissions.json";

/// The version written in (and required of) the rules file.
const VERSION: u32 = 1;

/// Programs whose second word is a subcommand, kept in a command prefix rule.
const WITH_SUBCOMMANDS: &[&str] = &[
    "cargo", "git", "npm", "pnpm", "yarn", "bun", "go", "docker", "podman", "kubectl", "pip",
    "pip3", "uv", "poetry", "make", "just", "gh", "dotnet", "mvn", "gradle", "rustup", "apt",
    "brew", "deno", "npx",
];

/// Characters that make a command more than one simple command (or expand something).
const SHELL_META: &[char] = &[
    ';', '|', '&', '`', '$', '<', '>', '\n', '\r', '(', ')', '{', '}', '*', '?', '[', ']', '~',
    '!', '#', '\\', '"', '\'',
];

/// Whether a rule allows or rejects the calls it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RuleEffect {
    /// Run matching calls without asking.
    Allow,
    /// Refuse matching calls without asking.
    Reject,
}

/// Which calls of the rule's tool a rule covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RuleScope {
    /// Commands (the `command` argument, then any `args`) whose words start with these words.
    CommandPrefix {
        /// The leading words, e.g. `["cargo", "test"]`.
        prefix: Vec<String>,
    },
    /// Calls whose `path` lies in this directory or deeper (`""`: the project root).
    Directory {
        /// The directory, as the approved call gave it, with `.`/`..` resolved as text.
        directory: String,
    },
    /// Calls with exactly these arguments.
    ExactArguments {
        /// The arguments.
        arguments: Value,
    },
}

/// One remembered answer: a tool, the calls of it covered, and allow or reject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRule {
    /// The tool's name.
    pub tool: String,
    /// The calls covered.
    #[serde(flatten)]
    pub scope: RuleScope,
    /// Allow or reject.
    pub effect: RuleEffect,
}

impl PermissionRule {
    /// The rule for "always" answered to a call of `tool` with `arguments` (see the module docs).
    pub fn for_call(tool: &str, arguments: &Value, effect: RuleEffect) -> Self {
        let scope = if let Some(words) = command_words(arguments) {
            let take = match words.first() {
                Some(program)
                    if WITH_SUBCOMMANDS.contains(&program.as_str())
                        && words.get(1).is_some_and(|word| !word.starts_with('-')) =>
                {
                    2
                }
                _ => 1,
            };
            RuleScope::CommandPrefix {
                prefix: words.into_iter().take(take).collect(),
            }
        } else if let Some(path) = arguments.get("path").and_then(Value::as_str)
            && let Some(normal) = normalize(path)
        {
            let directory = normal
                .parent()
                .map(|parent| parent.to_string_lossy().into_owned())
                .unwrap_or_default();
            RuleScope::Directory { directory }
        } else {
            RuleScope::ExactArguments {
                arguments: arguments.clone(),
            }
        };
        Self {
            tool: tool.to_owned(),
            scope,
            effect,
        }
    }

    /// Whether a call of `tool` with `arguments` is covered by this rule.
    pub fn matches(&self, tool: &str, arguments: &Value) -> bool {
        if tool != self.tool {
            return false;
        }
        match &self.scope {
            RuleScope::CommandPrefix { prefix } => command_words(arguments)
                .is_some_and(|words| !prefix.is_empty() && words.starts_with(prefix)),
            RuleScope::Directory { directory } => arguments
                .get("path")
                .and_then(Value::as_str)
                .and_then(normalize)
                .is_some_and(|path| {
                    let directory = Path::new(directory);
                    path.is_absolute() == directory.is_absolute() && path.starts_with(directory)
                }),
            RuleScope::ExactArguments { arguments: exact } => exact == arguments,
        }
    }

    /// What the rule covers, for a person: "run_command with commands starting `cargo test`",
    /// "write_file in `src/`", "search with {"q":"x"}".
    pub fn describe(&self) -> String {
        let tool = &self.tool;
        match &self.scope {
            RuleScope::CommandPrefix { prefix } => {
                format!("{tool} with commands starting `{}`", prefix.join(" "))
            }
            RuleScope::Directory { directory } if directory.is_empty() => {
                format!("{tool} in the project directory")
            }
            RuleScope::Directory { directory } => format!("{tool} in `{directory}/`"),
            RuleScope::ExactArguments { arguments } => format!("{tool} with {arguments}"),
        }
    }

    /// The short form for a prompt's option: "run_command `cargo test …`", "write_file in
    /// `src/`", "search with these exact arguments".
    pub fn short(&self) -> String {
        let tool = &self.tool;
        match &self.scope {
            RuleScope::CommandPrefix { prefix } => format!("{tool} `{} …`", prefix.join(" ")),
            RuleScope::Directory { .. } => self.describe(),
            RuleScope::ExactArguments { .. } => format!("{tool} with these exact arguments"),
        }
    }
}

/// The words of a simple command: `command` split on whitespace, then the `args` strings; `None`
/// when there is no `command` string, it is empty, or any part holds a shell metacharacter.
fn command_words(arguments: &Value) -> Option<Vec<String>> {
    let command = arguments.get("command")?.as_str()?;
    if command.contains(SHELL_META) {
        return None;
    }
    let mut words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
    if let Some(args) = arguments.get("args") {
        for arg in args.as_array()? {
            words.push(arg.as_str()?.to_owned());
        }
    }
    let unsafe_word = |word: &String| word.is_empty() || word.contains(SHELL_META);
    if words.is_empty() || words.iter().any(unsafe_word) {
        return None;
    }
    Some(words)
}

/// `path` with `.` and `..` resolved as text; `None` when it climbs above its start (a relative
/// path) or above the root.
fn normalize(path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() && Path::new(path).is_absolute() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

#[derive(Serialize, Deserialize)]
struct StoredRules {
    version: u32,
    rules: Vec<PermissionRule>,
}

/// A project's remembered permission rules, kept in `<root>/.aquaregia/permissions.json`.
///
/// Every change is written at once, atomically (a temporary file renamed over the old one).
#[derive(Debug, Clone, Default)]
pub struct PermissionRules {
    /// The rules file; `None`: the rules are not stored.
    file: Option<PathBuf>,
    rules: Vec<PermissionRule>,
}

impl PermissionRules {
    /// Rules kept only in memory.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// The rules stored for the project at `root`. A missing file is no rules; a file that
    /// cannot be read or parsed (or has another version) is no rules too, and the second value
    /// says why, for the caller to report; the file is then left as it is until a rule is added.
    pub fn load(root: &Path) -> (Self, Option<String>) {
        let file = root.join(PERMISSIONS_FILE);
        let mut rules = Self {
            file: Some(file.clone()),
            rules: Vec::new(),
        };
        let text = match std::fs::read(&file) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return (rules, None),
            Err(error) => {
                let why = format!("could not read {}: {error}; ignoring it", file.display());
                return (rules, Some(why));
            }
        };
        match serde_json::from_slice::<StoredRules>(&text) {
            Ok(stored) if stored.version == VERSION => {
                rules.rules = stored.rules;
                (rules, None)
            }
            Ok(stored) => {
                let why = format!(
                    "{} has version {}, this build reads version {VERSION}; ignoring it",
                    file.display(),
                    stored.version
                );
                (rules, Some(why))
            }
            Err(error) => {
                let why = format!("{} is damaged ({error}); ignoring it", file.display());
                (rules, Some(why))
            }
        }
    }

    /// The rules file, when the rules are stored.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The rules, in the order they were added.
    pub fn rules(&self) -> &[PermissionRule] {
        &self.rules
    }

    /// What the rules say about a call: `Reject` when any reject rule matches, else `Allow`
    /// when an allow rule matches, else `None` (ask).
    pub fn decide(&self, tool: &str, arguments: &Value) -> Option<RuleEffect> {
        let mut decision = None;
        for rule in self
            .rules
            .iter()
            .filter(|rule| rule.matches(tool, arguments))
        {
            match rule.effect {
                RuleEffect::Reject => return Some(RuleEffect::Reject),
                RuleEffect::Allow => decision = Some(RuleEffect::Allow),
            }
        }
        decision
    }

    /// Adds a rule (unless the same rule is there already) and saves.
    pub fn add(&mut self, rule: PermissionRule) -> io::Result<()> {
        if !self.rules.contains(&rule) {
            self.rules.push(rule);
        }
        self.save()
    }

    /// Removes the rule at `index` (0-based) and saves; `None` when there is no such rule.
    pub fn remove(&mut self, index: usize) -> Option<io::Result<PermissionRule>> {
        if index >= self.rules.len() {
            return None;
        }
        let rule = self.rules.remove(index);
        Some(self.save().map(|()| rule))
    }

    /// Removes every rule and saves.
    pub fn clear(&mut self) -> io::Result<()> {
        self.rules.clear();
        self.save()
    }

    /// Runs a `/permissions` command for a person and says what happened: no words list the
    /// rules, `clear` removes them all, `revoke <n>` removes the n-th (as listed).
    pub fn command(&mut self, input: &str) -> String {
        let words: Vec<&str> = input.split_whitespace().collect();
        match words.as_slice() {
            [] => self.listing(),
            ["clear"] => match self.clear() {
                Ok(()) => "Removed every permission rule.".to_owned(),
                Err(error) => format!("Could not store the permission rules: {error}"),
            },
            ["revoke", number] => {
                let index = number.parse::<usize>().ok().and_then(|n| n.checked_sub(1));
                match index.and_then(|index| self.remove(index)) {
                    Some(Ok(rule)) => format!("Revoked: {}.", rule.describe()),
                    Some(Err(error)) => format!("Could not store the permission rules: {error}"),
                    None => format!("There is no permission rule {number}."),
                }
            }
            _ => "Usage: /permissions, /permissions revoke <n>, /permissions clear".to_owned(),
        }
    }

    /// A numbered list for a person, one rule a line ("1. allow run_command with ..."), or a
    /// line saying there are none.
    pub fn listing(&self) -> String {
        if self.rules.is_empty() {
            return "No permission rules.".to_owned();
        }
        let mut text = String::new();
        for (index, rule) in self.rules.iter().enumerate() {
            let effect = match rule.effect {
                RuleEffect::Allow => "allow",
                RuleEffect::Reject => "reject",
            };
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!("{}. {effect} {}", index + 1, rule.describe()));
        }
        text
    }

    fn save(&self) -> io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let stored = StoredRules {
            version: VERSION,
            rules: self.rules.clone(),
        };
        let mut text = serde_json::to_vec_pretty(&stored).map_err(io::Error::other)?;
        text.push(b'\n');
        crate::files::replace(file, &text, crate::files::Access::Shared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(tool: &str, arguments: &Value) -> PermissionRule {
        PermissionRule::for_call(tool, arguments, RuleEffect::Allow)
    }

    #[test]
    fn command_prefix_rules() {
        let echo = rule("run_command", &json!({"command": "echo harmless"}));
        assert_eq!(echo.describe(), "run_command with commands starting `echo`");
        assert!(echo.matches("run_command", &json!({"command": "echo other"})));
        assert!(!echo.matches("run_command", &json!({"command": "echo a; touch pwned"})));
        assert!(!echo.matches("run_command", &json!({"command": "echo a\ntouch pwned"})));
        assert!(!echo.matches("run_command", &json!({"command": "rm -rf x"})));
        assert!(!echo.matches("other_tool", &json!({"command": "echo other"})));
        let cargo = rule(
            "run_command",
            &json!({"command": "cargo", "args": ["test", "-q"]}),
        );
        assert_eq!(cargo.short(), "run_command `cargo test …`");
        assert!(cargo.matches("run_command", &json!({"command": "cargo test --all"})));
        assert!(!cargo.matches("run_command", &json!({"command": "cargo publish"})));
        let chained = rule("run_command", &json!({"command": "echo a && rm x"}));
        assert!(matches!(chained.scope, RuleScope::ExactArguments { .. }));
        assert!(!chained.matches("run_command", &json!({"command": "echo a && rm y"})));
    }

    #[test]
    fn directory_rules() {
        let src = rule(
            "write_file",
            &json!({"path": "src/main.rs", "content": "x"}),
        );
        assert_eq!(src.describe(), "write_file in `src/`");
        assert!(src.matches("write_file", &json!({"path": "src/a/b.rs"})));
        assert!(src.matches("write_file", &json!({"path": "./src/c.rs"})));
        assert!(!src.matches("write_file", &json!({"path": "src/../etc/passwd"})));
        assert!(!src.matches("write_file", &json!({"path": "src2/x.rs"})));
        let root = rule("write_file", &json!({"path": "notes.md"}));
        assert!(!root.matches("write_file", &json!({"path": "../outside.md"})));
        assert!(!root.matches("write_file", &json!({"path": "/etc/passwd"})));
        let search = rule("search", &json!({"q": "x"}));
        assert_eq!(search.describe(), r#"search with {"q":"x"}"#);
        assert!(!search.matches("search", &json!({"q": "y"})));
    }

    #[test]
    fn stored_rules_survive_and_damage_is_reported() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("project");
        let (mut rules, warning) = PermissionRules::load(&dir);
        assert!(warning.is_none());
        rules
            .add(rule("run_command", &json!({"command": "echo hi"})))
            .unwrap();
        let (again, _) = PermissionRules::load(&dir);
        assert_eq!(again.rules(), rules.rules());
        assert_eq!(
            again.listing(),
            "1. allow run_command with commands starting `echo`"
        );
        std::fs::write(dir.join(PERMISSIONS_FILE), "{not json").unwrap();
        let (damaged, warning) = PermissionRules::load(&dir);
        assert!(damaged.rules().is_empty());
        assert!(warning.unwrap().contains("damaged"));
    }
}
