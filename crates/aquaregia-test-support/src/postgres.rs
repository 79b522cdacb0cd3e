//! A throwaway PostgreSQL cluster on 127.0.0.1 for the tests of the Postgres session store:
//! one per test binary ([`PgCluster::shared`]), or one of its own ([`PgCluster::start`]).
//!
//! The server binaries come from `scripts/test-deps.sh postgres` (the machine's PostgreSQL,
//! or Debian's `postgresql` installed with apt-get as root). Where PostgreSQL is missing and
//! cannot be installed (not root), [`PgCluster::shared`] says so on stderr and returns
//! `None`: the test is skipped.
//!
//! The cluster is made by `initdb` in a temp dir and started by `pg_ctl start -w`, which
//! returns once the server accepts connections (PostgreSQL's own readiness check). PostgreSQL
//! cannot be given port 0, so the port is picked at random below the kernel's ephemeral range
//! (where outgoing connections never take one) and, if something holds it anyway, the server
//! fails to bind, says so in its log, and another port is tried. Nothing listens beyond
//! 127.0.0.1; the unix socket is in the temp dir.
//!
//! A small watchdog shell owns the cluster. It holds the read end of a pipe whose write end
//! stays in the test process: when the test process ends, however it ends (a panic, Ctrl-C,
//! SIGKILL), the watchdog reads end-of-file, stops the cluster (`pg_ctl stop -m immediate`)
//! and deletes its directory. It ignores SIGINT, SIGTERM and SIGHUP, so that a signal to the
//! whole process group does not stop it before it has cleaned up, and SIGPIPE, so that a test
//! process gone while the server was starting does not kill it on its `READY`.
//!
//! As root, the cluster runs as the `postgres` user (or `nobody`), since PostgreSQL refuses to
//! run as root: the directory is handed to that user and every server command goes through
//! `setpriv`.

use std::hash::{BuildHasher, RandomState};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::deps::{ClosedPort, repo_root};

/// The superuser of the test clusters (trust authentication, loopback only).
pub const SUPERUSER: &str = "aquaregia";

/// How many ports are tried when the one picked is taken.
const BIND_ATTEMPTS: usize = 8;

/// How long `pg_ctl start` waits for the server to accept connections, in seconds.
const READY_BOUND_SECS: u32 = 120;

/// The lowest port picked.
const LOWEST_PORT: u16 = 15_000;

/// The watchdog: starts the cluster, says `READY` once it accepts connections or `EXITED` if
/// it did not start, then waits for its stdin to close, stops the cluster and deletes the
/// directory.
///
/// Arguments: bin dir, cluster dir, port, server settings, then the `setpriv` prefix (none
/// when not root).
const WATCHDOG: &str = r#"
trap '' INT TERM HUP PIPE
bin=$1; dir=$2; port=$3; settings=$4; shift 4
stop() { "$@" "$bin/pg_ctl" -D "$dir/data" stop -m immediate -w -s >/dev/null 2>&1; }
if ! "$@" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -s -w -t "$READY_BOUND" \
    -o "-k $dir -p $port -c listen_addresses=127.0.0.1 $settings" start >/dev/null 2>&1; then
  stop "$@"
  echo EXITED
  exit 0
fi
echo READY
cat >/dev/null
stop "$@"
rm -rf "$dir"
"#;

/// A running throwaway cluster. Databases are made with [`PgCluster::database`].
pub struct PgCluster {
    dir: PathBuf,
    port: u16,
    bin: PathBuf,
    /// The write end of the watchdog's stdin: dropping it stops the cluster.
    stop: Mutex<Option<ChildStdin>>,
    watchdog: Mutex<Child>,
}

/// Server settings: `fsync` off for the tests (what they check does not depend on the disk),
/// the defaults (durable commits) for benchmarks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Durability {
    /// `fsync=off`, `synchronous_commit=off`, `full_page_writes=off`.
    Fast,
    /// PostgreSQL's defaults: every commit is flushed to disk.
    Durable,
}

impl PgCluster {
    /// The cluster of this test binary, started on first use (fast settings); `None`, with a
    /// line on stderr saying why, when PostgreSQL is not installed and cannot be (skip the
    /// test then).
    pub fn shared() -> Option<&'static Self> {
        static SHARED: OnceLock<Option<PgCluster>> = OnceLock::new();
        let cluster = SHARED
            .get_or_init(|| Self::start(Durability::Fast))
            .as_ref();
        if cluster.is_none() {
            eprintln!(
                "skipped: PostgreSQL is not installed and cannot be installed here (see \
                 `scripts/test-deps.sh postgres`)"
            );
        }
        cluster
    }

    /// A cluster of its own, stopped and deleted when dropped (or when this process ends);
    /// `None` when PostgreSQL is not installed and cannot be.
    pub fn start(durability: Durability) -> Option<Self> {
        let bin = bin_dir()?.to_path_buf();
        let run_as = run_as_user();
        let dir = tempfile::Builder::new()
            .prefix("aquaregia-pg-")
            .tempdir()
            .expect("a temp dir for the cluster");
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown the dir");
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod the cluster dir");
        let initdb = server_command(run_as, &bin.join("initdb"))
            .args(["-D"])
            .arg(dir.path().join("data"))
            .args([
                "-U",
                SUPERUSER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("run initdb");
        assert!(
            initdb.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&initdb.stderr)
        );
        let settings = match durability {
            Durability::Fast => "-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            Durability::Durable => "",
        };
        let log = dir.path().join("server.log");
        for _ in 0..BIND_ATTEMPTS {
            let port = pick_port();
            let mut child = Command::new("sh")
                .arg("-c")
                .arg(WATCHDOG)
                .arg("pg-watchdog")
                .arg(&bin)
                .arg(dir.path())
                .arg(port.to_string())
                .arg(settings)
                .args(setpriv_prefix(run_as))
                .env("READY_BOUND", READY_BOUND_SECS.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start the cluster's watchdog");
            let stdout = child.stdout.take().expect("piped stdout");
            let mut line = String::new();
            BufReader::new(stdout)
                .read_line(&mut line)
                .expect("read the watchdog's answer");
            if line.trim() == "READY" {
                // The watchdog deletes the directory from now on.
                let dir = dir.keep();
                return Some(Self {
                    dir,
                    port,
                    bin,
                    stop: Mutex::new(child.stdin.take()),
                    watchdog: Mutex::new(child),
                });
            }
            let _ = child.wait();
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            // Something else holds the port: try another.
            if text.contains("could not bind") || text.contains("Address already in use") {
                std::fs::write(&log, "").expect("reset the log");
                continue;
            }
            panic!("PostgreSQL did not start:\n{text}");
        }
        panic!("PostgreSQL found no free port in {BIND_ATTEMPTS} tries");
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding the data dir, the unix socket and `server.log`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A connection URL for `database` (over TCP on 127.0.0.1).
    pub fn url(&self, database: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{database}", self.port)
    }

    /// Creates a fresh, empty database (named after `tag` plus a counter) and returns its
    /// URL.
    pub fn database(&self, tag: &str) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let clean: String = tag
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let name = format!("{clean}_{}", NEXT.fetch_add(1, Ordering::SeqCst));
        self.sql("postgres", &format!("CREATE DATABASE \"{name}\""));
        self.url(&name)
    }

    /// Runs `sql` in `database` through `psql` (as the superuser), failing the test on error;
    /// returns what it printed (unaligned, tuples only).
    pub fn sql(&self, database: &str, sql: &str) -> String {
        let output = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", SUPERUSER, "-d", database, "-c", sql])
            .stdin(Stdio::null())
            .output()
            .expect("run psql");
        assert!(
            output.status.success(),
            "psql `{sql}` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Stops the cluster now (immediate shutdown) and waits until it and its directory are
    /// gone.
    pub fn stop(&self) {
        drop(
            self.stop
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
        let _ = self
            .watchdog
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .wait();
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The database name of a URL [`PgCluster::database`] made.
pub fn database_name(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

/// The bin dir of PostgreSQL (`scripts/test-deps.sh postgres`, once per process); `None` when
/// it is missing and cannot be installed here.
pub fn bin_dir() -> Option<&'static Path> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        let script = repo_root().join("scripts/test-deps.sh");
        let output = Command::new("bash")
            .arg(&script)
            .arg("postgres")
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
        match output.status.code() {
            Some(0) => Some(PathBuf::from(
                String::from_utf8_lossy(&output.stdout).trim(),
            )),
            Some(3) => None,
            _ => panic!("{} postgres failed", script.display()),
        }
    })
    .as_deref()
}

/// A port below the kernel's ephemeral range (so no outgoing connection holds it), at random.
fn pick_port() -> u16 {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .filter(|low| *low > LOWEST_PORT + 1_000)
        .unwrap_or(32_768);
    let span = u64::from(ephemeral_low - LOWEST_PORT);
    let random = RandomState::new().hash_one(std::process::id());
    LOWEST_PORT + u16::try_from(random % span).expect("below the span")
}

/// The user a root test process runs the cluster as: `postgres` if it exists, else `nobody`;
/// `None` when not root.
fn run_as_user() -> Option<(u32, u32)> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    ["postgres", "nobody"].into_iter().find_map(|name| {
        let user = nix::unistd::User::from_name(name).ok().flatten()?;
        Some((user.uid.as_raw(), user.gid.as_raw()))
    })
}

fn setpriv_prefix(run_as: Option<(u32, u32)>) -> Vec<String> {
    match run_as {
        Some((uid, gid)) => vec![
            "setpriv".into(),
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".into(),
        ],
        None => Vec::new(),
    }
}

fn server_command(run_as: Option<(u32, u32)>, program: &Path) -> Command {
    let prefix = setpriv_prefix(run_as);
    match prefix.split_first() {
        Some((setpriv, args)) => {
            let mut command = Command::new(setpriv);
            command.args(args).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// A URL nothing answers on: connecting is refused for as long as the returned port lives.
pub fn unreachable_url() -> (ClosedPort, String) {
    let port = ClosedPort::new();
    let url = format!(
        "postgres://{SUPERUSER}@127.0.0.1:{}/nothing?connect_timeout=2",
        port.port()
    );
    (port, url)
}
