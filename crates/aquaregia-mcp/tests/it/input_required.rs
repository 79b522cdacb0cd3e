//! Input-required rounds (2026-07-28, SEP-2322): a `tools/call` answered with
//! `input_required` is completed by answering the server's questions through the
//! connection's handlers and calling again with the answers and the server's state, for as
//! many rounds as the server asks, within a bound.

use std::sync::{Arc, Mutex};

use aquaregia_mcp::{Connector, ElicitationRequest, ElicitationResponse, McpConnection};
use aquaregia_test_support::mcp_servers::input_required_server::InputRequiredServer;
use serde_json::json;

/// A connection whose elicitation handler fills in any form from `answers` by field name,
/// recording the messages it was shown.
async fn connect(server: &InputRequiredServer) -> (McpConnection, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let connection = Connector::new()
        .name("travel")
        .on_elicitation(move |request| {
            let ElicitationRequest::Form {
                message, schema, ..
            } = request
            else {
                return std::future::ready(ElicitationResponse::Decline);
            };
            seen.lock().unwrap().push(message);
            let answer = if schema["properties"].get("city").is_some() {
                json!({"city": "Lisbon"})
            } else {
                json!({"nights": 3})
            };
            std::future::ready(ElicitationResponse::Accept(Some(answer)))
        })
        .transport(server.serve_duplex())
        .await
        .unwrap();
    (connection, asked)
}

async fn call(connection: &McpConnection, tool: &str) -> Result<String, String> {
    let tools = connection.tools().await.unwrap();
    let tool = tools
        .iter()
        .find(|candidate| candidate.descriptor().name == tool)
        .unwrap();
    tool.execute(json!({}))
        .await
        .map(|output| output.to_string())
        .map_err(|error| error.to_string())
}

#[tokio::test]
async fn a_call_completes_after_two_rounds_of_answers() {
    let server = InputRequiredServer::default();
    let (connection, asked) = connect(&server).await;
    assert_eq!(connection.server_info().protocol_version, "2026-07-28");

    let output = call(&connection, "book").await.unwrap();
    assert_eq!(output, "booked Lisbon for 3 nights (0 roots)");
    assert_eq!(
        *asked.lock().unwrap(),
        ["Which city?", "How many nights?"],
        "each question reaches the handler once"
    );

    let received = server.received();
    let states: Vec<_> = received
        .iter()
        .map(|r| r.request_state.as_deref())
        .collect();
    // The state is echoed exactly as the server sent it, quotes and all.
    assert_eq!(states, [None, Some("round-1"), Some("round-2 \"Lisbon\"")]);
    assert_eq!(received[0].input_responses, None);
    assert_eq!(
        received[1].input_responses,
        Some(json!({"city": {"action": "accept", "content": {"city": "Lisbon"}}}))
    );
    let third = received[2].input_responses.as_ref().unwrap();
    assert_eq!(third["nights"]["content"]["nights"], 3);
    assert_eq!(third["roots"]["roots"], json!([]));

    // The answers belong to that call only: the next call starts afresh.
    call(&connection, "book").await.unwrap();
    let next = &server.received()[3];
    assert_eq!(
        (next.request_state.as_deref(), &next.input_responses),
        (None, &None)
    );
    connection.close().await;
}

#[tokio::test]
async fn without_a_handler_the_question_is_declined_and_the_server_decides() {
    let server = InputRequiredServer::default();
    let connection = Connector::new()
        .transport(server.serve_duplex())
        .await
        .unwrap();
    // The server needs a city and gets a refusal: it fails the call its own way.
    let error = call(&connection, "book").await.unwrap_err();
    assert!(error.contains("no city in the answers"), "{error}");
    let received = server.received();
    assert_eq!(
        received[1].input_responses,
        Some(json!({"city": {"action": "decline"}}))
    );
    connection.close().await;
}

#[tokio::test]
async fn a_server_that_keeps_asking_is_given_up_on() {
    let server = InputRequiredServer::default();
    let (connection, _) = connect(&server).await;
    let error = call(&connection, "forever").await.unwrap_err();
    assert!(
        error.contains("travel") && error.contains("still needed input after 10 rounds"),
        "{error}"
    );
    assert_eq!(
        server.received().len(),
        11,
        "the first call and ten answers"
    );
    // The connection is still usable.
    assert!(call(&connection, "book").await.is_ok());
    connection.close().await;
}

#[tokio::test]
async fn sampling_without_a_handler_fails_the_call_clearly() {
    let server = InputRequiredServer::default();
    let (connection, _) = connect(&server).await;
    let error = call(&connection, "sample").await.unwrap_err();
    assert!(error.contains("no sampling handler"), "{error}");
    assert_eq!(
        server.received().len(),
        1,
        "nothing is sent back unanswered"
    );
    connection.close().await;
}
