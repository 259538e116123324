//! The import's progress: an indicatif bar on a terminal, otherwise a log line every 5 s.
//! It shows the bytes verified (first pass: nothing is written before every batch is
//! checked) and imported (second pass: appended or hard-linked) against the segments' total,
//! and the rate. It runs on a thread of its own because the first pass verifies segments
//! with blocking reads on the migrator's thread; it reads the byte totals the passes keep in
//! `ImportMetrics` as they go.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

const TICK: Duration = Duration::from_millis(100);
const LOG_EVERY: Duration = Duration::from_secs(5);

/// Shown until dropped; the drop draws the final figures.
pub struct ImportProgress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ImportProgress {
    /// `total`: bytes of the segments to import; `verified` and `imported`: the running
    /// byte totals of the two passes.
    pub fn start(total: u64, verified: Arc<AtomicU64>, imported: Arc<AtomicU64>) -> ImportProgress {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("import-progress".into())
            .spawn(move || show(total, &verified, &imported, &flag))
            .map_err(|e| tracing::warn!(error = %e, "no progress display"))
            .ok();
        ImportProgress { stop, thread }
    }
}

impl Drop for ImportProgress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Bytes of the `.log` segment files in a Kafka partition dir (what the passes go through).
pub fn segment_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

fn show(total: u64, verified: &AtomicU64, imported: &AtomicU64, stop: &AtomicBool) {
    let started = Instant::now();
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = ProgressBar::new(2 * total);
        b.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        b
    });
    let mut last_line = Instant::now();
    loop {
        let done = stop.load(Ordering::Relaxed);
        let (v, i) = (
            verified.load(Ordering::Relaxed),
            imported.load(Ordering::Relaxed),
        );
        let mb = |b: u64| b as f64 / 1e6;
        let rate = mb(v + i) / started.elapsed().as_secs_f64().max(0.001);
        match &bar {
            Some(b) => {
                b.set_position(v + i);
                b.set_message(format!(
                    "verified {:.1} / {:.1} MB, imported {:.1} MB, {rate:.1} MB/s",
                    mb(v),
                    mb(total),
                    mb(i)
                ));
            }
            None if done || last_line.elapsed() >= LOG_EVERY => {
                last_line = Instant::now();
                tracing::info!(
                    total_mb = format!("{:.1}", mb(total)),
                    verified_mb = format!("{:.1}", mb(v)),
                    imported_mb = format!("{:.1}", mb(i)),
                    mb_per_s = format!("{rate:.1}"),
                    "import progress"
                );
            }
            None => {}
        }
        if done {
            if let Some(b) = bar {
                b.finish();
            }
            return;
        }
        std::thread::park_timeout(TICK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_a_partition_dir_when_sizing_then_only_segment_files_count() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("00000000000000000000.log"), [0u8; 100]).unwrap();
        std::fs::write(dir.path().join("00000000000000000007.log"), [0u8; 23]).unwrap();
        std::fs::write(dir.path().join("00000000000000000000.index"), [0u8; 64]).unwrap();
        std::fs::write(dir.path().join("leader-epoch-checkpoint"), b"0\n").unwrap();
        assert_eq!(segment_bytes(dir.path()), 123);
        assert_eq!(segment_bytes(&dir.path().join("missing")), 0);
    }

    #[test]
    fn given_progress_when_dropped_then_its_thread_ends() {
        let (v, i) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let p = ImportProgress::start(10, v.clone(), i.clone());
        v.store(10, Ordering::Relaxed);
        i.store(4, Ordering::Relaxed);
        let t0 = Instant::now();
        drop(p);
        // Unparked by the drop, not left to finish its tick (or to run forever).
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}
