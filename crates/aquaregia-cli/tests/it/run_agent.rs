//! `aquaregia run` against a mock model: the answer on stdout, tool calls on stderr, and the
//! permission question.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply, tool_names, tool_results};
use common::{
    Scratch, cli, run, server_everything_entry, test_server_command, test_server_entry, use_mock,
};
use serde_json::json;

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn with_yes_runs_the_tool_and_streams_the_answer() {
    let scratch = Scratch::new();
    scratch.config(&json!({"everything": server_everything_entry()}));
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "echo", json!({"message": "hi"}))]),
        Reply::text_stream(&["The echo ", "said: hi"]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args(["run", "--yes", "Echo hi, please."]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "The echo said: hi\n");
    assert!(
        outcome.stderr.contains(r#"✓ echo(message: "hi") ok in "#),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains(": Echo: hi\n"), "{outcome:?}");
    let requests = model.bodies();
    assert_eq!(requests.len(), 2);
    // One server: its tools keep their own names.
    assert!(tool_names(&requests[0]).contains(&"echo".to_owned()));
    assert_eq!(
        tool_results(&requests[1]),
        [("call_1".to_owned(), "Echo: hi".to_owned())]
    );
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn several_servers_prefix_their_tools_and_failures_are_reported() {
    let scratch = Scratch::new();
    scratch.config(&json!({
        "everything": server_everything_entry(),
        "test": test_server_entry(),
        "unused": {"command": "false"}
    }));
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[
            ("call_1", "test__greet", json!({"name": "Ann"})),
            ("call_2", "test__fail", json!({})),
        ]),
        Reply::text_stream(&["Done."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args([
        "run",
        "--yes",
        "--server",
        "everything",
        "--server",
        "test",
        "--system",
        "Be brief.",
        "Greet Ann.",
    ]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Done.\n");
    assert!(
        outcome
            .stderr
            .contains(r#"✓ test__greet(name: "Ann") ok in "#),
        "{outcome:?}"
    );
    assert!(
        outcome.stderr.contains("✗ test__fail() failed in "),
        "{outcome:?}"
    );
    assert!(
        outcome.stderr.contains(": the disk is on fire\n"),
        "{outcome:?}"
    );
    let requests = model.bodies();
    let tools = tool_names(&requests[0]);
    assert!(tools.contains(&"everything__echo".to_owned()), "{tools:?}");
    assert!(tools.contains(&"test__greet".to_owned()), "{tools:?}");
    assert_eq!(requests[0]["messages"][0]["content"], "Be brief.");
    assert_eq!(
        tool_results(&requests[1])[0],
        ("call_1".to_owned(), "Hello, Ann.".to_owned())
    );
}

#[tokio::test]
async fn answering_n_denies_the_call() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "greet", json!({"name": "Ann"}))]),
        Reply::text_stream(&["Understood, I will not."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args([
        "run",
        "--ask-all",
        "--answers-from-stdin",
        "--stdio",
        &test_server_command(),
        "Greet Ann.",
    ]);
    use_mock(&mut command, &model);
    let outcome = run(command, "n\n").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Understood, I will not.\n");
    assert!(
        outcome
            .stderr
            .contains("Allow greet(name: \"Ann\")? [y/N/always] n\n"),
        "{outcome:?}"
    );
    assert!(
        outcome
            .stderr
            .contains("✗ greet denied: the user declined\n"),
        "{outcome:?}"
    );
    let results = tool_results(&model.bodies()[1]);
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("the user declined"), "{results:?}");
}

#[tokio::test]
async fn always_allows_the_same_call_for_the_rest_of_the_run() {
    let scratch = Scratch::new();
    // "always" is a rule for this tool with these arguments. The same call twice in one
    // answer runs once (both ids get its result); the third call, a step later, runs under
    // the rule without a question.
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[
            ("call_1", "greet", json!({"name": "Ann"})),
            ("call_2", "greet", json!({"name": "Ann"})),
        ]),
        Reply::tool_stream(&[("call_3", "greet", json!({"name": "Ann"}))]),
        Reply::text_stream(&["Greeted all three."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args([
        "run",
        "--ask-all",
        "--answers-from-stdin",
        "--stdio",
        &test_server_command(),
        "Greet them.",
    ]);
    use_mock(&mut command, &model);
    let outcome = run(command, "always\n").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stderr.matches("Allow ").count(), 1, "{outcome:?}");
    assert_eq!(outcome.stderr.matches(" ok in ").count(), 2, "{outcome:?}");
    let requests = model.bodies();
    assert_eq!(
        tool_results(&requests[1])
            .into_iter()
            .map(|(_, content)| content)
            .collect::<Vec<_>>(),
        ["Hello, Ann.", "Hello, Ann."]
    );
}

#[tokio::test]
async fn a_closed_stdin_denies_instead_of_hanging() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "greet", json!({"name": "Ann"}))]),
        Reply::text_stream(&["No greeting then."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args([
        "run",
        "--ask-all",
        "--stdio",
        &test_server_command(),
        "Greet Ann.",
    ]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(
        outcome.stderr.contains("stdin is closed") && outcome.stderr.contains("--yes"),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("✗ greet denied"), "{outcome:?}");
}

#[tokio::test]
async fn running_out_of_steps_is_an_error() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![Reply::tool_stream(&[(
        "call_1",
        "greet",
        json!({"name": "Ann"}),
    )])])
    .await;
    let mut command = cli(&scratch);
    command.args([
        "run",
        "--yes",
        "--max-steps",
        "1",
        "--stdio",
        &test_server_command(),
        "Greet Ann.",
    ]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(
        outcome.error_lines().last().is_some_and(
            |line| line.starts_with("error: the agent was still calling tools after 1 steps")
        ),
        "{outcome:?}"
    );
}

/// Fault 4: one duplicate or colliding tool name used to fail the whole run.
#[tokio::test]
async fn duplicate_and_colliding_tool_names_do_not_fail_the_run() {
    let scratch = Scratch::new();
    let mut entry = test_server_entry();
    entry["env"] = json!({"AQUAREGIA_TEST_DUPLICATES": "1"});
    scratch.config(&json!({"test": entry}));
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[
            ("call_1", "greet", json!({"name": "Ann"})),
            ("call_2", "a_b", json!({})),
        ]),
        Reply::text_stream(&["Done."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args(["run", "--yes", "Greet Ann."]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let requests = model.bodies();
    let tools = tool_names(&requests[0]);
    assert_eq!(
        tools.iter().filter(|name| *name == "greet").count(),
        1,
        "{tools:?}"
    );
    assert_eq!(
        tools.iter().filter(|name| *name == "a_b").count(),
        1,
        "{tools:?}"
    );
    // The first of each name is kept: `a_b` is the server's `a.b`.
    assert_eq!(
        tool_results(&requests[1]),
        [
            ("call_1".to_owned(), "Hello, Ann.".to_owned()),
            ("call_2".to_owned(), "called a.b".to_owned())
        ]
    );
}

#[tokio::test]
async fn a_tool_added_mid_run_is_withheld_until_approved() {
    let scratch = Scratch::new();
    let mut entry = test_server_entry();
    entry["env"] = json!({"AQUAREGIA_TEST_LIST_CHANGED": "1"});
    scratch.config(&json!({"test": entry}));
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "greet", json!({"name": "Ann"}))]),
        Reply::tool_stream(&[("call_2", "later", json!({}))]),
        Reply::text_stream(&["Done."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args(["run", "--yes", "Greet Ann."]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    // The server's tools were pinned when first seen; one that appears later is new to the
    // user, so it is not offered until approved (no terminal here to ask on).
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(
        outcome.stderr.contains("has a new tool `later`")
            && outcome.stderr.contains("run `aquaregia mcp trust test`"),
        "{outcome:?}"
    );
    let requests = model.bodies();
    for request in &requests {
        assert!(!tool_names(request).contains(&"later".to_owned()));
    }
}
