//! The `model` config option of `aquaregia acp`: the configured model plus the provider's
//! `/v1/models`, and switching it changes the `model` of the next provider request.

use crate::common;

use serde_json::{Value, json};

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{BOUND, Scratch, acp_agent};

fn option<'a>(options: &'a Value, id: &str) -> &'a Value {
    options
        .as_array()
        .and_then(|options| options.iter().find(|o| o["id"] == id))
        .unwrap_or_else(|| panic!("a `{id}` option in {options}"))
}

fn values(option: &Value) -> Vec<String> {
    option["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_the_model_option_changes_the_next_request() {
    let mock = MockServer::start().await;
    mock.set_models(&["mock-large", "mock"]);
    let scratch = Scratch::new();
    let client = acp_agent(&scratch, &mock, "acp-model-option");
    client.initialize().await;
    let created = client
        .request(
            "session/new",
            json!({"cwd": scratch.path, "mcpServers": []}),
        )
        .await;
    let options = &created["result"]["configOptions"];
    let model = option(options, "model");
    assert_eq!(model["category"], "model", "{model}");
    assert_eq!(model["type"], "select", "{model}");
    assert_eq!(model["currentValue"], "mock");
    assert_eq!(
        values(model),
        ["mock", "mock-large"],
        "configured first, no duplicate"
    );
    let mode = option(options, "mode");
    assert_eq!(mode["category"], "mode");
    assert_eq!(
        values(mode),
        ["default", "accept_edits", "bypass_permissions", "plan"]
    );
    assert_eq!(mock.model_lists(), 1);
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();

    mock.push(Reply::text("First."));
    let answer = client.prompt(&session, "one").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let unknown = client
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "no-such-model"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let switched = client
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "mock-large"}),
        )
        .await;
    let model = option(&switched["result"]["configOptions"], "model");
    assert_eq!(model["currentValue"], "mock-large", "{switched}");

    mock.push(Reply::text("Second."));
    let answer = client.prompt(&session, "two").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let models: Vec<Value> = mock.bodies().iter().map(|b| b["model"].clone()).collect();
    assert_eq!(models, ["mock", "mock-large"]);
    assert!(
        mock.bodies()[1]["messages"].to_string().contains("First."),
        "the history goes on with the new model"
    );

    // A second session reuses the cached list.
    client
        .request(
            "session/new",
            json!({"cwd": scratch.path, "mcpServers": []}),
        )
        .await;
    assert_eq!(mock.model_lists(), 1, "the list is cached");
    client.close_write().await;
    assert!(
        client.wait_exit(BOUND).await.success(),
        "{}",
        client.stderr()
    );
}
