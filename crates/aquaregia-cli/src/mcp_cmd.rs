//! `aquaregia mcp tools` and `aquaregia mcp call`: one server, no model.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use aquaregia::Tool;
use aquaregia::mcp::McpConnection;
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::call_args;
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
}

#[derive(Debug, Args)]
pub(crate) struct ToolsArgs {
    /// A server name from the config file.
    #[arg(value_name = "SERVER")]
    server: Option<String>,
    #[command(flatten)]
    inline: InlineServer,
    /// Print the tools as JSON, with MCP's field names (name, description, inputSchema,
    /// annotations with readOnlyHint...).
    #[arg(long)]
    json: bool,
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
    /// Print the result as the JSON value the agent would get.
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
    }
}

async fn list_tools(args: ToolsArgs, config: Option<&Path>) -> anyhow::Result<()> {
    let target = servers::select_one(config, args.server.as_deref(), &args.inline)?;
    let (server, tools) = with_server(target, |connection| async move {
        Ok((connection.name().to_owned(), connection.tools().await?))
    })
    .await?;
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
    let target = servers::select_one(config, server.as_deref(), &args.inline)?;
    let name =
        tool.ok_or_else(|| anyhow!("which tool? aquaregia mcp call <SERVER> <TOOL> [ARGS]"))?;
    let result = with_server(target, |connection| async move {
        let tools = connection.tools().await?;
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

/// Connects, runs `work` on the connection, and closes the server whatever happened.
async fn with_server<T, Fut>(
    target: Target,
    work: impl FnOnce(McpConnection) -> Fut,
) -> anyhow::Result<T>
where
    Fut: Future<Output = anyhow::Result<T>>,
{
    let connection = servers::connect(target).await?;
    let result = work(connection.clone()).await;
    connection.close().await;
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
