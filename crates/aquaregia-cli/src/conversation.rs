//! The saved conversation of a `run` or `chat`: the SDK's [`aquaregia::Conversation`] opened
//! from the command line's session flags, with what goes wrong said as warnings.

use std::path::Path;

use anyhow::{Context, bail};
use aquaregia::{AgentOutput, Message, SessionId, SessionMeta, SessionUpdate, StoredSession};

use crate::agent_args::SessionArgs;
use crate::output::Styles;
use crate::session_store;

/// The history so far, and where it is saved.
#[derive(Debug)]
pub(crate) struct Conversation {
    inner: aquaregia::Conversation,
}

impl Conversation {
    /// A new conversation, or the session `--continue`/`--resume` names, in the store the
    /// config files name (the file store by default).
    pub(crate) async fn open(args: &SessionArgs, config: Option<&Path>) -> anyhow::Result<Self> {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        let resuming = args.continue_latest || args.resume.is_some();
        if args.fork && !resuming {
            bail!("--fork forks a saved session: name it with --resume <ID> or --continue");
        }
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
        let Some(store) = store else {
            return Ok(Self {
                inner: aquaregia::Conversation::new(cwd),
            });
        };
        let loaded = if let Some(id) = &args.resume {
            let id = SessionId::new(id.as_str())?;
            if args.fork {
                aquaregia::Conversation::fork_stored(store, &id)
                    .await
                    .with_context(|| format!("cannot fork session {id}"))?
            } else {
                aquaregia::Conversation::load(store, &id)
                    .await
                    .with_context(|| format!("cannot resume session {id}"))?
            }
        } else if args.continue_latest {
            let Some(latest) = store.latest(cwd.clone()).await? else {
                bail!(
                    "no session to continue in {} (see `aquaregia sessions`)",
                    cwd.display()
                );
            };
            if args.fork {
                aquaregia::Conversation::fork_stored(store, &latest.id)
                    .await
                    .with_context(|| format!("cannot fork session {}", latest.id))?
            } else {
                aquaregia::Conversation::load(store, &latest.id)
                    .await
                    .with_context(|| format!("cannot continue session {}", latest.id))?
            }
        } else {
            return Ok(Self {
                inner: aquaregia::Conversation::new(cwd).store(store),
            });
        };
        let (inner, stored): (_, StoredSession) = loaded;
        if stored.skipped > 0 {
            warn(&format!(
                "session {}: {} damaged line(s) in its file were skipped; the intact turns \
                 were loaded",
                stored.meta.id, stored.skipped
            ));
        }
        Ok(Self { inner })
    }

    /// The messages the model continues from.
    pub(crate) fn history(&self) -> &[Message] {
        self.inner.history()
    }

    /// The saved session, once there is one.
    pub(crate) fn meta(&self) -> Option<&SessionMeta> {
        self.inner.meta()
    }

    /// The key the requests of this conversation share the provider's prompt cache under:
    /// the session's id, or for a fork the parent's key (their histories start the same).
    pub(crate) fn cache_key(&self) -> String {
        self.inner.cache_key()
    }

    /// Where this conversation was forked from, if it is a fork.
    pub(crate) fn fork_origin(&self) -> Option<aquaregia::ForkOrigin> {
        self.inner.fork_origin()
    }

    /// The model a resumed session used.
    pub(crate) fn model(&self) -> Option<&str> {
        self.inner.meta()?.model.as_deref()
    }

    /// The SDK's conversation, for compaction.
    pub(crate) fn inner(&mut self) -> &mut aquaregia::Conversation {
        &mut self.inner
    }

    /// Adds the turn that answered `prompt` and saves it, creating the session on its first
    /// turn. A failure to save is reported, not fatal.
    pub(crate) async fn record(&mut self, prompt: &[Message], output: &AgentOutput, model: &str) {
        match self.inner.record(prompt, output, Some(model)).await {
            Ok(recorded) if recorded.merged_turns > 0 => {
                let id = self.inner.session_id();
                warn(&format!(
                    "session {id} was changed by another process: its {} new turn(s) were \
                     loaded, and this turn was saved after them",
                    recorded.merged_turns
                ));
            }
            Ok(_) => {}
            Err(error) => warn(&format!("the turn was not saved: {error:#}")),
        }
    }

    /// Sets the session's title (before the first turn: the title it is saved with).
    pub(crate) async fn set_title(&mut self, title: &str) -> anyhow::Result<()> {
        self.inner.update(SessionUpdate::new().title(title)).await?;
        Ok(())
    }

    /// Starts over: an empty history, saved as a new session from the next turn on.
    pub(crate) fn clear(&mut self) {
        self.inner.start_new();
    }
}

fn warn(text: &str) {
    eprintln!("{} {text}", Styles::stderr().yellow("warning:"));
}
