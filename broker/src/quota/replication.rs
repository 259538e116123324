//! Replication throttles (Kafka's `ReplicationQuotaManager`), what `kafka-reassign-partitions
//! --throttle` sets so that a move does not starve clients of disk and network:
//!
//! - `leader.replication.throttled.rate` / `follower.replication.throttled.rate`: dynamic
//!   broker configs (this broker's own, else the cluster-wide default; bytes per second,
//!   unlimited when unset), one quota per broker for each side;
//! - `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`:
//!   topic configs naming `partition:broker` pairs (or `*`; checked in `config::topic`): a
//!   partition is throttled on this broker's side when the pair with this broker's id is
//!   listed.
//!
//! As in Kafka, only a replica out of the ISR is throttled (a move's new replica catching
//! up, never a follower acks=all waits for): the leader answers its fetch without records
//! while the leader quota is exceeded (`shouldLeaderThrottle`), and the follower leaves the
//! partition out of its next fetch while the follower quota is exceeded
//! (`shouldFollowerThrottle`). Nothing queues: a throttled partition is simply asked for or
//! served later. The rate is Kafka's (`rate::Rate`): bytes over the last 11 one-second
//! windows, over at least 10 s (`replication.quota.window.num`,
//! `replication.quota.window.size.seconds`).
//!
//! The quotas are process-wide (each behind a lock taken once per replica fetch that moves
//! a throttled partition's bytes): a broker's quota is the broker's, whichever shard's
//! fetcher or fetch handler spends it.

use std::sync::Mutex;

use super::rate::{Rate, WindowConfig};
use crate::config::dynamic::BrokerView;

pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
pub const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
pub const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";

/// Kafka's `replication.quota.window.num` and `replication.quota.window.size.seconds`.
fn window() -> WindowConfig {
    WindowConfig::new(11, 1)
}

/// Whether a throttled-replicas value lists `partition` on `broker`.
pub fn lists(value: &str, partition: i32, broker: i32) -> bool {
    let v = value.trim();
    v == "*"
        || v.split(',').any(|pair| {
            let mut it = pair.trim().split(':').map(|n| n.trim().parse::<i32>().ok());
            it.next().flatten() == Some(partition) && it.next().flatten() == Some(broker)
        })
}

/// The broker's rate for one side, in bytes per second: its own dynamic value, else the
/// cluster-wide default; `None` when neither is set (unthrottled).
pub fn rate(view: &BrokerView, name: &str) -> Option<u64> {
    view.node
        .get(name)
        .or_else(|| view.cluster.get(name))
        .and_then(|v| v.trim().parse::<u64>().ok())
}

static LEADER: Mutex<Option<Rate>> = Mutex::new(None);
static FOLLOWER: Mutex<Option<Rate>> = Mutex::new(None);

/// Which side of replication a quota meters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Leader,
    Follower,
}

impl Side {
    fn quota(self) -> &'static Mutex<Option<Rate>> {
        match self {
            Side::Leader => &LEADER,
            Side::Follower => &FOLLOWER,
        }
    }

    fn names(self) -> (&'static str, &'static str) {
        match self {
            Side::Leader => (LEADER_RATE, LEADER_REPLICAS),
            Side::Follower => (FOLLOWER_RATE, FOLLOWER_REPLICAS),
        }
    }

    /// The rate limit when `partition` of a topic with `configs` is throttled on this side
    /// of broker `me` (`None`: not throttled, or no rate set).
    pub fn limit(
        self,
        view: &BrokerView,
        configs: &std::collections::BTreeMap<String, String>,
        partition: i32,
        me: i32,
    ) -> Option<u64> {
        let (rate_name, replicas_name) = self.names();
        let listed = configs
            .get(replicas_name)
            .is_some_and(|v| lists(v, partition, me));
        listed.then(|| rate(view, rate_name)).flatten()
    }

    /// Whether the quota of this side is spent beyond `limit` now (Kafka's
    /// `isQuotaExceeded`: the measured rate above the bound).
    pub fn exceeded(self, limit: u64) -> bool {
        let mut q = self.quota().lock().expect("replication quota");
        q.get_or_insert_with(Rate::default)
            .measure(window(), crate::now_ms())
            > limit as f64
    }

    /// Counts `bytes` of throttled replication against this side's quota.
    pub fn record(self, bytes: u64) {
        if bytes > 0 {
            let mut q = self.quota().lock().expect("replication quota");
            q.get_or_insert_with(Rate::default)
                .record(window(), bytes as f64, crate::now_ms());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_throttled_replica_lists_when_checked_then_pairs_or_wildcard_match() {
        assert!(lists("0:1,1:2", 1, 2));
        assert!(!lists("0:1,1:2", 1, 1));
        assert!(lists(" * ", 7, 9));
        assert!(!lists("", 0, 0));
        for ok in ["", "*", "0:1", "0:1, 2:3"] {
            assert!(
                crate::config::topic::validate(LEADER_REPLICAS, ok).is_ok(),
                "{ok}"
            );
        }
        for bad in ["x", "0:", "0:1:2", "0-1", "*,0:1"] {
            assert!(
                crate::config::topic::validate(FOLLOWER_REPLICAS, bad).is_err(),
                "{bad}"
            );
        }
    }
}
