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
