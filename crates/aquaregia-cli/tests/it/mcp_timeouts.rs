//! `mcp call` time limits: the config's `"timeout"` (ms) and `--call-timeout` over it.

use crate::common;

use std::time::{Duration, Instant};

use common::{Scratch, cli, run, test_server_script};
use serde_json::json;

#[tokio::test]
async fn a_hanging_call_ends_at_the_configured_or_given_timeout() {
    let scratch = Scratch::new();
    scratch.config(&json!({"test": {
        "command": "python3", "args": [test_server_script()], "timeout": 400
    }}));

    let started = Instant::now();
    let mut command = cli(&scratch);
    command.args(["mcp", "call", "test", "hang"]);
    let configured = run(command, "").await;
    assert_eq!(configured.code, Some(1), "{configured:?}");
    assert!(
        configured
            .stderr
            .contains("tool `hang` failed: the tool call timed out"),
        "{configured:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );

    // The flag wins over the config: a generous limit lets a quick call through, a short one
    // cuts the hanging call.
    let mut command = cli(&scratch);
    command.args([
        "mcp",
        "call",
        "test",
        "greet",
        r#"{"name": "Ann"}"#,
        "--call-timeout",
        "1m",
    ]);
    let quick = run(command, "").await;
    assert_eq!(quick.code, Some(0), "{quick:?}");

    let mut command = cli(&scratch);
    command.args(["mcp", "call", "--call-timeout", "300ms", "test", "hang"]);
    let flagged = run(command, "").await;
    assert_eq!(flagged.code, Some(1), "{flagged:?}");
    assert!(flagged.stderr.contains("timed out"), "{flagged:?}");

    let mut command = cli(&scratch);
    command.args(["mcp", "call", "--call-timeout", "soon", "test", "hang"]);
    let invalid = run(command, "").await;
    assert_eq!(invalid.code, Some(2), "{invalid:?}");
    assert!(invalid.stderr.contains("is not a duration"), "{invalid:?}");
}
