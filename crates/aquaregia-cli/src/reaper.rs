//! Cleanup when the CLI is killed outright (SIGKILL, the OOM killer): a small watcher process
//! ends the stdio servers' process groups.
//!
//! The CLI closes its servers itself on Ctrl-C, SIGTERM and SIGHUP, but a process killed with
//! SIGKILL runs no code, and a parent-death signal set in the child would take `unsafe`
//! (`pre_exec`) and miss grandchildren (`npx` → `node`). Instead, the first stdio server
//! started re-executes this binary as `aquaregia __reaper`, in a process group of its own
//! (so Ctrl-C on the terminal does not reach it), with its stdin a pipe only the CLI holds
//! (std creates pipes close-on-exec, so servers do not inherit it). The CLI writes `+<pgid>`
//! when a server starts and `-<pgid>` once its group is gone. When the pipe closes (the CLI
//! exited, however it did), the reaper sends SIGTERM to the groups still listed, SIGKILL to
//! those still there after a grace period, and exits. Linux and other Unix only.

#[cfg(unix)]
pub(crate) use unix::{on_process, run};

#[cfg(not(unix))]
pub(crate) fn on_process(_: aquaregia_mcp::ServerProcess) {}

#[cfg(not(unix))]
pub(crate) fn run() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}

/// The hidden subcommand the reaper runs as.
pub(crate) const SUBCOMMAND: &str = "__reaper";

#[cfg(unix)]
mod unix {
    use std::collections::BTreeSet;
    use std::io::{BufRead, Write};
    use std::os::unix::process::CommandExt;
    use std::process::{ChildStdin, Command, ExitCode, Stdio};
    use std::sync::{Mutex, OnceLock};
    use std::time::{Duration, Instant};

    use aquaregia_mcp::ServerProcess;
    use aquaregia_mcp::process::{GroupSignal, group_alive, signal_group};

    /// How long the groups get to exit after SIGTERM before SIGKILL.
    const GRACE: Duration = Duration::from_millis(500);

    /// The pipe to the reaper, once one was started (`None` inside if it could not be).
    static REAPER: OnceLock<Mutex<Option<ChildStdin>>> = OnceLock::new();

    /// Tells the reaper about a server process (the hook given to every connector).
    pub(crate) fn on_process(event: ServerProcess) {
        let line = match event {
            ServerProcess::Started { pid } => format!("+{pid}\n"),
            ServerProcess::Ended { pid } => format!("-{pid}\n"),
            _ => return,
        };
        let pipe = REAPER.get_or_init(|| Mutex::new(start()));
        let mut pipe = aquaregia::sync::lock(pipe);
        if let Some(stdin) = pipe.as_mut()
            && let Err(error) = stdin.write_all(line.as_bytes())
        {
            tracing::warn!(%error, "the reaper is gone: servers may outlive a killed CLI");
            *pipe = None;
        }
    }

    fn start() -> Option<ChildStdin> {
        let spawned = std::env::current_exe().and_then(|exe| {
            Command::new(exe)
                .arg(super::SUBCOMMAND)
                .stdin(Stdio::piped())
                // Holding no pipe of ours open once we are gone.
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
        });
        match spawned {
            // The child is not waited for: it exits when our end of the pipe closes, and is
            // then reaped by whoever adopted it.
            Ok(mut child) => child.stdin.take(),
            Err(error) => {
                tracing::warn!(%error, "cannot start the reaper: servers may outlive a killed CLI");
                None
            }
        }
    }

    /// `aquaregia __reaper`: reads `+<pgid>` / `-<pgid>` lines until stdin closes, then ends
    /// the groups still listed.
    pub(crate) fn run() -> ExitCode {
        let own = std::process::id();
        let mut groups = BTreeSet::new();
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let (start, pgid) = if let Some(pgid) = line.strip_prefix('+') {
                (true, pgid)
            } else if let Some(pgid) = line.strip_prefix('-') {
                (false, pgid)
            } else {
                continue;
            };
            let Ok(pgid) = pgid.parse::<u32>() else {
                continue;
            };
            // 0 and 1 would mean our own group and init's; never signalled.
            if pgid <= 1 || pgid == own {
                continue;
            }
            if start {
                groups.insert(pgid);
            } else {
                groups.remove(&pgid);
            }
        }
        end_groups(&groups);
        ExitCode::SUCCESS
    }

    /// SIGTERM to every group, then SIGKILL to those still there after [`GRACE`].
    fn end_groups(groups: &BTreeSet<u32>) {
        let mut left: Vec<u32> = groups
            .iter()
            .copied()
            .filter(|pgid| signal_group(*pgid, GroupSignal::Terminate))
            .collect();
        let deadline = Instant::now() + GRACE;
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            left.retain(|pgid| group_alive(*pgid));
        }
        for pgid in left {
            signal_group(pgid, GroupSignal::Kill);
        }
    }
}
