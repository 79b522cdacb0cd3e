//! Local commands in a sandbox: on Linux, the agent's own `run_command` (the one that runs
//! when the client has no terminal) can run under Landlock, its writes confined to the
//! session's working directory and the temp directory, and optionally without TCP.
//!
//! Landlock confines the process that asks for it (and what it starts), so the restriction
//! has to be taken between fork and exec; doing that in the child of a multi-threaded agent
//! takes `unsafe`. Instead the command is started through a *launcher*: a program that takes
//! the restriction itself, single-threaded, and then replaces itself with the shell. The
//! `aquaregia` CLI is its own launcher (`aquaregia __sandbox`); a program built on this
//! library can be one too, by calling [`launcher_main`] first thing in `main` when it sees its
//! launcher argument, and naming itself in [`Sandbox::launcher`].
//!
//! The launcher's arguments: `--write <dir>` (any number), `--no-network`, then `--` and the
//! program to run with its arguments.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
#[cfg(target_os = "linux")]
use std::sync::OnceLock;

/// How the agent's local `run_command` is confined (see [`AcpServer::sandbox`]).
///
/// [`AcpServer::sandbox`]: crate::AcpServer::sandbox
#[derive(Debug, Clone)]
pub struct Sandbox {
    launcher: PathBuf,
    launcher_args: Vec<OsString>,
    network: bool,
    temp_dir: Option<PathBuf>,
}

impl Sandbox {
    /// Commands are started as `<program> [arg]... --write <cwd> --write <temp> [--no-network]
    /// -- sh -c <command line>`; `program` must apply the confinement and exec the rest, as
    /// [`launcher_main`] does (add the arguments that make your program do that with
    /// [`arg`](Self::arg)). Network is allowed and the temp directory is the system's unless
    /// set otherwise.
    pub fn launcher(program: impl Into<PathBuf>) -> Self {
        Self {
            launcher: program.into(),
            launcher_args: Vec::new(),
            network: true,
            temp_dir: None,
        }
    }

    /// An argument given to the launcher before the sandbox's own (a hidden subcommand, say).
    #[must_use]
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.launcher_args.push(arg.into());
        self
    }

    /// Whether commands may open TCP connections and listen on TCP ports (default: they may).
    /// Blocking needs Landlock ABI 4 (Linux 6.7); on an older kernel the tool call says that
    /// the network is not blocked. UDP (DNS lookups included) is not covered by Landlock.
    #[must_use]
    pub fn network(mut self, allowed: bool) -> Self {
        self.network = allowed;
        self
    }

    /// The temp directory commands may write to besides the working directory (default:
    /// [`std::env::temp_dir`] when the command starts).
    #[must_use]
    pub fn temp_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.temp_dir = Some(dir.into());
        self
    }

    /// The program and arguments that run `line` in `sh -c` confined to `workspace` and the
    /// temp directory (both canonicalized; one that cannot be is left out).
    pub(crate) fn command(&self, workspace: &Path, line: &str) -> (PathBuf, Vec<OsString>) {
        let temp = self.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
        let mut args = self.launcher_args.clone();
        for dir in [workspace, temp.as_path()] {
            if let Ok(dir) = dir.canonicalize() {
                args.push("--write".into());
                args.push(dir.into_os_string());
            }
        }
        if !self.network {
            args.push("--no-network".into());
        }
        args.extend(["--".into(), "sh".into(), "-c".into(), line.into()]);
        (self.launcher.clone(), args)
    }

    /// What a command started now gets, as one line for the user.
    pub(crate) fn note(&self, workspace: &Path) -> String {
        let temp = self.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
        let (fs, net) = confinement();
        let network = match (self.network, net) {
            (true, _) => "",
            (false, true) => "; no TCP network",
            (false, false) => "; the network is not blocked: this kernel's Landlock is too old",
        };
        match fs {
            Confinement::Unconfined => "Runs unconfined: this kernel has no Landlock.".to_owned(),
            Confinement::Partial => format!(
                "Runs partly confined: this kernel's Landlock is older than ABI 5, so some \
                 writes outside {} and {} are not blocked{network}.",
                workspace.display(),
                temp.display()
            ),
            Confinement::Full => format!(
                "Runs confined (Landlock): writes only to {} and {}{network}.",
                workspace.display(),
                temp.display()
            ),
        }
    }
}

/// How far this kernel confines a command's file writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Confinement {
    /// Every write right the launcher restricts (Landlock ABI 5 or later).
    Full,
    /// Some of them: an older Landlock (truncating, say, is not restricted before ABI 3).
    Partial,
    /// None: no Landlock (not built in, not enabled at boot, or not Linux).
    Unconfined,
}

/// How far this kernel confines writes, and whether it can block TCP (probed once).
pub(crate) fn confinement() -> (Confinement, bool) {
    #[cfg(target_os = "linux")]
    {
        static PROBED: OnceLock<(Confinement, bool)> = OnceLock::new();
        *PROBED.get_or_init(linux::probe)
    }
    #[cfg(not(target_os = "linux"))]
    {
        (Confinement::Unconfined, false)
    }
}

/// The launcher's `main`: given the arguments after the ones that select it (`--write <dir>`
/// any number of times, `--no-network`, `--`, then the program and its arguments), confines
/// this process with Landlock (on Linux, where the kernel has it: writes only beneath the
/// `--write` directories and to the terminal-like devices a shell needs, reads and execution
/// everywhere, no TCP bind or connect with `--no-network`) and replaces itself with the
/// program. Where Landlock is missing the program runs unconfined (the agent has said so).
///
/// Call it before anything starts a thread: the restriction covers the calling thread and what
/// it executes. It returns only on failure: 2 for bad arguments or a restriction that cannot
/// be applied, 127 when the program cannot be executed, with the reason on stderr.
pub fn launcher_main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let mut args = args.into_iter();
    let mut writable = Vec::new();
    let mut network = true;
    loop {
        let Some(arg) = args.next() else {
            eprintln!("sandbox: no command given (after `--`)");
            return ExitCode::from(2);
        };
        match arg.to_str() {
            Some("--write") => match args.next() {
                Some(dir) => writable.push(PathBuf::from(dir)),
                None => {
                    eprintln!("sandbox: `--write` needs a directory");
                    return ExitCode::from(2);
                }
            },
            Some("--no-network") => network = false,
            Some("--") => break,
            _ => {
                eprintln!("sandbox: unknown argument {}", Path::new(&arg).display());
                return ExitCode::from(2);
            }
        }
    }
    let Some(program) = args.next() else {
        eprintln!("sandbox: no command given (after `--`)");
        return ExitCode::from(2);
    };
    #[cfg(target_os = "linux")]
    if let Err(error) = linux::restrict(&writable, network) {
        eprintln!("sandbox: cannot apply Landlock: {error}");
        return ExitCode::from(2);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (&writable, network);
    exec(&program, args)
}

#[cfg(unix)]
fn exec(program: &OsStr, args: impl Iterator<Item = OsString>) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new(program).args(args).exec();
    eprintln!(
        "sandbox: cannot run {}: {error}",
        Path::new(program).display()
    );
    ExitCode::from(127)
}

#[cfg(not(unix))]
fn exec(program: &OsStr, args: impl Iterator<Item = OsString>) -> ExitCode {
    match std::process::Command::new(program).args(args).status() {
        Ok(status) => status
            .code()
            .and_then(|code| u8::try_from(code).ok())
            .map_or(ExitCode::FAILURE, ExitCode::from),
        Err(error) => {
            eprintln!(
                "sandbox: cannot run {}: {error}",
                Path::new(program).display()
            );
            ExitCode::from(127)
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::path::PathBuf;

    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetError, path_beneath_rules,
    };

    use crate::sandbox::Confinement;

    /// The Landlock ABI whose file rights the launcher restricts.
    const FS_ABI: ABI = ABI::V5;

    /// Devices a shell writes to (and `ioctl`s) wherever it runs.
    const DEVICES: &[&str] = &[
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/tty",
        "/dev/ptmx",
        "/dev/pts",
        "/dev/shm",
    ];

    pub(super) fn probe() -> (Confinement, bool) {
        let hard = || Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
        let fs = |abi| {
            hard()
                .handle_access(AccessFs::from_all(abi))
                .and_then(|ruleset| ruleset.create())
                .is_ok()
        };
        let confinement = if fs(FS_ABI) {
            Confinement::Full
        } else if fs(ABI::V1) {
            Confinement::Partial
        } else {
            Confinement::Unconfined
        };
        let net = hard()
            .handle_access(AccessNet::from_all(ABI::V4))
            .and_then(|ruleset| ruleset.create())
            .is_ok();
        (confinement, net)
    }

    /// Confines this thread and what it executes (best effort for the running kernel).
    pub(super) fn restrict(writable: &[PathBuf], network: bool) -> Result<(), RulesetError> {
        let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(FS_ABI))?;
        if !network {
            ruleset = ruleset.handle_access(AccessNet::from_all(ABI::V4))?;
        }
        ruleset
            .create()?
            .add_rules(path_beneath_rules(["/"], AccessFs::from_read(FS_ABI)))?
            .add_rules(path_beneath_rules(writable, AccessFs::from_all(FS_ABI)))?
            .add_rules(path_beneath_rules(DEVICES, AccessFs::from_all(FS_ABI)))?
            .restrict_self()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launcher_gets_the_writable_dirs_then_the_shell_line() {
        let workspace = std::env::current_dir().unwrap().canonicalize().unwrap();
        let temp = std::env::temp_dir().canonicalize().unwrap();
        let sandbox = Sandbox::launcher("/bin/launcher")
            .arg("__sandbox")
            .temp_dir(&temp)
            .network(false);
        let (program, args) = sandbox.command(&workspace, "ls -la");
        assert_eq!(program, Path::new("/bin/launcher"));
        let expected: Vec<OsString> = vec![
            "__sandbox".into(),
            "--write".into(),
            workspace.into_os_string(),
            "--write".into(),
            temp.into_os_string(),
            "--no-network".into(),
            "--".into(),
            "sh".into(),
            "-c".into(),
            "ls -la".into(),
        ];
        assert_eq!(args, expected);
    }

    #[test]
    fn bad_launcher_arguments_are_refused() {
        for args in [
            &["--bogus", "--", "true"][..],
            &["--write"],
            &["--write", "/tmp"],
            &["--"],
        ] {
            let code = launcher_main(args.iter().map(OsString::from));
            assert_eq!(code, ExitCode::from(2), "{args:?}");
        }
    }
}
