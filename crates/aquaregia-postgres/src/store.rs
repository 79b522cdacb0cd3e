//! [`PostgresSessionStore`]: sessions in two tables, shared by every process connected to the
//! database.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use aquaregia::{
    NewSession, SessionError, SessionId, SessionMeta, SessionPage, SessionQuery, SessionStore,
    SessionTurn, SessionUpdate, StoredSession, Timestamp,
};
use deadpool_postgres::{Manager, Pool, PoolError, Runtime};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::types::{Json, ToSql};
use tokio_postgres::{NoTls, Row};

use crate::error::PostgresStoreError;
use crate::migrate;

const DEFAULT_MAX_CONNECTIONS: usize = 16;
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

const INSERT_SESSION: &str = "INSERT INTO aquaregia_sessions (id, cwd, updated_at, turns, meta) \
     VALUES ($1, $2, $3, 0, $4) ON CONFLICT (id) DO NOTHING";
const LOCK_SESSION: &str =
    "SELECT turns, updated_at, meta FROM aquaregia_sessions WHERE id = $1 FOR UPDATE";
const INSERT_TURN: &str =
    "INSERT INTO aquaregia_session_turns (session_id, seq, turn) VALUES ($1, $2, $3)";
const UPDATE_AFTER_TURN: &str =
    "UPDATE aquaregia_sessions SET updated_at = $2, turns = $3, meta = $4 WHERE id = $1";
const UPDATE_META: &str = "UPDATE aquaregia_sessions SET updated_at = $2, meta = $3 WHERE id = $1";
/// The session and every turn in one statement, so one snapshot: a turn appended meanwhile is
/// either in both the count and the rows, or in neither.
const LOAD: &str = "SELECT s.turns, s.updated_at, s.meta, t.seq, t.turn \
     FROM aquaregia_sessions s \
     LEFT JOIN aquaregia_session_turns t ON t.session_id = s.id \
     WHERE s.id = $1 ORDER BY t.seq";
const INSERT_SESSION_WITH_TURNS: &str = "INSERT INTO aquaregia_sessions \
     (id, cwd, updated_at, turns, meta) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING";
/// Every turn of a new session in one statement.
const INSERT_TURNS: &str = "INSERT INTO aquaregia_session_turns (session_id, seq, turn) \
     SELECT $1, seq, turn FROM unnest($2::bigint[], $3::json[]) AS t (seq, turn)";
const DELETE: &str = "DELETE FROM aquaregia_sessions WHERE id = $1";
const LIST_COLUMNS: &str = "SELECT id, turns, updated_at, meta FROM aquaregia_sessions";
const NEWEST_FIRST: &str = "ORDER BY updated_at DESC, id DESC LIMIT $1";

/// A [`SessionStore`] in PostgreSQL, for many agent processes (on many machines) sharing
/// their sessions.
///
/// Sessions are rows of `aquaregia_sessions`, turns rows of `aquaregia_session_turns`; the
/// tables are created (and later migrated) on [`connect`](Self::connect), which any number of
/// processes may do at once. A turn is one `INSERT` in the transaction that counts it, so a
/// crash loses at most the turn in flight.
///
/// [`append_turn_checked`](SessionStore::append_turn_checked) locks the session's row,
/// compares its turn count with the caller's and appends in the same transaction: of two
/// processes that loaded the same session and append, one succeeds and the other gets
/// [`SessionError::Conflict`] with nothing stored, reloads, and appends on top.
///
/// A turn row that no longer decodes (edited by hand, written by an incompatible version) is
/// skipped with a warning and counted in [`StoredSession::skipped`]; the session's
/// [`SessionMeta::turns`] still counts it, since the stored turn count is what the check of
/// the next append compares with. A session whose metadata does not decode is an error for
/// that session only, and is left out of listings with a warning.
///
/// Every wait is bounded: connecting by the connect timeout (10 s unless the URL's
/// `connect_timeout` says otherwise), each operation by the operation timeout (30 s).
///
/// ```no_run
/// use aquaregia::{NewSession, SessionStore};
/// use aquaregia_postgres::PostgresSessionStore;
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let store = PostgresSessionStore::connect("postgres://agent@db.internal/agents").await?;
/// let session = store.create(NewSession::new("/srv/project")).await?;
/// println!("{}", session.id);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresSessionStore {
    pool: Pool,
    target: Arc<str>,
    operation_timeout: Duration,
    /// The last `updated_at` this store wrote: stamps only go up, so "newest first" is well
    /// defined for changes made in the same millisecond.
    last_stamp: Arc<Mutex<Timestamp>>,
}

impl fmt::Debug for PostgresSessionStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresSessionStore")
            .field("target", &self.target)
            .field("operation_timeout", &self.operation_timeout)
            .finish_non_exhaustive()
    }
}

/// Connection settings of a [`PostgresSessionStore`]; [`connect`](Self::connect) makes it.
#[must_use]
pub struct PostgresSessionStoreBuilder {
    url: String,
    max_connections: usize,
    connect_timeout: Duration,
    operation_timeout: Duration,
}

impl fmt::Debug for PostgresSessionStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password.
        f.debug_struct("PostgresSessionStoreBuilder")
            .field("max_connections", &self.max_connections)
            .field("connect_timeout", &self.connect_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .finish_non_exhaustive()
    }
}

impl PostgresSessionStoreBuilder {
    /// At most `max` connections at once (default 16, at least 1).
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }

    /// How long making a connection may take, unless the URL sets `connect_timeout`
    /// (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one store operation may take, waiting for a free connection included
    /// (default 30 s).
    pub fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// Connects (without TLS: use a local socket, a private network or a TLS-terminating
    /// proxy), creates or migrates the tables, and returns the store. Fails within the
    /// connect timeout when the database cannot be reached.
    pub async fn connect(self) -> Result<PostgresSessionStore, PostgresStoreError> {
        let mut config: tokio_postgres::Config = self
            .url
            .parse()
            .map_err(|source| PostgresStoreError::InvalidUrl { source })?;
        let connect_timeout = match config.get_connect_timeout() {
            Some(timeout) => *timeout,
            None => {
                config.connect_timeout(self.connect_timeout);
                self.connect_timeout
            }
        };
        if config.get_application_name().is_none() {
            config.application_name("aquaregia");
        }
        let target: Arc<str> = describe(&config).into();
        if config.get_ssl_mode() == SslMode::Require {
            return Err(PostgresStoreError::TlsRequired {
                target: target.to_string(),
            });
        }
        let pool = Pool::builder(Manager::new(config, NoTls))
            .max_size(self.max_connections)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(connect_timeout))
            .wait_timeout(Some(self.operation_timeout))
            .recycle_timeout(Some(connect_timeout))
            .build()
            .map_err(|error| PostgresStoreError::Pool {
                message: error.to_string(),
            })?;
        let store = PostgresSessionStore {
            pool,
            target,
            operation_timeout: self.operation_timeout,
            last_stamp: Arc::default(),
        };
        let mut client = store.client().await?;
        let bound = connect_timeout.max(self.operation_timeout);
        tokio::time::timeout(bound, migrate::migrate(&mut client, &store.target))
            .await
            .map_err(|_| store.timeout(bound))??;
        Ok(store)
    }
}

impl PostgresSessionStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database` or
    /// `host=... dbname=...`) with the default settings; see [`builder`](Self::builder).
    pub async fn connect(url: &str) -> Result<Self, PostgresStoreError> {
        Self::builder(url).connect().await
    }

    /// Settings for connecting to the database at `url`.
    pub fn builder(url: impl Into<String>) -> PostgresSessionStoreBuilder {
        PostgresSessionStoreBuilder {
            url: url.into(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            operation_timeout: DEFAULT_OPERATION_TIMEOUT,
        }
    }

    /// Where the store is (`user@host:port/database`, no password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The schema version this build reads and writes.
    pub fn schema_version() -> i32 {
        migrate::SCHEMA_VERSION
    }

    fn timeout(&self, after: Duration) -> PostgresStoreError {
        PostgresStoreError::Timeout {
            target: self.target.to_string(),
            after,
        }
    }

    fn query_error(&self, source: tokio_postgres::Error) -> SessionError {
        PostgresStoreError::Query {
            target: self.target.to_string(),
            source,
        }
        .into()
    }

    async fn client(&self) -> Result<deadpool_postgres::Client, PostgresStoreError> {
        self.pool.get().await.map_err(|error| match error {
            PoolError::Timeout(_) => self.timeout(self.operation_timeout),
            PoolError::Backend(source) => PostgresStoreError::Connect {
                target: self.target.to_string(),
                source,
            },
            other => PostgresStoreError::Pool {
                message: other.to_string(),
            },
        })
    }

    /// Runs `operation` within the operation timeout.
    async fn bounded<T>(
        &self,
        operation: impl Future<Output = Result<T, SessionError>>,
    ) -> Result<T, SessionError> {
        tokio::time::timeout(self.operation_timeout, operation)
            .await
            .unwrap_or_else(|_| Err(self.timeout(self.operation_timeout).into()))
    }

    /// A stamp later than every one this store wrote, and than `after`.
    fn next_stamp(&self, after: Timestamp) -> Timestamp {
        let mut last = self
            .last_stamp
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let floor = (*last).max(after);
        let now = Timestamp::now();
        let stamp = if now > floor {
            now
        } else {
            Timestamp::from_millis(floor.as_millis().saturating_add(1))
        };
        *last = stamp;
        stamp
    }

    /// Locks the session's row, changes its metadata and appends `turn` (if any), in one
    /// transaction. With `expected_turns`, the stored count must be exactly that.
    async fn change(
        &self,
        id: &SessionId,
        change: impl FnOnce(&mut SessionMeta) + Send,
        turn: Option<SessionTurn>,
        expected_turns: Option<u64>,
    ) -> Result<SessionMeta, SessionError> {
        let mut client = self.client().await?;
        let transaction = client
            .transaction()
            .await
            .map_err(|e| self.query_error(e))?;
        let lock = transaction
            .prepare_cached(LOCK_SESSION)
            .await
            .map_err(|e| self.query_error(e))?;
        let row = transaction
            .query_opt(&lock, &[&id.as_str()])
            .await
            .map_err(|e| self.query_error(e))?
            .ok_or_else(|| SessionError::NotFound { id: id.clone() })?;
        let stored_turns = count(row.get::<_, i64>("turns"));
        if let Some(expected) = expected_turns
            && expected != stored_turns
        {
            // Dropping the transaction rolls it back: nothing is stored.
            return Err(SessionError::Conflict {
                id: id.clone(),
                expected,
                actual: stored_turns,
            });
        }
        let mut meta = session_meta(id.as_str(), &row)?;
        change(&mut meta);
        meta.updated_at = self.next_stamp(meta.updated_at);
        let updated_at = millis(meta.updated_at);
        match turn {
            Some(turn) => {
                meta.turns = stored_turns.saturating_add(1);
                if meta.title.is_none() {
                    meta.title = turn.derived_title();
                }
                let (insert, update) = tokio::join!(
                    transaction.prepare_cached(INSERT_TURN),
                    transaction.prepare_cached(UPDATE_AFTER_TURN),
                );
                let (insert, update) = (
                    insert.map_err(|e| self.query_error(e))?,
                    update.map_err(|e| self.query_error(e))?,
                );
                let (key, seq, turns) = (id.as_str(), signed(stored_turns), signed(meta.turns));
                let (turn, stored_meta) = (Json(&turn), Json(&meta));
                let insert_params: [&(dyn ToSql + Sync); 3] = [&key, &seq, &turn];
                let update_params: [&(dyn ToSql + Sync); 4] =
                    [&key, &updated_at, &turns, &stored_meta];
                // Sent together: the client pipelines them on the connection.
                let (inserted, updated) = tokio::join!(
                    transaction.execute(&insert, &insert_params),
                    transaction.execute(&update, &update_params),
                );
                inserted.map_err(|e| self.query_error(e))?;
                updated.map_err(|e| self.query_error(e))?;
            }
            None => {
                let update = transaction
                    .prepare_cached(UPDATE_META)
                    .await
                    .map_err(|e| self.query_error(e))?;
                transaction
                    .execute(&update, &[&id.as_str(), &updated_at, &Json(&meta)])
                    .await
                    .map_err(|e| self.query_error(e))?;
            }
        }
        transaction
            .commit()
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(meta)
    }

    async fn load_session(&self, id: &SessionId) -> Result<StoredSession, SessionError> {
        let client = self.client().await?;
        let load = client
            .prepare_cached(LOAD)
            .await
            .map_err(|e| self.query_error(e))?;
        let rows = client
            .query(&load, &[&id.as_str()])
            .await
            .map_err(|e| self.query_error(e))?;
        let first = rows
            .first()
            .ok_or_else(|| SessionError::NotFound { id: id.clone() })?;
        let meta = session_meta(id.as_str(), first)?;
        let mut turns = Vec::with_capacity(rows.len());
        let mut skipped = 0;
        for row in &rows {
            match row.try_get::<_, Option<Json<SessionTurn>>>("turn") {
                Ok(Some(Json(turn))) => turns.push(turn),
                // No turn at all (the outer join's empty side).
                Ok(None) => {}
                Err(error) => {
                    skipped += 1;
                    let seq: Option<i64> = row.get("seq");
                    tracing::warn!(
                        session = %id,
                        seq,
                        %error,
                        "skipping a damaged turn row"
                    );
                }
            }
        }
        Ok(StoredSession::new(meta, turns, skipped))
    }

    /// One page, newest first. Rows whose metadata does not decode are skipped (with a
    /// warning) without shortening the page: more rows are read in their place.
    async fn list_sessions(&self, query: SessionQuery) -> Result<SessionPage, SessionError> {
        let mut after = query
            .cursor
            .as_deref()
            .map(parse_cursor)
            .transpose()?
            .map(|(stamp, id)| (millis(stamp), id.as_str().to_owned()));
        let cwd = match &query.cwd {
            Some(cwd) => Some(cwd_text(cwd)?),
            None => None,
        };
        let client = self.client().await?;
        let mut sessions: Vec<SessionMeta> = Vec::new();
        loop {
            let rows = self
                .list_rows(
                    &client,
                    cwd.as_deref(),
                    after.as_ref(),
                    query.limit + 1,
                    query.include_empty,
                )
                .await?;
            let last_batch = rows.len() <= query.limit;
            for row in &rows {
                if sessions.len() == query.limit {
                    // One more row exists: the page is full and another follows.
                    let next = sessions
                        .last()
                        .map(|last| format!("{}:{}", last.updated_at.as_millis(), last.id));
                    return Ok(SessionPage::new(sessions, next));
                }
                let id: &str = row.get("id");
                after = Some((row.get("updated_at"), id.to_owned()));
                match session_meta(id, row) {
                    Ok(meta) => sessions.push(meta),
                    Err(error) => {
                        tracing::warn!(session = id, %error, "skipping an unreadable session");
                    }
                }
            }
            if last_batch {
                return Ok(SessionPage::new(sessions, None));
            }
        }
    }

    /// At most `limit` rows, newest first, older than `after`, in `cwd` if given.
    async fn list_rows(
        &self,
        client: &deadpool_postgres::Client,
        cwd: Option<&str>,
        after: Option<&(i64, String)>,
        limit: usize,
        include_empty: bool,
    ) -> Result<Vec<Row>, SessionError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut sql = String::from(LIST_COLUMNS);
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&limit];
        let mut conditions = Vec::new();
        if !include_empty {
            conditions.push("turns > 0".to_owned());
        }
        if let Some(cwd) = &cwd {
            params.push(cwd);
            conditions.push(format!("cwd = ${}", params.len()));
        }
        if let Some((stamp, id)) = after {
            params.push(stamp);
            params.push(id);
            conditions.push(format!(
                "(updated_at, id) < (${}, ${})",
                params.len() - 1,
                params.len()
            ));
        }
        if !conditions.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&conditions.join(" AND "));
        }
        sql.push(' ');
        sql.push_str(NEWEST_FIRST);
        let statement = client
            .prepare_cached(&sql)
            .await
            .map_err(|e| self.query_error(e))?;
        client
            .query(&statement, &params)
            .await
            .map_err(|e| self.query_error(e))
    }
}

#[async_trait::async_trait]
impl SessionStore for PostgresSessionStore {
    async fn create(&self, new: NewSession) -> Result<SessionMeta, SessionError> {
        self.bounded(async {
            let meta = SessionMeta::created(new, self.next_stamp(Timestamp::default()));
            let cwd = cwd_text(&meta.cwd)?;
            let client = self.client().await?;
            let insert = client
                .prepare_cached(INSERT_SESSION)
                .await
                .map_err(|e| self.query_error(e))?;
            let inserted = client
                .execute(
                    &insert,
                    &[
                        &meta.id.as_str(),
                        &cwd,
                        &millis(meta.updated_at),
                        &Json(&meta),
                    ],
                )
                .await
                .map_err(|e| self.query_error(e))?;
            if inserted == 0 {
                return Err(SessionError::AlreadyExists { id: meta.id });
            }
            Ok(meta)
        })
        .await
    }

    /// The session row and every turn in one transaction (the turns in one statement): a
    /// failure leaves no half-copied session.
    async fn create_with_turns(
        &self,
        new: NewSession,
        turns: Vec<SessionTurn>,
    ) -> Result<SessionMeta, SessionError> {
        self.bounded(async {
            let mut meta = SessionMeta::created(new, self.next_stamp(Timestamp::default()));
            if meta.title.is_none() {
                meta.title = turns.first().and_then(SessionTurn::derived_title);
            }
            meta.turns = u64::try_from(turns.len()).unwrap_or(u64::MAX);
            let cwd = cwd_text(&meta.cwd)?;
            let mut client = self.client().await?;
            let transaction = client
                .transaction()
                .await
                .map_err(|e| self.query_error(e))?;
            let (insert, insert_turns) = tokio::join!(
                transaction.prepare_cached(INSERT_SESSION_WITH_TURNS),
                transaction.prepare_cached(INSERT_TURNS),
            );
            let (insert, insert_turns) = (
                insert.map_err(|e| self.query_error(e))?,
                insert_turns.map_err(|e| self.query_error(e))?,
            );
            let inserted = transaction
                .execute(
                    &insert,
                    &[
                        &meta.id.as_str(),
                        &cwd,
                        &millis(meta.updated_at),
                        &signed(meta.turns),
                        &Json(&meta),
                    ],
                )
                .await
                .map_err(|e| self.query_error(e))?;
            if inserted == 0 {
                return Err(SessionError::AlreadyExists { id: meta.id });
            }
            if !turns.is_empty() {
                let seqs: Vec<i64> = (0..turns.len())
                    .map(|seq| i64::try_from(seq).unwrap_or(i64::MAX))
                    .collect();
                let rows: Vec<Json<&SessionTurn>> = turns.iter().map(Json).collect();
                transaction
                    .execute(&insert_turns, &[&meta.id.as_str(), &seqs, &rows])
                    .await
                    .map_err(|e| self.query_error(e))?;
            }
            transaction
                .commit()
                .await
                .map_err(|e| self.query_error(e))?;
            Ok(meta)
        })
        .await
    }

    async fn append_turn(
        &self,
        id: &SessionId,
        turn: SessionTurn,
    ) -> Result<SessionMeta, SessionError> {
        self.bounded(self.change(id, |_| {}, Some(turn), None))
            .await
    }

    /// Locks the session's row (`SELECT ... FOR UPDATE`), compares its turn count and appends
    /// in one transaction, so two processes cannot both pass the check.
    async fn append_turn_checked(
        &self,
        id: &SessionId,
        turn: SessionTurn,
        expected_turns: u64,
    ) -> Result<SessionMeta, SessionError> {
        self.bounded(self.change(id, |_| {}, Some(turn), Some(expected_turns)))
            .await
    }

    async fn load(&self, id: &SessionId) -> Result<StoredSession, SessionError> {
        self.bounded(self.load_session(id)).await
    }

    async fn list(&self, query: SessionQuery) -> Result<SessionPage, SessionError> {
        self.bounded(self.list_sessions(query)).await
    }

    async fn update(
        &self,
        id: &SessionId,
        update: SessionUpdate,
    ) -> Result<SessionMeta, SessionError> {
        self.bounded(self.change(id, |meta| update.apply_to(meta), None, None))
            .await
    }

    async fn delete(&self, id: &SessionId) -> Result<(), SessionError> {
        self.bounded(async {
            let client = self.client().await?;
            let delete = client
                .prepare_cached(DELETE)
                .await
                .map_err(|e| self.query_error(e))?;
            let deleted = client
                .execute(&delete, &[&id.as_str()])
                .await
                .map_err(|e| self.query_error(e))?;
            if deleted == 0 {
                return Err(SessionError::NotFound { id: id.clone() });
            }
            Ok(())
        })
        .await
    }
}

/// A session's metadata from its row: the JSON, with the turn count and `updated_at` of the
/// columns (which the store keeps authoritative).
fn session_meta(id: &str, row: &Row) -> Result<SessionMeta, PostgresStoreError> {
    let damaged = |message: String| PostgresStoreError::DamagedSession {
        id: id.to_owned(),
        message,
    };
    let Json(mut meta) = row
        .try_get::<_, Json<SessionMeta>>("meta")
        .map_err(|error| damaged(error.to_string()))?;
    if meta.id.as_str() != id {
        return Err(damaged(format!("its metadata names session {}", meta.id)));
    }
    meta.turns = count(row.get::<_, i64>("turns"));
    meta.updated_at = Timestamp::from_millis(count(row.get::<_, i64>("updated_at")));
    Ok(meta)
}

fn cwd_text(cwd: &std::path::Path) -> Result<String, PostgresStoreError> {
    cwd.to_str()
        .map(str::to_owned)
        .ok_or_else(|| PostgresStoreError::Unencodable {
            what: "a working directory",
            message: format!("{} is not UTF-8", cwd.display()),
        })
}

fn parse_cursor(cursor: &str) -> Result<(Timestamp, SessionId), SessionError> {
    let invalid = || SessionError::InvalidCursor {
        cursor: cursor.to_owned(),
    };
    let (stamp, id) = cursor.split_once(':').ok_or_else(invalid)?;
    let stamp = stamp.parse::<u64>().map_err(|_| invalid())?;
    let id = SessionId::new(id).map_err(|_| invalid())?;
    Ok((Timestamp::from_millis(stamp), id))
}

fn millis(stamp: Timestamp) -> i64 {
    signed(stamp.as_millis())
}

fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// `user@host:port/database` (hosts and ports comma-separated when there are several).
fn describe(config: &tokio_postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|host| match host {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => PathBuf::from(path).display().to_string(),
        })
        .collect();
    let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
    let mut target = String::new();
    if let Some(user) = config.get_user() {
        target.push_str(user);
        target.push('@');
    }
    target.push_str(if hosts.is_empty() { "localhost" } else { "" });
    target.push_str(&hosts.join(","));
    target.push(':');
    target.push_str(if ports.is_empty() { "5432" } else { "" });
    target.push_str(&ports.join(","));
    target.push('/');
    target.push_str(config.get_dbname().or(config.get_user()).unwrap_or(""));
    target
}
