//! [`Fallback`]: the next model when one fails in a way another may not.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;

use super::{LanguageModel, ModelRequest, ModelResponse, ModelState, ModelStream};
use crate::context::context_window_for;
use crate::error::Error;
use crate::model::ProviderKind;
use crate::pricing::ModelPrice;

/// A [`LanguageModel`] made of several: each call goes to the first model, and on to the next
/// when one fails with a retryable error ([`Error::is_retryable`]: HTTP 408, 429 and 5xx,
/// timeouts, connection failures, a provider's overload or rate-limit stream error). Any other
/// error, a 4xx rejection of the request above all, is returned at once: the next model would
/// be sent the same request. When every model fails, the last error is returned.
///
/// Every call starts again at the first model. The models after the first are asked for their
/// own model id ([`LanguageModel::model_id`]); each keeps its own per-run state. A streamed
/// call falls back only while opening the stream: once events flow, an error ends the stream.
///
/// The fallback model answers to the first model's id, provider and price (spans and costs
/// name the first model; [`ModelResponse::model`] says who answered), and to the smallest
/// context window among its models, so a request fits whichever model gets it.
///
/// ```no_run
/// # fn demo() -> Result<(), aquaregia::Error> {
/// use std::sync::Arc;
/// use aquaregia::{AgentBuilder, Client, Fallback};
///
/// let primary = Client::anthropic().build()?.model("claude-sonnet-4-5");
/// let backup = Client::openai().build()?.model("gpt-5-mini");
/// let model = Fallback::new(Arc::new(primary)).or(Arc::new(backup));
/// let agent = AgentBuilder::new(Arc::new(model)).build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Fallback {
    primary: Arc<dyn LanguageModel>,
    others: Vec<Arc<dyn LanguageModel>>,
}

impl Fallback {
    /// Calls `primary`, and nothing else until [`or`](Self::or) adds a model to fall back to.
    pub fn new(primary: Arc<dyn LanguageModel>) -> Self {
        Self {
            primary,
            others: Vec::new(),
        }
    }

    /// Adds a model to try after the ones already there.
    #[must_use]
    pub fn or(mut self, model: Arc<dyn LanguageModel>) -> Self {
        self.others.push(model);
        self
    }

    /// The models, in the order they are tried.
    pub fn models(&self) -> impl Iterator<Item = &Arc<dyn LanguageModel>> {
        std::iter::once(&self.primary).chain(&self.others)
    }

    /// The request for model `index`: as it came for the first, under the model's own id for
    /// the others.
    fn request_for<'a>(
        request: &'a ModelRequest,
        index: usize,
        model: &dyn LanguageModel,
    ) -> Cow<'a, ModelRequest> {
        if index == 0 || request.model == model.model_id() {
            return Cow::Borrowed(request);
        }
        let mut own = request.clone();
        model.model_id().clone_into(&mut own.model);
        Cow::Owned(own)
    }

    /// Tries the models in order until one answers or fails for good.
    async fn call<T, F>(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
        call: F,
    ) -> Result<T, Error>
    where
        F: for<'a> Fn(
            &'a dyn LanguageModel,
            &'a ModelRequest,
            &'a mut ModelState,
        ) -> futures::future::BoxFuture<'a, Result<T, Error>>,
    {
        let count = 1 + self.others.len();
        let mut states = state.take::<Vec<ModelState>>().unwrap_or_default();
        states.resize_with(count, ModelState::default);
        let mut models = self.models().zip(&mut states).enumerate().peekable();
        let outcome = loop {
            let Some((index, (model, model_state))) = models.next() else {
                // Not reached: the loop ends at the last model.
                break Err(Error::InvalidRequest("the fallback has no model".into()));
            };
            let request = Self::request_for(request, index, &**model);
            let outcome = call(&**model, &request, model_state).await;
            match (&outcome, models.peek()) {
                (Err(error), Some((_, (next, _)))) if error.is_retryable() => {
                    tracing::warn!(
                        model = model.model_id(),
                        next = next.model_id(),
                        %error,
                        "model failed; falling back to the next one"
                    );
                }
                _ => break outcome,
            }
        };
        drop(models);
        state.put(states);
        outcome
    }
}

#[async_trait]
impl LanguageModel for Fallback {
    fn model_id(&self) -> &str {
        self.primary.model_id()
    }

    fn provider_name(&self) -> &str {
        self.primary.provider_name()
    }

    fn kind(&self) -> Option<ProviderKind> {
        self.primary.kind()
    }

    fn server_address(&self) -> Option<(&str, Option<u16>)> {
        self.primary.server_address()
    }

    fn context_window(&self) -> Option<u64> {
        self.models()
            .map(|model| {
                model
                    .context_window()
                    .unwrap_or_else(|| context_window_for(model.model_id()))
            })
            .min()
    }

    fn price(&self) -> Option<ModelPrice> {
        self.primary.price()
    }

    async fn generate(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelResponse, Error> {
        self.call(request, state, |model, request, state| {
            model.generate(request, state)
        })
        .await
    }

    async fn stream(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelStream, Error> {
        self.call(request, state, |model, request, state| {
            model.stream(request, state)
        })
        .await
    }
}
