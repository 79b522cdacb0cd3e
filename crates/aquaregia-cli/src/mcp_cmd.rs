//! `aquaregia mcp tools` and `aquaregia mcp call`: one server, no model.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use aquaregia::Tool;
use aquaregia_mcp::{
    Connector, McpConnection, McpServerSpec, McpServerTimeouts, McpToolset, MemoryTokenStore,
    PinFile, TokenStore,
};
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::call_args;
use crate::oauth;
use crate::output::{self, Styles};
use crate::servers::{self, InlineServer, Target};

#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// List a server's tools exactly as an agent sees them.
    #[command(override_usage = "aquaregia mcp tools [OPTIONS] <SERVER>\n       \
                                aquaregia mcp tools [OPTIONS] (--stdio <COMMAND> | --http <URL> | --sse <URL>)")]
    Tools(ToolsArgs),
    /// Call one tool (arguments validated against its schema) and print the result.
    ///
    /// Exits with status 1 when the tool reports an error, printed on stderr.
    #[command(
        override_usage = "aquaregia mcp call [OPTIONS] <SERVER> <TOOL> [ARGS]\n       \
                                aquaregia mcp call [OPTIONS] (--stdio <COMMAND> | --http <URL> | --sse <URL>) <TOOL> [ARGS]"
    )]
    Call(CallArgs),
    /// Authorize with an HTTP server (OAuth 2.1) and store its token for later commands.
    ///
    /// Opens the authorization URL in a browser (and prints it) and waits for the redirect
    /// on 127.0.0.1. Tokens are kept in the data directory (AQUAREGIA_DATA_DIR overrides it),
    /// readable only by you. Headless, with an authorization server that approves without a
    /// user: AQUAREGIA_OAUTH_AUTOMATIC=1 fetches the URL instead of opening a browser.
    #[command(override_usage = "aquaregia mcp login <SERVER>\n       \
                                aquaregia mcp login (--http <URL>)")]
    Login(AuthArgs),
    /// Forget the token stored for an HTTP server.
    #[command(override_usage = "aquaregia mcp logout <SERVER>\n       \
                                aquaregia mcp logout (--http <URL>)")]
    Logout(AuthArgs),
    /// Trust a server: approve and pin its current tools, and believe its annotations
    /// (`readOnlyHint` tools then run without a question).
    ///
    /// Tools are pinned the first time a server is used: a tool whose description, schema or
    /// annotations change later, or a new tool, is withheld from the model until approved
    /// (asked on a terminal, or with this command). Pins are kept in the data directory
    /// (AQUAREGIA_DATA_DIR overrides it), in pins.json.
    #[command(override_usage = "aquaregia mcp trust <SERVER>\n       \
                                aquaregia mcp trust (--stdio <COMMAND> | --http <URL> | --sse <URL>)")]
    Trust(AuthArgs),
    /// Stop trusting a server: forget its pins and its trust (its tools are pinned again as
    /// they are the next time it is used, and its annotations are not believed).
    #[command(override_usage = "aquaregia mcp untrust <SERVER>\n       \
                                aquaregia mcp untrust (--stdio <COMMAND> | --http <URL> | --sse <URL>)")]
    Untrust(AuthArgs),
}

#[derive(Debug, Args)]
pub(crate) struct AuthArgs {
    /// A server name from the config file.
    #[arg(value_name = "SERVER")]
    server: Option<String>,
    #[command(flatten)]
    inline: InlineServer,
}

#[derive(Debug, Args)]
pub(crate) struct ToolsArgs {
    /// A server name from the config file.
    #[arg(value_name = "SERVER")]
    server: Option<String>,
    #[command(flatten)]
    inline: InlineServer,
    #[command(flatten)]
    timeouts: TimeoutArgs,
    /// Print the tools as JSON, with MCP's field names (name, description, inputSchema,
    /// annotations with readOnlyHint...).
    #[arg(long)]
    json: bool,
}

/// `--connect-timeout` and `--call-timeout`, over the config's `startupTimeoutMs` and
/// `timeout`.
#[derive(Debug, Args)]
pub(crate) struct TimeoutArgs {
    /// How long the server gets to start and finish its handshake (`30s`, `500ms`, `2m`;
    /// a bare number is seconds).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    connect_timeout: Option<Duration>,
    /// How long a tool call may go without an answer or progress (same format).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    call_timeout: Option<Duration>,
}

impl TimeoutArgs {
    fn apply(&self, target: &mut Target) {
        target.override_timeouts(
            McpServerTimeouts::new()
                .connect(self.connect_timeout)
                .call(self.call_timeout),
        );
    }
}

/// `30s`, `500ms`, `2m`, `1.5` (seconds).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (like 30s, 500ms, 2m)"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("`{text}`: the unit must be ms, s or m")),
    };
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|duration| !duration.is_zero())
        .ok_or_else(|| format!("`{text}` must be a positive duration"))
}

#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    /// A server name from the config file (left out with --stdio, --http or --sse).
    #[arg(value_name = "SERVER")]
    first: Option<String>,
    /// The tool, named as `aquaregia mcp tools` lists it.
    #[arg(value_name = "TOOL")]
    second: Option<String>,
    /// The arguments: one JSON object, or `key=value` pairs typed by the tool's schema
    /// (numbers, booleans, JSON for objects and arrays, text otherwise). Default `{}`.
    #[arg(value_name = "ARGS")]
    rest: Vec<String>,
    #[command(flatten)]
    inline: InlineServer,
    #[command(flatten)]
    timeouts: TimeoutArgs,
    /// Print the whole result as JSON, in MCP's `CallToolResult` shape: `content` blocks,
    /// `structuredContent` when the tool gave one, `isError`.
    #[arg(long)]
    json: bool,
    /// Write image results to files in this directory (created if needed).
    #[arg(long, value_name = "DIR")]
    save_images: Option<PathBuf>,
}

pub(crate) async fn run(command: McpCommand, config: Option<&Path>) -> anyhow::Result<()> {
    match command {
        McpCommand::Tools(args) => list_tools(args, config).await,
        McpCommand::Call(args) => call_tool(args, config).await,
        McpCommand::Login(args) => login(args, config).await,
        McpCommand::Logout(args) => logout(args, config).await,
        McpCommand::Trust(args) => trust(args, config).await,
        McpCommand::Untrust(args) => untrust(&args, config),
    }
}

async fn trust(args: AuthArgs, config: Option<&Path>) -> anyhow::Result<()> {
    let target = servers::select_one(config, args.server.as_deref(), &args.inline)?;
    let name = target.name().to_owned();
    let (toolset, _) = servers::connect_one(target, true).await?;
    let tools = toolset.tools().await;
    toolset.close().await;
    let tools = tools?;
    PinFile::in_data_dir()?.set_trusted(&name, true)?;
    eprintln!(
        "trusted `{name}`: its {} tools are pinned as they are now, and their annotations \
         are believed",
        tools.len()
    );
    Ok(())
}

fn untrust(args: &AuthArgs, config: Option<&Path>) -> anyhow::Result<()> {
    let target = servers::select_one(config, args.server.as_deref(), &args.inline)?;
    if PinFile::in_data_dir()?.forget(target.name())? {
        eprintln!(
            "`{}` is no longer trusted; its tools will be pinned again when it is next used",
            target.name()
        );
    } else {
        eprintln!("`{}` was neither trusted nor pinned", target.name());
    }
    Ok(())
}

/// The URL of the one HTTP server of `args`.
fn http_target(args: &AuthArgs, config: Option<&Path>) -> anyhow::Result<(Target, String)> {
    let target = servers::select_one(config, args.server.as_deref(), &args.inline)?;
    let Some(url) = target.url().map(str::to_owned) else {
        bail!(
            "`{}` is a stdio server: only HTTP servers use OAuth",
            target.name()
        );
    };
    Ok((target, url))
}

async fn login(args: AuthArgs, config: Option<&Path>) -> anyhow::Result<()> {
    let (target, url) = http_target(&args, config)?;
    if let McpServerSpec::Http { headers, .. } | McpServerSpec::Sse { headers, .. } = target.spec()
        && headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("authorization"))
    {
        bail!(
            "`{}` is configured with an Authorization header: remove it to use OAuth",
            target.name()
        );
    }
    let store = oauth::store()?;
    // A fresh authorization, kept aside until it worked: a failed login leaves the stored
    // token as it was.
    let fresh = MemoryTokenStore::new();
    let connector = Connector::new().name(target.name()).oauth(
        oauth::authorizing(target.oauth_client())
            .await?
            .store(fresh.clone()),
    );
    let connection = target.spec().connect(connector).await?;
    let tools = connection.tools().await.map(|tools| tools.len());
    connection.close().await;
    let Some(credentials) = fresh.load(&url).await? else {
        eprintln!(
            "server `{}` did not ask for authorization: nothing to store",
            target.name()
        );
        return Ok(());
    };
    store.save(&url, credentials).await?;
    match tools {
        Ok(count) => eprintln!("logged in to `{}` ({count} tools)", target.name()),
        Err(error) => eprintln!(
            "logged in to `{}` (listing its tools failed: {error})",
            target.name()
        ),
    }
    Ok(())
}

async fn logout(args: AuthArgs, config: Option<&Path>) -> anyhow::Result<()> {
    let (target, url) = http_target(&args, config)?;
    if oauth::store()?.remove(&url).await? {
        eprintln!("logged out of `{}`", target.name());
    } else {
        eprintln!("no stored token for `{}`", target.name());
    }
    Ok(())
}

async fn list_tools(args: ToolsArgs, config: Option<&Path>) -> anyhow::Result<()> {
    let mut target = servers::select_one(config, args.server.as_deref(), &args.inline)?;
    args.timeouts.apply(&mut target);
    let (server, tools, withheld, left_out) =
        with_server(target, |toolset, connection| async move {
            let tools = toolset.tools().await?;
            Ok((
                connection.name().to_owned(),
                tools,
                toolset.withheld(),
                connection.left_out_tools(),
            ))
        })
        .await?;
    for tool in &left_out {
        eprintln!(
            "left out: `{}`: {}",
            output::clean(&tool.name),
            output::clean(&tool.reason)
        );
    }
    for tool in &withheld {
        eprintln!(
            "withheld: `{}` is new or changed since its tools were pinned; run `aquaregia mcp \
             trust {}` to approve it",
            tool.name, tool.server
        );
    }
    if args.json {
        let descriptors: Vec<Value> = tools.iter().map(descriptor_json).collect();
        let json = format!("{:#}\n", Value::Array(descriptors));
        return output::write_stdout(&output::clean(&json));
    }
    if tools.is_empty() {
        eprintln!("server `{server}` has no tools");
        return Ok(());
    }
    let styles = Styles::stdout();
    let mut text = String::new();
    for tool in &tools {
        let descriptor = tool.descriptor();
        text.push_str(&styles.bold(&output::clean(&descriptor.name)));
        text.push_str(&output::signature(&descriptor.input_schema));
        let hints = hints(tool);
        if !hints.is_empty() {
            text.push_str(&styles.dim(&format!("  [{}]", hints.join(", "))));
        }
        text.push('\n');
        for line in output::clean(&descriptor.description).lines() {
            text.push_str("    ");
            text.push_str(line);
            text.push('\n');
        }
    }
    output::write_stdout(&text)
}

async fn call_tool(args: CallArgs, config: Option<&Path>) -> anyhow::Result<()> {
    // With an inline server there is no SERVER positional: the others move up by one.
    // With an inline server there is no SERVER positional: the others move up by one.
    let (server, tool, raw_arguments) = if args.inline.is_given() {
        let arguments = args.second.into_iter().chain(args.rest).collect();
        (None, args.first, arguments)
    } else {
        (args.first, args.second, args.rest)
    };
    let mut target = servers::select_one(config, server.as_deref(), &args.inline)?;
    args.timeouts.apply(&mut target);
    let name =
        tool.ok_or_else(|| anyhow!("which tool? aquaregia mcp call <SERVER> <TOOL> [ARGS]"))?;
    let result = with_server(target, |toolset, connection| async move {
        let tools = toolset.tools().await?;
        let Some(tool) = tools.iter().find(|tool| tool.name() == name) else {
            let names: Vec<&str> = tools.iter().map(Tool::name).collect();
            let server = connection.name();
            if names.is_empty() {
                bail!("server `{server}` has no tools");
            }
            let close = call_args::closest(&name, &names);
            if !close.is_empty() {
                bail!(
                    "server `{server}` has no tool `{name}`; did you mean {}?",
                    close
                        .iter()
                        .map(|name| format!("`{name}`"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                );
            }
            bail!(
                "server `{server}` has no tool `{name}` (its tools: {})",
                names.join(", ")
            );
        };
        let arguments = call_args::parse(&raw_arguments, &tool.descriptor().input_schema)
            .with_context(|| format!("the arguments of `{name}`"))?;
        tool.execute(arguments)
            .await
            .map_err(|error| anyhow!("tool `{name}` failed: {error}"))
    })
    .await?;
    if let Some(dir) = &args.save_images {
        call_args::save_images(&result, dir)?;
    }
    let mut text = if args.json {
        output::result_json(&result)
    } else {
        output::render_result(&result)
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    output::write_stdout(&text)
}

/// Connects, runs `work` on the toolset of the one server and its connection, and closes
/// the server whatever happened.
async fn with_server<T, Fut>(
    target: Target,
    work: impl FnOnce(McpToolset, McpConnection) -> Fut,
) -> anyhow::Result<T>
where
    Fut: Future<Output = anyhow::Result<T>>,
{
    let (toolset, connection) = servers::connect_one(target, false).await?;
    let result = work(toolset.clone(), connection).await;
    toolset.close().await;
    result
}

/// The read-only/destructive/... hints a tool declares.
fn hints(tool: &Tool) -> Vec<&'static str> {
    let annotations = tool.annotations();
    [
        (annotations.read_only, "read-only"),
        (annotations.destructive, "destructive"),
        (annotations.idempotent, "idempotent"),
        (annotations.open_world, "open-world"),
    ]
    .into_iter()
    .filter(|(hint, _)| *hint == Some(true))
    .map(|(_, name)| name)
    .collect()
}

fn descriptor_json(tool: &Tool) -> Value {
    let descriptor = tool.descriptor();
    let hints = tool.annotations();
    let mut annotations = Map::new();
    if let Some(title) = &hints.title {
        annotations.insert("title".into(), title.clone().into());
    }
    for (name, hint) in [
        ("readOnlyHint", hints.read_only),
        ("destructiveHint", hints.destructive),
        ("idempotentHint", hints.idempotent),
        ("openWorldHint", hints.open_world),
    ] {
        if let Some(hint) = hint {
            annotations.insert(name.into(), hint.into());
        }
    }
    json!({
        "name": descriptor.name,
        "description": descriptor.description,
        "inputSchema": descriptor.input_schema,
        "annotations": annotations,
    })
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_take_a_unit_or_mean_seconds() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("5h").is_err());
        assert!(parse_duration("soon").is_err());
    }
}
