//! Fixtures shared by the integration tests of the aquaregia crates (internal, not published).
//!
//! - [`acp_client`]: a hand-written ACP client (raw JSON-RPC lines over an in-memory pipe or a
//!   spawned agent's stdio) and the client side of MCP-over-ACP;
//! - [`deps`]: the external programs installed by `scripts/test-deps.sh`, repository paths,
//!   the Python test servers, example binaries, background servers that report the port they
//!   bound, and a port that refuses connections;
//! - [`processes`]: finding (and killing) the processes a test marked through its environment;
//! - [`postgres`]: a throwaway PostgreSQL cluster on 127.0.0.1, one per test binary (skipped
//!   where PostgreSQL cannot be installed);
//! - [`mock_model`]: a scripted OpenAI-compatible model on 127.0.0.1, with Chat Completions
//!   payload builders and request inspectors;
//! - `restate` (feature `restate`): a throwaway `restate-server` on 127.0.0.1 with its
//!   admin API, and a service process that can be killed and started again at one address;
//! - [`real_model`]: a real model server (llama.cpp serving SmolLM2) on 127.0.0.1, shared by a
//!   test binary;
//! - [`google_token_server`]: Google's OAuth 2.0 token endpoint as Vertex AI clients use it
//!   (service-account JWTs checked against a test-only key pair, refresh tokens), on 127.0.0.1;
//! - [`oauth_server`]: an OAuth 2.1 authorization server and the MCP server it protects
//!   (Streamable HTTP and legacy SSE), on 127.0.0.1;
//! - `mcp_servers` (feature `mcp-servers`): in-process MCP servers on rmcp;
//! - `session_contract` (feature `sessions`): the behaviour suite every `SessionStore` passes.

// Fixtures: a failed setup should stop the test loudly, so unwrapping is the point here;
// nothing here is public API, so no type needs `Debug`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

pub mod acp_client;
pub mod deps;
pub mod google_token_server;
#[cfg(feature = "mcp-servers")]
pub mod mcp_servers;
pub mod mock_model;
pub mod oauth_server;
pub mod postgres;
pub mod processes;
pub mod real_model;
#[cfg(feature = "restate")]
pub mod restate;
#[cfg(feature = "sessions")]
pub mod session_contract;
