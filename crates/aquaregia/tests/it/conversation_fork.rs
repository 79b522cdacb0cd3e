//! `Conversation::fork`: a new session holding the parent's turns and compaction base, naming
//! the parent and the turn it forked at; the two then diverge without touching each other; the
//! fork's first request is byte for byte the one the parent would send, under the parent's
//! cache key (kept through a fork of a fork); a conversation not stored yet forks in memory.

use std::path::Path;
use std::sync::Arc;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    AgentBuilder, Conversation, FileSessionStore, ForkOrigin, Message, SessionError, SessionId,
    SessionQuery, SessionStore,
};

fn store(dir: &Path) -> Arc<dyn SessionStore> {
    Arc::new(FileSessionStore::new(dir.join("sessions")))
}

/// Runs one turn of `prompt` on `model` and records it.
async fn turn(conversation: &mut Conversation, model: &ScriptedModel, prompt: &str) {
    let agent = AgentBuilder::new(Arc::new(model.clone())).build().unwrap();
    let prompt = [Message::user(prompt)];
    let mut messages = conversation.history().to_vec();
    messages.extend(prompt.iter().cloned());
    let output = agent.run(messages).await.unwrap();
    conversation
        .record(&prompt, &output, Some("scripted:model"))
        .await
        .unwrap();
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(Message::text).collect()
}

/// The messages of the model's latest request, as the JSON a provider encodes them from.
fn last_request(model: &ScriptedModel) -> String {
    let requests = model.requests();
    serde_json::to_string(&requests.last().unwrap().messages).unwrap()
}

#[tokio::test]
async fn a_fork_holds_the_parents_turns_and_then_each_goes_its_own_way() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let model = ScriptedModel::new().repeat_with(|| ScriptedReply::text("ok"));
    let mut parent = Conversation::new("/project").store(store.clone());
    turn(&mut parent, &model, "My name is Ann.").await;
    turn(&mut parent, &model, "I like blue.").await;
    let parent_id = parent.session_id().clone();

    let mut fork = parent.fork().await.unwrap();
    assert_ne!(fork.session_id(), &parent_id);
    assert_eq!(fork.history(), parent.history());
    let origin = fork.fork_origin().unwrap();
    assert_eq!(origin.parent, parent_id);
    assert_eq!(origin.turns, 2);
    assert_eq!(origin.cache_key, parent_id.as_str());
    assert_eq!(fork.cache_key(), parent.cache_key());
    assert_eq!(parent.cache_key(), parent_id.as_str());
    assert!(parent.fork_origin().is_none());
    let meta = fork.meta().unwrap().clone();
    assert_eq!(meta.turns, 2);
    assert_eq!(meta.title.as_deref(), Some("My name is Ann."));
    assert_eq!(meta.model.as_deref(), Some("scripted:model"));
    assert_eq!(ForkOrigin::of(&meta), Some(origin));

    turn(&mut parent, &model, "Parent only.").await;
    turn(&mut fork, &model, "Fork only.").await;
    let (parent_again, parent_stored) =
        Conversation::load(store.clone(), &parent_id).await.unwrap();
    let (fork_again, fork_stored) = Conversation::load(store.clone(), fork.session_id())
        .await
        .unwrap();
    let shared = ["My name is Ann.", "ok", "I like blue.", "ok"];
    assert_eq!(
        texts(parent_again.history()),
        [&shared[..], &["Parent only.", "ok"]].concat()
    );
    assert_eq!(
        texts(fork_again.history()),
        [&shared[..], &["Fork only.", "ok"]].concat()
    );
    assert_eq!((parent_stored.meta.turns, fork_stored.meta.turns), (3, 3));
    // The copied turns are the parent's, completion times included.
    assert_eq!(fork_stored.turns[..2], parent_stored.turns[..2]);
    assert!(parent_stored.meta.metadata.get("aquaregia.fork").is_none());
    // Both are listed, each a conversation of its own.
    let listed = store.list(SessionQuery::new()).await.unwrap();
    assert_eq!(listed.sessions.len(), 2);
}

#[tokio::test]
async fn the_forks_first_request_is_the_parents_byte_for_byte_after_a_compaction_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let model = ScriptedModel::new().repeat_with(|| ScriptedReply::text("ok"));
    let mut parent = Conversation::new("/project").store(store.clone());
    turn(&mut parent, &model, "one").await;
    turn(&mut parent, &model, "two").await;
    // The model continues from a compaction, which the fork must continue from too.
    parent
        .rebase(vec![Message::user("SUMMARY: one, two")])
        .await
        .unwrap();
    turn(&mut parent, &model, "three").await;

    let (mut fork, stored) = Conversation::fork_stored(store.clone(), parent.session_id())
        .await
        .unwrap();
    assert_eq!(stored.turns.len(), 3, "every turn, the compacted ones too");
    assert_eq!(texts(fork.history()), ["SUMMARY: one, two", "three", "ok"]);

    turn(&mut parent, &model, "next").await;
    let parents = last_request(&model);
    turn(&mut fork, &model, "next").await;
    let forks = last_request(&model);
    assert_eq!(forks, parents);

    // A fork of the fork keeps the first parent's cache key, and names its own parent.
    let grandchild = fork.fork().await.unwrap();
    let origin = grandchild.fork_origin().unwrap();
    assert_eq!(&origin.parent, fork.session_id());
    assert_eq!(origin.turns, 4);
    assert_eq!(grandchild.cache_key(), parent.session_id().as_str());
}

#[tokio::test]
async fn an_unknown_session_cannot_be_forked_and_an_unsaved_one_forks_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let missing = SessionId::new("no-such-session").unwrap();
    let error = Conversation::fork_stored(store.clone(), &missing)
        .await
        .unwrap_err();
    assert!(matches!(error, SessionError::NotFound { .. }), "{error:?}");

    // Not saved anywhere: the fork has the history, and its session (created with its first
    // turn) names the parent.
    let model = ScriptedModel::new().repeat_with(|| ScriptedReply::text("ok"));
    let mut memory = Conversation::new("/project");
    turn(&mut memory, &model, "hello").await;
    let forked = memory.fork().await.unwrap();
    assert_eq!(forked.history(), memory.history());
    assert_eq!(forked.cache_key(), memory.session_id().as_str());

    let mut unsaved = Conversation::new("/project").store(store.clone());
    let mut fork = unsaved.fork().await.unwrap();
    assert!(fork.meta().is_none());
    turn(&mut fork, &model, "first in the fork").await;
    let meta = fork.meta().unwrap();
    assert_eq!(
        ForkOrigin::of(meta).unwrap().parent,
        *unsaved.session_id(),
        "{meta:?}"
    );
    // Starting over makes a conversation that is nobody's fork.
    fork.start_new();
    assert!(fork.fork_origin().is_none());
    turn(&mut unsaved, &model, "the parent goes on").await;
    assert_eq!(texts(unsaved.history()), ["the parent goes on", "ok"]);
}
