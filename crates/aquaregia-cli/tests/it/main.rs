//! The command line's integration tests, in one binary (one module per behaviour): the built
//! `aquaregia` run in scratch directories against the mock model, MCP servers (the in-repo
//! Python one, server-everything), OAuth servers and ACP clients (a hand-written one, the
//! TypeScript SDK, acpx). Every test shares this process: scratch directories come from
//! `tempfile`, and the processes a test starts carry a marker of their own
//! (`aquaregia_test_support::processes`).
//!
//! Tests that need the external peers `scripts/test-deps.sh` installs from npm and PyPI are
//! ignored unless the `real-peers` feature is on (`--all-features` turns it on), so
//! `cargo test --workspace` needs no network.

// Test code: a failed setup or expectation should stop the test loudly, and nothing here is
// public API that would need `Debug`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

mod common;

mod acp_acpx;
mod acp_auth;
mod acp_binary;
mod acp_fidelity;
mod acp_fork;
mod acp_handshake_first;
mod acp_model_option;
mod acp_oauth;
mod acp_persistent_sessions;
mod acp_registry;
mod acp_signals;
mod acp_skills;
mod acp_stdin_bad_lines;
mod acp_steering;
mod acp_subagents;
mod acp_trace_logs;
mod acp_typescript_sdk;
mod chat_cancel;
mod chat_compact;
mod chat_mcp_prompt;
mod chat_piped;
mod chat_skills;
mod chat_steering;
mod cli_basics;
mod config_file;
mod config_jsonc;
mod failing_servers;
mod mcp_call;
mod mcp_call_pairs;
mod mcp_login;
mod mcp_timeouts;
mod mcp_tools;
mod models;
#[cfg(feature = "otel")]
mod otel_export;
#[cfg(feature = "postgres")]
mod postgres_sessions;
mod prompt_caching;
mod real_model;
mod run_agent;
mod run_cancel;
mod run_output_budget;
mod run_output_json;
mod run_sigterm;
mod run_stdin_prompt;
mod run_subagents;
mod run_tool_flags;
mod run_usage;
mod secrets;
#[cfg(feature = "serve")]
mod serve_websocket;
mod session_continue;
mod session_fork;
mod terminal_markdown;
mod terminal_permission;
mod terminal_progress;
mod terminal_safety;
mod tool_permissions;
