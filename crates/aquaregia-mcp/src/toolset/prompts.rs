//! The servers' prompts as slash commands: every server's listing, and `/<server>:<prompt>
//! text` rendered into messages to send.

use std::time::Duration;

use aquaregia::Message;
use futures::future::join_all;

use super::McpToolset;
use crate::call::prompts::{McpPrompt, PromptArgumentsError};
use crate::error::McpError;
use crate::session::connection::McpConnection;

/// How long a server gets to list or render its prompts.
pub const PROMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// One server's prompt, as a front end offers it: the command `/<server>:<prompt>`.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerPrompt {
    /// The server's name in the toolset.
    pub server: String,
    /// The prompt.
    pub prompt: McpPrompt,
}

impl ServerPrompt {
    /// The command's name, `<server>:<prompt>`.
    pub fn command(&self) -> String {
        format!("{}:{}", self.server, self.prompt.name)
    }

    /// What the command does: the prompt's description, else which server it comes from.
    pub fn description(&self) -> String {
        self.prompt.description.clone().unwrap_or_else(|| {
            format!(
                "Prompt `{}` of MCP server `{}`",
                self.prompt.name, self.server
            )
        })
    }
}

/// Why `/<server>:<prompt>` could not be rendered ([`McpToolset::render_prompt`]).
#[non_exhaustive]
#[derive(Debug, Clone, thiserror::Error)]
pub enum PromptError {
    /// No connected server has this name.
    #[error("no MCP server `{server}` (servers: {servers})")]
    NoServer {
        /// The name given.
        server: String,
        /// The connected servers' names, comma-separated.
        servers: String,
    },
    /// The server has no prompt of this name.
    #[error("MCP server `{server}` has no prompt `{prompt}`")]
    NoPrompt {
        /// The server.
        server: String,
        /// The name given.
        prompt: String,
    },
    /// The text after the command is not the prompt's arguments.
    #[error("`/{server}:{prompt}`: {source}")]
    Arguments {
        /// The server.
        server: String,
        /// The prompt.
        prompt: String,
        /// What is wrong with them.
        #[source]
        source: PromptArgumentsError,
    },
    /// The server did not answer within [`PROMPT_TIMEOUT`].
    #[error("MCP server `{server}` did not render `{prompt}` within {} s", PROMPT_TIMEOUT.as_secs())]
    Timeout {
        /// The server.
        server: String,
        /// The prompt.
        prompt: String,
    },
    /// The server failed to list or render it.
    #[error("MCP server `{server}` could not render the prompt `{prompt}`: {source}")]
    Server {
        /// The server.
        server: String,
        /// The prompt.
        prompt: String,
        /// Its error.
        #[source]
        source: Box<McpError>,
    },
    /// The rendered prompt has no messages.
    #[error("the prompt `{prompt}` of MCP server `{server}` has no messages")]
    Empty {
        /// The server.
        server: String,
        /// The prompt.
        prompt: String,
    },
}

impl McpToolset {
    /// Every connected server's prompts, in server order. A server that cannot list them
    /// within [`PROMPT_TIMEOUT`] is logged and skipped.
    pub async fn prompts(&self) -> Vec<ServerPrompt> {
        let listings = self
            .connections()
            .iter()
            .map(|(server, connection)| async move {
                match tokio::time::timeout(PROMPT_TIMEOUT, connection.list_prompts()).await {
                    Ok(Ok(prompts)) => prompts
                        .into_iter()
                        .map(|prompt| ServerPrompt {
                            server: server.clone(),
                            prompt,
                        })
                        .collect(),
                    Ok(Err(error)) => {
                        tracing::warn!(server, %error, "cannot list the server's prompts");
                        Vec::new()
                    }
                    Err(_) => {
                        tracing::warn!(server, "the server did not list its prompts in time");
                        Vec::new()
                    }
                }
            });
        join_all(listings).await.into_iter().flatten().collect()
    }

    /// Renders `/<server>:<prompt> text`: finds the prompt in the server's listing, then
    /// [`render`](Self::render)s it. Returns the messages to send.
    pub async fn render_prompt(
        &self,
        server: &str,
        prompt: &str,
        text: &str,
    ) -> Result<Vec<Message>, PromptError> {
        let connection = self.prompt_server(server)?;
        let listed = tokio::time::timeout(PROMPT_TIMEOUT, connection.list_prompts())
            .await
            .map_err(|_| PromptError::Timeout {
                server: server.to_owned(),
                prompt: prompt.to_owned(),
            })?
            .map_err(|source| PromptError::Server {
                server: server.to_owned(),
                prompt: prompt.to_owned(),
                source: Box::new(source),
            })?;
        let found = listed
            .into_iter()
            .find(|listed| listed.name == prompt)
            .ok_or_else(|| PromptError::NoPrompt {
                server: server.to_owned(),
                prompt: prompt.to_owned(),
            })?;
        self.render(
            &ServerPrompt {
                server: server.to_owned(),
                prompt: found,
            },
            text,
        )
        .await
    }

    /// Renders a listed prompt ([`prompts`](Self::prompts)) with the arguments read from
    /// `text` ([`McpPrompt::arguments_from`]): `prompts/get`, within [`PROMPT_TIMEOUT`].
    /// Returns the messages to send.
    pub async fn render(
        &self,
        listed: &ServerPrompt,
        text: &str,
    ) -> Result<Vec<Message>, PromptError> {
        let (server, prompt) = (listed.server.as_str(), listed.prompt.name.as_str());
        let connection = self.prompt_server(server)?;
        let arguments =
            listed
                .prompt
                .arguments_from(text)
                .map_err(|source| PromptError::Arguments {
                    server: server.to_owned(),
                    prompt: prompt.to_owned(),
                    source,
                })?;
        let rendered =
            tokio::time::timeout(PROMPT_TIMEOUT, connection.get_prompt(prompt, arguments))
                .await
                .map_err(|_| PromptError::Timeout {
                    server: server.to_owned(),
                    prompt: prompt.to_owned(),
                })?
                .map_err(|source| PromptError::Server {
                    server: server.to_owned(),
                    prompt: prompt.to_owned(),
                    source: Box::new(source),
                })?;
        if rendered.messages.is_empty() {
            return Err(PromptError::Empty {
                server: server.to_owned(),
                prompt: prompt.to_owned(),
            });
        }
        Ok(rendered.messages)
    }

    fn prompt_server(&self, server: &str) -> Result<&McpConnection, PromptError> {
        self.connections()
            .iter()
            .find(|(name, _)| name == server)
            .map(|(_, connection)| connection)
            .ok_or_else(|| PromptError::NoServer {
                server: server.to_owned(),
                servers: self
                    .connections()
                    .iter()
                    .map(|(name, _)| name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}
