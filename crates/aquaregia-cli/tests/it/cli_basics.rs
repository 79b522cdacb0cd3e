//! `--help`, and configuration errors reported as one clear line.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, run};
use serde_json::json;

async fn aquaregia(args: &[&str]) -> common::Outcome {
    let scratch = Scratch::new();
    let mut command = cli(&scratch);
    command.args(args);
    run(command, "").await
}

#[tokio::test]
async fn help_lists_the_commands_and_their_options() {
    let top = aquaregia(&["--help"]).await;
    assert_eq!(top.code, Some(0), "{top:?}");
    for command in [
        "run", "chat", "sessions", "config", "mcp", "acp", "--config",
    ] {
        assert!(top.stdout.contains(command), "{command}: {top:?}");
    }

    let run_help = aquaregia(&["run", "--help"]).await;
    assert_eq!(run_help.code, Some(0), "{run_help:?}");
    for option in [
        "--server",
        "--stdio",
        "--http",
        "--sse",
        "--model",
        "--max-steps",
        "--system",
        "--yes",
        "[y/N/always]",
        "not a terminal",
        "--continue",
        "--resume <ID>",
        "--output <OUTPUT>",
        "--allow <GLOB>",
        "--deny <GLOB>",
        "--ask-all",
        "--disable-tool <NAME_OR_GLOB>",
        "--connect-timeout <SECONDS>",
        "--call-timeout <SECONDS>",
        "--strict",
    ] {
        assert!(run_help.stdout.contains(option), "{option}: {run_help:?}");
    }

    let acp_help = aquaregia(&["acp", "--help"]).await;
    assert_eq!(acp_help.code, Some(0), "{acp_help:?}");
    for option in [
        "--model <PROVIDER:MODEL>",
        "AQUAREGIA_MODEL",
        "--mcp-startup-timeout <SECONDS>",
        "[default: 30]",
        "--disable-tool <NAME_OR_GLOB>",
        "--max-steps",
        "--system",
    ] {
        assert!(acp_help.stdout.contains(option), "{option}: {acp_help:?}");
    }

    for subcommand in [["mcp", "tools"], ["mcp", "call"]] {
        let help = aquaregia(&[subcommand[0], subcommand[1], "--help"]).await;
        assert_eq!(help.code, Some(0), "{help:?}");
        assert!(help.stdout.contains("--json"), "{help:?}");
    }
}

/// `openai:` (the Responses API) at a compatible server (`OPENAI_BASE_URL`, e.g. llama.cpp)
/// needs no key, as `openai-chat:` doesn't.
#[tokio::test]
async fn openai_at_a_base_url_needs_no_key() {
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Hi."}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant",
                        "content": [{"type": "output_text", "text": "Hi."}]}],
            "usage": {"input_tokens": 5, "output_tokens": 2}}}),
    ];
    let body: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    let model = MockServer::with_replies(vec![Reply::sse(body)]).await;
    let scratch = Scratch::new();
    let mut command = cli(&scratch);
    command
        .args(["run", "--model", "openai:local", "Hello"])
        .env("OPENAI_BASE_URL", &model.url);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Hi.\n");
    let request = &model.requests()[0];
    assert_eq!(request.path, "/v1/responses");
    assert!(
        request.headers.get("authorization").is_none(),
        "{request:?}"
    );
}

#[tokio::test]
async fn a_missing_api_key_is_one_line_naming_the_variable() {
    let outcome = aquaregia(&["run", "--model", "openai:gpt-5-mini", "Hello"]).await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(outcome.stdout.is_empty(), "{outcome:?}");
    assert_eq!(outcome.stderr.lines().count(), 1, "{outcome:?}");
    assert!(outcome.stderr.starts_with("error: "), "{outcome:?}");
    assert!(outcome.stderr.contains("OPENAI_API_KEY"), "{outcome:?}");
}

#[tokio::test]
async fn a_bad_model_spec_is_one_line() {
    let outcome = aquaregia(&["run", "--model", "gpt-5", "Hello"]).await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert_eq!(outcome.stderr.lines().count(), 1, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .starts_with("error: cannot use model `gpt-5`"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn an_unreachable_default_model_says_how_to_choose_one() {
    let scratch = Scratch::new();
    // Nothing listens there.
    let closed = aquaregia_test_support::deps::ClosedPort::new();
    let port = closed.port();
    let mut command = cli(&scratch);
    command
        .args(["run", "Hello"])
        .env("OLLAMA_HOST", format!("127.0.0.1:{port}"));
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert_eq!(outcome.stderr.lines().count(), 1, "{outcome:?}");
    assert!(
        outcome.stderr.contains("`ollama:llama3.2` was tried")
            && outcome.stderr.contains("--model")
            && outcome.stderr.contains("AQUAREGIA_MODEL"),
        "{outcome:?}"
    );
}
