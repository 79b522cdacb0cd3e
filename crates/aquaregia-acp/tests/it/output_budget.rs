//! The ACP agent cuts long tool results to its 25k-token default budget, and the full output
//! stays readable with `read_tool_output` in a later prompt of the same session.

use crate::support;

use serde_json::json;

use aquaregia_test_support::acp_client::select_permission;
use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::BOUND;
use support::model::{Model, tool_names, tool_results};
use support::raw::RawClient;
use support::scripts::marked_toolbox;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_results_are_cut_and_readable_for_the_whole_session() {
    let model = Model::new();
    let client = RawClient::connect(model.agent());
    client.set_handler(|request| select_permission(request, "allow_once"));
    client.initialize().await;
    let marker = marker("budget");
    let session = client
        .new_session("/tmp", json!([marked_toolbox("box", &marker)]))
        .await;

    // 200 KB of numbered 8-byte pieces, echoed back as "echo: ...".
    let long: String = (0..25_000).map(|n| format!("{n:07} ")).collect();
    model
        .tool_call("call-1", "box__echo", json!({"text": long}))
        .text("It is long.");
    let answer = client.prompt(&session, "echo it").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let results = tool_results(&model.requests()[1]);
    let (_, cut) = &results[0];
    assert!(cut.len() <= 100_000, "{} bytes", cut.len());
    assert!(cut.starts_with("echo: 0000000 ") && cut.ends_with("0024999 "));
    assert!(!cut.contains(" 0012500 "), "the middle is cut");

    // Next prompt: the model reads the middle of call-1's output.
    let offset = "echo: ".len() + 12_500 * 8;
    model
        .tool_call(
            "call-2",
            "read_tool_output",
            json!({"id": "call-1", "offset": offset, "length": 16}),
        )
        .text("Read it.");
    let answer = client.prompt(&session, "read the middle").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = model.requests();
    assert!(tool_names(&requests[2]).contains(&"read_tool_output".to_owned()));
    let results = tool_results(&requests[3]);
    let (id, read) = results.last().unwrap();
    assert_eq!(id, "call-2");
    assert!(read.starts_with("0012500 0012501 \n\n[bytes"), "{read}");
    // The built-in tool is read-only: only the echo needed the user's permission.
    let asked: Vec<_> = client
        .log()
        .into_iter()
        .filter(|message| message["method"] == "session/request_permission")
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["params"]["toolCall"]["toolCallId"], "call-1");

    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}
