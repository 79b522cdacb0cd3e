//! What tokens cost: [`ModelPrice`] per model, a [`PriceTable`] of them, and the [`Cost`] of a
//! [`Usage`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Usage;

/// One model's prices, in USD per million tokens.
///
/// Cached reads and cache writes cost the input price unless set.
///
/// ```
/// use aquaregia::ModelPrice;
/// // Claude Sonnet 4.5: $3 in, $15 out, $0.30 cache reads, $3.75 cache writes.
/// let price = ModelPrice::new(3.0, 15.0).cached_input(0.30).cache_write(3.75);
/// # let _ = price;
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelPrice {
    /// USD per million prompt tokens not served from a cache.
    pub input: f64,
    /// USD per million generated tokens (reasoning included).
    pub output: f64,
    /// USD per million prompt tokens read from the cache; the input price when `None`.
    pub cached_input: Option<f64>,
    /// USD per million prompt tokens written to the cache; the input price when `None`.
    pub cache_write: Option<f64>,
}

impl ModelPrice {
    /// Input and output prices, USD per million tokens.
    pub fn new(input: f64, output: f64) -> Self {
        Self {
            input,
            output,
            cached_input: None,
            cache_write: None,
        }
    }

    /// Sets the price of cached prompt tokens.
    #[must_use]
    pub fn cached_input(mut self, price: f64) -> Self {
        self.cached_input = Some(price);
        self
    }

    /// Sets the price of prompt tokens written to the cache.
    #[must_use]
    pub fn cache_write(mut self, price: f64) -> Self {
        self.cache_write = Some(price);
        self
    }
}

/// A cost in USD, split by what it paid for. Adds up with `+` and `+=`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// Prompt tokens not served from a cache.
    pub input: f64,
    /// Prompt tokens read from the cache.
    pub cached_input: f64,
    /// Prompt tokens written to the cache.
    pub cache_write: f64,
    /// Generated tokens.
    pub output: f64,
}

impl Cost {
    /// Everything together, in USD.
    pub fn total(&self) -> f64 {
        self.input + self.cached_input + self.cache_write + self.output
    }
}

impl std::ops::AddAssign for Cost {
    fn add_assign(&mut self, other: Self) {
        self.input += other.input;
        self.cached_input += other.cached_input;
        self.cache_write += other.cache_write;
        self.output += other.output;
    }
}

impl std::ops::Add for Cost {
    type Output = Self;

    fn add(mut self, other: Self) -> Self {
        self += other;
        self
    }
}

const PER_MILLION: f64 = 1_000_000.0;

/// Token counts stay far below 2^53, where `u64 as f64` starts rounding.
fn priced(tokens: u64, usd_per_million: f64) -> f64 {
    tokens as f64 * usd_per_million / PER_MILLION
}

impl Usage {
    /// What these tokens cost at `price`.
    ///
    /// ```
    /// use aquaregia::{ModelPrice, Usage};
    /// let mut usage = Usage::default();
    /// usage.input_tokens = 1_000_000;
    /// usage.output_tokens = 100_000;
    /// let cost = usage.cost(&ModelPrice::new(3.0, 15.0));
    /// assert!((cost.total() - 4.5).abs() < 1e-9);
    /// ```
    pub fn cost(&self, price: &ModelPrice) -> Cost {
        Cost {
            input: priced(self.uncached_input_tokens(), price.input),
            cached_input: priced(
                self.cached_input_tokens,
                price.cached_input.unwrap_or(price.input),
            ),
            cache_write: priced(
                self.cache_write_tokens,
                price.cache_write.unwrap_or(price.input),
            ),
            output: priced(self.output_tokens, price.output),
        }
    }
}

/// Prices by model id; give one to
/// [`AgentBuilder::price_table`](crate::AgentBuilder::price_table) to get costs with usage.
///
/// A model matches its exact id, or an id followed by a dated snapshot suffix
/// (`gpt-4o` prices `gpt-4o-2024-08-06`, `claude-sonnet-4-5` prices
/// `claude-sonnet-4-5-20250929`), but never another model of the family (`gpt-4o` does not
/// price `gpt-4o-mini`).
///
/// ```
/// use aquaregia::{ModelPrice, PriceTable};
/// let prices = PriceTable::new()
///     .with("gpt-4o-mini", ModelPrice::new(0.15, 0.60).cached_input(0.075))
///     .with("claude-sonnet-4-5", ModelPrice::new(3.0, 15.0));
/// assert!(prices.get("claude-sonnet-4-5-20250929").is_some());
/// assert!(prices.get("gpt-4o").is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PriceTable {
    prices: BTreeMap<String, ModelPrice>,
}

impl PriceTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a model's price.
    #[must_use]
    pub fn with(mut self, model: impl Into<String>, price: ModelPrice) -> Self {
        self.insert(model, price);
        self
    }

    /// Adds (or replaces) a model's price.
    pub fn insert(&mut self, model: impl Into<String>, price: ModelPrice) {
        self.prices.insert(model.into(), price);
    }

    /// The price of `model`: its own entry, or that of the id it is a dated snapshot of.
    pub fn get(&self, model: &str) -> Option<&ModelPrice> {
        let model = model.strip_prefix("models/").unwrap_or(model);
        if let Some(price) = self.prices.get(model) {
            return Some(price);
        }
        self.prices
            .iter()
            .filter(|(id, _)| {
                model
                    .strip_prefix(id.as_str())
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(is_snapshot_suffix)
            })
            .max_by_key(|(id, _)| id.len())
            .map(|(_, price)| price)
    }

    /// What `usage` of `model` cost; `None` when the table has no price for it.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<Cost> {
        self.get(model).map(|price| usage.cost(price))
    }
}

/// `2024-08-06`, `20250929`: a date, the form providers give snapshot ids.
fn is_snapshot_suffix(rest: &str) -> bool {
    let first = rest.split('-').next().unwrap_or_default();
    first.len() >= 4 && first.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_match_their_model_only() {
        let table = PriceTable::new()
            .with("gpt-4o", ModelPrice::new(2.5, 10.0))
            .with("claude-sonnet-4", ModelPrice::new(3.0, 15.0));
        assert!(table.get("gpt-4o-2024-08-06").is_some());
        assert!(table.get("gpt-4o-mini").is_none());
        assert!(table.get("claude-sonnet-4-5").is_none());
        assert!(table.get("claude-sonnet-4-20250514").is_some());
        assert!(table.get("models/gpt-4o").is_some());
    }
}
