//! The saved conversation of a `run` or `chat`: resumed from the session store, and each
//! completed turn appended to it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use aquaregia::{
    AgentOutput, Message, NewSession, SessionError, SessionId, SessionMeta, SessionStore,
    SessionTurn, SessionUpdate,
};

use crate::agent_args::SessionArgs;
use crate::output::Styles;
use crate::session_store;

/// How many times a turn is saved again on top of the latest state after another process
/// changed the session in between: each try reloads, so only a session that keeps moving that
/// fast loses the turn (with a warning).
const SAVE_ATTEMPTS: usize = 5;

/// The history so far, and where it is saved.
#[derive(Debug)]
pub(crate) struct Conversation {
    /// The configured store ([`session_store`]); turns are redacted before they are written.
    store: Option<Arc<dyn SessionStore>>,
    meta: Option<SessionMeta>,
    history: Vec<Message>,
    cwd: PathBuf,
}

impl Conversation {
    /// A new conversation, or the session `--continue`/`--resume` names, in the store the
    /// config files name (the file store by default).
    pub(crate) async fn open(args: &SessionArgs, config: Option<&Path>) -> anyhow::Result<Self> {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        let resuming = args.continue_latest || args.resume.is_some();
        let store = if args.no_save {
            None
        } else {
            match session_store::open(config, session_store::default_file_dir).await {
                Ok(open) => Some(open.store),
                Err(error) if resuming => return Err(error),
                Err(error) => {
                    warn(&format!("this conversation will not be saved: {error:#}"));
                    None
                }
            }
        };
        let mut conversation = Self {
            store,
            meta: None,
            history: Vec::new(),
            cwd,
        };
        let Some(store) = &conversation.store else {
            return Ok(conversation);
        };
        let id = if let Some(id) = &args.resume {
            SessionId::new(id.as_str())?
        } else if args.continue_latest {
            match store.latest(conversation.cwd.clone()).await? {
                Some(meta) => meta.id,
                None => bail!(
                    "no session to continue in {} (see `aquaregia sessions`)",
                    conversation.cwd.display()
                ),
            }
        } else {
            return Ok(conversation);
        };
        let session = store
            .load(&id)
            .await
            .with_context(|| format!("cannot resume session {id}"))?;
        if session.skipped > 0 {
            warn(&format!(
                "session {id}: {} damaged line(s) in its file were skipped; the intact turns \
                 were loaded",
                session.skipped
            ));
        }
        conversation.history = session.messages();
        conversation.meta = Some(session.meta);
        Ok(conversation)
    }

    /// The messages of the turns so far.
    pub(crate) fn history(&self) -> &[Message] {
        &self.history
    }

    /// The saved session, once there is one.
    pub(crate) fn meta(&self) -> Option<&SessionMeta> {
        self.meta.as_ref()
    }

    /// The model a resumed session used.
    pub(crate) fn model(&self) -> Option<&str> {
        self.meta.as_ref()?.model.as_deref()
    }

    /// Adds a completed turn (everything `output` has past the history) and saves it, creating
    /// the session on its first turn. A failure to save is reported, not fatal.
    pub(crate) async fn record(&mut self, output: &AgentOutput, model: &str) {
        let new: Vec<Message> = output
            .messages
            .get(self.history.len()..)
            .unwrap_or_default()
            .to_vec();
        self.history.extend(new.iter().cloned());
        if let Err(error) = self.save(new, output, model).await {
            warn(&format!("the turn was not saved: {error:#}"));
        }
    }

    async fn save(
        &mut self,
        messages: Vec<Message>,
        output: &AgentOutput,
        model: &str,
    ) -> anyhow::Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let meta = match &self.meta {
            Some(meta) if meta.model.as_deref() != Some(model) => {
                store
                    .update(&meta.id, SessionUpdate::new().model(model))
                    .await?
            }
            Some(meta) => meta.clone(),
            None => {
                store
                    .create(NewSession::new(self.cwd.clone()).model(model))
                    .await?
            }
        };
        let turn = SessionTurn::new(messages).usage(output.usage);
        let mut expected = meta.turns;
        let mut attempt = 1;
        let saved = loop {
            match store
                .append_turn_checked(&meta.id, turn.clone(), expected)
                .await
            {
                Err(SessionError::Conflict { .. }) if attempt < SAVE_ATTEMPTS => {
                    // Another process added turns: take them in, and save this turn after them.
                    attempt += 1;
                    let latest = store.load(&meta.id).await?;
                    let mut history = latest.messages();
                    history.extend(turn.messages.iter().cloned());
                    self.history = history;
                    expected = latest.meta.turns;
                }
                other => break other?,
            }
        };
        if attempt > 1 {
            let theirs = saved.turns.saturating_sub(meta.turns).saturating_sub(1);
            warn(&format!(
                "session {} was changed by another process: its {theirs} new turn(s) were \
                 loaded, and this turn was saved after them",
                meta.id
            ));
        }
        self.meta = Some(saved);
        Ok(())
    }

    /// Sets the saved session's title.
    pub(crate) async fn set_title(&mut self, title: &str) -> anyhow::Result<()> {
        let (Some(store), Some(meta)) = (&self.store, &self.meta) else {
            anyhow::bail!("nothing to name yet: the session is saved after its first turn");
        };
        self.meta = Some(
            store
                .update(&meta.id, SessionUpdate::new().title(title))
                .await?,
        );
        Ok(())
    }

    /// Replaces the history with `messages` (a compacted conversation), saved as a new session
    /// with the same title; the old session stays as it was. Returns the new session's id.
    pub(crate) async fn replace(
        &mut self,
        messages: Vec<Message>,
        model: &str,
    ) -> anyhow::Result<Option<SessionId>> {
        self.history.clone_from(&messages);
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let mut new = NewSession::new(self.cwd.clone()).model(model);
        if let Some(title) = self.meta.as_ref().and_then(|meta| meta.title.clone()) {
            new = new.title(title);
        }
        let meta = store.create(new).await?;
        self.meta = Some(
            store
                .append_turn(&meta.id, SessionTurn::new(messages))
                .await?,
        );
        Ok(Some(meta.id))
    }

    /// Starts over: an empty history, saved as a new session from the next turn on.
    pub(crate) fn clear(&mut self) {
        self.history.clear();
        self.meta = None;
    }
}

fn warn(text: &str) {
    eprintln!("{} {text}", Styles::stderr().yellow("warning:"));
}
