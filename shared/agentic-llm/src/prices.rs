//! The operator's price table (`AGENTIC_PRICES`): per model, what a million input, cached
//! input and output tokens cost. A call's cost is then its tokens at those prices, in
//! millionths of the table's currency (a table in US dollars gives µUSD: tokens × dollars per
//! million tokens is exactly that).

use std::collections::HashMap;

use crate::Usage;

/// The most one call costs, in millionths (a million of the currency).
const MAX_CALL_COST_MICROS: f64 = 1e12;

/// What a million tokens of each kind cost, for one model.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    /// Input tokens read from the provider's prompt cache (default: the input price).
    #[serde(default)]
    pub cached_input: Option<f64>,
    pub output: f64,
}

/// Prices by model name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices(HashMap<String, Price>);

impl Prices {
    /// The table as JSON: `{"gpt-4o": {"input": 2.5, "cached_input": 1.25, "output": 10}}`
    /// (empty: no prices). Negative, infinite or absurd prices are refused.
    pub fn parse(text: &str) -> Result<Prices, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Prices::default());
        }
        let table: HashMap<String, Price> =
            serde_json::from_str(text).map_err(|error| format!("not a price table: {error}"))?;
        for (model, price) in &table {
            let all = [Some(price.input), price.cached_input, Some(price.output)];
            if all
                .into_iter()
                .flatten()
                .any(|value| !value.is_finite() || !(0.0..=1_000_000.0).contains(&value))
            {
                return Err(format!(
                    "the prices of {model} must be from 0 to 1,000,000 per million tokens"
                ));
            }
        }
        Ok(Prices(table))
    }

    /// What `usage` cost on `model` (0 when the table does not price it).
    pub fn cost_micros(&self, model: &str, usage: &Usage) -> u64 {
        let Some(price) = self.0.get(model) else {
            return 0;
        };
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let fresh = usage.input_tokens - cached;
        let cost = fresh as f64 * price.input
            + cached as f64 * price.cached_input.unwrap_or(price.input)
            + usage.output_tokens as f64 * price.output;
        // Finite and not negative by the table's checks; one call is capped, so that token
        // counts an endpoint made up cannot overflow what sums them.
        cost.round().min(MAX_CALL_COST_MICROS) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_costs_its_tokens_at_the_models_prices_and_an_unpriced_model_nothing() {
        let prices =
            Prices::parse(r#"{"m": {"input": 2.5, "cached_input": 1.25, "output": 10}}"#).unwrap();
        let usage = Usage {
            input_tokens: 1000,
            cached_input_tokens: 400,
            output_tokens: 100,
            ..Usage::default()
        };
        // 600 × 2.5 + 400 × 1.25 + 100 × 10 µUSD.
        assert_eq!(prices.cost_micros("m", &usage), 3000);
        assert_eq!(prices.cost_micros("other", &usage), 0);
        assert_eq!(Prices::parse("").unwrap(), Prices::default());
        for bad in [
            r#"{"m": {"input": -1, "output": 1}}"#,
            r#"{"m": {"input": 1}}"#,
            "[]",
        ] {
            assert!(Prices::parse(bad).is_err(), "{bad}");
        }
    }
}
