//! The `mcpServers` config file: found, parsed with warnings, and clear errors when it is wrong.

use crate::common;

use common::{Scratch, cli, run, test_server_entry};
use serde_json::json;

#[tokio::test]
async fn a_claude_desktop_file_with_extra_keys_works_with_warnings() {
    let scratch = Scratch::new();
    let mut entry = test_server_entry();
    entry["autoApprove"] = json!([]);
    scratch.write(
        "aquaregia.json",
        &json!({
            "globalShortcut": "Ctrl+Space",
            "mcpServers": {
                "test": entry,
                "other": {"url": "http://127.0.0.1:9/mcp"},
                "off": {"command": "does-not-matter", "disabled": true}
            }
        })
        .to_string(),
    );
    let mut command = cli(&scratch);
    command.args(["mcp", "tools", "test"]);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(
        outcome.stdout.starts_with("greet(name: string"),
        "{outcome:?}"
    );
    assert_eq!(
        outcome.stderr,
        "warning: aquaregia.json: ignoring unknown top-level key `globalShortcut`\n\
         warning: aquaregia.json: server `test`: ignoring unknown key `autoApprove`\n"
    );
    // A disabled server is not started, and naming it says why.
    let mut command = cli(&scratch);
    command.args(["mcp", "tools", "off"]);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(
        outcome.stderr.contains("server `off` is disabled"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_malformed_file_is_one_error_line_with_file_line_and_column() {
    let scratch = Scratch::new();
    let file = scratch.write("broken.json", "{\n  \"mcpServers\": {\n    \"a\": {,}\n");
    let mut command = cli(&scratch);
    command.args(["--config", file.to_str().unwrap(), "mcp", "tools", "a"]);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert_eq!(outcome.stderr.lines().count(), 1, "{outcome:?}");
    assert!(
        outcome.stderr.starts_with(&format!(
            "error: invalid config file {}: line 3, column 11:",
            file.display()
        )),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn an_unknown_server_lists_the_known_ones() {
    let scratch = Scratch::new();
    // Alphabetical: serde_json's map order depends on its features.
    scratch
        .config(&json!({"other": {"url": "http://127.0.0.1:9/mcp"}, "test": test_server_entry()}));
    let mut command = cli(&scratch);
    command.args(["mcp", "tools", "nope"]);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert_eq!(
        outcome.stderr,
        "error: unknown server `nope` (servers in aquaregia.json: other, test)\n"
    );
}

#[tokio::test]
async fn the_user_config_directory_is_used_when_the_current_one_has_none() {
    let scratch = Scratch::new();
    let file = scratch.user_config_dir().join("aquaregia/aquaregia.json");
    scratch.write(
        "xdg/aquaregia/aquaregia.json",
        &json!({"mcpServers": {"test": test_server_entry()}}).to_string(),
    );
    let mut command = cli(&scratch);
    command.args(["mcp", "call", "test", "greet", r#"{"name": "Bo"}"#]);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?} ({})", file.display());
    assert_eq!(outcome.stdout, "Hello, Bo.\n");
}

#[tokio::test]
async fn naming_a_server_without_any_config_says_where_it_looked() {
    let scratch = Scratch::new();
    let mut command = cli(&scratch);
    command.args(["mcp", "tools", "test"]);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert_eq!(outcome.stderr.lines().count(), 1, "{outcome:?}");
    assert!(
        outcome.stderr.starts_with("error: no config file found"),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("aquaregia.json"), "{outcome:?}");
}

#[tokio::test]
async fn variables_in_the_file_are_expanded_from_the_environment() {
    let scratch = Scratch::new();
    scratch.config(&json!({"test": {
        "command": "${AQUAREGIA_TEST_PYTHON:-python3}",
        "args": ["${AQUAREGIA_TEST_SCRIPT}"],
    }}));
    let mut command = cli(&scratch);
    command
        .args(["mcp", "call", "test", "greet", r#"{"name": "Bo"}"#])
        .env("AQUAREGIA_TEST_SCRIPT", common::test_server_script())
        .env_remove("AQUAREGIA_TEST_PYTHON");
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Hello, Bo.\n");

    // Unset, without a default: one error line naming the variable, the server and the field.
    let mut command = cli(&scratch);
    command
        .args(["mcp", "call", "test", "greet", r#"{"name": "Bo"}"#])
        .env_remove("AQUAREGIA_TEST_SCRIPT");
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert_eq!(
        outcome.stderr,
        "error: invalid config file aquaregia.json: server `test`: `args[0]` uses \
         `${AQUAREGIA_TEST_SCRIPT}`, which is not set (set it, or give a default: \
         `${AQUAREGIA_TEST_SCRIPT:-default}`)\n"
    );
}
