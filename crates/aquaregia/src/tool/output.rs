//! [`ToolOutput`]: what a tool gives back, typed.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ToolExecError;

/// What a tool returned, as the model should see it.
///
/// Providers map each form to their wire format: text as text, JSON as compact JSON text, and
/// content blocks block by block (images as real images where the API accepts them). Nothing is
/// ever reinterpreted: a [`ToolOutput::Json`] array stays JSON even if it looks like content.
///
/// ```
/// use aquaregia::{ContentBlock, ToolOutput};
/// use serde_json::json;
///
/// assert_eq!(ToolOutput::from("done"), ToolOutput::Text("done".into()));
/// assert_eq!(ToolOutput::from(json!({"n": 1})).to_text(), r#"{"n":1}"#);
/// let shot = ToolOutput::Content(vec![
///     ContentBlock::text("the page"),
///     ContentBlock::image("image/png", "iVBORw0KGgo="),
/// ]);
/// assert_eq!(shot.to_text(), "the page\n[image/png image]");
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "camelCase")]
pub enum ToolOutput {
    /// Plain text.
    Text(String),
    /// A JSON value, sent as compact JSON text.
    Json(Value),
    /// Content blocks: text, images, audio, resources (what MCP tools return).
    Content(Vec<ContentBlock>),
    /// Content blocks with a structured value beside them (an MCP result with both
    /// `structuredContent` and image or audio blocks): the model sees the blocks, as
    /// [`ToolOutput::Content`]; [`to_call_tool_result`](Self::to_call_tool_result) keeps both.
    Structured {
        /// The blocks, what the model sees.
        content: Vec<ContentBlock>,
        /// The structured value (a JSON object for MCP tools).
        structured: Value,
    },
}

impl Default for ToolOutput {
    fn default() -> Self {
        Self::Text(String::new())
    }
}

impl ToolOutput {
    /// A text output.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    /// Any serializable value as [`ToolOutput::Json`].
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<Self, ToolExecError> {
        serde_json::to_value(value)
            .map(Self::Json)
            .map_err(|error| ToolExecError::Execution(format!("tool output is not JSON: {error}")))
    }

    /// The output as one text: JSON compact, content blocks' text joined by newlines with a
    /// short placeholder for each non-text block. For logs, terminals and text-only APIs.
    pub fn to_text(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Json(value) => value.to_string(),
            Self::Content(blocks)
            | Self::Structured {
                content: blocks, ..
            } => {
                let mut out = String::new();
                for block in blocks {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(&block.to_text());
                }
                out
            }
        }
    }

    /// The output as plain JSON, for clients that show it raw: text as a JSON string, JSON as
    /// is, content as the array of its blocks (camelCase fields, as MCP writes them), a
    /// structured output as its structured value.
    pub fn to_value(&self) -> Value {
        match self {
            Self::Text(text) => Value::String(text.clone()),
            Self::Json(value)
            | Self::Structured {
                structured: value, ..
            } => value.clone(),
            Self::Content(blocks) => serde_json::to_value(blocks).unwrap_or_default(),
        }
    }

    /// The output as a successful MCP `CallToolResult`: `content` as MCP content blocks (an
    /// embedded resource's contents under `resource`; text as one text block, none when
    /// empty; JSON as its compact text), `structuredContent` when the output is a JSON object
    /// or has a structured value, and `isError: false`.
    ///
    /// ```
    /// use aquaregia::ToolOutput;
    /// use serde_json::json;
    ///
    /// assert_eq!(
    ///     ToolOutput::from(json!({"n": 1})).to_call_tool_result(),
    ///     json!({"content": [{"type": "text", "text": "{\"n\":1}"}],
    ///            "structuredContent": {"n": 1}, "isError": false})
    /// );
    /// ```
    pub fn to_call_tool_result(&self) -> Value {
        let mut result = serde_json::Map::new();
        let content: Vec<Value> = match self {
            Self::Text(text) if text.is_empty() => Vec::new(),
            Self::Text(text) => vec![serde_json::json!({"type": "text", "text": text})],
            Self::Json(value) => {
                if value.is_object() {
                    result.insert("structuredContent".into(), value.clone());
                }
                vec![serde_json::json!({"type": "text", "text": value.to_string()})]
            }
            Self::Content(blocks) => blocks.iter().map(ContentBlock::to_mcp).collect(),
            Self::Structured {
                content,
                structured,
            } => {
                result.insert("structuredContent".into(), structured.clone());
                content.iter().map(ContentBlock::to_mcp).collect()
            }
        };
        result.insert("content".into(), Value::Array(content));
        result.insert("isError".into(), Value::Bool(false));
        Value::Object(result)
    }

    /// The text of a [`ToolOutput::Text`].
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(text) => Some(text),
            _ => None,
        }
    }

    /// Whether any block is an image.
    pub fn has_images(&self) -> bool {
        matches!(self, Self::Content(blocks) | Self::Structured { content: blocks, .. }
            if blocks.iter().any(|b| matches!(b, ContentBlock::Image { .. })))
    }
}

impl std::fmt::Display for ToolOutput {
    /// [`ToolOutput::to_text`].
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Text(text) => f.write_str(text),
            other => f.write_str(&other.to_text()),
        }
    }
}

/// One block of [`ToolOutput::Content`]. Field names are camelCase on the wire, like MCP's.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// e.g. `image/png`.
        mime_type: String,
        /// Base64 (standard alphabet) of the image bytes.
        data: String,
    },
    /// Audio, base64-encoded.
    Audio {
        /// e.g. `audio/wav`.
        mime_type: String,
        /// Base64 (standard alphabet) of the audio bytes.
        data: String,
    },
    /// A resource's contents, embedded.
    Resource {
        /// The resource URI.
        uri: String,
        /// Its media type, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Text contents.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// Binary contents, base64.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blob: Option<String>,
    },
    /// A link to a resource the client can fetch.
    ResourceLink {
        /// The resource URI.
        uri: String,
        /// Its name.
        name: String,
        /// Its media type, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// What it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
}

impl ContentBlock {
    /// The block as MCP writes it: an embedded resource's contents under `resource` (a
    /// resource with neither text nor blob as empty text), every other block as it
    /// serializes.
    pub fn to_mcp(&self) -> Value {
        match self {
            Self::Resource {
                uri,
                mime_type,
                text,
                blob,
            } => {
                let mut resource = serde_json::json!({"uri": uri});
                if let Some(mime_type) = mime_type {
                    resource["mimeType"] = Value::String(mime_type.clone());
                }
                match (text, blob) {
                    (None, Some(blob)) => resource["blob"] = Value::String(blob.clone()),
                    (text, _) => {
                        resource["text"] = Value::String(text.clone().unwrap_or_default());
                    }
                }
                serde_json::json!({"type": "resource", "resource": resource})
            }
            other => serde_json::to_value(other).unwrap_or_default(),
        }
    }

    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// An image block from base64 data.
    pub fn image(mime_type: impl Into<String>, base64_data: impl Into<String>) -> Self {
        Self::Image {
            mime_type: mime_type.into(),
            data: base64_data.into(),
        }
    }

    /// The block as text: its text, a resource's text, or a bracketed placeholder saying what
    /// the block is (for media a text-only reader cannot see).
    pub fn to_text(&self) -> Cow<'_, str> {
        match self {
            Self::Text { text } => Cow::Borrowed(text),
            Self::Image { mime_type, .. } => Cow::Owned(format!("[{mime_type} image]")),
            Self::Audio { mime_type, .. } => Cow::Owned(format!("[{mime_type} audio]")),
            Self::Resource {
                uri,
                text: Some(text),
                ..
            } => Cow::Owned(format!("{uri}\n{text}")),
            Self::Resource { uri, mime_type, .. } => Cow::Owned(format!(
                "[resource {uri}{}]",
                mime_type
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            )),
            Self::ResourceLink {
                uri,
                name,
                description,
                ..
            } => Cow::Owned(match description {
                Some(description) => format!("[{name}]({uri}): {description}"),
                None => format!("[{name}]({uri})"),
            }),
        }
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<Value> for ToolOutput {
    fn from(value: Value) -> Self {
        Self::Json(value)
    }
}

impl From<Vec<ContentBlock>> for ToolOutput {
    fn from(blocks: Vec<ContentBlock>) -> Self {
        Self::Content(blocks)
    }
}

impl From<ContentBlock> for ToolOutput {
    fn from(block: ContentBlock) -> Self {
        Self::Content(vec![block])
    }
}

/// Wraps any serializable value so a tool closure can return it as [`ToolOutput::Json`].
///
/// ```
/// use aquaregia::{Json, tool};
///
/// #[derive(serde::Serialize)]
/// struct Forecast { city: String, celsius: f32 }
///
/// let weather = tool("weather").execute_raw(|_| async {
///     Ok(Json(Forecast { city: "Paris".into(), celsius: 21.5 }))
/// });
/// # let _ = weather;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Json<T>(pub T);

/// What a tool closure may return: anything that becomes a [`ToolOutput`].
///
/// Strings become text; [`serde_json::Value`], numbers, booleans and [`Json`] become JSON;
/// content blocks become content.
pub trait IntoToolOutput {
    /// The output, or an error when it cannot be represented (a [`Json`] value that does not
    /// serialize).
    fn into_tool_output(self) -> Result<ToolOutput, ToolExecError>;
}

impl<T: Into<ToolOutput>> IntoToolOutput for T {
    fn into_tool_output(self) -> Result<ToolOutput, ToolExecError> {
        Ok(self.into())
    }
}

impl<T: Serialize> IntoToolOutput for Json<T> {
    fn into_tool_output(self) -> Result<ToolOutput, ToolExecError> {
        ToolOutput::json(&self.0)
    }
}

macro_rules! json_output {
    ($($t:ty),*) => {$(
        impl From<$t> for ToolOutput {
            fn from(value: $t) -> Self {
                Self::Json(Value::from(value))
            }
        }
    )*};
}

json_output!(
    bool, i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64
);

impl From<()> for ToolOutput {
    fn from((): ()) -> Self {
        Self::Json(Value::Null)
    }
}
