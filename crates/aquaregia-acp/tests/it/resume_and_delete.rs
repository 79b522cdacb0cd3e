//! With a session store: `session/resume` continues a stored session without replaying it,
//! `session/close` leaves it stored, `session/delete` removes it.

use crate::support;

use std::sync::Arc;

use serde_json::json;

use aquaregia::FileSessionStore;
use support::model::{Model, transcript};
use support::raw::RawClient;
use support::updates;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resume_close_and_delete() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let model = Model::new();

    let first = RawClient::connect(model.agent().session_store(store.clone()));
    let init = first.initialize().await;
    let sessions = &init["agentCapabilities"]["sessionCapabilities"];
    assert!(
        sessions["resume"].is_object() && sessions["delete"].is_object(),
        "{init}"
    );
    let id = first.new_session("/tmp", json!([])).await;
    model.text("One.");
    first.prompt(&id, "First question").await;
    first.finish().await.unwrap();

    let second = RawClient::connect(model.agent().session_store(store));
    second.initialize().await;
    let resumed = second
        .request(
            "session/resume",
            json!({"sessionId": id, "cwd": "/tmp", "mcpServers": []}),
        )
        .await;
    assert!(resumed.get("result").is_some(), "{resumed}");
    assert!(
        !updates(&second.log(), &id)
            .iter()
            .any(|u| u["sessionUpdate"] == "user_message_chunk"),
        "resume does not replay"
    );
    model.text("Two.");
    let answer = second.prompt(&id, "Second question").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let history = transcript(&model.requests()[1]);
    assert!(
        history.contains("First question") && history.contains("One."),
        "{history}"
    );

    let closed = second
        .request("session/close", json!({"sessionId": id}))
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let listed = second.request("session/list", json!({})).await;
    assert_eq!(listed["result"]["sessions"][0]["sessionId"], id, "{listed}");

    let deleted = second
        .request("session/delete", json!({"sessionId": id}))
        .await;
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    let listed = second.request("session/list", json!({})).await;
    assert_eq!(listed["result"]["sessions"], json!([]), "{listed}");
    let gone = second
        .request(
            "session/resume",
            json!({"sessionId": id, "cwd": "/tmp", "mcpServers": []}),
        )
        .await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    second.finish().await.unwrap();
}

/// Two agents with stores of their own on one directory (as two processes would be) resume one
/// session: the one whose turn comes second is told, goes on from the latest history, and no
/// turn is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_changed_by_another_agent_is_reloaded_not_diverged() {
    use aquaregia::{SessionId, SessionStore};
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let dir = scratch.path();
    let model = Model::new();
    let resume = |id: &str| json!({"sessionId": id, "cwd": "/tmp", "mcpServers": []});

    let a = RawClient::connect(
        model
            .agent()
            .session_store(Arc::new(FileSessionStore::new(dir))),
    );
    a.initialize().await;
    let id = a.new_session("/tmp", json!([])).await;
    model.text("One.");
    a.prompt(&id, "First question").await;

    let b = RawClient::connect(
        model
            .agent()
            .session_store(Arc::new(FileSessionStore::new(dir))),
    );
    b.initialize().await;
    assert!(
        b.request("session/resume", resume(&id))
            .await
            .get("result")
            .is_some()
    );

    model.text("A two.");
    a.prompt(&id, "Question from A").await;
    model.text("B two.");
    let answer = b.prompt(&id, "Question from B").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let told = updates(&b.log(), &id)
        .iter()
        .any(|u| u.to_string().contains("changed by another process"));
    assert!(told, "B's client is told: {:?}", b.log());

    model.text("B three.");
    b.prompt(&id, "Another from B").await;
    let history = transcript(&model.requests()[3]);
    assert!(
        history.contains("Question from A") && history.contains("Question from B"),
        "B goes on from the latest history: {history}"
    );
    a.finish().await.unwrap();
    b.finish().await.unwrap();

    let stored = FileSessionStore::new(dir)
        .load(&SessionId::new(id.as_str()).unwrap())
        .await
        .unwrap();
    let prompts: Vec<String> = stored.turns.iter().map(|t| t.messages[0].text()).collect();
    assert_eq!(
        prompts,
        [
            "First question",
            "Question from A",
            "Question from B",
            "Another from B"
        ]
    );
}

/// A store on the same directory as another writer that appends a turn of its own just before
/// each of this agent's first `busy` checked appends, as a session other processes keep busy.
#[derive(Debug)]
struct Contended {
    own: FileSessionStore,
    other: FileSessionStore,
    busy: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl aquaregia::SessionStore for Contended {
    async fn create(
        &self,
        new: aquaregia::NewSession,
    ) -> Result<aquaregia::SessionMeta, aquaregia::SessionError> {
        self.own.create(new).await
    }

    async fn append_turn(
        &self,
        id: &aquaregia::SessionId,
        turn: aquaregia::SessionTurn,
    ) -> Result<aquaregia::SessionMeta, aquaregia::SessionError> {
        self.own.append_turn(id, turn).await
    }

    async fn append_turn_checked(
        &self,
        id: &aquaregia::SessionId,
        turn: aquaregia::SessionTurn,
        expected_turns: u64,
    ) -> Result<aquaregia::SessionMeta, aquaregia::SessionError> {
        use std::sync::atomic::Ordering;
        if self
            .busy
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            let theirs = aquaregia::SessionTurn::new(vec![
                aquaregia::Message::user("from elsewhere"),
                aquaregia::Message::assistant("Elsewhere."),
            ]);
            self.other.append_turn(id, theirs).await?;
        }
        self.own.append_turn_checked(id, turn, expected_turns).await
    }

    async fn load(
        &self,
        id: &aquaregia::SessionId,
    ) -> Result<aquaregia::StoredSession, aquaregia::SessionError> {
        self.own.load(id).await
    }

    async fn list(
        &self,
        query: aquaregia::SessionQuery,
    ) -> Result<aquaregia::SessionPage, aquaregia::SessionError> {
        self.own.list(query).await
    }

    async fn update(
        &self,
        id: &aquaregia::SessionId,
        update: aquaregia::SessionUpdate,
    ) -> Result<aquaregia::SessionMeta, aquaregia::SessionError> {
        self.own.update(id, update).await
    }

    async fn delete(&self, id: &aquaregia::SessionId) -> Result<(), aquaregia::SessionError> {
        self.own.delete(id).await
    }
}

/// Other writers get in before this agent's save twice in a row: it reloads and tries again
/// each time, and its turn lands after theirs instead of being dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_turn_is_saved_even_when_other_writers_get_in_first_twice() {
    use aquaregia::{SessionId, SessionStore};
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let dir = scratch.path();
    let store = Arc::new(Contended {
        own: FileSessionStore::new(dir),
        other: FileSessionStore::new(dir),
        busy: std::sync::atomic::AtomicUsize::new(0),
    });
    let model = Model::new();
    let client = RawClient::connect(model.agent().session_store(store.clone()));
    client.initialize().await;
    let id = client.new_session("/tmp", json!([])).await;
    model.text("One.");
    client.prompt(&id, "First question").await;

    store.busy.store(2, std::sync::atomic::Ordering::SeqCst);
    model.text("Two.");
    let answer = client.prompt(&id, "Second question").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let told = updates(&client.log(), &id)
        .iter()
        .any(|u| u.to_string().contains("its 2 new turn(s) were loaded"));
    assert!(told, "the client is told: {:?}", client.log());
    client.finish().await.unwrap();

    let stored = FileSessionStore::new(dir)
        .load(&SessionId::new(id.as_str()).unwrap())
        .await
        .unwrap();
    let prompts: Vec<String> = stored.turns.iter().map(|t| t.messages[0].text()).collect();
    assert_eq!(
        prompts,
        [
            "First question",
            "from elsewhere",
            "from elsewhere",
            "Second question"
        ]
    );
}

/// A session never prompted (an editor opening a chat panel) is not in `session/list`, yet
/// another agent process can open and prompt it (acpx makes a session, then prompts it from a
/// new process); once prompted it is listed, with the mode chosen before the first prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unprompted_session_is_not_listed_but_can_be_opened() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let model = Model::new();
    let first = RawClient::connect(model.agent().session_store(store.clone()));
    first.initialize().await;
    let idle = first.new_session("/tmp", json!([])).await;
    let id = first.new_session("/tmp", json!([])).await;
    let set = first
        .request(
            "session/set_mode",
            json!({"sessionId": id, "modeId": "accept_edits"}),
        )
        .await;
    assert!(set.get("result").is_some(), "{set}");
    let listed = first.request("session/list", json!({})).await;
    assert_eq!(listed["result"]["sessions"], json!([]), "{listed}");
    first.finish().await.unwrap();

    let second = RawClient::connect(model.agent().session_store(store.clone()));
    second.initialize().await;
    let resumed = second
        .request(
            "session/resume",
            json!({"sessionId": id, "cwd": "/tmp", "mcpServers": []}),
        )
        .await;
    assert!(resumed.get("result").is_some(), "{resumed}");
    assert_eq!(
        resumed["result"]["modes"]["currentModeId"], "accept_edits",
        "{resumed}"
    );
    model.text("One.");
    let answer = second.prompt(&id, "First question").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let listed = second.request("session/list", json!({})).await;
    let sessions = listed["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{listed}");
    assert_eq!(sessions[0]["sessionId"], id, "{listed}");
    assert_ne!(sessions[0]["sessionId"], idle, "{listed}");
    second.finish().await.unwrap();
}
