//! `PostgresSessionStore` on throwaway local clusters, one with PostgreSQL's default durability
//! (every commit flushed to disk) and one with fsync off (what is left without the disk): the
//! latency of a checked append (p50, p99, max over 1,000, each a
//! prompt, a tool call, its result and an answer), and of loading a 200-turn session (p50, p99
//! over 100 loads), and of forking a 200-turn session (`Conversation::fork_stored`: the load and
//! the copy written at once, p50 and max over 20 forks), through one store as a long-running
//! service holds it (connections open, statements prepared), beside the file store doing the
//! same on the same disk.
//!
//! `cargo bench -p aquaregia-postgres --bench store` (PostgreSQL from `scripts/test-deps.sh
//! postgres`; the targets of issue 21: append p99 under 5 ms, load under 20 ms).
#![allow(missing_docs, clippy::print_stdout)]
// Bench code: a failed setup should stop it loudly, and nothing here is public API.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use aquaregia::{
    ContentPart, Conversation, FileSessionStore, Message, NewSession, Role, SessionStore,
    SessionTurn, ToolCall, ToolOutput, ToolResult,
};
use aquaregia_postgres::PostgresSessionStore;
use aquaregia_test_support::postgres::{Durability, PgCluster};
use serde_json::json;

const APPENDS: usize = 1_000;
const LOADS: usize = 100;
const TURNS: usize = 200;
const FORKS: usize = 20;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average at start: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let Some(durable) = PgCluster::start(Durability::Durable) else {
        eprintln!("skipped: PostgreSQL is not installed and cannot be installed here");
        return;
    };
    let fast = PgCluster::start(Durability::Fast).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        let durable = PostgresSessionStore::connect(&durable.database("bench"))
            .await
            .unwrap();
        let fast = PostgresSessionStore::connect(&fast.database("bench"))
            .await
            .unwrap();
        let file = FileSessionStore::new(scratch.path().join("sessions"));
        println!("| | p50 | p99 | max |");
        println!("|---|---|---|---|");
        let stores: [(&str, Arc<dyn SessionStore>); 3] = [
            ("PostgreSQL (commits flushed)", Arc::new(durable)),
            ("PostgreSQL (fsync off)", Arc::new(fast)),
            ("file store", Arc::new(file)),
        ];
        for (name, store) in stores {
            let appends = appends(&*store).await;
            row(&format!("{name}: checked append"), &appends);
            let session = session_of(&*store, TURNS).await;
            let loads = loads(&*store, &session).await;
            row(&format!("{name}: load, {TURNS} turns"), &loads);
            let forks = forks(&store, &session).await;
            row(&format!("{name}: fork, {TURNS} turns"), &forks);
        }
    });
}

fn turn(n: usize) -> SessionTurn {
    SessionTurn::new(vec![
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
    ])
}

/// Appends to sessions of 20 turns each (new sessions as they fill), as a service with many
/// short conversations would.
async fn appends(store: &dyn SessionStore) -> Vec<Duration> {
    let mut times = Vec::with_capacity(APPENDS);
    let mut session = store.create(NewSession::new("/bench")).await.unwrap();
    for n in 0..APPENDS {
        if session.turns == 20 {
            session = store.create(NewSession::new("/bench")).await.unwrap();
        }
        let turn = turn(n);
        let started = Instant::now();
        session = store
            .append_turn_checked(&session.id, turn, session.turns)
            .await
            .unwrap();
        times.push(started.elapsed());
    }
    times
}

async fn session_of(store: &dyn SessionStore, turns: usize) -> aquaregia::SessionId {
    let session = store.create(NewSession::new("/bench")).await.unwrap();
    for n in 0..turns {
        store.append_turn(&session.id, turn(n)).await.unwrap();
    }
    session.id
}

async fn loads(store: &dyn SessionStore, id: &aquaregia::SessionId) -> Vec<Duration> {
    let mut times = Vec::with_capacity(LOADS);
    for _ in 0..LOADS {
        let started = Instant::now();
        let loaded = store.load(id).await.unwrap();
        times.push(started.elapsed());
        assert_eq!(loaded.turns.len(), TURNS);
    }
    times
}

/// Forks of the same session, each a new session holding its turns.
async fn forks(store: &Arc<dyn SessionStore>, id: &aquaregia::SessionId) -> Vec<Duration> {
    let mut times = Vec::with_capacity(FORKS);
    for _ in 0..FORKS {
        let started = Instant::now();
        let (fork, stored) = Conversation::fork_stored(store.clone(), id).await.unwrap();
        times.push(started.elapsed());
        assert_eq!(stored.turns.len(), TURNS);
        assert_eq!(fork.history().len(), TURNS * 4);
    }
    times
}

fn row(name: &str, times: &[Duration]) {
    let mut sorted = times.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)];
    println!(
        "| {name} | {:.2} ms | {:.2} ms | {:.2} ms |",
        ms(at(0.50)),
        ms(at(0.99)),
        ms(sorted[sorted.len() - 1])
    );
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
