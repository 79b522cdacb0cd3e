//! The history fed to the model stays within its context window: a loaded 200-turn session
//! with a small window is compacted (older turns summarised) before the request is sent, the
//! turn is still stored whole, and the compaction is stored too, so a later load continues
//! from it (no second summary) while `session/load` still replays every turn. `/compact` does
//! the same on demand and says what it did.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use aquaregia::{
    BYTES_PER_TOKEN, FileSessionStore, Message, NewSession, SessionStore, SessionTurn,
};
use aquaregia_acp::AcpServer;
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text};
use support::model::{Model, transcript};
use support::raw::RawClient;
use support::updates;

const WINDOW: u64 = 8_000;
const SUMMARY: &str = "Summary: the user asked 200 questions about lorem ipsum.";

/// An agent on the HTTP mock (the requests' size on the wire is checked) whose model has a
/// `WINDOW`-token context, keeping sessions in `store`.
fn agent(mock: &MockServer, store: Arc<FileSessionStore>) -> AcpServer {
    let client = aquaregia::Client::openai_chat()
        .base_url(&mock.url)
        .api_key("test-key")
        .max_retries(0)
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client builds");
    AcpServer::new(move |_session| {
        client
            .agent("mock-model")
            .max_steps(10)
            .context_window(WINDOW)
    })
    .session_store(store)
}

fn question(i: usize) -> String {
    format!("Question {i}: {}", "lorem ipsum ".repeat(35))
}

/// A stored session of `turns` question-and-answer turns (about 200 tokens each).
async fn long_session(store: &FileSessionStore, turns: usize) -> String {
    let meta = store.create(NewSession::new("/tmp")).await.unwrap();
    // Written as one file: as many synced appends would only measure the disk.
    let path = store.session_path(&meta.id);
    let mut body = std::fs::read_to_string(&path).unwrap();
    for i in 0..turns {
        let turn = SessionTurn::new(vec![
            Message::user(question(i)),
            Message::assistant(format!("Answer {i}: {}", "dolor sit ".repeat(40))),
        ]);
        body.push_str(&json!({"type": "turn", "turn": turn}).to_string());
        body.push('\n');
    }
    std::fs::write(&path, body).unwrap();
    meta.id.to_string()
}

fn load(id: &str) -> Value {
    json!({"sessionId": id, "cwd": "/tmp", "mcpServers": []})
}

/// The request's size in (estimated) tokens.
fn tokens(body: &Value) -> u64 {
    body.to_string().len() as u64 / BYTES_PER_TOKEN
}

fn texts(body: &Value) -> String {
    body["messages"].to_string()
}

fn agent_texts(client: &RawClient, session: &str) -> String {
    updates(&client.log(), session)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// A session store in a fresh directory, removed when the `TempDir` is dropped.
fn temp_store() -> (tempfile::TempDir, Arc<FileSessionStore>) {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store = Arc::new(FileSessionStore::new(dir.path()));
    (dir, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_loaded_long_session_is_compacted_to_fit_the_window() {
    let (_dir, store) = temp_store();
    let id = long_session(&store, 200).await;
    let mock = MockServer::start().await;
    // The summary (a plain call), then the answer.
    mock.push(Reply::json(chat_text(SUMMARY)))
        .push(Reply::text_stream(&["Carry on."]));

    let first = RawClient::connect(agent(&mock, store.clone()));
    first.initialize().await;
    let loaded = first.request("session/load", load(&id)).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let answer = first.prompt(&id, "What now?").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    first.finish().await.unwrap();

    let bodies = mock.bodies();
    assert_eq!(bodies.len(), 2, "a summary, then the answer");
    for body in &bodies {
        assert!(
            tokens(body) < WINDOW,
            "every request fits the window: {} tokens",
            tokens(body)
        );
    }
    let sent = texts(&bodies[1]);
    assert!(
        sent.contains(SUMMARY),
        "the summary stands for the old turns"
    );
    assert!(sent.contains("What now?"));
    assert!(
        !sent.contains("Question 0:"),
        "the oldest turns are not sent"
    );
    assert!(sent.contains("Question 199:"), "the newest turns are kept");

    // The turn is stored whole, after the 200 others.
    let stored = store
        .load(&aquaregia::SessionId::new(&id).unwrap())
        .await
        .unwrap();
    assert_eq!(stored.turns.len(), 201);
    let turn: Vec<String> = stored.turns[200]
        .messages
        .iter()
        .map(Message::text)
        .collect();
    assert_eq!(turn, ["What now?", "Carry on."]);

    // A new agent continues from the compaction: no second summary.
    mock.push(Reply::text_stream(&["Still here."]));
    let second = RawClient::connect(agent(&mock, store.clone()));
    second.initialize().await;
    second.request("session/load", load(&id)).await;
    let replayed: Vec<Value> = updates(&second.log(), &id)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .collect();
    assert_eq!(replayed.len(), 201, "the user sees every turn again");
    let answer = second.prompt(&id, "And then?").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    second.finish().await.unwrap();
    let bodies = mock.bodies();
    assert_eq!(bodies.len(), 3, "one request, no new summary");
    let sent = texts(&bodies[2]);
    assert!(sent.contains(SUMMARY) && sent.contains("What now?") && sent.contains("Carry on."));
    assert!(sent.contains("And then?") && !sent.contains("Question 0:"));
    assert!(tokens(&bodies[2]) < WINDOW);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn compact_summarises_the_conversation_on_demand() {
    let (_dir, store) = temp_store();
    let model = Model::new().context_window(WINDOW);
    let first = RawClient::connect(model.agent().session_store(store.clone()));
    first.initialize().await;
    let id = first.new_session("/tmp", json!([])).await;
    support::eventually("the commands", || {
        updates(&first.log(), &id)
            .iter()
            .any(|u| u["sessionUpdate"] == "available_commands_update")
    })
    .await;
    let announced = updates(&first.log(), &id)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "available_commands_update")
        .unwrap();
    assert!(
        announced["availableCommands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "compact"),
        "{announced}"
    );
    let empty = first.prompt(&id, "/compact").await;
    assert_eq!(empty["result"]["stopReason"], "end_turn", "{empty}");
    assert_eq!(model.request_count(), 0, "nothing to compact yet");

    for (question, answer) in [("Name a colour.", "Teal."), ("Name a fruit.", "Quince.")] {
        model.text(answer);
        first.prompt(&id, question).await;
    }
    model.text("Summary: a colour and a fruit were named.");
    let compacted = first.prompt(&id, "/compact").await;
    assert_eq!(compacted["result"]["stopReason"], "end_turn", "{compacted}");
    assert_eq!(model.request_count(), 3, "one summary call");
    let summary_request = transcript(&model.requests()[2]);
    assert!(
        summary_request.contains("Name a colour."),
        "{summary_request}"
    );
    let said = agent_texts(&first, &id);
    assert!(said.contains("Compacted the conversation"), "{said}");

    model.text("Plum.");
    first.prompt(&id, "Another fruit?").await;
    first.finish().await.unwrap();
    let sent = transcript(&model.requests()[3]);
    assert!(sent.contains("a colour and a fruit were named"), "{sent}");
    assert!(!sent.contains("Name a colour."), "summarised away: {sent}");
    assert!(sent.contains("Another fruit?"), "{sent}");

    // Stored: a new agent continues from the summary.
    model.text("Fig.");
    let second = RawClient::connect(model.agent().session_store(store));
    second.initialize().await;
    second.request("session/load", load(&id)).await;
    second.prompt(&id, "One more?").await;
    second.finish().await.unwrap();
    let sent = transcript(&model.requests()[4]);
    assert!(sent.contains("a colour and a fruit were named"), "{sent}");
    assert!(!sent.contains("Name a colour."), "{sent}");
    assert!(
        sent.contains("Another fruit?") && sent.contains("Plum."),
        "{sent}"
    );
}
