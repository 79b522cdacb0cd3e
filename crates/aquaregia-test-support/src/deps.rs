//! The external programs the interoperability tests talk to (server-everything, the MCP
//! conformance suite, a Python MCP server, the ACP TypeScript SDK...), installed once by
//! `scripts/test-deps.sh`, and helpers to run them: paths, ports, example binaries and
//! background server processes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Values from the installer's `env` file (`AQUAREGIA_SERVER_EVERYTHING`, `AQUAREGIA_NODE22`,
/// `AQUAREGIA_TEST_DEPS`, `NODE_PATH`...). The installer runs once per test process.
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
            "{} failed; the MCP/ACP interoperability tests need npm and PyPI access",
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

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// Waits until something accepts TCP connections on `port` (generous bound).
pub async fn wait_for_port(port: u16) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("nothing listens on 127.0.0.1:{port} after 10 s");
}

/// A built example binary of the workspace (cargo builds the examples of the package under
/// test before running its integration tests). The path is derived from the running test
/// executable, so it works from any crate's tests.
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
        "{} is missing: run the tests through `cargo test` (with the features the example \
         requires, e.g. `-p aquaregia-mcp --features oauth`), which builds examples",
        binary.display()
    );
    binary
}

/// A background server process for a test; killed when dropped.
pub struct Background {
    child: tokio::process::Child,
}

impl Background {
    /// Starts `program args` with `envs` (stdout/stderr discarded) and waits for `port`.
    pub async fn start(program: &str, args: &[&str], envs: &[(&str, String)], port: u16) -> Self {
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        for (key, value) in envs {
            command.env(key, value);
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting {program}: {e}"));
        wait_for_port(port).await;
        Self { child }
    }

    /// server-everything in `mode` (`streamableHttp` or `sse`) on a free port; returns the port.
    pub async fn server_everything(mode: &str) -> (Self, u16) {
        let port = free_port();
        (Self::server_everything_on(mode, port).await, port)
    }

    /// server-everything in `mode` on `port`.
    pub async fn server_everything_on(mode: &str, port: u16) -> Self {
        let script = dep("AQUAREGIA_SERVER_EVERYTHING");
        Self::start(
            "node",
            &[&script, mode],
            &[("PORT", port.to_string())],
            port,
        )
        .await
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
