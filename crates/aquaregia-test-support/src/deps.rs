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

/// A port on 127.0.0.1 that is bound but not listening: connecting to it is refused, and no
/// other socket can take it while this value lives (a port that was free a moment ago may not
/// be by the time it is used).
#[derive(Debug)]
pub struct ClosedPort {
    // Held, never listened on.
    _socket: tokio::net::TcpSocket,
    port: u16,
}

impl ClosedPort {
    /// Reserves a port.
    pub fn new() -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
        socket
            .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind 127.0.0.1:0");
        let port = socket.local_addr().expect("its address").port();
        Self {
            _socket: socket,
            port,
        }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Default for ClosedPort {
    fn default() -> Self {
        Self::new()
    }
}

/// How long a background server may take to say which port it listens on.
const LISTEN_BOUND: std::time::Duration = std::time::Duration::from_secs(30);

/// The Node preload that makes a server print the port it listens on
/// (`node/report-port.cjs`).
pub fn node_port_reporter() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("node/report-port.cjs")
}

/// A Python stdio MCP server of `servers/` (no SDK, run with the system `python3`), e.g.
/// `mcp_test_server.py`.
pub fn python_server(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("servers")
        .join(name);
    assert!(path.exists(), "no test server {}", path.display());
    path
}

/// `source` as a Node ES module in the installed npm directory (where `import` finds the
/// packages `scripts/test-deps.sh` installed), under a name of its own; removed when the
/// returned path is dropped.
pub fn node_script(source: &str) -> tempfile::TempPath {
    let dir = PathBuf::from(dep("AQUAREGIA_TEST_DEPS")).join("npm");
    let mut file = tempfile::Builder::new()
        .prefix("aquaregia-test-")
        .suffix(".mjs")
        .tempfile_in(&dir)
        .unwrap_or_else(|e| panic!("a script in {}: {e}", dir.display()));
    std::io::Write::write_all(&mut file, source.as_bytes()).expect("write the script");
    file.into_temp_path()
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

/// A background server process for a test; killed when dropped (or [`stop`](Self::stop)ped).
#[derive(Debug)]
pub struct Background {
    child: tokio::process::Child,
    /// Drains the server's stderr after the port line, so the pipe never fills.
    drain: tokio::task::JoinHandle<()>,
}

impl Background {
    /// Starts `command` and reads its stderr until a line `<prefix><port>` says which port it
    /// listens on (the server binds port 0, or the port it was given, and reports it). Fails
    /// the test with what the server printed if it exits or stays silent for 30 s.
    pub async fn start_reporting_port(
        mut command: tokio::process::Command,
        prefix: &str,
    ) -> (Self, u16) {
        use tokio::io::AsyncBufReadExt;
        command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let program = command
            .as_std()
            .get_program()
            .to_string_lossy()
            .into_owned();
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting {program}: {e}"));
        let stderr = child.stderr.take().expect("piped stderr");
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let mut seen = String::new();
        let port = tokio::time::timeout(LISTEN_BOUND, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(port) = line
                    .strip_prefix(prefix)
                    .and_then(|p| p.trim().parse().ok())
                {
                    return Some(port);
                }
                seen.push_str(&line);
                seen.push('\n');
            }
            None
        })
        .await;
        let port = match port {
            Ok(Some(port)) => port,
            Ok(None) => panic!("{program} exited before listening; its stderr:\n{seen}"),
            Err(_) => {
                panic!("{program} did not listen within {LISTEN_BOUND:?}; its stderr:\n{seen}")
            }
        };
        let drain = tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        (Self { child, drain }, port)
    }

    /// A Node server (`node <args>`, with `envs`) with [`node_port_reporter`] preloaded;
    /// returns it and the port it reports listening on.
    pub async fn node(args: &[&str], envs: &[(&str, String)]) -> (Self, u16) {
        let mut command = tokio::process::Command::new("node");
        command
            .arg("--require")
            .arg(node_port_reporter())
            .args(args);
        for (key, value) in envs {
            command.env(key, value);
        }
        Self::start_reporting_port(command, "aquaregia-test-port ").await
    }

    /// server-everything in `mode` (`streamableHttp` or `sse`) on a port of its choosing;
    /// returns the port.
    pub async fn server_everything(mode: &str) -> (Self, u16) {
        Self::server_everything_on(mode, 0).await
    }

    /// server-everything in `mode` on `port` (a restart on the port a stopped one had), or on
    /// a port of its choosing with 0; returns the port.
    pub async fn server_everything_on(mode: &str, port: u16) -> (Self, u16) {
        let script = dep("AQUAREGIA_SERVER_EVERYTHING");
        Self::node(&[&script, mode], &[("PORT", port.to_string())]).await
    }

    /// Kills the server and waits until it is gone (its port is free again).
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
        self.drain.abort();
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        self.drain.abort();
    }
}
