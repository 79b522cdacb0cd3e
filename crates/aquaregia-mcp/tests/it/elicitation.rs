//! Elicitation: a server's question reaches `on_elicitation` (form and URL modes) and its
//! answer (accepted, declined, cancelled) reaches the server; without a handler the question
//! is declined. A URL question's completion reaches `on_elicitation_complete`.

use std::sync::{Arc, Mutex};

use aquaregia_mcp::{
    Connector, ElicitationComplete, ElicitationRequest, ElicitationResponse, McpConnection,
};
use aquaregia_test_support::mcp_servers::elicitation_server;
use serde_json::{Value, json};

async fn ask(connection: &McpConnection, mode: &str) -> String {
    let tools = connection.tools().await.unwrap();
    let output = tools[0].execute(json!({"mode": mode})).await.unwrap();
    output.to_string()
}

/// A connection whose handler answers `response` and records what it was asked.
async fn connect(
    response: ElicitationResponse,
) -> (McpConnection, Arc<Mutex<Vec<ElicitationRequest>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let connection = Connector::new()
        .name("asker")
        .on_elicitation(move |request| {
            seen.lock().unwrap().push(request);
            let response = response.clone();
            async move { response }
        })
        .transport(elicitation_server::serve_duplex())
        .await
        .unwrap();
    (connection, asked)
}

#[tokio::test]
async fn an_accepted_form_sends_the_values() {
    let (connection, asked) = connect(ElicitationResponse::Accept(Some(
        json!({"name": "Ann", "age": 41}),
    )))
    .await;
    let answer = ask(&connection, "form").await;
    let sent: Value = serde_json::from_str(answer.strip_prefix("accepted ").unwrap()).unwrap();
    assert_eq!(sent, json!({"name": "Ann", "age": 41}));

    let asked = asked.lock().unwrap().clone();
    let [
        ElicitationRequest::Form {
            server,
            message,
            schema,
        },
    ] = asked.as_slice()
    else {
        panic!("{asked:?}");
    };
    assert_eq!(
        (server.as_str(), message.as_str()),
        ("asker", "Who are you?")
    );
    assert_eq!(schema["properties"]["name"]["title"], "Your name");
    assert_eq!(schema["properties"]["age"]["default"], 30);
    assert_eq!(schema["required"], json!(["name"]));
    connection.close().await;
}

#[tokio::test]
async fn a_url_request_is_shown_and_accepted() {
    let (connection, asked) = connect(ElicitationResponse::Accept(None)).await;
    assert_eq!(ask(&connection, "url").await, "accepted");
    let asked = asked.lock().unwrap().clone();
    assert!(
        matches!(
            asked.as_slice(),
            [ElicitationRequest::Url { url, elicitation_id, .. }]
                if url == "https://auth.example/start" && elicitation_id == "e-1"
        ),
        "{asked:?}"
    );
    connection.close().await;
}

#[tokio::test]
async fn declined_and_cancelled_answers_reach_the_server() {
    let (declining, _) = connect(ElicitationResponse::Decline).await;
    assert_eq!(ask(&declining, "form").await, "declined");
    declining.close().await;

    let (cancelling, _) = connect(ElicitationResponse::Cancel).await;
    assert_eq!(ask(&cancelling, "form").await, "cancelled");
    cancelling.close().await;
}

#[tokio::test]
async fn without_a_handler_questions_are_declined() {
    let connection = Connector::new()
        .transport(elicitation_server::serve_duplex())
        .await
        .unwrap();
    let answer = ask(&connection, "form").await;
    assert_eq!(answer, "declined");
    connection.close().await;
}

#[tokio::test]
async fn a_url_requests_completion_is_heard() {
    let completed = Arc::new(Mutex::new(Vec::<ElicitationComplete>::new()));
    let heard = completed.clone();
    let connection = Connector::new()
        .name("asker")
        .on_elicitation(|_| async { ElicitationResponse::Accept(None) })
        .on_elicitation_complete(move |complete| heard.lock().unwrap().push(complete))
        .transport(elicitation_server::serve_duplex())
        .await
        .unwrap();
    assert_eq!(ask(&connection, "url").await, "accepted");
    // Sent before the tool's result; handled as it arrives.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while completed.lock().unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no completion heard");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let completed = completed.lock().unwrap().clone();
    let [complete] = completed.as_slice() else {
        panic!("{completed:?}");
    };
    assert_eq!(
        (complete.server.as_str(), complete.elicitation_id.as_str()),
        ("asker", "e-1")
    );
    connection.close().await;
}
