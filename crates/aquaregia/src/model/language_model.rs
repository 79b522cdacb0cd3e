//! [`LanguageModel`]: the seam between the agent loop and whatever answers its requests.

use std::any::Any;
use std::fmt;

use async_trait::async_trait;

use super::{ModelRequest, ModelResponse, ModelStream, StreamEvent};
use crate::error::Error;
use crate::message::ContentPart;
use crate::model::ProviderKind;
use crate::pricing::ModelPrice;

/// A model the agent loop can call: one request in, one answer out, whole or streamed.
///
/// This is the seam between [`Agent`](crate::Agent) and providers. aquaregia's own providers
/// implement it through [`Client::model`](crate::Client::model); implement it yourself to add a
/// provider, to wrap models ([`Fallback`](crate::Fallback)), or to script one in tests
/// (`ScriptedModel`, feature `test-utils`). [`AgentBuilder::new`](crate::AgentBuilder::new)
/// runs an agent on any `Arc<dyn LanguageModel>`.
///
/// `request.model` names the model to ask for: the agent sets it to
/// [`model_id`](Self::model_id), or to what a `prepare_step` chose for that step. Besides the
/// calls, a model says what the run's spans, token estimates, context window and costs need to
/// know about it; every such method but [`model_id`](Self::model_id) and
/// [`provider_name`](Self::provider_name) has a default.
///
/// The trait is object-safe: its async methods are written with
/// [`async_trait`](crate::async_trait), re-exported by this crate, so each call costs one boxed
/// future (as aquaregia's own providers always have).
///
/// ```
/// use aquaregia::{
///     Error, FinishReason, LanguageModel, Message, ModelRequest, ModelResponse, ModelState,
///     async_trait,
/// };
///
/// /// Answers every request with the text of its last message.
/// #[derive(Debug)]
/// struct Echo;
///
/// #[async_trait]
/// impl LanguageModel for Echo {
///     fn model_id(&self) -> &str {
///         "echo-1"
///     }
///
///     fn provider_name(&self) -> &str {
///         "echo"
///     }
///
///     async fn generate(
///         &self,
///         request: &ModelRequest,
///         _state: &mut ModelState,
///     ) -> Result<ModelResponse, Error> {
///         let last = request.messages.last().map(Message::text).unwrap_or_default();
///         Ok(ModelResponse::new(Message::assistant(last), FinishReason::Stop))
///     }
/// }
///
/// # async fn demo() -> Result<(), aquaregia::Error> {
/// let agent = aquaregia::AgentBuilder::new(std::sync::Arc::new(Echo)).build()?;
/// assert_eq!(agent.run("hello").await?.text, "hello");
/// # Ok(()) }
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(demo()).unwrap();
/// ```
#[async_trait]
pub trait LanguageModel: Send + Sync + fmt::Debug {
    /// The model's id, as requests name it (`gpt-4o-mini`, `claude-sonnet-4-5`...). An agent
    /// puts it in every request's `model` and in its spans, and looks prices and the context
    /// window up by it.
    fn model_id(&self) -> &str;

    /// The provider's name as the GenAI spans record it (`gen_ai.provider.name`): the
    /// conventions' well-known values where one applies (`openai`, `anthropic`,
    /// `gcp.gemini`...), otherwise a short name of your own.
    fn provider_name(&self) -> &str;

    /// The wire API this model speaks, when it is one of aquaregia's: token estimates count
    /// images the way that provider bills them. `None` (the default) counts them as OpenAI
    /// does.
    fn kind(&self) -> Option<ProviderKind> {
        None
    }

    /// The host and port requests go to, for the spans' `server.address` and `server.port`
    /// (default: none recorded).
    fn server_address(&self) -> Option<(&str, Option<u16>)> {
        None
    }

    /// The model's context window in tokens, when the model knows it. An agent uses, in
    /// order: [`AgentBuilder::context_window`](crate::AgentBuilder::context_window), this,
    /// then [`context_window_for`](crate::context_window_for) of the model id.
    fn context_window(&self) -> Option<u64> {
        None
    }

    /// What this model's tokens cost, when the model knows it. An agent's
    /// [`PriceTable`](crate::PriceTable) wins over it.
    fn price(&self) -> Option<ModelPrice> {
        None
    }

    /// One model call, waiting for the whole answer.
    ///
    /// `state` is the same value for every call of one agent run (a fresh one for each run),
    /// for what the model may keep from call to call; aquaregia's providers keep the encoded
    /// conversation there, so each step encodes only what is new. Use it or ignore it.
    async fn generate(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelResponse, Error>;

    /// One model call, streamed: the stream ends with [`StreamEvent::Finish`] or an error.
    ///
    /// The default calls [`generate`](Self::generate) and streams its answer as events: the
    /// reasoning and text of each part, each tool call as a start and one delta, then
    /// `Finish`.
    async fn stream(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelStream, Error> {
        let response = self.generate(request, state).await?;
        Ok(Box::pin(futures::stream::iter(
            response_events(response).into_iter().map(Ok),
        )))
    }
}

/// A whole answer as the stream events that would have brought it: reasoning and text deltas
/// for each part, a start and one delta for each tool call, then [`StreamEvent::Finish`].
pub(crate) fn response_events(response: ModelResponse) -> Vec<StreamEvent> {
    let mut events = Vec::with_capacity(response.message.content.len() + 1);
    for part in &response.message.content {
        match part {
            ContentPart::Text { text } if !text.is_empty() => {
                events.push(StreamEvent::TextDelta(text.clone()));
            }
            ContentPart::Reasoning(reasoning) if !reasoning.text.is_empty() => {
                events.push(StreamEvent::ReasoningDelta(reasoning.text.clone()));
            }
            ContentPart::ToolCall(call) => {
                events.push(StreamEvent::ToolCallStart {
                    id: call.id.clone(),
                    name: call.name.clone(),
                });
                events.push(StreamEvent::ToolCallDelta {
                    id: call.id.clone(),
                    arguments: call.arguments.to_string(),
                });
            }
            _ => {}
        }
    }
    events.push(StreamEvent::Finish(response));
    events
}

/// What a [`LanguageModel`] keeps across the calls of one agent run: opaque to the agent,
/// which makes one per run and passes it to every call of that run.
///
/// A model stores one value of its own type with [`put`](Self::put) and takes it back with
/// [`take`](Self::take); taking it out for the length of a call keeps the call free of borrows
/// of the state. A call that is cancelled midway loses the value, so keep only what can be
/// rebuilt (a cache).
///
/// ```
/// let mut state = aquaregia::ModelState::new();
/// assert_eq!(state.take::<Vec<u8>>(), None);
/// state.put(vec![1u8, 2]);
/// assert_eq!(state.take::<String>(), None, "another type: nothing, and the value is dropped");
/// assert_eq!(state.take::<Vec<u8>>(), None);
/// ```
#[derive(Default)]
pub struct ModelState {
    value: Option<Box<dyn Any + Send>>,
}

impl fmt::Debug for ModelState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelState")
            .field("holds_value", &self.value.is_some())
            .finish()
    }
}

impl ModelState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the stored value out when it is a `T`; otherwise returns `None` and drops what
    /// the state held (another model's value).
    pub fn take<T: Any + Send>(&mut self) -> Option<T> {
        self.value
            .take()
            .and_then(|value| value.downcast::<T>().ok())
            .map(|value| *value)
    }

    /// Stores `value`, replacing what the state held.
    pub fn put<T: Any + Send>(&mut self, value: T) {
        self.value = Some(Box::new(value));
    }

    /// Whether the state holds a value.
    pub fn is_empty(&self) -> bool {
        self.value.is_none()
    }
}
