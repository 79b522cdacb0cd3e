//! The slash commands chat front ends share, read from the start of a prompt.

/// A `/command` at the start of a prompt. Front ends run the ones they offer and treat the
/// others as they see fit (the ACP agent sends an unknown one to the model as text; the CLI
/// says it does not know it).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlashCommand<'a> {
    /// `/help` or `/?`.
    Help,
    /// `/exit` or `/quit`.
    Exit,
    /// `/clear`: forget the conversation so far.
    Clear,
    /// `/compact`: summarise the conversation so far to free the model's context.
    Compact,
    /// `/model [name]`: show the model, or switch to `name`.
    Model(&'a str),
    /// `/tools`: list the tools the model can use.
    Tools,
    /// `/prompts`: list the MCP servers' prompts.
    Prompts,
    /// `/permissions [revoke <n> | clear]`.
    Permissions(&'a str),
    /// `/save [title]`: say where the conversation is saved, and set its title.
    Save(&'a str),
    /// `/usage`: the tokens used so far.
    Usage,
    /// `/<server>:<prompt> [arguments]`: an MCP server's prompt, rendered and sent.
    Prompt {
        /// The server's name.
        server: &'a str,
        /// The prompt's name.
        prompt: &'a str,
        /// Everything after the name, trimmed (the prompt's arguments).
        input: &'a str,
    },
    /// Any other `/name`.
    Unknown {
        /// The name after the slash.
        name: &'a str,
        /// Everything after the name, trimmed.
        input: &'a str,
    },
}

impl<'a> SlashCommand<'a> {
    /// Reads `/name rest` from the start of `text` (leading whitespace ignored); `None` when
    /// the text is not a command. The input after the name may span lines.
    pub fn parse(text: &'a str) -> Option<Self> {
        let command = text.trim_start().strip_prefix('/')?;
        let (name, input) = command
            .split_once(char::is_whitespace)
            .map_or((command, ""), |(name, input)| (name, input.trim()));
        if name.is_empty() {
            return None;
        }
        Some(match name {
            "help" | "?" => Self::Help,
            "exit" | "quit" => Self::Exit,
            "clear" => Self::Clear,
            "compact" => Self::Compact,
            "model" => Self::Model(input),
            "tools" => Self::Tools,
            "prompts" => Self::Prompts,
            "permissions" => Self::Permissions(input),
            "save" => Self::Save(input),
            "usage" => Self::Usage,
            name => match name.split_once(':') {
                Some((server, prompt)) if !server.is_empty() && !prompt.is_empty() => {
                    Self::Prompt {
                        server,
                        prompt,
                        input,
                    }
                }
                _ => Self::Unknown { name, input },
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::SlashCommand;

    #[test]
    fn commands_are_read_from_the_start_of_the_prompt() {
        assert_eq!(SlashCommand::parse("/clear"), Some(SlashCommand::Clear));
        assert_eq!(
            SlashCommand::parse("  /model big-one "),
            Some(SlashCommand::Model("big-one"))
        );
        assert_eq!(
            SlashCommand::parse("/notes:summarize the week\nplease"),
            Some(SlashCommand::Prompt {
                server: "notes",
                prompt: "summarize",
                input: "the week\nplease"
            })
        );
        assert_eq!(
            SlashCommand::parse("/unknown thing"),
            Some(SlashCommand::Unknown {
                name: "unknown",
                input: "thing"
            })
        );
        assert_eq!(
            SlashCommand::parse("/:x"),
            Some(SlashCommand::Unknown {
                name: ":x",
                input: ""
            })
        );
        assert_eq!(SlashCommand::parse("/"), None);
        assert_eq!(SlashCommand::parse("no command"), None);
        assert_eq!(SlashCommand::parse("a /clear later"), None);
    }
}
