//! [`PostgresStoreError`]: why the Postgres store could not do something. Operations of
//! [`SessionStore`](aquaregia::SessionStore) return it inside [`SessionError::Backend`].

use std::time::Duration;

use aquaregia::SessionError;

/// Why connecting to PostgreSQL, migrating or a query failed. Connection strings (and their
/// passwords) never appear in it: `target` is `user@host:port/database`.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum PostgresStoreError {
    /// The connection string is not a PostgreSQL URL or `key=value` string.
    #[error("invalid PostgreSQL connection string: {}", chain(source))]
    InvalidUrl {
        /// What the parser said.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The connection string requires TLS (`sslmode=require`), which this store does not
    /// speak.
    #[error(
        "PostgreSQL at {target}: the connection string requires TLS (sslmode=require), which \
         aquaregia-postgres does not speak; connect over a unix socket, a private network or a \
         TLS-terminating proxy"
    )]
    TlsRequired {
        /// Where.
        target: String,
    },
    /// No connection could be made (refused, unknown host, authentication failed...).
    #[error("cannot connect to PostgreSQL at {target}: {}", chain(source))]
    Connect {
        /// Where.
        target: String,
        /// The client's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// Connecting or an operation took longer than allowed.
    #[error("PostgreSQL at {target} did not answer within {} s", after.as_secs_f64())]
    Timeout {
        /// Where.
        target: String,
        /// The bound that was reached.
        after: Duration,
    },
    /// A schema migration failed; nothing of it was applied (each runs in a transaction).
    #[error(
        "migrating the session tables at {target} to version {version} ({name}): {}",
        chain(source)
    )]
    Migration {
        /// Where.
        target: String,
        /// The migration's version.
        version: i32,
        /// What it does.
        name: &'static str,
        /// The database's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A query failed.
    #[error("PostgreSQL at {target}: {}", chain(source))]
    Query {
        /// Where.
        target: String,
        /// The database's (or the connection's) error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A session's row cannot be read back (its metadata is not a session's: edited by hand,
    /// or written by an incompatible version).
    #[error("session {id} has damaged metadata in PostgreSQL: {message}")]
    DamagedSession {
        /// The session.
        id: String,
        /// What is wrong.
        message: String,
    },
    /// A value cannot be stored (a working directory that is not UTF-8, say).
    #[error("cannot store {what}: {message}")]
    Unencodable {
        /// What was being stored.
        what: &'static str,
        /// Why it cannot be.
        message: String,
    },
    /// The connection pool cannot hand out connections (it was closed or misconfigured).
    #[error("PostgreSQL connection pool: {message}")]
    Pool {
        /// What the pool said.
        message: String,
    },
}

/// The client's error and its causes: its own text is only the kind ("db error"), the
/// server's message is in the cause.
fn chain(error: &tokio_postgres::Error) -> String {
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

impl From<PostgresStoreError> for SessionError {
    fn from(error: PostgresStoreError) -> Self {
        SessionError::Backend(Box::new(error))
    }
}
