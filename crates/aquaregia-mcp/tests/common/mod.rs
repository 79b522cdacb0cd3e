//! Shared test fixtures of this crate: a Chat Completions client for the mock model
//! (`aquaregia_test_support::mock_model`).
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use aquaregia_test_support::mock_model::MockServer;

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
