//! Every kind of prompt content block reaches the model.

use crate::support;

use serde_json::json;

use aquaregia::{ContentPart, ImageSource, Role};
use support::model::Model;
use support::raw::RawClient;

/// A 1x1 PNG.
const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

#[tokio::test]
async fn text_links_resources_and_images_reach_the_model() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    client.initialize().await;
    let session = client.new_session("/tmp", json!([])).await;

    model.text("I see them.");
    let response = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": "Review these"},
                {"type": "resource_link", "uri": "file:///src/lib.rs", "name": "lib.rs",
                 "mimeType": "text/x-rust"},
                {"type": "resource", "resource": {"uri": "file:///src/main.rs",
                 "mimeType": "text/x-rust", "text": "fn main() { println!(\"hi\"); }"}},
                {"type": "image", "mimeType": "image/png", "data": PIXEL},
                {"type": "resource", "resource": {"uri": "file:///shot.png",
                 "mimeType": "image/png", "blob": PIXEL}},
            ]}),
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let request = &model.requests()[0];
    let user = request
        .messages
        .iter()
        .rfind(|m| m.role == Role::User)
        .expect("a user message");
    let texts: Vec<&str> = user
        .content
        .iter()
        .filter_map(|part| match part {
            ContentPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts[0], "Review these");
    assert!(
        texts
            .iter()
            .any(|t| t.contains("lib.rs") && t.contains("file:///src/lib.rs")),
        "the link is named: {texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("file:///src/main.rs") && t.contains("println!(\"hi\")")),
        "the embedded resource's text is included: {texts:?}"
    );
    let images: Vec<(&str, &str)> = user
        .content
        .iter()
        .filter_map(|part| match part {
            ContentPart::Image {
                source: ImageSource::Base64 { mime_type, data },
            } => Some((mime_type.as_str(), data.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        images,
        [("image/png", PIXEL), ("image/png", PIXEL)],
        "the image and the image resource are images: {user:#?}"
    );
    client.finish().await.unwrap();
}

/// A prompt that cannot fit the model's context window is the client's to fix: an
/// invalid-params error naming the limit, not an internal error; the session goes on.
#[tokio::test]
async fn a_prompt_too_large_for_the_window_is_invalid_params_naming_the_limit() {
    let model = Model::new().context_window(2_000);
    let client = RawClient::connect(model.agent());
    client.initialize().await;
    let session = client.new_session("/tmp", json!([])).await;

    let huge = "lorem ipsum dolor sit amet ".repeat(2_000);
    let response = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": huge}]}),
        )
        .await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    let said = response["error"].to_string();
    assert!(
        said.contains("too large") && said.contains("at most"),
        "names the limit: {said}"
    );
    assert_eq!(model.request_count(), 0, "never sent");

    model.text("Fine.");
    let answer = client.prompt(&session, "a small one").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    client.finish().await.unwrap();
}
