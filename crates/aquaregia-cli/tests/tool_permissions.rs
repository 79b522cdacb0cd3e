//! Permissions in `run`: read-only tools of trusted servers run without a question (a server
//! that is not trusted gets asked about, whatever it claims), `--deny` blocks a tool even with
//! `--yes`, `--allow` lets one through, and `--ask-all` asks for read-only tools too.

mod common;

use aquaregia_test_support::mock_model::{MockServer, Reply, tool_results};
use common::{Scratch, cli, run, test_server_command, test_server_entry, use_mock};
use serde_json::json;

async fn call(tool: &str, flags: &[&str]) -> (common::Outcome, Vec<(String, String)>) {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", tool, json!({"name": "Ann"}))]),
        Reply::text_stream(&["Done."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command
        .args(["run", "--stdio", &test_server_command()])
        .args(flags)
        .arg("Go.");
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    let results = model.bodies().get(1).map(tool_results).unwrap_or_default();
    (outcome, results)
}

/// `run` calling `greet` of the config's server `t` (marked `"trust": true` or not).
async fn call_configured(scratch: &Scratch, trust: bool) -> (common::Outcome, String) {
    let mut entry = test_server_entry();
    if trust {
        entry["trust"] = json!(true);
    }
    scratch.config(&json!({ "t": entry }));
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "greet", json!({"name": "Ann"}))]),
        Reply::text_stream(&["Done."]),
    ])
    .await;
    let mut command = cli(scratch);
    command.args(["run", "Go."]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    let results = model.bodies().get(1).map(tool_results).unwrap_or_default();
    (
        outcome,
        results.first().map(|r| r.1.clone()).unwrap_or_default(),
    )
}

#[tokio::test]
async fn read_only_tools_of_a_trusted_server_run_without_a_question() {
    let scratch = Scratch::new();
    let (outcome, result) = call_configured(&scratch, true).await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(!outcome.stderr.contains("Allow "), "{outcome:?}");
    assert_eq!(result, "Hello, Ann.");
}

#[tokio::test]
async fn a_read_only_hint_from_a_server_that_is_not_trusted_still_asks() {
    // `greet` claims readOnlyHint; the server is given inline, trusted by nobody.
    let (outcome, results) = call("greet", &[]).await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(
        outcome.stderr.contains(r#"Allow greet(name: "Ann")?"#),
        "{outcome:?}"
    );
    assert!(results[0].1.contains("the user declined"), "{results:?}");

    // The same from the config: asked, until `aquaregia mcp trust t`.
    let scratch = Scratch::new();
    let (outcome, result) = call_configured(&scratch, false).await;
    assert!(outcome.stderr.contains("Allow greet("), "{outcome:?}");
    assert!(result.contains("the user declined"), "{result}");
    let mut trust = cli(&scratch);
    trust.args(["mcp", "trust", "t"]);
    let trusted = run(trust, "").await;
    assert_eq!(trusted.code, Some(0), "{trusted:?}");
    assert!(trusted.stderr.contains("trusted `t`"), "{trusted:?}");
    let (outcome, result) = call_configured(&scratch, false).await;
    assert!(!outcome.stderr.contains("Allow "), "{outcome:?}");
    assert_eq!(result, "Hello, Ann.");

    // `untrust`: asked again.
    let mut untrust = cli(&scratch);
    untrust.args(["mcp", "untrust", "t"]);
    assert_eq!(run(untrust, "").await.code, Some(0));
    let (outcome, _) = call_configured(&scratch, false).await;
    assert!(outcome.stderr.contains("Allow greet("), "{outcome:?}");
}

#[tokio::test]
async fn ask_all_asks_for_read_only_tools_too() {
    let (outcome, results) = call("greet", &["--ask-all"]).await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(
        outcome.stderr.contains(r#"Allow greet(name: "Ann")?"#),
        "{outcome:?}"
    );
    assert!(results[0].1.contains("the user declined"), "{results:?}");
}

#[tokio::test]
async fn deny_blocks_a_tool_even_with_yes() {
    let (outcome, results) = call("greet", &["--yes", "--deny", "gr*"]).await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("✗ greet denied: blocked by the deny rule `gr*`"),
        "{outcome:?}"
    );
    assert!(results[0].1.contains("deny rule"), "{results:?}");
}

#[tokio::test]
async fn allow_lets_a_tool_through_without_a_question() {
    let (outcome, results) = call("fail", &["--allow", "fail"]).await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(!outcome.stderr.contains("Allow "), "{outcome:?}");
    assert!(results[0].1.contains("the disk is on fire"), "{results:?}");

    let (outcome, results) = call("fail", &[]).await;
    assert!(outcome.stderr.contains("Allow fail"), "{outcome:?}");
    assert!(results[0].1.contains("the user declined"), "{results:?}");
}
