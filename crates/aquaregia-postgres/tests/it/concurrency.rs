//! Two OS processes (this test binary run again, each with its own store and connection pool)
//! racing checked appends on one session lose no turn: the loser of each race gets
//! `SessionError::Conflict`, reloads and appends on top.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::time::timeout;

use aquaregia::{NewSession, SessionError, SessionId, SessionStore};
use aquaregia_postgres::PostgresSessionStore;
use aquaregia_test_support::session_contract::{prompts, tool_turn};

use crate::support::Database;

const TURNS_PER_WRITER: usize = 25;
const WRITER_ENV: &str = "AQUAREGIA_PG_RACE";
/// How long a writer may take for each step.
const BOUND: Duration = Duration::from_secs(120);

/// One racing writer, run in a child process by [`two_processes_racing_appends_lose_no_turn`]
/// (ignored otherwise). `AQUAREGIA_PG_RACE=<url> <session> <name>`: it loads the session, says
/// `LOADED`, waits for `GO` on stdin (so both writers hold the same stale count for their first
/// append), then appends its turns, reloading after each conflict, and prints `CONFLICTS n`.
#[allow(clippy::print_stdout)] // Its stdout is how it talks to the parent test.
#[tokio::test]
#[ignore = "a child process of two_processes_racing_appends_lose_no_turn"]
async fn race_writer() {
    let Ok(spec) = std::env::var(WRITER_ENV) else {
        return;
    };
    let mut parts = spec.split(' ');
    let (url, id, name) = (
        parts.next().unwrap(),
        SessionId::new(parts.next().unwrap()).unwrap(),
        parts.next().unwrap().to_owned(),
    );
    let store = PostgresSessionStore::connect(url).await.unwrap();
    let mut seen = store.load(&id).await.unwrap().meta.turns;
    println!("LOADED");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "GO");
    let mut conflicts = 0;
    for n in 0..TURNS_PER_WRITER {
        let turn = tool_turn(&format!("{name} {n}"));
        loop {
            match store.append_turn_checked(&id, turn.clone(), seen).await {
                Ok(meta) => {
                    seen = meta.turns;
                    break;
                }
                Err(SessionError::Conflict { actual, .. }) => {
                    conflicts += 1;
                    // As the CLI and ACP do: take the latest state, append on top of it.
                    let latest = store.load(&id).await.unwrap();
                    assert!(latest.meta.turns >= actual);
                    seen = latest.meta.turns;
                }
                Err(other) => panic!("{name}: {other}"),
            }
        }
    }
    println!("CONFLICTS {conflicts}");
}

#[tokio::test]
async fn two_processes_racing_appends_lose_no_turn() {
    let Some(database) = Database::new("race") else {
        return;
    };
    let (store, url) = (database.store().await, &database.url);
    let meta = store.create(NewSession::new("/shared")).await.unwrap();
    store
        .append_turn(&meta.id, tool_turn("first"))
        .await
        .unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut writers: Vec<_> = ["alpha", "beta"]
        .into_iter()
        .map(|name| {
            tokio::process::Command::new(&exe)
                .args([
                    "concurrency::race_writer",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(WRITER_ENV, format!("{url} {} {name}", meta.id))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .unwrap()
        })
        .collect();
    let mut outputs: Vec<_> = writers
        .iter_mut()
        .map(|child| BufReader::new(child.stdout.take().unwrap()).lines())
        .collect();
    for output in &mut outputs {
        loop {
            let line = timeout(BOUND, output.next_line())
                .await
                .expect("the writer loaded the session in time")
                .unwrap()
                .expect("a writer ended early");
            if line.contains("LOADED") {
                break;
            }
        }
    }
    for child in &mut writers {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"GO\n")
            .await
            .unwrap();
    }
    let mut conflicts = 0;
    for (child, mut output) in writers.into_iter().zip(outputs) {
        let mut count = None;
        while let Some(line) = timeout(BOUND, output.next_line())
            .await
            .expect("the writer finished in time")
            .unwrap()
        {
            if let Some((_, n)) = line.split_once("CONFLICTS ") {
                count = Some(n.trim().parse::<usize>().unwrap());
            }
        }
        let status = timeout(BOUND, child.wait_with_output())
            .await
            .expect("the writer exited in time")
            .unwrap()
            .status;
        assert!(status.success(), "a writer failed");
        conflicts += count.expect("the writer printed its conflict count");
    }
    // Both first appends carried the same count: at least one of them was refused.
    assert!(conflicts >= 1, "the writers never raced");

    let loaded = store.load(&meta.id).await.unwrap();
    assert_eq!(loaded.skipped, 0);
    assert_eq!(loaded.turns.len(), 1 + 2 * TURNS_PER_WRITER);
    assert_eq!(loaded.meta.turns, loaded.turns.len() as u64);
    let prompts = prompts(&loaded);
    assert_eq!(prompts[0], "first");
    for name in ["alpha", "beta"] {
        let mine: Vec<_> = prompts
            .iter()
            .filter(|prompt| prompt.starts_with(name))
            .cloned()
            .collect();
        let expected: Vec<_> = (0..TURNS_PER_WRITER)
            .map(|n| format!("{name} {n}"))
            .collect();
        assert_eq!(mine, expected, "{name}'s turns, each once and in order");
    }
}
