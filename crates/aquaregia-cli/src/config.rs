//! Finding and loading the `mcpServers` config file.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use aquaregia::mcp::{ConfigError, McpServerSpec, McpServerTimeouts, McpServersConfig};

/// The config file's name, in the current directory and in the user config directory.
const FILE_NAME: &str = "aquaregia.json";

/// A loaded config file.
#[derive(Debug)]
pub(crate) struct Config {
    path: PathBuf,
    servers: McpServersConfig,
}

impl Config {
    /// Loads `explicit`, else the first default file that exists; `None` when there is none.
    /// Warnings (keys the parser ignored) are printed to stderr.
    pub(crate) fn load(explicit: Option<&Path>) -> anyhow::Result<Option<Self>> {
        let path = match explicit {
            Some(path) => path.to_owned(),
            None => match default_paths().into_iter().find(|path| path.is_file()) {
                Some(path) => path,
                None => return Ok(None),
            },
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let servers = McpServersConfig::from_json(&text).map_err(|error| match error {
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
        })?;
        for warning in &servers.warnings {
            eprintln!("warning: {}: {warning}", path.display());
        }
        tracing::debug!(path = %path.display(), servers = servers.servers.len(), "loaded config");
        Ok(Some(Self { path, servers }))
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
                    looked.join(" and ")
                )
            }
        }
    }

    /// Every server, in file order.
    pub(crate) fn servers(&self) -> &[(String, McpServerSpec)] {
        &self.servers.servers
    }

    /// The server called `name`, or an error listing the known ones.
    /// The `"timeout"` / `"startupTimeoutMs"` of the server called `name`.
    pub(crate) fn timeouts(&self, name: &str) -> McpServerTimeouts {
        self.servers.timeouts(name)
    }

    pub(crate) fn server(&self, name: &str) -> anyhow::Result<&McpServerSpec> {
        self.servers.get(name).ok_or_else(|| {
            if self
                .servers
                .disabled
                .iter()
                .any(|disabled| disabled == name)
            {
                return anyhow!(
                    "server `{name}` is disabled in {} (\"disabled\": true)",
                    self.path.display()
                );
            }
            let known: Vec<&str> = self.servers().iter().map(|(n, _)| n.as_str()).collect();
            if known.is_empty() {
                anyhow!(
                    "unknown server `{name}`: {} defines no servers",
                    self.path.display()
                )
            } else {
                anyhow!(
                    "unknown server `{name}` (servers in {}: {})",
                    self.path.display(),
                    known.join(", ")
                )
            }
        })
    }
}

/// `./aquaregia.json`, then `<user config dir>/aquaregia/aquaregia.json`.
fn default_paths() -> Vec<PathBuf> {
    let mut paths = vec![PathBuf::from(FILE_NAME)];
    if let Some(dir) = dirs::config_dir() {
        paths.push(dir.join("aquaregia").join(FILE_NAME));
    }
    paths
}
