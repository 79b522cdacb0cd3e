//! How a stdio server's process group ends: SIGTERM before SIGKILL on close, grandchildren
//! included, and nothing left when the runtime that ran the connection is gone.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aquaregia_mcp as mcp;
use aquaregia_test_support::processes::{
    KillMarked, assert_no_process_left, marker, processes_with_marker,
};
use tempfile::TempDir;
use tokio::process::Command;

const BOUND: Duration = Duration::from_secs(10);

/// A stdio MCP server in Python (no SDK) that starts a grandchild ignoring SIGTERM, keeps
/// running when its stdin closes, and on SIGTERM writes the file named by its first argument
/// and exits (leaving the grandchild behind).
const STUBBORN_SERVER: &str = r#"
import json, signal, subprocess, sys, time
def on_term(*_):
    open(sys.argv[1], "w").write("term")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 300"])
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    def reply(result):
        print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}), flush=True)
    if method == "initialize":
        reply({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
               "serverInfo": {"name": "stubborn", "version": "1"}})
    elif method == "tools/list":
        reply({"tools": [{"name": "noop", "inputSchema": {"type": "object"}}]})
    elif mid is not None:
        print(json.dumps({"jsonrpc": "2.0", "id": mid,
                          "error": {"code": -32601, "message": "Method not found"}}), flush=True)
while True:
    time.sleep(1)
"#;

fn stubborn_server(marker: &str, term_file: &Path) -> Command {
    let mut command = Command::new("python3");
    command
        .args(["-c", STUBBORN_SERVER])
        .arg(term_file)
        .env("AQUAREGIA_TEST_MARKER", marker);
    command
}

/// Where the server writes `term` when it gets SIGTERM: a file that does not exist yet, in a
/// scratch directory removed when the guard is dropped.
fn term_file() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let file = dir.path().join("term");
    (dir, file)
}

#[tokio::test]
async fn close_sends_sigterm_then_ends_the_whole_group() {
    let marker = marker("stdio-sigterm");
    let _cleanup = KillMarked(marker.clone());
    let (_scratch, term) = term_file();
    let connection = mcp::connect_stdio(stubborn_server(&marker, &term))
        .await
        .unwrap();
    assert_eq!(connection.tools().await.unwrap().len(), 1);
    assert!(
        processes_with_marker(&marker).len() >= 2,
        "server and grandchild"
    );

    let started = Instant::now();
    connection.close().await;
    // Half a second for stdin closing, then SIGTERM, which the server obeys.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        std::fs::read_to_string(&term).ok().as_deref(),
        Some("term"),
        "SIGTERM came first"
    );
    // The grandchild, which ignored SIGTERM, goes with the group once the server has exited.
    assert_no_process_left(&marker, BOUND).await;
}

#[test]
fn a_connection_outliving_its_runtime_leaves_no_process() {
    let marker = marker("stdio-runtime-gone");
    let _cleanup = KillMarked(marker.clone());
    let (_scratch, term) = term_file();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let connection = runtime
        .block_on(mcp::connect_stdio(stubborn_server(&marker, &term)))
        .unwrap();
    assert!(processes_with_marker(&marker).len() >= 2);

    drop(runtime);
    drop(connection);
    let deadline = Instant::now() + BOUND;
    while !processes_with_marker(&marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left behind: {:?}",
            processes_with_marker(&marker)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `Connector::on_process` hears of the server's process when it starts (its pid, which leads
/// its process group) and once the group is gone.
#[tokio::test]
async fn the_process_hook_hears_start_and_end() {
    use std::sync::{Arc, Mutex};

    use aquaregia_mcp::ServerProcess;

    let marker = marker("stdio-hook");
    let _cleanup = KillMarked(marker.clone());
    let (_scratch, term) = term_file();
    let events = Arc::new(Mutex::new(Vec::new()));
    let heard = events.clone();
    let connection = mcp::Connector::new()
        .on_process(move |event| heard.lock().unwrap().push(event))
        .stdio(stubborn_server(&marker, &term))
        .await
        .unwrap();
    let started = events.lock().unwrap().clone();
    let [ServerProcess::Started { pid }] = started.as_slice() else {
        panic!("one start: {started:?}");
    };
    let pid = *pid;
    assert!(processes_with_marker(&marker).contains(&pid), "{pid}");
    // The pid is the group's id: the grandchild is in it.
    let groups: Vec<String> = processes_with_marker(&marker)
        .iter()
        .filter_map(|process| std::fs::read_to_string(format!("/proc/{process}/stat")).ok())
        .filter_map(|stat| {
            Some(
                stat.rsplit(')')
                    .next()?
                    .split_whitespace()
                    .nth(2)?
                    .to_owned(),
            )
        })
        .collect();
    assert!(
        groups.len() >= 2 && groups.iter().all(|group| *group == pid.to_string()),
        "{groups:?}"
    );

    connection.close().await;
    assert_no_process_left(&marker, BOUND).await;
    let deadline = Instant::now() + BOUND;
    while events.lock().unwrap().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "no end: {:?}",
            events.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        events.lock().unwrap().as_slice(),
        [ServerProcess::Started { pid }, ServerProcess::Ended { pid }]
    );
}
