//! A price table turns each step's usage into a cost, reported per step, in `Usage` events
//! and summed for the run; without a price for the model there is no cost.

use crate::common;

use aquaregia::{AgentEvent, ModelPrice, PriceTable};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{fixture_json, provider_client};
use futures::StreamExt;
use serde_json::json;

/// Two Anthropic steps: the fixture as is (512 in, 118 out), then with 400 tokens read from
/// and 100 written to the cache.
async fn two_anthropic_steps() -> MockServer {
    let body = fixture_json("anthropic/response_tool_use.json");
    let mut cached = body.clone();
    cached["usage"]["cache_read_input_tokens"] = json!(400);
    cached["usage"]["cache_creation_input_tokens"] = json!(100);
    MockServer::with_replies([Reply::json(body), Reply::json(cached)]).await
}

fn sonnet_prices() -> PriceTable {
    PriceTable::new().with(
        "claude-sonnet-4-5",
        ModelPrice::new(3.0, 15.0)
            .cached_input(0.30)
            .cache_write(3.75),
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[tokio::test]
async fn steps_events_and_run_carry_costs() {
    let server = two_anthropic_steps().await;
    let agent = provider_client("anthropic", &server)
        .agent("claude-sonnet-4-5-20250929")
        .max_steps(2)
        .price_table(sonnet_prices())
        .build()
        .unwrap();
    let mut stream = agent.stream("weather?");
    let mut event_costs = Vec::new();
    let mut output = None;
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            AgentEvent::Usage {
                cost, total_cost, ..
            } => event_costs.push((cost.unwrap(), total_cost.unwrap())),
            AgentEvent::Finish(finished) => output = Some(finished),
            _ => {}
        }
    }
    let output = output.unwrap();

    let first = 512.0 * 3.0 / 1e6 + 118.0 * 15.0 / 1e6;
    let second = 512.0 * 3.0 / 1e6 + 400.0 * 0.30 / 1e6 + 100.0 * 3.75 / 1e6 + 118.0 * 15.0 / 1e6;
    let step_costs: Vec<_> = output.steps.iter().map(|s| s.cost.unwrap()).collect();
    assert!(close(step_costs[0].total(), first), "{:?}", step_costs[0]);
    assert!(close(step_costs[1].total(), second), "{:?}", step_costs[1]);
    assert!(close(step_costs[1].cached_input, 400.0 * 0.30 / 1e6));
    assert!(close(step_costs[1].cache_write, 100.0 * 3.75 / 1e6));
    let total = output.cost.unwrap();
    assert!(close(total.total(), first + second));
    assert_eq!(event_costs.len(), 2);
    assert_eq!(event_costs[0].0, step_costs[0]);
    assert_eq!(event_costs[1].0, step_costs[1]);
    assert_eq!(event_costs[1].1, total);
}

#[tokio::test]
async fn a_model_without_a_price_has_no_cost() {
    let server = two_anthropic_steps().await;
    let agent = provider_client("anthropic", &server)
        .agent("claude-haiku-4-5")
        .max_steps(2)
        .price_table(sonnet_prices())
        .build()
        .unwrap();
    let output = agent.run("weather?").await.unwrap();
    assert_eq!(output.steps.len(), 2);
    assert!(output.steps.iter().all(|s| s.cost.is_none()));
    assert!(output.cost.is_none());
    assert_eq!(output.usage.input_tokens, 512 + 1012);
}
