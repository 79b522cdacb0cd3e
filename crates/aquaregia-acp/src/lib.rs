//! # aquaregia-acp
//!
//! Serve an aquaregia agent to editors over ACP (Agent Client Protocol): newline-delimited
//! JSON-RPC on stdin/stdout, built on the official `agent-client-protocol` SDK, or over any
//! transport of whole messages ([`AcpServer::serve_messages`]: WebSocket text frames, as
//! `aquaregia serve` does, one clone of the server per connection). For remote clients,
//! [`AcpServer::allow_stdio_servers`] and [`AcpServer::local_tools`] keep them from running
//! commands on the agent's machine.
//!
//! Each session connects the MCP servers the editor declares, of every transport, through
//! [`aquaregia_mcp::McpConnection`]: stdio (run in the session's `cwd`, the entry's `env`
//! over the inherited one), Streamable HTTP, legacy SSE, and `acp` servers that live in the
//! editor and are reached through the ACP connection itself (MCP-over-ACP, both the
//! stateless and the connect-based binding). Servers connect in parallel within a startup
//! budget; one failing server is reported and the others are used.
//!
//! Prompts run an aquaregia [`Agent`](aquaregia::Agent), on any
//! [`LanguageModel`](aquaregia::LanguageModel) ([`AcpServer::from_model`], or a factory given
//! to [`AcpServer::new`] that builds each prompt's agent), over the session history and its
//! current tools (`<server>__<tool>`), streaming text, thoughts and tool calls as
//! `session/update`s (known secrets redacted), asking `session/request_permission` before tool
//! calls as the [`PermissionPolicy`](aquaregia::policy::PermissionPolicy) with the session
//! modes decides (mode `default`: all but read-only tools of trusted servers;
//! `bypass_permissions`: none; "always" answers remembered as readable rules), picking up
//! `tools/list_changed` between steps, and honouring `session/cancel` with stop reason
//! `cancelled`. With [`AcpServer::pins`], servers' tools are pinned and a new or changed one
//! is withheld until the user approves it. `session/close`, end of input, SIGTERM and SIGHUP close every MCP server.
//!
//! Optional parts: [`AcpServer::auth`] (API keys through ACP `authenticate`),
//! [`AcpServer::models`] (a `model` config option next to the `mode` one),
//! [`AcpServer::editor_tools`] (the editor's files and terminal as tools),
//! [`AcpServer::task_subagent`] (a built-in subagent whose runs are child sessions) and
//! [`AcpServer::session_store`] (persistent sessions: load, list, resume, delete). Slash
//! commands (`/clear`, `/compact`, `/tools`, `/model`, MCP prompts) and `usage_update`s are
//! always on (a `usage_update` only when the model's context window is known, see
//! [`aquaregia::Agent::context_window`]). The history sent to the model is compacted to fit
//! its context window. An MCP server's questions to the user (elicitation, plain or inside a
//! 2026-07-28 `input_required` round) go to the client as `elicitation/create` when it
//! supports the mode, else as a permission question when one click can answer them, else
//! they are declined; the answer goes back to the server. A URL question's completion
//! (`notifications/elicitation/complete`) reaches the client as `elicitation/complete`.
//! [`AcpServer::on_process`] hears of every stdio server process, for a supervisor that ends
//! them if the agent is killed outright.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use aquaregia::{Client, tool};
//!
//! let (client, model) = Client::from_env()?;
//! let clock = tool("utc_now")
//!     .description("Seconds since the Unix epoch")
//!     .execute_raw(|_| async { Ok(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(|e| e.to_string())?.as_secs()) });
//! aquaregia_acp::AcpServer::new(move |_session| {
//!     client.agent(model.clone()).instructions("You are a careful coding agent.").tool(clock.clone())
//! })
//! .serve_stdio()
//! .await?;
//! # Ok(()) }
//! ```

mod agent;
mod auth;
mod builtins;
mod commands;
mod config;
mod connection;
mod dispatch;
mod editor;
mod elicitation;
mod initialize;
mod lifecycle;
mod mcp_over_acp;
mod modes;
mod permissions;
mod plan;
mod prompt;
mod rpc;
pub mod sandbox;
mod server;
mod servers;
mod session;
mod state;
mod stdio;
mod steering;
mod store;
mod subagents;
mod terminal;
mod trust;
mod turn;
mod updates;

pub use auth::{API_KEY_META, ApiKeyAuth, ApiKeyMethod, AuthError};
pub use connection::SessionContext;
pub use sandbox::Sandbox;
pub use server::{AcpError, AcpServer};
