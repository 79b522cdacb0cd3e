//! Ctrl-C during `aquaregia run`: the run stops, the servers are closed, nothing is left behind.

use crate::common;

use std::time::{Duration, Instant};

use aquaregia_test_support::mock_model::{MockServer, Reply};
use aquaregia_test_support::processes::{
    KillMarked, assert_no_process_left, marker, processes_with_marker,
};
use common::{Scratch, hanging_run, test_server_entry};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

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
    let child = hanging_run(&scratch, &model, &marker, test_server_entry(), false).await;
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
    let mut child = hanging_run(&scratch, &model, &marker, test_server_entry(), true).await;
    let mut stderr = BufReader::new(child.stderr.take().expect("piped stderr"));

    interrupt(&child);
    // The first Ctrl-C has been taken once the CLI says it is stopping.
    let mut seen = String::new();
    tokio::time::timeout(common::BOUND, async {
        while !seen.contains("stopping...") {
            if stderr.read_line(&mut seen).await.expect("read stderr") == 0 {
                break;
            }
        }
    })
    .await
    .expect("aquaregia says it is stopping");
    assert!(seen.contains("stopping..."), "{seen}");
    let second = Instant::now();
    interrupt(&child);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("aquaregia exits after the second Ctrl-C")
        .expect("wait for aquaregia");
    assert!(
        second.elapsed() < Duration::from_millis(1500),
        "took {:?}",
        second.elapsed()
    );
    stderr.read_to_string(&mut seen).await.expect("read stderr");
    assert_eq!(status.code(), Some(130), "{seen}");
    assert_no_process_left(&marker, Duration::from_secs(5)).await;
}
