//! Sampling: a server asking the client's model for a completion while it works on a call
//! (`sampling/createMessage`), answered by the handler given to
//! [`Connector::on_sampling`](super::Connector::on_sampling). [`sample_with_model`] makes such
//! a handler from an aquaregia [`Client`] and a model, behind an approval callback.
// Sampling is deprecated by SEP-2577 (2026-07-28), and still what 2025-11-25 servers use.
#![allow(deprecated)]

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, Role as McpRole, SamplingMessage,
    SamplingMessageContentBlock,
};

use aquaregia::{Client, ContentPart, FinishReason, Message, ModelRequest, Role};

/// What a server asks the model.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingRequest {
    /// The server's name.
    pub server: String,
    /// The request as the server sent it: messages, system prompt, token limit,
    /// preferences.
    pub params: CreateMessageRequestParams,
}

/// The answer to a [`SamplingRequest`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum SamplingResponse {
    /// The model's answer.
    Reply(Box<CreateMessageResult>),
    /// The user (or the policy) refused: the server is told the request was rejected.
    Decline,
    /// Sampling was attempted and failed; the message goes to the server.
    Failed(String),
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
            sample(&client, &model, request.params).await
        })
    }
}

async fn sample(
    client: &Client,
    model: &str,
    params: CreateMessageRequestParams,
) -> SamplingResponse {
    let messages = params.messages.into_iter().map(message).collect();
    let mut request = ModelRequest::new(model, messages);
    request.instructions = params.system_prompt;
    request.max_output_tokens = Some(params.max_tokens);
    request.temperature = params.temperature;
    let response = match client.generate(&request).await {
        Ok(response) => response,
        Err(error) => return SamplingResponse::Failed(format!("the model call failed: {error}")),
    };
    let stop_reason = match &response.finish_reason {
        FinishReason::Stop => CreateMessageResult::STOP_REASON_END_TURN.to_owned(),
        FinishReason::Length => CreateMessageResult::STOP_REASON_END_MAX_TOKEN.to_owned(),
        other => format!("{other:?}"),
    };
    let answer = SamplingMessage::assistant_text(response.text());
    let answered_by = response.model.unwrap_or_else(|| model.to_owned());
    SamplingResponse::Reply(Box::new(
        CreateMessageResult::new(answer, answered_by).with_stop_reason(stop_reason),
    ))
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
