//! The integration tests of `aquaregia-mcp`, as one test binary: one module per behaviour.
//! Fixture servers come from `aquaregia_test_support::mcp_servers`; the real-peer suites
//! (npm/PyPI servers, the conformance suite) install their peers once through
//! `aquaregia_test_support::deps`, and are ignored unless the `real-peers` feature is on
//! (`--all-features` turns it on), so `cargo test --workspace` needs no network.

// Test code: a failed setup or expectation should stop the test loudly, and nothing here is
// public API that would need `Debug`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

mod common;

mod client;
#[cfg(feature = "oauth")]
mod conformance;
mod elicitation;
mod http_faults;
mod http_session_expiry;
mod input_required;
mod list_change_order;
#[cfg(feature = "oauth")]
mod oauth_assertion_grants;
#[cfg(feature = "oauth")]
mod oauth_client_assertion;
#[cfg(feature = "oauth")]
mod oauth_legacy_discovery;
#[cfg(feature = "oauth")]
mod oauth_sse;
#[cfg(feature = "otel")]
mod otel_spans;
mod output_budget;
mod progress;
mod real_servers;
mod robustness;
mod sampling;
mod server_timeouts;
mod skills;
mod stdio_env;
mod stdio_faults;
mod stdio_restart;
mod stdio_shutdown;
mod tasks;
mod tool_deferral;
mod toolset;
