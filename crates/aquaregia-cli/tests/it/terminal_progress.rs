//! Progress on a terminal: a spinner per starting server replaced by `✓ name (N tools, ...)`,
//! and a "thinking" spinner until the model answers; none of it when stderr is piped. The
//! terminal is a pty made by `script(1)`.

use crate::common;

use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, run, test_server_script, use_mock};
use tokio::io::AsyncReadExt;
use tokio::sync::Notify;

fn args() -> Vec<String> {
    vec![
        "run".into(),
        "--stdio".into(),
        format!("python3 {}", test_server_script()),
        "Hello?".into(),
    ]
}

#[tokio::test]
async fn spinners_show_on_a_terminal() {
    let scratch = Scratch::new();
    let gate = Arc::new(Notify::new());
    let model = MockServer::with_replies(vec![Reply::Gated(
        gate.clone(),
        Box::new(Reply::text_stream(&["Hi there."])),
    )])
    .await;
    let line = std::iter::once(env!("CARGO_BIN_EXE_aquaregia").to_owned())
        .chain(args())
        .chain(["--model".to_owned(), "openai-chat:mock".to_owned()])
        .map(|word| format!("'{word}'"))
        .collect::<Vec<_>>()
        .join(" ");
    // The CLI's test environment, with `script` running it on a pty.
    let mut script = std::process::Command::new("script");
    script.args(["-qfec", &line, "/dev/null"]);
    for (key, value) in cli(&scratch).get_envs() {
        match value {
            Some(value) => script.env(key, value),
            None => script.env_remove(key),
        };
    }
    script
        .current_dir(&scratch.path)
        .env("OPENAI_BASE_URL", &model.url)
        .env("OPENAI_API_KEY", "test")
        .env("TERM", "xterm")
        .env_remove("NO_COLOR");
    let mut child = tokio::process::Command::from(script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start script");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut seen = Vec::new();
    let deadline = Instant::now() + common::BOUND;
    while !String::from_utf8_lossy(&seen).contains("thinking") {
        assert!(
            Instant::now() < deadline,
            "no thinking spinner: {}",
            String::from_utf8_lossy(&seen)
        );
        let mut chunk = [0u8; 4096];
        let read = tokio::time::timeout(common::BOUND, stdout.read(&mut chunk))
            .await
            .expect("output in time")
            .expect("read the pty output");
        assert!(read > 0, "ended early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&chunk[..read]);
    }
    gate.notify_one();
    tokio::time::timeout(common::BOUND, stdout.read_to_end(&mut seen))
        .await
        .expect("the run ends")
        .expect("read the pty output");
    let status = child.wait().await.expect("wait for script");
    let screen = String::from_utf8_lossy(&seen);
    assert!(status.success(), "{screen}");
    assert!(screen.contains("starting mcp_test_server"), "{screen}");
    assert!(screen.contains("mcp_test_server (5 tools, "), "{screen}");
    assert!(screen.contains("Hi there."), "{screen}");
}

#[tokio::test]
async fn nothing_of_it_when_piped() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![Reply::text_stream(&["Hi there."])]).await;
    let mut command = cli(&scratch);
    command.args(args());
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Hi there.\n");
    assert!(outcome.stderr.is_empty(), "{outcome:?}");
}

/// A running tool's spinner shows the server's `notifications/progress`: `copy() 3/10 copying
/// files`, from the in-repo server, which answers only once the test has seen it.
#[tokio::test]
async fn tool_spinners_show_the_servers_progress() {
    let scratch = Scratch::new();
    let gate = scratch.path.join("progress-seen");
    let model = MockServer::with_replies(vec![
        Reply::tool_call("call_1", "copy", serde_json::json!({})),
        Reply::text_stream(&["Copied."]),
    ])
    .await;
    let mut server = common::test_server_entry();
    server["env"] = serde_json::json!({"AQUAREGIA_TEST_PROGRESS_GATE": gate});
    scratch.config(&serde_json::json!({ "test": server }));
    let mut command = cli(&scratch);
    command.args(["run", "--yes", "Copy."]);
    use_mock(&mut command, &model);
    let mut child = common::on_pty(&command, 100).spawn().expect("start script");
    let mut screen = child.stdout.take().expect("piped stdout");
    let mut seen = Vec::new();
    common::read_until(&mut screen, &mut seen, "copy() 3/10 copying files").await;
    std::fs::write(&gate, "seen").expect("open the gate");
    tokio::time::timeout(common::BOUND, screen.read_to_end(&mut seen))
        .await
        .expect("the run ends")
        .expect("read the pty output");
    let status = child.wait().await.expect("wait for script");
    let screen = String::from_utf8_lossy(&seen);
    assert!(status.success(), "{screen}");
    assert!(screen.contains(" copy() ok"), "{screen}");
    assert!(screen.contains("Copied."), "{screen}");
}
