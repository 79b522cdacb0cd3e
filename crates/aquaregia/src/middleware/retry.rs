//! [`Retry`]: a model that tries again on rate limits, overload and outages.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use tokio::time::Instant;

use crate::error::Error;
use crate::http::with_retries_outside;
use crate::model::{LanguageModel, ModelRequest, ModelResponse, ModelState, ModelStream};

/// When and how often [`Retry`] tries a call again: attempts, total time, backoff, the longest
/// `Retry-After` it waits for, and an optional [`RetryBudget`] shared between calls.
///
/// The defaults: 4 attempts, at most 2 minutes from the first attempt, backoff from 500 ms
/// doubling up to 30 s, a provider's `Retry-After` honoured up to 60 s, no shared budget.
///
/// ```
/// use std::time::Duration;
/// use aquaregia::{RetryBudget, RetryPolicy};
///
/// let policy = RetryPolicy::new()
///     .max_attempts(6)
///     .max_elapsed(Duration::from_secs(300))
///     .budget(RetryBudget::new(10, 0.1));
/// assert_eq!(policy.attempts(), 6);
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct RetryPolicy {
    max_attempts: u32,
    max_elapsed: Option<Duration>,
    initial_backoff: Duration,
    max_backoff: Duration,
    max_retry_after: Duration,
    budget: Option<RetryBudget>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            max_elapsed: Some(Duration::from_secs(120)),
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            budget: None,
        }
    }
}

impl RetryPolicy {
    /// The default policy (see the type's docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// The most attempts per call, the first included (at least 1; default 4).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// The attempts per call this policy allows, the first included.
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// No retry whose wait would end later than `elapsed` after the call's first attempt
    /// (default 2 minutes); `None` for no limit but the attempts.
    pub fn max_elapsed(mut self, elapsed: impl Into<Option<Duration>>) -> Self {
        self.max_elapsed = elapsed.into();
        self
    }

    /// The backoff before the first retry, doubled for each next one (default 500 ms); each
    /// wait is scaled by a random factor between 0.5 and 1 (jitter), so clients that failed
    /// together do not retry together.
    pub fn initial_backoff(mut self, backoff: Duration) -> Self {
        self.initial_backoff = backoff;
        self
    }

    /// The longest backoff (default 30 s).
    pub fn max_backoff(mut self, backoff: Duration) -> Self {
        self.max_backoff = backoff;
        self
    }

    /// The longest `Retry-After` honoured (default 60 s): a provider asking for a longer wait
    /// gets its error returned at once, rather than a call that hangs for minutes.
    pub fn max_retry_after(mut self, wait: Duration) -> Self {
        self.max_retry_after = wait;
        self
    }

    /// Draws every retry from `budget`, which other policies (and other models) may share:
    /// when many calls fail together, retries stop before they multiply the load.
    pub fn budget(mut self, budget: RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The wait before retry number `retry` (from 1) after `error`, `elapsed` after the first
    /// attempt; `None` when the call must fail with `error`.
    fn wait(&self, retry: u32, error: &Error, elapsed: Duration) -> Option<Duration> {
        if !error.is_retryable() {
            return None;
        }
        // Every retryable failure draws on the budget, the last attempt's too.
        let budget_allows = self.budget.as_ref().is_none_or(RetryBudget::withdraw);
        if !budget_allows || retry >= self.max_attempts {
            return None;
        }
        let wait = match error.retry_after() {
            Some(asked) if asked > self.max_retry_after => return None,
            Some(asked) => asked,
            None => {
                let doubled = self
                    .initial_backoff
                    .saturating_mul(1u32 << (retry - 1).min(20));
                doubled
                    .min(self.max_backoff)
                    .mul_f64(0.5 + fastrand::f64() * 0.5)
            }
        };
        if self
            .max_elapsed
            .is_some_and(|max| elapsed.saturating_add(wait) > max)
        {
            return None;
        }
        Some(wait)
    }
}

/// A retry budget shared by every [`RetryPolicy`] (and so every model) it is given to: gRPC's
/// retry throttling. It holds up to `max_tokens` tokens, starting full; each failed attempt
/// takes one, each success gives back `token_ratio`; while it holds half of `max_tokens` or
/// less, no call retries. A provider that keeps failing thus sees about one attempt per call
/// rather than `max_attempts`, and retries resume as calls succeed again. Cheap to clone (the
/// clones share the tokens).
///
/// ```
/// use aquaregia::RetryBudget;
/// let budget = RetryBudget::new(10, 0.1);
/// assert_eq!(budget.tokens(), 10.0);
/// ```
#[derive(Clone)]
pub struct RetryBudget {
    inner: Arc<BudgetInner>,
}

struct BudgetInner {
    max_tokens: f64,
    token_ratio: f64,
    tokens: Mutex<f64>,
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("max_tokens", &self.inner.max_tokens)
            .field("token_ratio", &self.inner.token_ratio)
            .field("tokens", &self.tokens())
            .finish()
    }
}

impl RetryBudget {
    /// A full budget of `max_tokens` tokens (at least 1), refilled by `token_ratio` (clamped
    /// to 0..=1) per successful call.
    pub fn new(max_tokens: u32, token_ratio: f64) -> Self {
        let max_tokens = f64::from(max_tokens.max(1));
        let token_ratio = if token_ratio.is_finite() {
            token_ratio.clamp(0.0, 1.0)
        } else {
            0.0
        };
        Self {
            inner: Arc::new(BudgetInner {
                max_tokens,
                token_ratio,
                tokens: Mutex::new(max_tokens),
            }),
        }
    }

    /// The tokens left.
    pub fn tokens(&self) -> f64 {
        *crate::sync::lock(&self.inner.tokens)
    }

    /// Takes a failed attempt's token; `true` when a retry is still allowed.
    fn withdraw(&self) -> bool {
        let mut tokens = crate::sync::lock(&self.inner.tokens);
        *tokens = (*tokens - 1.0).max(0.0);
        *tokens > self.inner.max_tokens / 2.0
    }

    /// Gives back a success's share.
    fn deposit(&self) {
        let mut tokens = crate::sync::lock(&self.inner.tokens);
        *tokens = (*tokens + self.inner.token_ratio).min(self.inner.max_tokens);
    }
}

/// A [`LanguageModel`] that tries a call again when it fails in a way that may pass: HTTP 408,
/// 429 and 5xx, timeouts, connection failures, a provider's overload or rate-limit stream
/// error ([`Error::is_retryable`]). Any other error (400, 401, 403, 404, 422...) is returned
/// at once. Waits follow the provider's `Retry-After` ([`Error::retry_after`]) when it sent
/// one, otherwise exponential backoff with jitter, within the [`RetryPolicy`].
///
/// A streamed call is retried while opening the stream and until its first event: an error
/// after an event reached the caller ends the stream, since the caller already showed part of
/// an answer.
///
/// The calls it makes turn the [`Client`](crate::Client)'s own retries off
/// ([`ClientBuilder::max_retries`](crate::ClientBuilder::max_retries)): a wrapped client makes
/// one attempt per call, so `max_attempts` is the number of requests a call sends, not a
/// multiple of it. (A model of your own that spawns the request onto another task keeps its
/// own retries.) The wrapper answers to its model's id, provider, window and price.
///
/// ```no_run
/// # fn demo() -> Result<(), aquaregia::Error> {
/// use std::sync::Arc;
/// use aquaregia::{AgentBuilder, Client, LanguageModelExt, RetryPolicy};
///
/// let model = Client::anthropic()
///     .build()?
///     .model("claude-sonnet-4-5")
///     .with_retry(RetryPolicy::new().max_attempts(5));
/// let agent = AgentBuilder::new(Arc::new(model)).build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Retry {
    inner: Arc<dyn LanguageModel>,
    policy: RetryPolicy,
}

impl Retry {
    /// Calls `inner`, retrying as `policy` says.
    pub fn new(inner: Arc<dyn LanguageModel>, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }

    /// The policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The model the calls go to.
    pub fn inner(&self) -> &Arc<dyn LanguageModel> {
        &self.inner
    }

    /// Settles a failed attempt: the wait before the next one, or the error to return.
    async fn after_failure(&self, retry: u32, error: Error, started: Instant) -> Result<(), Error> {
        match self.policy.wait(retry, &error, started.elapsed()) {
            Some(wait) => {
                tracing::debug!(
                    model = self.inner.model_id(),
                    retry,
                    ?wait,
                    %error,
                    "model call failed; retrying"
                );
                tokio::time::sleep(wait).await;
                Ok(())
            }
            None => Err(error),
        }
    }

    fn succeeded(&self) {
        if let Some(budget) = &self.policy.budget {
            budget.deposit();
        }
    }
}

#[async_trait]
impl LanguageModel for Retry {
    forward_model_description!(inner);

    async fn generate(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelResponse, Error> {
        let started = Instant::now();
        let mut retry = 1;
        loop {
            match with_retries_outside(self.inner.generate(request, state)).await {
                Ok(response) => {
                    self.succeeded();
                    return Ok(response);
                }
                Err(error) => self.after_failure(retry, error, started).await?,
            }
            retry += 1;
        }
    }

    async fn stream(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelStream, Error> {
        let started = Instant::now();
        let mut retry = 1;
        loop {
            let error = match with_retries_outside(self.inner.stream(request, state)).await {
                Ok(mut stream) => match stream.next().await {
                    Some(Err(error)) => error,
                    Some(Ok(first)) => {
                        self.succeeded();
                        return Ok(Box::pin(
                            futures::stream::once(async { Ok(first) }).chain(stream),
                        ));
                    }
                    // Nothing to retry: the caller sees the stream end without an answer.
                    None => return Ok(stream),
                },
                Err(error) => error,
            };
            self.after_failure(retry, error, started).await?;
            retry += 1;
        }
    }
}
