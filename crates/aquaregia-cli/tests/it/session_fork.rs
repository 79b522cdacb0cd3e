//! `--fork` with `--resume` or `--continue` (in `run` and `chat`): the conversation goes on in a
//! new session holding the old one's history, under the old one's `prompt_cache_key`; the old
//! one stays as it was; `sessions` names the parent; `--fork` alone, or of an unknown session,
//! is a clear error.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, run};
use serde_json::Value;

/// `aquaregia <args>` on the mock's OpenAI Responses model (which sends `prompt_cache_key`).
fn on_openai(scratch: &Scratch, model: &MockServer, args: &[&str]) -> std::process::Command {
    let mut command = cli(scratch);
    command
        .args(args)
        .args(["--model", "openai:gpt-5-mini"])
        .env("OPENAI_BASE_URL", &model.url)
        .env("OPENAI_API_KEY", "test");
    command
}

fn texts(body: &Value) -> Vec<String> {
    body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(aquaregia_test_support::mock_model::content_text)
        .collect()
}

async fn sessions(scratch: &Scratch) -> Vec<Value> {
    let mut list = cli(scratch);
    list.args(["sessions", "--json"]);
    let listed = run(list, "").await;
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let sessions: Value = serde_json::from_str(&listed.stdout).unwrap();
    sessions.as_array().unwrap().clone()
}

#[tokio::test]
async fn fork_goes_on_in_a_new_session_under_the_parents_cache_key() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(
        ["Hi Ann.", "You are Ann.", "Noted.", "Forked chat."].map(Reply::responses_text),
    )
    .await;
    let first = run(on_openai(&scratch, &model, &["run", "My name is Ann."]), "").await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let listed = sessions(&scratch).await;
    let parent = listed[0]["id"].as_str().unwrap().to_owned();

    let forked = run(
        on_openai(
            &scratch,
            &model,
            &["run", "--resume", &parent, "--fork", "What is my name?"],
        ),
        "",
    )
    .await;
    assert_eq!(forked.code, Some(0), "{forked:?}");
    assert_eq!(forked.stdout, "You are Ann.\n");
    // The parent goes on without the fork's turn.
    let again = run(
        on_openai(
            &scratch,
            &model,
            &["run", "--resume", &parent, "I like blue."],
        ),
        "",
    )
    .await;
    assert_eq!(again.code, Some(0), "{again:?}");

    let bodies = model.bodies();
    assert_eq!(
        texts(&bodies[1]),
        ["My name is Ann.", "Hi Ann.", "What is my name?"]
    );
    assert_eq!(
        texts(&bodies[2]),
        ["My name is Ann.", "Hi Ann.", "I like blue."]
    );
    // The shared history goes out byte for byte, under the parent's key.
    assert_eq!(
        bodies[1]["input"].as_array().unwrap()[..2],
        bodies[2]["input"].as_array().unwrap()[..2]
    );
    for body in &bodies {
        assert_eq!(body["prompt_cache_key"], parent.as_str(), "{body:#}");
    }

    let listed = sessions(&scratch).await;
    assert_eq!(listed.len(), 2);
    let parent_listed = listed.iter().find(|s| s["id"] == parent.as_str()).unwrap();
    let fork = listed.iter().find(|s| s["id"] != parent.as_str()).unwrap();
    assert_eq!(parent_listed["turns"], 2);
    assert!(
        parent_listed.get("forkedFrom").is_none(),
        "{parent_listed:#}"
    );
    assert_eq!(fork["turns"], 2);
    assert_eq!(fork["forkedFrom"]["session"], parent.as_str());
    assert_eq!(fork["forkedFrom"]["turns"], 1);
    let fork_id = fork["id"].as_str().unwrap().to_owned();
    let mut table = cli(&scratch);
    table.arg("sessions");
    let table = run(table, "").await;
    assert!(
        table
            .stdout
            .contains(&format!("forked from {parent} after turn 1")),
        "{table:?}"
    );

    // `chat --continue --fork`: the latest session (the parent, changed last) forked.
    let chat = run(
        on_openai(&scratch, &model, &["chat", "--continue", "--fork"]),
        "In the chat fork.\n",
    )
    .await;
    assert_eq!(chat.code, Some(0), "{chat:?}");
    assert!(
        chat.stderr.contains(&format!("from {parent} (2 turns)")),
        "{chat:?}"
    );
    let bodies = model.bodies();
    assert_eq!(
        texts(&bodies[3]),
        [
            "My name is Ann.",
            "Hi Ann.",
            "I like blue.",
            "Noted.",
            "In the chat fork."
        ]
    );
    assert_eq!(bodies[3]["prompt_cache_key"], parent.as_str());
    let listed = sessions(&scratch).await;
    assert_eq!(listed.len(), 3);
    assert!(
        listed
            .iter()
            .any(|s| s["id"] == fork_id.as_str() && s["turns"] == 2)
    );
}

#[tokio::test]
async fn fork_needs_a_saved_session_to_fork() {
    let scratch = Scratch::new();
    let model = MockServer::start().await;
    let alone = run(on_openai(&scratch, &model, &["run", "--fork", "Hi"]), "").await;
    assert_eq!(alone.code, Some(1), "{alone:?}");
    assert!(
        alone.stderr.contains("--resume <ID> or --continue"),
        "{alone:?}"
    );
    let unknown = run(
        on_openai(
            &scratch,
            &model,
            &["run", "--resume", "no-such-session", "--fork", "Hi"],
        ),
        "",
    )
    .await;
    assert_eq!(unknown.code, Some(1), "{unknown:?}");
    assert!(
        unknown
            .stderr
            .contains("cannot fork session no-such-session"),
        "{unknown:?}"
    );
    assert_eq!(model.request_count(), 0);
    let unsaved = run(
        on_openai(&scratch, &model, &["run", "--fork", "--no-save", "Hi"]),
        "",
    )
    .await;
    assert_eq!(unsaved.code, Some(2), "clap refuses the pair: {unsaved:?}");
}
