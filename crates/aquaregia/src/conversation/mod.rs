//! A conversation saved turn by turn: what a chat front end keeps between prompts.
//!
//! [`Conversation`] holds the history the model continues from and, with a [`SessionStore`],
//! saves each completed turn as soon as it ends. The session is created with the first turn
//! (or at once, with [`Conversation::create`]); listings leave out sessions without a turn
//! either way, so a conversation opened and left without a prompt is not in the way. Another process
//! appending to the same session in between is not lost: the turn is saved after theirs and
//! the history continues from the latest state ([`Recorded::merged_turns`]).
//!
//! Compaction and `/clear` keep every stored turn (a front end can still show the whole
//! conversation) and store what the model continues from instead, the *base*, in the
//! session's metadata; [`Conversation::load`] applies it. [`SlashCommand`] reads the commands
//! front ends share (`/clear`, `/compact`, `/model`, `/<server>:<prompt>`...).

mod command;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::agent::{Agent, AgentOutput};
use crate::context::CompactionReport;
use crate::error::Error;
use crate::message::Message;
use crate::session::{
    NewSession, SessionError, SessionId, SessionMeta, SessionStore, SessionTurn, SessionUpdate,
    StoredSession, Timestamp,
};

pub use command::SlashCommand;

/// The metadata entry holding a session's [`Base`].
const BASE_KEY: &str = "aquaregia.base";
/// The metadata entry holding a fork's [`ForkOrigin`].
const FORK_KEY: &str = "aquaregia.fork";
/// Where versions before 0.2 of the ACP agent kept it.
const LEGACY_BASE_KEY: &str = "aquaregia.acp.base";

/// How many times a turn is saved on top of the latest state after another process changed
/// the session in between: each try reloads, so only a session that keeps moving that fast
/// loses the turn.
const SAVE_ATTEMPTS: usize = 5;

/// What the model continues from instead of the first `turns` stored turns: their compaction
/// (a summary and the newest messages), or nothing after a clear.
#[derive(Debug, Serialize, Deserialize)]
struct Base {
    /// How many stored turns it replaces, as [`SessionMeta::turns`] counted them.
    turns: u64,
    /// When the last turn it replaces completed: found again by this even when a turn before
    /// it can no longer be read back (so `turns` would count one too many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last: Option<Timestamp>,
    messages: Vec<Message>,
}

/// Where a forked session came from ([`Conversation::fork`]), kept in its metadata.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkOrigin {
    /// The session it was forked from.
    pub parent: SessionId,
    /// The parent's turn count when it was forked ([`SessionMeta::turns`]): the fork holds
    /// those turns, and neither sees the other's later ones.
    pub turns: u64,
    /// The prompt-cache key the fork's requests send, the parent's (the id of the first
    /// session of a chain of forks), so the provider's cache of their shared history hits.
    pub cache_key: String,
}

impl ForkOrigin {
    /// The origin recorded in a session's metadata; `None` for a session that is no fork.
    pub fn of(meta: &SessionMeta) -> Option<Self> {
        Self::from_metadata(&meta.metadata)
    }

    fn from_metadata(metadata: &serde_json::Map<String, serde_json::Value>) -> Option<Self> {
        metadata
            .get(FORK_KEY)
            .and_then(|value| serde_json::from_value(value.clone()).ok())
    }
}

/// The history a stored session continues from: its base (see the module docs), then the
/// turns after it; every turn's messages when it has none.
pub fn continued_history(stored: &StoredSession) -> Vec<Message> {
    let base = [BASE_KEY, LEGACY_BASE_KEY]
        .iter()
        .find_map(|key| stored.meta.metadata.get(*key))
        .and_then(|value| serde_json::from_value::<Base>(value.clone()).ok());
    let Some(base) = base else {
        return stored.messages();
    };
    let by_time = base.last.and_then(|last| {
        stored
            .turns
            .iter()
            .rposition(|turn| turn.completed_at == last)
            .map(|index| index + 1)
    });
    let by_count = usize::try_from(base.turns)
        .ok()
        .filter(|&covered| covered <= stored.turns.len());
    let covered = match (by_time, by_count, base.turns) {
        (Some(covered), _, _) | (None, Some(covered), _) => covered,
        // Nothing stored yet when it was made (a clear before the first turn).
        (None, None, 0) => 0,
        (None, None, _) => return stored.messages(),
    };
    let mut messages = base.messages;
    let later = stored.turns.get(covered..).unwrap_or_default();
    messages.extend(later.iter().flat_map(|turn| turn.messages.iter().cloned()));
    messages
}

/// A conversation: the history the model continues from and, optionally, the session it is
/// saved in ([`SessionStore`]), each completed turn saved as soon as it ends.
///
/// The session is created by the first turn (or at once, with [`create`](Self::create));
/// listings leave out sessions without a turn either way. A turn another process appended
/// meanwhile is not lost: this one is saved after it and the history continues from the latest
/// state ([`Recorded::merged_turns`]). [`compact`](Self::compact) and [`rebase`](Self::rebase)
/// keep every stored turn (a front end can still show the whole conversation) and store what
/// the model continues from instead, which [`load`](Self::load) applies.
#[derive(Debug)]
pub struct Conversation {
    store: Option<Arc<dyn SessionStore>>,
    id: SessionId,
    cwd: PathBuf,
    /// What a session created on the first turn starts with (mode, model...).
    template: Option<NewSession>,
    /// The stored session, once there is one.
    meta: Option<SessionMeta>,
    history: Vec<Message>,
    /// When the last stored turn completed (for the base).
    last_completed: Option<Timestamp>,
}

/// What [`Conversation::record`] saved.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The session's metadata after the turn was stored (`None` without a store).
    pub meta: Option<SessionMeta>,
    /// Whether this turn created the session.
    pub created: bool,
    /// Turns another process appended since this conversation last saw the session: they were
    /// loaded into the history, and this turn was saved after them.
    pub merged_turns: u64,
}

impl Conversation {
    /// A new, empty conversation in `cwd`, not saved anywhere until [`store`](Self::store)
    /// names a store; its session id is fresh.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        let cwd = cwd.into();
        Self {
            store: None,
            id: SessionId::generate(),
            template: None,
            meta: None,
            history: Vec::new(),
            last_completed: None,
            cwd,
        }
    }

    /// Saves the conversation in `store`, creating its session with the first recorded turn.
    #[must_use]
    pub fn store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The id the session gets when it is created (a fresh one by default): for front ends
    /// that hand the id out before the first turn.
    #[must_use]
    pub fn id(mut self, id: SessionId) -> Self {
        self.id = id;
        self
    }

    /// What the session starts with when the first turn creates it (its mode, model, title
    /// or metadata); its cwd and id are the conversation's.
    #[must_use]
    pub fn new_session(mut self, template: NewSession) -> Self {
        self.template = Some(template);
        self
    }

    /// A new, empty conversation whose session is created in `store` now rather than with the
    /// first turn: for front ends whose clients may open the session again, from another
    /// process, before prompting it. Listings leave it out until it has a turn
    /// ([`SessionQuery::include_empty`](crate::SessionQuery::include_empty)).
    pub async fn create(
        store: Arc<dyn SessionStore>,
        new: NewSession,
    ) -> Result<Self, SessionError> {
        let meta = store.create(new).await?;
        Ok(Self {
            id: meta.id.clone(),
            cwd: meta.cwd.clone(),
            template: None,
            history: Vec::new(),
            last_completed: None,
            meta: Some(meta),
            store: Some(store),
        })
    }

    /// Opens the stored session `id`: the history continues from its base and the turns after
    /// it. Returns the loaded session too (every turn, for a front end to show; `skipped`
    /// says how many records could not be read).
    pub async fn load(
        store: Arc<dyn SessionStore>,
        id: &SessionId,
    ) -> Result<(Self, StoredSession), SessionError> {
        let stored = store.load(id).await?;
        let conversation = Self {
            id: stored.meta.id.clone(),
            cwd: stored.meta.cwd.clone(),
            template: None,
            history: continued_history(&stored),
            last_completed: stored.turns.last().map(|turn| turn.completed_at),
            meta: Some(stored.meta.clone()),
            store: Some(store),
        };
        Ok((conversation, stored))
    }

    /// Opens the most recently updated session in `cwd`, if there is one (what `--continue`
    /// resumes).
    pub async fn load_latest(
        store: Arc<dyn SessionStore>,
        cwd: &Path,
    ) -> Result<Option<(Self, StoredSession)>, SessionError> {
        match store.latest(cwd.to_path_buf()).await? {
            Some(meta) => Self::load(store, &meta.id).await.map(Some),
            None => Ok(None),
        }
    }

    /// Forks the stored session `parent`: a new session holding a copy of every turn it holds
    /// now (what a running turn has not stored yet is not in it) and of its metadata (the
    /// compaction base, mode, model and title), with a [`ForkOrigin`] naming the parent. The
    /// parent is not changed, and later turns of either do not reach the other.
    ///
    /// The fork's history is the parent's, message for message, and its
    /// [`cache_key`](Self::cache_key) is the parent's: its first request starts with the
    /// same bytes the parent's next one would, so the provider's prompt cache hits. Returns
    /// the stored fork too, as [`load`](Self::load) does.
    pub async fn fork_stored(
        store: Arc<dyn SessionStore>,
        parent: &SessionId,
    ) -> Result<(Self, StoredSession), SessionError> {
        let stored = store.load(parent).await?;
        let origin = ForkOrigin {
            parent: stored.meta.id.clone(),
            turns: stored.meta.turns,
            cache_key: ForkOrigin::of(&stored.meta)
                .map_or_else(|| stored.meta.id.to_string(), |origin| origin.cache_key),
        };
        let mut new = NewSession::new(stored.meta.cwd.clone());
        new.title.clone_from(&stored.meta.title);
        new.model.clone_from(&stored.meta.model);
        new.mode.clone_from(&stored.meta.mode);
        new.metadata.clone_from(&stored.meta.metadata);
        new = new.metadata(FORK_KEY, fork_value(&origin)?);
        let meta = store.create_with_turns(new, stored.turns.clone()).await?;
        let fork = StoredSession::new(meta, stored.turns, stored.skipped);
        let conversation = Self {
            id: fork.meta.id.clone(),
            cwd: fork.meta.cwd.clone(),
            template: None,
            history: continued_history(&fork),
            last_completed: fork.turns.last().map(|turn| turn.completed_at),
            meta: Some(fork.meta.clone()),
            store: Some(store),
        };
        Ok((conversation, fork))
    }

    /// Forks this conversation at its latest stored turn ([`fork_stored`](Self::fork_stored)).
    /// A conversation not stored yet (no store, or no turn saved) forks in memory: the new
    /// one has the same history and a fresh id, and its session, created with its first
    /// turn, names this one as its parent.
    pub async fn fork(&self) -> Result<Self, SessionError> {
        if let (Some(store), Some(meta)) = (&self.store, &self.meta) {
            return Self::fork_stored(store.clone(), &meta.id)
                .await
                .map(|(fork, _)| fork);
        }
        let origin = ForkOrigin {
            parent: self.id.clone(),
            turns: 0,
            cache_key: self.cache_key(),
        };
        let template = self
            .template
            .clone()
            .unwrap_or_else(|| NewSession::new(self.cwd.clone()))
            .metadata(FORK_KEY, fork_value(&origin)?);
        Ok(Self {
            store: self.store.clone(),
            id: SessionId::generate(),
            cwd: self.cwd.clone(),
            template: Some(template),
            meta: None,
            history: self.history.clone(),
            last_completed: None,
        })
    }

    /// Where this conversation was forked from, if it is a fork.
    pub fn fork_origin(&self) -> Option<ForkOrigin> {
        match (&self.meta, &self.template) {
            (Some(meta), _) => ForkOrigin::of(meta),
            (None, Some(template)) => ForkOrigin::from_metadata(&template.metadata),
            (None, None) => None,
        }
    }

    /// The key its requests share a provider's prompt cache under (OpenAI's
    /// `prompt_cache_key`): the session id, or for a fork the parent's key, since a fork
    /// starts with the parent's history.
    pub fn cache_key(&self) -> String {
        self.fork_origin()
            .map_or_else(|| self.id.to_string(), |origin| origin.cache_key)
    }

    /// The session's id (the session itself exists once [`meta`](Self::meta) is `Some`).
    pub fn session_id(&self) -> &SessionId {
        &self.id
    }

    /// The working directory the conversation belongs to.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The stored session's metadata, once a turn was saved or the session was loaded.
    pub fn meta(&self) -> Option<&SessionMeta> {
        self.meta.as_ref()
    }

    /// The store it is saved in, if any.
    pub fn session_store(&self) -> Option<&Arc<dyn SessionStore>> {
        self.store.as_ref()
    }

    /// The history the model continues from.
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// How many turns the store holds for this session, as [`SessionMeta::turns`] counts them
    /// (zero before the first).
    pub fn stored_turns(&self) -> u64 {
        self.meta.as_ref().map_or(0, |meta| meta.turns)
    }

    /// Records the run that answered `prompt` (the messages added after the history): the
    /// history becomes the run's conversation and the new turn is saved.
    ///
    /// When the run compacted the history on the way (its messages no longer start with this
    /// conversation's history), the turn is found after the compacted part, which becomes the
    /// stored base; a prompt that was itself summarised is kept as it was, with the answer.
    /// The history is updated even when saving fails.
    pub async fn record(
        &mut self,
        prompt: &[Message],
        output: &AgentOutput,
        model: Option<&str>,
    ) -> Result<Recorded, SessionError> {
        let messages = &output.messages;
        let continues = messages.len() >= self.history.len()
            && messages.get(..self.history.len()) == Some(self.history.as_slice());
        let (base, turn) = if continues {
            (None, messages.get(self.history.len()..).unwrap_or_default())
        } else {
            match turn_start(messages, prompt) {
                Some(start) => (
                    Some(messages.get(..start).unwrap_or_default()),
                    messages.get(start..).unwrap_or_default(),
                ),
                None => (Some(&[][..]), &[][..]),
            }
        };
        let turn = if turn.is_empty() && !continues {
            prompt
                .iter()
                .cloned()
                .chain([Message::assistant(output.text.clone())])
                .collect()
        } else {
            turn.to_vec()
        };
        match base {
            Some(base) => {
                let base = base.to_vec();
                self.history = base.clone();
                self.history.extend(turn.iter().cloned());
                if self.meta.is_some() {
                    self.save_base(base).await?;
                } else if !base.is_empty() {
                    // The turn creates the session: the compaction goes in with it.
                    return self
                        .append(
                            SessionTurn::new(turn).usage(output.usage),
                            model,
                            Some(base),
                        )
                        .await;
                }
            }
            None => self.history.extend(turn.iter().cloned()),
        }
        self.append(SessionTurn::new(turn).usage(output.usage), model, None)
            .await
    }

    /// Saves `turn` (already in the history) after the stored ones, creating the session
    /// first when there is none; `base` is stored with a session created here.
    async fn append(
        &mut self,
        turn: SessionTurn,
        model: Option<&str>,
        base: Option<Vec<Message>>,
    ) -> Result<Recorded, SessionError> {
        let Some(store) = self.store.clone() else {
            return Ok(Recorded {
                meta: None,
                created: false,
                merged_turns: 0,
            });
        };
        let created = self.meta.is_none();
        let meta = match self.meta.clone() {
            Some(meta) => match model {
                Some(model) if meta.model.as_deref() != Some(model) => {
                    store
                        .update(&meta.id, SessionUpdate::new().model(model))
                        .await?
                }
                _ => meta,
            },
            None => {
                let mut new = self
                    .template
                    .clone()
                    .unwrap_or_else(|| NewSession::new(self.cwd.clone()));
                new.cwd.clone_from(&self.cwd);
                new = new.id(self.id.clone());
                if let Some(model) = model {
                    new = new.model(model);
                }
                if let Some(base) = base {
                    let base = Base {
                        turns: 0,
                        last: None,
                        messages: base,
                    };
                    new = new.metadata(BASE_KEY, base_value(&base)?);
                }
                store.create(new).await?
            }
        };
        let mut expected = meta.turns;
        let mut attempt = 1;
        let saved = loop {
            match store
                .append_turn_checked(&meta.id, turn.clone(), expected)
                .await
            {
                Err(SessionError::Conflict { .. }) if attempt < SAVE_ATTEMPTS => {
                    // Another process added turns: continue from them, this turn after them.
                    attempt += 1;
                    let latest = store.load(&meta.id).await?;
                    let mut history = continued_history(&latest);
                    history.extend(turn.messages.iter().cloned());
                    self.history = history;
                    expected = latest.meta.turns;
                }
                Err(error) => {
                    self.meta = Some(meta);
                    return Err(error);
                }
                Ok(saved) => break saved,
            }
        };
        let merged_turns = saved.turns.saturating_sub(meta.turns).saturating_sub(1);
        self.last_completed = Some(turn.completed_at);
        self.meta = Some(saved.clone());
        Ok(Recorded {
            meta: Some(saved),
            created,
            merged_turns,
        })
    }

    /// Replaces what the model continues from with `messages` (a compaction, or nothing to
    /// start afresh). The stored turns stay, so the whole conversation can still be shown;
    /// the replacement is stored with the session and applies when it is loaded again.
    pub async fn rebase(&mut self, messages: Vec<Message>) -> Result<(), SessionError> {
        self.history.clone_from(&messages);
        if self.meta.is_some() {
            self.save_base(messages).await?;
        }
        Ok(())
    }

    /// Compacts the history with `agent` ([`Agent::compact`]: a summary of everything but the
    /// latest turn, older tool results elided) and [`rebase`](Self::rebase)s on the result.
    /// Nothing changes when nothing was compacted.
    pub async fn compact(&mut self, agent: &Agent) -> Result<CompactionReport, Error> {
        let (messages, report) = agent.compact(&self.history).await?;
        if report.summarized_messages > 0 || report.elided_tool_results > 0 {
            // A store failure keeps its type for callers that downcast.
            self.rebase(messages)
                .await
                .map_err(|error| Error::Other(Box::new(error)))?;
        }
        Ok(report)
    }

    /// Starts a new conversation in the same place and store: an empty history and a fresh
    /// session id, saved from its first turn on. The old session stays as it was.
    pub fn start_new(&mut self) {
        self.history.clear();
        self.meta = None;
        self.last_completed = None;
        self.id = SessionId::generate();
        // A new conversation is nobody's fork.
        if let Some(template) = self.template.as_mut() {
            template.metadata.remove(FORK_KEY);
        }
    }

    /// Changes the stored session's title, mode, model or metadata; before the first turn the
    /// change goes into the session the first turn creates.
    pub async fn update(&mut self, update: SessionUpdate) -> Result<(), SessionError> {
        match (&self.store, &self.meta) {
            (Some(store), Some(meta)) => {
                self.meta = Some(store.update(&meta.id, update).await?);
            }
            _ => {
                let mut template = self
                    .template
                    .take()
                    .unwrap_or_else(|| NewSession::new(self.cwd.clone()));
                if let Some(title) = update.title {
                    template = template.title(title);
                }
                if let Some(model) = update.model {
                    template = template.model(model);
                }
                if let Some(mode) = update.mode {
                    template = template.mode(mode);
                }
                for (key, value) in update.metadata {
                    template = template.metadata(key, value);
                }
                self.template = Some(template);
            }
        }
        Ok(())
    }

    async fn save_base(&mut self, messages: Vec<Message>) -> Result<(), SessionError> {
        let (Some(store), Some(meta)) = (&self.store, &self.meta) else {
            return Ok(());
        };
        let base = Base {
            turns: meta.turns,
            last: self.last_completed,
            messages,
        };
        let update = SessionUpdate::new().metadata(BASE_KEY, base_value(&base)?);
        self.meta = Some(store.update(&meta.id, update).await?);
        Ok(())
    }
}

fn fork_value(origin: &ForkOrigin) -> Result<serde_json::Value, SessionError> {
    serde_json::to_value(origin).map_err(|error| SessionError::Backend(Box::new(error)))
}

fn base_value(base: &Base) -> Result<serde_json::Value, SessionError> {
    serde_json::to_value(base).map_err(|error| SessionError::Backend(Box::new(error)))
}

/// Where the turn that began with `prompt` starts in `messages`: the last place the prompt's
/// messages appear.
fn turn_start(messages: &[Message], prompt: &[Message]) -> Option<usize> {
    if prompt.is_empty() || messages.len() < prompt.len() {
        return None;
    }
    (0..=messages.len() - prompt.len())
        .rev()
        .find(|&start| messages.get(start..start + prompt.len()) == Some(prompt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turn_is_found_after_its_history_shrank() {
        let prompt = vec![Message::user("again")];
        let compacted = vec![
            Message::user("[Summary] earlier"),
            Message::user("again"),
            Message::assistant("done"),
        ];
        assert_eq!(turn_start(&compacted, &prompt), Some(1));
        let repeated = vec![
            Message::user("again"),
            Message::assistant("one"),
            Message::user("again"),
            Message::assistant("two"),
        ];
        assert_eq!(turn_start(&repeated, &prompt), Some(2));
        assert_eq!(turn_start(&[Message::assistant("x")], &prompt), None);
    }
}
