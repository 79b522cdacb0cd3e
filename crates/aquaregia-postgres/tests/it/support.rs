//! What the store's tests share: a fresh database on the binary's cluster, and a store on it.

use std::sync::Arc;

use aquaregia::SessionStore;
use aquaregia_postgres::PostgresSessionStore;
use aquaregia_test_support::postgres::PgCluster;
use aquaregia_test_support::session_contract::StoreFixture;

/// A fresh database on the binary's cluster; `None` (the test is skipped) where PostgreSQL
/// cannot be installed.
pub(crate) struct Database {
    pub(crate) cluster: &'static PgCluster,
    pub(crate) url: String,
}

impl Database {
    pub(crate) fn new(tag: &str) -> Option<Self> {
        let cluster = PgCluster::shared()?;
        let url = cluster.database(tag);
        Some(Self { cluster, url })
    }

    /// The database's name.
    pub(crate) fn name(&self) -> &str {
        aquaregia_test_support::postgres::database_name(&self.url)
    }

    /// Runs `sql` in this database through psql.
    pub(crate) fn sql(&self, sql: &str) -> String {
        self.cluster.sql(self.name(), sql)
    }

    /// A new store (its own connection pool) on this database.
    pub(crate) async fn store(&self) -> PostgresSessionStore {
        PostgresSessionStore::connect(&self.url).await.unwrap()
    }
}

impl StoreFixture for Database {
    async fn open(&self) -> Arc<dyn SessionStore> {
        Arc::new(self.store().await)
    }
}
