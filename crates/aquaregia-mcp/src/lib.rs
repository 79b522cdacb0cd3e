//! # aquaregia-mcp
//!
//! MCP servers' tools as [aquaregia](https://docs.rs/aquaregia) [`Tool`](aquaregia::Tool)s.
//!
//! One MCP tool is exactly one `Tool`: the agent loop, hooks and error policy treat it like a
//! hand-written one. [rmcp](https://docs.rs/rmcp) speaks the protocol; this crate owns the
//! mapping, the lifecycle and the robustness.
//!
//! ```no_run
//! # async fn demo(client: aquaregia::Client) -> Result<(), aquaregia::Error> {
//! use tokio::process::Command;
//!
//! // `McpError` converts into `aquaregia::Error` (as `Error::Other`), so `?` works here.
//! let mcp = aquaregia_mcp::connect_stdio(Command::new("mcp-server-fs")).await?;
//! let agent = client.agent("gpt-5-mini").tools(mcp.tools().await?).build()?;
//! # Ok(()) }
//! ```
//!
//! Tools that change at run time reach a running agent through `prepare_step`:
//!
//! ```no_run
//! # async fn demo(client: aquaregia::Client, mcp: aquaregia_mcp::McpConnection) -> Result<(), aquaregia::Error> {
//! use aquaregia::StepOverrides;
//! let agent = client
//!     .agent("gpt-5-mini")
//!     .prepare_step(move |_ctx| {
//!         let mcp = mcp.clone();
//!         async move { Ok(StepOverrides::new().tools(mcp.tools().await?)) }
//!     })
//!     .build()?;
//! # Ok(()) }
//! ```
//!
//! Several servers at once, with their tools prefixed `<server>__<tool>`, filtered, refreshed
//! and closed together: [`McpToolset`].
//!
//! ## Transports
//!
//! | function | transport |
//! |---|---|
//! | [`connect_stdio`] | a child process in its own process group (job object on Windows); stderr kept for errors; [`DEFAULT_INHERITED_ENV_VARS`] of the environment |
//! | [`connect_http`] | Streamable HTTP, falling back to legacy HTTP+SSE when the server does not speak it |
//! | [`connect_sse`] | legacy HTTP+SSE (protocol 2024-11-05 transport) |
//! | [`connect`] | any rmcp transport (in-memory pipes, the ACP tunnel...) |
//!
//! [`Connector`] sets a server name (used in logs and errors) and the connect timeout.
//! Both MCP lifecycles are negotiated: `server/discover` (2026-07-28) first, then the
//! 2025-11-25 `initialize` handshake.
//!
//! ## Result mapping
//!
//! | MCP `CallToolResult` | [`ToolOutput`](aquaregia::ToolOutput) |
//! |---|---|
//! | exactly one text block | `Text` |
//! | several blocks, or any non-text block | `Content`: text, image, audio, resource (text or blob) and resource-link [`ContentBlock`](aquaregia::ContentBlock)s |
//! | `structuredContent`, and no image or audio block | `Json` of the structured value (its text duplicate is not sent twice) |
//! | `structuredContent` with image or audio blocks | `Structured`: the blocks (media always reach the model as media) and the structured value beside them |
//! | no content | `Text("")` |
//! | `isError: true` | [`ToolExecError::Execution`](aquaregia::ToolExecError::Execution) with the text blocks joined |
//! | a block type this version does not know | a text block holding its JSON |
//!
//! Images are sent to models as real images; audio, which no chat API accepts in tool results
//! yet, as a short placeholder naming its type.
//!
//! ## Errors
//!
//! [`McpError`] says what went wrong, by variant. A failed tool call reaches the agent as
//! [`ToolExecError::Failed`](aquaregia::ToolExecError::Failed) with the `McpError` kept whole
//! inside (a call timeout as `ToolExecError::Timeout`); `?` on an `McpError` in a function
//! returning [`aquaregia::Error`] makes it `Error::Other`.
//!
//! ## Cargo features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `oauth` | off | OAuth 2.1 for HTTP and SSE servers ([`OAuth`], token stores, `private_key_jwt`, enterprise-managed authorization; rmcp's `auth`) |
//! | `otel` | off | the W3C trace context of each `tools/call` span sent in the request's `_meta` (`opentelemetry`, `tracing-opentelemetry`) |
//! | `real-peers` | off | nothing: tests only, runs the integration tests against npm/PyPI peers |
//!
//! ## rmcp
//!
//! The protocol types are rmcp's, re-exported as [`rmcp`]; this crate's own API uses its own
//! types, except where it is an explicit escape hatch ([`McpConnection::peer`], custom
//! transports for [`connect`]).

// The layers, bottom up: each module uses only those above it in this list (checked by
// `scripts/module-cycles.py --layers`).
mod call;
mod config;
mod connector;
mod error;
#[cfg(feature = "oauth")]
mod oauth;
mod server_requests;
mod session;
mod toolset;
mod transport;

/// The rmcp version this crate is built on. Use this re-export (`aquaregia_mcp::rmcp`) rather
/// than your own `rmcp` dependency for what [`McpConnection::peer`] exposes (resources,
/// requests this crate does not wrap) and for custom transports, so both sides use the same
/// types.
pub use rmcp;

use rmcp::RoleClient;
use rmcp::transport::IntoTransport;
use tokio::process::Command;

pub use call::naming::prefixed_name;
pub use call::prompts::{McpPrompt, McpPromptArgument, PromptArgumentsError, RenderedPrompt};
pub use config::{
    ConfigError, McpOAuthClient, McpServerSpec, McpServerTimeouts, McpServersConfig,
    expand_variables, parse_jsonc,
};
pub use connector::{Connector, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RESTARTS};
pub use error::{ErrorSource, McpError};
#[cfg(feature = "oauth")]
pub use oauth::{
    AuthorizationPrompt, AuthorizeError, FileTokenStore, IdentityProvider, JwtAlgorithm,
    MemoryTokenStore, OAuth, OAuthCredentials, OAuthToken, TokenStore, TokenStoreError,
};
pub use server_requests::elicitation::{
    ElicitationComplete, ElicitationRequest, ElicitationResponse,
};
pub use server_requests::sampling::{
    SamplingReply, SamplingRequest, SamplingResponse, sample_with_model,
};
pub use session::connection::{LeftOutTool, McpConnection, McpServerInfo};
pub use toolset::pins::{
    PinChange, PinError, PinFile, PinReview, Pins, ServerPins, ToolPin, WithheldTool,
};
pub use toolset::prompts::{PROMPT_TIMEOUT, PromptError, ServerPrompt};
pub use toolset::skills::SKILL_TIMEOUT;
pub use toolset::{McpToolset, McpToolsetBuilder};
pub use transport::http_options::HttpOptions;
pub use transport::process;
pub use transport::process::{DEFAULT_INHERITED_ENV_VARS, ServerProcess};

/// Starts `command` as a stdio MCP server and connects to it.
///
/// The server runs in its own process group (a job object on Windows) with piped stderr;
/// closing or dropping the connection terminates the whole group.
///
/// Its environment is [`DEFAULT_INHERITED_ENV_VARS`] from this process plus every variable
/// set on `command` itself: a server does not see API keys or tokens it was not given. Set
/// what it needs with [`Command::env`], or use [`Connector::inherit_env`] to pass the whole
/// environment.
pub async fn connect_stdio(command: Command) -> Result<McpConnection, McpError> {
    Connector::new().stdio(command).await
}

/// Connects to a Streamable HTTP server, falling back to legacy HTTP+SSE when the server does
/// not speak Streamable HTTP.
pub async fn connect_http(url: impl Into<String>) -> Result<McpConnection, McpError> {
    Connector::new().http(url, HttpOptions::new()).await
}

/// Connects to a legacy HTTP+SSE server (`GET` event stream, `POST` messages).
pub async fn connect_sse(url: impl Into<String>) -> Result<McpConnection, McpError> {
    Connector::new().sse(url, HttpOptions::new()).await
}

/// Connects over any rmcp transport: `(reader, writer)` pairs, `tokio::io::duplex` streams,
/// `(Sink, Stream)` pairs of JSON-RPC messages, or a `Transport` implementation (rmcp's
/// traits, through the [`rmcp`] re-export). Whatever the transport, the session is wrapped
/// in the same compatibility layer as the built-in ones.
pub async fn connect<T, E, A>(transport: T) -> Result<McpConnection, McpError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    Connector::new().transport(transport).await
}
