//! Conversation messages, provider-neutral.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::ToolOutput;

/// Who said a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions for the model. Usually set with `instructions(..)` instead.
    System,
    /// The person (or program) talking to the model.
    User,
    /// The model: text, reasoning and tool calls.
    Assistant,
    /// Results of tool calls, in answer to the assistant message before.
    Tool,
}

/// One message of a conversation: a role and its content parts.
///
/// ```
/// use aquaregia::{ContentPart, Message};
/// let history = vec![
///     Message::user("What is in this picture?"),
///     Message::new(aquaregia::Role::User, vec![ContentPart::image("image/png", "iVBORw0KGgo=")]),
/// ];
/// assert_eq!(history[0].text(), "What is in this picture?");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said, in order.
    pub content: Vec<ContentPart>,
}

impl Message {
    /// A message with the given role and parts.
    pub fn new(role: Role, content: Vec<ContentPart>) -> Self {
        Self { role, content }
    }

    /// A system message with one text part.
    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, vec![ContentPart::text(text)])
    }

    /// A user message with one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, vec![ContentPart::text(text)])
    }

    /// An assistant message with one text part.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, vec![ContentPart::text(text)])
    }

    /// The text parts of this message, concatenated.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.content {
            if let ContentPart::Text { text } = part {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls in this message (assistant messages only have them).
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|part| match part {
            ContentPart::ToolCall(call) => Some(call),
            _ => None,
        })
    }
}

/// One piece of a [`Message`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, inline (base64) or by URL.
    Image {
        /// Where the image bytes are.
        source: ImageSource,
    },
    /// The model's reasoning ("thinking"), kept so it can be passed back where the API needs it.
    Reasoning(Reasoning),
    /// A tool call requested by the model.
    ToolCall(ToolCall),
    /// The result of a tool call, in a [`Role::Tool`] message.
    ToolResult(ToolResult),
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// An inline image from base64 data.
    pub fn image(mime_type: impl Into<String>, base64_data: impl Into<String>) -> Self {
        Self::Image {
            source: ImageSource::Base64 {
                mime_type: mime_type.into(),
                data: base64_data.into(),
            },
        }
    }

    /// An image the provider fetches from a URL.
    pub fn image_url(url: impl Into<String>) -> Self {
        Self::Image {
            source: ImageSource::Url { url: url.into() },
        }
    }
}

/// Where an image's bytes come from.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImageSource {
    /// Inline, base64-encoded bytes.
    Base64 {
        /// e.g. `image/png`.
        mime_type: String,
        /// The base64 (standard alphabet) encoding of the image.
        data: String,
    },
    /// A URL the provider fetches (`https:` or `data:`).
    Url {
        /// The URL.
        url: String,
    },
}

/// Model reasoning, with whatever the provider needs to accept it back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reasoning {
    /// The readable reasoning text or summary (may be empty when the provider hides it).
    pub text: String,
    /// Provider item id (OpenAI Responses `rs_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Anthropic's thinking signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Opaque reasoning state (OpenAI `encrypted_content`, Anthropic `redacted_thinking` data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_content: Option<String>,
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id, echoed back with the result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON (an object for well-behaved models).
    pub arguments: Value,
}

/// The result of one tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the [`ToolCall`] this answers.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// What the tool returned, or the error text. Images in [`ToolOutput::Content`] are sent as
    /// real images where the API allows it.
    pub output: ToolOutput,
    /// Whether `output` describes a failure.
    #[serde(default)]
    pub is_error: bool,
}
