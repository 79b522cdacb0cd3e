//! `aquaregia chat`: a multi-turn conversation on the same servers and flags as `run`. Each
//! line of input is one turn; lines starting with `/` are commands.

use std::collections::VecDeque;
use std::path::Path;
use std::pin::pin;
use std::sync::Arc;

use aquaregia::{
    CancellationToken, Client, Cost, Message, PriceTable, Skills, SlashCommand, Steering,
    StopReason, Usage,
};
use aquaregia_mcp::McpToolset;
use clap::Args;
use futures::future::BoxFuture;

use crate::Interrupted;
use crate::agent_args::{AgentArgs, OutputFormat};
use crate::chat_prompts;
use crate::console::{AnswerText, Console};
use crate::conversation::Conversation;
use crate::line_input::{LineInput, Read};
use crate::output::{self, Styles};
use crate::prices;
use crate::run::{connect_options, explain_unreachable_default, permissions};
use crate::servers;
use crate::signals::StopSignals;
use crate::skills;
use crate::turn::{self, Model};

const HELP: &str = "\
/help            this list
/tools           the tools the agent can use
/model <spec>    switch the model (provider:model) from the next turn on
/clear           start a new conversation (the current one stays saved)
/compact         summarise the conversation so far (all but the latest turn) to free the
                 model's context; the session keeps every turn and goes on from the summary
/save [title]    say where the conversation is saved, and set its title
/usage           tokens used in this chat
/permissions     the project's remembered 'always' answers; /permissions revoke <n>, clear
/prompts         the MCP servers' prompts
/<skill> [task]  run a turn with a skill's instructions (the skills are listed below)
/<server>:<prompt> [key=value...]   send an MCP prompt
/exit            leave (as does Ctrl-D)
A line ending with \\ continues on the next line.
While the agent works:
<line>           queued: sent as the next turn once this one ends
/steer <text>    sent into the running turn: the model reads it after the running tool calls
/unqueue         drop the queued lines";

#[derive(Debug, Args)]
#[command(after_help = "\
Each line is one turn (end a line with \\ to continue it on the next). When stdin is not a
terminal each line is read as one turn too, so a chat can be scripted; permission questions
then take the next line as their answer. Ctrl-C cancels the turn in flight; Ctrl-D (end of
input) exits. Type /help for the commands.

On a terminal you can type while the agent works: a line is queued and sent as the next turn
once this one ends (each queued line its own turn, in order); `/steer <text>` sends the text
into the running turn instead (the model reads it after the tool calls running now, before
its next request; text steered after its last tool call becomes the next turn); `/unqueue`
drops the queued lines. A permission question asked meanwhile takes the next line typed.

Servers, tools, permissions and sessions work as for `aquaregia run` (see its --help).")]
pub(crate) struct ChatArgs {
    #[command(flatten)]
    agent: AgentArgs,
}

pub(crate) async fn run(args: ChatArgs, config: Option<&Path>) -> anyhow::Result<()> {
    let mut signals = StopSignals::new();
    let mut conversation = Conversation::open(&args.agent.session, config).await?;
    let chosen = args
        .agent
        .model
        .clone()
        .or_else(|| conversation.model().map(str::to_owned));
    let defaulted = chosen.is_none();
    let spec = chosen.unwrap_or_else(Client::default_model_spec);
    let mut model = Model::new(&spec)?;
    let selection = servers::select(config, &args.agent.servers, &args.agent.inline)?;
    let permissions = permissions(&args.agent, &selection)?;
    let prices = prices::table(&selection.prices);
    let options = connect_options(&args.agent);
    let toolset = tokio::select! {
        toolset = servers::toolset(selection.targets, &options) => toolset?,
        () = signals.recv() => return Err(Interrupted.into()),
    };
    let skills = skills::load(&toolset).await;
    let input = LineInput::open(history_file());
    let console = Arc::new(Console::new(
        permissions,
        Ok(input.clone()),
        AnswerText::new(),
    ));
    let mut chat = Chat {
        args: &args.agent,
        toolset: &toolset,
        skills,
        console,
        interactive: input.is_terminal(),
        input,
        signals: &mut signals,
        conversation: &mut conversation,
        usage: Usage::default(),
        cost: Some(Cost::default()),
        prices,
        styles: Styles::stderr(),
        steering: Steering::new(),
        queued: VecDeque::new(),
        pending_read: None,
        input_closed: false,
    };
    let result = chat
        .run(&mut model)
        .await
        .map_err(|error| explain_unreachable_default(error, &model.spec, defaulted));
    toolset.close().await;
    result
}

/// What to do after a command.
enum Next {
    Read,
    Exit,
    Send(Vec<Message>),
}

struct Chat<'a> {
    args: &'a AgentArgs,
    toolset: &'a McpToolset,
    /// The skills: `/<name> task` runs a turn with one, and the model loads them with the
    /// skill tool.
    skills: Skills,
    console: Arc<Console>,
    input: LineInput,
    signals: &'a mut StopSignals,
    conversation: &'a mut Conversation,
    usage: Usage,
    /// What the chat cost so far; `None` once a turn had no known price.
    cost: Option<Cost>,
    prices: PriceTable,
    interactive: bool,
    styles: Styles,
    /// `/steer` lines typed during a turn, for the running agent.
    steering: Steering,
    /// Lines typed during a turn: the next turns, in order.
    queued: VecDeque<String>,
    /// A read of the terminal started during a turn and not answered yet: the next line typed
    /// goes to it, whenever it comes.
    pending_read: Option<BoxFuture<'static, Read>>,
    /// The end of input was read during a turn: the chat ends after it.
    input_closed: bool,
}

/// What happened while a turn ran.
enum During {
    Done(anyhow::Result<aquaregia::AgentOutput>),
    Signal,
    Typed(Read),
}

/// Waits for the pending read, if there is one.
async fn typed(pending: &mut Option<BoxFuture<'static, Read>>) -> Read {
    match pending {
        Some(read) => read.await,
        None => std::future::pending().await,
    }
}

impl Chat<'_> {
    async fn run(&mut self, model: &mut Model) -> anyhow::Result<()> {
        if self.interactive {
            let tools = self.toolset.available_tools().await.len();
            eprintln!(
                "{}",
                self.styles.dim(&format!(
                    "aquaregia chat: {}, {tools} tools. /help for commands, Ctrl-D to exit.",
                    model.spec
                ))
            );
        }
        if let Some(meta) = self.conversation.meta() {
            let said = match self.conversation.fork_origin() {
                Some(origin) => format!(
                    "forked session {} from {} ({} turns)",
                    meta.id, origin.parent, meta.turns
                ),
                None => format!("resumed session {} ({} turns)", meta.id, meta.turns),
            };
            eprintln!("{}", self.styles.dim(&said));
        }
        while let Some(input) = self.read_input().await? {
            let input = input.trim();
            if input.is_empty() {
                continue;
            }
            // Nothing runs to steer or queue behind: the text is the turn.
            let input = match input.strip_prefix("/steer ") {
                Some(text) if !text.trim().is_empty() => text.trim(),
                _ => input,
            };
            if input == "/unqueue" {
                eprintln!("{}", self.styles.dim("(nothing is queued)"));
                continue;
            }
            let messages = match input.starts_with('/') {
                true => match self.command(SlashCommand::parse(input), model).await? {
                    Next::Read => continue,
                    Next::Exit => break,
                    Next::Send(messages) => messages,
                },
                false => vec![Message::user(input)],
            };
            if let Err(error) = self.turn(model, messages).await {
                if error.is::<Interrupted>() || !self.interactive {
                    return Err(error);
                }
                output::print_error(&error);
            }
        }
        Ok(())
    }

    /// The next input, continuation lines (ending with `\`) joined; `None` at the end of
    /// input. A stop signal here ends the chat; Ctrl-C in the line editor clears the line.
    async fn read_input(&mut self) -> anyhow::Result<Option<String>> {
        if let Some(line) = self.queued.pop_front() {
            eprintln!("{}", self.styles.dim(&format!("> {line}  (queued)")));
            return Ok(Some(line));
        }
        if self.input_closed {
            return Ok(None);
        }
        let mut input = String::new();
        loop {
            let prompt = match (self.interactive, input.is_empty()) {
                (false, _) => "",
                (true, true) => "> ",
                (true, false) => ". ",
            };
            // A read started during the last turn gets the next line typed.
            let read = match self.pending_read.take() {
                Some(mut pending) => {
                    eprint!("{prompt}");
                    tokio::select! {
                        read = &mut pending => read,
                        () = self.signals.recv() => return Err(Interrupted.into()),
                    }
                }
                None => tokio::select! {
                    read = self.input.read(prompt) => read,
                    () = self.signals.recv() => return Err(Interrupted.into()),
                },
            };
            let line = match read {
                Read::Line(line) => line,
                Read::Interrupted => {
                    input.clear();
                    continue;
                }
                Read::Eof => return Ok((!input.is_empty()).then_some(input)),
            };
            match line.strip_suffix('\\') {
                Some(start) => {
                    input.push_str(start);
                    input.push('\n');
                }
                None => {
                    input.push_str(&line);
                    return Ok(Some(input));
                }
            }
        }
    }

    /// Runs a `/command` (`None`: a slash with no name after it).
    async fn command(
        &mut self,
        command: Option<SlashCommand<'_>>,
        model: &mut Model,
    ) -> anyhow::Result<Next> {
        let Some(command) = command else {
            eprintln!("unknown command /; /help lists them");
            return Ok(Next::Read);
        };
        match command {
            SlashCommand::Prompt {
                server,
                prompt,
                input,
            } => {
                return match self.toolset.render_prompt(server, prompt, input).await {
                    Ok(messages) => Ok(Next::Send(messages)),
                    Err(error) if self.interactive => {
                        output::print_error(&anyhow::Error::new(error));
                        Ok(Next::Read)
                    }
                    Err(error) => Err(error.into()),
                };
            }
            SlashCommand::Help => {
                eprintln!("{HELP}");
                let skills = skills::help_lines(&self.skills);
                if !skills.is_empty() {
                    eprintln!("Skills:");
                }
                for line in skills {
                    eprintln!("{line}");
                }
            }
            SlashCommand::Exit => return Ok(Next::Exit),
            SlashCommand::Prompts => {
                let prompts = chat_prompts::list(self.toolset).await;
                if prompts.is_empty() {
                    eprintln!("no prompts");
                }
                for line in prompts {
                    eprintln!("{}", output::clean(&line));
                }
            }
            SlashCommand::Tools => {
                let tools = self.toolset.available_tools().await;
                if tools.is_empty() {
                    eprintln!("no tools");
                }
                for tool in tools {
                    let descriptor = tool.descriptor();
                    eprintln!(
                        "{}{}",
                        self.styles.bold(&output::clean(&descriptor.name)),
                        output::signature(&descriptor.input_schema)
                    );
                }
            }
            SlashCommand::Model("") => eprintln!("model: {}", model.spec),
            SlashCommand::Model(spec) => match Model::new(spec) {
                Ok(new) => {
                    *model = new;
                    eprintln!("model: {}", model.spec);
                }
                Err(error) => output::print_error(&error),
            },
            SlashCommand::Clear => {
                self.conversation.clear();
                eprintln!("started a new conversation");
            }
            SlashCommand::Save(title) => self.save(title).await,
            SlashCommand::Compact => {
                if let Err(error) = self.compact(model).await {
                    if error.is::<Interrupted>() || !self.interactive {
                        return Err(error);
                    }
                    output::print_error(&error);
                }
            }
            SlashCommand::Usage => {
                eprintln!("{}", turn::usage_line(&self.usage, self.cost.as_ref()));
            }
            SlashCommand::Permissions(input) => {
                let answer = self.console.rules().command(input);
                eprintln!("{}", output::clean(&answer));
            }
            SlashCommand::Unknown { name, input } => {
                let Some(skill) = self.skills.get(name).cloned() else {
                    eprintln!("unknown command /{}; /help lists them", output::clean(name));
                    return Ok(Next::Read);
                };
                return match skill.prompt(input).await {
                    Ok(message) => Ok(Next::Send(vec![message])),
                    Err(error) if self.interactive => {
                        output::print_error(&anyhow::Error::new(error));
                        Ok(Next::Read)
                    }
                    Err(error) => Err(error.into()),
                };
            }
            _ => eprintln!("this command is not available in chat; /help lists them"),
        }
        Ok(Next::Read)
    }

    async fn save(&mut self, title: &str) {
        if !title.is_empty()
            && let Err(error) = self.conversation.set_title(title).await
        {
            output::print_error(&error);
            return;
        }
        match self.conversation.meta() {
            Some(meta) => eprintln!(
                "saved as session {} ({} turns); continue it with `aquaregia chat --resume {}`",
                meta.id, meta.turns, meta.id
            ),
            None => eprintln!("nothing to save yet: the session is saved after its first turn"),
        }
    }

    /// `/compact`: the model summarises everything before the latest turn; the session goes
    /// on from the result (its turns stay stored). A stop signal cancels it (history kept).
    async fn compact(&mut self, model: &Model) -> anyhow::Result<()> {
        if self.conversation.history().is_empty() {
            eprintln!("nothing to compact yet");
            return Ok(());
        }
        let cancel = CancellationToken::new();
        let cache_key = self.conversation.cache_key();
        let agent = turn::agent(
            self.args,
            (model, &cache_key),
            &self.prices,
            Vec::new(),
            self.toolset,
            &self.console,
            cancel.clone(),
        )?;
        self.console.start_thinking();
        let compacted = tokio::select! {
            compacted = self.conversation.inner().compact(&agent) => compacted,
            () = self.signals.recv() => {
                self.console.stop_thinking();
                eprintln!("{}", self.styles.dim("(compaction cancelled, history kept)"));
                return Ok(());
            }
        };
        self.console.stop_thinking();
        let report = compacted?;
        if report.summarized_messages == 0 && report.elided_tool_results == 0 {
            eprintln!("nothing to compact: the conversation is only its latest turn");
            return Ok(());
        }
        eprintln!(
            "compacted: {} messages summarised, {} tool results elided, about {} → {} \
             tokens",
            report.summarized_messages,
            report.elided_tool_results,
            report.before_tokens,
            report.after_tokens
        );
        Ok(())
    }

    /// Sends `new` (a prompt, or an MCP prompt's messages) after the history.
    async fn turn(&mut self, model: &Model, new: Vec<Message>) -> anyhow::Result<()> {
        let mut tools = self.toolset.tools().await?;
        tools.extend(self.skills.tool());
        let cancel = CancellationToken::new();
        let cache_key = self.conversation.cache_key();
        let agent = turn::agent(
            self.args,
            (model, &cache_key),
            &self.prices,
            tools,
            self.toolset,
            &self.console,
            cancel.clone(),
        )?
        .with_steering(self.steering.clone());
        let mut messages = self.conversation.history().to_vec();
        messages.extend(new.iter().cloned());
        let mut work = pin!(turn::run(
            &agent,
            messages,
            &self.console,
            OutputFormat::Text,
            !self.args.no_reasoning,
        ));
        // On a terminal, lines typed meanwhile are read: queued, steered, or a question's
        // answer.
        let reading = self.interactive && !self.input_closed;
        if reading {
            self.console.route_answers(true);
        }
        let output = loop {
            if reading && !self.input_closed && self.pending_read.is_none() {
                let input = self.input.clone();
                self.pending_read = Some(Box::pin(async move { input.read("").await }));
            }
            let during = tokio::select! {
                output = &mut work => During::Done(output),
                () = self.signals.recv() => During::Signal,
                read = typed(&mut self.pending_read) => During::Typed(read),
            };
            let interrupted = match during {
                During::Done(output) => break output,
                During::Signal => true,
                During::Typed(read) => {
                    self.pending_read = None;
                    match self.console.take_question() {
                        Some(question) => {
                            let _ = question.send(read);
                            false
                        }
                        None => match read {
                            Read::Line(line) => {
                                typed_during_turn(
                                    &self.console,
                                    &self.styles,
                                    &self.steering,
                                    &mut self.queued,
                                    line.trim(),
                                );
                                false
                            }
                            // Ctrl-C reaches the line editor as a key.
                            Read::Interrupted => true,
                            Read::Eof => {
                                self.input_closed = true;
                                false
                            }
                        },
                    }
                }
            };
            if interrupted {
                if cancel.is_cancelled() {
                    self.console.route_answers(false);
                    return Err(Interrupted.into());
                }
                cancel.cancel();
                self.console.answer.break_line();
                eprintln!("stopping the turn... (again to quit)");
            }
        };
        self.console.route_answers(false);
        // Steered after the turn's last tool call: the next turns, before the queued lines.
        for (position, message) in self.steering.take_pending().into_iter().enumerate() {
            self.queued.insert(position, message.message.text());
        }
        let output = output?;
        self.usage += output.usage;
        self.cost = self.cost.zip(output.cost).map(|(sum, cost)| sum + cost);
        match output.stop_reason {
            StopReason::Cancelled => {
                eprintln!("{}", self.styles.dim("(turn cancelled, not kept)"));
                Ok(())
            }
            _ => {
                self.conversation.record(&new, &output, &model.spec).await;
                crate::run::outcome(&output, self.args.max_steps)
            }
        }
    }
}

/// `$AQUAREGIA_DATA_DIR/chat_history`, else `<user data dir>/aquaregia/chat_history`.
fn history_file() -> Option<std::path::PathBuf> {
    aquaregia::FileSessionStore::default_dir()
        .and_then(|sessions| sessions.parent().map(|dir| dir.join("chat_history")))
}

/// A line typed while a turn runs: `/steer <text>` goes into the running turn,
/// `/unqueue` drops the queued lines, anything else is queued as a next turn.
fn typed_during_turn(
    console: &Console,
    styles: &Styles,
    steering: &Steering,
    queued: &mut VecDeque<String>,
    line: &str,
) {
    if line.is_empty() {
        return;
    }
    console.answer.break_line();
    if line == "/unqueue" {
        let dropped = queued.len();
        queued.clear();
        eprintln!(
            "{}",
            styles.dim(&format!("(dropped {dropped} queued line(s))"))
        );
    } else if let Some(text) = line
        .strip_prefix("/steer ")
        .map(str::trim)
        .filter(|text| !text.is_empty())
    {
        steering.send(text);
        eprintln!(
            "{}",
            styles.dim(&format!(
                "(steering: {text} — read after the running tool calls)"
            ))
        );
    } else {
        queued.push_back(line.to_owned());
        eprintln!(
            "{}",
            styles.dim(&format!(
                "(queued for the next turn: {line}; /unqueue drops it)"
            ))
        );
    }
}
