//! Ctrl-C in `aquaregia chat` cancels the turn in flight (closing nothing else); the chat goes
//! on with the next line, and the cancelled turn is not kept in the history.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use aquaregia_test_support::mock_model::{MockServer, Reply};
use aquaregia_test_support::processes::{KillMarked, assert_no_process_left, marker};
use common::{Scratch, cli, test_server_entry, transcript, use_mock};
use serde_json::json;
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn ctrl_c_cancels_the_turn_and_the_chat_goes_on() {
    let scratch = Scratch::new();
    let marker = marker("chat-cancel");
    let _cleanup = KillMarked(marker.clone());
    let hang_file = scratch.path.join("hang-started");
    let mut server = test_server_entry();
    server["env"] = json!({
        "AQUAREGIA_TEST_MARKER": marker,
        "AQUAREGIA_TEST_HANG_FILE": hang_file,
    });
    scratch.config(&json!({ "test": server }));
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "hang", json!({}))]),
        Reply::text_stream(&["Still here."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args(["chat", "--yes"]);
    use_mock(&mut command, &model);
    let mut command = tokio::process::Command::from(command);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("start aquaregia chat");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(b"Wait forever.\n").await.unwrap();
    let deadline = Instant::now() + common::BOUND;
    while !hang_file.exists() {
        assert!(Instant::now() < deadline, "the hang tool was never called");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = child.id().expect("chat is running").to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    stdin.write_all(b"Are you there?\n").await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(common::BOUND, child.wait_with_output())
        .await
        .expect("chat ends at the end of input")
        .expect("wait for chat");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("✗ hang() cancelled"), "{stderr}");
    assert!(stderr.contains("turn cancelled"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Still here.\n");
    let requests = model.bodies();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        transcript(&requests[1]),
        [("user".to_owned(), "Are you there?".to_owned())]
    );
    assert_no_process_left(&marker, Duration::from_secs(5)).await;
}
