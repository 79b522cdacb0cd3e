//! `aquaregia run`: an agent over the tools of MCP servers, its answer streamed to stdout and
//! its tool calls shown (and, unless `--yes`, approved) on stderr.

use std::collections::{HashMap, HashSet};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use aquaregia::mcp::McpToolset;
use aquaregia::{
    AgentEvent, AgentHooks, AgentOutput, CancellationToken, Client, StopReason, Tool, ToolCall,
    ToolCallDecision, ToolExecError, ToolOutput,
};
use clap::Args;
use futures::StreamExt;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use tokio::sync::mpsc;

use crate::Interrupted;
use crate::output::{self, Styles};
use crate::prompt_cache;
use crate::servers::{self, InlineServers};

/// What the model is told when the user says no.
const DECLINED: &str = "the user declined";

#[derive(Debug, Args)]
#[command(after_help = "\
Servers: every server of the config file, unless some are named with --server or given with
--stdio/--http/--sse; then exactly those. With more than one server, tools are named
<server>__<tool>.

Tool calls: before each call, `Allow <tool>(<arguments>)? [y/N/always]` is asked on stderr and
the answer read from stdin: y runs the call, always allows that tool for the rest of the run,
anything else denies it (the model is told the user declined). While asking, calls run one at
a time. When stdin is not a terminal, one line is read per question, so a script can answer;
once stdin is closed every further call is denied. --yes allows every call without asking.

Prompt caching: on Anthropic the system prompt, the tools and the latest turn are marked for
caching; on OpenAI the run's requests share a prompt_cache_key.

Ctrl-C stops the run and closes the servers; a second Ctrl-C quits at once.
Exit status: 0 when the agent answered, 1 on an error or when it ran out of --max-steps,
130 when interrupted.")]
pub(crate) struct RunArgs {
    /// What to ask the agent.
    prompt: String,

    /// Use this server of the config file (repeatable).
    #[arg(long = "server", value_name = "NAME")]
    servers: Vec<String>,

    #[command(flatten)]
    inline: InlineServers,

    /// The model, as provider:model (providers: openai, openai-chat, anthropic, ollama).
    /// Default: the provider whose API key is set, else a local Ollama.
    #[arg(long, env = "AQUAREGIA_MODEL", value_name = "PROVIDER:MODEL")]
    model: Option<String>,

    /// The most model calls in the run.
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_steps: u32,

    /// System instructions for the model.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,

    /// Allow every tool call without asking.
    #[arg(long, short = 'y')]
    yes: bool,

    /// When the run ends, print its token usage on stderr (input with cache reads and
    /// writes, output with reasoning, model calls).
    #[arg(long)]
    usage: bool,
}

pub(crate) async fn run(
    args: RunArgs,
    config: Option<&Path>,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let spec = args
        .model
        .clone()
        .unwrap_or_else(Client::default_model_spec);
    let (client, model) =
        Client::from_model_spec(&spec).with_context(|| format!("cannot use model `{spec}`"))?;
    let targets = servers::select(config, &args.servers, &args.inline)?;
    // Dropping the connection attempts on Ctrl-C kills any server already started.
    let toolset = tokio::select! {
        toolset = servers::toolset(targets) => toolset?,
        () = cancel.cancelled() => return Err(Interrupted.into()),
    };
    let result = run_agent(&args, client, model, &toolset, cancel)
        .await
        .map_err(|error| explain_unreachable_default(error, &spec, args.model.is_none()));
    toolset.close().await;
    result
}

async fn run_agent(
    args: &RunArgs,
    client: Client,
    model: String,
    toolset: &McpToolset,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let tools = tokio::select! {
        tools = toolset.tools() => tools?,
        () = cancel.cancelled() => return Err(Interrupted.into()),
    };
    let servers = toolset.connections().len();
    tracing::info!(%model, tools = tools.len(), servers, "starting the agent");
    let console = Arc::new(Console::new(!args.yes));
    let mut agent = client
        .agent(model)
        .tools(tools)
        // Tools added or removed mid-run (`tools/list_changed`) reach the next step.
        .prepare_step(toolset.prepare_step())
        .max_steps(args.max_steps as usize)
        .prompt_caching(prompt_cache::for_session(&client, &run_id()))
        .cancellation_token(cancel)
        .shared_hooks(console.clone());
    if let Some(system) = &args.system {
        agent = agent.instructions(system);
    }
    if !args.yes {
        // One question at a time, and no spinner redrawing over a question.
        agent = agent.max_tool_concurrency(1);
    }
    let mut events = agent.build()?.stream(args.prompt.as_str());
    while let Some(event) = events.next().await {
        match event? {
            AgentEvent::TextDelta(text) => console.answer.write(&text)?,
            AgentEvent::ToolCallFinish { id, result, .. } => console.abandoned(&id, &result),
            AgentEvent::Finish(output) => {
                console.answer.end()?;
                if args.usage {
                    eprintln!("{}", usage_line(&output));
                }
                return outcome(&output, args.max_steps);
            }
            _ => {}
        }
    }
    bail!("the agent stopped without an answer")
}

/// A key for this run's requests (`aquaregia-run-<pid>-<nanos>`), so its steps share a cache.
fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!("aquaregia-run-{}-{nanos}", std::process::id())
}

/// A model nobody chose (the fallback to a local Ollama, usually) that cannot be reached gets
/// a hint on how to choose one.
fn explain_unreachable_default(error: anyhow::Error, spec: &str, defaulted: bool) -> anyhow::Error {
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

/// `usage: 1200 input tokens (1000 cache reads, 0 cache writes), 35 output tokens (10
/// reasoning), 2 model calls`.
fn usage_line(output: &AgentOutput) -> String {
    let usage = &output.usage;
    let calls = output.steps.len();
    format!(
        "usage: {} input tokens ({} cache reads, {} cache writes), {} output tokens \
         ({} reasoning), {calls} model call{}",
        usage.input_tokens,
        usage.cached_input_tokens,
        usage.cache_write_tokens,
        usage.output_tokens,
        usage.reasoning_tokens,
        if calls == 1 { "" } else { "s" },
    )
}

fn outcome(output: &AgentOutput, max_steps: u32) -> anyhow::Result<()> {
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

/// The run's terminal side: permission questions, a spinner per running tool call, and one
/// outcome line per finished call, all on stderr.
struct Console {
    ask: bool,
    styles: Styles,
    progress: MultiProgress,
    running: Mutex<HashMap<String, Running>>,
    always_allowed: Mutex<HashSet<String>>,
    stdin: StdinLines,
    answer: AnswerText,
}

/// A tool call in progress.
struct Running {
    bar: ProgressBar,
    label: String,
    started: Instant,
}

impl Console {
    fn new(ask: bool) -> Self {
        Self {
            ask,
            styles: Styles::stderr(),
            // Draws on stderr, and nothing at all when stderr is not a terminal.
            progress: MultiProgress::new(),
            running: Mutex::new(HashMap::new()),
            always_allowed: Mutex::new(HashSet::new()),
            stdin: StdinLines::default(),
            answer: AnswerText::new(),
        }
    }

    async fn permission(&self, call: &ToolCall, label: &str) -> ToolCallDecision {
        if lock(&self.always_allowed).contains(&call.name) {
            return ToolCallDecision::Allow;
        }
        eprint!("Allow {}? [y/N/always] ", self.styles.bold(label));
        let _ = std::io::stderr().flush();
        let Some(answer) = self.stdin.next_line().await else {
            eprintln!();
            eprintln!(
                "{} no answer (stdin is closed), so the call is denied; pass --yes to allow \
                 tool calls without asking",
                self.styles.yellow("warning:")
            );
            return ToolCallDecision::Deny(DECLINED.to_owned());
        };
        let answer = answer.trim().to_ascii_lowercase();
        if !std::io::stdin().is_terminal() {
            // Nobody typed it, so it was not echoed.
            eprintln!("{answer}");
        }
        match answer.as_str() {
            "y" | "yes" => ToolCallDecision::Allow,
            "a" | "always" => {
                lock(&self.always_allowed).insert(call.name.clone());
                ToolCallDecision::Allow
            }
            _ => ToolCallDecision::Deny(DECLINED.to_owned()),
        }
    }

    fn start(&self, call: &ToolCall, label: String) {
        let bar = self.progress.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(label.clone());
        bar.enable_steady_tick(Duration::from_millis(100));
        let running = Running {
            bar,
            label,
            started: Instant::now(),
        };
        lock(&self.running).insert(call.id.clone(), running);
    }

    /// Removes the call's spinner, if it has one.
    fn stop(&self, id: &str) -> Option<Running> {
        let running = lock(&self.running).remove(id)?;
        running.bar.finish_and_clear();
        self.progress.remove(&running.bar);
        Some(running)
    }

    /// One line saying how the call ended.
    fn report(
        &self,
        label: &str,
        running: Option<&Running>,
        result: &Result<ToolOutput, ToolExecError>,
    ) {
        let took = running
            .map(|running| {
                let seconds = running.started.elapsed().as_secs_f64();
                self.styles.dim(&format!(" in {seconds:.1}s"))
            })
            .unwrap_or_default();
        let (good, bad) = (self.styles.green("✓"), self.styles.red("✗"));
        let line = match result {
            Ok(value) => format!("{good} {label} ok{took}: {}", output::result_summary(value)),
            Err(ToolExecError::Denied(reason)) => format!("{bad} {label} denied: {reason}"),
            Err(ToolExecError::Cancelled) => format!("{bad} {label} cancelled{took}"),
            Err(error) => format!(
                "{bad} {label} failed{took}: {}",
                output::first_line(&error.to_string(), 160)
            ),
        };
        // Other calls' spinners are cleared while the line is written, then redrawn below it.
        self.progress.suspend(|| eprintln!("{line}"));
    }

    /// A call the agent gave up on when cancelled: its finish hook never ran.
    fn abandoned(&self, id: &str, result: &Result<ToolOutput, ToolExecError>) {
        if let Some(running) = self.stop(id) {
            self.report(&running.label, Some(&running), result);
        }
    }
}

#[aquaregia::async_trait]
impl AgentHooks for Console {
    async fn on_tool_call_start(&self, call: &ToolCall, tool: Option<&Tool>) -> ToolCallDecision {
        if tool.is_none() {
            // Nothing to ask about: the agent tells the model the tool does not exist.
            return ToolCallDecision::Allow;
        }
        self.answer.break_line();
        let label = format!(
            "{}({})",
            call.name,
            output::arguments_summary(&call.arguments)
        );
        if self.ask {
            let decision = self.permission(call, &label).await;
            if decision != ToolCallDecision::Allow {
                return decision;
            }
        }
        self.start(call, label);
        ToolCallDecision::Allow
    }

    async fn on_tool_call_finish(
        &self,
        call: &ToolCall,
        result: &Result<ToolOutput, ToolExecError>,
    ) {
        // Denied and unknown calls have no spinner, and are labelled by name only.
        let running = self.stop(&call.id);
        let label = running
            .as_ref()
            .map_or(call.name.as_str(), |r| r.label.as_str());
        self.report(label, running.as_ref(), result);
    }
}

/// The answer on stdout, and whether its last line is still open.
struct AnswerText {
    open_line: AtomicBool,
    terminal: bool,
}

impl AnswerText {
    fn new() -> Self {
        Self {
            open_line: AtomicBool::new(false),
            terminal: std::io::stdout().is_terminal(),
        }
    }

    fn write(&self, text: &str) -> anyhow::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        output::write_stdout(&output::clean(text))?;
        self.open_line
            .store(!text.ends_with('\n'), Ordering::Relaxed);
        Ok(())
    }

    /// Ends the open line before tool output appears, when both share a terminal.
    fn break_line(&self) {
        if self.terminal && self.open_line.swap(false, Ordering::Relaxed) {
            let _ = output::write_stdout("\n");
        }
    }

    /// Text output ends with a newline.
    fn end(&self) -> anyhow::Result<()> {
        if self.open_line.swap(false, Ordering::Relaxed) {
            output::write_stdout("\n")?;
        }
        Ok(())
    }
}

/// Lines of stdin, read on a thread of their own (started at the first question): a read
/// blocked on a terminal must neither block the runtime nor hold up its shutdown.
#[derive(Default)]
struct StdinLines {
    lines: tokio::sync::Mutex<Option<mpsc::Receiver<String>>>,
}

impl StdinLines {
    /// The next line; `None` once stdin is closed.
    async fn next_line(&self) -> Option<String> {
        let mut lines = self.lines.lock().await;
        lines.get_or_insert_with(read_stdin_lines).recv().await
    }
}

fn read_stdin_lines() -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel(1);
    let reader = std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let mut line = String::new();
            loop {
                line.clear();
                match std::io::stdin().read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if sender.blocking_send(line.clone()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
    if let Err(error) = reader {
        // The sender went with the closure: every question gets "no answer".
        tracing::warn!(%error, "cannot read stdin");
    }
    receiver
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
