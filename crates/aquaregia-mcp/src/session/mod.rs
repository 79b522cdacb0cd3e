//! The session layer: one MCP session over a transport. The handshake ([`handshake`]) and its
//! HTTP variants ([`http`]), the shared session state and the user's handle on it
//! ([`connection`]), the rmcp client handler and the [`ServerRequests`](handler::ServerRequests)
//! seam to the handlers above ([`handler`]), the listing ([`listing`]), progress routing
//! ([`progress`]), restarts ([`restart`]) and what spans say of the server ([`trace`]).
//! It builds on `transport` only.

pub(crate) mod connection;
pub(crate) mod handler;
pub(crate) mod handshake;
pub(crate) mod http;
pub(crate) mod listing;
pub(crate) mod progress;
pub(crate) mod restart;
pub(crate) mod trace;
