//! Slash commands: the built-ins (`/clear`, `/compact`, `/model`, `/tools`, `/permissions`),
//! the MCP servers' prompts (`/<server>:<prompt> arguments`, run with `prompts/get`) and the
//! skills (`/<skill> task`: the turn starts with the skill's instructions), announced with
//! `available_commands_update` and run at the start of a turn.

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, SessionUpdate,
    UnstructuredCommandInput,
};
use aquaregia::{Message, Skill, SkillError, Skills, SlashCommand};
use aquaregia_mcp::ServerPrompt;
use tokio_util::sync::CancellationToken;

use crate::connection::Connection;
use crate::session::Session;
use crate::{agent, updates};

/// The command at the start of the prompt's text, when it is one this agent runs (the shared
/// [`SlashCommand`]s it offers); any other `/text` goes to the model as it is.
pub(crate) fn parse(text: &str) -> Option<SlashCommand<'_>> {
    SlashCommand::parse(text).filter(|command| {
        matches!(
            command,
            SlashCommand::Clear
                | SlashCommand::Compact
                | SlashCommand::Model(_)
                | SlashCommand::Tools
                | SlashCommand::Permissions(_)
                | SlashCommand::Prompt { .. }
        )
    })
}

/// The built-in commands' names: a skill of one of these names is not offered as a command.
const BUILT_INS: &[&str] = &["clear", "compact", "tools", "permissions", "model"];

/// The skill `/name` runs, when `text` starts with one (and the name is not a built-in).
pub(crate) fn skill<'a>(text: &'a str, skills: &Skills) -> Option<(Skill, &'a str)> {
    match SlashCommand::parse(text)? {
        SlashCommand::Unknown { name, input } if !BUILT_INS.contains(&name) => {
            skills.get(name).map(|skill| (skill.clone(), input))
        }
        _ => None,
    }
}

/// The messages `/skill task` sends: the skill's instructions, then the task.
pub(crate) async fn run_skill(skill: &Skill, input: &str) -> Result<Vec<Message>, SkillError> {
    Ok(vec![skill.prompt(input).await?])
}

/// The `available_commands_update` for these prompts, skills and the built-ins.
pub(crate) fn update(prompts: &[ServerPrompt], skills: &Skills, has_models: bool) -> SessionUpdate {
    let mut commands = vec![
        AvailableCommand::new("clear", "Forget this session's conversation"),
        AvailableCommand::new(
            "compact",
            "Summarise the conversation so far to free the model's context",
        ),
        AvailableCommand::new("tools", "List the tools the model can use"),
        AvailableCommand::new(
            "permissions",
            "List the remembered permission rules; /permissions revoke <n> or /permissions clear",
        )
        .input(AvailableCommandInput::Unstructured(
            UnstructuredCommandInput::new("revoke <n> | clear"),
        )),
    ];
    if has_models {
        commands.push(
            AvailableCommand::new("model", "Show the models, or switch: /model <name>").input(
                AvailableCommandInput::Unstructured(UnstructuredCommandInput::new("model name")),
            ),
        );
    }
    for listed in prompts {
        let mut available = AvailableCommand::new(listed.command(), listed.description());
        let hint = listed.prompt.arguments_hint();
        if !hint.is_empty() {
            available = available.input(AvailableCommandInput::Unstructured(
                UnstructuredCommandInput::new(hint),
            ));
        }
        commands.push(available);
    }
    for skill in skills
        .iter()
        .filter(|skill| !BUILT_INS.contains(&skill.name()))
    {
        let hint = skill.argument_hint().unwrap_or("task for the skill");
        commands.push(
            AvailableCommand::new(skill.name(), skill.description()).input(
                AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(hint)),
            ),
        );
    }
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands))
}

/// Runs a slash command at the start of a turn. `Ok(None)`: it was answered here, the model
/// is not called; `Ok(Some(messages))`: what the model gets instead of the prompt (none: the
/// prompt as it is).
pub(crate) async fn run(
    connection: &Connection,
    session: &Arc<Session>,
    command: SlashCommand<'_>,
    token: &CancellationToken,
    cx: &ConnectionTo<Client>,
) -> Result<Option<Vec<Message>>, String> {
    let say = |text: &str| updates::send(cx, &session.id, updates::message(text));
    let models = connection.settings.models.as_ref();
    match command {
        SlashCommand::Clear => {
            // The turns stay stored (and replayed); the model starts afresh.
            let cleared = session.conversation.lock().await.rebase(Vec::new()).await;
            if let Err(error) = cleared {
                tracing::warn!(session = %session.id, %error, "the cleared history was not stored");
            }
            say("The conversation was cleared.");
        }
        SlashCommand::Compact => {
            if session.conversation.lock().await.history().is_empty() {
                say("Nothing to compact yet.");
                return Ok(None);
            }
            let report = agent::compact(connection, session, token, cx).await?;
            say(&format!(
                "Compacted the conversation: about {} tokens before, {} after ({} older tool \
                 results elided, {} messages summarised).",
                report.before_tokens,
                report.after_tokens,
                report.elided_tool_results,
                report.summarized_messages
            ));
        }
        SlashCommand::Tools => say(&tools_text(connection, session).await),
        SlashCommand::Permissions(input) => {
            // `/permissions [revoke <n> | clear]`: the answer for the user.
            let answer = session.state.with(|state| state.always.command(input));
            say(&answer);
        }
        SlashCommand::Model(_) if models.is_none() => {
            say("This agent offers no model choice.");
        }
        SlashCommand::Model("") => {
            let (model, models_listed) = session
                .state
                .with(|state| (state.model.clone(), state.models.join(", ")));
            let current = model
                .or_else(|| models.map(|m| m.default.clone()))
                .unwrap_or_default();
            say(&format!("Model: `{current}` (available: {models_listed})"));
        }
        SlashCommand::Model(model) => {
            let known = session.state.with(|state| {
                let known = state.models.iter().any(|known| known == model);
                if known {
                    state.model = Some(model.to_owned());
                }
                known
            });
            if !known {
                say(&format!("Unknown model `{model}`."));
                return Ok(None);
            }
            connection.remember(session, cx);
            updates::send(
                cx,
                &session.id,
                updates::config_options(connection.config_options(session)),
            );
            say(&format!("Model: `{model}`."));
        }
        SlashCommand::Prompt {
            server,
            prompt,
            input,
        } => {
            let found = session.state.with(|state| {
                state
                    .commands
                    .iter()
                    .find(|listed| listed.server == server && listed.prompt.name == prompt)
                    .cloned()
            });
            // An unknown `/server:prompt` goes to the model as it is.
            let Some(listed) = found else {
                return Ok(Some(Vec::new()));
            };
            let messages = session
                .toolset
                .render(&listed, input)
                .await
                .map_err(|error| error.to_string())?;
            return Ok(Some(messages));
        }
        // `parse` lets no other command through.
        _ => return Ok(Some(Vec::new())),
    }
    Ok(None)
}

/// `/tools`: every tool the model is offered this turn (the mode's choice), built-ins and
/// MCP servers' alike, each saying where it comes from.
async fn tools_text(connection: &Connection, session: &Session) -> String {
    let lines: Vec<String> = agent::tools(connection, session)
        .await
        .iter()
        .map(|tool| match session.toolset.server_of(tool.name()) {
            Some(server) => format!("- `{}` (MCP server `{server}`)", tool.name()),
            None => format!("- `{}` (built-in)", tool.name()),
        })
        .collect();
    if lines.is_empty() {
        return "The model is offered no tools.\n".into();
    }
    format!("Tools the model can use:\n{}\n", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_commands_offered_here_are_run() {
        assert_eq!(parse("/clear"), Some(SlashCommand::Clear));
        assert_eq!(
            parse("  /model big-one "),
            Some(SlashCommand::Model("big-one"))
        );
        assert!(matches!(
            parse("/notes:summarize the week"),
            Some(SlashCommand::Prompt { .. })
        ));
        assert_eq!(parse("/help"), None);
        assert_eq!(parse("/unknown thing"), None);
        assert_eq!(parse("no command"), None);
    }
}
