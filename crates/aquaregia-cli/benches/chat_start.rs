//! `aquaregia chat` start-up: `echo /exit | aquaregia chat` timed from spawn to exit (start,
//! prompt reached, one line read) with no servers, fresh and with `--continue` of a 200-turn
//! session (a tool call per turn). Best and median of 20 runs, beside `/bin/true`.
//!
//! `cargo bench -p aquaregia-cli --bench chat_start` times the bench build of the binary;
//! `AQUAREGIA_BIN=target/release/aquaregia` times another build (the figures in
//! BENCHMARKS.md are of `cargo build --release -p aquaregia-cli`).
#![allow(missing_docs, clippy::print_stdout)]
// Test code: a failed setup or expectation should stop the test loudly, and nothing here is
// public API that would need `Debug`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use aquaregia::{
    ContentPart, FileSessionStore, Message, NewSession, Role, SessionStore, SessionTurn, ToolCall,
    ToolOutput, ToolResult,
};
use serde_json::json;

const RUNS: usize = 20;

fn main() {
    let bin = std::env::var_os("AQUAREGIA_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_aquaregia")),
        PathBuf::from,
    );
    let dir = std::env::temp_dir().join(format!("aquaregia-chat-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the bench directory");
    write_session(&dir);

    // The session is the one resumed, whole.
    let check = chat(&bin, &dir, true)
        .stdin(Stdio::null())
        .output()
        .expect("run aquaregia chat --continue");
    let said = String::from_utf8_lossy(&check.stderr);
    assert!(said.contains("(200 turns)"), "{said}");

    let true_times = time(|| Command::new("/bin/true"));
    let fresh = time(|| chat(&bin, &dir, false));
    let resumed = time(|| chat(&bin, &dir, true));
    println!("binary: {}", bin.display());
    println!("| | best | median |");
    println!("|---|---|---|");
    for (name, times) in [
        ("`/bin/true`", true_times),
        ("`aquaregia chat`, no servers", fresh),
        ("`aquaregia chat --continue`, 200 turns", resumed),
    ] {
        println!(
            "| {name} | {:.1} ms | {:.1} ms |",
            ms(times[0]),
            ms(times[times.len() / 2])
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// 200 turns of a prompt, a tool call, its result and an answer, saved in `dir/data`.
fn write_session(dir: &Path) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = FileSessionStore::new(dir.join("data").join("sessions"));
        let meta = store
            .create(NewSession::new(dir).model("openai-chat:mock"))
            .await
            .expect("create the session");
        for n in 0..200 {
            let turn = SessionTurn::new(vec![
                Message::user(format!("prompt {n}: {}", "lorem ipsum ".repeat(20))),
                Message::new(
                    Role::Assistant,
                    vec![ContentPart::ToolCall(ToolCall {
                        id: format!("call_{n}"),
                        name: "get-sum".into(),
                        arguments: json!({"a": 2, "b": 40}),
                    })],
                ),
                Message::new(
                    Role::Tool,
                    vec![ContentPart::ToolResult(ToolResult {
                        call_id: format!("call_{n}"),
                        name: "get-sum".into(),
                        output: ToolOutput::Json(json!({"sum": 42})),
                        is_error: false,
                    })],
                ),
                Message::assistant("The sum is 42."),
            ]);
            store
                .append_turn(&meta.id, turn)
                .await
                .expect("append a turn");
        }
    });
}

fn chat(bin: &Path, dir: &Path, resume: bool) -> Command {
    let mut command = Command::new(bin);
    command
        .arg("chat")
        .args(resume.then_some("--continue"))
        .current_dir(dir)
        .env("AQUAREGIA_DATA_DIR", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .env("AQUAREGIA_MODEL", "openai-chat:mock")
        .env("OPENAI_API_KEY", "bench")
        .env("NO_COLOR", "1");
    command
}

/// Sorted durations of `RUNS` runs (after one warm-up) of `command` with `/exit` on stdin.
fn time(command: impl Fn() -> Command) -> Vec<Duration> {
    let mut times: Vec<Duration> = (0..=RUNS)
        .map(|_| {
            let started = Instant::now();
            let mut child = command()
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start the command");
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(b"/exit\n");
            }
            let status = child.wait().expect("wait for the command");
            assert!(status.success(), "{status}");
            started.elapsed()
        })
        .skip(1)
        .collect();
    times.sort();
    times
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
