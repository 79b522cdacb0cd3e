//! Connecting: the embedded migrations run once however many processes start at once, a
//! second connect changes nothing, and a database that cannot be reached is a clear error
//! within the connect timeout, not a hang.

use std::time::{Duration, Instant};

use aquaregia::{NewSession, SessionStore};
use aquaregia_postgres::{PostgresSessionStore, PostgresStoreError};
use aquaregia_test_support::postgres::unreachable_url;

use crate::support::Database;

#[tokio::test]
async fn stores_starting_at_once_on_a_fresh_database_all_connect() {
    let Some(database) = Database::new("fresh") else {
        return;
    };
    let url = database.url.clone();
    let connects: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { PostgresSessionStore::connect(&url).await })
        })
        .collect();
    let mut stores = Vec::new();
    for connect in connects {
        stores.push(connect.await.unwrap().unwrap());
    }
    let versions = database.sql(
        "SELECT string_agg(version::text, ',' ORDER BY version) FROM aquaregia_schema_migrations",
    );
    assert_eq!(
        versions,
        PostgresSessionStore::schema_version().to_string(),
        "each migration applied once"
    );
    // And they all work on the same tables.
    let meta = stores[0].create(NewSession::new("/p")).await.unwrap();
    for store in &stores {
        assert_eq!(store.load(&meta.id).await.unwrap().meta.id, meta.id);
    }
}

#[tokio::test]
async fn connecting_again_keeps_the_data_and_the_schema() {
    let Some(database) = Database::new("again") else {
        return;
    };
    let first = database.store().await;
    let meta = first.create(NewSession::new("/p")).await.unwrap();
    let applied = "SELECT version, applied_at FROM aquaregia_schema_migrations";
    let applied_at = database.sql(applied);
    let second = database.store().await;
    assert_eq!(second.load(&meta.id).await.unwrap().meta, meta);
    assert_eq!(database.sql(applied), applied_at, "nothing applied again");
    assert_eq!(
        second.target(),
        format!(
            "aquaregia@127.0.0.1:{}/{}",
            database.cluster.port(),
            database.name()
        )
    );
}

#[tokio::test]
async fn an_unreachable_database_is_a_clear_error() {
    let (_closed, url) = unreachable_url();
    let started = Instant::now();
    let error = PostgresSessionStore::connect(&url).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        matches!(error, PostgresStoreError::Connect { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.starts_with("cannot connect to PostgreSQL at aquaregia@127.0.0.1:"),
        "{text}"
    );
    // The cause is told, not only its kind.
    assert!(text.contains("Connection refused"), "{text}");
    assert!(std::error::Error::source(&error).is_some());
}

/// A server that accepts the connection and never answers: bounded by the connect timeout.
#[tokio::test]
async fn a_silent_server_times_out() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let started = Instant::now();
    let error =
        PostgresSessionStore::builder(format!("postgres://someone:secret@127.0.0.1:{port}/db"))
            .connect_timeout(Duration::from_millis(500))
            .connect()
            .await
            .unwrap_err();
    let elapsed = started.elapsed();
    held.abort();
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    assert!(
        matches!(error, PostgresStoreError::Timeout { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains(&format!("someone@127.0.0.1:{port}/db")),
        "{text}"
    );
    assert!(!text.contains("secret"), "{text}");
    assert!(!format!("{error:?}").contains("secret"));
}

#[tokio::test]
async fn a_bad_connection_string_is_refused() {
    let error = PostgresSessionStore::connect("postgres://host:notaport/db")
        .await
        .unwrap_err();
    assert!(
        matches!(error, PostgresStoreError::InvalidUrl { .. }),
        "{error:?}"
    );
}

/// A newer release migrated the tables further: this one uses them as they are (new columns
/// and tables are not its business) instead of refusing to start.
#[tokio::test]
async fn tables_a_newer_release_migrated_are_used_as_they_are() {
    let Some(database) = Database::new("newer") else {
        return;
    };
    let store = database.store().await;
    let meta = store.create(NewSession::new("/p")).await.unwrap();
    database.sql(
        "ALTER TABLE aquaregia_sessions ADD COLUMN tenant text; \
         INSERT INTO aquaregia_schema_migrations (version, name) VALUES (99, 'from the future')",
    );
    let again = database.store().await;
    assert_eq!(again.load(&meta.id).await.unwrap().meta, meta);
    again
        .append_turn(
            &meta.id,
            aquaregia_test_support::session_contract::tool_turn("x"),
        )
        .await
        .unwrap();
}

/// The server refuses: the database does not exist, or the user is unknown. Its own words
/// are in the error, with where it was, and no password.
#[tokio::test]
async fn a_missing_database_or_user_is_a_clear_error() {
    let Some(database) = Database::new("refused") else {
        return;
    };
    let port = database.cluster.port();
    let missing = format!("postgres://aquaregia:hunter2@127.0.0.1:{port}/no_such_database");
    let error = PostgresSessionStore::connect(&missing).await.unwrap_err();
    assert!(
        matches!(error, PostgresStoreError::Connect { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains(&format!("aquaregia@127.0.0.1:{port}/no_such_database")),
        "{text}"
    );
    assert!(
        text.contains("database \"no_such_database\" does not exist"),
        "{text}"
    );
    assert!(!text.contains("hunter2") && !format!("{error:?}").contains("hunter2"));

    let stranger = format!("postgres://stranger@127.0.0.1:{port}/{}", database.name());
    let text = PostgresSessionStore::connect(&stranger)
        .await
        .unwrap_err()
        .to_string();
    assert!(text.contains("role \"stranger\" does not exist"), "{text}");
}

/// TLS is not built in: a URL that requires it is refused before connecting, saying so (not
/// with whatever the handshake would fail on).
#[tokio::test]
async fn a_url_requiring_tls_is_refused() {
    let Some(database) = Database::new("tls") else {
        return;
    };
    let url = format!("{}?sslmode=require", database.url);
    let error = PostgresSessionStore::connect(&url).await.unwrap_err();
    assert!(
        matches!(error, PostgresStoreError::TlsRequired { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(text.contains("requires TLS (sslmode=require)"), "{text}");
}

/// The tables were made by an owner; the agents connect as a role that may read and write
/// them but create nothing (PostgreSQL 15 gives no CREATE on `public` by default): connecting
/// only reads the schema version, and every operation works.
#[tokio::test]
async fn a_role_that_may_not_create_tables_uses_a_migrated_database() {
    let Some(database) = Database::new("least_privilege") else {
        return;
    };
    database.store().await;
    database.sql(
        "CREATE ROLE agent LOGIN; \
         REVOKE CREATE ON SCHEMA public FROM PUBLIC; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON aquaregia_sessions, aquaregia_session_turns \
         TO agent; \
         GRANT SELECT ON aquaregia_schema_migrations TO agent",
    );
    let url = format!(
        "postgres://agent@127.0.0.1:{}/{}",
        database.cluster.port(),
        database.name()
    );
    let store = PostgresSessionStore::connect(&url).await.unwrap();
    let meta = store.create(NewSession::new("/p")).await.unwrap();
    store
        .append_turn_checked(
            &meta.id,
            aquaregia_test_support::session_contract::tool_turn("hi"),
            0,
        )
        .await
        .unwrap();
    assert_eq!(store.load(&meta.id).await.unwrap().meta.turns, 1);
    // Not a grant too many: it really may not create.
    let denied = database.sql("SELECT has_schema_privilege('agent', 'public', 'CREATE')");
    assert_eq!(denied, "f");
}
