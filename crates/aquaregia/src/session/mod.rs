//! Persistent conversations: the [`SessionStore`] trait and its embedded default,
//! [`FileSessionStore`].
//!
//! A session is its metadata ([`SessionMeta`]: cwd, title, model, mode, timestamps, turn count)
//! plus the turns completed so far ([`SessionTurn`]: the messages of one prompt, tool calls and
//! results included). Front ends (the CLI, the ACP agent) write a turn as soon as it completes,
//! so a crash loses at most the turn in flight. A service running many agents implements
//! [`SessionStore`] on its database instead.

mod file;
mod id;
mod time;

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::{Message, Role};
use crate::model::Usage;

pub use self::time::{Timestamp, TimestampParseError};
pub use file::FileSessionStore;
pub use id::SessionId;

/// Longest title derived from a first prompt, in characters.
const TITLE_MAX_CHARS: usize = 80;

/// Where sessions are kept. Object-safe: hold it as `Arc<dyn SessionStore>`.
///
/// Implementations keep [`SessionMeta::turns`] and [`SessionMeta::updated_at`] current, and
/// set the title from the first user message when none was given.
#[async_trait::async_trait]
pub trait SessionStore: Send + Sync + fmt::Debug {
    /// Creates a session and returns its metadata (with a fresh id unless `new` names one).
    async fn create(&self, new: NewSession) -> Result<SessionMeta, SessionError>;

    /// Appends one completed turn and returns the updated metadata.
    async fn append_turn(
        &self,
        id: &SessionId,
        turn: SessionTurn,
    ) -> Result<SessionMeta, SessionError>;

    /// Appends one completed turn only if the session still has exactly `expected_turns` turns
    /// as [`SessionMeta::turns`] counts them (the count the caller loaded, or the one the
    /// caller's last append returned); otherwise fails with [`SessionError::Conflict`] and
    /// stores nothing, so the caller reloads and appends on top of the latest state instead of
    /// diverging from another writer. Compare with `meta.turns`, not with the number of turns
    /// loaded: a store may count turns it could not read back ([`StoredSession::skipped`]).
    ///
    /// The default implementation loads the session and then appends, which is not atomic:
    /// stores shared between processes override it with a check and append that are.
    async fn append_turn_checked(
        &self,
        id: &SessionId,
        turn: SessionTurn,
        expected_turns: u64,
    ) -> Result<SessionMeta, SessionError> {
        let actual = self.load(id).await?.meta.turns;
        if actual != expected_turns {
            return Err(SessionError::Conflict {
                id: id.clone(),
                expected: expected_turns,
                actual,
            });
        }
        self.append_turn(id, turn).await
    }

    /// Creates a session already holding `turns` (oldest first, their timestamps and usage
    /// kept) and returns its metadata, counting them: what a fork
    /// ([`Conversation::fork`](crate::Conversation::fork)) or an import between stores writes.
    /// A session without a title takes the first turn's, as [`append_turn`](Self::append_turn)
    /// would give it.
    ///
    /// The default implementation creates the session and appends the turns one by one, which
    /// is neither atomic nor fast for long sessions: stores override it with one write (the
    /// file store) or one transaction (the Postgres store), so a failure leaves no half-copied
    /// session.
    async fn create_with_turns(
        &self,
        new: NewSession,
        turns: Vec<SessionTurn>,
    ) -> Result<SessionMeta, SessionError> {
        let mut meta = self.create(new).await?;
        for turn in turns {
            meta = self.append_turn(&meta.id, turn).await?;
        }
        Ok(meta)
    }

    /// Loads a session: its metadata and every turn, oldest first.
    async fn load(&self, id: &SessionId) -> Result<StoredSession, SessionError>;

    /// Lists sessions, most recently updated first, one page at a time.
    async fn list(&self, query: SessionQuery) -> Result<SessionPage, SessionError>;

    /// Changes the title, model, mode or metadata of a session; unset fields stay as they are.
    async fn update(
        &self,
        id: &SessionId,
        update: SessionUpdate,
    ) -> Result<SessionMeta, SessionError>;

    /// Deletes a session.
    async fn delete(&self, id: &SessionId) -> Result<(), SessionError>;

    /// The most recently updated session in `cwd` with at least one turn, if any (what
    /// `--continue` resumes).
    async fn latest(&self, cwd: PathBuf) -> Result<Option<SessionMeta>, SessionError> {
        let page = self.list(SessionQuery::new().cwd(cwd).limit(1)).await?;
        Ok(page.sessions.into_iter().next())
    }
}

/// A shared store is a store: `Arc<dyn SessionStore>` can be wrapped like a concrete one
/// (in [`RedactingStore`](crate::redact::RedactingStore), say). Every method, the provided
/// ones included, goes to the inner store, so its own atomic check is kept.
#[async_trait::async_trait]
impl<S: SessionStore + ?Sized> SessionStore for std::sync::Arc<S> {
    async fn create(&self, new: NewSession) -> Result<SessionMeta, SessionError> {
        (**self).create(new).await
    }

    async fn append_turn(
        &self,
        id: &SessionId,
        turn: SessionTurn,
    ) -> Result<SessionMeta, SessionError> {
        (**self).append_turn(id, turn).await
    }

    async fn append_turn_checked(
        &self,
        id: &SessionId,
        turn: SessionTurn,
        expected_turns: u64,
    ) -> Result<SessionMeta, SessionError> {
        (**self).append_turn_checked(id, turn, expected_turns).await
    }

    async fn create_with_turns(
        &self,
        new: NewSession,
        turns: Vec<SessionTurn>,
    ) -> Result<SessionMeta, SessionError> {
        (**self).create_with_turns(new, turns).await
    }

    async fn load(&self, id: &SessionId) -> Result<StoredSession, SessionError> {
        (**self).load(id).await
    }

    async fn list(&self, query: SessionQuery) -> Result<SessionPage, SessionError> {
        (**self).list(query).await
    }

    async fn update(
        &self,
        id: &SessionId,
        update: SessionUpdate,
    ) -> Result<SessionMeta, SessionError> {
        (**self).update(id, update).await
    }

    async fn delete(&self, id: &SessionId) -> Result<(), SessionError> {
        (**self).delete(id).await
    }

    async fn latest(&self, cwd: PathBuf) -> Result<Option<SessionMeta>, SessionError> {
        (**self).latest(cwd).await
    }
}

/// Everything known about a session except its turns.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    /// The session's id.
    pub id: SessionId,
    /// The working directory the session belongs to.
    pub cwd: PathBuf,
    /// A short title, from the first prompt unless set explicitly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The model spec in use (`openai:gpt-4o-mini`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The front end's mode (`default`, `plan`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// When the session was created.
    pub created_at: Timestamp,
    /// When a turn or the metadata last changed.
    pub updated_at: Timestamp,
    /// How many turns were completed and stored: the count
    /// [`SessionStore::append_turn_checked`] compares with. A store that keeps a turn it can
    /// no longer read back (a row edited by hand) still counts it; one that drops such turns
    /// (the file store, which skips damaged lines) does not.
    #[serde(default)]
    pub turns: u64,
    /// Front-end data kept with the session (the MCP servers to reconnect, say).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

impl SessionMeta {
    /// The metadata of a session created at `now` from `new`: its id (a fresh one unless
    /// `new` names one), cwd, title, model, mode and metadata, no turns, and `now` as both
    /// timestamps. For [`SessionStore`] implementations.
    pub fn created(new: NewSession, now: Timestamp) -> Self {
        Self {
            id: new.id.unwrap_or_else(SessionId::generate),
            cwd: new.cwd,
            title: new.title,
            model: new.model,
            mode: new.mode,
            created_at: now,
            updated_at: now,
            turns: 0,
            metadata: new.metadata,
        }
    }
}

/// What to create a session with. Only the cwd is required.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewSession {
    /// Use this id instead of a generated one (ids chosen by a client, say).
    pub id: Option<SessionId>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The title; when unset, the first prompt's first line becomes the title.
    pub title: Option<String>,
    /// The model spec.
    pub model: Option<String>,
    /// The mode.
    pub mode: Option<String>,
    /// Front-end data.
    pub metadata: Map<String, Value>,
}

impl NewSession {
    /// A session in `cwd`.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            cwd: cwd.into(),
            ..Self::default()
        }
    }

    /// Uses this id instead of a generated one.
    #[must_use]
    pub fn id(mut self, id: SessionId) -> Self {
        self.id = Some(id);
        self
    }

    /// Sets the title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets the model spec.
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the mode.
    #[must_use]
    pub fn mode(mut self, mode: impl Into<String>) -> Self {
        self.mode = Some(mode.into());
        self
    }

    /// Sets one metadata entry.
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }
}

/// Changes to a session's metadata; fields left `None` are kept.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionUpdate {
    /// A new title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A new model spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A new mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Metadata entries to set (others are kept).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

impl SessionUpdate {
    /// An update that changes nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets the model spec.
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the mode.
    #[must_use]
    pub fn mode(mut self, mode: impl Into<String>) -> Self {
        self.mode = Some(mode.into());
        self
    }

    /// Sets one metadata entry.
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }

    /// Applies this update to `meta` (timestamps are the store's business).
    pub fn apply_to(&self, meta: &mut SessionMeta) {
        if let Some(title) = &self.title {
            meta.title = Some(title.clone());
        }
        if let Some(model) = &self.model {
            meta.model = Some(model.clone());
        }
        if let Some(mode) = &self.mode {
            meta.mode = Some(mode.clone());
        }
        for (key, value) in &self.metadata {
            meta.metadata.insert(key.clone(), value.clone());
        }
    }
}

/// One completed turn: the prompt, the model's answers, tool calls and their results.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTurn {
    /// The turn's messages in order, starting with the user's prompt.
    pub messages: Vec<Message>,
    /// Tokens the turn used.
    #[serde(default)]
    pub usage: Usage,
    /// When the turn completed.
    pub completed_at: Timestamp,
}

impl SessionTurn {
    /// A turn made of these messages, completed now.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            usage: Usage::default(),
            completed_at: Timestamp::now(),
        }
    }

    /// Sets the tokens the turn used.
    #[must_use]
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// The title this turn gives a session that has none: the first line of its first user
    /// message, shortened to 80 characters.
    pub fn derived_title(&self) -> Option<String> {
        let prompt = self
            .messages
            .iter()
            .find(|message| message.role == Role::User)?
            .text();
        let line = prompt
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())?;
        let mut title: String = line.chars().take(TITLE_MAX_CHARS).collect();
        if line.chars().count() > TITLE_MAX_CHARS {
            title.push('…');
        }
        Some(title)
    }
}

/// A loaded session.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    /// Its metadata.
    pub meta: SessionMeta,
    /// Its turns, oldest first.
    pub turns: Vec<SessionTurn>,
    /// How many stored records could not be read back (invalid UTF-8, bad JSON, a line cut
    /// short by a crash) and were skipped; each was logged as a warning. Zero when the whole
    /// session loaded.
    pub skipped: usize,
}

impl StoredSession {
    /// A loaded session: its metadata, the turns read back (oldest first) and how many
    /// stored records could not be read. For [`SessionStore`] implementations.
    pub fn new(meta: SessionMeta, turns: Vec<SessionTurn>, skipped: usize) -> Self {
        Self {
            meta,
            turns,
            skipped,
        }
    }

    /// Every message of every turn, oldest first: the history to continue the conversation.
    pub fn messages(&self) -> Vec<Message> {
        self.turns
            .iter()
            .flat_map(|turn| turn.messages.iter().cloned())
            .collect()
    }
}

/// Which sessions to list.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionQuery {
    /// Only sessions in this working directory.
    pub cwd: Option<PathBuf>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// At most this many sessions per page.
    pub limit: usize,
    /// Sessions without a completed turn too (created and never prompted: an editor opening a
    /// chat panel makes one each time). Off by default: listings show conversations.
    pub include_empty: bool,
}

impl Default for SessionQuery {
    fn default() -> Self {
        Self {
            cwd: None,
            cursor: None,
            limit: 50,
            include_empty: false,
        }
    }
}

impl SessionQuery {
    /// The first page of the sessions with at least one turn, 50 per page.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only sessions in `cwd`.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Continues after a previous page.
    #[must_use]
    pub fn cursor(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }

    /// At most `limit` sessions per page (at least one).
    #[must_use]
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit.max(1);
        self
    }

    /// Lists sessions without a completed turn too.
    #[must_use]
    pub fn include_empty(mut self, include: bool) -> Self {
        self.include_empty = include;
        self
    }
}

/// One page of [`SessionStore::list`].
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionPage {
    /// The sessions, most recently updated first.
    pub sessions: Vec<SessionMeta>,
    /// Pass to [`SessionQuery::cursor`] for the next page; `None` on the last one.
    pub next_cursor: Option<String>,
}

impl SessionPage {
    /// A page of `sessions` (most recently updated first), with the cursor of the next one.
    /// For [`SessionStore`] implementations.
    pub fn new(sessions: Vec<SessionMeta>, next_cursor: Option<String>) -> Self {
        Self {
            sessions,
            next_cursor,
        }
    }
}

/// Why a session operation failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The id is empty, too long or has characters other than ASCII letters, digits, `-`, `_`.
    #[error("invalid session id {id:?}: use 1 to 128 ASCII letters, digits, '-' or '_'")]
    InvalidId {
        /// The rejected id.
        id: String,
    },
    /// No session has this id.
    #[error("no session {id}")]
    NotFound {
        /// The id asked for.
        id: SessionId,
    },
    /// A session with this id exists already.
    #[error("session {id} already exists")]
    AlreadyExists {
        /// The id asked for.
        id: SessionId,
    },
    /// The paging cursor was not one this store handed out.
    #[error("invalid session list cursor {cursor:?}")]
    InvalidCursor {
        /// The rejected cursor.
        cursor: String,
    },
    /// No data directory: neither `AQUAREGIA_DATA_DIR` nor a platform data dir is known.
    #[error("no data directory: set AQUAREGIA_DATA_DIR")]
    NoDataDir,
    /// Reading or writing the store failed.
    #[error("session store I/O on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A stored session could not be read back (its first line is not session metadata).
    #[error("session file {path} is corrupt: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Another writer (another process) appended to the session since the caller last saw it:
    /// it holds `actual` turns where the caller expected `expected`. Nothing was stored; reload
    /// the session and append on top of it.
    #[error(
        "session {id} was changed by another process: it has {actual} turns, {expected} were expected"
    )]
    Conflict {
        /// The session.
        id: SessionId,
        /// The turn count the caller had seen.
        expected: u64,
        /// The turn count the store holds.
        actual: u64,
    },
    /// A store backed by something else (a database) failed.
    #[error(transparent)]
    Backend(Box<dyn std::error::Error + Send + Sync>),
}
