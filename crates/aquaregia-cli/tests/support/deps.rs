//! The external programs the interoperability tests talk to (server-everything), installed
//! once by `scripts/test-deps.sh`.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Paths from the installer's `env` file (`AQUAREGIA_SERVER_EVERYTHING`...).
pub fn deps() -> &'static HashMap<String, String> {
    static DEPS: OnceLock<HashMap<String, String>> = OnceLock::new();
    DEPS.get_or_init(|| {
        let script = repo_root().join("scripts/test-deps.sh");
        let output = std::process::Command::new("bash")
            .arg(&script)
            .stderr(std::process::Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
        assert!(
            output.status.success(),
            "{} failed; the MCP interoperability tests need npm and PyPI access",
            script.display()
        );
        let env_sh = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let env_file = PathBuf::from(env_sh).with_file_name("env");
        std::fs::read_to_string(&env_file)
            .unwrap_or_else(|e| panic!("reading {}: {e}", env_file.display()))
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    })
}

/// One path from [`deps`].
pub fn dep(name: &str) -> String {
    deps()
        .get(name)
        .unwrap_or_else(|| panic!("scripts/test-deps.sh did not provide {name}"))
        .clone()
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `mcpServers` entry that starts server-everything over stdio.
pub fn server_everything_entry() -> serde_json::Value {
    serde_json::json!({"command": "node", "args": [dep("AQUAREGIA_SERVER_EVERYTHING"), "stdio"]})
}
