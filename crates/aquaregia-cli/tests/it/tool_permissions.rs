//! Permissions in `run`: read-only tools of trusted servers run without a question (a server
//! that is not trusted gets asked about, whatever it claims), `--deny` blocks a tool even with
//! `--yes`, `--allow` lets one through, and `--ask-all` asks for read-only tools too.

use crate::common;

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

const NO_MALLORY: &str = r#"
@reason("Mallory is not greeted")
forbid(principal, action == Action::"call", resource)
when { resource.name == "greet" && context.args.name like "Mal*" };
"#;

/// `greet` called with `name`, in a scratch directory holding `policy.cedar`.
async fn greet_with_policy(
    name: &str,
    flags: &[&str],
    envs: &[(&str, &str)],
) -> (common::Outcome, Vec<(String, String)>) {
    let scratch = Scratch::new();
    scratch.write("policy.cedar", NO_MALLORY);
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "greet", json!({ "name": name }))]),
        Reply::text_stream(&["Done."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command
        .args(["run", "--stdio", &test_server_command()])
        .args(flags)
        .arg("Go.");
    for (key, value) in envs {
        command.env(key, value);
    }
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    let results = model.bodies().get(1).map(tool_results).unwrap_or_default();
    (outcome, results)
}

#[tokio::test]
async fn a_cedar_policy_denies_a_call_by_argument_value_even_with_yes() {
    let (outcome, results) =
        greet_with_policy("Mallory", &["--yes", "--policy", "policy.cedar"], &[]).await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("✗ greet denied: Mallory is not greeted"),
        "{outcome:?}"
    );
    assert!(!results[0].1.contains("Hello"), "{results:?}");
    assert!(
        results[0].1.contains("Mallory is not greeted"),
        "{results:?}"
    );

    // Other arguments of the same tool go on to the other rules.
    let (outcome, results) =
        greet_with_policy("Ann", &["--yes", "--policy", "policy.cedar"], &[]).await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(results[0].1, "Hello, Ann.");
}

#[tokio::test]
async fn the_config_names_a_cedar_policy() {
    let scratch = Scratch::new();
    scratch.write("policy.cedar", NO_MALLORY);
    scratch.write(
        "aquaregia.json",
        &json!({
            "mcpServers": {"test": test_server_entry()},
            "policy": "policy.cedar",
        })
        .to_string(),
    );
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "greet", json!({ "name": "Mallory" }))]),
        Reply::text_stream(&["Done."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args(["run", "--yes", "Go."]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    let results = model.bodies().get(1).map(tool_results).unwrap_or_default();
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(
        results[0].1.contains("Mallory is not greeted"),
        "{results:?}"
    );
}

#[tokio::test]
async fn a_bad_policy_file_is_a_clear_error() {
    let scratch = Scratch::new();
    scratch.write("bad.cedar", "forbid(principal, action, resource) when {");
    let mut command = cli(&scratch);
    command.args([
        "run",
        "--yes",
        "--policy",
        "bad.cedar",
        "--stdio",
        &test_server_command(),
        "Go.",
    ]);
    let model = MockServer::with_replies(vec![Reply::text_stream(&["Done."])]).await;
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_ne!(outcome.code, Some(0), "{outcome:?}");
    assert!(
        outcome.stderr.contains("cannot use the policy bad.cedar")
            && outcome.stderr.contains("is not valid"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_shadow_policy_logs_what_it_would_decide_without_enforcing() {
    let (outcome, results) = greet_with_policy(
        "Mallory",
        &["--yes", "--policy-shadow", "policy.cedar"],
        &[("RUST_LOG", "aquaregia::policy=info")],
    )
    .await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(results[0].1, "Hello, Mallory.");
    assert!(
        outcome.stderr.contains(
            "shadow policy would decide deny (Mallory is not greeted), not enforced (enforced: allow)"
        ),
        "{outcome:?}"
    );
}

/// A chat turn in `scratch` calling `fail` with `name`, the permission question (if any)
/// answered with the next line, `answer`.
async fn fail_in(scratch: &Scratch, name: &str, answer: &str) -> common::Outcome {
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "fail", json!({ "name": name }))]),
        Reply::text_stream(&["Done."]),
    ])
    .await;
    let mut command = cli(scratch);
    command.args(["chat", "--stdio", &test_server_command()]);
    use_mock(&mut command, &model);
    run(command, &format!("Go.\n{answer}")).await
}

#[tokio::test]
async fn always_is_a_rule_for_these_arguments_kept_in_the_project() {
    let scratch = Scratch::new();
    let first = fail_in(&scratch, "Ann", "always\n").await;
    assert_eq!(first.code, Some(0), "{first:?}");
    assert!(
        first.stderr.contains("always allowing fail with {"),
        "the rule is named: {first:?}"
    );
    assert!(
        scratch.path.join(".aquaregia/permissions.json").exists(),
        "kept in the project"
    );
    // A later run in the project: the same call is not asked, another one is.
    let same = fail_in(&scratch, "Ann", "").await;
    assert_eq!(same.code, Some(0), "{same:?}");
    assert!(!same.stderr.contains("Allow "), "{same:?}");
    assert!(
        same.stderr.contains("the disk is on fire"),
        "it ran: {same:?}"
    );
    let other = fail_in(&scratch, "Bob", "n\n").await;
    assert!(other.stderr.contains("Allow fail"), "{other:?}");
}
