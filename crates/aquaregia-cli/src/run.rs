//! `aquaregia run`: one prompt (an argument, or stdin), an agent over the tools of MCP
//! servers, the answer streamed to stdout as text or JSON, and the turn saved as a session.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use aquaregia::{AgentOutput, CancellationToken, Client, Message, PriceTable, StopReason};
use aquaregia_mcp::McpToolset;
use clap::Args;
use tokio::io::AsyncReadExt;

use crate::Interrupted;
use crate::agent_args::{AgentArgs, OutputFormat};
use crate::console::{AnswerText, Console, StdinLines};
use crate::conversation::Conversation;
use crate::line_input::LineInput;
use crate::output::{self, Styles};
use crate::permissions::Permissions;
use crate::prices;
use crate::servers::{self, ConnectOptions, Selection};
use crate::skills;
use crate::turn::{self, Model};

#[derive(Debug, Args)]
#[command(after_help = "\
The prompt: the argument; `-`, or no argument with stdin piped, reads it from stdin; with an
argument and stdin piped, stdin is appended to the prompt as context
(cat err.log | aquaregia run \"why did this fail?\"). In a script whose stdin stays open
(`while read ...; do aquaregia run ...; done`), give `< /dev/null`.

Servers: every server of the config file, unless some are named with --server or given with
--stdio/--http/--sse; then exactly those. With more than one server, tools are named
<server>__<tool>. A server that fails to start is reported and left out (--strict: stop).

Tool calls: tools annotated read-only, and those matching --allow, run without asking (unless
--ask-all); those matching --deny never run. Before any other call,
`Allow <tool>(<arguments>)? [y/N/always]` is asked on stderr and the answer read from stdin:
y runs the call, always allows that tool for the rest of the run, anything else denies it
(the model is told the user declined); on a terminal the arguments are wrapped to its width
and v shows them as JSON. While asking, calls run one at a time. When stdin is
not a terminal (and --answers-from-stdin is given, or nothing else was piped), one line is
read per question, so a script can answer; once stdin is closed every further call is denied.
--yes allows every call without asking.

Prompt caching: on Anthropic the system prompt, the tools and the latest turn are marked for
caching; on OpenAI the session's requests share a prompt_cache_key (a fork's is its
parent's). A tool result longer than 25k tokens reaches the model as its head and tail; the
model reads the rest with read_tool_output.

Output: on a terminal the answer's Markdown is rendered as its lines arrive; piped, or with
NO_COLOR, it is printed as the model wrote it. --usage and --output json give the cost when
the model's price is known: list prices of the main OpenAI, Anthropic and Gemini models, and
the config's \"prices\": {\"<model>\": {\"input\": 0.5, \"output\": 1.5}} (USD per million
tokens; also \"cachedInput\", \"cacheWrite\").

Sessions: every run is saved (in $AQUAREGIA_DATA_DIR/sessions, default the user data dir);
--continue goes on with this directory's latest session, --resume <ID> with a given one;
with --fork, in a new session forked from it (the original stays as it was).

Ctrl-C, SIGTERM or SIGHUP stops the run and closes the servers; a second one quits at once.
Exit status: 0 when the agent answered, 1 on an error or when it ran out of --max-steps,
130 when interrupted.")]
pub(crate) struct RunArgs {
    /// What to ask the agent; `-` reads it from stdin.
    prompt: Option<String>,

    #[command(flatten)]
    agent: AgentArgs,

    /// How to print the result.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,

    /// Print the tokens used on stderr after the answer (always in `--output json`).
    #[arg(long)]
    usage: bool,

    /// With a prompt argument and stdin piped, read answers to permission questions from
    /// stdin instead of taking stdin as context.
    #[arg(long)]
    answers_from_stdin: bool,
}

pub(crate) async fn run(
    args: RunArgs,
    config: Option<&Path>,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let (prompt, stdin_taken) = tokio::select! {
        prompt = read_prompt(&args) => prompt?,
        () = cancel.cancelled() => return Err(Interrupted.into()),
    };
    let mut conversation = Conversation::open(&args.agent.session, config).await?;
    let chosen = args
        .agent
        .model
        .clone()
        .or_else(|| conversation.model().map(str::to_owned));
    let defaulted = chosen.is_none();
    let spec = chosen.unwrap_or_else(Client::default_model_spec);
    let model = Model::new(&spec)?;
    let selection = servers::select(config, &args.agent.servers, &args.agent.inline)?;
    let permissions = permissions(&args.agent, &selection)?;
    let prices = prices::table(&selection.prices);
    // Dropping the connection attempts on Ctrl-C kills any server already started.
    let options = connect_options(&args.agent);
    let toolset = tokio::select! {
        toolset = servers::toolset(selection.targets, &options) => toolset?,
        () = cancel.cancelled() => return Err(Interrupted.into()),
    };
    let answers = if stdin_taken {
        Err("stdin was read as the prompt")
    } else {
        Ok(LineInput::Plain(Arc::new(StdinLines::default())))
    };
    let console = Arc::new(Console::new(permissions, answers, AnswerText::new()));
    let result = run_turn(
        &args,
        (&model, &prices),
        &toolset,
        &console,
        &mut conversation,
        prompt,
        cancel,
    )
    .await
    .map_err(|error| explain_unreachable_default(error, &spec, defaulted));
    toolset.close().await;
    result
}

async fn run_turn(
    args: &RunArgs,
    (model, prices): (&Model, &PriceTable),
    toolset: &McpToolset,
    console: &Arc<Console>,
    conversation: &mut Conversation,
    prompt: String,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let tools = tokio::select! {
        tools = toolset.tools() => tools?,
        () = cancel.cancelled() => return Err(Interrupted.into()),
    };
    let mut tools = tools;
    tools.extend(skills::load(toolset).await.tool());
    tracing::info!(model = %model.id, tools = tools.len(), servers = toolset.connections().len(), "starting the agent");
    let cache_key = conversation.cache_key();
    let agent = turn::agent(
        &args.agent,
        (model, &cache_key),
        prices,
        tools,
        toolset,
        console,
        cancel,
    )?;
    let prompt = [Message::user(prompt)];
    let mut messages = conversation.history().to_vec();
    messages.extend(prompt.iter().cloned());
    let output = turn::run(
        &agent,
        messages,
        console,
        args.output,
        !args.agent.no_reasoning,
    )
    .await?;
    if args.usage {
        let line = turn::usage_line(&output.usage, output.cost.as_ref());
        eprintln!("{}", Styles::stderr().dim(&line));
    }
    if output.stop_reason != StopReason::Cancelled {
        conversation.record(&prompt, &output, &model.spec).await;
    }
    if args.output != OutputFormat::Text {
        let session = conversation.meta().map(|meta| meta.id.to_string());
        let summary = turn::summary_json(&output, &model.spec, session.as_deref());
        let text = match args.output {
            OutputFormat::Json => format!("{summary:#}\n"),
            _ => format!("{summary}\n"),
        };
        output::write_stdout(&text)?;
    }
    outcome(&output, args.agent.max_steps)
}

/// The prompt, and whether stdin was read for it.
async fn read_prompt(args: &RunArgs) -> anyhow::Result<(String, bool)> {
    let piped = !std::io::stdin().is_terminal();
    match args.prompt.as_deref() {
        Some("-") => Ok((read_stdin_prompt().await?, true)),
        None if piped => Ok((read_stdin_prompt().await?, true)),
        None => bail!(
            "what should the agent do? give a prompt (aquaregia run \"...\"), `-` to read it \
             from stdin, or use `aquaregia chat`"
        ),
        Some(prompt) if piped && !args.answers_from_stdin => {
            let context = read_stdin().await?;
            if context.trim().is_empty() {
                // Nothing was piped: stdin stays free for answers.
                Ok((prompt.to_owned(), false))
            } else {
                Ok((format!("{prompt}\n\n{}", context.trim_end()), true))
            }
        }
        Some(prompt) => Ok((prompt.to_owned(), false)),
    }
}

async fn read_stdin_prompt() -> anyhow::Result<String> {
    let prompt = read_stdin().await?;
    if prompt.trim().is_empty() {
        bail!("the prompt read from stdin is empty");
    }
    Ok(prompt.trim_end().to_owned())
}

async fn read_stdin() -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    tokio::io::stdin()
        .read_to_end(&mut bytes)
        .await
        .context("cannot read stdin")?;
    String::from_utf8(bytes).map_err(|_| anyhow!("stdin is not UTF-8 text"))
}

/// The flags' permission rules plus the config's (`--policy` wins over the config's
/// `"policy"`).
///
/// # Errors
/// A policy file that cannot be read or is not valid Cedar.
pub(crate) fn permissions(args: &AgentArgs, selection: &Selection) -> anyhow::Result<Permissions> {
    Permissions::new(
        args.yes,
        args.ask_all,
        args.allow.iter().chain(&selection.allow).cloned().collect(),
        args.deny.iter().chain(&selection.deny).cloned().collect(),
        args.policy.as_deref().or(selection.policy.as_deref()),
        args.policy_shadow.as_deref(),
    )
}

pub(crate) fn connect_options(args: &AgentArgs) -> ConnectOptions {
    ConnectOptions {
        strict: args.strict,
        startup_timeout: Some(args.connect_timeout()),
        call_timeout: args.call_timeout(),
        disabled_tools: args.disabled_tools.clone(),
        approve_all_pins: false,
    }
}

/// A model nobody chose (the fallback to a local Ollama, usually) that cannot be reached gets
/// a hint on how to choose one.
pub(crate) fn explain_unreachable_default(
    error: anyhow::Error,
    spec: &str,
    defaulted: bool,
) -> anyhow::Error {
    let unreachable = matches!(
        error.downcast_ref::<aquaregia::Error>(),
        Some(aquaregia::Error::Transport { .. })
    );
    if defaulted && unreachable {
        anyhow!(
            "{error:#} (no model was chosen, so `{spec}` was tried: pass --model \
             provider:model, or set AQUAREGIA_MODEL, OPENAI_API_KEY or ANTHROPIC_API_KEY)"
        )
    } else {
        error
    }
}

pub(crate) fn outcome(output: &AgentOutput, max_steps: u32) -> anyhow::Result<()> {
    let styles = Styles::stderr();
    let warn = |what: &str| eprintln!("{} {what}", styles.yellow("warning:"));
    match output.stop_reason {
        StopReason::Cancelled => Err(Interrupted.into()),
        StopReason::MaxSteps => {
            bail!("the agent was still calling tools after {max_steps} steps; raise --max-steps")
        }
        StopReason::Length => {
            warn("the answer was cut off at the model's output token limit");
            Ok(())
        }
        StopReason::Refusal => {
            warn("the model refused to answer, or a content filter stopped it");
            Ok(())
        }
        _ => Ok(()),
    }
}
