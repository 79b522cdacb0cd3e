//! [`ScriptedModel`]: a [`LanguageModel`] that answers from a script, in-process.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::watch;

use crate::error::Error;
use crate::message::{ContentPart, Message, Role, ToolCall};
use crate::model::ProviderKind;
use crate::model::{
    FinishReason, LanguageModel, ModelRequest, ModelResponse, ModelState, ModelStream, StreamEvent,
    Usage, response_events,
};
use crate::pricing::ModelPrice;

/// One scripted answer of a [`ScriptedModel`].
#[non_exhaustive]
#[derive(Debug)]
pub enum ScriptedReply {
    /// A whole answer. A streamed call gets it as events: the reasoning and text of each
    /// part, a start and one delta per tool call, then [`StreamEvent::Finish`].
    Response(ModelResponse),
    /// Exactly these stream events (an error among them ends the stream there). A call that
    /// is not streamed gets the response of the `Finish` event, or the first error.
    Events(Vec<Result<StreamEvent, Error>>),
    /// These stream events, then a stream that never ends (a model that stalls mid-answer).
    /// A call that is not streamed never answers.
    EventsThenHang(Vec<StreamEvent>),
    /// The call fails with this error.
    Error(Error),
    /// The call never answers (until it is cancelled).
    Hang,
}

impl ScriptedReply {
    /// A text answer (finish reason [`FinishReason::Stop`], no usage).
    pub fn text(text: impl Into<String>) -> Self {
        Self::Response(ModelResponse::new(
            Message::assistant(text),
            FinishReason::Stop,
        ))
    }

    /// An answer calling one tool (finish reason [`FinishReason::ToolCalls`], no usage).
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self::tool_calls([(id, name, arguments)])
    }

    /// An answer calling these tools, `(id, name, arguments)`, in order.
    pub fn tool_calls<I, S, N>(calls: I) -> Self
    where
        I: IntoIterator<Item = (S, N, Value)>,
        S: Into<String>,
        N: Into<String>,
    {
        let parts = calls
            .into_iter()
            .map(|(id, name, arguments)| {
                ContentPart::ToolCall(ToolCall {
                    id: id.into(),
                    name: name.into(),
                    arguments,
                })
            })
            .collect();
        Self::Response(ModelResponse::new(
            Message::new(Role::Assistant, parts),
            FinishReason::ToolCalls,
        ))
    }

    /// Sets the usage of the answer ([`Response`](Self::Response), or the `Finish` event of
    /// [`Events`](Self::Events)); other replies are left as they are.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        match &mut self {
            Self::Response(response) => response.usage = usage,
            Self::Events(events) => {
                for event in events {
                    if let Ok(StreamEvent::Finish(response)) = event {
                        response.usage = usage;
                    }
                }
            }
            _ => {}
        }
        self
    }

    /// Sets the finish reason of a [`Response`](Self::Response).
    #[must_use]
    pub fn with_finish_reason(mut self, reason: FinishReason) -> Self {
        if let Self::Response(response) = &mut self {
            response.finish_reason = reason;
        }
        self
    }
}

impl From<ModelResponse> for ScriptedReply {
    fn from(response: ModelResponse) -> Self {
        Self::Response(response)
    }
}

impl From<Error> for ScriptedReply {
    fn from(error: Error) -> Self {
        Self::Error(error)
    }
}

/// A call a [`ScriptedModel`] received.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct ScriptedCall {
    /// The request, as the model was given it.
    pub request: ModelRequest,
    /// Whether it was a streamed call ([`LanguageModel::stream`]).
    pub streamed: bool,
}

type ReplyFn = dyn Fn() -> ScriptedReply + Send + Sync;

struct Script {
    replies: VecDeque<ScriptedReply>,
    /// Answers once the replies are used up.
    repeat: Option<Arc<ReplyFn>>,
    calls: Vec<ScriptedCall>,
}

struct Shared {
    script: Mutex<Script>,
    /// How many calls arrived; waited on by [`ScriptedModel::wait_calls`].
    call_count: watch::Sender<usize>,
}

/// A [`LanguageModel`] that answers from a script, in-process: for testing code that runs an
/// agent without any HTTP (feature `test-utils`).
///
/// Each call takes the next [`ScriptedReply`], in the order they were added, and records the
/// request it was given ([`calls`](Self::calls), [`requests`](Self::requests)). Once the script
/// is used up, calls get the [`repeat_with`](Self::repeat_with) reply, or fail with an
/// [`Error::InvalidRequest`] saying so. Clones share the script and the record (keep one to
/// inspect what an agent sent); each keeps the settings (id, provider...) it was cloned with.
///
/// ```
/// use aquaregia::{AgentBuilder, test_utils::ScriptedModel, tool};
/// use serde_json::json;
///
/// # async fn demo() -> Result<(), aquaregia::Error> {
/// let model = ScriptedModel::new()
///     .tool_call("call_1", "add", json!({"a": 2, "b": 3}))
///     .text("5");
/// let add = tool("add").execute_raw(|args| async move {
///     Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
/// });
/// let agent = AgentBuilder::new(std::sync::Arc::new(model.clone())).tool(add).build()?;
/// assert_eq!(agent.run("2 + 3?").await?.text, "5");
/// assert_eq!(model.requests().len(), 2);
/// # Ok(()) }
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(demo()).unwrap();
/// ```
#[derive(Clone)]
pub struct ScriptedModel {
    id: String,
    provider: String,
    kind: Option<ProviderKind>,
    context_window: Option<u64>,
    price: Option<ModelPrice>,
    shared: Arc<Shared>,
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let script = self.script();
        f.debug_struct("ScriptedModel")
            .field("id", &self.id)
            .field("provider", &self.provider)
            .field("replies_left", &script.replies.len())
            .field("calls", &script.calls.len())
            .finish_non_exhaustive()
    }
}

impl Default for ScriptedModel {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedModel {
    /// A model with id `scripted-model`, provider `scripted`, and an empty script.
    pub fn new() -> Self {
        let (call_count, _) = watch::channel(0);
        Self {
            id: "scripted-model".to_owned(),
            provider: "scripted".to_owned(),
            kind: None,
            context_window: None,
            price: None,
            shared: Arc::new(Shared {
                script: Mutex::new(Script {
                    replies: VecDeque::new(),
                    repeat: None,
                    calls: Vec::new(),
                }),
                call_count,
            }),
        }
    }

    /// Sets the model id ([`LanguageModel::model_id`]).
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Sets the provider name ([`LanguageModel::provider_name`]).
    #[must_use]
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = provider.into();
        self
    }

    /// Sets the wire API whose token rules estimates follow ([`LanguageModel::kind`]).
    #[must_use]
    pub fn kind(mut self, kind: ProviderKind) -> Self {
        self.kind = Some(kind);
        self
    }

    /// Sets the context window ([`LanguageModel::context_window`]).
    #[must_use]
    pub fn context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Sets the price ([`LanguageModel::price`]).
    #[must_use]
    pub fn price(mut self, price: ModelPrice) -> Self {
        self.price = Some(price);
        self
    }

    /// Adds a reply to the script.
    #[must_use]
    pub fn reply(self, reply: impl Into<ScriptedReply>) -> Self {
        self.push(reply);
        self
    }

    /// Adds a reply to the script of a model already shared (by a clone in an agent).
    pub fn push(&self, reply: impl Into<ScriptedReply>) {
        self.script().replies.push_back(reply.into());
    }

    /// Adds a text answer ([`ScriptedReply::text`]).
    #[must_use]
    pub fn text(self, text: impl Into<String>) -> Self {
        self.reply(ScriptedReply::text(text))
    }

    /// Adds an answer calling one tool ([`ScriptedReply::tool_call`]).
    #[must_use]
    pub fn tool_call(
        self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> Self {
        self.reply(ScriptedReply::tool_call(id, name, arguments))
    }

    /// Adds a failing call ([`ScriptedReply::Error`]).
    #[must_use]
    pub fn error(self, error: Error) -> Self {
        self.reply(ScriptedReply::Error(error))
    }

    /// Answers every call after the script with what `reply` makes.
    #[must_use]
    pub fn repeat_with(self, reply: impl Fn() -> ScriptedReply + Send + Sync + 'static) -> Self {
        self.script().repeat = Some(Arc::new(reply));
        self
    }

    /// Every call received so far, in order.
    pub fn calls(&self) -> Vec<ScriptedCall> {
        self.script().calls.clone()
    }

    /// The requests of every call received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.script()
            .calls
            .iter()
            .map(|call| call.request.clone())
            .collect()
    }

    /// How many calls were received so far.
    pub fn call_count(&self) -> usize {
        *self.shared.call_count.borrow()
    }

    /// How many scripted replies are left.
    pub fn replies_left(&self) -> usize {
        self.script().replies.len()
    }

    /// Waits until at least `count` calls were received.
    pub async fn wait_calls(&self, count: usize) {
        let mut calls = self.shared.call_count.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = calls.wait_for(|received| *received >= count).await;
    }

    fn script(&self) -> MutexGuard<'_, Script> {
        crate::sync::lock(&self.shared.script)
    }

    /// Records the call and takes its reply.
    fn next(&self, request: &ModelRequest, streamed: bool) -> ScriptedReply {
        let reply = {
            let mut script = self.script();
            script.calls.push(ScriptedCall {
                request: request.clone(),
                streamed,
            });
            let number = script.calls.len();
            script
                .replies
                .pop_front()
                .unwrap_or_else(|| match &script.repeat {
                    Some(repeat) => repeat(),
                    None => ScriptedReply::Error(Error::InvalidRequest(format!(
                        "the scripted model has no reply left for call {number}"
                    ))),
                })
        };
        self.shared.call_count.send_modify(|count| *count += 1);
        reply
    }
}

#[async_trait]
impl LanguageModel for ScriptedModel {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn provider_name(&self) -> &str {
        &self.provider
    }

    fn kind(&self) -> Option<ProviderKind> {
        self.kind
    }

    fn context_window(&self) -> Option<u64> {
        self.context_window
    }

    fn price(&self) -> Option<ModelPrice> {
        self.price
    }

    async fn generate(
        &self,
        request: &ModelRequest,
        _state: &mut ModelState,
    ) -> Result<ModelResponse, Error> {
        match self.next(request, false) {
            ScriptedReply::Response(response) => Ok(response),
            ScriptedReply::Error(error) => Err(error),
            ScriptedReply::Events(events) => {
                for event in events {
                    match event {
                        Ok(StreamEvent::Finish(response)) => return Ok(response),
                        Ok(_) => {}
                        Err(error) => return Err(error),
                    }
                }
                Err(Error::InvalidRequest(
                    "the scripted events have no Finish event".into(),
                ))
            }
            ScriptedReply::EventsThenHang(_) | ScriptedReply::Hang => {
                futures::future::pending().await
            }
        }
    }

    async fn stream(
        &self,
        request: &ModelRequest,
        _state: &mut ModelState,
    ) -> Result<ModelStream, Error> {
        match self.next(request, true) {
            ScriptedReply::Response(response) => Ok(Box::pin(futures::stream::iter(
                response_events(response).into_iter().map(Ok),
            ))),
            ScriptedReply::Error(error) => Err(error),
            ScriptedReply::Events(events) => Ok(Box::pin(futures::stream::iter(events))),
            ScriptedReply::EventsThenHang(events) => {
                use futures::StreamExt;
                Ok(Box::pin(
                    futures::stream::iter(events.into_iter().map(Ok))
                        .chain(futures::stream::pending()),
                ))
            }
            ScriptedReply::Hang => futures::future::pending().await,
        }
    }
}
