//! In-process MCP servers on rmcp, served over `tokio::io::duplex` (feature `mcp-servers`):
//! the fixtures the MCP client and the ACP agent are tested against.
//!
//! - [`test_server`]: many tools (every content type, slow and failing ones, paginated
//!   listing, list changes, cancellation counted);
//! - [`elicitation_server`]: a tool that asks the user (form and URL modes);
//! - [`input_required_server`]: 2026-07-28 `input_required` rounds;
//! - [`progress_server`]: progress notifications, and a silent tool;
//! - [`sampling_server`]: a tool that samples the client's model;
//! - [`skills_server`]: skills (the skills extension, SEP-2640), or skill resources only;
//! - [`task_server`]: tools that run as tasks.
//!
//! [`http::HttpMcpServer`] serves any of them over Streamable HTTP, for clients in another
//! process.

pub mod elicitation_server;
pub mod http;
pub mod input_required_server;
pub mod progress_server;
pub mod sampling_server;
pub mod skills_server;
pub mod task_server;
pub mod test_server;
