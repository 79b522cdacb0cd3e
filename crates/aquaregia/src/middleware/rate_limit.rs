//! [`RateLimiter`] and [`RateLimited`]: requests and tokens per minute, kept on this side.

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use futures::Stream;
use tokio::time::Instant;

use crate::context::estimate_request_tokens;
use crate::error::Error;
use crate::model::{
    LanguageModel, ModelRequest, ModelResponse, ModelState, ModelStream, ProviderKind, StreamEvent,
};
use crate::usage::Usage;

const MINUTE: Duration = Duration::from_secs(60);

/// A client-side rate limit of requests per minute and tokens per minute, shared by every
/// model it is given to ([`RateLimited`], [`LanguageModelExt::with_rate_limit`]) and by its
/// clones: one limiter for all the agents that use one account's quota.
///
/// Each limit is a token bucket holding a minute's worth, refilled evenly over the minute. A
/// call takes one request and its estimated input tokens ([`estimate_request_tokens`]) before
/// it is sent, waiting until both buckets have them; calls wait in the order they came. When
/// the answer reports its usage, the estimate is corrected to the real input plus output
/// tokens: a call that used more leaves the bucket in debt, so later calls wait longer. A
/// call larger than the whole minute's tokens waits for a full bucket and takes it all.
///
/// Waiting is cancellable: drop the call (an agent's cancellation token does) and the tokens
/// it reserved go back. Time is tokio's, so tests can pause it.
///
/// (Not the `governor` crate: its buckets neither take back a reservation nor correct one
/// after the fact, and its clock is not tokio's.)
///
/// ```
/// use aquaregia::RateLimiter;
/// let limiter = RateLimiter::builder()
///     .requests_per_minute(500)
///     .tokens_per_minute(30_000)
///     .build()?;
/// # let _ = limiter;
/// # Ok::<(), aquaregia::Error>(())
/// ```
///
/// [`LanguageModelExt::with_rate_limit`]: crate::LanguageModelExt::with_rate_limit
#[derive(Clone)]
pub struct RateLimiter {
    inner: Arc<Mutex<Buckets>>,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let buckets = crate::sync::lock(&self.inner);
        f.debug_struct("RateLimiter")
            .field(
                "requests_per_minute",
                &buckets.requests.as_ref().map(|b| b.capacity),
            )
            .field(
                "tokens_per_minute",
                &buckets.tokens.as_ref().map(|b| b.capacity),
            )
            .finish()
    }
}

/// Builds a [`RateLimiter`]: [`RateLimiter::builder`].
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct RateLimiterBuilder {
    requests_per_minute: Option<u32>,
    tokens_per_minute: Option<u64>,
}

impl RateLimiterBuilder {
    /// At most this many requests per minute.
    pub fn requests_per_minute(mut self, requests: u32) -> Self {
        self.requests_per_minute = Some(requests);
        self
    }

    /// At most this many tokens (input and output) per minute.
    pub fn tokens_per_minute(mut self, tokens: u64) -> Self {
        self.tokens_per_minute = Some(tokens);
        self
    }

    /// The limiter.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when a limit is zero (no call could ever pass).
    pub fn build(self) -> Result<RateLimiter, Error> {
        if self.requests_per_minute == Some(0) || self.tokens_per_minute == Some(0) {
            return Err(Error::InvalidRequest(
                "a rate limit of zero lets no call through; leave the limit unset instead".into(),
            ));
        }
        let now = Instant::now();
        Ok(RateLimiter {
            inner: Arc::new(Mutex::new(Buckets {
                requests: self
                    .requests_per_minute
                    .map(|limit| Bucket::new(f64::from(limit), now)),
                tokens: self
                    .tokens_per_minute
                    .map(|limit| Bucket::new(limit as f64, now)),
            })),
        })
    }
}

struct Buckets {
    requests: Option<Bucket>,
    tokens: Option<Bucket>,
}

/// A token bucket that may go into debt: a reservation takes its tokens at once, and waits
/// until the level it left is paid back.
struct Bucket {
    capacity: f64,
    level: f64,
    updated: Instant,
}

impl Bucket {
    fn new(capacity: f64, now: Instant) -> Self {
        Self {
            capacity,
            level: capacity,
            updated: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.updated);
        self.level = (self.level + self.capacity * elapsed.as_secs_f64() / MINUTE.as_secs_f64())
            .min(self.capacity);
        self.updated = now;
    }

    /// Takes `amount` (at most the capacity) and returns how long until it is paid back.
    fn reserve(&mut self, amount: f64, now: Instant) -> (f64, Duration) {
        self.refill(now);
        let amount = amount.min(self.capacity);
        self.level -= amount;
        let wait = if self.level >= 0.0 {
            Duration::ZERO
        } else {
            MINUTE.mul_f64(-self.level / self.capacity)
        };
        (amount, wait)
    }

    /// Gives `amount` back (negative: takes it, as debt).
    fn adjust(&mut self, amount: f64, now: Instant) {
        self.refill(now);
        self.level = (self.level + amount).min(self.capacity);
    }
}

impl RateLimiter {
    /// A limiter with no limit yet: set them on the builder.
    pub fn builder() -> RateLimiterBuilder {
        RateLimiterBuilder::default()
    }

    /// Waits until a call estimated at `tokens` input tokens may go, and reserves it.
    async fn acquire(&self, tokens: u64) -> Permit {
        let now = Instant::now();
        let mut permit = Permit {
            limiter: self.clone(),
            requests: 0.0,
            tokens: 0.0,
            waiting: true,
        };
        let wait = {
            let mut buckets = crate::sync::lock(&self.inner);
            let mut wait = Duration::ZERO;
            if let Some(bucket) = &mut buckets.requests {
                let (taken, until) = bucket.reserve(1.0, now);
                permit.requests = taken;
                wait = wait.max(until);
            }
            if let Some(bucket) = &mut buckets.tokens {
                let (taken, until) = bucket.reserve(tokens as f64, now);
                permit.tokens = taken;
                wait = wait.max(until);
            }
            wait
        };
        if !wait.is_zero() {
            tracing::debug!(?wait, tokens, "rate limit: waiting before the model call");
            tokio::time::sleep(wait).await;
        }
        permit.waiting = false;
        permit
    }
}

/// A call's reservation: given back when the call is dropped while waiting, corrected to the
/// real usage once the answer reports it.
struct Permit {
    limiter: RateLimiter,
    requests: f64,
    tokens: f64,
    waiting: bool,
}

impl Permit {
    /// Corrects the tokens reserved to `usage` (input and output); a usage of zero (the
    /// provider reported none) keeps the estimate.
    fn settle(&mut self, usage: &Usage) {
        let used = usage.input_tokens.saturating_add(usage.output_tokens);
        if used == 0 {
            return;
        }
        let difference = self.tokens - used as f64;
        self.tokens = used as f64;
        let mut buckets = crate::sync::lock(&self.limiter.inner);
        if let Some(bucket) = &mut buckets.tokens {
            bucket.adjust(difference, Instant::now());
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.waiting {
            return;
        }
        let now = Instant::now();
        let mut buckets = crate::sync::lock(&self.limiter.inner);
        if let Some(bucket) = &mut buckets.requests {
            bucket.adjust(self.requests, now);
        }
        if let Some(bucket) = &mut buckets.tokens {
            bucket.adjust(self.tokens, now);
        }
    }
}

/// A [`LanguageModel`] whose calls pass a [`RateLimiter`] first: each waits until the
/// limiter's requests and tokens per minute allow it (see [`RateLimiter`] for how tokens are
/// estimated and corrected). Several models, and several agents, may share one limiter.
///
/// Under a [`Retry`](crate::Retry) (`model.with_rate_limit(..).with_retry(..)`), every attempt
/// passes the limiter.
///
/// ```no_run
/// # fn demo() -> Result<(), aquaregia::Error> {
/// use std::sync::Arc;
/// use aquaregia::{AgentBuilder, Client, LanguageModelExt, RateLimiter};
///
/// let limiter = RateLimiter::builder().requests_per_minute(50).tokens_per_minute(40_000).build()?;
/// let client = Client::anthropic().build()?;
/// let big = client.model("claude-sonnet-4-5").with_rate_limit(limiter.clone());
/// let small = client.model("claude-haiku-4-5").with_rate_limit(limiter);
/// let agent = AgentBuilder::new(Arc::new(big)).build()?;
/// # let _ = (agent, small);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RateLimited {
    inner: Arc<dyn LanguageModel>,
    limiter: RateLimiter,
}

impl RateLimited {
    /// Calls `inner` within `limiter`'s limits.
    pub fn new(inner: Arc<dyn LanguageModel>, limiter: RateLimiter) -> Self {
        Self { inner, limiter }
    }

    /// The limiter.
    pub fn limiter(&self) -> &RateLimiter {
        &self.limiter
    }

    /// The model the calls go to.
    pub fn inner(&self) -> &Arc<dyn LanguageModel> {
        &self.inner
    }

    async fn permit(&self, request: &ModelRequest) -> Permit {
        let kind = self.inner.kind().unwrap_or(ProviderKind::OpenAiChat);
        self.limiter
            .acquire(estimate_request_tokens(request, kind))
            .await
    }
}

#[async_trait]
impl LanguageModel for RateLimited {
    forward_model_description!(inner);

    async fn generate(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelResponse, Error> {
        let mut permit = self.permit(request).await;
        let response = self.inner.generate(request, state).await?;
        permit.settle(&response.usage);
        Ok(response)
    }

    async fn stream(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelStream, Error> {
        let permit = self.permit(request).await;
        let inner = self.inner.stream(request, state).await?;
        Ok(Box::pin(SettledStream { inner, permit }))
    }
}

/// A stream that corrects its call's reservation when the answer's usage arrives.
struct SettledStream {
    inner: ModelStream,
    permit: Permit,
}

impl Stream for SettledStream {
    type Item = Result<StreamEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let next = this.inner.as_mut().poll_next(cx);
        if let Poll::Ready(Some(Ok(StreamEvent::Finish(response)))) = &next {
            this.permit.settle(&response.usage);
        }
        next
    }
}
