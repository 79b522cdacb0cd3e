//! `acpx` (npm, a headless ACP client with persistent sessions, installed by
//! `scripts/test-deps.sh`) drives the built `aquaregia acp`: it creates a session, runs a
//! prompt, lets its queue owner and the agent exit, then resumes the session in a new agent
//! process (the next model request carries the earlier turn) and lists the sessions.

use crate::common;

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;

use aquaregia_test_support::deps::dep;
use aquaregia_test_support::mock_model::{MockServer, Reply};
use aquaregia_test_support::processes::{KillMarked, assert_no_process_left, marker};
use common::{BOUND, Scratch, transcript};

/// Runs `acpx --agent '<aquaregia acp on the mock>' <args>` in `work`, with its state
/// (`~/.acpx`) in the scratch directory; returns stdout (it must succeed).
async fn acpx(
    scratch: &Scratch,
    work: &Path,
    mock: &MockServer,
    marker: &str,
    args: &[&str],
) -> String {
    let agent = format!(
        "{} acp --model openai-chat:mock-model",
        env!("CARGO_BIN_EXE_aquaregia")
    );
    let mut command = tokio::process::Command::new(dep("AQUAREGIA_NODE22"));
    command
        .arg(dep("AQUAREGIA_ACPX"))
        .args(["--agent", &agent])
        // The queue owner (which keeps the agent for follow-up prompts) leaves after 1 s idle.
        .args(["--ttl", "1", "--timeout", "60"])
        .args(args)
        .current_dir(work)
        .env("HOME", scratch.path.join("home"))
        .env("XDG_CONFIG_HOME", scratch.user_config_dir())
        .env("AQUAREGIA_DATA_DIR", scratch.data_dir())
        .env("AQUAREGIA_TEST_MARKER", marker)
        .env("OPENAI_BASE_URL", &mock.url)
        .env("OPENAI_API_KEY", "test")
        .env_remove("AQUAREGIA_MODEL")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(BOUND, command.output())
        .await
        .unwrap_or_else(|_| panic!("acpx {args:?} finished in time"))
        .expect("acpx runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "acpx {args:?}: {}\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The answer to the request with `method` in an acpx `--format json` transcript.
fn answer_to<'a>(messages: &'a [Value], method: &str) -> Option<&'a Value> {
    let id = &messages
        .iter()
        .find(|m| m["method"] == method && m.get("id").is_some())?["id"];
    messages
        .iter()
        .find(|m| m.get("method").is_none() && &m["id"] == id)
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acpx_prompts_resumes_and_lists_sessions() {
    let scratch = Scratch::new();
    let work = scratch.path.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(scratch.path.join("home")).unwrap();
    let marker = marker("acpx");
    let _kill = KillMarked(marker.clone());
    let mock = MockServer::start().await;
    mock.push(Reply::text_stream(&["I will remember 42."]))
        .push(Reply::text_stream(&["It was 42."]));
    let (in_scratch, in_work, on_mock, marked) = (&scratch, &work, &mock, &marker);
    let run = move |args: &'static [&'static str]| acpx(in_scratch, in_work, on_mock, marked, args);

    let created = json_lines(&run(&["--format", "json", "sessions", "new"]).await);
    let created = created
        .iter()
        .find(|line| line["action"] == "session_ensured")
        .unwrap_or_else(|| panic!("a session: {created:?}"));
    assert_eq!(created["created"], true, "{created}");
    let id = created["acpxSessionId"].as_str().unwrap().to_owned();

    let first = json_lines(
        &run(&[
            "--format",
            "json",
            "--approve-all",
            "prompt",
            "Remember the number 42.",
        ])
        .await,
    );
    let answered = answer_to(&first, "session/prompt").expect("the prompt was answered");
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{first:#?}");
    assert!(
        first
            .iter()
            .any(|m| m["params"]["update"]["content"]["text"] == "I will remember 42."),
        "the answer streamed: {first:#?}"
    );

    // The queue owner and its agent go away once idle; the session stays in the store.
    assert_no_process_left(&marker, BOUND).await;

    let second = json_lines(
        &run(&[
            "--format",
            "json",
            "--approve-all",
            "prompt",
            "Which number?",
        ])
        .await,
    );
    let reopened = ["session/resume", "session/load"]
        .iter()
        .find_map(|method| {
            second
                .iter()
                .find(|m| m["method"] == *method && m.get("id").is_some())
        })
        .unwrap_or_else(|| panic!("the new agent reopened the session: {second:#?}"));
    assert_eq!(reopened["params"]["sessionId"], id.as_str());
    let answered = answer_to(&second, "session/prompt").expect("the prompt was answered");
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{second:#?}");
    let requests = mock.bodies();
    assert_eq!(requests.len(), 2);
    let sent = transcript(&requests[1]);
    let said = |role: &str, text: &str| sent.iter().any(|(r, t)| r == role && t == text);
    assert!(
        said("user", "Remember the number 42.")
            && said("assistant", "I will remember 42.")
            && said("user", "Which number?"),
        "the earlier turn reaches the model: {sent:?}"
    );

    let listed = json_lines(&run(&["--format", "json", "sessions", "list"]).await);
    let sessions = listed
        .iter()
        .find_map(|line| line["sessions"].as_array())
        .unwrap_or_else(|| panic!("a session list: {listed:?}"));
    assert_eq!(sessions.len(), 1, "{listed:?}");
    assert_eq!(sessions[0]["sessionId"], id.as_str());
    assert_eq!(sessions[0]["title"], "Remember the number 42.");
    assert_eq!(sessions[0]["cwd"], work.to_str().unwrap());

    assert_no_process_left(&marker, BOUND).await;
}
