//! What a stdio server sees of this process's environment: a short allowlist plus what it was
//! given, unless it opts into everything. API keys in the parent never reach it by default.
//!
//! The checks need `OPENAI_API_KEY` in this process's environment, and setting variables in a
//! running test process is unsound, so the test runs itself again as a child with the key set.

use std::collections::HashMap;

use aquaregia_mcp::{self as mcp, Connector, McpConnection, McpServerSpec};
use serde_json::json;
use tokio::process::Command;

/// Set in the re-run child, where the checks run.
const CHILD: &str = "AQUAREGIA_TEST_ENV_CHILD";
const SECRET: &str = "sk-parent-secret";

/// A stdio MCP server in Python (no SDK) with one tool, `env`, returning its whole environment
/// as a JSON object.
const ENV_SERVER: &str = r#"
import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    def reply(result):
        print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}), flush=True)
    if method == "initialize":
        reply({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
               "serverInfo": {"name": "env", "version": "1"}})
    elif method == "tools/list":
        reply({"tools": [{"name": "env", "inputSchema": {"type": "object"}}]})
    elif method == "tools/call":
        reply({"content": [{"type": "text", "text": json.dumps(dict(os.environ))}]})
    elif mid is not None:
        print(json.dumps({"jsonrpc": "2.0", "id": mid,
                          "error": {"code": -32601, "message": "Method not found"}}), flush=True)
"#;

fn env_server_spec(env: &[(&str, &str)]) -> McpServerSpec {
    let mut spec = McpServerSpec::stdio("python3", vec!["-c".into(), ENV_SERVER.into()]);
    if let McpServerSpec::Stdio { env: vars, .. } = &mut spec {
        *vars = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
    }
    spec
}

fn env_server_command() -> Command {
    let mut command = Command::new("python3");
    command.args(["-c", ENV_SERVER]);
    command
}

/// The server's environment, as its `env` tool reports it.
async fn server_env(connection: McpConnection) -> HashMap<String, String> {
    let tools = connection.tools().await.unwrap();
    let tool = tools.iter().find(|t| t.name() == "env").unwrap();
    let output = tool.execute(json!({})).await.unwrap();
    connection.close().await;
    let aquaregia::ToolOutput::Text(text) = output else {
        panic!("not text: {output}")
    };
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn stdio_servers_see_only_allowlisted_and_given_variables() {
    if std::env::var_os(CHILD).is_none() {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "stdio_servers_see_only_allowlisted_and_given_variables",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("OPENAI_API_KEY", SECRET)
            .status()
            .unwrap();
        assert!(status.success(), "the checks failed in the child: {status}");
        return;
    }
    assert_eq!(std::env::var("OPENAI_API_KEY").unwrap(), SECRET);

    // A spec: the allowlist plus its `env`.
    let seen = server_env(
        env_server_spec(&[("FROM_SPEC", "given")])
            .connect(Connector::new())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(seen.get("OPENAI_API_KEY"), None, "{seen:?}");
    assert_eq!(
        seen.get(CHILD),
        None,
        "only allowlisted variables: {seen:?}"
    );
    assert_eq!(seen["FROM_SPEC"], "given");
    // (pyenv's `python3` shim may prepend to PATH.)
    let path = seen.get("PATH").map_or("", String::as_str);
    assert!(path.ends_with(&std::env::var("PATH").unwrap()), "{path}");
    if let Ok(home) = std::env::var("HOME") {
        assert_eq!(seen["HOME"], home);
    }

    // A user-built Command: what was set on it is kept, what it would inherit is not.
    let mut command = env_server_command();
    command.env("SET_ON_COMMAND", "kept");
    let seen = server_env(mcp::connect_stdio(command).await.unwrap()).await;
    assert_eq!(seen.get("OPENAI_API_KEY"), None, "{seen:?}");
    assert_eq!(seen["SET_ON_COMMAND"], "kept");
    let mut command = env_server_command();
    command.env("OPENAI_API_KEY", "sk-given-on-purpose");
    let seen = server_env(mcp::connect_stdio(command).await.unwrap()).await;
    assert_eq!(seen["OPENAI_API_KEY"], "sk-given-on-purpose");

    // The opt-in, on the spec and on the connector: everything.
    let mut spec = env_server_spec(&[("FROM_SPEC", "given")]);
    if let McpServerSpec::Stdio { inherit_env, .. } = &mut spec {
        *inherit_env = true;
    }
    let seen = server_env(spec.connect(Connector::new()).await.unwrap()).await;
    assert_eq!(seen["OPENAI_API_KEY"], SECRET);
    assert_eq!(seen[CHILD], "1");
    assert_eq!(seen["FROM_SPEC"], "given");
    let seen = server_env(
        Connector::new()
            .inherit_env(true)
            .stdio(env_server_command())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(seen["OPENAI_API_KEY"], SECRET);
}
