//! Sampling: a server asking the client's model for a completion while it works on a call
//! (`sampling/createMessage`), answered by the handler given to
//! [`Connector::on_sampling`](crate::Connector::on_sampling). [`sample_with_model`] makes such
//! a handler from an aquaregia [`Client`] and a model, behind an approval callback.
// Sampling is deprecated by SEP-2577 (2026-07-28), and still what 2025-11-25 servers use.
#![allow(deprecated)]

use std::sync::Arc;

use aquaregia::{Client, ContentPart, FinishReason, Message, ModelRequest, Role};
use futures::future::BoxFuture;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, Role as McpRole, SamplingMessage,
    SamplingMessageContentBlock,
};

/// What a server asks the model, with its messages as conversation messages: text and images
/// as they are, other content described in text.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingRequest {
    /// The server's name.
    pub server: String,
    /// The conversation to answer.
    pub messages: Vec<Message>,
    /// The server's system prompt.
    pub system_prompt: Option<String>,
    /// The most tokens the answer may take.
    pub max_tokens: u32,
    /// The sampling temperature the server asks for.
    pub temperature: Option<f32>,
    /// Where generation should stop.
    pub stop_sequences: Vec<String>,
    /// The models the server would prefer, best first (`modelPreferences.hints`): names or
    /// name fragments, advisory only.
    pub model_hints: Vec<String>,
}

/// The model's answer to a [`SamplingRequest`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingReply {
    /// The answer's text.
    pub text: String,
    /// The model that answered.
    pub model: String,
    /// Why it stopped (`endTurn`, `maxTokens`... on the wire).
    pub finish_reason: FinishReason,
}

impl SamplingReply {
    /// A complete answer (`endTurn`) of `model`.
    pub fn new(text: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            model: model.into(),
            finish_reason: FinishReason::Stop,
        }
    }

    /// With another reason to stop.
    #[must_use]
    pub fn finish_reason(mut self, reason: FinishReason) -> Self {
        self.finish_reason = reason;
        self
    }
}

/// The answer to a [`SamplingRequest`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum SamplingResponse {
    /// The model's answer.
    Reply(SamplingReply),
    /// The user (or the policy) refused: the server is told the request was rejected.
    Decline,
    /// Sampling was attempted and failed; the message goes to the server.
    Failed(String),
}

impl SamplingRequest {
    /// The request of `server` as rmcp read it.
    pub(crate) fn from_params(server: &str, params: CreateMessageRequestParams) -> Self {
        Self {
            server: server.to_owned(),
            messages: params.messages.into_iter().map(message).collect(),
            system_prompt: params.system_prompt,
            max_tokens: params.max_tokens,
            temperature: params.temperature,
            stop_sequences: params.stop_sequences.unwrap_or_default(),
            model_hints: params
                .model_preferences
                .and_then(|preferences| preferences.hints)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|hint| hint.name)
                .collect(),
        }
    }
}

impl SamplingReply {
    /// The `sampling/createMessage` result that carries this answer.
    pub(crate) fn into_result(self) -> CreateMessageResult {
        let stop_reason = match self.finish_reason {
            FinishReason::Stop => CreateMessageResult::STOP_REASON_END_TURN.to_owned(),
            FinishReason::Length => CreateMessageResult::STOP_REASON_END_MAX_TOKEN.to_owned(),
            FinishReason::ToolCalls => CreateMessageResult::STOP_REASON_TOOL_USE.to_owned(),
            FinishReason::Other(other) => other,
            other => format!("{other:?}"),
        };
        CreateMessageResult::new(SamplingMessage::assistant_text(self.text), self.model)
            .with_stop_reason(stop_reason)
    }
}

/// Answers a server's sampling requests; `Send + Sync`, called once per request.
pub(crate) type SamplingHandler =
    Arc<dyn Fn(SamplingRequest) -> BoxFuture<'static, SamplingResponse> + Send + Sync>;

/// Wraps a closure as a handler.
pub(crate) fn handler<F, Fut>(answer: F) -> SamplingHandler
where
    F: Fn(SamplingRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = SamplingResponse> + Send + 'static,
{
    Arc::new(move |request| Box::pin(answer(request)))
}

/// A sampling handler that asks `approve` about each request and, when it agrees, answers
/// with `model` through `client`: the server's system prompt becomes the instructions, its
/// messages the conversation (text and images; other content is described in text), and its
/// `maxTokens` and `temperature` are kept. Declined requests are rejected; a failed model
/// call reaches the server as an error.
///
/// ```no_run
/// # fn demo(client: aquaregia::Client) {
/// use aquaregia_mcp::{Connector, sample_with_model};
/// let connector = Connector::new().on_sampling(sample_with_model(
///     client,
///     "gpt-5-mini",
///     |request| {
///         let server = request.server.clone();
///         async move { server == "trusted" }
///     },
/// ));
/// # }
/// ```
pub fn sample_with_model<F, Fut>(
    client: Client,
    model: impl Into<String>,
    approve: F,
) -> impl Fn(SamplingRequest) -> BoxFuture<'static, SamplingResponse> + Send + Sync + 'static
where
    F: Fn(&SamplingRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    let model = model.into();
    move |request| {
        let approval = approve(&request);
        let (client, model) = (client.clone(), model.clone());
        Box::pin(async move {
            if !approval.await {
                tracing::info!(server = %request.server, "sampling request declined");
                return SamplingResponse::Decline;
            }
            sample(&client, &model, request).await
        })
    }
}

async fn sample(client: &Client, model: &str, sampling: SamplingRequest) -> SamplingResponse {
    let mut request = ModelRequest::new(model, sampling.messages);
    request.instructions = sampling.system_prompt;
    request.max_output_tokens = Some(sampling.max_tokens);
    request.temperature = sampling.temperature;
    let response = match client.generate(&request).await {
        Ok(response) => response,
        Err(error) => return SamplingResponse::Failed(format!("the model call failed: {error}")),
    };
    let text = response.text();
    let answered_by = response.model.unwrap_or_else(|| model.to_owned());
    SamplingResponse::Reply(
        SamplingReply::new(text, answered_by).finish_reason(response.finish_reason),
    )
}

/// A sampling message as an aquaregia message.
fn message(message: SamplingMessage) -> Message {
    let role = match message.role {
        McpRole::Assistant => Role::Assistant,
        _ => Role::User,
    };
    let parts = message
        .content
        .into_vec()
        .into_iter()
        .map(|block| match block {
            SamplingMessageContentBlock::Text(text) => ContentPart::text(text.text),
            SamplingMessageContentBlock::Image(image) => {
                ContentPart::image(image.mime_type, image.data)
            }
            SamplingMessageContentBlock::Audio(audio) => {
                ContentPart::text(format!("[{} audio omitted]", audio.mime_type))
            }
            other => ContentPart::text(serde_json::to_string(&other).unwrap_or_default()),
        })
        .collect();
    Message::new(role, parts)
}
