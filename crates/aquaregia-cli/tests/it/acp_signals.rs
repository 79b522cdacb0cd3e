//! SIGTERM and SIGHUP stop `aquaregia acp` cleanly: every session's stdio servers end first,
//! the processes they started themselves included. Even SIGKILL, which the agent never sees,
//! leaves no server or grandchild running: its reaper ends them, and the process group of a
//! local `run_command` too.

use crate::common;

use serde_json::json;

use aquaregia_test_support::acp_client::{RawClient, eventually};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use aquaregia_test_support::processes::{
    KillMarked, assert_no_process_left, marker, processes_with_marker,
};
use common::{BOUND, Scratch, acp_agent, test_server_script};

/// A stdio server that first starts a grandchild (`sleep`), carrying the marker like it.
fn server_with_grandchild(name: &str, marker: &str) -> serde_json::Value {
    json!({
        "name": name,
        "command": "sh",
        "args": ["-c", format!("sleep 600 & exec python3 '{}'", test_server_script())],
        "env": [{"name": "AQUAREGIA_TEST_MARKER", "value": marker}],
    })
}

async fn stops_on(signal: &str) {
    let mock = MockServer::start().await;
    let scratch = Scratch::new();
    let marker = marker(&format!("acp-signal-{signal}"));
    let _cleanup = KillMarked(marker.clone());
    let client: RawClient = acp_agent(&scratch, &mock, &marker);
    client.initialize().await;
    for _ in 0..2 {
        let session = client
            .request(
                "session/new",
                json!({"cwd": scratch.path, "mcpServers": [server_with_grandchild("srv", &marker)]}),
            )
            .await;
        assert!(session["result"]["sessionId"].is_string(), "{session}");
    }
    // The agent, two servers and their two grandchildren.
    let running = processes_with_marker(&marker);
    assert!(running.len() >= 5, "{running:?}");

    let sent = std::process::Command::new("kill")
        .args([format!("-{signal}"), client.pid().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = client.wait_exit(BOUND).await;
    assert!(
        status.success(),
        "{signal}: {status:?}: {}",
        client.stderr()
    );
    assert_no_process_left(&marker, BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_closes_every_session_first() {
    stops_on("TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_closes_every_session_first() {
    stops_on("HUP").await;
}

/// SIGKILL gives the agent no chance to close its sessions: the reaper it started with the
/// first stdio server sees its pipe close and ends the server's process group, grandchild
/// included, even though this server ignores both stdin closing and SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_leaves_no_server_or_grandchild() {
    let mock = MockServer::start().await;
    let scratch = Scratch::new();
    let marker = marker("acp-sigkill");
    let _cleanup = KillMarked(marker.clone());
    let client: RawClient = acp_agent(&scratch, &mock, &marker);
    client.initialize().await;
    let mut server = server_with_grandchild("stubborn", &marker);
    server["env"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "AQUAREGIA_TEST_STUBBORN", "value": "1"}));
    let session = client
        .request(
            "session/new",
            json!({"cwd": scratch.path, "mcpServers": [server]}),
        )
        .await;
    assert!(session["result"]["sessionId"].is_string(), "{session}");
    // The agent, the server and its grandchild (and the reaper).
    let running = processes_with_marker(&marker);
    assert!(running.len() >= 3, "{running:?}");

    let sent = std::process::Command::new("kill")
        .args(["-KILL".to_owned(), client.pid().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = client.wait_exit(BOUND).await;
    assert!(!status.success(), "{status:?}");
    assert!(!processes_with_marker(&marker).contains(&client.pid()));
    // SIGTERM is ignored: the reaper waits out its grace period, then SIGKILLs the group.
    assert_no_process_left(&marker, BOUND).await;
}

/// A local `run_command` (the client has no terminal) runs in a process group of its own that
/// the reaper hears of: SIGKILL of the agent in the middle of the command leaves nothing
/// running, though the command ignores SIGTERM and waits on a child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_command_leaves_no_command_running() {
    let mock = MockServer::start().await;
    let scratch = Scratch::new();
    let marker = marker("acp-sigkill-command");
    let _cleanup = KillMarked(marker.clone());
    let client: RawClient = acp_agent(&scratch, &mock, &marker);
    client.initialize().await;
    let session = client
        .new_session(scratch.path.to_str().unwrap(), json!([]))
        .await;
    client
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "bypass_permissions"}),
        )
        .await;
    mock.push(Reply::tool_call(
        "call-1",
        "run_command",
        json!({"command": "sh", "args": ["-c", "trap '' TERM; sleep 600 & wait"]}),
    ));
    let _prompt = client.start_prompt(&session, "go").await;
    let sleeping = || {
        processes_with_marker(&marker).iter().any(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c == "sleep\n")
        })
    };
    eventually("the command to run", sleeping).await;

    let sent = std::process::Command::new("kill")
        .args(["-KILL".to_owned(), client.pid().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = client.wait_exit(BOUND).await;
    assert!(!status.success(), "{status:?}");
    assert_no_process_left(&marker, BOUND).await;
}
