//! SSE framing the decoder must take whatever the server sends: `\r\n`, lone `\r`, and a body
//! that ends in `"\n\r"` (which used to panic the decoder at end of stream).

use aquaregia::{Client, Message, ModelRequest, StreamEvent};
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text_stream};
use futures::StreamExt;

fn client(server: &MockServer) -> Client {
    Client::openai_chat()
        .base_url(&server.url)
        .api_key("test")
        .max_retries(0)
        .build()
        .expect("client")
}

async fn streamed_text(body: String) -> String {
    let server = MockServer::with_replies([Reply::sse(body)]).await;
    let request = ModelRequest::new("m", vec![Message::user("hi")]);
    let mut stream = client(&server)
        .stream(&request)
        .await
        .expect("stream starts");
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event.expect("no stream error") {
            StreamEvent::TextDelta(delta) => text.push_str(&delta),
            StreamEvent::Finish(response) => {
                assert_eq!(response.text(), text);
                return text;
            }
            _ => {}
        }
    }
    panic!("the stream ended without a final response");
}

#[tokio::test]
async fn a_body_ending_in_newline_carriage_return_is_decoded() {
    // No `[DONE]`: the last event is ended by the end of the body, right after `"\n\r"`.
    let body = chat_text_stream(&["Hel", "lo"]).replace("\n\ndata: [DONE]\n\n", "\n\r");
    assert_eq!(streamed_text(body).await, "Hello");
}

#[tokio::test]
async fn crlf_and_lone_cr_line_endings_are_decoded() {
    let body = chat_text_stream(&["a", "b"]);
    assert_eq!(streamed_text(body.replace('\n', "\r\n")).await, "ab");
    assert_eq!(streamed_text(body.replace('\n', "\r")).await, "ab");
}
