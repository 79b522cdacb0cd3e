//! The `aquaregia` command line: run an agent over MCP tools, inspect MCP servers, serve ACP.
//!
//! stdout carries only each command's output (for `acp`, only JSON-RPC); everything else
//! (logs, progress, prompts, warnings, errors) goes to stderr.

mod acp;
mod agent_args;
mod call_args;
mod chat;
mod chat_prompts;
mod config;
mod config_cmd;
mod console;
mod conversation;
mod elicit;
mod line_input;
mod markdown;
mod mcp_cmd;
mod models_cmd;
mod oauth;
mod output;
mod permissions;
mod prices;
mod prompt_cache;
mod reaper;
mod run;
#[cfg(feature = "serve")]
mod serve;
mod servers;
mod session_store;
mod sessions_cmd;
mod signals;
mod skills;
mod telemetry;
mod turn;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use aquaregia::CancellationToken;
use clap::{Parser, Subcommand};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Run LLM agents whose tools come from MCP servers.
#[derive(Debug, Parser)]
#[command(name = "aquaregia", version, propagate_version = true)]
#[command(after_help = "\
MCP servers are named in a config file in the common `mcpServers` format (Claude Desktop,
Cursor...; VS Code's `servers` too; comments and trailing commas allowed) or given inline with
--stdio/--http/--sse. Without --config, <user config dir>/aquaregia/aquaregia.json, ./.mcp.json
and ./aquaregia.json are merged (a later file's server wins); `aquaregia config` shows what
came from where.

Logs go to stderr, filtered by RUST_LOG (default: warn, rmcp off). NO_COLOR turns colours off.")]
struct Cli {
    /// The MCP servers config file (`{"mcpServers": {...}}`).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an agent on a prompt with the tools of MCP servers; the answer streams to stdout.
    Run(run::RunArgs),
    /// Talk with an agent, turn after turn, with the tools of MCP servers.
    Chat(chat::ChatArgs),
    /// List saved sessions (continue one with `--continue` or `--resume <ID>`).
    Sessions(sessions_cmd::SessionsArgs),
    /// Show the config files read, and where each server and permission rule came from.
    Config,
    /// List the models the configured providers offer, as provider:model specs.
    Models(models_cmd::ModelsArgs),
    /// Inspect MCP servers: list their tools, call one.
    #[command(subcommand)]
    Mcp(mcp_cmd::McpCommand),
    /// Serve an agent over ACP (Agent Client Protocol) on stdio, for editors.
    Acp(acp::AcpArgs),
    /// Serve the `acp` agent to remote ACP clients over WebSocket (`ws://ADDRESS/acp`), behind
    /// a bearer token ($AQUAREGIA_SERVE_TOKEN or --token-file).
    #[cfg(feature = "serve")]
    Serve(serve::ServeArgs),
    /// Ends the stdio servers' process groups when the CLI that started it dies (internal).
    #[command(name = reaper::SUBCOMMAND, hide = true)]
    Reaper,
}

/// The command was stopped by Ctrl-C; exits with 130 like a shell would report SIGINT.
#[derive(Debug)]
struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

fn main() -> ExitCode {
    // `aquaregia __sandbox ...`: confine this process and exec the command, before anything
    // (clap included) sees its arguments or starts a thread.
    let mut args = std::env::args_os();
    if args
        .nth(1)
        .is_some_and(|arg| arg == acp::SANDBOX_SUBCOMMAND)
    {
        return aquaregia_acp::sandbox::launcher_main(args);
    }
    let cli = Cli::parse();
    if let Command::Reaper = cli.command {
        return reaper::run();
    }
    let exporter = init_logging(&cli.command);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            output::print_error(&anyhow::anyhow!(
                "could not start the async runtime: {error}"
            ));
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run_until_interrupted(cli));
    // Don't wait on blocking work nobody needs any more (a DNS lookup, a stdin read).
    runtime.shutdown_timeout(Duration::from_millis(200));
    if let Some(exporter) = exporter {
        exporter.shutdown();
    }
    code
}

/// Runs the command. The first Ctrl-C (or SIGTERM, SIGHUP) cancels `run` cleanly (servers
/// closed); other commands, and a second signal, stop at once: dropping the command kills its
/// stdio servers' process groups, so nothing is left behind. `chat` handles signals itself
/// (one cancels the turn in flight), and so do `acp` and `serve` (every session's servers are
/// closed, then it exits with 0).
async fn run_until_interrupted(cli: Cli) -> ExitCode {
    let cancel = CancellationToken::new();
    let graceful = matches!(cli.command, Command::Run(_));
    let own_signals = match cli.command {
        Command::Chat(_) | Command::Acp(_) => true,
        #[cfg(feature = "serve")]
        Command::Serve(_) => true,
        _ => false,
    };
    let mut signals = (!own_signals).then(signals::StopSignals::new);
    let mut work = Box::pin(dispatch(cli, cancel.clone()));
    let result = loop {
        let Some(signals) = signals.as_mut() else {
            break (&mut work).await;
        };
        tokio::select! {
            result = &mut work => break result,
            () = signals.recv() => {
                if !graceful || cancel.is_cancelled() {
                    break Err(Interrupted.into());
                }
                cancel.cancel();
                eprintln!("stopping... (press Ctrl-C again to quit at once)");
            }
        }
    };
    drop(work);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`| head`): it has what it wanted.
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) if error.is::<Interrupted>() => {
            eprintln!("interrupted");
            ExitCode::from(130)
        }
        Err(error) => {
            output::print_error(&error);
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

async fn dispatch(cli: Cli, cancel: CancellationToken) -> anyhow::Result<()> {
    let config = cli.config;
    match cli.command {
        Command::Run(args) => run::run(args, config.as_deref(), cancel).await,
        Command::Chat(args) => chat::run(args, config.as_deref()).await,
        Command::Sessions(args) => sessions_cmd::run(args, config.as_deref()).await,
        Command::Config => config_cmd::run(config.as_deref()),
        Command::Models(args) => models_cmd::run(args).await,
        Command::Mcp(command) => mcp_cmd::run(command, config.as_deref()).await,
        Command::Acp(args) => acp::run(args, config.as_deref()).await,
        #[cfg(feature = "serve")]
        Command::Serve(args) => serve::run(args, config.as_deref()).await,
        Command::Reaper => Ok(()),
    }
}

/// Logs to stderr; with the `otel` feature and `OTEL_EXPORTER_OTLP_ENDPOINT` set, the GenAI
/// spans are also exported (the returned exporter flushes them at exit).
fn init_logging(command: &Command) -> Option<telemetry::Exporter> {
    // rmcp logs transport failures at ERROR that the SDK already turns into the one error line
    // we print; RUST_LOG brings them back. Editors show every stderr line of an agent (acp.el
    // as an error), so `acp` logs nothing below warn unless RUST_LOG asks.
    let default = match command {
        Command::Acp(_) => "warn,rmcp=off",
        // Connections coming and going are worth a line.
        #[cfg(feature = "serve")]
        Command::Serve(_) => "warn,rmcp=off,aquaregia::serve=info",
        // A server that fails to start is reported once, by the command.
        _ => "warn,rmcp=off,aquaregia_mcp::toolset=error",
    };
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Only when something logs at TRACE: the directive would otherwise raise the SDK's logs to
    // DEBUG (lines for every message, slowing a session/load replay down by half).
    let serves_acp = match command {
        Command::Acp(_) => true,
        #[cfg(feature = "serve")]
        Command::Serve(_) => true,
        _ => false,
    };
    if serves_acp
        && filter
            .max_level_hint()
            .is_none_or(|level| level == tracing_subscriber::filter::LevelFilter::TRACE)
    {
        filter = filter.add_directive(acp::LOG_CAP.parse().unwrap_or_default());
    }
    let log = tracing_subscriber::fmt::layer()
        .with_writer(output::RedactingStderr)
        .with_ansi(output::Styles::stderr().enabled())
        .with_filter(filter);
    #[cfg(feature = "otel")]
    let (export, exporter) = telemetry::start().unzip();
    #[cfg(not(feature = "otel"))]
    let (export, exporter) = (None::<tracing_subscriber::layer::Identity>, None);
    tracing_subscriber::registry().with(log).with(export).init();
    exporter
}
