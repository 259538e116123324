//! What the Raft leader knows of the brokers' heartbeats (controller.rs sends and acts on
//! them, network.rs answers them): when it last heard from each, and whether a quorum
//! confirmed its leadership at the last round. Apart from both, so neither imports the other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::types::{NodeId, Raft};

/// Kafka's `broker.session.timeout.ms` is 9 s; a few seconds keep failover short.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(3);

/// When the Raft leader last heard from each broker.
#[derive(Default)]
pub struct Liveness {
    seen: Mutex<HashMap<i32, Instant>>,
    /// This node leads and a quorum confirmed it at the last heartbeat round.
    pub(super) confirmed: AtomicBool,
}

impl Liveness {
    pub fn saw(&self, id: i32) {
        self.seen
            .lock()
            .expect("liveness")
            .insert(id, Instant::now());
    }

    /// How long ago the leader last heard from `id`, if ever.
    pub(super) fn seen_ago(&self, id: i32) -> Option<Duration> {
        self.seen
            .lock()
            .expect("liveness")
            .get(&id)
            .map(|t| t.elapsed())
    }

    pub(super) fn alive(&self, id: i32) -> bool {
        self.seen
            .lock()
            .expect("liveness")
            .get(&id)
            .is_some_and(|t| t.elapsed() < SESSION_TIMEOUT)
    }

    /// A new Raft leader has heard from nobody yet: everyone gets a full session from now.
    pub(super) fn grant_all(&self, ids: impl Iterator<Item = i32>) {
        let now = Instant::now();
        let mut seen = self.seen.lock().expect("liveness");
        for id in ids {
            seen.insert(id, now);
        }
    }
}

impl Liveness {
    /// Whether this node (`me`) leads with a quorum that confirmed it at the last round.
    pub fn leads_with_quorum(&self, raft: &Raft, me: NodeId) -> bool {
        raft.metrics().borrow().current_leader == Some(me) && self.confirmed.load(Ordering::Relaxed)
    }
}
