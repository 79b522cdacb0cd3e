//! The terminal side of an agent turn: permission questions, a spinner per running tool call,
//! one outcome line per finished call (all on stderr), and the answer text on stdout.

use std::collections::{HashMap, VecDeque};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use aquaregia::permission_rules::{PermissionRule, PermissionRules, RuleEffect};
use aquaregia::redact::StreamRedactor;
use aquaregia::{
    AgentHooks, SubAgentSetup, Tool, ToolCall, ToolCallDecision, ToolExecError, ToolOutput,
};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use tokio::sync::{mpsc, oneshot};

use crate::line_input::{LineInput, Read};
use crate::markdown::MarkdownStream;
use crate::output::{self, Styles};
use crate::permissions::{Permissions, Verdict};
use aquaregia::sync::lock;

/// What the model is told when the user says no.
const DECLINED: &str = "the user declined";

/// The run's terminal side: permission questions, a spinner per running tool call, and one
/// outcome line per finished call, all on stderr.
pub(crate) struct Console {
    permissions: Permissions,
    /// Where answers come from; the reason there are none when stdin was taken as input.
    answers: Result<LineInput, &'static str>,
    styles: Styles,
    progress: MultiProgress,
    running: Mutex<HashMap<String, Running>>,
    /// The project's "always" answers (`.aquaregia/permissions.json` in the current directory).
    rules: Mutex<PermissionRules>,
    pub(crate) answer: AnswerText,
    /// The "thinking" spinner while the model has not answered yet.
    thinking: Mutex<Option<ProgressBar>>,
    /// Set while chat reads lines during a turn: questions then wait here for the next line
    /// it reads instead of reading one themselves.
    routed: Mutex<Option<VecDeque<oneshot::Sender<Read>>>>,
}

/// The rules kept in the current directory's project settings; a damaged file is reported and
/// left alone.
fn project_rules() -> PermissionRules {
    let Ok(dir) = std::env::current_dir() else {
        return PermissionRules::in_memory();
    };
    let (rules, warning) = PermissionRules::load(&dir);
    if let Some(warning) = warning {
        eprintln!("warning: {}", output::clean(&warning));
    }
    rules
}

/// A tool call in progress.
struct Running {
    bar: ProgressBar,
    label: String,
    started: Instant,
}

impl Console {
    pub(crate) fn new(
        permissions: Permissions,
        answers: Result<LineInput, &'static str>,
        answer: AnswerText,
    ) -> Self {
        Self {
            permissions,
            answers,
            styles: Styles::stderr(),
            // Draws on stderr, and nothing at all when stderr is not a terminal.
            progress: MultiProgress::new(),
            running: Mutex::new(HashMap::new()),
            rules: Mutex::new(project_rules()),
            answer,
            thinking: Mutex::new(None),
            routed: Mutex::new(None),
        }
    }

    /// Whether questions take their answer from the lines chat reads during a turn (see
    /// [`take_question`](Self::take_question)) rather than reading one themselves. Questions
    /// still waiting when it is turned off are answered with the end of input (denied).
    pub(crate) fn route_answers(&self, on: bool) {
        let mut routed = lock(&self.routed);
        if on {
            routed.get_or_insert_with(VecDeque::new);
        } else {
            *routed = None;
        }
    }

    /// The oldest question waiting for a line, if any: chat gives it the line it read.
    pub(crate) fn take_question(&self) -> Option<oneshot::Sender<Read>> {
        lock(&self.routed).as_mut().and_then(VecDeque::pop_front)
    }

    /// One answer: read as `input` does, or, while answers are routed, the next line chat
    /// reads (the question printed on a line of its own).
    async fn read_answer(&self, input: &LineInput, question: &str) -> Read {
        let waiting = lock(&self.routed).as_mut().map(|questions| {
            let (answer, waiting) = oneshot::channel();
            questions.push_back(answer);
            waiting
        });
        match waiting {
            Some(waiting) => {
                eprintln!("{question}");
                waiting.await.unwrap_or(Read::Eof)
            }
            None => input.read(question).await,
        }
    }

    /// Shows a "thinking" spinner (on a terminal) until [`stop_thinking`](Self::stop_thinking).
    pub(crate) fn start_thinking(&self) {
        let mut thinking = lock(&self.thinking);
        if thinking.is_some() || self.progress.is_hidden() {
            return;
        }
        let bar = self.progress.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message("thinking");
        bar.enable_steady_tick(Duration::from_millis(100));
        *thinking = Some(bar);
    }

    pub(crate) fn stop_thinking(&self) {
        if let Some(bar) = lock(&self.thinking).take() {
            bar.finish_and_clear();
            self.progress.remove(&bar);
        }
    }

    /// The project's permission rules, to list or change (`/permissions`).
    pub(crate) fn rules(&self) -> MutexGuard<'_, PermissionRules> {
        lock(&self.rules)
    }

    async fn permission(&self, call: &ToolCall, label: &str) -> ToolCallDecision {
        match lock(&self.rules).decide(&call.name, &call.arguments) {
            Some(RuleEffect::Allow) => return ToolCallDecision::Allow,
            Some(_) => return ToolCallDecision::Deny(DECLINED.to_owned()),
            None => {}
        }
        let input = match &self.answers {
            Ok(input) => input,
            Err(why) => {
                eprintln!(
                    "{} {label} needs permission, but {why}, so the call is denied; pass --yes \
                     or --allow <tool> to allow it",
                    self.styles.yellow("warning:")
                );
                return ToolCallDecision::Deny(DECLINED.to_owned());
            }
        };
        // A person can also ask to see the arguments in full (`v`).
        let person = input.is_terminal();
        let question = self.question(label, person);
        loop {
            let answer = match self.read_answer(input, &question).await {
                Read::Line(answer) => answer,
                Read::Interrupted => String::new(),
                Read::Eof => {
                    eprintln!();
                    eprintln!(
                        "{} no answer (stdin is closed), so the call is denied; pass --yes to \
                         allow tool calls without asking",
                        self.styles.yellow("warning:")
                    );
                    return ToolCallDecision::Deny(DECLINED.to_owned());
                }
            };
            let answer = answer.trim().to_ascii_lowercase();
            if !person {
                // Nobody typed it, so it was not echoed.
                eprintln!("{answer}");
            }
            return match answer.as_str() {
                "y" | "yes" => ToolCallDecision::Allow,
                "a" | "always" => {
                    let rule =
                        PermissionRule::for_call(&call.name, &call.arguments, RuleEffect::Allow);
                    let described = rule.describe();
                    match lock(&self.rules).add(rule) {
                        Ok(()) => eprintln!(
                            "always allowing {} (kept in {}; /permissions in chat lists the rules)",
                            output::clean(&described),
                            aquaregia::permission_rules::PERMISSIONS_FILE
                        ),
                        Err(error) => eprintln!(
                            "{} always allowing {} for this run only: cannot store it: {error}",
                            self.styles.yellow("warning:"),
                            output::clean(&described)
                        ),
                    }
                    ToolCallDecision::Allow
                }
                "v" | "view" => {
                    let pretty = serde_json::to_string_pretty(&call.arguments)
                        .unwrap_or_else(|_| call.arguments.to_string());
                    eprintln!("{}", output::clean(&pretty));
                    continue;
                }
                _ => ToolCallDecision::Deny(DECLINED.to_owned()),
            };
        }
    }

    /// `Allow <label>? [y/N/always] `; on a terminal too narrow for it, the label wrapped to
    /// the width on lines of their own, then the choices as the prompt.
    fn question(&self, label: &str, person: bool) -> String {
        let choices = if person {
            "[y/N/always/v]"
        } else {
            "[y/N/always]"
        };
        let one_line = format!("Allow {}? {choices} ", self.styles.bold(label));
        let width = match ::console::Term::stderr().size_checked() {
            Some((_, columns)) if person => usize::from(columns),
            _ => return one_line,
        };
        let question = format!("{label}?");
        if output::display_width(&question) + choices.len() + 8 <= width {
            return one_line;
        }
        let lines = output::wrap_text(&question, width.saturating_sub(6), width.saturating_sub(2));
        for (index, line) in lines.iter().enumerate() {
            let lead = if index == 0 { "Allow " } else { "  " };
            eprintln!("{lead}{}", self.styles.bold(line));
        }
        format!("{choices} ")
    }

    fn start(&self, depth: usize, call: &ToolCall, label: String) {
        let bar = self.progress.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(format!("{}{label}", indent(depth)));
        bar.enable_steady_tick(Duration::from_millis(100));
        let running = Running {
            bar,
            label,
            started: Instant::now(),
        };
        lock(&self.running).insert(running_key(depth, &call.id), running);
    }

    /// Removes the call's spinner, if it has one.
    fn stop(&self, depth: usize, id: &str) -> Option<Running> {
        let running = lock(&self.running).remove(&running_key(depth, id))?;
        running.bar.finish_and_clear();
        self.progress.remove(&running.bar);
        Some(running)
    }

    /// One line saying how the call ended.
    fn report(
        &self,
        depth: usize,
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
        let indent = indent(depth);
        let line = match result {
            Ok(value) => format!(
                "{indent}{good} {label} ok{took}: {}",
                output::result_summary(value)
            ),
            Err(ToolExecError::Denied(reason)) => {
                format!("{indent}{bad} {label} denied: {reason}")
            }
            Err(ToolExecError::Cancelled) => format!("{indent}{bad} {label} cancelled{took}"),
            Err(error) => format!(
                "{indent}{bad} {label} failed{took}: {}",
                output::first_line(&error.to_string(), 160)
            ),
        };
        // Other calls' spinners are cleared while the line is written, then redrawn below it.
        self.progress.suspend(|| eprintln!("{line}"));
    }

    /// Shows a running call's progress (MCP `notifications/progress`) on its spinner:
    /// `label 3/10 copying files`.
    pub(crate) fn tool_progress(
        &self,
        depth: usize,
        id: &str,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) {
        let running = lock(&self.running);
        let Some(running) = running.get(&running_key(depth, id)) else {
            return;
        };
        let mut line = format!(
            "{}{} {}",
            indent(depth),
            running.label,
            progress_amount(progress, total)
        );
        if let Some(message) = message.map(|message| output::first_line(message, 80))
            && !message.is_empty()
        {
            line.push(' ');
            line.push_str(&message);
        }
        running.bar.set_message(line);
    }

    /// A call the agent gave up on when cancelled (`depth` subagents in): its finish hook
    /// never ran.
    pub(crate) fn abandoned(
        &self,
        depth: usize,
        id: &str,
        result: &Result<ToolOutput, ToolExecError>,
    ) {
        if let Some(running) = self.stop(depth, id) {
            self.report(depth, &running.label, Some(&running), result);
        }
    }
}

/// The key of a running call `depth` subagents in (a subagent's call ids are its model's,
/// and may be the parent's too).
fn running_key(depth: usize, id: &str) -> String {
    if depth == 0 {
        id.to_owned()
    } else {
        format!("{depth}/{id}")
    }
}

/// What a call `depth` subagents in is shown with, before its line.
fn indent(depth: usize) -> String {
    "    ".repeat(depth)
}

/// The console as the hooks of a run (`depth` 0) or of a subagent's run (`depth` levels in,
/// its calls shown indented under the call that runs it).
pub(crate) struct ConsoleHooks {
    console: Arc<Console>,
    depth: usize,
}

impl ConsoleHooks {
    pub(crate) fn new(console: Arc<Console>) -> Self {
        Self { console, depth: 0 }
    }
}

#[aquaregia::async_trait]
impl AgentHooks for ConsoleHooks {
    async fn on_tool_call_start(&self, call: &ToolCall, tool: Option<&Tool>) -> ToolCallDecision {
        self.console.tool_call_start(self.depth, call, tool).await
    }

    async fn on_tool_call_finish(
        &self,
        call: &ToolCall,
        result: &Result<ToolOutput, ToolExecError>,
    ) {
        self.console.tool_call_finish(self.depth, call, result);
    }

    async fn on_subagent_start(&self, _call: &ToolCall) -> SubAgentSetup {
        SubAgentSetup::new().hooks(Arc::new(Self {
            console: self.console.clone(),
            depth: self.depth + 1,
        }))
    }
}

impl Console {
    async fn tool_call_start(
        &self,
        depth: usize,
        call: &ToolCall,
        tool: Option<&Tool>,
    ) -> ToolCallDecision {
        let Some(tool) = tool else {
            // Nothing to ask about: the agent tells the model the tool does not exist.
            return ToolCallDecision::Allow;
        };
        // The hook can run before the stream's consumer sees the call.
        self.stop_thinking();
        self.answer.break_line();
        match self.permissions.verdict(call, tool) {
            Verdict::Allow => {}
            Verdict::Deny(reason) => return ToolCallDecision::Deny(reason),
            Verdict::Ask => {
                let full = format!(
                    "{}{}({})",
                    indent(depth),
                    call.name,
                    output::arguments_full(&call.arguments)
                );
                let decision = self.permission(call, &full).await;
                if decision != ToolCallDecision::Allow {
                    return decision;
                }
            }
        }
        let label = format!(
            "{}({})",
            call.name,
            output::arguments_summary(&call.arguments)
        );
        self.start(depth, call, label);
        ToolCallDecision::Allow
    }

    fn tool_call_finish(
        &self,
        depth: usize,
        call: &ToolCall,
        result: &Result<ToolOutput, ToolExecError>,
    ) {
        // Denied and unknown calls have no spinner, and are labelled by name only.
        let running = self.stop(depth, &call.id);
        let label = running
            .as_ref()
            .map_or(call.name.as_str(), |r| r.label.as_str());
        self.report(depth, label, running.as_ref(), result);
    }
}

/// The answer on stdout: Markdown rendered as it streams on a terminal that takes colours
/// (see [`markdown`](crate::markdown)), the raw text anywhere else (a pipe, a file,
/// `NO_COLOR`), so scripts get exactly what the model wrote, secrets redacted: the end of a
/// piece that could begin a known secret waits for the next piece (see
/// [`StreamRedactor`](aquaregia::redact::StreamRedactor)).
pub(crate) struct AnswerText {
    state: Mutex<AnswerState>,
    redactor: Mutex<StreamRedactor>,
}

enum AnswerState {
    Raw {
        /// The last line written has no newline yet.
        open_line: bool,
        terminal: bool,
    },
    Markdown(MarkdownStream),
}

impl AnswerText {
    pub(crate) fn new() -> Self {
        let terminal = std::io::stdout().is_terminal();
        let state = if terminal && Styles::stdout().enabled() {
            let width = ::console::Term::stdout()
                .size_checked()
                .map_or(80, |(_, columns)| usize::from(columns));
            AnswerState::Markdown(MarkdownStream::new(width))
        } else {
            AnswerState::Raw {
                open_line: false,
                terminal,
            }
        };
        Self {
            state: Mutex::new(state),
            redactor: Mutex::new(StreamRedactor::new()),
        }
    }

    pub(crate) fn write(&self, text: &str) -> anyhow::Result<()> {
        let text = lock(&self.redactor).push(text);
        self.show(&text)
    }

    fn show(&self, text: &str) -> anyhow::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        let text = output::clean(text);
        match &mut *lock(&self.state) {
            AnswerState::Raw { open_line, .. } => {
                output::write_stdout(&text)?;
                *open_line = !text.ends_with('\n');
            }
            AnswerState::Markdown(stream) => output::write_stdout(&stream.push(&text))?,
        }
        Ok(())
    }

    /// Ends the open line before tool output appears, when both share a terminal.
    pub(crate) fn break_line(&self) {
        let _ = self.close_line(true);
    }

    /// Text output ends with a newline.
    pub(crate) fn end(&self) -> anyhow::Result<()> {
        self.close_line(false)
    }

    fn close_line(&self, only_on_terminal: bool) -> anyhow::Result<()> {
        // What was held back in case it began a secret is shown first.
        let held = lock(&self.redactor).finish();
        self.show(&held)?;
        match &mut *lock(&self.state) {
            AnswerState::Raw {
                open_line,
                terminal,
            } => {
                if (*terminal || !only_on_terminal) && std::mem::take(open_line) {
                    output::write_stdout("\n")?;
                }
            }
            AnswerState::Markdown(stream) => {
                if stream.is_open() {
                    output::write_stdout(&stream.finish())?;
                }
            }
        }
        Ok(())
    }
}

/// Lines of stdin, read on a thread of their own (started at the first question): a read
/// blocked on a terminal must neither block the runtime nor hold up its shutdown.
#[derive(Default)]
pub(crate) struct StdinLines {
    lines: tokio::sync::Mutex<Option<mpsc::Receiver<String>>>,
}

impl StdinLines {
    /// The next line; `None` once stdin is closed.
    pub(crate) async fn next_line(&self) -> Option<String> {
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

/// `3/10` when both are counts, `30%` for fractions, `3` without a total.
fn progress_amount(progress: f64, total: Option<f64>) -> String {
    let whole = |value: f64| value.fract() == 0.0 && value.abs() < 1e15;
    match total {
        Some(total) if whole(progress) && whole(total) => format!("{progress}/{total}"),
        Some(total) if total > 0.0 => format!("{:.0}%", progress / total * 100.0),
        _ => format!("{progress}"),
    }
}
