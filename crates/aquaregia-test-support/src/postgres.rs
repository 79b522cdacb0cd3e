//! A throwaway PostgreSQL cluster on 127.0.0.1 for the tests of the Postgres session store,
//! one per test binary ([`PgCluster::shared`]), or one of its own ([`PgCluster::start`]).
//!
//! The cluster is made by the machine's own `initdb` in a temp dir (the binaries come from
//! `scripts/test-deps.sh`, which installs Debian's `postgresql` where it is missing) and run
//! by a small watchdog shell. The watchdog holds the read end of a pipe whose write end stays
//! in the test process: when the test process ends, however it ends (a panic, SIGKILL), the
//! watchdog reads end-of-file, stops the cluster with `pg_ctl stop -m immediate` and deletes
//! its directory. Nothing listens beyond 127.0.0.1; the unix socket is in the temp dir.
//!
//! As root, the cluster runs as the `postgres` user (or `nobody`), since PostgreSQL refuses to
//! run as root: the directory is handed to that user and every server command goes through
//! `setpriv`.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::deps::dep;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The superuser of the test clusters (trust authentication, loopback only).
pub const SUPERUSER: &str = "aquaregia";

/// How many fresh ports are tried when the picked one was taken before PostgreSQL bound it.
const BIND_ATTEMPTS: usize = 5;

/// How long the watchdog waits for the server to accept connections.
const READY_BOUND_SECS: u32 = 60;

/// The watchdog: starts `postgres` (as the cluster's user), says `READY` once it accepts
/// connections or `EXITED` if it stopped first, then waits for its stdin to close, stops the
/// cluster and deletes the directory.
///
/// Arguments: bin dir, cluster dir, port, then the `setpriv` prefix (empty when not root).
const WATCHDOG: &str = r#"
bin=$1; dir=$2; port=$3; shift 3
"$@" "$bin/postgres" -D "$dir/data" -k "$dir" -p "$port" \
  -c listen_addresses=127.0.0.1 -c "$PG_EXTRA_SETTINGS_0" -c "$PG_EXTRA_SETTINGS_1" \
  -c "$PG_EXTRA_SETTINGS_2" >>"$dir/server.log" 2>&1 &
pid=$!
tries=0
until "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U aquaregia -d postgres; do
  if ! kill -0 "$pid" 2>/dev/null; then echo EXITED; exit 0; fi
  tries=$((tries + 1))
  if [ "$tries" -gt $((READY_BOUND * 20)) ]; then kill -KILL "$pid"; echo EXITED; exit 0; fi
  sleep 0.05
done
echo READY
cat >/dev/null
"$@" "$bin/pg_ctl" -D "$dir/data" stop -m immediate -w >/dev/null 2>&1 || kill -KILL "$pid"
wait "$pid" 2>/dev/null
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
    /// The cluster of this test binary, started on first use (fast settings).
    pub fn shared() -> &'static Self {
        static SHARED: OnceLock<PgCluster> = OnceLock::new();
        SHARED.get_or_init(|| Self::start(Durability::Fast))
    }

    /// A cluster of its own, stopped and deleted when dropped (or when this process ends).
    pub fn start(durability: Durability) -> Self {
        let bin = PathBuf::from(dep("AQUAREGIA_PG_BIN"));
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
        let settings: [&str; 3] = match durability {
            Durability::Fast => ["fsync=off", "synchronous_commit=off", "full_page_writes=off"],
            Durability::Durable => ["fsync=on", "synchronous_commit=on", "full_page_writes=on"],
        };
        for _ in 0..BIND_ATTEMPTS {
            let port = free_port();
            let mut watchdog = Command::new("sh");
            watchdog
                .arg("-c")
                .arg(WATCHDOG)
                .arg("pg-watchdog")
                .arg(&bin)
                .arg(dir.path())
                .arg(port.to_string())
                .args(setpriv_prefix(run_as))
                .env("READY_BOUND", READY_BOUND_SECS.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            for (index, setting) in settings.iter().enumerate() {
                watchdog.env(format!("PG_EXTRA_SETTINGS_{index}"), setting);
            }
            let mut child = watchdog.spawn().expect("start the cluster's watchdog");
            let stdout = child.stdout.take().expect("piped stdout");
            let mut line = String::new();
            BufReader::new(stdout)
                .read_line(&mut line)
                .expect("read the watchdog's answer");
            if line.trim() == "READY" {
                // The watchdog deletes the directory from now on.
                let dir = dir.keep();
                return Self {
                    dir,
                    port,
                    bin,
                    stop: Mutex::new(child.stdin.take()),
                    watchdog: Mutex::new(child),
                };
            }
            let _ = child.wait();
            let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
            // Another process took the port between the pick and the bind: try another.
            if log.contains("could not bind") || log.contains("already in use") {
                std::fs::write(dir.path().join("server.log"), "").expect("reset the log");
                continue;
            }
            panic!("PostgreSQL did not start:\n{log}");
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
        format!(
            "postgres://{SUPERUSER}@127.0.0.1:{}/{database}",
            self.port
        )
    }

    /// Creates a fresh, empty database (named after `tag` plus a counter) and returns its
    /// URL.
    pub fn database(&self, tag: &str) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let clean: String = tag
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' })
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

    /// Stops the cluster now (immediate shutdown) and waits until it is gone.
    pub fn stop(&self) {
        drop(self.stop.lock().unwrap().take());
        let _ = self.watchdog.lock().unwrap().wait();
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        self.stop();
    }
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

/// A URL nothing answers on (a port that was free a moment ago), for unreachable-database
/// tests.
pub fn unreachable_url() -> String {
    format!(
        "postgres://{SUPERUSER}@127.0.0.1:{}/nothing?connect_timeout=2",
        free_port()
    )
}
