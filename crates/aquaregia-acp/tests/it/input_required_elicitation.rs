//! Elicitation inside an `input_required` round (MCP 2026-07-28, SEP-2322): a tool of an MCP
//! server on Streamable HTTP answers with questions instead of a result; each question
//! reaches the official Rust SDK's client role as `elicitation/create`, tied to the session
//! and the tool call that asked, and the call completes with the client's answers.

use crate::support;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ElicitationCapabilities, ElicitationFormCapabilities, InitializeRequest,
    McpServer, McpServerHttp, NewSessionRequest, StopReason,
};
use agent_client_protocol::v1::{SessionMessage, SessionSetup};
use agent_client_protocol::{ByteStreams, Client, Dispatch};
use aquaregia_test_support::mcp_servers::http::HttpMcpServer;
use aquaregia_test_support::mcp_servers::input_required_server::InputRequiredServer;
use serde_json::{Value, json};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use support::model::{Model, tool_results};
use support::{BOUND, serve_in_memory};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn questions_of_an_input_required_round_reach_the_client_and_complete_the_call() {
    let model = Model::new();
    model
        .tool_call("call-1", "travel__book", json!({}))
        .text("Booked.");
    let server = InputRequiredServer::default();
    let http = HttpMcpServer::start(server.clone()).await;
    let url = http.url.clone();

    let (client_end, serve) = serve_in_memory(model.agent());
    let (read, write) = tokio::io::split(client_end);
    let transport = ByteStreams::new(write.compat_write(), read.compat());
    let capabilities = ClientCapabilities::new()
        .elicitation(ElicitationCapabilities::new().form(ElicitationFormCapabilities::new()));
    let asked = Client
        .v1()
        .connect_with(transport, async move |cx| {
            cx.send_request(
                InitializeRequest::new(ProtocolVersion::V1).client_capabilities(capabilities),
            )
            .block_task()
            .await?;
            let travel = McpServer::Http(McpServerHttp::new("travel", url));
            cx.build_session_from(
                NewSessionRequest::new(std::env::temp_dir()).mcp_servers(vec![travel]),
            )
            .block_task()
            .run_until(async move |setup| {
                let SessionSetup { mut session, .. } = setup;
                session.send_prompt("Book me a trip")?;
                let mut asked: Vec<(String, Value)> = Vec::new();
                loop {
                    let message = tokio::time::timeout(BOUND, session.read_update())
                        .await
                        .expect("the turn went on too long")?;
                    match message {
                        SessionMessage::Message(Dispatch::Request(request, responder)) => {
                            let params = request.params().clone();
                            if request.method() == "session/request_permission" {
                                responder.respond(json!({"outcome": {
                                    "outcome": "selected", "optionId": "allow_once"}}))?;
                                continue;
                            }
                            let fields = &params["requestedSchema"]["properties"];
                            let answer = if fields.get("city").is_some() {
                                json!({"city": "Lisbon"})
                            } else {
                                json!({"nights": 3})
                            };
                            responder.respond(json!({"action": "accept", "content": answer}))?;
                            asked.push((request.method().to_owned(), params));
                        }
                        SessionMessage::Message(Dispatch::Notification(_)) => {}
                        SessionMessage::PromptResponse(response) => {
                            assert_eq!(response?.stop_reason, StopReason::EndTurn);
                            break;
                        }
                        other => panic!("unexpected session message {other:?}"),
                    }
                }
                Ok((asked, session.session_id().0.to_string()))
            })
            .await
        })
        .await
        .expect("the client ran to completion");
    let (asked, session_id) = asked;

    let questions: Vec<(&str, &str)> = asked
        .iter()
        .map(|(method, params)| (method.as_str(), params["message"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(questions.len(), 2, "{asked:#?}");
    for ((method, message), expected) in questions.iter().zip(["Which city?", "How many nights?"]) {
        assert_eq!(*method, "elicitation/create");
        assert!(
            message.contains(expected) && message.contains("travel"),
            "{message}"
        );
    }
    for (_, params) in &asked {
        assert_eq!(params["mode"], "form");
        assert_eq!(params["sessionId"], session_id.as_str());
        assert_eq!(
            params["toolCallId"], "call-1",
            "tied to the call that asked"
        );
    }
    // The server got the client's answers and the call completed with them.
    let received = server.received();
    assert_eq!(received.len(), 3, "{received:#?}");
    assert_eq!(
        received[1].input_responses,
        Some(json!({"city": {"action": "accept", "content": {"city": "Lisbon"}}}))
    );
    let requests = model.requests();
    let last = requests.last().expect("the model was called");
    let (_, result) = tool_results(last)
        .into_iter()
        .find(|(call, _)| call == "call-1")
        .unwrap_or_else(|| panic!("no result for call-1: {last:?}"));
    assert_eq!(result, "booked Lisbon for 3 nights (0 roots)");

    tokio::time::timeout(BOUND, serve)
        .await
        .expect("serve returned")
        .expect("no panic")
        .expect("clean end");
}
