//! Prompts (`prompts/list`, `prompts/get`): what a front end offers as slash commands, in this
//! crate's own types ([`McpPrompt`], [`RenderedPrompt`]) rather than rmcp's.

use aquaregia::{ContentBlock, ContentPart, Message, Role};
use rmcp::model::{GetPromptRequestParams, GetPromptResponse, Prompt, PromptMessage};
use serde_json::{Map, Value};

use super::content::typed_block;
use crate::error::McpError;
use crate::session::connection::McpConnection;

/// A prompt a server offers (`prompts/list`): a template of messages, with arguments to fill
/// in, that front ends show as a slash command.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPrompt {
    /// The name to ask for it by ([`McpConnection::get_prompt`]).
    pub name: String,
    /// A human-readable title.
    pub title: Option<String>,
    /// What it does.
    pub description: Option<String>,
    /// Its arguments, in the server's order.
    pub arguments: Vec<McpPromptArgument>,
}

/// One argument of an [`McpPrompt`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPromptArgument {
    /// The argument's name.
    pub name: String,
    /// A human-readable title.
    pub title: Option<String>,
    /// What to give.
    pub description: Option<String>,
    /// Whether it must be given.
    pub required: bool,
}

/// A prompt rendered by the server (`prompts/get`), as conversation messages ready to send.
///
/// Text and images are kept as they are; an embedded resource becomes its text inside
/// `<resource uri="...">` tags, audio a short note naming its type, a resource link a
/// `<resource_link>` tag, and content of a type this version does not know its JSON.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedPrompt {
    /// The server's description of the result.
    pub description: Option<String>,
    /// The messages, user and assistant, in order.
    pub messages: Vec<Message>,
}

impl From<Prompt> for McpPrompt {
    fn from(prompt: Prompt) -> Self {
        Self {
            name: prompt.name,
            title: prompt.title,
            description: prompt.description,
            arguments: prompt
                .arguments
                .unwrap_or_default()
                .into_iter()
                .map(|argument| McpPromptArgument {
                    name: argument.name,
                    title: argument.title,
                    description: argument.description,
                    required: argument.required.unwrap_or(false),
                })
                .collect(),
        }
    }
}

/// One prompt message as a conversation message.
fn message(message: PromptMessage) -> Message {
    let role = match serde_json::to_value(&message.role)
        .ok()
        .as_ref()
        .and_then(Value::as_str)
    {
        Some("assistant") => Role::Assistant,
        _ => Role::User,
    };
    let part = match typed_block(message.content) {
        ContentBlock::Text { text } => ContentPart::text(text),
        ContentBlock::Image { mime_type, data } => ContentPart::image(mime_type, data),
        ContentBlock::Audio { mime_type, .. } => {
            ContentPart::text(format!("[{mime_type} audio omitted]"))
        }
        ContentBlock::Resource { uri, text, .. } => ContentPart::text(format!(
            "<resource uri=\"{uri}\">\n{}\n</resource>",
            text.unwrap_or_default()
        )),
        ContentBlock::ResourceLink { uri, name, .. } => {
            ContentPart::text(format!("<resource_link uri=\"{uri}\" name=\"{name}\"/>"))
        }
        other => ContentPart::text(serde_json::to_string(&other).unwrap_or_default()),
    };
    Message::new(role, vec![part])
}

impl McpConnection {
    /// The server's prompts, every page; empty when the server has no prompts capability.
    pub async fn list_prompts(&self) -> Result<Vec<McpPrompt>, McpError> {
        if self.shared.closed.is_cancelled() {
            return Err(McpError::Disconnected);
        }
        let has_prompts = self
            .shared
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.prompts.is_some());
        if !has_prompts {
            return Ok(Vec::new());
        }
        match self.shared.peer.list_all_prompts().await {
            Ok(prompts) => Ok(prompts.into_iter().map(McpPrompt::from).collect()),
            Err(error) => Err(self.shared.session_error(error, "prompts/list").await),
        }
    }

    /// Renders prompt `name` with `arguments` (`prompts/get`). A prompt that asks the client
    /// for input first is an error.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<RenderedPrompt, McpError> {
        if self.shared.closed.is_cancelled() {
            return Err(McpError::Disconnected);
        }
        let mut params = GetPromptRequestParams::new(name);
        if !arguments.is_empty() {
            params = params.with_arguments(arguments);
        }
        match self.shared.peer.get_prompt_once(params).await {
            Ok(GetPromptResponse::Complete(result)) => Ok(RenderedPrompt {
                description: result.description,
                messages: result.messages.into_iter().map(message).collect(),
            }),
            Ok(_) => Err(McpError::Protocol {
                server: self.shared.name.clone(),
                method: "prompts/get",
                code: -32600,
                message: "the prompt asks for input, which is not supported here".into(),
            }),
            Err(error) => Err(self.shared.session_error(error, "prompts/get").await),
        }
    }
}

/// Why a prompt's arguments could not be read from a command's text
/// ([`McpPrompt::arguments_from`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptArgumentsError {
    /// The prompt takes no arguments but some text followed its name.
    #[error("the prompt `{prompt}` takes no arguments")]
    NoneTaken {
        /// The prompt's name.
        prompt: String,
    },
    /// A quote was left open.
    #[error("unbalanced quotes in `{text}`")]
    Unbalanced {
        /// The text as given.
        text: String,
    },
    /// A word is not `name=value` where several arguments are taken.
    #[error("`{word}` is not name=value (the prompt's arguments: {known})")]
    NotAPair {
        /// The word.
        word: String,
        /// The prompt's argument names, comma-separated.
        known: String,
    },
    /// A name the prompt does not take.
    #[error("the prompt has no argument `{name}` (its arguments: {known})")]
    Unknown {
        /// The name given.
        name: String,
        /// The prompt's argument names, comma-separated.
        known: String,
    },
    /// Required arguments were not given.
    #[error("missing required argument(s): {missing}")]
    Missing {
        /// Their names, comma-separated.
        missing: String,
    },
}

impl McpPrompt {
    /// The arguments for `prompts/get` from the text a user typed after the prompt's name.
    ///
    /// A prompt with one argument takes the whole text as its value (`/notes:search the week`)
    /// unless it starts with `name=`; otherwise the text is split like a shell would
    /// (`topic=rust depth="very deep"`) into `name=value` pairs. Unknown names and missing
    /// required arguments are errors; values are strings.
    pub fn arguments_from(&self, text: &str) -> Result<Map<String, Value>, PromptArgumentsError> {
        let text = text.trim();
        let names: Vec<&str> = self
            .arguments
            .iter()
            .map(|argument| argument.name.as_str())
            .collect();
        let known = || names.join(", ");
        let mut arguments = Map::new();
        match names.as_slice() {
            [] if text.is_empty() => {}
            [] => {
                return Err(PromptArgumentsError::NoneTaken {
                    prompt: self.name.clone(),
                });
            }
            [one] if !text.is_empty() && !text.starts_with(&format!("{one}=")) => {
                arguments.insert((*one).to_owned(), Value::String(text.to_owned()));
            }
            _ => {
                let words = shlex::split(text).ok_or_else(|| PromptArgumentsError::Unbalanced {
                    text: text.to_owned(),
                })?;
                for word in words {
                    let Some((name, value)) = word.split_once('=') else {
                        return Err(PromptArgumentsError::NotAPair {
                            word,
                            known: known(),
                        });
                    };
                    if !names.contains(&name) {
                        return Err(PromptArgumentsError::Unknown {
                            name: name.to_owned(),
                            known: known(),
                        });
                    }
                    arguments.insert(name.to_owned(), Value::String(value.to_owned()));
                }
            }
        }
        let missing: Vec<&str> = self
            .arguments
            .iter()
            .filter(|argument| argument.required && !arguments.contains_key(&argument.name))
            .map(|argument| argument.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(PromptArgumentsError::Missing {
                missing: missing.join(", "),
            });
        }
        Ok(arguments)
    }

    /// A short hint at the arguments, for a command list: the single argument's name, or
    /// `name=… [optional=…]`; empty when there are none.
    pub fn arguments_hint(&self) -> String {
        match self.arguments.as_slice() {
            [] => String::new(),
            [one] => one.name.clone(),
            many => many
                .iter()
                .map(|argument| {
                    if argument.required {
                        format!("{}=…", argument.name)
                    } else {
                        format!("[{}=…]", argument.name)
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(arguments: &[(&str, bool)]) -> McpPrompt {
        McpPrompt {
            name: "p".into(),
            title: None,
            description: None,
            arguments: arguments
                .iter()
                .map(|(name, required)| McpPromptArgument {
                    name: (*name).into(),
                    title: None,
                    description: None,
                    required: *required,
                })
                .collect(),
        }
    }

    fn strings(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), Value::String((*value).to_owned())))
            .collect()
    }

    #[test]
    fn one_argument_takes_the_whole_text_unless_named() {
        let one = prompt(&[("topic", true)]);
        assert_eq!(
            one.arguments_from(" the week's news "),
            Ok(strings(&[("topic", "the week's news")]))
        );
        assert_eq!(
            one.arguments_from("topic=\"a b\""),
            Ok(strings(&[("topic", "a b")]))
        );
        assert!(matches!(
            one.arguments_from(""),
            Err(PromptArgumentsError::Missing { .. })
        ));
    }

    #[test]
    fn several_arguments_are_shell_split_pairs() {
        let two = prompt(&[("topic", true), ("depth", false)]);
        assert_eq!(
            two.arguments_from("topic=rust depth=\"very deep\""),
            Ok(strings(&[("topic", "rust"), ("depth", "very deep")]))
        );
        assert!(matches!(
            two.arguments_from("rust"),
            Err(PromptArgumentsError::NotAPair { .. })
        ));
        assert!(matches!(
            two.arguments_from("topic=a colour=red"),
            Err(PromptArgumentsError::Unknown { .. })
        ));
        assert!(matches!(
            two.arguments_from("depth=1"),
            Err(PromptArgumentsError::Missing { .. })
        ));
        assert!(matches!(
            two.arguments_from("topic='open"),
            Err(PromptArgumentsError::Unbalanced { .. })
        ));
        assert_eq!(prompt(&[]).arguments_from("  "), Ok(Map::new()));
        assert!(prompt(&[]).arguments_from("x").is_err());
    }
}
