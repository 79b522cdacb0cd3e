//! Shared test fixtures of this crate: the checked wire payloads and a Chat Completions client
//! for the mock model (`aquaregia_test_support::mock_model`).
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use aquaregia_test_support::mock_model::MockServer;
use serde_json::Value;

/// A checked wire payload from `tests/fixtures/providers/`.
pub fn fixture(path: &str) -> String {
    let full = format!(
        "{}/tests/fixtures/providers/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("read {full}: {e}"))
}

pub fn fixture_json(path: &str) -> Value {
    serde_json::from_str(&fixture(path)).expect("fixture is JSON")
}

/// A Chat Completions client pointed at the mock, with fast retries.
pub fn chat_client(server: &MockServer) -> aquaregia::Client {
    aquaregia::Client::openai_chat()
        .base_url(&server.url)
        .api_key("test-key")
        .max_retries(2)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client builds")
}
