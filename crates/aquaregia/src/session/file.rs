//! [`FileSessionStore`]: one JSON-lines file per session, plus a small metadata file for
//! listing.
//!
//! `<id>.jsonl` is the record: a `meta` line first, then one `turn` line per completed turn and
//! a `meta` line whenever the metadata changes (the last one wins). `<id>.meta.json` caches the
//! current metadata so listing does not read every turn; when it is missing or unreadable the
//! `.jsonl` file is read instead.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::{
    NewSession, SessionError, SessionId, SessionMeta, SessionPage, SessionQuery, SessionStore,
    SessionTurn, SessionUpdate, StoredSession, Timestamp,
};

/// The environment variable that overrides the data directory.
const DATA_DIR_ENV: &str = "AQUAREGIA_DATA_DIR";
const RECORD_EXT: &str = "jsonl";
const META_SUFFIX: &str = ".meta.json";

/// The embedded [`SessionStore`]: one JSON-lines file per session in a directory.
///
/// Each turn is appended (and synced) as one line when it completes, so a crash loses at most
/// the turn in flight; a last line cut short by a crash is skipped with a warning when loading.
/// Sessions are written independently of each other (their syncs overlap); the writers of one
/// session, in this process or another, take turns on its file's lock. On Unix the directory
/// is created `0700` and the files `0600`.
///
/// ```no_run
/// use aquaregia::{FileSessionStore, NewSession, SessionStore};
/// # async fn demo() -> Result<(), aquaregia::SessionError> {
/// let store = FileSessionStore::open_default()?;
/// let session = store.create(NewSession::new("/home/me/project")).await?;
/// println!("{}", session.id);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FileSessionStore {
    dir: PathBuf,
    /// The last `updated_at` given: they are strictly increasing within a store, so "newest
    /// first" is well defined even for changes in the same millisecond.
    last_stamp: Arc<Mutex<Timestamp>>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Record {
    Meta { meta: SessionMeta },
    Turn { turn: SessionTurn },
}

impl FileSessionStore {
    /// A store in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            last_stamp: Arc::default(),
        }
    }

    /// A store in [`FileSessionStore::default_dir`].
    pub fn open_default() -> Result<Self, SessionError> {
        Self::default_dir()
            .map(Self::new)
            .ok_or(SessionError::NoDataDir)
    }

    /// `$AQUAREGIA_DATA_DIR/sessions` when the variable is set, else
    /// `<platform data dir>/aquaregia/sessions` (`~/.local/share/aquaregia/sessions` on Linux).
    pub fn default_dir() -> Option<PathBuf> {
        let base = match std::env::var_os(DATA_DIR_ENV) {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => dirs::data_dir()?.join("aquaregia"),
        };
        Some(base.join("sessions"))
    }

    /// The directory the session files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The JSON-lines file of a session.
    pub fn session_path(&self, id: &SessionId) -> PathBuf {
        self.dir.join(format!("{id}.{RECORD_EXT}"))
    }

    fn meta_path(&self, id: &SessionId) -> PathBuf {
        self.dir.join(format!("{id}{META_SUFFIX}"))
    }

    /// Runs a blocking file operation off the async runtime. Operations on different
    /// sessions run at once (a store-wide turn would make every session wait for each other's
    /// syncs); the writers of one session take turns on its record's lock.
    async fn blocking<T, F>(&self, op: F) -> Result<T, SessionError>
    where
        T: Send + 'static,
        F: FnOnce(&Self) -> Result<T, SessionError> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || op(&store))
            .await
            .map_err(|join| SessionError::Backend(Box::new(join)))?
    }

    fn ensure_dir(&self) -> Result<(), SessionError> {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(&self.dir)
            .map_err(|source| io(&self.dir, source))
    }

    /// Opens a session's record for appending (creating it when `create`).
    fn open_record(&self, id: &SessionId, create: bool) -> Result<File, SessionError> {
        let path = self.session_path(id);
        let mut options = OpenOptions::new();
        options.read(true).append(true);
        if create {
            options.create_new(true);
        }
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(&path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => SessionError::NotFound { id: id.clone() },
            std::io::ErrorKind::AlreadyExists => SessionError::AlreadyExists { id: id.clone() },
            _ => io(&path, source),
        })
    }

    /// Appends records, a line each, in one write, and syncs them to disk.
    fn append_records(
        &self,
        id: &SessionId,
        file: &mut File,
        records: &[Record],
    ) -> Result<(), SessionError> {
        let path = self.session_path(id);
        let mut line = Vec::new();
        for record in records {
            line.extend(encode_line(&path, record)?);
        }
        // A crash mid-write leaves a line without its newline: end it so the new record starts
        // on a line of its own (the broken one is skipped when loading).
        if !ends_with_newline(file).map_err(|source| io(&path, source))? {
            line.insert(0, b'\n');
        }
        file.write_all(&line)
            .and_then(|()| file.sync_data())
            .map_err(|source| io(&path, source))
    }

    fn write_meta_cache(&self, meta: &SessionMeta) -> Result<(), SessionError> {
        let path = self.meta_path(&meta.id);
        let body = serde_json::to_vec(meta).map_err(|error| SessionError::Corrupt {
            path: path.clone(),
            message: format!("cannot encode metadata: {error}"),
        })?;
        crate::files::replace(&path, &body, crate::files::Access::Private)
            .map_err(|source| io(&path, source))
    }

    fn read_session(&self, id: &SessionId) -> Result<StoredSession, SessionError> {
        let path = self.session_path(id);
        let mut file = File::open(&path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => SessionError::NotFound { id: id.clone() },
            _ => io(&path, source),
        })?;
        // A writer in another process holds the exclusive lock while it appends: wait for it,
        // so a line it is writing is not read half-written.
        lock(&file, &path, Lock::Shared)?;
        read_record(&mut file, &path)
    }

    fn read_meta(&self, id: &SessionId) -> Result<SessionMeta, SessionError> {
        match self.cached_meta(id) {
            Some(meta) => Ok(meta),
            None => self.read_session(id).map(|session| session.meta),
        }
    }

    fn cached_meta(&self, id: &SessionId) -> Option<SessionMeta> {
        fs::read(self.meta_path(id))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<SessionMeta>(&bytes).ok())
            .filter(|meta| &meta.id == id)
    }

    fn next_stamp(&self) -> Timestamp {
        let mut last = crate::sync::lock(&self.last_stamp);
        let now = Timestamp::now();
        let stamp = if now > *last {
            now
        } else {
            Timestamp::from_millis(last.as_millis() + 1)
        };
        *last = stamp;
        stamp
    }

    /// Changes the metadata and appends `turn` (if any), holding the record's exclusive lock
    /// so that its writers, in this process or others, go one at a time. With
    /// `expected_turns`, the turns read back from the record must number exactly that, or
    /// nothing is written.
    fn update_locked(
        &self,
        id: &SessionId,
        change: impl FnOnce(&mut SessionMeta),
        turn: Option<SessionTurn>,
        expected_turns: Option<u64>,
    ) -> Result<SessionMeta, SessionError> {
        let path = self.session_path(id);
        let mut file = self.open_record(id, false)?;
        lock(&file, &path, Lock::Exclusive)?;
        // Deleted while this waited for the lock: writing would bring back its metadata.
        if !path.exists() {
            return Err(SessionError::NotFound { id: id.clone() });
        }
        // Read through the locked handle: another handle would wait for this very lock.
        let mut meta = match expected_turns {
            Some(expected) => {
                let current = read_record(&mut file, &path)?;
                let actual = u64::try_from(current.turns.len()).unwrap_or(u64::MAX);
                if actual != expected {
                    return Err(SessionError::Conflict {
                        id: id.clone(),
                        expected,
                        actual,
                    });
                }
                current.meta
            }
            None => match self.cached_meta(id) {
                Some(meta) => meta,
                None => read_record(&mut file, &path)?.meta,
            },
        };
        change(&mut meta);
        meta.updated_at = self.next_stamp();
        let mut records = Vec::new();
        if let Some(turn) = turn {
            meta.turns += 1;
            if meta.title.is_none() {
                meta.title = turn.derived_title();
            }
            records.push(Record::Turn { turn });
        }
        // One write and one sync: a crash mid-write leaves at worst the turn without its
        // metadata line, which loading recounts anyway.
        records.push(Record::Meta { meta: meta.clone() });
        self.append_records(id, &mut file, &records)?;
        self.write_meta_cache(&meta)?;
        Ok(meta)
    }

    fn list_sessions(&self, query: &SessionQuery) -> Result<SessionPage, SessionError> {
        let after = query.cursor.as_deref().map(parse_cursor).transpose()?;
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(SessionPage::default());
            }
            Err(source) => return Err(io(&self.dir, source)),
        };
        let mut sessions = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| io(&self.dir, source))?;
            let name = entry.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|name| name.strip_suffix(&format!(".{RECORD_EXT}")))
                .and_then(|stem| SessionId::new(stem).ok())
            else {
                continue;
            };
            let meta = match self.read_meta(&id) {
                Ok(meta) => meta,
                Err(error) => {
                    tracing::warn!(session = %id, %error, "skipping an unreadable session");
                    continue;
                }
            };
            if query.cwd.as_ref().is_some_and(|cwd| *cwd != meta.cwd)
                || (meta.turns == 0 && !query.include_empty)
            {
                continue;
            }
            if let Some((stamp, after_id)) = &after
                && (meta.updated_at, &meta.id) >= (*stamp, after_id)
            {
                continue;
            }
            sessions.push(meta);
        }
        sessions.sort_by(|a, b| (b.updated_at, &b.id).cmp(&(a.updated_at, &a.id)));
        let next_cursor = (sessions.len() > query.limit)
            .then(|| sessions.get(query.limit - 1))
            .flatten()
            .map(|last| format!("{}:{}", last.updated_at.as_millis(), last.id));
        sessions.truncate(query.limit);
        Ok(SessionPage {
            sessions,
            next_cursor,
        })
    }
}

#[async_trait::async_trait]
impl SessionStore for FileSessionStore {
    async fn create(&self, new: NewSession) -> Result<SessionMeta, SessionError> {
        self.blocking(move |store| {
            store.ensure_dir()?;
            let meta = SessionMeta::created(new, store.next_stamp());
            let mut file = store.open_record(&meta.id, true)?;
            store.append_records(&meta.id, &mut file, &[Record::Meta { meta: meta.clone() }])?;
            store.write_meta_cache(&meta)?;
            Ok(meta)
        })
        .await
    }

    /// Writes the whole record (metadata, every turn, the metadata counting them) in one
    /// write and one sync, to a temporary file renamed into place: a crash leaves either the
    /// whole session or none.
    async fn create_with_turns(
        &self,
        new: NewSession,
        turns: Vec<SessionTurn>,
    ) -> Result<SessionMeta, SessionError> {
        self.blocking(move |store| {
            store.ensure_dir()?;
            let mut meta = SessionMeta::created(new, store.next_stamp());
            let path = store.session_path(&meta.id);
            if path.exists() {
                return Err(SessionError::AlreadyExists { id: meta.id });
            }
            if meta.title.is_none() {
                meta.title = turns.first().and_then(SessionTurn::derived_title);
            }
            let created = meta.clone();
            meta.turns = u64::try_from(turns.len()).unwrap_or(u64::MAX);
            let mut body = encode_line(&path, &Record::Meta { meta: created })?;
            for turn in turns {
                body.extend(encode_line(&path, &Record::Turn { turn })?);
            }
            body.extend(encode_line(&path, &Record::Meta { meta: meta.clone() })?);
            crate::files::create_new(&path, &body, crate::files::Access::Private).map_err(
                |source| match source.kind() {
                    std::io::ErrorKind::AlreadyExists => SessionError::AlreadyExists {
                        id: meta.id.clone(),
                    },
                    _ => io(&path, source),
                },
            )?;
            store.write_meta_cache(&meta)?;
            Ok(meta)
        })
        .await
    }

    async fn append_turn(
        &self,
        id: &SessionId,
        turn: SessionTurn,
    ) -> Result<SessionMeta, SessionError> {
        let id = id.clone();
        self.blocking(move |store| store.update_locked(&id, |_| {}, Some(turn), None))
            .await
    }

    /// Checks the turn count and appends under an exclusive lock on the session file (an
    /// advisory lock, [`File::lock`]), so two processes cannot both pass the check.
    async fn append_turn_checked(
        &self,
        id: &SessionId,
        turn: SessionTurn,
        expected_turns: u64,
    ) -> Result<SessionMeta, SessionError> {
        let id = id.clone();
        self.blocking(move |store| {
            store.update_locked(&id, |_| {}, Some(turn), Some(expected_turns))
        })
        .await
    }

    async fn load(&self, id: &SessionId) -> Result<StoredSession, SessionError> {
        let id = id.clone();
        self.blocking(move |store| store.read_session(&id)).await
    }

    async fn list(&self, query: SessionQuery) -> Result<SessionPage, SessionError> {
        self.blocking(move |store| store.list_sessions(&query))
            .await
    }

    async fn update(
        &self,
        id: &SessionId,
        update: SessionUpdate,
    ) -> Result<SessionMeta, SessionError> {
        let id = id.clone();
        self.blocking(move |store| {
            store.update_locked(&id, |meta| update.apply_to(meta), None, None)
        })
        .await
    }

    async fn delete(&self, id: &SessionId) -> Result<(), SessionError> {
        let id = id.clone();
        self.blocking(move |store| {
            let path = store.session_path(&id);
            // A writer of the session finishes first (and one waiting for the lock then finds
            // it gone).
            let record = File::open(&path).map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => SessionError::NotFound { id: id.clone() },
                _ => io(&path, source),
            })?;
            lock(&record, &path, Lock::Exclusive)?;
            fs::remove_file(&path).map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => SessionError::NotFound { id: id.clone() },
                _ => io(&path, source),
            })?;
            let meta = store.meta_path(&id);
            match fs::remove_file(&meta) {
                Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                    Err(io(&meta, source))
                }
                _ => Ok(()),
            }
        })
        .await
    }
}

/// Reads a session file line by line: the last `meta` line wins, turns in order. A line that
/// is not a valid record (invalid UTF-8, bad JSON, a write cut short by a crash) is skipped
/// with a warning naming the file and line, and counted in [`StoredSession::skipped`].
fn parse_session(path: &Path, bytes: &[u8]) -> Result<StoredSession, SessionError> {
    let mut meta: Option<SessionMeta> = None;
    let mut turns = Vec::new();
    let mut skipped = 0;
    for (index, line) in bytes.split(|byte| *byte == b'\n').enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        let record = std::str::from_utf8(line)
            .map_err(|error| format!("invalid UTF-8: {error}"))
            .and_then(|line| serde_json::from_str::<Record>(line).map_err(|e| e.to_string()));
        match record {
            Ok(Record::Meta { meta: latest }) => meta = Some(latest),
            Ok(Record::Turn { turn }) => turns.push(turn),
            Err(error) => {
                skipped += 1;
                tracing::warn!(
                    path = %path.display(),
                    line = index + 1,
                    %error,
                    "skipping a damaged session line (a write cut short?)"
                );
            }
        }
    }
    let mut meta = meta.ok_or_else(|| SessionError::Corrupt {
        path: path.to_path_buf(),
        message: "no session metadata line".to_owned(),
    })?;
    meta.turns = u64::try_from(turns.len()).unwrap_or(u64::MAX);
    Ok(StoredSession {
        meta,
        turns,
        skipped,
    })
}

/// Reads a whole session record from the start through `file`.
fn read_record(file: &mut File, path: &Path) -> Result<StoredSession, SessionError> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_end(&mut bytes))
        .map_err(|source| io(path, source))?;
    parse_session(path, &bytes)
}

#[derive(Clone, Copy)]
enum Lock {
    Shared,
    Exclusive,
}

/// Takes an advisory lock on `file` (released when it is closed), waiting for other holders.
/// A file system without locks is used unlocked, with a warning.
fn lock(file: &File, path: &Path, kind: Lock) -> Result<(), SessionError> {
    let locked = match kind {
        Lock::Shared => file.lock_shared(),
        Lock::Exclusive => file.lock(),
    };
    match locked {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::Unsupported => {
            tracing::warn!(path = %path.display(), %error, "session file not locked");
            Ok(())
        }
        Err(source) => Err(io(path, source)),
    }
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

/// One record as a line of the session file.
fn encode_line(path: &Path, record: &Record) -> Result<Vec<u8>, SessionError> {
    let mut line = serde_json::to_vec(record).map_err(|error| SessionError::Corrupt {
        path: path.to_path_buf(),
        message: format!("cannot encode a record: {error}"),
    })?;
    line.push(b'\n');
    Ok(line)
}

fn ends_with_newline(file: &mut File) -> std::io::Result<bool> {
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(true);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last == [b'\n'])
}

fn io(path: &Path, source: std::io::Error) -> SessionError {
    SessionError::Io {
        path: path.to_path_buf(),
        source,
    }
}
