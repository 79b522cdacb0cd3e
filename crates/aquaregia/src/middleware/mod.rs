//! Model middleware: wrappers that are [`LanguageModel`]s themselves, stacked with
//! [`LanguageModelExt`] (`model.with_rate_limit(..).with_retry(..)`): [`Retry`],
//! [`RateLimited`] and [`Cassette`] (record and replay).

/// The `LanguageModel` methods that describe a model (id, provider, kind, address, window,
/// price), forwarded to the wrapped model in field `$inner`: a wrapper that only changes how
/// calls are made is described as the model it wraps.
macro_rules! forward_model_description {
    ($inner:ident) => {
        fn model_id(&self) -> &str {
            self.$inner.model_id()
        }

        fn provider_name(&self) -> &str {
            self.$inner.provider_name()
        }

        fn kind(&self) -> Option<crate::model::ProviderKind> {
            self.$inner.kind()
        }

        fn server_address(&self) -> Option<(&str, Option<u16>)> {
            self.$inner.server_address()
        }

        fn context_window(&self) -> Option<u64> {
            self.$inner.context_window()
        }

        fn price(&self) -> Option<crate::pricing::ModelPrice> {
            self.$inner.price()
        }
    };
}

mod cassette;
mod rate_limit;
mod retry;

use std::sync::Arc;

pub use cassette::{Cassette, CassetteBuilder, CassetteMode};
pub use rate_limit::{RateLimited, RateLimiter, RateLimiterBuilder};
pub use retry::{Retry, RetryBudget, RetryPolicy};

use crate::model::LanguageModel;

/// Stacks middleware on any [`LanguageModel`]: each method wraps the model and returns the
/// wrapper, itself a `LanguageModel`, so calls chain. The last one added is the outermost:
/// in `model.with_rate_limit(limiter).with_retry(policy)` every retry passes the limiter.
///
/// For a model already behind an `Arc<dyn LanguageModel>`, use the wrappers' own `new`
/// ([`Retry::new`], [`RateLimited::new`]).
///
/// ```
/// use aquaregia::test_utils::ScriptedModel;
/// use aquaregia::{LanguageModel, LanguageModelExt, RateLimiter, RetryPolicy};
///
/// let limiter = RateLimiter::builder().requests_per_minute(60).build()?;
/// let model = ScriptedModel::new()
///     .with_rate_limit(limiter)
///     .with_retry(RetryPolicy::new().max_attempts(3));
/// assert_eq!(model.model_id(), "scripted-model");
/// # Ok::<(), aquaregia::Error>(())
/// ```
pub trait LanguageModelExt: LanguageModel + Sized + 'static {
    /// Retries this model's failed calls as `policy` says ([`Retry`]).
    fn with_retry(self, policy: RetryPolicy) -> Retry {
        Retry::new(Arc::new(self), policy)
    }

    /// Makes this model's calls wait for `limiter` ([`RateLimited`]).
    fn with_rate_limit(self, limiter: RateLimiter) -> RateLimited {
        RateLimited::new(Arc::new(self), limiter)
    }
}

impl<M: LanguageModel + 'static> LanguageModelExt for M {}
