//! Slash commands: the built-ins (`/clear`, `/compact`, `/model`, `/tools`, `/permissions`)
//! and the MCP servers' prompts (`/<server>:<prompt> arguments`, run with `prompts/get`),
//! announced with `available_commands_update` and run at the start of a turn.

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, SessionUpdate,
    UnstructuredCommandInput,
};
use aquaregia::Message;
use aquaregia_mcp::McpToolset;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::connection::Connection;
use crate::session::Session;
use crate::state::PromptCommand;
use crate::{agent, store, updates};

/// A prompt that is a command.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Command<'a> {
    Clear,
    Compact,
    Model(&'a str),
    Tools,
    Permissions(&'a str),
    Prompt { name: &'a str, input: &'a str },
}

/// Reads `/name rest` from the start of the prompt's text.
pub(crate) fn parse(text: &str) -> Option<Command<'_>> {
    let command = text.trim_start().strip_prefix('/')?;
    let (name, input) = command
        .split_once(char::is_whitespace)
        .map_or((command, ""), |(name, input)| (name, input.trim()));
    Some(match name {
        "clear" => Command::Clear,
        "compact" => Command::Compact,
        "model" => Command::Model(input),
        "tools" => Command::Tools,
        "permissions" => Command::Permissions(input),
        name if name.contains(':') => Command::Prompt { name, input },
        _ => return None,
    })
}

/// Every MCP prompt of the session's servers; a server whose listing fails is logged and
/// skipped.
pub(crate) async fn prompts(toolset: &McpToolset) -> Vec<PromptCommand> {
    let listings = toolset
        .connections()
        .iter()
        .map(|(server, connection)| async move {
            match connection.list_prompts().await {
                Ok(prompts) => prompts
                    .into_iter()
                    .map(|prompt| PromptCommand {
                        server: server.clone(),
                        prompt,
                    })
                    .collect(),
                Err(error) => {
                    tracing::warn!(server, %error, "cannot list the server's prompts");
                    Vec::new()
                }
            }
        });
    futures::future::join_all(listings)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// The `available_commands_update` for these prompts and the built-ins.
pub(crate) fn update(prompts: &[PromptCommand], has_models: bool) -> SessionUpdate {
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
    for command in prompts {
        let description = command.prompt.description.clone().unwrap_or_else(|| {
            format!(
                "Prompt `{}` of MCP server `{}`",
                command.prompt.name, command.server
            )
        });
        let mut available = AvailableCommand::new(command.name(), description);
        let arguments = command.arguments();
        if !arguments.is_empty() {
            let hint = match arguments.as_slice() {
                [one] => (*one).to_owned(),
                many => many
                    .iter()
                    .map(|name| format!("{name}=..."))
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            available = available.input(AvailableCommandInput::Unstructured(
                UnstructuredCommandInput::new(hint),
            ));
        }
        commands.push(available);
    }
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands))
}

/// The prompt's arguments from the command's input: the whole input for a one-argument
/// prompt, else `name=value` pairs (values up to the next pair).
pub(crate) fn arguments(command: &PromptCommand, input: &str) -> Map<String, Value> {
    let names = command.arguments();
    let mut arguments = Map::new();
    match names.as_slice() {
        [] => {}
        [one] => {
            if !input.is_empty() {
                arguments.insert((*one).to_owned(), Value::String(input.to_owned()));
            }
        }
        _ => {
            for pair in input.split_whitespace() {
                if let Some((name, value)) = pair.split_once('=') {
                    arguments.insert(name.to_owned(), Value::String(value.to_owned()));
                }
            }
        }
    }
    arguments
}

/// Finds the command `name` (`server:prompt`).
pub(crate) fn find<'a>(prompts: &'a [PromptCommand], name: &str) -> Option<&'a PromptCommand> {
    prompts.iter().find(|command| command.name() == name)
}

/// Runs a slash command at the start of a turn. `Ok(None)`: it was answered here, the model
/// is not called; `Ok(Some(messages))`: what the model gets instead of the prompt (none: the
/// prompt as it is).
pub(crate) async fn run(
    connection: &Connection,
    session: &Arc<Session>,
    command: Command<'_>,
    token: &CancellationToken,
    cx: &ConnectionTo<Client>,
) -> Result<Option<Vec<Message>>, String> {
    let say = |text: &str| updates::send(cx, &session.id, updates::message(text));
    let models = connection.settings.models.as_ref();
    match command {
        Command::Clear => {
            let turns = session.state.with(|state| {
                state.history.clear();
                state.stored_turns
            });
            if let Some(store) = &connection.settings.store {
                // The turns stay stored (and replayed); the model starts afresh.
                store::save_base(&**store, &session.id, turns, &[]).await;
            }
            say("The conversation was cleared.");
        }
        Command::Compact if session.state.with(|state| state.history.is_empty()) => {
            say("Nothing to compact yet.");
        }
        Command::Compact => {
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
        Command::Tools => say(&tools_text(connection, session).await),
        Command::Permissions(input) => {
            // `/permissions [revoke <n> | clear]`: the answer for the user.
            let answer = session.state.with(|state| state.always.command(input));
            say(&answer);
        }
        Command::Model(_) if models.is_none() => {
            say("This agent offers no model choice.");
        }
        Command::Model("") => {
            let (model, models_listed) = session
                .state
                .with(|state| (state.model.clone(), state.models.join(", ")));
            let current = model
                .or_else(|| models.map(|m| m.default.clone()))
                .unwrap_or_default();
            say(&format!("Model: `{current}` (available: {models_listed})"));
        }
        Command::Model(model) => {
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
        Command::Prompt { name, input } => {
            let found = session
                .state
                .with(|state| find(&state.commands, name).cloned());
            let Some(command) = found else {
                return Ok(Some(Vec::new()));
            };
            let connection = session
                .toolset
                .connections()
                .iter()
                .find(|(server, _)| *server == command.server)
                .map(|(_, connection)| connection.clone())
                .ok_or_else(|| format!("MCP server `{}` is gone", command.server))?;
            let arguments = arguments(&command, input);
            let result = connection
                .get_prompt(&command.prompt.name, arguments)
                .await
                .map_err(|error| error.to_string())?;
            return Ok(Some(result.messages));
        }
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
    fn commands_are_read_from_the_prompt() {
        assert_eq!(parse("/clear"), Some(Command::Clear));
        assert_eq!(parse("/compact"), Some(Command::Compact));
        assert_eq!(parse("  /model big-one "), Some(Command::Model("big-one")));
        assert_eq!(
            parse("/notes:summarize the week\nplease"),
            Some(Command::Prompt {
                name: "notes:summarize",
                input: "the week\nplease"
            })
        );
        assert_eq!(parse("/unknown thing"), None);
        assert_eq!(parse("no command"), None);
    }
}
