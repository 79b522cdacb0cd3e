//! Every kind of prompt content block reaches the model.

use crate::support;

use serde_json::{Value, json};

use aquaregia_test_support::mock_model::{MockServer, Reply};
use support::agent_for;
use support::raw::RawClient;

/// A 1x1 PNG.
const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

#[tokio::test]
async fn text_links_resources_and_images_reach_the_model() {
    let mock = MockServer::start().await;
    let client = RawClient::connect(agent_for(&mock));
    client.initialize().await;
    let session = client.new_session("/tmp", json!([])).await;

    mock.push(Reply::text("I see them."));
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

    let request = &mock.bodies()[0];
    let user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .expect("a user message")
        .clone();
    let parts: Vec<Value> = match &user["content"] {
        Value::Array(parts) => parts.clone(),
        other => panic!("several blocks make several parts: {other}"),
    };
    let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
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
    let images: Vec<&str> = parts
        .iter()
        .filter(|p| p["type"] == "image_url")
        .filter_map(|p| p["image_url"]["url"].as_str())
        .collect();
    assert_eq!(
        images,
        [
            format!("data:image/png;base64,{PIXEL}"),
            format!("data:image/png;base64,{PIXEL}")
        ],
        "the image and the image resource are images: {parts:#?}"
    );
    client.finish().await.unwrap();
}
