//! Which MCP servers a command uses (names from the config, inline specs), and connecting to
//! them in parallel through [`McpToolset`].

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use aquaregia_mcp::{
    Connector, McpConnection, McpError, McpOAuthClient, McpServerSpec, McpServerTimeouts,
    McpToolset, PinFile, PinReview,
};
use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::config::Config;
use crate::output::{self, Styles};
use crate::{elicit, oauth, reaper};

/// Servers given on the command line (`run`: any number).
#[derive(Debug, Args)]
pub(crate) struct InlineServers {
    /// A stdio MCP server: its command line, split like a shell would (repeatable).
    #[arg(long, value_name = "COMMAND")]
    stdio: Vec<String>,
    /// A Streamable HTTP MCP server (falls back to legacy SSE) (repeatable).
    #[arg(long, value_name = "URL")]
    http: Vec<String>,
    /// A legacy HTTP+SSE MCP server (repeatable).
    #[arg(long, value_name = "URL")]
    sse: Vec<String>,
}

/// One server given on the command line (`mcp tools`, `mcp call`).
#[derive(Debug, Args)]
#[group(multiple = false)]
pub(crate) struct InlineServer {
    /// A stdio MCP server: its command line, split like a shell would.
    #[arg(long, value_name = "COMMAND")]
    stdio: Option<String>,
    /// A Streamable HTTP MCP server (falls back to legacy SSE).
    #[arg(long, value_name = "URL")]
    http: Option<String>,
    /// A legacy HTTP+SSE MCP server.
    #[arg(long, value_name = "URL")]
    sse: Option<String>,
}

impl InlineServer {
    pub(crate) fn is_given(&self) -> bool {
        self.stdio.is_some() || self.http.is_some() || self.sse.is_some()
    }
}

#[derive(Debug, Clone, Copy)]
enum Transport {
    Stdio,
    Http,
    Sse,
}

/// A server to connect to, with the name it goes by in prefixes, logs and errors.
#[derive(Debug)]
pub(crate) struct Target {
    name: String,
    spec: McpServerSpec,
    /// Given on the command line rather than named from the config.
    inline: bool,
    /// From the config, and the command line over it.
    timeouts: McpServerTimeouts,
    /// The config's `"oauth"` client for it.
    oauth_client: Option<McpOAuthClient>,
    /// The config marks it `"trust": true`.
    trusted: bool,
}

impl Target {
    /// The server's name in errors and logs.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// How to reach it.
    pub(crate) fn spec(&self) -> &McpServerSpec {
        &self.spec
    }

    /// Timeouts given on the command line, over those of the config.
    pub(crate) fn override_timeouts(&mut self, timeouts: McpServerTimeouts) {
        self.timeouts = timeouts.or(self.timeouts);
    }

    /// The config's OAuth client for this server.
    pub(crate) fn oauth_client(&self) -> Option<&McpOAuthClient> {
        self.oauth_client.as_ref()
    }

    /// The URL of an HTTP or SSE server.
    pub(crate) fn url(&self) -> Option<&str> {
        match &self.spec {
            McpServerSpec::Http { url, .. } | McpServerSpec::Sse { url, .. } => Some(url),
            _ => None,
        }
    }

    /// The command that authorizes this server: by name if it comes from the config.
    fn login_command(&self) -> String {
        match self.url() {
            Some(url) if self.inline => format!("aquaregia mcp login --http {url}"),
            _ => format!("aquaregia mcp login {}", self.name),
        }
    }
}

/// The servers of a `run` or `chat`, and the permission rules of the config they came from.
#[derive(Debug, Default)]
pub(crate) struct Selection {
    pub(crate) targets: Vec<Target>,
    /// The config's `permissions.allow` globs.
    pub(crate) allow: Vec<String>,
    /// The config's `permissions.deny` globs.
    pub(crate) deny: Vec<String>,
    /// The config's model prices.
    pub(crate) prices: Vec<(String, aquaregia::ModelPrice)>,
    /// The config's Cedar permission policy file.
    pub(crate) policy: Option<std::path::PathBuf>,
}

/// The servers of a `run`: the named ones plus the inline ones, or every server of the config
/// when none is given.
pub(crate) fn select(
    config_path: Option<&Path>,
    names: &[String],
    inline: &InlineServers,
) -> anyhow::Result<Selection> {
    let inline_specs = inline_specs(
        [
            (Transport::Stdio, &inline.stdio),
            (Transport::Http, &inline.http),
            (Transport::Sse, &inline.sse),
        ]
        .into_iter()
        .flat_map(|(transport, values)| values.iter().map(move |value| (transport, value))),
    )?;
    let mut selection = Selection::default();
    let targets = &mut selection.targets;
    if names.is_empty() && inline_specs.is_empty() {
        if let Some(config) = Config::load(config_path)? {
            targets.extend(config.servers().map(|(name, spec)| Target {
                name: name.clone(),
                spec: spec.clone(),
                inline: false,
                timeouts: config.timeouts(name),
                oauth_client: config.oauth_client(name),
                trusted: config.is_trusted(name),
            }));
            selection.allow = config.allow;
            selection.deny = config.deny;
            selection.prices = config.prices;
            selection.policy = config.policy;
        }
        return Ok(selection);
    }
    if !names.is_empty() {
        let config = Config::require(config_path)?;
        selection.allow.clone_from(&config.allow);
        selection.deny.clone_from(&config.deny);
        selection.prices.clone_from(&config.prices);
        selection.policy.clone_from(&config.policy);
        let targets = &mut selection.targets;
        for name in names {
            if targets.iter().all(|target| &target.name != name) {
                let spec = config.server(name)?.clone();
                targets.push(Target {
                    name: name.clone(),
                    spec,
                    inline: false,
                    timeouts: config.timeouts(name),
                    oauth_client: config.oauth_client(name),
                    trusted: config.is_trusted(name),
                });
            }
        }
    }
    for spec in inline_specs {
        let name = unique_name(&base_name(&spec), &selection.targets);
        selection.targets.push(Target {
            name,
            spec,
            inline: true,
            timeouts: McpServerTimeouts::default(),
            oauth_client: None,
            trusted: false,
        });
    }
    Ok(selection)
}

/// The one server of `mcp tools` / `mcp call`: a config name or an inline spec.
pub(crate) fn select_one(
    config_path: Option<&Path>,
    name: Option<&str>,
    inline: &InlineServer,
) -> anyhow::Result<Target> {
    let given = [
        (Transport::Stdio, &inline.stdio),
        (Transport::Http, &inline.http),
        (Transport::Sse, &inline.sse),
    ]
    .into_iter()
    .filter_map(|(transport, value)| Some((transport, value.as_ref()?)));
    match (name, inline_specs(given)?.pop()) {
        (Some(_), Some(_)) => {
            bail!("give either a server name or --stdio/--http/--sse, not both")
        }
        (Some(name), None) => {
            let config = Config::require(config_path)?;
            Ok(Target {
                name: name.to_owned(),
                spec: config.server(name)?.clone(),
                inline: false,
                timeouts: config.timeouts(name),
                oauth_client: config.oauth_client(name),
                trusted: config.is_trusted(name),
            })
        }
        (None, Some(spec)) => Ok(Target {
            name: base_name(&spec),
            spec,
            inline: true,
            timeouts: McpServerTimeouts::default(),
            oauth_client: None,
            trusted: false,
        }),
        (None, None) => {
            bail!("name a server from the config, or give one with --stdio, --http or --sse")
        }
    }
}

fn inline_specs<'a>(
    given: impl Iterator<Item = (Transport, &'a String)>,
) -> anyhow::Result<Vec<McpServerSpec>> {
    given
        .map(|(transport, value)| match transport {
            Transport::Stdio => {
                let words = shlex::split(value)
                    .ok_or_else(|| anyhow!("--stdio `{value}`: unbalanced quotes"))?;
                let mut words = words.into_iter();
                let command = words
                    .next()
                    .ok_or_else(|| anyhow!("--stdio needs a command line"))?;
                Ok(McpServerSpec::stdio(command, words.collect()))
            }
            Transport::Http => Ok(McpServerSpec::Http {
                url: value.clone(),
                headers: Vec::new(),
            }),
            Transport::Sse => Ok(McpServerSpec::Sse {
                url: value.clone(),
                headers: Vec::new(),
            }),
        })
        .collect()
}

/// A readable name for an inline server: the package or script a launcher runs
/// (`npx -y @scope/server-x` -> `server-x`), else the program; the host for a URL.
fn base_name(spec: &McpServerSpec) -> String {
    const LAUNCHERS: &[&str] = &[
        "node", "npx", "bun", "bunx", "deno", "python", "python3", "uv", "uvx", "pipx", "docker",
    ];
    const SUBCOMMANDS: &[&str] = &["run", "x", "exec", "tool"];
    const GENERIC: &[&str] = &[
        "index", "main", "server", "cli", "dist", "build", "src", "lib",
    ];
    let name = match spec {
        McpServerSpec::Stdio { command, args, .. } => {
            let program = file_stem(command);
            let target = LAUNCHERS
                .contains(&program.as_str())
                .then(|| {
                    args.iter()
                        .find(|arg| !arg.starts_with('-') && !SUBCOMMANDS.contains(&arg.as_str()))
                })
                .flatten();
            match target {
                // The last meaningful path segment, without an npm `@version`.
                Some(target) => target
                    .rsplit('/')
                    .map(file_stem)
                    .map(|segment| match segment.rsplit_once('@') {
                        Some((name, _)) if !name.is_empty() => name.to_owned(),
                        _ => segment,
                    })
                    .find(|segment| !segment.is_empty() && !GENERIC.contains(&segment.as_str()))
                    .unwrap_or(program),
                None => program,
            }
        }
        McpServerSpec::Http { url, .. } | McpServerSpec::Sse { url, .. } => url
            .split_once("://")
            .map_or(url.as_str(), |(_, rest)| rest)
            .split(['/', '?', '#'])
            .next()
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    };
    if name.is_empty() {
        "server".to_owned()
    } else {
        name
    }
}

fn file_stem(path: &str) -> String {
    let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
    match file.rsplit_once('.') {
        Some((stem, "js" | "mjs" | "cjs" | "ts" | "py" | "exe")) if !stem.is_empty() => {
            stem.to_owned()
        }
        _ => file.to_owned(),
    }
}

/// `base`, or `base-2`, `base-3`... when taken.
fn unique_name(base: &str, taken: &[Target]) -> String {
    let free = |name: &str| taken.iter().all(|target| target.name != name);
    if free(base) {
        return base.to_owned();
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|name| free(name))
        .unwrap_or_else(|| base.to_owned())
}

/// How a command connects its servers.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnectOptions {
    /// All or nothing: one failure fails the whole connect.
    pub(crate) strict: bool,
    /// The startup bound of servers whose config sets none (the SDK's default when `None`).
    pub(crate) startup_timeout: Option<Duration>,
    /// Each tool call's bound, over the config's (the config's or the SDK's when `None`).
    pub(crate) call_timeout: Option<Duration>,
    /// Globs of tools to hide.
    pub(crate) disabled_tools: Vec<String>,
    /// Approve (and pin) every new or changed tool without asking: `aquaregia mcp trust`.
    pub(crate) approve_all_pins: bool,
}

/// Connects to every target at once through an [`McpToolset`]. Servers that fail are
/// reported on stderr and left out, unless `strict`: then the others are closed and the first
/// failure is returned. With several servers, tools are named `<server>__<tool>`. On a
/// terminal, servers' questions (elicitation) are asked there; HTTP servers use stored OAuth
/// tokens, and one that needs authorizing says which `aquaregia mcp login` to run.
pub(crate) async fn toolset(
    targets: Vec<Target>,
    options: &ConnectOptions,
) -> anyhow::Result<McpToolset> {
    let mut builder = McpToolset::builder()
        .strict(options.strict)
        .disable_tools(options.disabled_tools.iter().cloned());
    // The template of every server. A reaper ends stdio servers' process groups if this
    // process is killed outright.
    let mut connector = Connector::new().on_process(reaper::on_process);
    if let Some(timeout) = options.startup_timeout {
        connector = connector.timeout(timeout);
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if interactive {
        connector = connector.on_elicitation(elicit::ask);
    }
    match PinFile::in_data_dir() {
        Ok(pins) => builder = builder.pins(pins),
        Err(error) => eprintln!("warning: MCP tools are not pinned: {error}"),
    }
    builder = if options.approve_all_pins {
        builder.on_pin_review(|_| async { true })
    } else if interactive {
        builder.on_pin_review(review_on_terminal)
    } else {
        builder.on_pin_review(|review| async move {
            eprintln!("{}", withheld_message(&review));
            false
        })
    };
    let shared_oauth = if targets.iter().any(|target| target.url().is_some()) {
        Some(oauth::settings().await?)
    } else {
        None
    };
    if let Some(shared) = &shared_oauth {
        connector = connector.oauth(shared.clone());
    }
    builder = builder.connector(connector);
    let hints: Arc<LoginHints> = Arc::new(
        targets
            .iter()
            .filter_map(|target| Some((target.url()?.to_owned(), target.login_command())))
            .collect(),
    );
    // One spinner per server on a terminal, replaced by how it went; nothing when piped.
    let progress = MultiProgress::new();
    let styles = Styles::stderr();
    for target in targets {
        let mut timeouts = target.timeouts;
        if let Some(call) = options.call_timeout {
            timeouts.call = Some(call);
        }
        builder = builder.server_timeouts(target.name.clone(), timeouts);
        if target.trusted {
            builder = builder.trust(target.name.clone());
        }
        if let McpServerSpec::Stdio { command, args, .. } = &target.spec {
            builder = builder.pinned_command(target.name.clone(), command, args);
        }
        // A server whose config names its OAuth client gets its own settings.
        let own_oauth = shared_oauth
            .as_ref()
            .zip(
                target
                    .oauth_client
                    .as_ref()
                    .filter(|_| target.url().is_some()),
            )
            .map(|(shared, client)| oauth::for_client(shared, client));
        let spec = target.spec;
        let bar = progress.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(format!("starting {}", target.name));
        bar.enable_steady_tick(Duration::from_millis(100));
        let name = target.name.clone();
        let hints = hints.clone();
        builder = builder.connect_with(target.name, move |connector| async move {
            let connector = match own_oauth {
                Some(oauth) => connector.oauth(oauth),
                None => connector,
            };
            let started = Instant::now();
            let result = spec.connect(connector).await;
            let done = ProgressStyle::with_template("{msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            bar.set_style(done);
            let seconds = started.elapsed().as_secs_f64();
            match &result {
                Ok(connection) => {
                    let tools = connection.tools().await.map_or(0, |tools| tools.len());
                    bar.finish_with_message(format!(
                        "{} {name} ({tools} tools, {seconds:.1} s)",
                        styles.green("✓")
                    ));
                }
                Err(error) => bar.finish_with_message(format!(
                    "{} {name}: {}",
                    styles.red("✗"),
                    output::first_line(&describe(error, &hints), 200)
                )),
            }
            result
        });
    }
    let toolset = builder.connect().await.map_err(|error| match &error {
        McpError::AuthRequired { .. } => anyhow!(describe(&error, &hints)),
        _ => error.into(),
    })?;
    if progress.is_hidden() {
        for (name, error) in toolset.failures() {
            eprintln!(
                "{} server `{name}` is unavailable: {}",
                styles.red("✗"),
                output::first_line(&describe(error, &hints), 300)
            );
        }
    }
    Ok(toolset)
}

/// What is said when a new or changed tool is withheld without a terminal to ask on.
pub(crate) fn withheld_message(review: &PinReview) -> String {
    format!(
        "warning: {review}the tool `{}` is withheld; to approve the server's current tools, \
         run `aquaregia mcp trust {}`",
        review.tool, review.server
    )
}

/// Asks on the terminal whether a new or changed tool may be used, showing what changed.
async fn review_on_terminal(review: PinReview) -> bool {
    let question = format!(
        "{review}Use the tool `{}` as it is now? [y/N] ",
        review.tool
    );
    tokio::task::spawn_blocking(move || {
        eprint!("{question}");
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer).is_ok()
            && matches!(answer.trim(), "y" | "Y" | "yes" | "Yes")
    })
    .await
    .unwrap_or(false)
}

/// Each HTTP server's URL and the command that authorizes it.
type LoginHints = Vec<(String, String)>;

/// An error, with the `aquaregia mcp login` to run when a server needs authorizing.
fn describe(error: &McpError, hints: &LoginHints) -> String {
    match error {
        McpError::AuthRequired { url, .. } => {
            match hints.iter().find(|(target, _)| target == url) {
                Some((_, login)) => format!("{error}: run `{login}`"),
                None => error.to_string(),
            }
        }
        _ => error.to_string(),
    }
}

/// Connects to one target, through a toolset (so that its tools are pinned).
pub(crate) async fn connect_one(
    target: Target,
    approve_all_pins: bool,
) -> anyhow::Result<(McpToolset, McpConnection)> {
    let options = ConnectOptions {
        strict: true,
        approve_all_pins,
        ..ConnectOptions::default()
    };
    let toolset = toolset(vec![target], &options).await?;
    let connection = toolset
        .connections()
        .first()
        .map(|(_, connection)| connection.clone())
        .ok_or_else(|| anyhow!("no server was connected"))?;
    Ok((toolset, connection))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(line: &str) -> McpServerSpec {
        inline_specs([(Transport::Stdio, &line.to_owned())].into_iter())
            .unwrap()
            .remove(0)
    }

    #[test]
    fn stdio_command_lines_are_split_like_a_shell() {
        assert_eq!(
            stdio(r#"python3 -c 'print("a b")' "x y" z\ w"#),
            McpServerSpec::stdio(
                "python3",
                vec![
                    "-c".into(),
                    r#"print("a b")"#.into(),
                    "x y".into(),
                    "z w".into()
                ]
            )
        );
        let error = inline_specs([(Transport::Stdio, &"node 'oops".to_owned())].into_iter());
        assert!(error.unwrap_err().to_string().contains("unbalanced quotes"));
        assert!(inline_specs([(Transport::Stdio, &"  ".to_owned())].into_iter()).is_err());
    }

    #[test]
    fn inline_servers_get_readable_names() {
        for (line, name) in [
            (
                "npx -y @modelcontextprotocol/server-everything",
                "server-everything",
            ),
            ("npx -y some-server@1.2.3 /tmp", "some-server"),
            (
                "node /opt/server-everything/dist/index.js stdio",
                "server-everything",
            ),
            ("python3 -m weather_server", "weather_server"),
            ("uvx mcp-server-git", "mcp-server-git"),
            ("/usr/local/bin/my-server --flag", "my-server"),
        ] {
            assert_eq!(base_name(&stdio(line)), name, "{line}");
        }
        let http = McpServerSpec::Http {
            url: "http://127.0.0.1:8080/mcp".into(),
            headers: Vec::new(),
        };
        assert_eq!(base_name(&http), "127.0.0.1:8080");
    }

    #[test]
    fn duplicate_names_get_a_suffix() {
        let taken = vec![
            Target {
                name: "a".into(),
                spec: stdio("a"),
                inline: true,
                timeouts: McpServerTimeouts::default(),
                oauth_client: None,
                trusted: false,
            },
            Target {
                name: "a-2".into(),
                spec: stdio("a"),
                inline: true,
                timeouts: McpServerTimeouts::default(),
                oauth_client: None,
                trusted: false,
            },
        ];
        assert_eq!(unique_name("a", &taken), "a-3");
        assert_eq!(unique_name("b", &taken), "b");
    }
}
