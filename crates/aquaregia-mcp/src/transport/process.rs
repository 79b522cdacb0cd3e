//! Processes that must not outlive this one: [`ProcessGroup`], a child leading a process
//! group of its own (a job object on Windows), and [`signal_group`] for groups another
//! process started. The one way the aquaregia crates start and end such processes: stdio MCP
//! servers (their stderr drained into a bounded tail, the group terminated on close or drop),
//! the ACP agent's local commands, the CLI's reaper.

use std::ffi::OsString;
use std::fmt;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop};
use tokio::io::AsyncReadExt;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, watch};

use crate::error::McpError;
use aquaregia::sync::lock;

/// How much stderr is kept for error messages.
const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// How long a closed server gets to exit on its own, then after SIGTERM. Servers that keep
/// timers alive (most Node servers) ignore stdin closing, so this is paid on every close.
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// How long an exited server's stderr gets to reach its end (grandchildren may hold the pipe).
const STDERR_DRAIN: Duration = Duration::from_millis(200);

/// The variables a stdio server inherits from this process unless it opts into the whole
/// environment: enough to find programs, the user's home and temporary directory, and the
/// text encoding, and nothing that usually holds a secret.
///
/// The lists are those of the official MCP SDKs (TypeScript and Python
/// `DEFAULT_INHERITED_ENV_VARS`), plus on Unix `TMPDIR` (where the temporary directory is) and
/// the locale (`LANG`, `LC_ALL`, `LC_CTYPE`: the text encoding a server's tools use for file
/// names and subprocess output; macOS terminals set only `LC_CTYPE`).
#[cfg(not(windows))]
pub const DEFAULT_INHERITED_ENV_VARS: &[&str] = &[
    "HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER",
];

/// The variables a stdio server inherits from this process unless it opts into the whole
/// environment: enough to find programs, the user's profile and temporary directory, and
/// nothing that usually holds a secret (the official MCP SDKs' `DEFAULT_INHERITED_ENV_VARS`).
#[cfg(windows)]
pub const DEFAULT_INHERITED_ENV_VARS: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PROCESSOR_ARCHITECTURE",
    "PROGRAMFILES",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "USERNAME",
    "USERPROFILE",
];

/// Replaces what `command` would inherit with [`DEFAULT_INHERITED_ENV_VARS`], keeping every
/// variable set or removed on `command` itself.
pub(crate) fn restrict_env(command: &mut Command) {
    let explicit: Vec<(OsString, Option<OsString>)> = command
        .as_std()
        .get_envs()
        .map(|(name, value)| (name.to_owned(), value.map(ToOwned::to_owned)))
        .collect();
    command.env_clear();
    for name in DEFAULT_INHERITED_ENV_VARS {
        // A value starting with `()` is an exported shell function (Shellshock): never passed.
        if let Some(value) = std::env::var_os(name)
            && !value.as_encoded_bytes().starts_with(b"()")
        {
            command.env(name, value);
        }
    }
    for (name, value) in explicit {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
}

/// A stdio server's process, as [`Connector::on_process`](crate::Connector::on_process)
/// reports it.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerProcess {
    /// The server was started: its process id, which on Unix is also the id of the process
    /// group it leads (its own children are in that group unless they leave it).
    Started {
        /// The process id (and process group id).
        pid: u32,
    },
    /// The server exited and whatever was left of its process group (or job) was killed.
    Ended {
        /// The process id it was started with.
        pid: u32,
    },
}

/// Called with each [`ServerProcess`] event.
pub type ProcessHook = Arc<dyn Fn(ServerProcess) + Send + Sync>;

/// A running stdio server process.
pub(crate) struct StdioProcess {
    /// To the task that owns the child. Dropping the sender kills the process group.
    signals: mpsc::UnboundedSender<GroupSignal>,
    exit: watch::Receiver<Option<String>>,
    stderr: StderrTail,
    /// `true` once the server's stderr reached its end.
    stderr_closed: watch::Receiver<bool>,
}

/// The last bytes the server wrote to stderr.
#[derive(Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<Vec<u8>>>);

impl StderrTail {
    fn push(&self, bytes: &[u8]) {
        let mut tail = lock(&self.0);
        tail.extend_from_slice(bytes);
        if tail.len() > STDERR_TAIL_BYTES {
            let cut = tail.len() - STDERR_TAIL_BYTES;
            tail.drain(..cut);
        }
    }

    /// The last lines, trimmed, for an error message (empty when there was no output).
    pub(crate) fn text(&self) -> String {
        let tail = lock(&self.0);
        let text = String::from_utf8_lossy(&tail);
        let lines: Vec<&str> = text.trim_end().lines().collect();
        let start = lines.len().saturating_sub(20);
        lines[start..].join("\n")
    }
}

/// What to send a process group.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupSignal {
    /// Ask it to stop (SIGTERM; on Windows, where there is none, the job is terminated).
    Terminate,
    /// Kill every process of it (SIGKILL; on Windows the job is terminated).
    Kill,
}

/// A child process leading a process group of its own (a job object on Windows), so that
/// ending the group ends whatever the child started too (`npx` then `node`, a shell's
/// background job). Dropping it kills what is left of the group, even when a runtime
/// shutting down drops the task that owns it; the hook given to [`spawn`](Self::spawn) hears
/// [`ServerProcess::Started`] and, once the group is gone, [`ServerProcess::Ended`].
pub struct ProcessGroup {
    child: Box<dyn ChildWrapper>,
    /// Told when the group is gone, with its id.
    hook: Option<(ProcessHook, u32)>,
}

impl fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessGroup")
            .field("pid", &self.child.id())
            .field("hook", &self.hook.as_ref().map(|_| "<hook>"))
            .finish()
    }
}

impl ProcessGroup {
    /// Starts `command` as the leader of a new process group (Unix) or in a new job object
    /// (Windows), with the stdio `command` sets, telling `hook` it started.
    ///
    /// ```no_run
    /// # async fn demo() -> std::io::Result<()> {
    /// use aquaregia_mcp::process::ProcessGroup;
    /// let mut command = tokio::process::Command::new("sh");
    /// command.args(["-c", "sleep 60 & echo started"]);
    /// let mut group = ProcessGroup::spawn(command, None)?;
    /// group.wait().await?;
    /// drop(group); // the background `sleep` goes with it
    /// # Ok(()) }
    /// ```
    pub fn spawn(command: Command, hook: Option<ProcessHook>) -> std::io::Result<Self> {
        let mut wrapped = CommandWrap::from(command);
        #[cfg(unix)]
        wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
        #[cfg(windows)]
        wrapped.wrap(process_wrap::tokio::JobObject);
        wrapped.wrap(KillOnDrop);
        let child = wrapped.spawn()?;
        let hook = hook.and_then(|hook| Some((hook, child.id()?)));
        if let Some((hook, pid)) = &hook {
            hook(ServerProcess::Started { pid: *pid });
        }
        Ok(Self { child, hook })
    }

    /// The leader's process id, which on Unix is also the group's (`None` once reaped).
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// The leader's stdin, if it was piped and not taken yet.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin().take()
    }

    /// The leader's stdout, if it was piped and not taken yet.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout().take()
    }

    /// The leader's stderr, if it was piped and not taken yet.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr().take()
    }

    /// Waits for the leader to exit (the rest of the group may live on until this value is
    /// dropped).
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Sends `signal` to the whole group. A group that is already gone is not an error.
    pub fn signal(&mut self, signal: GroupSignal) {
        #[cfg(unix)]
        if let GroupSignal::Terminate = signal {
            let _ = self.child.signal(nix::sys::signal::Signal::SIGTERM as i32);
            return;
        }
        let _ = signal;
        let _ = self.child.start_kill();
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // Synchronous: a signal to the group (Unix) or terminating the job (Windows).
        let _ = self.child.start_kill();
        if let Some((hook, pid)) = self.hook.take() {
            hook(ServerProcess::Ended { pid });
        }
    }
}

/// Sends `signal` to the process group led by `pgid`, which another process started (the
/// CLI's reaper ends the groups of a CLI that was killed outright). Returns whether the group
/// was there. Unix only: elsewhere nothing is sent and the answer is `false`. Process group
/// 0 or 1 (this process's own, init's) is never signalled.
pub fn signal_group(pgid: u32, signal: GroupSignal) -> bool {
    #[cfg(unix)]
    {
        use nix::sys::signal::{Signal, killpg};
        let Ok(pgid) = i32::try_from(pgid) else {
            return false;
        };
        if pgid <= 1 {
            return false;
        }
        let signal = match signal {
            GroupSignal::Terminate => Signal::SIGTERM,
            GroupSignal::Kill => Signal::SIGKILL,
        };
        killpg(nix::unistd::Pid::from_raw(pgid), signal).is_ok()
    }
    #[cfg(not(unix))]
    {
        let _ = (pgid, signal);
        false
    }
}

/// Whether the process group led by `pgid` still has a process (Unix; `false` elsewhere).
pub fn group_alive(pgid: u32) -> bool {
    #[cfg(unix)]
    {
        use nix::sys::signal::killpg;
        i32::try_from(pgid)
            .is_ok_and(|pgid| pgid > 1 && killpg(nix::unistd::Pid::from_raw(pgid), None).is_ok())
    }
    #[cfg(not(unix))]
    {
        let _ = pgid;
        false
    }
}

/// Starts `command` with piped stdio as the leader of a new process group (Unix) or in a new
/// job object (Windows), telling `hook` it started (and, later, that it ended).
pub(crate) fn spawn(
    mut command: Command,
    name: &str,
    hook: Option<&ProcessHook>,
) -> Result<(StdioProcess, ChildStdout, ChildStdin), McpError> {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    let mut child = ProcessGroup::spawn(command, hook.cloned()).map_err(|error| {
        let what = if error.kind() == std::io::ErrorKind::NotFound {
            "command not found".to_owned()
        } else {
            error.to_string()
        };
        McpError::connect(name, format!("could not start `{program}`: {what}"))
    })?;
    let (Some(stdin), Some(stdout), Some(mut stderr)) =
        (child.take_stdin(), child.take_stdout(), child.take_stderr())
    else {
        return Err(McpError::connect(
            name,
            "the child process has no piped stdio",
        ));
    };

    let tail = StderrTail::default();
    let stderr_tail = tail.clone();
    let (stderr_closed_tx, stderr_closed) = watch::channel(false);
    let server = name.to_owned();
    // Drained continuously: a server blocked on a full stderr pipe would stop answering. The
    // pipe ends when the last process holding it exits, so this task ends with the group.
    tokio::spawn(async move {
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
        let _ = stderr_closed_tx.send(true);
    });

    let (exit_tx, exit) = watch::channel(None);
    let (signals, mut signal_rx) = mpsc::unbounded_channel();
    // The child is owned by this task, which reaps it whenever it exits and signals it on
    // request. It ends when the child has exited.
    tokio::spawn(async move {
        let mut owner_alive = true;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status,
                signal = signal_rx.recv(), if owner_alive => match signal {
                    Some(signal) => child.signal(signal),
                    // The `StdioProcess` was dropped.
                    None => {
                        owner_alive = false;
                        child.signal(GroupSignal::Kill);
                    }
                },
            }
        };
        let status = match status {
            Ok(status) => describe_exit(status),
            Err(error) => format!("could not be waited for: {error}"),
        };
        let _ = exit_tx.send(Some(status));
        // Dropping `child` kills what is left of the group: grandchildren of a server that
        // exited would otherwise be orphans.
    });

    Ok((
        StdioProcess {
            signals,
            exit,
            stderr: tail,
            stderr_closed,
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

    /// Waits up to `limit` for the process to exit, then briefly for its stderr to be drained.
    pub(crate) async fn wait_exit(&self, limit: Duration) -> Option<String> {
        let mut exit = self.exit.clone();
        let status = tokio::time::timeout(limit, exit.wait_for(Option::is_some))
            .await
            .ok()
            .and_then(|status| status.ok().and_then(|s| s.clone()));
        if status.is_some() {
            let mut closed = self.stderr_closed.clone();
            let _ = tokio::time::timeout(STDERR_DRAIN, closed.wait_for(|closed| *closed)).await;
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

    /// Graceful stop, once stdin is closed: wait, SIGTERM the group, wait, kill the group.
    /// The group is killed once its leader has exited in any case, so grandchildren (`npx`,
    /// `uvx`...) go too.
    pub(crate) async fn shutdown(&self) {
        if self.wait_exit(EXIT_GRACE).await.is_some() {
            return;
        }
        let _ = self.signals.send(GroupSignal::Terminate);
        if self.wait_exit(EXIT_GRACE).await.is_some() {
            return;
        }
        let _ = self.signals.send(GroupSignal::Kill);
        self.wait_exit(EXIT_GRACE).await;
    }
}
