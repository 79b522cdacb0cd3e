//! Finding and loading the MCP servers config: `aquaregia.json`, Claude Code's `.mcp.json`
//! and the user's file, in the `mcpServers` format or VS Code's `servers`, with comments and
//! trailing commas allowed (JSONC), plus `"permissions": {"allow": [...], "deny": [...]}` and
//! `"prices": {"<model>": {"input": ..., "output": ...}}` and `"policy": "<file.cedar>"` (a
//! Cedar permission policy, relative to the config file's directory), and `"sessions":
//! {"postgres": "<url>"}` (where sessions are kept, [`crate::session_store`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use aquaregia::ModelPrice;
use aquaregia_mcp::{
    ConfigError, McpOAuthClient, McpServerSpec, McpServerTimeouts, McpServersConfig, parse_jsonc,
};
use serde_json::{Map, Value};

use crate::prices;
use crate::session_store::SessionsSetting;

/// The config file's name, in the current directory and in the user config directory.
const FILE_NAME: &str = "aquaregia.json";
/// Claude Code's project config.
const CLAUDE_CODE_FILE: &str = ".mcp.json";

/// The servers and permissions of every config file found, merged.
#[derive(Debug, Default)]
pub(crate) struct Config {
    /// The files read, lowest precedence first.
    files: Vec<PathBuf>,
    /// Each server, and the file it came from.
    servers: Vec<(String, McpServerSpec, PathBuf)>,
    /// Servers switched off (`"disabled": true`), and where.
    disabled: Vec<(String, PathBuf)>,
    /// Each server's `"timeout"` / `"startupTimeoutMs"`.
    timeouts: Vec<(String, McpServerTimeouts)>,
    /// Each server's `"oauth"` client, if it names one.
    oauth: Vec<(String, McpOAuthClient)>,
    /// The servers marked `"trust": true`.
    trusted: Vec<String>,
    /// Tool globs allowed without asking.
    pub(crate) allow: Vec<String>,
    /// Tool globs never run.
    pub(crate) deny: Vec<String>,
    /// Model prices, USD per million tokens (a later file's price wins).
    pub(crate) prices: Vec<(String, ModelPrice)>,
    /// The Cedar permission policy file (`"policy"`; a later file's wins).
    pub(crate) policy: Option<PathBuf>,
    /// Where sessions are kept (`"sessions"`; a later file's wins), and the file that says so.
    pub(crate) sessions: Option<(SessionsSetting, PathBuf)>,
}

impl Config {
    /// Loads `explicit` alone, else every default file that exists (the user's, then
    /// `./.mcp.json`, then `./aquaregia.json`; a server defined twice is taken from the later
    /// file); `None` when there is none. Warnings (keys the parser ignored) go to stderr.
    pub(crate) fn load(explicit: Option<&Path>) -> anyhow::Result<Option<Self>> {
        let paths = match explicit {
            Some(path) => vec![path.to_owned()],
            None => default_paths()
                .into_iter()
                .rev()
                .filter(|path| path.is_file())
                .collect(),
        };
        if paths.is_empty() {
            return Ok(None);
        }
        let mut config = Self::default();
        for path in paths {
            config.add_file(path)?;
        }
        Ok(Some(config))
    }

    fn add_file(&mut self, path: PathBuf) -> anyhow::Result<()> {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let Parsed {
            servers,
            allow,
            deny,
            prices,
            policy,
            sessions,
        } = parse(&text).map_err(|error| config_error(&path, error))?;
        for warning in &servers.warnings {
            eprintln!("warning: {}: {warning}", path.display());
        }
        tracing::debug!(path = %path.display(), servers = servers.servers.len(), "loaded config");
        for (name, spec) in &servers.servers {
            self.remove(name);
            self.timeouts.push((name.clone(), servers.timeouts(name)));
            if let Some(client) = servers.oauth_client(name) {
                self.oauth.push((name.clone(), client.clone()));
            }
            if servers.is_trusted(name) {
                self.trusted.push(name.clone());
            }
            self.servers
                .push((name.clone(), spec.clone(), path.clone()));
        }
        for name in servers.disabled {
            self.remove(&name);
            self.disabled.push((name, path.clone()));
        }
        self.allow.extend(allow);
        self.deny.extend(deny);
        self.prices.extend(prices);
        if let Some(policy) = policy {
            let base = path.parent().unwrap_or(Path::new("."));
            self.policy = Some(base.join(policy));
        }
        if let Some(sessions) = sessions {
            self.sessions = Some((sessions, path.clone()));
        }
        self.files.push(path);
        Ok(())
    }

    fn remove(&mut self, name: &str) {
        self.servers.retain(|(server, _, _)| server != name);
        self.disabled.retain(|(server, _)| server != name);
        self.timeouts.retain(|(server, _)| server != name);
        self.oauth.retain(|(server, _)| server != name);
        self.trusted.retain(|server| server != name);
    }

    /// Whether the server called `name` is marked `"trust": true`.
    pub(crate) fn is_trusted(&self, name: &str) -> bool {
        self.trusted.iter().any(|server| server == name)
    }

    /// Like [`load`](Self::load), but a missing config is an error saying where it was looked for.
    pub(crate) fn require(explicit: Option<&Path>) -> anyhow::Result<Self> {
        match Self::load(explicit)? {
            Some(config) => Ok(config),
            None => {
                let looked: Vec<String> = default_paths()
                    .iter()
                    .map(|path| path.display().to_string())
                    .collect();
                bail!(
                    "no config file found (looked for {}); pass --config FILE, or a server \
                     with --stdio, --http or --sse",
                    looked.join(", ")
                )
            }
        }
    }

    /// Every server, in file order.
    pub(crate) fn servers(&self) -> impl Iterator<Item = (&String, &McpServerSpec)> {
        self.servers.iter().map(|(name, spec, _)| (name, spec))
    }

    /// Every server with the file it came from.
    pub(crate) fn origins(&self) -> impl Iterator<Item = (&str, &McpServerSpec, &Path)> {
        self.servers
            .iter()
            .map(|(name, spec, path)| (name.as_str(), spec, path.as_path()))
    }

    /// The servers switched off, with their files.
    pub(crate) fn disabled(&self) -> impl Iterator<Item = (&str, &Path)> {
        self.disabled
            .iter()
            .map(|(name, path)| (name.as_str(), path.as_path()))
    }

    /// The files read, lowest precedence first.
    pub(crate) fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The `"timeout"` / `"startupTimeoutMs"` of the server called `name`.
    pub(crate) fn oauth_client(&self, name: &str) -> Option<McpOAuthClient> {
        self.oauth
            .iter()
            .find(|(server, _)| server == name)
            .map(|(_, client)| client.clone())
    }

    pub(crate) fn timeouts(&self, name: &str) -> McpServerTimeouts {
        self.timeouts
            .iter()
            .find(|(server, _)| server == name)
            .map(|(_, timeouts)| *timeouts)
            .unwrap_or_default()
    }

    /// The server called `name`, or an error listing the known ones.
    pub(crate) fn server(&self, name: &str) -> anyhow::Result<&McpServerSpec> {
        if let Some((_, spec)) = self.servers().find(|(server, _)| *server == name) {
            return Ok(spec);
        }
        if let Some((_, path)) = self.disabled().find(|(server, _)| *server == name) {
            bail!(
                "server `{name}` is disabled in {} (\"disabled\": true)",
                path.display()
            );
        }
        let files: Vec<String> = self
            .files
            .iter()
            .map(|path| path.display().to_string())
            .collect();
        let known: Vec<&str> = self.servers().map(|(name, _)| name.as_str()).collect();
        if known.is_empty() {
            bail!(
                "unknown server `{name}`: {} defines no servers",
                files.join(", ")
            )
        }
        bail!(
            "unknown server `{name}` (servers in {}: {})",
            files.join(", "),
            known.join(", ")
        )
    }
}

/// One file's contents.
struct Parsed {
    servers: McpServersConfig,
    allow: Vec<String>,
    deny: Vec<String>,
    prices: Vec<(String, ModelPrice)>,
    policy: Option<String>,
    sessions: Option<SessionsSetting>,
}

/// A file's error, saying which file (and where in it, for a syntax error).
fn config_error(path: &Path, error: ConfigError) -> anyhow::Error {
    match error {
        ConfigError::Syntax {
            line,
            column,
            message,
        } => {
            // serde_json ends its message with the position we already show.
            let suffix = format!(" at line {line} column {column}");
            let message = message.strip_suffix(&suffix).unwrap_or(&message);
            anyhow!(
                "invalid config file {}: line {line}, column {column}: {message}",
                path.display()
            )
        }
        other => anyhow!("invalid config file {}: {other}", path.display()),
    }
}

/// Where sessions are kept, and the file that says so: the `"sessions"` of the `explicit`
/// file alone, else of the default files (a later one winning); `None` when none says (the
/// file store). Only that key is read, so a file whose servers cannot be used (a variable
/// they need is unset) still names the store.
pub(crate) fn sessions_setting(
    explicit: Option<&Path>,
) -> anyhow::Result<Option<(SessionsSetting, PathBuf)>> {
    let paths = match explicit {
        Some(path) => vec![path.to_owned()],
        None => default_paths()
            .into_iter()
            .rev()
            .filter(|path| path.is_file())
            .collect(),
    };
    let mut found = None;
    for path in paths {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let root = parse_jsonc(&text).map_err(|error| config_error(&path, error))?;
        if let Value::Object(mut root) = root
            && let Some(value) = root.remove("sessions")
        {
            let setting =
                SessionsSetting::parse(value).map_err(|error| config_error(&path, error))?;
            found = Some((setting, path));
        }
    }
    Ok(found)
}

/// One file: JSONC to JSON, `permissions` and `prices` taken out, VS Code's `servers` read as
/// `mcpServers`.
fn parse(text: &str) -> Result<Parsed, ConfigError> {
    let root = parse_jsonc(text)?;
    let Value::Object(mut root) = root else {
        return Err(ConfigError::Invalid(
            "the config must be a JSON object with an `mcpServers` object".into(),
        ));
    };
    let (allow, deny) = match root.remove("permissions") {
        None => (Vec::new(), Vec::new()),
        Some(Value::Object(mut permissions)) => {
            let allow = globs(&mut permissions, "allow")?;
            let deny = globs(&mut permissions, "deny")?;
            if let Some(key) = permissions.keys().next() {
                return Err(ConfigError::Invalid(format!(
                    "`permissions` has an unknown key `{key}` (use `allow` and `deny`)"
                )));
            }
            (allow, deny)
        }
        Some(_) => {
            return Err(ConfigError::Invalid(
                "`permissions` must be an object with `allow` and `deny` lists".into(),
            ));
        }
    };
    let policy = match root.remove("policy") {
        None => None,
        Some(Value::String(path)) => Some(path),
        Some(_) => {
            return Err(ConfigError::Invalid(
                "`policy` must be the path of a Cedar policy file".into(),
            ));
        }
    };
    let sessions = root
        .remove("sessions")
        .map(SessionsSetting::parse)
        .transpose()?;
    let prices = match root.remove("prices") {
        Some(prices) => prices::parse(&prices).map_err(ConfigError::Invalid)?,
        None => Vec::new(),
    };
    if !root.contains_key("mcpServers")
        && let Some(servers) = root.remove("servers")
    {
        root.insert("mcpServers".into(), servers);
    }
    // VS Code's prompted variables: not supported, and not worth a warning per file.
    root.remove("inputs");
    let servers = McpServersConfig::from_value(Value::Object(root))?;
    Ok(Parsed {
        servers,
        allow,
        deny,
        prices,
        policy,
        sessions,
    })
}

fn globs(permissions: &mut Map<String, Value>, key: &str) -> Result<Vec<String>, ConfigError> {
    match permissions.remove(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|item| match item {
                Value::String(glob) => Ok(glob),
                _ => Err(ConfigError::Invalid(format!(
                    "`permissions.{key}` must be a list of tool names or globs"
                ))),
            })
            .collect(),
        Some(_) => Err(ConfigError::Invalid(format!(
            "`permissions.{key}` must be a list of tool names or globs"
        ))),
    }
}

/// Highest precedence first: `./aquaregia.json`, `./.mcp.json`,
/// `<user config dir>/aquaregia/aquaregia.json`.
fn default_paths() -> Vec<PathBuf> {
    let mut paths = vec![PathBuf::from(FILE_NAME), PathBuf::from(CLAUDE_CODE_FILE)];
    if let Some(dir) = dirs::config_dir() {
        paths.push(dir.join("aquaregia").join(FILE_NAME));
    }
    paths
}
