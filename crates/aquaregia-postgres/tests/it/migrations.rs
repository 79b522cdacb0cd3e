//! Connecting: the embedded migrations run once however many processes start at once, a
//! second connect changes nothing, and a database that cannot be reached is a clear error
//! within the connect timeout, not a hang.

use std::time::{Duration, Instant};

use aquaregia::{NewSession, SessionStore};
use aquaregia_postgres::{PostgresSessionStore, PostgresStoreError};
use aquaregia_test_support::postgres::{PgCluster, unreachable_url};

use crate::support::database;

fn database_of(url: &str) -> &str {
    url.rsplit('/').next().unwrap()
}

#[tokio::test]
async fn stores_starting_at_once_on_a_fresh_database_all_connect() {
    let url = database("fresh");
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
    let versions = PgCluster::shared().sql(
        database_of(&url),
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
    let url = database("again");
    let first = PostgresSessionStore::connect(&url).await.unwrap();
    let meta = first.create(NewSession::new("/p")).await.unwrap();
    let applied_at = PgCluster::shared().sql(
        database_of(&url),
        "SELECT applied_at FROM aquaregia_schema_migrations",
    );
    let second = PostgresSessionStore::connect(&url).await.unwrap();
    assert_eq!(second.load(&meta.id).await.unwrap().meta, meta);
    assert_eq!(
        PgCluster::shared().sql(
            database_of(&url),
            "SELECT applied_at FROM aquaregia_schema_migrations",
        ),
        applied_at
    );
    assert_eq!(
        second.target(),
        format!("aquaregia@127.0.0.1:{}/{}", PgCluster::shared().port(), database_of(&url))
    );
}

#[tokio::test]
async fn an_unreachable_database_is_a_clear_error() {
    let started = Instant::now();
    let error = PostgresSessionStore::connect(&unreachable_url())
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        matches!(error, PostgresStoreError::Connect { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(text.starts_with("cannot connect to PostgreSQL at aquaregia@127.0.0.1:"), "{text}");
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
    let error = PostgresSessionStore::builder(format!("postgres://someone:secret@127.0.0.1:{port}/db"))
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
    assert!(text.contains(&format!("someone@127.0.0.1:{port}/db")), "{text}");
    assert!(!text.contains("secret"), "{text}");
    assert!(!format!("{error:?}").contains("secret"));
}

#[tokio::test]
async fn a_bad_connection_string_is_refused() {
    let error = PostgresSessionStore::connect("postgres://host:notaport/db")
        .await
        .unwrap_err();
    assert!(matches!(error, PostgresStoreError::InvalidUrl { .. }), "{error:?}");
}
