//! Fixtures shared by the integration tests of the aquaregia crates (internal, not published).
//!
//! - [`acp_client`]: a hand-written ACP client (raw JSON-RPC lines over an in-memory pipe or a
//!   spawned agent's stdio) and the client side of MCP-over-ACP;
//! - [`deps`]: the external programs installed by `scripts/test-deps.sh`, repository paths,
//!   free ports, example binaries and background server processes;
//! - [`processes`]: finding (and killing) the processes a test marked through its environment;
//! - [`mock_model`]: a scripted OpenAI-compatible model on 127.0.0.1, with Chat Completions
//!   payload builders and request inspectors;
//! - `mcp_servers` (feature `mcp-servers`): in-process MCP servers on rmcp.

pub mod acp_client;
pub mod deps;
#[cfg(feature = "mcp-servers")]
pub mod mcp_servers;
pub mod mock_model;
pub mod processes;
