//! The ACP agent's integration tests, in one binary (one module per behaviour): the agent
//! served in memory to a hand-written JSON-RPC client or the ACP Rust SDK's client, with stdio
//! MCP servers as small Python scripts. The agent's logic runs on the SDK's scripted model,
//! in-process (`support::model`); a few end-to-end tests keep the loopback HTTP mock model
//! (`aquaregia_test_support::mock_model`): the protocol surface, a long session compacted to
//! the window on the wire, and the MCP-over-ACP bindings. Every test shares this process:
//! scratch directories come from `tempfile`, and the processes a test starts carry a marker of
//! their own (`aquaregia_test_support::processes`).

// Test code: a failed setup or expectation should stop the test loudly, and nothing here is
// public API that would need `Debug`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

mod support;

mod bounded_history;
mod cancellation;
mod connect_based_binding;
mod disabled_tools;
mod editor_tools;
mod elicitation_bridge;
mod end_of_input;
mod fork_sessions;
mod initialize_first;
mod input_required_elicitation;
mod load_servers;
mod local_editor_tools;
mod output_budget;
mod permissions;
mod plan_mode;
mod plan_updates;
mod prompt_content;
mod prompt_panic;
mod protocol_surface;
mod reload_open_session;
mod remote_clients;
mod replay_matches_live;
mod resume_and_delete;
mod sdk_client_mcp_over_acp;
mod server_failures;
mod shared_acp_registration;
mod slash_commands;
mod stdio_environment;
mod usage_updates;
