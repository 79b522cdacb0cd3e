//! The SDK's integration tests, in one binary (one module per behaviour): providers' wire
//! formats against a mock model on 127.0.0.1, the agent loop, context management, structured
//! output, sessions and tools. Every test of this binary shares one process: scratch
//! directories come from `tempfile`, servers bind port 0, and processes a test starts carry
//! a marker of their own.

// Test code: a failed setup or expectation should stop the test loudly, and nothing here is
// public API that would need `Debug`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

mod common;

mod agent_cancel;
mod agent_compact;
mod agent_hooks;
mod agent_loop;
mod agent_run;
mod anthropic;
mod azure;
#[cfg(feature = "bedrock")]
mod bedrock;
mod compaction_cancel;
mod compaction_usage;
mod compatible_presets;
mod context_compaction;
mod context_window_exceeded;
mod conversation;
mod conversation_fork;
mod gemini;
mod language_model;
mod middleware_cassette;
mod middleware_rate_limit;
mod middleware_retry;
mod openai_chat;
mod openai_responses;
mod prepare_step_model;
mod prompt_caching_anthropic;
mod prompt_caching_openai;
mod proxy_env;
mod redirects;
mod run_approvals;
mod session_store;
mod skills;
mod steering;
mod stream_framing;
mod structured_output_providers;
mod structured_output_repair;
mod subagents;
mod tool_call_ids;
mod tool_deferral_limits;
mod tool_output_budget;
mod tools;
mod usage_cost;
mod usage_normalised;
#[cfg(feature = "vertex")]
mod vertex;
