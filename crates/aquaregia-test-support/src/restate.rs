//! A throwaway `restate-server` on 127.0.0.1 ([`RestateServer`]: a temp base dir, ports of
//! its own choosing, its admin API to register deployments), and a service process that can be
//! SIGKILLed and started again at the same address ([`ServiceProcess`]).
//!
//! The server comes from `scripts/test-deps.sh restate` (the npm package
//! `@restatedev/restate-server`, pinned there).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::deps::repo_root;

/// How long the server has to say where it listens and to answer its health checks.
const START_BOUND: Duration = Duration::from_secs(60);
/// How long a registration or an ingress call may take.
const CALL_BOUND: Duration = Duration::from_secs(60);

/// The `restate-server` binary (`scripts/test-deps.sh restate`, once per process).
pub fn server_binary() -> &'static PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let script = repo_root().join("scripts/test-deps.sh");
        let output = Command::new("bash")
            .arg(&script)
            .arg("restate")
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
        assert!(
            output.status.success(),
            "{} restate failed; the durable-run tests need npm",
            script.display()
        );
        PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
    })
}

/// What the server's log said so far, and the ports it reported.
#[derive(Default)]
struct Seen {
    log: String,
    ingress: Option<u16>,
    admin: Option<u16>,
}

/// A `restate-server` in its own process group, with a temp base dir and the ports it picked
/// on 127.0.0.1. Killed (the whole group) and its directory removed when dropped.
pub struct RestateServer {
    child: Child,
    seen: Arc<Mutex<Seen>>,
    /// The ingress, e.g. `http://127.0.0.1:40807`.
    pub ingress: String,
    /// The admin API, e.g. `http://127.0.0.1:36535`.
    pub admin: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl RestateServer {
    /// Starts a server and waits until both its admin API and its ingress answer their health
    /// checks. Failed invocations are retried quickly (from 50 ms, at most 1 s apart), so a
    /// service that was killed and started again is found within a second.
    pub async fn start() -> Self {
        Self::start_with_config("").await
    }

    /// [`start`](Self::start) with more TOML appended to the server's configuration (whole
    /// sections, e.g. `[log-server]\nrocksdb-disable-wal-fsync = true`).
    pub async fn start_with_config(extra: &str) -> Self {
        let binary = server_binary();
        let dir = tempfile::Builder::new()
            .prefix("aquaregia-restate-")
            .tempdir()
            .expect("temp dir");
        let config = dir.path().join("restate.toml");
        std::fs::write(
            &config,
            r#"
disable-telemetry = true
log-format = "compact"
log-disable-ansi-codes = true
log-filter = "warn,restate=info"
default-num-partitions = 1
rocksdb-total-memory-size = "256 MiB"

[default-retry-policy]
initial-interval = "50ms"
exponentiation-factor = 2.0
max-interval = "1s"
max-attempts = 200
on-max-attempts = "kill"
"#
            .to_owned()
                + extra,
        )
        .expect("write the config");
        let mut command = Command::new(binary);
        command
            .arg("--config-file")
            .arg(&config)
            .arg("--base-dir")
            .arg(dir.path())
            .args([
                "--node-name",
                "aquaregia-test",
                "--listen-mode",
                "tcp",
                "--use-random-ports",
                "true",
                "--bind-ip",
                "127.0.0.1",
                "--advertised-host",
                "127.0.0.1",
                "--no-logo",
            ])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (ports_tx, mut ports_rx) = watch::channel(false);
        let ports_tx = Arc::new(ports_tx);
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let seen = seen.clone();
            let ports_tx = ports_tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    let mut seen = seen.lock().unwrap();
                    if let Some(port) = reported_port(&line, "http-ingress-server") {
                        seen.ingress = Some(port);
                    }
                    if let Some(port) = reported_port(&line, "admin-api-server") {
                        seen.admin = Some(port);
                    }
                    seen.log.push_str(&line);
                    seen.log.push('\n');
                    if seen.ingress.is_some() && seen.admin.is_some() {
                        ports_tx.send_replace(true);
                    }
                }
            });
        }
        let reported = tokio::time::timeout(START_BOUND, ports_rx.wait_for(|ready| *ready)).await;
        let (ingress, admin) = {
            let seen = seen.lock().unwrap();
            match (reported, seen.ingress, seen.admin) {
                (Ok(Ok(_)), Some(ingress), Some(admin)) => (ingress, admin),
                _ => panic!(
                    "restate-server did not report its ports within {START_BOUND:?}; its log:\n{}",
                    seen.log
                ),
            }
        };
        let server = Self {
            child,
            seen,
            ingress: format!("http://127.0.0.1:{ingress}"),
            admin: format!("http://127.0.0.1:{admin}"),
            http: reqwest::Client::new(),
            _dir: dir,
        };
        server
            .wait_healthy(&format!("{}/health", server.admin))
            .await;
        server
            .wait_healthy(&format!("{}/restate/health", server.ingress))
            .await;
        server
    }

    /// Polls `url` (the server's health endpoints) until it answers 200.
    async fn wait_healthy(&self, url: &str) {
        let healthy = tokio::time::timeout(START_BOUND, async {
            loop {
                if let Ok(response) = self.http.get(url).send().await
                    && response.status().is_success()
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        if healthy.is_err() {
            panic!(
                "{url} did not answer 200 within {START_BOUND:?}; the server's log:\n{}",
                self.log()
            );
        }
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        self.seen.lock().unwrap().log.clone()
    }

    /// Registers (or registers again, `force`) the deployment at `uri` through the admin API;
    /// returns the admin API's answer.
    pub async fn register(&self, uri: &str) -> Value {
        let response = tokio::time::timeout(
            CALL_BOUND,
            self.http
                .post(format!("{}/deployments", self.admin))
                .json(&json!({"uri": uri, "force": true}))
                .send(),
        )
        .await
        .expect("registration within the bound")
        .expect("the admin API answers");
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        assert!(
            status.is_success(),
            "registering {uri}: {status} {body}\nthe server's log:\n{}",
            self.log()
        );
        serde_json::from_str(&body).unwrap_or(Value::Null)
    }

    /// Sends `body` (JSON; `null` for no body, as handlers without input want) to `path` on
    /// the ingress (e.g. `/AgentRun/run-1/run/send`) and returns the status and the answer
    /// (JSON, or the text as a JSON string).
    pub async fn ingress_post(&self, path: &str, body: &Value) -> (u16, Value) {
        let mut request = self.http.post(format!("{}{path}", self.ingress));
        if !body.is_null() {
            request = request.json(body);
        }
        let response = tokio::time::timeout(CALL_BOUND, request.send())
            .await
            .unwrap_or_else(|_| panic!("POST {path} did not answer within {CALL_BOUND:?}"))
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Cancels invocation `invocation_id` through the admin API (`PATCH
    /// /invocations/<id>/cancel`); returns the status.
    pub async fn cancel(&self, invocation_id: &str) -> u16 {
        let url = format!("{}/invocations/{invocation_id}/cancel", self.admin);
        let response = tokio::time::timeout(CALL_BOUND, self.http.patch(&url).send())
            .await
            .unwrap_or_else(|_| panic!("PATCH {url} did not answer within {CALL_BOUND:?}"))
            .unwrap_or_else(|e| panic!("PATCH {url}: {e}"));
        response.status().as_u16()
    }

    /// Waits (within `bound`) for the result of workflow `workflow` with key `key` (the
    /// ingress's `attach`), and returns the status and the body.
    pub async fn attach(&self, workflow: &str, key: &str, bound: Duration) -> (u16, Value) {
        let url = format!("{}/restate/workflow/{workflow}/{key}/attach", self.ingress);
        let response = tokio::time::timeout(bound, self.http.get(&url).send())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{workflow}/{key} did not finish within {bound:?}; the server's log:\n{}",
                    self.log()
                )
            })
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
}

impl Drop for RestateServer {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The port in a log line `... Server listening server_name=<name> ... server.port=<port>`.
fn reported_port(line: &str, server_name: &str) -> Option<u16> {
    if !line.contains(&format!("server_name={server_name}")) {
        return None;
    }
    let (_, rest) = line.split_once("server.port=")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// A service process (e.g. an example binary serving a Restate endpoint) in its own process
/// group, which reports its port on stderr as `<prefix><port>`. [`kill`](Self::kill) SIGKILLs
/// it (no graceful shutdown: a crash), [`restart`](Self::restart) starts it again at the same
/// port. Killed when dropped.
pub struct ServiceProcess {
    program: PathBuf,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    prefix: String,
    port: u16,
    child: Option<tokio::process::Child>,
    stderr: Arc<Mutex<String>>,
}

impl ServiceProcess {
    /// Starts `program args... <address>` with `envs`, where `<address>` is `127.0.0.1:0`,
    /// and waits for its `<prefix><port>` line.
    pub async fn start(
        program: PathBuf,
        args: &[&str],
        envs: &[(&str, String)],
        prefix: &str,
    ) -> Self {
        let mut service = Self {
            program,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            envs: envs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            prefix: prefix.to_owned(),
            port: 0,
            child: None,
            stderr: Arc::default(),
        };
        service.spawn().await;
        service
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What it wrote on stderr so far (all its lives).
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    async fn spawn(&mut self) {
        use tokio::io::AsyncBufReadExt;
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(&self.args)
            .arg(format!("127.0.0.1:{}", self.port))
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", self.program.display()));
        let stderr = child.stderr.take().expect("piped stderr");
        let (port_tx, mut port_rx) = watch::channel(None);
        let seen = self.stderr.clone();
        let prefix = self.prefix.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(port) = line
                    .strip_prefix(&prefix)
                    .and_then(|p| p.trim().parse::<u16>().ok())
                {
                    port_tx.send_replace(Some(port));
                }
                let mut seen = seen.lock().unwrap();
                seen.push_str(&line);
                seen.push('\n');
            }
        });
        let reported = tokio::time::timeout(START_BOUND, port_rx.wait_for(Option::is_some)).await;
        let port = match reported {
            Ok(Ok(port)) => port.unwrap_or_default(),
            _ => panic!(
                "{} did not report its port; its stderr:\n{}",
                self.program.display(),
                self.stderr()
            ),
        };
        assert!(
            self.port == 0 || self.port == port,
            "restarted at another port"
        );
        self.port = port;
        self.child = Some(child);
    }

    /// SIGKILLs the process (and its group) and waits until it is gone.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
                let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = child.kill().await;
        }
    }

    /// Starts the process again at the port it had.
    pub async fn restart(&mut self) {
        self.kill().await;
        self.spawn().await;
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
                let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = child.start_kill();
        }
    }
}
