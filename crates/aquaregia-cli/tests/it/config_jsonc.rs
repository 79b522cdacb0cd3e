//! Config files in the wild: JSONC (comments, trailing commas), Claude Code's `.mcp.json`,
//! VS Code's `servers` key, `permissions` rules, and `aquaregia config` saying where each
//! server came from.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply, tool_results};
use common::{Scratch, cli, run, test_server_script, use_mock};
use serde_json::json;

#[tokio::test]
async fn a_jsonc_file_with_permissions_loads_and_its_rules_apply() {
    let scratch = Scratch::new();
    scratch.write(
        "aquaregia.json",
        &format!(
            r#"{{
  // The in-repo test server.
  "mcpServers": {{
    "test": {{
      "command": "python3",
      "args": ["{}",], /* trailing comma above */
    }},
  }},
  "permissions": {{"deny": ["greet"],}},
}}"#,
            test_server_script()
        ),
    );
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "greet", json!({"name": "Ann"}))]),
        Reply::text_stream(&["Not allowed."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args(["run", "--yes", "Greet Ann."]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Not allowed.\n");
    let results = tool_results(&model.bodies()[1]);
    assert!(results[0].1.contains("deny rule `greet`"), "{results:?}");
}

#[tokio::test]
async fn mcp_json_and_vs_code_servers_merge_and_config_shows_their_origin() {
    let scratch = Scratch::new();
    scratch.write(
        ".mcp.json",
        &json!({"mcpServers": {
            "claude": {"command": "python3", "args": [test_server_script()]},
            "shadowed": {"command": "from-mcp-json"}
        }})
        .to_string(),
    );
    scratch.write(
        "aquaregia.json",
        &json!({
            "inputs": [],
            "servers": {
                "vscode": {"type": "stdio", "command": "python3", "args": [test_server_script()]},
                "shadowed": {"type": "http", "url": "http://127.0.0.1:9/mcp"}
            }
        })
        .to_string(),
    );
    let mut command = cli(&scratch);
    command.arg("config");
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let line = |name: &str| {
        outcome
            .stdout
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {outcome:?}"))
            .to_owned()
    };
    assert!(line("claude").ends_with("from .mcp.json"), "{outcome:?}");
    assert!(
        line("vscode").ends_with("from aquaregia.json"),
        "{outcome:?}"
    );
    assert!(
        line("shadowed").contains("http: http://127.0.0.1:9/mcp"),
        "the later file wins: {outcome:?}"
    );
    assert_eq!(outcome.stdout.matches("shadowed").count(), 1);

    // Both files' servers are usable.
    for server in ["claude", "vscode"] {
        let mut command = cli(&scratch);
        command.args(["mcp", "call", server, "greet", "name=Cy"]);
        let outcome = run(command, "").await;
        assert_eq!(outcome.code, Some(0), "{outcome:?}");
        assert_eq!(outcome.stdout, "Hello, Cy.\n");
    }
}

#[tokio::test]
async fn a_bad_permissions_entry_is_a_clear_error() {
    let scratch = Scratch::new();
    scratch.write(
        "aquaregia.json",
        r#"{"mcpServers": {}, "permissions": {"deny": "greet"}}"#,
    );
    let mut command = cli(&scratch);
    command.arg("config");
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert_eq!(
        outcome.stderr,
        "error: invalid config file aquaregia.json: `permissions.deny` must be a list of tool names or globs\n"
    );
}
