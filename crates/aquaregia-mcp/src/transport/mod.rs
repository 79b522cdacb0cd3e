//! The bottom layer: moving JSON-RPC messages between this process and a server. A stdio
//! server's process ([`process`]), HTTP options and shared HTTP pieces ([`http_options`],
//! [`http`]), the legacy HTTP+SSE transport ([`sse`]), and every rmcp workaround
//! ([`compat`]). Nothing here knows of sessions, calls or tools.

pub(crate) mod compat;
pub(crate) mod http;
pub(crate) mod http_options;
pub mod process;
pub(crate) mod sse;
