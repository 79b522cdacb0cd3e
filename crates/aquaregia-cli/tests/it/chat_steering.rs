//! Typing while `aquaregia chat` works, on a terminal: a plain line is queued and becomes the
//! next turn; `/steer <text>` reaches the running turn's next model request, after the
//! running tool call's result.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply, content_text};
use common::{Scratch, cli, on_pty, read_until, use_mock};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn a_line_typed_during_a_tool_call_is_queued_and_steer_reaches_the_same_turn() {
    let scratch = Scratch::new();
    let gate = scratch.path.join("copy-gate");
    let model = MockServer::with_replies(vec![
        Reply::tool_call("call_1", "copy", json!({})),
        Reply::text_stream(&["Copied."]),
        Reply::text_stream(&["Tidied."]),
    ])
    .await;
    let mut server = common::test_server_entry();
    server["env"] = json!({"AQUAREGIA_TEST_PROGRESS_GATE": gate});
    scratch.config(&json!({ "test": server }));
    let mut command = cli(&scratch);
    command.args(["chat", "--yes"]);
    use_mock(&mut command, &model);
    let mut child = on_pty(&command, 100).spawn().expect("start script");
    let mut keys = child.stdin.take().expect("piped stdin");
    let mut screen = child.stdout.take().expect("piped stdout");
    let mut seen = Vec::new();
    read_until(&mut screen, &mut seen, "> ").await;
    keys.write_all(b"Copy the files.\r").await.unwrap();
    // The tool runs (and waits for the gate): type a line, then steer.
    read_until(&mut screen, &mut seen, "copying files").await;
    keys.write_all(b"and then tidy up\r").await.unwrap();
    read_until(&mut screen, &mut seen, "(queued for the next turn").await;
    keys.write_all(b"/steer use the fast path\r").await.unwrap();
    read_until(&mut screen, &mut seen, "(steering: use the fast path").await;
    std::fs::write(&gate, "go").expect("open the gate");
    read_until(&mut screen, &mut seen, "Tidied.").await;
    keys.write_all(b"\x04").await.unwrap();
    tokio::time::timeout(common::BOUND, screen.read_to_end(&mut seen))
        .await
        .expect("the chat ends")
        .expect("read the pty output");
    let status = child.wait().await.expect("wait for script");
    let screen = String::from_utf8_lossy(&seen);
    assert!(status.success(), "{screen}");

    let requests = model.bodies();
    assert_eq!(requests.len(), 3, "{screen}");
    let users = |request: &Value| -> Vec<String> {
        request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .map(content_text)
            .collect()
    };
    // The steered line: in the first turn's second request, right after the tool result.
    let second = requests[1]["messages"].as_array().unwrap();
    let last = second.last().unwrap();
    assert_eq!(last["role"], "user", "{second:#?}");
    assert_eq!(content_text(last), "use the fast path");
    assert_eq!(second[second.len() - 2]["role"], "tool", "{second:#?}");
    assert!(
        !users(&requests[1]).contains(&"and then tidy up".to_owned()),
        "queued, not steered: {:?}",
        users(&requests[1])
    );
    // The queued line: the next turn.
    assert_eq!(
        users(&requests[2]).last().map(String::as_str),
        Some("and then tidy up"),
        "{:?}",
        users(&requests[2])
    );
    assert!(screen.contains("Copied."), "{screen}");
}
