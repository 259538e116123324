//! What a node does when its data dir fails under it: a write, fdatasync, segment roll or
//! index write of a partition log, a checkpoint, or the metadata quorum's log fails with an
//! I/O error (a full disk above all: ENOSPC). Kafka's `LogDirFailureChannel` in one place.
//!
//! Storage already guarantees the data: the append that hit the error is not acknowledged,
//! the log stops serving (a failed fdatasync may have dropped pages), and the next open
//! validates the unsynced tail and cuts a torn batch. What remains is a policy for the node:
//!
//! - **On a cluster the node stops** (exit status [`EXIT_STATUS`]), as a Kafka broker halts
//!   when its only log dir fails ("Shutdown broker because all log dirs in ... have
//!   failed"). Staying up would be worse: the controller would keep it leader of partitions
//!   it can no longer write (producers stuck on KAFKA_STORAGE_ERROR, no failover), and a
//!   metadata voter whose Raft log cannot be written is dead to openraft while the process
//!   still answers clients. Stopped, its sessions expire, the other in-sync replicas take
//!   over its partitions, and every record acknowledged with acks=all is on them. The
//!   operator frees space and starts it again; it recovers its logs and catches up.
//! - **A single node keeps serving** what still works: the failed partition answers
//!   KAFKA_STORAGE_ERROR until a restart, the others keep serving reads (and writes while
//!   their own writes succeed). There is no replica to fail over to, so stopping would only
//!   take the healthy partitions' reads down too (docs/operations.md "Disk full").

use std::error::Error;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::config::BrokerConfig;

/// The exit status of a node stopped by a failed data dir (Kafka's `Exit.halt(1)`).
pub const EXIT_STATUS: i32 = 1;

/// How often a single node repeats its "partition offline" advice while failures go on.
const REPEAT_MS: i64 = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// The failed partition goes offline, the node serves the rest (single node).
    Offline,
    /// The node stops so that its partitions move to other replicas (cluster).
    Stop,
}

impl Policy {
    pub fn of(config: &BrokerConfig) -> Policy {
        if config.controller_quorum_voters.trim().is_empty() {
            Policy::Offline
        } else {
            Policy::Stop
        }
    }
}

/// The operator's line: what failed, whether the disk is full, what the node does now and
/// what to do about it.
pub fn message(policy: Policy, disk_full: bool) -> &'static str {
    match (policy, disk_full) {
        (Policy::Stop, true) => {
            "data dir is full (no space left on device): stopping this node, as Kafka does when \
             its log dir fails, so that its partitions move to their other replicas; free \
             space, then start it again"
        }
        (Policy::Stop, false) => {
            "I/O error in the data dir: stopping this node, as Kafka does when its log dir \
             fails, so that its partitions move to their other replicas; fix the device, then \
             start it again"
        }
        (Policy::Offline, true) => {
            "data dir is full (no space left on device): the partition is offline \
             (KAFKA_STORAGE_ERROR) until Strom restarts; free space, then restart"
        }
        (Policy::Offline, false) => {
            "I/O error in the data dir: the partition is offline (KAFKA_STORAGE_ERROR) until \
             Strom restarts; fix the device, then restart"
        }
    }
}

/// Something in the data dir could not be written. `what` names it (a partition dir, a
/// checkpoint, the metadata log). Under [`Policy::Stop`] this does not return.
pub fn failed(policy: Policy, what: &Path, reason: &str, disk_full: bool) {
    let advice = message(policy, disk_full);
    match policy {
        Policy::Stop => {
            tracing::error!(path = %what.display(), %reason, disk_full, "{advice}");
            // No orderly shutdown, as Kafka's halt: closing logs and writing checkpoints
            // would only fail again, and the next start validates every unsynced tail.
            std::process::exit(EXIT_STATUS);
        }
        Policy::Offline => {
            // A full disk fails every append that rolls a segment; one line per interval
            // says it without flooding the log (storage logs each failed log once).
            static LAST_MS: AtomicI64 = AtomicI64::new(i64::MIN);
            let now = crate::now_ms();
            let last = LAST_MS.load(Ordering::Relaxed);
            if now.saturating_sub(last) >= REPEAT_MS
                && LAST_MS
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                tracing::error!(path = %what.display(), %reason, disk_full, "{advice}");
            }
        }
    }
}

/// [`failed`] for an error value: disk full when it, or an error it wraps, is ENOSPC.
pub fn failed_with(policy: Policy, what: &Path, e: &(dyn Error + 'static)) {
    failed(policy, what, &e.to_string(), storage::is_disk_full(e));
}

/// Whether `e`, or an error it wraps, is an OS I/O error (not, say, a shard that stopped).
pub fn is_io_error(e: &(dyn Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error().is_some())
        {
            return true;
        }
        next = err.source();
    }
    false
}

/// The listener each shard sets on its storage backend.
pub fn listener(policy: Policy) -> impl Fn(&storage::IoFailure<'_>) + 'static {
    move |f| {
        if gone(f.dir) {
            // A replica moved away or a deleted topic: its directory was removed under a
            // write still in flight (a follower's fetch, a roll). The data dir is fine.
            tracing::warn!(dir = %f.dir.display(), reason = f.reason, "write to a deleted partition failed");
            return;
        }
        failed(policy, f.dir, f.reason, f.disk_full)
    }
}

/// The partition's directory no longer exists (deleting renames it away first).
fn gone(dir: &Path) -> bool {
    matches!(std::fs::symlink_metadata(dir), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_voters_or_none_when_choosing_policy_then_cluster_stops_and_single_node_stays_up() {
        let mut config = BrokerConfig::default();
        assert_eq!(Policy::of(&config), Policy::Offline);
        config.controller_quorum_voters = "1@127.0.0.1:9093".into();
        assert_eq!(Policy::of(&config), Policy::Stop);
    }

    #[test]
    fn given_each_failure_when_logging_then_the_line_says_disk_full_and_what_happens_next() {
        for policy in [Policy::Stop, Policy::Offline] {
            assert!(message(policy, true).starts_with("data dir is full"));
            assert!(message(policy, false).starts_with("I/O error"));
        }
        assert!(message(Policy::Stop, true).contains("stopping this node"));
        assert!(message(Policy::Offline, true).contains("KAFKA_STORAGE_ERROR"));
    }

    #[test]
    fn given_a_deleted_partition_dir_when_its_write_fails_then_the_node_does_not_stop() {
        let dir = tempfile::tempdir().unwrap();
        let deleted = dir.path().join("t-0");
        assert!(gone(&deleted));
        // Would exit the test process if it took the failure for the data dir's.
        listener(Policy::Stop)(&storage::IoFailure {
            dir: &deleted,
            reason: "rolling a new segment: No such file or directory",
            disk_full: false,
            log_failed: false,
        });
        assert!(!gone(dir.path()));
    }

    #[test]
    fn given_a_wrapped_enospc_when_failing_offline_then_it_is_disk_full_and_returns() {
        let e = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert!(storage::is_disk_full(&e));
        assert!(!storage::is_disk_full(&std::io::Error::from_raw_os_error(
            libc::EIO
        )));
        // Single node: logged, the caller goes on.
        failed_with(Policy::Offline, Path::new("/data/t-0"), &e);
    }
}
