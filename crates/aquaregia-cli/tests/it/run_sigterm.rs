//! SIGTERM and SIGHUP stop `aquaregia run` like Ctrl-C: the turn is cancelled, the servers and
//! their own children are closed, exit status 130. Even SIGKILL, which the CLI never sees,
//! leaves no server or grandchild running: its reaper ends them.

use crate::common;

use std::time::Duration;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use aquaregia_test_support::processes::{
    KillMarked, assert_no_process_left, marker, processes_with_marker,
};
use common::{Scratch, hanging_run, test_server_script};
use serde_json::json;

/// `run` calling the test server's `hang` tool; the server was started by a shell that left a
/// `sleep` grandchild running beside it. Returns once the call is in flight.
async fn hanging_run_with_grandchild(
    scratch: &Scratch,
    model: &MockServer,
    marker: &str,
    stubborn: bool,
) -> tokio::process::Child {
    let server = json!({
        "command": "sh",
        "args": ["-c", format!("sleep 600 & exec python3 '{}'", test_server_script())],
    });
    hanging_run(scratch, model, marker, server, stubborn).await
}

async fn stops_cleanly_on(signal: &str) {
    let scratch = Scratch::new();
    let marker = marker(&format!("sig{signal}"));
    let _cleanup = KillMarked(marker.clone());
    let model =
        MockServer::with_replies(vec![Reply::tool_stream(&[("call_1", "hang", json!({}))])]).await;
    let child = hanging_run_with_grandchild(&scratch, &model, &marker, false).await;
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

/// SIGKILL gives the CLI no chance to close anything: the reaper it started sees its pipe
/// close and ends the server's process group, grandchild included, even though this server
/// ignores both stdin closing and SIGTERM.
#[tokio::test]
async fn sigkill_leaves_no_server_or_grandchild() {
    let scratch = Scratch::new();
    let marker = marker("sigkill");
    let _cleanup = KillMarked(marker.clone());
    let model =
        MockServer::with_replies(vec![Reply::tool_stream(&[("call_1", "hang", json!({}))])]).await;
    let mut child = hanging_run_with_grandchild(&scratch, &model, &marker, true).await;
    let cli = child.id().expect("aquaregia is running");
    let running = processes_with_marker(&marker);
    // The CLI, the reaper, the server and its grandchild.
    assert!(running.len() >= 4, "{running:?}");

    child.start_kill().expect("SIGKILL aquaregia");
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("aquaregia dies")
        .expect("wait for aquaregia");
    assert!(!status.success());
    assert!(!processes_with_marker(&marker).contains(&cli));
    // SIGTERM is ignored: the reaper waits out its grace period, then SIGKILLs the group.
    assert_no_process_left(&marker, Duration::from_secs(20)).await;
}
