//! SIGTERM and SIGHUP stop `aquaregia run` like Ctrl-C: the turn is cancelled, the servers and
//! their own children are closed, exit status 130.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use aquaregia_test_support::mock_model::{MockServer, Reply};
use aquaregia_test_support::processes::{
    KillMarked, assert_no_process_left, marker, processes_with_marker,
};
use common::{Scratch, cli, test_server_script, use_mock};
use serde_json::json;

/// `run` calling the test server's `hang` tool; the server was started by a shell that left a
/// `sleep` grandchild running beside it. Returns once the call is in flight.
async fn hanging_run_with_grandchild(
    scratch: &Scratch,
    model: &MockServer,
    marker: &str,
) -> tokio::process::Child {
    let hang_file = scratch.path.join("hang-started");
    let server = json!({
        "command": "sh",
        "args": ["-c", format!("sleep 600 & exec python3 '{}'", test_server_script())],
        "env": {"AQUAREGIA_TEST_MARKER": marker, "AQUAREGIA_TEST_HANG_FILE": hang_file},
    });
    scratch.config(&json!({ "test": server }));
    let mut command = cli(scratch);
    command
        .args(["run", "--yes", "Wait."])
        .env("AQUAREGIA_TEST_MARKER", marker);
    use_mock(&mut command, model);
    let mut command = tokio::process::Command::from(command);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("start aquaregia");
    let deadline = Instant::now() + common::BOUND;
    while !hang_file.exists() {
        assert!(Instant::now() < deadline, "the hang tool was never called");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child
}

async fn stops_cleanly_on(signal: &str) {
    let scratch = Scratch::new();
    let marker = marker(&format!("sig{signal}"));
    let _cleanup = KillMarked(marker.clone());
    let model =
        MockServer::with_replies(vec![Reply::tool_stream(&[("call_1", "hang", json!({}))])]).await;
    let child = hanging_run_with_grandchild(&scratch, &model, &marker).await;
    assert!(
        processes_with_marker(&marker).len() >= 3,
        "CLI, server and grandchild run"
    );

    let pid = child.id().expect("aquaregia is running");
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("aquaregia exits within 10 s of the signal")
        .expect("wait for aquaregia");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("✗ hang() cancelled"), "{stderr}");
    assert_no_process_left(&marker, Duration::from_secs(5)).await;
}

#[tokio::test]
async fn sigterm_closes_the_servers_and_their_children() {
    stops_cleanly_on("TERM").await;
}

#[tokio::test]
async fn sighup_closes_the_servers_and_their_children() {
    stops_cleanly_on("HUP").await;
}
