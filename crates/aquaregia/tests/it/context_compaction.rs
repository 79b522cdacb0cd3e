//! A conversation that outgrows a small configured window is compacted: older tool results
//! are elided first, then older turns are summarised by the model, and no request the model
//! receives is over the window.

use crate::common;

use aquaregia::{AgentEvent, Message, tool};
use aquaregia_test_support::mock_model::{
    MockServer, Reply, chat_text, chat_tool_calls, content_text,
};
use common::chat_client;
use futures::StreamExt;
use serde_json::{Value, json};

const WINDOW: u64 = 4_000;

/// A page of about 1,400 tokens whose text says which page it is.
fn page(n: u64) -> String {
    format!("page {n}: ").repeat(700)
}

fn compactions(events: &[AgentEvent]) -> Vec<(u64, u64, usize, usize)> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::Compacted {
                before_tokens,
                after_tokens,
                elided_tool_results,
                summarized_messages,
                ..
            } => Some((
                *before_tokens,
                *after_tokens,
                *elided_tool_results,
                *summarized_messages,
            )),
            _ => None,
        })
        .collect()
}

fn is_summary_request(body: &Value) -> bool {
    content_text(&body["messages"][0]).contains("You compact conversations")
}

#[tokio::test]
async fn tool_results_are_elided_then_turns_summarised_and_requests_stay_in_the_window() {
    let server = MockServer::start().await;
    for n in 1..=3 {
        let id = format!("call_{n}");
        server.push(Reply::json(chat_tool_calls(&[(
            &id,
            "fetch",
            json!({"page": n}),
        )])));
    }
    server.push(Reply::json(chat_text("Read three pages.")));
    let fetch = tool("fetch")
        .description("Fetches a page")
        .execute_raw(|args: Value| async move { Ok(page(args["page"].as_u64().unwrap_or(0))) });
    let agent = chat_client(&server)
        .agent("mock-model")
        .tool(fetch)
        .context_window(WINDOW)
        .max_output_tokens(500)
        .build()
        .unwrap();

    // Run 1: three big tool results; the oldest is elided before the last model call.
    let mut stream = agent.stream("Fetch pages 1 to 3.");
    let mut events = Vec::new();
    let mut output = None;
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            AgentEvent::Finish(finished) => output = Some(finished),
            other => events.push(other),
        }
    }
    let output = output.unwrap();
    assert_eq!(output.text, "Read three pages.");
    let first = compactions(&events);
    assert_eq!(first.len(), 1, "{first:?}");
    let (before, after, elided, summarized) = first[0];
    assert!(elided >= 1 && summarized == 0, "{first:?}");
    assert!(before > WINDOW - 500 && after <= WINDOW - 500, "{first:?}");
    let last = server.bodies().pop().unwrap();
    let sent = last.to_string();
    assert!(!sent.contains("page 1: page 1"), "page 1 was elided");
    assert!(sent.contains("tool output elided to save context"));
    assert!(sent.contains("page 3: page 3"), "the latest result stays");

    // Run 2: a long new message; eliding is not enough, the model summarises the rest.
    server.push(Reply::json(chat_text(
        "The user fetched pages 1 to 3 and read them.",
    )));
    server.push(Reply::json(chat_text("Done.")));
    let mut messages = output.messages;
    messages.push(Message::user(format!(
        "Now this: {}",
        "long text ".repeat(1_100)
    )));
    let mut stream = agent.stream(messages);
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        if let AgentEvent::Finish(finished) = &event {
            assert_eq!(finished.text, "Done.");
            // The summary replaced the older turns in the conversation handed back.
            assert!(
                finished.messages[0]
                    .text()
                    .contains("pages 1 to 3 and read them")
            );
        }
        events.push(event);
    }
    let second = compactions(&events);
    assert_eq!(second.len(), 1, "{second:?}");
    let (_, after, elided, summarized) = second[0];
    assert!(elided >= 1, "page 2 elided first: {second:?}");
    assert!(summarized >= 4, "{second:?}");
    assert!(after <= WINDOW - 500);

    let bodies = server.bodies();
    assert_eq!(bodies.len(), 6);
    assert!(
        is_summary_request(&bodies[4]),
        "the 5th request asks for a summary"
    );
    assert!(bodies[4].to_string().contains("Fetch pages 1 to 3."));
    assert!(!is_summary_request(&bodies[5]));
    let last = bodies[5].to_string();
    assert!(last.contains("pages 1 to 3 and read them") && !last.contains("page 3: page 3"));
    // Every request, summary call included, is within the window (JSON framing included:
    // bytes / 4 over-estimates the tokens).
    for (n, body) in bodies.iter().enumerate() {
        let bytes = serde_json::to_vec(body).unwrap().len() as u64;
        assert!(bytes / 4 <= WINDOW, "request {n}: {bytes} bytes");
    }
}
