//! What the store's tests share: a fresh database, and turns to store.

use aquaregia::{
    ContentPart, Message, Role, SessionTurn, StoredSession, ToolCall, ToolOutput, ToolResult,
};
use aquaregia_postgres::PostgresSessionStore;
use aquaregia_test_support::postgres::PgCluster;
use serde_json::json;

/// A fresh database on the binary's cluster; returns its URL.
pub(crate) fn database(tag: &str) -> String {
    PgCluster::shared().database(tag)
}

/// A store on a fresh database.
pub(crate) async fn store(tag: &str) -> (PostgresSessionStore, String) {
    let url = database(tag);
    let store = PostgresSessionStore::connect(&url).await.unwrap();
    (store, url)
}

/// A turn with a prompt, a tool call, its result and an answer.
pub(crate) fn tool_turn(prompt: &str) -> SessionTurn {
    SessionTurn::new(vec![
        Message::user(prompt),
        Message::new(
            Role::Assistant,
            vec![ContentPart::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "get-sum".into(),
                arguments: json!({"a": 2, "b": 40}),
            })],
        ),
        Message::new(
            Role::Tool,
            vec![ContentPart::ToolResult(ToolResult {
                call_id: "call_1".into(),
                name: "get-sum".into(),
                output: ToolOutput::Json(json!({"sum": 42})),
                is_error: false,
            })],
        ),
        Message::assistant("The sum is 42."),
    ])
}

/// The prompts of a loaded session's turns.
pub(crate) fn prompts(session: &StoredSession) -> Vec<String> {
    session.turns.iter().map(|t| t.messages[0].text()).collect()
}
