//! A PostgreSQL [`SessionStore`](aquaregia::SessionStore) for [aquaregia]: many agent
//! processes, on many machines, share their conversations.
//!
//! [`PostgresSessionStore`] keeps exactly the semantics of the embedded
//! [`FileSessionStore`](aquaregia::FileSessionStore): a turn is stored when it completes,
//! sessions list newest first in pages, and an append that carries a stale turn count fails
//! with [`SessionError::Conflict`](aquaregia::SessionError::Conflict) instead of losing
//! another process's turn (the CLI and the ACP agent then reload and append on top).
//!
//! ```no_run
//! use std::sync::Arc;
//! use aquaregia::{NewSession, SessionStore, SessionTurn, Message};
//! use aquaregia_postgres::PostgresSessionStore;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = PostgresSessionStore::builder(std::env::var("DATABASE_URL")?)
//!     .max_connections(8)
//!     .connect()
//!     .await?;
//! let session = store.create(NewSession::new("/srv/support-bot")).await?;
//! let turn = SessionTurn::new(vec![Message::user("Hi"), Message::assistant("Hello!")]);
//! store.append_turn_checked(&session.id, turn, 0).await?;
//! // Share it: an ACP server, a CLI conversation... take `Arc<dyn SessionStore>`.
//! let shared: Arc<dyn SessionStore> = Arc::new(store);
//! # let _ = shared; Ok(()) }
//! ```
//!
//! ## The schema
//!
//! Two tables, `aquaregia_sessions` and `aquaregia_session_turns`, plus
//! `aquaregia_schema_migrations`. [`connect`](PostgresSessionStore::connect) applies the
//! embedded migrations (versioned SQL, each in a transaction, under an advisory lock), so any
//! number of processes may start at once against a fresh database. A database already at this
//! version is only read on connect: once a role that may create tables has connected, the
//! agents may connect as one with `SELECT`, `INSERT`, `UPDATE` and `DELETE` on the two tables
//! and `SELECT` on `aquaregia_schema_migrations`, and nothing more. To keep the tables in
//! another schema, put it first in the connection's `search_path`
//! (`?options=-c%20search_path%3Dagents`).
//!
//! ## TLS
//!
//! The connection is not encrypted (a URL with `sslmode=require` is refused): use a unix
//! socket, a private network or a TLS-terminating proxy.
//!
//! [aquaregia]: https://docs.rs/aquaregia

mod error;
mod migrate;
mod store;

pub use error::PostgresStoreError;
pub use store::{PostgresSessionStore, PostgresSessionStoreBuilder};
