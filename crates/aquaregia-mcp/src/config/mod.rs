//! Server specs and the common `mcpServers` JSON config (Claude Desktop, Cursor and others).

mod error;
mod jsonc;
mod oauth_client;
mod timeouts;

use std::path::PathBuf;

use serde_json::{Map, Value};
use tokio::process::Command;

use crate::connector::Connector;
use crate::error::McpError;
use crate::session::connection::McpConnection;
use crate::transport::http_options::HttpOptions;

pub use error::ConfigError;
pub use jsonc::parse_jsonc;
pub use oauth_client::McpOAuthClient;
pub use timeouts::McpServerTimeouts;

/// How to reach one MCP server.
///
/// `Debug` shows the names of `env` variables and headers, not their values (tokens, often).
#[non_exhaustive]
#[derive(Clone, PartialEq, Eq)]
pub enum McpServerSpec {
    /// A local server started as a child process.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for the server, on top of what it inherits.
        env: Vec<(String, String)>,
        /// The working directory (default: the current one).
        cwd: Option<PathBuf>,
        /// Whether the server inherits this process's whole environment, API keys included
        /// (`"inheritEnv": true` in a config file). By default it inherits only
        /// [`DEFAULT_INHERITED_ENV_VARS`](crate::DEFAULT_INHERITED_ENV_VARS).
        inherit_env: bool,
    },
    /// A Streamable HTTP server (falls back to legacy SSE when it does not speak it).
    Http {
        /// The endpoint URL.
        url: String,
        /// Headers sent with every request.
        headers: Vec<(String, String)>,
    },
    /// A legacy HTTP+SSE server.
    Sse {
        /// The SSE endpoint URL.
        url: String,
        /// Headers sent with every request.
        headers: Vec<(String, String)>,
    },
}

impl McpServerSpec {
    /// A stdio server from a program and its arguments.
    pub fn stdio(command: impl Into<String>, args: Vec<String>) -> Self {
        Self::Stdio {
            command: command.into(),
            args,
            env: Vec::new(),
            cwd: None,
            inherit_env: false,
        }
    }

    /// Connects with `connector`'s name and timeout. The environment of a stdio server is
    /// [`DEFAULT_INHERITED_ENV_VARS`](crate::DEFAULT_INHERITED_ENV_VARS) (the whole
    /// environment if `inherit_env` is set here or on `connector`) with `env` set on top.
    pub async fn connect(&self, connector: Connector) -> Result<McpConnection, McpError> {
        match self {
            Self::Stdio {
                command,
                args,
                env,
                cwd,
                inherit_env,
            } => {
                for (name, value) in env {
                    aquaregia::redact::register_env(name, value);
                }
                let mut process = Command::new(command);
                process.args(args);
                process.envs(env.iter().map(|(k, v)| (k, v)));
                if let Some(cwd) = cwd {
                    process.current_dir(cwd);
                }
                let connector = if *inherit_env {
                    connector.inherit_env(true)
                } else {
                    connector
                };
                connector.stdio(process).await
            }
            Self::Http { url, headers } => connector.http(url, http_options(headers)).await,
            Self::Sse { url, headers } => connector.sse(url, http_options(headers)).await,
        }
    }

    /// A one-line description (`npx -y server`, `http https://...`) without secrets.
    pub fn summary(&self) -> String {
        match self {
            Self::Stdio { command, args, .. } => {
                let mut line = command.clone();
                for arg in args {
                    line.push(' ');
                    line.push_str(arg);
                }
                line
            }
            Self::Http { url, .. } => format!("http {url}"),
            Self::Sse { url, .. } => format!("sse {url}"),
        }
    }
}

impl std::fmt::Debug for McpServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdio {
                command,
                args,
                env,
                cwd,
                inherit_env,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &Redacted(env))
                .field("cwd", cwd)
                .field("inherit_env", inherit_env)
                .finish(),
            Self::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &Redacted(headers))
                .finish(),
            Self::Sse { url, headers } => f
                .debug_struct("Sse")
                .field("url", url)
                .field("headers", &Redacted(headers))
                .finish(),
        }
    }
}

/// Name-value pairs shown as `{"NAME": "<redacted>"}`.
struct Redacted<'a>(&'a [(String, String)]);

impl std::fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(name, _)| (name, "<redacted>")))
            .finish()
    }
}

fn http_options(headers: &[(String, String)]) -> HttpOptions {
    headers
        .iter()
        .fold(HttpOptions::new(), |options, (name, value)| {
            options.header(name, value)
        })
}

/// A parsed `{"mcpServers": {...}}` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpServersConfig {
    /// The servers, in file order.
    pub servers: Vec<(String, McpServerSpec)>,
    /// Servers marked `"disabled": true`, which are not in `servers`.
    pub disabled: Vec<String>,
    /// Keys that were ignored, as human-readable warnings.
    pub warnings: Vec<String>,
    /// The servers' `"startupTimeoutMs"` and `"timeout"`, for those that set one.
    pub timeouts: Vec<(String, McpServerTimeouts)>,
    /// The servers' `"oauth"` clients, for those that name one.
    pub oauth: Vec<(String, McpOAuthClient)>,
    /// The servers marked `"trust": true`: their tools' annotations (`readOnlyHint`...) are
    /// believed (see [`Tool::hints_trusted`](aquaregia::Tool::hints_trusted)).
    pub trusted: Vec<String>,
}

impl McpServersConfig {
    /// Parses the `mcpServers` format, written as JSON or JSONC (comments and trailing commas,
    /// see [`parse_jsonc`]): `{"name": {"command", "args", "env", "cwd",
    /// "inheritEnv"?}}` for stdio servers, `{"url", "headers", "type"?}` for HTTP ones
    /// (`"type": "sse"` for legacy SSE) with `"oauth"` for a pre-registered OAuth client
    /// ([`oauth_client`](Self::oauth_client)), and `"timeout"` (per call) and
    /// `"startupTimeoutMs"` in milliseconds for either ([`timeouts`](Self::timeouts)), and
    /// `"trust": true` for a server whose annotations are believed
    /// ([`is_trusted`](Self::is_trusted)). Unknown keys are kept as warnings, not errors, so
    /// files written for other tools load.
    ///
    /// A stdio server gets [`DEFAULT_INHERITED_ENV_VARS`](crate::DEFAULT_INHERITED_ENV_VARS)
    /// from this process's environment plus its `env`; `"inheritEnv": true` passes it the
    /// whole environment instead, API keys included.
    ///
    /// `${VAR}` and `${VAR:-default}` in `command`, `args`, `env` values, `url` and `headers`
    /// values are replaced by the variable from this process's environment, as in Claude
    /// Code's `.mcp.json`: a set variable is used even when empty, the default only when it is
    /// unset, and an unset variable without a default is [`ConfigError::UnsetVariable`].
    /// `$VAR` without braces, and `${...}` around anything but a variable name, are left as
    /// they are. Servers marked `"disabled": true` are not expanded.
    ///
    /// ```
    /// use aquaregia_mcp::{McpServerSpec, McpServersConfig};
    /// let config = McpServersConfig::from_json(r#"{"mcpServers": {
    ///     "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
    ///     "remote": {"url": "https://example.com/mcp", "headers": {"X-Team": "a"}, "timeout": 60},
    ///     "old": {"command": "old-server", "disabled": true}
    /// }}"#).unwrap();
    /// assert_eq!(config.servers.len(), 2);
    /// assert!(matches!(config.servers[1].1, McpServerSpec::Http { .. }));
    /// assert_eq!(config.disabled, ["old"]);
    /// assert_eq!(config.timeouts("remote").call, Some(std::time::Duration::from_millis(60)));
    /// assert!(config.warnings.is_empty());
    /// ```
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        Self::from_json_with_env(text, |name| std::env::var(name).ok())
    }

    /// Like [`from_json`](Self::from_json), with `${VAR}` looked up by `lookup` rather than in
    /// this process's environment.
    ///
    /// ```
    /// use aquaregia_mcp::{ConfigError, McpServerSpec, McpServersConfig};
    /// let text = r#"{"mcpServers": {"gh": {
    ///     "url": "${GH_MCP_URL:-https://api.githubcopilot.com/mcp/}",
    ///     "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}
    /// }}}"#;
    /// let config = McpServersConfig::from_json_with_env(text, |name| {
    ///     (name == "GITHUB_TOKEN").then(|| "ghp_x".to_owned())
    /// })
    /// .unwrap();
    /// let Some(McpServerSpec::Http { url, headers }) = config.get("gh") else { panic!() };
    /// assert_eq!(url, "https://api.githubcopilot.com/mcp/");
    /// assert_eq!(headers[0].1, "Bearer ghp_x");
    ///
    /// let error = McpServersConfig::from_json_with_env(text, |_| None).unwrap_err();
    /// assert!(matches!(error, ConfigError::UnsetVariable { .. }));
    /// assert_eq!(
    ///     error.to_string(),
    ///     "server `gh`: `headers.Authorization` uses `${GITHUB_TOKEN}`, which is not set \
    ///      (set it, or give a default: `${GITHUB_TOKEN:-default}`)"
    /// );
    /// ```
    pub fn from_json_with_env(
        text: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::from_value_with_env(parse_jsonc(text)?, lookup)
    }

    /// Like [`from_json`](Self::from_json), from a file already parsed (one whose other keys
    /// the caller reads, say): unknown top-level keys are still warnings.
    pub fn from_value(root: Value) -> Result<Self, ConfigError> {
        Self::from_value_with_env(root, |name| std::env::var(name).ok())
    }

    /// Like [`from_value`](Self::from_value), with `${VAR}` looked up by `lookup`.
    pub fn from_value_with_env(
        root: Value,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let Value::Object(mut root) = root else {
            return Err(ConfigError::Invalid(
                "the config must be a JSON object with an `mcpServers` object".into(),
            ));
        };
        let mut config = Self::default();
        let servers = match root.remove("mcpServers") {
            Some(Value::Object(servers)) => servers,
            Some(_) => {
                return Err(ConfigError::Invalid(
                    "`mcpServers` must be an object".into(),
                ));
            }
            None => Map::new(),
        };
        for key in root.keys() {
            config
                .warnings
                .push(format!("ignoring unknown top-level key `{key}`"));
        }
        for (name, entry) in servers {
            let Value::Object(mut entry) = entry else {
                return Err(ConfigError::Invalid(format!(
                    "server `{name}` must be an object"
                )));
            };
            // Cline, Roo and others switch servers off in place.
            let disabled = match entry.remove("disabled") {
                None | Some(Value::Bool(false)) => false,
                Some(Value::Bool(true)) => true,
                Some(_) => {
                    return Err(ConfigError::Invalid(format!(
                        "server `{name}`: `disabled` must be true or false"
                    )));
                }
            };
            let trusted = match entry.remove("trust") {
                None | Some(Value::Bool(false)) => false,
                Some(Value::Bool(true)) => true,
                Some(_) => {
                    return Err(ConfigError::Invalid(format!(
                        "server `{name}`: `trust` must be true or false"
                    )));
                }
            };
            let timeouts = timeouts::take_timeouts(&name, &mut entry)?;
            let oauth = oauth_client::take_oauth_client(&name, &mut entry, &mut config.warnings)?;
            let spec = parse_entry(&name, entry, &mut config.warnings)?;
            if oauth.is_some() && matches!(spec, McpServerSpec::Stdio { .. }) {
                config.warnings.push(format!(
                    "server `{name}`: `oauth` is for HTTP servers; ignoring it"
                ));
            } else if let Some(client) = oauth.filter(|_| !disabled) {
                let client = client.expanded(|field, value| {
                    expand(&value, &lookup).map_err(|variable| ConfigError::UnsetVariable {
                        server: name.clone(),
                        field: field.to_owned(),
                        variable,
                    })
                })?;
                config.oauth.push((name.clone(), client));
            }
            if trusted && !disabled {
                config.trusted.push(name.clone());
            }
            if !disabled && !timeouts.is_empty() {
                config.timeouts.push((name.clone(), timeouts));
            }
            if disabled {
                config.disabled.push(name);
            } else {
                let spec = expand_spec(&name, spec, &lookup)?;
                config.servers.push((name, spec));
            }
        }
        Ok(config)
    }

    /// The timeouts of the server called `name` (none set when it has none).
    pub fn timeouts(&self, name: &str) -> McpServerTimeouts {
        self.timeouts
            .iter()
            .find(|(server, _)| server == name)
            .map(|(_, timeouts)| *timeouts)
            .unwrap_or_default()
    }

    /// Whether the server called `name` is marked `"trust": true`.
    pub fn is_trusted(&self, name: &str) -> bool {
        self.trusted.iter().any(|server| server == name)
    }

    /// The OAuth client the server called `name` names (`"oauth"`), if any.
    pub fn oauth_client(&self, name: &str) -> Option<&McpOAuthClient> {
        self.oauth
            .iter()
            .find(|(server, _)| server == name)
            .map(|(_, client)| client)
    }

    /// The server called `name`.
    pub fn get(&self, name: &str) -> Option<&McpServerSpec> {
        self.servers
            .iter()
            .find(|(server, _)| server == name)
            .map(|(_, spec)| spec)
    }
}

fn parse_entry(
    name: &str,
    mut entry: Map<String, Value>,
    warnings: &mut Vec<String>,
) -> Result<McpServerSpec, ConfigError> {
    let invalid = |what: &str| ConfigError::Invalid(format!("server `{name}`: {what}"));
    let kind = match entry.remove("type") {
        Some(Value::String(kind)) => Some(kind),
        Some(_) => return Err(invalid("`type` must be a string")),
        None => None,
    };
    let spec = match (entry.remove("command"), entry.remove("url")) {
        (Some(_), Some(_)) => return Err(invalid("has both `command` and `url`")),
        (Some(Value::String(command)), None) => {
            if kind.as_deref().is_some_and(|kind| kind != "stdio") {
                return Err(invalid("`command` servers must have type `stdio`"));
            }
            let args = match entry.remove("args") {
                None => Vec::new(),
                Some(Value::Array(args)) => args
                    .into_iter()
                    .map(|arg| match arg {
                        Value::String(arg) => Ok(arg),
                        other => Ok(other.to_string()),
                    })
                    .collect::<Result<_, ConfigError>>()?,
                Some(_) => return Err(invalid("`args` must be an array of strings")),
            };
            let env = string_map(entry.remove("env"), "env").map_err(|e| invalid(&e))?;
            let cwd = match entry.remove("cwd") {
                None => None,
                Some(Value::String(cwd)) => Some(PathBuf::from(cwd)),
                Some(_) => return Err(invalid("`cwd` must be a string")),
            };
            let inherit_env = match entry.remove("inheritEnv") {
                None => false,
                Some(Value::Bool(inherit)) => inherit,
                Some(_) => return Err(invalid("`inheritEnv` must be true or false")),
            };
            McpServerSpec::Stdio {
                command,
                args,
                env,
                cwd,
                inherit_env,
            }
        }
        (None, Some(Value::String(url))) => {
            let headers =
                string_map(entry.remove("headers"), "headers").map_err(|e| invalid(&e))?;
            match kind.as_deref() {
                None | Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => {
                    McpServerSpec::Http { url, headers }
                }
                Some("sse") => McpServerSpec::Sse { url, headers },
                Some(other) => return Err(invalid(&format!("unknown type `{other}`"))),
            }
        }
        (Some(_), None) => return Err(invalid("`command` must be a string")),
        (None, Some(_)) => return Err(invalid("`url` must be a string")),
        (None, None) => return Err(invalid("needs a `command` or a `url`")),
    };
    for key in entry.keys() {
        warnings.push(format!("server `{name}`: ignoring unknown key `{key}`"));
    }
    Ok(spec)
}

/// Expands `${VAR}` and `${VAR:-default}` wherever the `mcpServers` format allows them.
fn expand_spec(
    server: &str,
    spec: McpServerSpec,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<McpServerSpec, ConfigError> {
    let field = |field: &str, value: String| {
        expand(&value, lookup).map_err(|variable| ConfigError::UnsetVariable {
            server: server.to_owned(),
            field: field.to_owned(),
            variable,
        })
    };
    let pairs = |what: &str, pairs: Vec<(String, String)>| {
        pairs
            .into_iter()
            .map(|(name, value)| Ok((name.clone(), field(&format!("{what}.{name}"), value)?)))
            .collect::<Result<Vec<_>, ConfigError>>()
    };
    Ok(match spec {
        McpServerSpec::Stdio {
            command,
            args,
            env,
            cwd,
            inherit_env,
        } => McpServerSpec::Stdio {
            command: field("command", command)?,
            args: args
                .into_iter()
                .enumerate()
                .map(|(i, arg)| field(&format!("args[{i}]"), arg))
                .collect::<Result<_, _>>()?,
            env: pairs("env", env)?,
            cwd,
            inherit_env,
        },
        McpServerSpec::Http { url, headers } => McpServerSpec::Http {
            url: field("url", url)?,
            headers: pairs("headers", headers)?,
        },
        McpServerSpec::Sse { url, headers } => McpServerSpec::Sse {
            url: field("url", url)?,
            headers: pairs("headers", headers)?,
        },
    })
}

/// `value` with every `${NAME}` and `${NAME:-default}` replaced by `lookup`'s value, the way
/// [`McpServersConfig::from_json`] expands a server's fields: a set variable is used even when
/// empty, the default only when it is unset. `$NAME` without braces, and `${...}` around
/// anything but a variable name, are kept as they are. For other settings of a config file in
/// this format (a session store's URL, say).
///
/// The error is the name of the first unset variable that has no default.
///
/// ```
/// let env = |name: &str| (name == "DB_HOST").then(|| "db.internal".to_owned());
/// assert_eq!(
///     aquaregia_mcp::expand_variables("postgres://${DB_HOST}/${DB:-agents}", env),
///     Ok("postgres://db.internal/agents".to_owned())
/// );
/// assert_eq!(
///     aquaregia_mcp::expand_variables("${DATABASE_URL}", env),
///     Err("DATABASE_URL".to_owned())
/// );
/// ```
pub fn expand_variables(
    value: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    expand(value, &lookup)
}

/// [`expand_variables`] with the lookup behind a reference, as the server fields use it.
fn expand(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if is_variable_name(name) {
            match (lookup(name), default) {
                (Some(found), _) => out.push_str(&found),
                (None, Some(default)) => out.push_str(default),
                (None, None) => return Err(name.to_owned()),
            }
        } else {
            out.push_str(&rest[start..start + 2 + end + 1]);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first == '_' || first.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn string_map(value: Option<Value>, what: &str) -> Result<Vec<(String, String)>, String> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .into_iter()
            .map(|(key, value)| match value {
                Value::String(value) => Ok((key, value)),
                Value::Number(_) | Value::Bool(_) => Ok((key, value.to_string())),
                _ => Err(format!("`{what}.{key}` must be a string")),
            })
            .collect(),
        Some(_) => Err(format!("`{what}` must be an object of strings")),
    }
}

#[cfg(test)]
mod tests;
