//! [`ClientModel`]: a [`Client`] and a model id, as a [`LanguageModel`].

use async_trait::async_trait;

use super::Client;
use crate::error::Error;
use crate::model::ProviderKind;
use crate::model::{LanguageModel, ModelRequest, ModelResponse, ModelState, ModelStream};

/// One model of a [`Client`]'s provider, as a [`LanguageModel`]: what
/// [`Client::model`] makes and [`Client::agent`] runs on. Cheap to clone.
///
/// Calls go to the model `request.model` names, or to this model's id when that is empty. The
/// per-run [`ModelState`] keeps the encoded conversation and tool definitions, so each step of
/// a run encodes only what is new.
///
/// ```no_run
/// # fn demo() -> Result<(), aquaregia::Error> {
/// use std::sync::Arc;
/// let model = aquaregia::Client::openai_chat().build()?.model("gpt-4o-mini");
/// let agent = aquaregia::AgentBuilder::new(Arc::new(model)).build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ClientModel {
    client: Client,
    id: String,
}

impl ClientModel {
    pub(super) fn new(client: Client, id: String) -> Self {
        Self { client, id }
    }

    /// The client calls go through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// `request` under this model's id (it names no model).
    fn named(&self, request: &ModelRequest) -> ModelRequest {
        let mut named = request.clone();
        named.model.clone_from(&self.id);
        named
    }
}

#[async_trait]
impl LanguageModel for ClientModel {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn provider_name(&self) -> &str {
        provider_name(&self.client)
    }

    fn kind(&self) -> Option<ProviderKind> {
        Some(self.client.kind())
    }

    fn server_address(&self) -> Option<(&str, Option<u16>)> {
        self.client.server()
    }

    async fn generate(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelResponse, Error> {
        if request.model.is_empty() {
            return self.client.generate_in(&self.named(request), state).await;
        }
        self.client.generate_in(request, state).await
    }

    async fn stream(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelStream, Error> {
        if request.model.is_empty() {
            return self.client.stream_in(&self.named(request), state).await;
        }
        self.client.stream_in(request, state).await
    }
}

/// `gen_ai.provider.name` for a client (the conventions' well-known values where one applies).
fn provider_name(client: &Client) -> &'static str {
    match (client.provider_id(), client.kind()) {
        ("azure" | "azure-responses", _) => "azure.ai.openai",
        ("bedrock", _) => "aws.bedrock",
        ("vertex" | "vertex-anthropic", _) => "gcp.vertex_ai",
        (_, ProviderKind::OpenAiResponses) | ("openai-chat", _) => "openai",
        (_, ProviderKind::Anthropic) => "anthropic",
        (_, ProviderKind::Gemini) => "gcp.gemini",
        ("mistral", _) => "mistral_ai",
        ("xai", _) => "x_ai",
        (other, _) => other,
    }
}
