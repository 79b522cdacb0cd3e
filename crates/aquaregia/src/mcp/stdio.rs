//! stdio servers: a child process in its own process group, its stderr drained into a
//! bounded tail, the whole group terminated on close or drop.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::error::McpError;

/// How much stderr is kept for error messages.
const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// How long a closed server gets to exit on its own, then after SIGTERM. Servers that keep
/// timers alive (most Node servers) ignore stdin closing, so this is paid on every close.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// A running stdio server process.
pub(crate) struct StdioProcess {
    /// The process group (the child's pid, since it leads its own group).
    pgid: Option<u32>,
    exit: watch::Receiver<Option<String>>,
    stderr: StderrTail,
    stderr_task: JoinHandle<()>,
}

/// The last bytes the server wrote to stderr.
#[derive(Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<Vec<u8>>>);

impl StderrTail {
    fn push(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        tail.extend_from_slice(bytes);
        if tail.len() > STDERR_TAIL_BYTES {
            let cut = tail.len() - STDERR_TAIL_BYTES;
            tail.drain(..cut);
        }
    }

    /// The last lines, trimmed, for an error message (empty when there was no output).
    pub(crate) fn text(&self) -> String {
        let tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&tail);
        let lines: Vec<&str> = text.trim_end().lines().collect();
        let start = lines.len().saturating_sub(20);
        lines[start..].join("\n")
    }
}

/// Starts `command` with piped stdio in a new process group.
pub(crate) fn spawn(
    mut command: Command,
    name: &str,
) -> Result<(StdioProcess, ChildStdout, ChildStdin), McpError> {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    let mut child = command.spawn().map_err(|error| {
        let what = if error.kind() == std::io::ErrorKind::NotFound {
            "command not found".to_owned()
        } else {
            error.to_string()
        };
        McpError::connect(name, format!("could not start `{program}`: {what}"))
    })?;
    let (Some(stdin), Some(stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(McpError::connect(
            name,
            "the child process has no piped stdio",
        ));
    };
    let pgid = child.id();

    let tail = StderrTail::default();
    let stderr_tail = tail.clone();
    let server = name.to_owned();
    // Drained continuously: a server blocked on a full stderr pipe would stop answering.
    let stderr_task = tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            match stderr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    stderr_tail.push(&buf[..n]);
                    for line in String::from_utf8_lossy(&buf[..n]).lines() {
                        tracing::debug!(server = %server, "stderr: {line}");
                    }
                }
            }
        }
    });

    let (exit_tx, exit) = watch::channel(None);
    // The child is owned by this task, which reaps it whenever it exits.
    tokio::spawn(async move {
        let status = match child.wait().await {
            Ok(status) => describe_exit(status),
            Err(error) => format!("could not be waited for: {error}"),
        };
        let _ = exit_tx.send(Some(status));
    });

    Ok((
        StdioProcess {
            pgid,
            exit,
            stderr: tail,
            stderr_task,
        },
        stdout,
        stdin,
    ))
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "exited".to_owned(),
    }
}

impl StdioProcess {
    /// How the process exited, if it has.
    pub(crate) fn exit_status(&self) -> Option<String> {
        self.exit.borrow().clone()
    }

    /// Waits up to `limit` for the process to exit, then for its stderr to be drained.
    pub(crate) async fn wait_exit(&self, limit: Duration) -> Option<String> {
        let mut exit = self.exit.clone();
        let status = tokio::time::timeout(limit, exit.wait_for(Option::is_some))
            .await
            .ok()
            .and_then(|status| status.ok().and_then(|s| s.clone()));
        if status.is_some() {
            // The pipe closes when the process (and any child holding it) is gone.
            let _ = tokio::time::timeout(Duration::from_millis(200), async {
                while !self.stderr_task.is_finished() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await;
        }
        status
    }

    /// An error description for a dead or failed server: exit status and stderr tail.
    pub(crate) fn describe_failure(&self, name: &str) -> String {
        let mut message = format!("`{name}`");
        match self.exit_status() {
            Some(status) => message.push_str(&format!(" {status}")),
            None => message.push_str(" stopped responding"),
        }
        let stderr = self.stderr.text();
        if !stderr.is_empty() {
            message.push_str("; stderr:\n");
            message.push_str(&stderr);
        }
        message
    }

    /// Graceful stop, once stdin is closed: wait, SIGTERM the group, wait, SIGKILL the group.
    /// The group is always killed at the end, so grandchildren (`npx`, `uvx`...) go too.
    pub(crate) async fn shutdown(&self) {
        if self.wait_exit(EXIT_GRACE).await.is_none() {
            self.signal_group(Signal::Term);
            self.wait_exit(EXIT_GRACE).await;
        }
        self.signal_group(Signal::Kill);
    }

    fn signal_group(&self, signal: Signal) {
        #[cfg(unix)]
        if let Some(pid) = self
            .pgid
            .and_then(|pgid| rustix::process::Pid::from_raw(pgid as i32))
        {
            let signal = match signal {
                Signal::Term => rustix::process::Signal::TERM,
                Signal::Kill => rustix::process::Signal::KILL,
            };
            // ESRCH just means the group is already gone.
            let _ = rustix::process::kill_process_group(pid, signal);
        }
        #[cfg(not(unix))]
        let _ = signal;
    }
}

#[derive(Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

impl Drop for StdioProcess {
    fn drop(&mut self) {
        // Synchronous and runtime-free, so it works from any drop site.
        self.signal_group(Signal::Kill);
    }
}
