//! Process hygiene checks: a test sets `AQUAREGIA_TEST_MARKER=<marker>` in the environment of
//! what it starts (children inherit it), then finds whatever still carries the marker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A marker unique to this call: `tag`, this test process and a counter. Every test of a crate
/// runs in one process, so two tests (or two calls in one test) never share a marker, even
/// with the same `tag`.
pub fn marker(tag: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{tag}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Processes whose environment holds `AQUAREGIA_TEST_MARKER=<marker>`.
pub fn processes_with_marker(marker: &str) -> Vec<u32> {
    let needle = format!("AQUAREGIA_TEST_MARKER={marker}");
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == needle.as_bytes()))
        })
        .collect()
}

/// Waits until no process carries `marker`; fails the test if some still do after `within`.
pub async fn assert_no_process_left(marker: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let left = processes_with_marker(marker);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "processes left behind: {left:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// SIGKILLs every process carrying the marker when dropped, so a failing test leaves nothing
/// running either.
pub struct KillMarked(pub String);

impl Drop for KillMarked {
    fn drop(&mut self) {
        let pids: Vec<String> = processes_with_marker(&self.0)
            .iter()
            .map(u32::to_string)
            .collect();
        if !pids.is_empty() {
            let _ = std::process::Command::new("kill")
                .arg("-KILL")
                .args(pids)
                .status();
        }
    }
}
