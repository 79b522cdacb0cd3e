//! `Conversation`: the session is created by the first turn (an unprompted conversation leaves
//! nothing), a compaction or clear is stored as the base the next load continues from (found
//! even when an earlier turn no longer reads back), another writer's turns are merged, and the
//! shared slash-command parser.

use std::path::Path;
use std::sync::Arc;

use aquaregia::test_utils::ScriptedModel;
use aquaregia::{
    AgentBuilder, Conversation, FileSessionStore, Message, NewSession, SessionError, SessionId,
    SessionMeta, SessionPage, SessionQuery, SessionStore, SessionTurn, SessionUpdate,
    StoredSession, async_trait,
};
use serde_json::json;

fn store(dir: &Path) -> Arc<dyn SessionStore> {
    Arc::new(FileSessionStore::new(dir.join("sessions")))
}

/// Runs `prompt` after the conversation's history on a model answering `answer`: the prompt
/// and the run's output, to record.
async fn run(
    conversation: &Conversation,
    prompt: &str,
    answer: &str,
) -> ([Message; 1], aquaregia::AgentOutput) {
    let model = ScriptedModel::new().text(answer);
    let agent = AgentBuilder::new(Arc::new(model)).build().unwrap();
    let prompt = [Message::user(prompt)];
    let mut messages = conversation.history().to_vec();
    messages.extend(prompt.iter().cloned());
    (prompt, agent.run(messages).await.unwrap())
}

/// Runs one turn of `prompt` on a model answering `answer`, and records it.
async fn turn(conversation: &mut Conversation, prompt: &str, answer: &str) {
    let (prompt, output) = run(conversation, prompt, answer).await;
    conversation
        .record(&prompt, &output, Some("scripted:model"))
        .await
        .unwrap();
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(Message::text).collect()
}

#[tokio::test]
async fn the_first_turn_creates_the_session_and_nothing_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let mut conversation = Conversation::new("/project")
        .store(store.clone())
        .new_session(NewSession::new("/elsewhere").mode("default"));
    let id = conversation.session_id().clone();
    // A title and mode chosen before the first turn go into the session it creates.
    conversation
        .update(SessionUpdate::new().title("Named").mode("plan"))
        .await
        .unwrap();
    assert!(conversation.meta().is_none());
    let listed = store.list(SessionQuery::new()).await.unwrap();
    assert!(listed.sessions.is_empty(), "{listed:?}");

    turn(&mut conversation, "First question", "One.").await;
    let meta = conversation.meta().cloned().unwrap();
    assert_eq!(meta.id, id);
    assert_eq!(meta.turns, 1);
    assert_eq!(meta.title.as_deref(), Some("Named"));
    assert_eq!(meta.mode.as_deref(), Some("plan"));
    assert_eq!(meta.model.as_deref(), Some("scripted:model"));
    assert_eq!(meta.cwd, Path::new("/project"));

    turn(&mut conversation, "Second question", "Two.").await;
    let (loaded, stored) = Conversation::load(store.clone(), &id).await.unwrap();
    assert_eq!(stored.turns.len(), 2);
    assert_eq!(
        texts(loaded.history()),
        ["First question", "One.", "Second question", "Two."]
    );

    // Starting over leaves the old session as it was and saves nothing until the next turn.
    conversation.start_new();
    assert_ne!(conversation.session_id(), &id);
    assert!(conversation.history().is_empty() && conversation.meta().is_none());
    assert_eq!(
        store
            .list(SessionQuery::new())
            .await
            .unwrap()
            .sessions
            .len(),
        1
    );
}

#[tokio::test]
async fn a_rebase_is_what_a_loaded_session_continues_from() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let mut conversation = Conversation::new("/p").store(store.clone());
    turn(&mut conversation, "My name is Ann.", "Hi Ann.").await;
    turn(&mut conversation, "I like blue.", "Nice.").await;
    conversation
        .rebase(vec![Message::user("SUMMARY: Ann likes blue.")])
        .await
        .unwrap();
    turn(&mut conversation, "Who am I?", "Ann.").await;
    let expected = ["SUMMARY: Ann likes blue.", "Who am I?", "Ann."];
    assert_eq!(texts(conversation.history()), expected);

    let id = conversation.session_id().clone();
    let (loaded, stored) = Conversation::load(store.clone(), &id).await.unwrap();
    // Every turn stays stored; the model goes on from the base.
    assert_eq!(stored.turns.len(), 3);
    assert_eq!(texts(loaded.history()), expected);

    // A clear is a rebase on nothing.
    let (mut loaded, _) = Conversation::load(store.clone(), &id).await.unwrap();
    loaded.rebase(Vec::new()).await.unwrap();
    let (reloaded, _) = Conversation::load(store, &id).await.unwrap();
    assert!(reloaded.history().is_empty(), "{:?}", reloaded.history());
}

#[tokio::test]
async fn the_acp_agents_earlier_base_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let meta = store
        .create(NewSession::new("/p").metadata(
            "aquaregia.acp.base",
            json!({"turns": 1, "messages": [Message::user("SUMMARY: earlier")]}),
        ))
        .await
        .unwrap();
    for (prompt, answer) in [("old", "old answer"), ("new", "new answer")] {
        store
            .append_turn(
                &meta.id,
                SessionTurn::new(vec![Message::user(prompt), Message::assistant(answer)]),
            )
            .await
            .unwrap();
    }
    let (loaded, _) = Conversation::load(store, &meta.id).await.unwrap();
    assert_eq!(
        texts(loaded.history()),
        ["SUMMARY: earlier", "new", "new answer"]
    );
}

/// A file store with a fault: it cannot read back a session's first turn but still counts it
/// (as a database row that no longer decodes), or its first metadata update fails.
#[derive(Debug)]
struct Faulty {
    inner: Arc<dyn SessionStore>,
    first_turn_unreadable: bool,
    update_failed: std::sync::atomic::AtomicBool,
    fail_first_update: bool,
}

impl Faulty {
    fn new(inner: Arc<dyn SessionStore>) -> Self {
        Self {
            inner,
            first_turn_unreadable: false,
            update_failed: std::sync::atomic::AtomicBool::new(false),
            fail_first_update: false,
        }
    }
}

#[async_trait]
impl SessionStore for Faulty {
    async fn create(&self, new: NewSession) -> Result<SessionMeta, SessionError> {
        self.inner.create(new).await
    }
    async fn append_turn(
        &self,
        id: &SessionId,
        turn: SessionTurn,
    ) -> Result<SessionMeta, SessionError> {
        self.inner.append_turn(id, turn).await
    }
    async fn load(&self, id: &SessionId) -> Result<StoredSession, SessionError> {
        let stored = self.inner.load(id).await?;
        if !self.first_turn_unreadable {
            return Ok(stored);
        }
        let turns = stored.turns.into_iter().skip(1).collect();
        Ok(StoredSession::new(stored.meta, turns, 1))
    }
    async fn list(&self, query: SessionQuery) -> Result<SessionPage, SessionError> {
        self.inner.list(query).await
    }
    async fn update(
        &self,
        id: &SessionId,
        update: SessionUpdate,
    ) -> Result<SessionMeta, SessionError> {
        let already = self
            .update_failed
            .swap(true, std::sync::atomic::Ordering::SeqCst);
        if self.fail_first_update && !already {
            return Err(SessionError::Backend("the database is away".into()));
        }
        self.inner.update(id, update).await
    }
    async fn delete(&self, id: &SessionId) -> Result<(), SessionError> {
        self.inner.delete(id).await
    }
}

#[tokio::test]
async fn the_base_is_found_when_an_earlier_turn_no_longer_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let files = store(dir.path());
    let mut conversation = Conversation::new("/p").store(files.clone());
    turn(&mut conversation, "one", "1").await;
    turn(&mut conversation, "two", "2").await;
    conversation
        .rebase(vec![Message::user("SUMMARY of one and two")])
        .await
        .unwrap();
    turn(&mut conversation, "three", "3").await;
    turn(&mut conversation, "four", "4").await;
    let id = conversation.session_id().clone();

    let damaged: Arc<dyn SessionStore> = Arc::new(Faulty {
        first_turn_unreadable: true,
        ..Faulty::new(files)
    });
    let (loaded, stored) = Conversation::load(damaged, &id).await.unwrap();
    assert_eq!((stored.turns.len(), stored.meta.turns), (3, 4));
    // Counting turns would skip "three": the base covers two stored turns, one of which is
    // not among those read back.
    assert_eq!(
        texts(loaded.history()),
        ["SUMMARY of one and two", "three", "3", "four", "4"]
    );
}

#[tokio::test]
async fn another_writers_turns_are_merged_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let mut first = Conversation::new("/p").store(store.clone());
    turn(&mut first, "shared start", "ok").await;
    let id = first.session_id().clone();
    let (mut second, _) = Conversation::load(store.clone(), &id).await.unwrap();

    turn(&mut first, "from the first", "first answer").await;
    let (prompt, output) = run(&second, "from the second", "second answer").await;
    let recorded = second.record(&prompt, &output, None).await.unwrap();
    assert_eq!(recorded.merged_turns, 1);
    assert!(!recorded.created);
    assert_eq!(
        texts(second.history()),
        [
            "shared start",
            "ok",
            "from the first",
            "first answer",
            "from the second",
            "second answer"
        ]
    );
    let (_, stored) = Conversation::load(store, &id).await.unwrap();
    assert_eq!(stored.turns.len(), 3);
}

#[tokio::test]
async fn without_a_store_the_history_still_grows() {
    let mut conversation = Conversation::new("/p");
    turn(&mut conversation, "hello", "hi").await;
    assert_eq!(texts(conversation.history()), ["hello", "hi"]);
    assert!(conversation.meta().is_none());
}

#[tokio::test]
async fn a_failed_save_keeps_the_session_for_the_next_turn() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(Faulty {
        fail_first_update: true,
        ..Faulty::new(store(dir.path()))
    });
    let mut conversation = Conversation::new("/p").store(store.clone());
    turn(&mut conversation, "one", "1").await;
    let id = conversation.session_id().clone();
    // The model changes, so the save updates the metadata first: that fails, the turn is not
    // saved, and the conversation still knows its session.
    let (prompt, output) = run(&conversation, "two", "2").await;
    assert!(
        conversation
            .record(&prompt, &output, Some("other:model"))
            .await
            .is_err()
    );
    assert_eq!(conversation.meta().map(|meta| &meta.id), Some(&id));
    turn(&mut conversation, "three", "3").await;
    let (_, stored) = Conversation::load(store, &id).await.unwrap();
    assert_eq!(stored.turns.len(), 2);
}
