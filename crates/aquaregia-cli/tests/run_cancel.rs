//! Ctrl-C during `aquaregia run`: the run stops, the servers are closed, nothing is left behind.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use aquaregia_test_support::mock_model::{MockServer, Reply};
use aquaregia_test_support::processes::{
    KillMarked, assert_no_process_left, marker, processes_with_marker,
};
use common::{Scratch, cli, test_server_entry, use_mock};
use serde_json::json;

/// Starts `run` calling the test server's `hang` tool, and waits until the call is in flight.
async fn hanging_run(
    scratch: &Scratch,
    model: &MockServer,
    marker: &str,
    stubborn: bool,
) -> tokio::process::Child {
    let hang_file = scratch.path.join("hang-started");
    // Stdio servers do not inherit the CLI's environment: the server's variables go in `env`.
    let mut server = test_server_entry();
    server["env"] = json!({
        "AQUAREGIA_TEST_MARKER": marker,
        "AQUAREGIA_TEST_HANG_FILE": hang_file,
    });
    if stubborn {
        server["env"]["AQUAREGIA_TEST_STUBBORN"] = json!("1");
    }
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

fn interrupt(child: &tokio::process::Child) {
    let pid = child.id().expect("aquaregia is running");
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

#[tokio::test]
async fn ctrl_c_cancels_the_run_and_closes_the_servers() {
    let scratch = Scratch::new();
    let marker = marker("ctrl-c");
    let _cleanup = KillMarked(marker.clone());
    let model =
        MockServer::with_replies(vec![Reply::tool_stream(&[("call_1", "hang", json!({}))])]).await;
    let child = hanging_run(&scratch, &model, &marker, false).await;
    assert!(
        processes_with_marker(&marker).len() >= 2,
        "CLI and server run"
    );

    interrupt(&child);
    let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("aquaregia exits within 10 s of Ctrl-C")
        .expect("wait for aquaregia");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("✗ hang() cancelled"), "{stderr}");
    assert!(stderr.ends_with("interrupted\n"), "{stderr}");
    assert_no_process_left(&marker, Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_second_ctrl_c_quits_at_once_and_still_leaves_nothing_behind() {
    let scratch = Scratch::new();
    let marker = marker("double-ctrl-c");
    let _cleanup = KillMarked(marker.clone());
    let model =
        MockServer::with_replies(vec![Reply::tool_stream(&[("call_1", "hang", json!({}))])]).await;
    // This server ignores stdin closing and SIGTERM: a clean close would take seconds.
    let child = hanging_run(&scratch, &model, &marker, true).await;

    interrupt(&child);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = Instant::now();
    interrupt(&child);
    let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("aquaregia exits after the second Ctrl-C")
        .expect("wait for aquaregia");
    assert!(
        second.elapsed() < Duration::from_millis(1500),
        "took {:?}",
        second.elapsed()
    );
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_no_process_left(&marker, Duration::from_secs(5)).await;
}
