//! What a run costs: list prices of well-known models, overridden by the config file's
//! `"prices": {"<model>": {"input": 3, "output": 15, "cachedInput": 0.3, "cacheWrite": 3.75}}`
//! (USD per million tokens).

use aquaregia::{Cost, ModelPrice, PriceTable};
use serde_json::{Map, Value};

/// A model and its input, output, cached input and cache write prices.
type ListPrice = (&'static str, f64, f64, Option<f64>, Option<f64>);

/// List prices in USD per million tokens (input, output, cached input, cache write), as the
/// providers' pricing pages gave them in November 2025. A dated snapshot id is priced as its
/// model (`gpt-4o-2024-08-06` as `gpt-4o`); a model not here has no cost unless the config
/// gives one.
const BUILT_IN: &[ListPrice] = &[
    // OpenAI (cached input: the automatic prompt cache; there is no cache-write charge).
    ("gpt-5", 1.25, 10.0, Some(0.125), None),
    ("gpt-5-mini", 0.25, 2.0, Some(0.025), None),
    ("gpt-5-nano", 0.05, 0.40, Some(0.005), None),
    ("gpt-4.1", 2.0, 8.0, Some(0.50), None),
    ("gpt-4.1-mini", 0.40, 1.60, Some(0.10), None),
    ("gpt-4.1-nano", 0.10, 0.40, Some(0.025), None),
    ("gpt-4o", 2.50, 10.0, Some(1.25), None),
    ("gpt-4o-mini", 0.15, 0.60, Some(0.075), None),
    ("o3", 2.0, 8.0, Some(0.50), None),
    ("o4-mini", 1.10, 4.40, Some(0.275), None),
    // Anthropic (cache reads 0.1x input, 5-minute cache writes 1.25x input).
    ("claude-opus-4-5", 5.0, 25.0, Some(0.50), Some(6.25)),
    ("claude-opus-4-1", 15.0, 75.0, Some(1.50), Some(18.75)),
    ("claude-opus-4", 15.0, 75.0, Some(1.50), Some(18.75)),
    ("claude-sonnet-4-5", 3.0, 15.0, Some(0.30), Some(3.75)),
    ("claude-sonnet-4", 3.0, 15.0, Some(0.30), Some(3.75)),
    ("claude-3-7-sonnet", 3.0, 15.0, Some(0.30), Some(3.75)),
    ("claude-haiku-4-5", 1.0, 5.0, Some(0.10), Some(1.25)),
    ("claude-3-5-haiku", 0.80, 4.0, Some(0.08), Some(1.0)),
    // Gemini (prompts up to 200k tokens; cached input: context caching reads).
    ("gemini-2.5-pro", 1.25, 10.0, Some(0.125), None),
    ("gemini-2.5-flash", 0.30, 2.50, Some(0.03), None),
    ("gemini-2.5-flash-lite", 0.10, 0.40, Some(0.01), None),
];

/// The built-in prices.
pub(crate) fn built_in() -> PriceTable {
    let mut table = PriceTable::new();
    for &(model, input, output, cached_input, cache_write) in BUILT_IN {
        let mut price = ModelPrice::new(input, output);
        if let Some(cached) = cached_input {
            price = price.cached_input(cached);
        }
        if let Some(write) = cache_write {
            price = price.cache_write(write);
        }
        table.insert(model, price);
    }
    table
}

/// The built-in prices with `overrides` (from the config files) over them.
pub(crate) fn table(overrides: &[(String, ModelPrice)]) -> PriceTable {
    let mut table = built_in();
    for (model, price) in overrides {
        table.insert(model.clone(), *price);
    }
    table
}

/// The config's `"prices"` object, as `(model, price)` pairs.
pub(crate) fn parse(prices: &Value) -> Result<Vec<(String, ModelPrice)>, String> {
    let Value::Object(prices) = prices else {
        return Err(
            "`prices` must be an object of models, such as {\"gpt-4o\": {\"input\": 2.5, \
             \"output\": 10}} (USD per million tokens)"
                .to_owned(),
        );
    };
    prices
        .iter()
        .map(|(model, price)| {
            let Value::Object(price) = price else {
                return Err(format!(
                    "`prices.{model}` must be an object with `input` and `output`"
                ));
            };
            Ok((model.clone(), model_price(model, price)?))
        })
        .collect()
}

fn model_price(model: &str, price: &Map<String, Value>) -> Result<ModelPrice, String> {
    let number = |key: &str| -> Result<Option<f64>, String> {
        match price.get(key) {
            None => Ok(None),
            Some(value) => match value.as_f64() {
                Some(number) if number >= 0.0 && number.is_finite() => Ok(Some(number)),
                _ => Err(format!(
                    "`prices.{model}.{key}` must be a number of USD per million tokens, not \
                     {value}"
                )),
            },
        }
    };
    if let Some(key) = price
        .keys()
        .find(|key| !["input", "output", "cachedInput", "cacheWrite"].contains(&key.as_str()))
    {
        return Err(format!(
            "`prices.{model}` has an unknown key `{key}` (use input, output, cachedInput, \
             cacheWrite)"
        ));
    }
    let (Some(input), Some(output)) = (number("input")?, number("output")?) else {
        return Err(format!("`prices.{model}` needs both `input` and `output`"));
    };
    let mut model_price = ModelPrice::new(input, output);
    if let Some(cached) = number("cachedInput")? {
        model_price = model_price.cached_input(cached);
    }
    if let Some(write) = number("cacheWrite")? {
        model_price = model_price.cache_write(write);
    }
    Ok(model_price)
}

/// `$0.0123`; smaller amounts keep two significant digits (`$0.000014`), so a short run's
/// cost does not read as nothing.
pub(crate) fn dollars(cost: &Cost) -> String {
    let total = cost.total();
    if total <= 0.0 || !total.is_finite() || total >= 0.01 {
        return format!("${total:.4}");
    }
    // Digits after the point that keep two significant ones, at most 8.
    let decimals = (-total.log10()).floor() as usize + 2;
    format!("${total:.prec$}", prec = decimals.min(8))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_prices_override_the_built_in_ones() {
        let overrides = parse(&json!({
            "gpt-4o": {"input": 1, "output": 2},
            "my-model": {"input": 0.5, "output": 1.5, "cachedInput": 0.05, "cacheWrite": 0.6}
        }))
        .expect("valid prices");
        let table = table(&overrides);
        assert_eq!(table.get("gpt-4o"), Some(&ModelPrice::new(1.0, 2.0)));
        assert_eq!(
            table.get("my-model"),
            Some(
                &ModelPrice::new(0.5, 1.5)
                    .cached_input(0.05)
                    .cache_write(0.6)
            )
        );
        assert!(table.get("claude-sonnet-4-5-20250929").is_some());
        assert!(table.get("llama3.2").is_none());
    }

    #[test]
    fn small_costs_keep_two_significant_digits() {
        let cost = |dollars: f64| {
            let mut cost = Cost::default();
            cost.input = dollars;
            cost
        };
        assert_eq!(dollars(&cost(0.035)), "$0.0350");
        assert_eq!(dollars(&cost(1.5)), "$1.5000");
        assert_eq!(dollars(&cost(0.0000136)), "$0.000014");
        assert_eq!(dollars(&cost(0.0042)), "$0.0042");
        assert_eq!(dollars(&cost(0.0)), "$0.0000");
    }

    #[test]
    fn bad_prices_are_explained() {
        for (prices, expected) in [
            (json!([]), "`prices` must be an object"),
            (json!({"m": 3}), "`prices.m` must be an object"),
            (
                json!({"m": {"input": 1}}),
                "needs both `input` and `output`",
            ),
            (
                json!({"m": {"input": -1, "output": 1}}),
                "`prices.m.input` must be a number",
            ),
            (
                json!({"m": {"input": "1", "output": 1}}),
                "`prices.m.input` must be a number",
            ),
            (
                json!({"m": {"input": 1, "output": 1, "cached": 1}}),
                "unknown key `cached`",
            ),
        ] {
            let error = parse(&prices).expect_err("invalid");
            assert!(error.contains(expected), "{error}");
        }
    }
}
