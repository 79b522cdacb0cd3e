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

/// What the rules file looked like when it was read: a change (another session or process
/// replacing it, a person editing it) shows as a different stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stamp {
    Missing,
    Present {
        len: u64,
        modified: Option<std::time::SystemTime>,
        /// Device and inode: every save renames a new file into place.
        #[cfg(unix)]
        id: (u64, u64),
    },
}

impl Stamp {
    fn of(metadata: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        let id = {
            use std::os::unix::fs::MetadataExt;
            (metadata.dev(), metadata.ino())
        };
        Self::Present {
            len: metadata.len(),
            modified: metadata.modified().ok(),
            #[cfg(unix)]
            id,
        }
    }

    /// The file's stamp now; `None` when it cannot be told.
    fn now(file: &Path) -> Option<Self> {
        match std::fs::metadata(file) {
            Ok(metadata) => Some(Self::of(&metadata)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Some(Self::Missing),
            Err(_) => None,
        }
    }
}

/// A project's remembered permission rules, kept in `<root>/.aquaregia/permissions.json`.
///
/// Every change is written at once, atomically (a temporary file renamed over the old one).
/// The file is shared by every session and process working in the project: before deciding
/// about a call, running a `/permissions` command or changing a rule, the rules are read again
/// when the file changed since they were last read, so a rule kept (or revoked) elsewhere
/// counts here too and a change made here keeps the rules stored elsewhere.
#[derive(Debug, Clone, Default)]
pub struct PermissionRules {
    /// The rules file; `None`: the rules are not stored.
    file: Option<PathBuf>,
    rules: Vec<PermissionRule>,
    /// The file as it was when `rules` were read from it; `None`: not read since it was last
    /// written here (or never).
    read: Option<Stamp>,
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
        let mut rules = Self {
            file: Some(root.join(PERMISSIONS_FILE)),
            rules: Vec::new(),
            read: None,
        };
        let warning = rules.reread();
        (rules, warning)
    }

    /// Reads the rules again if the file changed since they were last read (another session
    /// or process kept or revoked a rule). A file that cannot be read or parsed is no rules,
    /// and the returned value says why, as [`load`](Self::load) does. [`decide`](Self::decide),
    /// [`command`](Self::command) and the changes call it themselves, logging that warning.
    pub fn refresh(&mut self) -> Option<String> {
        let file = self.file.as_deref()?;
        match Stamp::now(file) {
            // Nothing can be told about the file (its directory cannot be reached, say):
            // the rules in memory stand, a rule that could not be stored included.
            None => None,
            now if now == self.read => None,
            Some(_) => self.reread(),
        }
    }

    /// [`refresh`](Self::refresh), its warning logged.
    fn sync(&mut self) {
        if let Some(warning) = self.refresh() {
            tracing::warn!("permission rules: {warning}");
        }
    }

    /// Reads the rules file (when there is one), stamping what was read.
    fn reread(&mut self) -> Option<String> {
        let file = self.file.clone()?;
        self.rules.clear();
        let opened = std::fs::File::open(&file);
        // The stamp of the file read, from its open handle: a file renamed into place after
        // this read shows as a change.
        let read = opened.and_then(|mut opened| {
            let stamp = Stamp::of(&opened.metadata()?);
            let mut bytes = Vec::new();
            io::Read::read_to_end(&mut opened, &mut bytes)?;
            Ok((stamp, bytes))
        });
        let (stamp, bytes) = match read {
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                self.read = Some(Stamp::Missing);
                return None;
            }
            Err(error) => {
                self.read = Stamp::now(&file);
                return Some(format!(
                    "could not read {}: {error}; ignoring it",
                    file.display()
                ));
            }
        };
        self.read = Some(stamp);
        match serde_json::from_slice::<StoredRules>(&bytes) {
            Ok(stored) if stored.version == VERSION => {
                self.rules = stored.rules;
                None
            }
            Ok(stored) => Some(format!(
                "{} has version {}, this build reads version {VERSION}; ignoring it",
                file.display(),
                stored.version
            )),
            Err(error) => Some(format!(
                "{} is damaged ({error}); ignoring it",
                file.display()
            )),
        }
    }

    /// The rules file, when the rules are stored.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The rules, in the order they were added, as last read or changed here (see
    /// [`refresh`](Self::refresh)).
    pub fn rules(&self) -> &[PermissionRule] {
        &self.rules
    }

    /// What the rules say about a call: `Reject` when any reject rule matches, else `Allow`
    /// when an allow rule matches, else `None` (ask). The rules are refreshed first.
    pub fn decide(&mut self, tool: &str, arguments: &Value) -> Option<RuleEffect> {
        self.sync();
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

    /// Adds a rule (unless the same rule is there already) to the rules stored now, and saves.
    pub fn add(&mut self, rule: PermissionRule) -> io::Result<()> {
        self.sync();
        if !self.rules.contains(&rule) {
            self.rules.push(rule);
        }
        self.save()
    }

    /// Removes the rule at `index` (0-based, of the rules stored now) and saves; `None` when
    /// there is no such rule.
    pub fn remove(&mut self, index: usize) -> Option<io::Result<PermissionRule>> {
        self.sync();
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
    /// rules, `clear` removes them all, `revoke <n>` removes the n-th (as listed; the rules are
    /// refreshed first, and the answer names the rule removed).
    pub fn command(&mut self, input: &str) -> String {
        self.sync();
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

    fn save(&mut self) -> io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let stored = StoredRules {
            version: VERSION,
            rules: self.rules.clone(),
        };
        let mut text = serde_json::to_vec_pretty(&stored).map_err(io::Error::other)?;
        text.push(b'\n');
        crate::files::replace(file, &text, crate::files::Access::Shared)?;
        // Read back at the next refresh: what another writer renames in after this one is
        // then seen, whenever it lands. (A rule that could not be stored stays in memory
        // until the file changes.)
        self.read = None;
        Ok(())
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

    #[test]
    fn rules_kept_elsewhere_in_the_project_count_and_are_kept() {
        let scratch = tempfile::tempdir().unwrap();
        let (mut one, _) = PermissionRules::load(scratch.path());
        let (mut two, _) = PermissionRules::load(scratch.path());
        let echo = json!({"command": "echo hi"});
        let git = json!({"command": "git push"});
        one.add(rule("run_command", &echo)).unwrap();
        assert_eq!(two.decide("run_command", &echo), Some(RuleEffect::Allow));
        two.add(PermissionRule::for_call(
            "run_command",
            &git,
            RuleEffect::Reject,
        ))
        .unwrap();
        assert_eq!(one.decide("run_command", &git), Some(RuleEffect::Reject));
        assert_eq!(
            one.command(""),
            "1. allow run_command with commands starting `echo`\n\
             2. reject run_command with commands starting `git push`"
        );
        assert_eq!(
            two.command("revoke 1"),
            "Revoked: run_command with commands starting `echo`."
        );
        assert_eq!(one.decide("run_command", &echo), None);
        assert_eq!(PermissionRules::load(scratch.path()).0.rules().len(), 1);

        // Damaged by hand: no rules, said once; removed: no rules.
        std::fs::write(scratch.path().join(PERMISSIONS_FILE), "{not json").unwrap();
        assert!(one.refresh().unwrap().contains("damaged"));
        assert_eq!(one.refresh(), None);
        assert_eq!(one.decide("run_command", &git), None);
        two.add(rule("run_command", &echo)).unwrap();
        std::fs::remove_file(scratch.path().join(PERMISSIONS_FILE)).unwrap();
        assert_eq!(two.decide("run_command", &echo), None);
        assert!(two.rules().is_empty());
    }

    #[test]
    fn a_rule_that_cannot_be_stored_still_counts_here() {
        let scratch = tempfile::tempdir().unwrap();
        // `.aquaregia` is a file: nothing can be stored beneath it.
        std::fs::write(scratch.path().join(".aquaregia"), "").unwrap();
        let (mut rules, warning) = PermissionRules::load(scratch.path());
        assert!(warning.unwrap().contains("could not read"));
        let echo = json!({"command": "echo hi"});
        assert!(rules.add(rule("run_command", &echo)).is_err());
        assert_eq!(rules.decide("run_command", &echo), Some(RuleEffect::Allow));
        assert_eq!(
            rules.command(""),
            "1. allow run_command with commands starting `echo`"
        );
    }
}
