//! KIP-227 incremental fetch sessions, per shard.
//!
//! A consumer that fetches many partitions would otherwise send (and get back) every partition
//! on every fetch. With a session, the broker remembers the partitions and what it last told
//! the client about each; the client sends only what changed, and the broker answers only
//! partitions with news (data, a moved watermark, an error).
//!
//! Sessions live in the shard that serves the connection (shared nothing). A client whose
//! next fetch lands on another shard gets FETCH_SESSION_ID_NOT_FOUND and starts a new
//! session, which is what Kafka clients do after a session is evicted anyway. The cache is
//! bounded (`max_incremental_fetch_session_cache_slots`, split across shards) and evicts the
//! least recently used session when full.

use std::collections::HashMap;
use std::time::Instant;

use kafka_protocol::messages::{FetchRequest, TopicName};
use uuid::Uuid;

pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

#[derive(Debug, Clone, PartialEq)]
pub struct SessionPartition {
    pub topic: TopicName,
    pub topic_id: Uuid,
    pub partition: i32,
    pub fetch_offset: i64,
    pub max_bytes: i32,
    /// What the last response said (for deciding what an incremental response must carry).
    pub last_high_watermark: i64,
    pub last_stable_offset: i64,
    pub last_log_start: i64,
    /// A follower's own log start (the request's `log_start_offset`; -1 from consumers):
    /// the leader's DeleteRecords waits for its followers' (`Partition::low_watermark`).
    pub replica_log_start: i64,
    /// The leader epoch the client knows (Fetch v9+, KIP-320; -1: no check), fenced
    /// against the partition's like Kafka's `Partition.checkCurrentLeaderEpoch`.
    pub current_leader_epoch: i32,
}

impl SessionPartition {
    fn same_partition(&self, other: &SessionPartition) -> bool {
        self.partition == other.partition
            && self.topic.as_str() == other.topic.as_str()
            && self.topic_id == other.topic_id
    }
}

struct Session {
    epoch: i32, // the epoch the next request must carry
    partitions: Vec<SessionPartition>,
    last_used: Instant,
}

/// What one fetch request means for the session cache.
#[derive(Debug, PartialEq)]
pub struct FetchPlan {
    /// 0 = no session (sessionless fetch, or the cache declined to make one).
    pub session_id: i32,
    /// Incremental: answer only partitions with news.
    pub incremental: bool,
    pub partitions: Vec<SessionPartition>,
}

/// Why an incremental fetch cannot use its session (Kafka's FetchSession errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("the fetch session id is not known (evicted, or opened on another shard)")]
    NotFound,
    #[error("the fetch session epoch is not the session's next one")]
    InvalidEpoch,
}

pub struct FetchSessionCache {
    sessions: HashMap<i32, Session>,
    next_id: i32,
    slots: usize,
}

/// The partitions a request names, in order, as new session entries.
fn request_partitions(req: &FetchRequest) -> Vec<SessionPartition> {
    req.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| SessionPartition {
                topic: t.topic.clone(),
                topic_id: t.topic_id,
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
                last_high_watermark: -1,
                last_stable_offset: -1,
                last_log_start: -1,
                replica_log_start: p.log_start_offset,
                current_leader_epoch: p.current_leader_epoch,
            })
        })
        .collect()
}

impl FetchSessionCache {
    pub fn new(shard_id: usize, slots: usize) -> FetchSessionCache {
        FetchSessionCache {
            sessions: HashMap::new(),
            // Distinct ranges per shard make a session id from another shard very unlikely to
            // collide with one of ours (a collision would only cost an epoch error).
            next_id: (shard_id as i32 & 0xff) << 23 | 1,
            slots,
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    fn new_session(&mut self, partitions: &[SessionPartition]) -> i32 {
        if self.slots == 0 {
            return 0;
        }
        if self.sessions.len() >= self.slots {
            if let Some((&lru, _)) = self.sessions.iter().min_by_key(|(_, s)| s.last_used) {
                self.sessions.remove(&lru);
            }
        }
        let id = loop {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1).max(1);
            if id != 0 && !self.sessions.contains_key(&id) {
                break id;
            }
        };
        self.sessions.insert(
            id,
            Session {
                epoch: 1,
                partitions: partitions.to_vec(),
                last_used: Instant::now(),
            },
        );
        id
    }

    /// Interprets the request's session id and epoch as Kafka's `FetchManager.newContext` does.
    pub fn plan(&mut self, req: &FetchRequest) -> Result<FetchPlan, SessionError> {
        let (id, epoch) = (req.session_id, req.session_epoch);
        if epoch == FINAL_EPOCH {
            if id != 0 {
                self.sessions.remove(&id);
            }
            return Ok(FetchPlan {
                session_id: 0,
                incremental: false,
                partitions: request_partitions(req),
            });
        }
        if epoch == INITIAL_EPOCH {
            if id != 0 {
                self.sessions.remove(&id);
            }
            let partitions = request_partitions(req);
            let session_id = self.new_session(&partitions);
            return Ok(FetchPlan {
                session_id,
                incremental: false,
                partitions,
            });
        }
        if id == 0 {
            return Err(SessionError::InvalidEpoch);
        }
        let session = self.sessions.get_mut(&id).ok_or(SessionError::NotFound)?;
        if session.epoch != epoch {
            return Err(SessionError::InvalidEpoch);
        }
        for update in request_partitions(req) {
            match session
                .partitions
                .iter_mut()
                .find(|p| p.same_partition(&update))
            {
                Some(p) => {
                    p.fetch_offset = update.fetch_offset;
                    p.max_bytes = update.max_bytes;
                    p.current_leader_epoch = update.current_leader_epoch;
                }
                None => session.partitions.push(update),
            }
        }
        for f in &req.forgotten_topics_data {
            session.partitions.retain(|p| {
                !(f.partitions.contains(&p.partition)
                    && p.topic.as_str() == f.topic.as_str()
                    && p.topic_id == f.topic_id)
            });
        }
        session.epoch = session.epoch.wrapping_add(1).max(1);
        session.last_used = Instant::now();
        Ok(FetchPlan {
            session_id: id,
            incremental: true,
            partitions: session.partitions.clone(),
        })
    }

    /// Remembers what was answered, so the next incremental response can leave out what did
    /// not change.
    pub fn record(&mut self, session_id: i32, answered: &[SessionPartition]) {
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return;
        };
        for a in answered {
            if let Some(p) = session.partitions.iter_mut().find(|p| p.same_partition(a)) {
                p.last_high_watermark = a.last_high_watermark;
                p.last_stable_offset = a.last_stable_offset;
                p.last_log_start = a.last_log_start;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
    use kafka_protocol::protocol::StrBytes;

    fn req(id: i32, epoch: i32, parts: &[(i32, i64)]) -> FetchRequest {
        FetchRequest::default()
            .with_session_id(id)
            .with_session_epoch(epoch)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(
                    parts
                        .iter()
                        .map(|(p, o)| {
                            FetchPartition::default()
                                .with_partition(*p)
                                .with_fetch_offset(*o)
                        })
                        .collect(),
                )])
    }

    #[test]
    fn given_initial_epoch_when_planning_then_new_session_and_full_answer() {
        let mut c = FetchSessionCache::new(0, 10);
        let p = c.plan(&req(0, 0, &[(0, 5), (1, 7)])).unwrap();
        assert!(p.session_id != 0 && !p.incremental);
        assert_eq!(p.partitions.len(), 2);
        // Incremental with an update to partition 1 and nothing else: both stay in the session.
        let q = c.plan(&req(p.session_id, 1, &[(1, 9)])).unwrap();
        assert!(q.incremental);
        let offsets: Vec<(i32, i64)> = q
            .partitions
            .iter()
            .map(|p| (p.partition, p.fetch_offset))
            .collect();
        assert_eq!(offsets, vec![(0, 5), (1, 9)]);
    }

    #[test]
    fn given_bad_session_or_epoch_when_planning_then_kafka_errors() {
        let mut c = FetchSessionCache::new(0, 10);
        assert_eq!(c.plan(&req(12345, 3, &[])), Err(SessionError::NotFound));
        let p = c.plan(&req(0, 0, &[(0, 0)])).unwrap();
        assert_eq!(
            c.plan(&req(p.session_id, 5, &[])),
            Err(SessionError::InvalidEpoch)
        );
        assert_eq!(c.plan(&req(0, 4, &[])), Err(SessionError::InvalidEpoch));
        // Final epoch closes it.
        let f = c.plan(&req(p.session_id, FINAL_EPOCH, &[(0, 0)])).unwrap();
        assert_eq!(f.session_id, 0);
        assert_eq!(
            c.plan(&req(p.session_id, 1, &[])),
            Err(SessionError::NotFound)
        );
    }

    #[test]
    fn given_forgotten_partition_when_planning_then_removed() {
        let mut c = FetchSessionCache::new(0, 10);
        let p = c.plan(&req(0, 0, &[(0, 0), (1, 0)])).unwrap();
        let r =
            req(p.session_id, 1, &[]).with_forgotten_topics_data(vec![ForgottenTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![0])]);
        let q = c.plan(&r).unwrap();
        assert_eq!(
            q.partitions.iter().map(|p| p.partition).collect::<Vec<_>>(),
            vec![1]
        );
    }

    #[test]
    fn given_full_cache_when_new_session_then_lru_evicted_and_zero_slots_declines() {
        let mut c = FetchSessionCache::new(0, 1);
        let a = c.plan(&req(0, 0, &[(0, 0)])).unwrap().session_id;
        let b = c.plan(&req(0, 0, &[(0, 0)])).unwrap().session_id;
        assert_ne!(a, b);
        assert_eq!(c.len(), 1);
        assert_eq!(c.plan(&req(a, 1, &[])), Err(SessionError::NotFound));
        let mut none = FetchSessionCache::new(0, 0);
        assert_eq!(none.plan(&req(0, 0, &[(0, 0)])).unwrap().session_id, 0);
    }
}
