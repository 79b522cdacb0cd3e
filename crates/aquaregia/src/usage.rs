//! [`Usage`]: the tokens a model call used.

use serde::{Deserialize, Serialize};

/// Token counts of one model call or a whole run, normalised across providers. Adds up across
/// steps with `+=` and `+`.
///
/// Every provider's numbers are mapped to the same meaning: `input_tokens` counts the whole
/// prompt, cache reads and writes included (Anthropic reports them apart: they are added back),
/// and `output_tokens` counts everything generated, reasoning included (Gemini reports thoughts
/// apart: they are added back). Price a `Usage` with [`Usage::cost`](Usage::cost).
///
/// ```
/// let usage = aquaregia::Usage::default();
/// assert_eq!(usage + usage, usage);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached ones (read or written) included.
    pub input_tokens: u64,
    /// Generated tokens, reasoning included.
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache (part of `input_tokens`).
    pub cached_input_tokens: u64,
    /// Prompt tokens written to the provider's cache (part of `input_tokens`): Anthropic's
    /// `cache_creation_input_tokens`, OpenAI's `cache_write_tokens`.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Generated tokens spent on reasoning (part of `output_tokens`).
    pub reasoning_tokens: u64,
}

impl Usage {
    /// `input_tokens` in and `output_tokens` out, nothing cached or reasoned.
    ///
    /// ```
    /// assert_eq!(aquaregia::Usage::new(10, 5).total_tokens(), 15);
    /// ```
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            ..Self::default()
        }
    }

    /// Input plus output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Prompt tokens that were neither read from nor written to a cache.
    pub fn uncached_input_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_sub(self.cached_input_tokens)
            .saturating_sub(self.cache_write_tokens)
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

impl std::ops::Add for Usage {
    type Output = Self;

    fn add(mut self, other: Self) -> Self {
        self += other;
        self
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::default(), |total, usage| total + usage)
    }
}
