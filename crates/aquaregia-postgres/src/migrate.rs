//! Embedded schema migrations: versioned SQL files applied in order, each in its own
//! transaction, under a transaction-scoped advisory lock so that processes starting at once
//! apply each migration exactly once.

use deadpool_postgres::Client;

use crate::error::PostgresStoreError;

/// One schema change.
struct Migration {
    version: i32,
    name: &'static str,
    sql: &'static str,
}

/// Every migration, oldest first. Append new ones; never edit a released one.
const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "sessions and turns",
    sql: include_str!("../migrations/0001_sessions.sql"),
}];

/// The schema version this build writes and reads.
pub(crate) const SCHEMA_VERSION: i32 = 1;

/// The advisory lock serializing migrations: "aquaregi" in ASCII.
const LOCK_KEY: i64 = 0x6171_7561_7265_6769;

const VERSIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS aquaregia_schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)";

/// Brings the schema up to [`SCHEMA_VERSION`]; returns the versions it applied. A database
/// already up to date is only read (so a role without CREATE rights can use it); one at a
/// newer version (a newer release migrated it) is used as it is, with a warning.
pub(crate) async fn migrate(
    client: &mut Client,
    target: &str,
) -> Result<Vec<i32>, PostgresStoreError> {
    let query = |source| PostgresStoreError::Query {
        target: target.to_owned(),
        source,
    };
    // Read first, without the lock or any DDL: a database already migrated is used by roles
    // that may not create anything (PostgreSQL 15 grants no CREATE on `public` by default).
    let versioned: bool = client
        .query_one(
            "SELECT to_regclass('aquaregia_schema_migrations') IS NOT NULL",
            &[],
        )
        .await
        .map_err(query)?
        .get(0);
    let newest: Option<i32> = if versioned {
        client
            .query_one("SELECT max(version) FROM aquaregia_schema_migrations", &[])
            .await
            .map_err(query)?
            .get(0)
    } else {
        None
    };
    if newest.is_some_and(|newest| newest >= SCHEMA_VERSION) {
        warn_if_newer(newest, target);
        return Ok(Vec::new());
    }
    let mut applied = Vec::new();
    for migration in MIGRATIONS {
        let transaction = client.transaction().await.map_err(query)?;
        // Held until commit or rollback: a second process waits here, then finds the
        // migration applied.
        transaction
            .execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
            .await
            .map_err(query)?;
        transaction
            .batch_execute(VERSIONS_TABLE)
            .await
            .map_err(query)?;
        let done = transaction
            .query_opt(
                "SELECT 1 FROM aquaregia_schema_migrations WHERE version = $1",
                &[&migration.version],
            )
            .await
            .map_err(query)?
            .is_some();
        if done {
            continue;
        }
        let failed = |source| PostgresStoreError::Migration {
            target: target.to_owned(),
            version: migration.version,
            name: migration.name,
            source,
        };
        transaction
            .batch_execute(migration.sql)
            .await
            .map_err(failed)?;
        transaction
            .execute(
                "INSERT INTO aquaregia_schema_migrations (version, name) VALUES ($1, $2)",
                &[&migration.version, &migration.name],
            )
            .await
            .map_err(failed)?;
        transaction.commit().await.map_err(failed)?;
        tracing::info!(
            version = migration.version,
            name = migration.name,
            target,
            "applied a session store migration"
        );
        applied.push(migration.version);
    }
    let newest: Option<i32> = client
        .query_one("SELECT max(version) FROM aquaregia_schema_migrations", &[])
        .await
        .map_err(query)?
        .get(0);
    warn_if_newer(newest, target);
    Ok(applied)
}

fn warn_if_newer(newest: Option<i32>, target: &str) {
    if let Some(newest) = newest.filter(|newest| *newest > SCHEMA_VERSION) {
        tracing::warn!(
            database = newest,
            known = SCHEMA_VERSION,
            target,
            "the session tables were migrated by a newer aquaregia-postgres; using them as they are"
        );
    }
}
