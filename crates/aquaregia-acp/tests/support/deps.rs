//! The external programs the interoperability tests use (the ACP TypeScript SDK...),
//! installed once by `scripts/test-deps.sh`, and this crate's example binaries.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Values from the installer's `env` file (`AQUAREGIA_TEST_DEPS`, `NODE_PATH`...).
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
            "{} failed; the ACP interoperability tests need npm and PyPI access",
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

/// One value from [`deps`].
pub fn dep(name: &str) -> String {
    deps()
        .get(name)
        .unwrap_or_else(|| panic!("scripts/test-deps.sh did not provide {name}"))
        .clone()
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A built example binary of this crate (cargo builds examples before running tests).
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/<test> -> target/<profile>/examples/<name>
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target profile dir");
    let binary = profile_dir.join("examples").join(name);
    assert!(
        binary.exists(),
        "{} is missing: run the tests through `cargo test`, which builds examples",
        binary.display()
    );
    binary
}
