//! Share group membership (Kafka's `ShareGroup` in the group coordinator): members join with
//! epoch 0, heartbeat with their epoch, leave with -1; every change of members, subscriptions
//! or partition counts moves the group epoch and recomputes the target assignment with
//! Kafka's simple assignor idea (`assign`). A share member needs no revocation handshake
//! (partitions are shared, records are locked one by one), so a member takes the group epoch
//! and its new assignment at its next heartbeat. Pure: time and partition counts come in as
//! arguments. One `ShareGroups` table per shard, used on the group's coordinator shard.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::ShareError;

pub type Assignment = BTreeMap<String, Vec<i32>>;

#[derive(Debug, Clone, Default)]
pub struct Member {
    pub epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: Vec<String>,
    pub assignment: Assignment,
    pub last_heartbeat_ms: i64,
}

#[derive(Debug, Clone, Default)]
pub struct ShareGroup {
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    /// Partition counts of the subscribed topics the assignment was computed with.
    pub partitions: BTreeMap<String, i32>,
    /// Every topic the group was ever assigned or had offsets altered on: where it may have
    /// share state (Kafka's `ShareGroupStatePartitionMetadata`), which DeleteGroups deletes.
    pub topics_seen: BTreeSet<String>,
    /// What `__consumer_offsets` has of the group (`persist`).
    pub persisted: Persisted,
}

impl ShareGroup {
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed.iter().cloned())
            .collect()
    }
}

/// What `__consumer_offsets` holds of a share group, to write only what changed (kept and
/// read by `persist`).
#[derive(Debug, Clone, Default)]
pub struct Persisted {
    /// Group epoch and metadata hash.
    pub(super) metadata: Option<(i32, i64)>,
    pub(super) target_epoch: Option<i32>,
    pub(super) members: BTreeMap<
        String,
        crate::codec::generated::share_group_member_metadata_value::ShareGroupMemberMetadataValue,
    >,
    pub(super) targets: BTreeMap<String, Assignment>,
    pub(super) current: BTreeMap<String, (i32, Assignment)>,
    pub(super) topics_seen: Option<BTreeSet<String>>,
    /// The metadata hash a load found, until `finish_restore` compares it.
    pub(super) restored_hash: Option<i64>,
}

/// One heartbeat's content.
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    pub subscribed: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_epoch: i32,
    /// Present when the member's epoch moved (its assignment may have changed).
    pub assignment: Option<Assignment>,
}

/// The share assignor: per topic, the members subscribed to it share its partitions. With at
/// least as many partitions as members, partitions go round-robin (each to one member);
/// with more members, member i gets partition i mod n, so every partition has a member and
/// the extra members share them — what a share group is for.
pub fn assign(
    members: &BTreeMap<String, Member>,
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (topic, &n) in partitions {
        let subs: Vec<&String> = members
            .iter()
            .filter(|(_, m)| m.subscribed.iter().any(|t| t == topic))
            .map(|(id, _)| id)
            .collect();
        if subs.is_empty() || n <= 0 {
            continue;
        }
        let mut give = |member: &String, p: i32| {
            out.entry(member.clone())
                .or_default()
                .entry(topic.clone())
                .or_default()
                .push(p)
        };
        if n as usize >= subs.len() {
            for p in 0..n {
                give(subs[p as usize % subs.len()], p);
            }
        } else {
            for (i, m) in subs.iter().enumerate() {
                give(m, (i % n as usize) as i32);
            }
        }
    }
    out
}

impl ShareGroup {
    /// Members whose session ran out leave; returns whether any did.
    pub fn expire(&mut self, now_ms: i64, session_timeout_ms: i64) -> bool {
        let before = self.members.len();
        self.members
            .retain(|_, m| now_ms - m.last_heartbeat_ms < session_timeout_ms);
        before != self.members.len()
    }

    /// The timer's expiry: members whose session ran out leave, and the group gets a new
    /// epoch and assignment; returns whether any left.
    pub fn expire_members(
        &mut self,
        now_ms: i64,
        session_timeout_ms: i64,
        counts: impl Fn(&str) -> Option<i32>,
    ) -> bool {
        let left = self.expire(now_ms, session_timeout_ms);
        if left {
            self.bump(&counts);
        }
        left
    }

    /// One heartbeat; `counts` gives a topic's partition count (None: no such topic).
    pub fn heartbeat(
        &mut self,
        hb: Heartbeat,
        now_ms: i64,
        session_timeout_ms: i64,
        counts: impl Fn(&str) -> Option<i32>,
    ) -> Result<HeartbeatAnswer, ShareError> {
        let mut changed = self.expire(now_ms, session_timeout_ms);
        if hb.member_id.is_empty() {
            return Err(ShareError::InvalidRequest(
                "MemberId can't be empty.".to_string(),
            ));
        }
        match hb.member_epoch {
            -1 => {
                if self.members.remove(&hb.member_id).is_none() {
                    return Err(ShareError::UnknownMemberId);
                }
                self.bump(&counts);
                return Ok(HeartbeatAnswer {
                    member_epoch: -1,
                    assignment: None,
                });
            }
            0 => {
                let Some(subscribed) = hb.subscribed.clone().filter(|s| !s.is_empty()) else {
                    return Err(ShareError::InvalidRequest(
                        "SubscribedTopicNames must be set in first request.".to_string(),
                    ));
                };
                self.members.insert(
                    hb.member_id.clone(),
                    Member {
                        epoch: 0,
                        subscribed,
                        ..Default::default()
                    },
                );
                changed = true;
            }
            e => {
                let m = self
                    .members
                    .get_mut(&hb.member_id)
                    .ok_or(ShareError::UnknownMemberId)?;
                if m.epoch != e {
                    return Err(ShareError::FencedMemberEpoch);
                }
                if let Some(s) = hb.subscribed.as_ref().filter(|s| **s != m.subscribed) {
                    m.subscribed = s.clone();
                    changed = true;
                }
            }
        }
        let m = self.members.get_mut(&hb.member_id).expect("present");
        m.last_heartbeat_ms = now_ms;
        m.rack_id = hb.rack_id;
        m.client_id = hb.client_id;
        m.client_host = hb.client_host;
        let topics = self.subscribed_topics();
        let now_counts: BTreeMap<String, i32> = topics
            .iter()
            .filter_map(|t| Some((t.clone(), counts(t)?)))
            .collect();
        if changed || now_counts != self.partitions {
            self.bump(&counts);
        }
        let group_epoch = self.epoch;
        let m = self.members.get_mut(&hb.member_id).expect("present");
        let moved = m.epoch != group_epoch;
        m.epoch = group_epoch;
        Ok(HeartbeatAnswer {
            member_epoch: group_epoch,
            assignment: moved.then(|| m.assignment.clone()),
        })
    }

    /// A new group epoch with a new target assignment (members keep their own epoch until
    /// they heartbeat).
    fn bump(&mut self, counts: &impl Fn(&str) -> Option<i32>) {
        self.epoch += 1;
        self.partitions = self
            .subscribed_topics()
            .iter()
            .filter_map(|t| Some((t.clone(), counts(t)?)))
            .collect();
        self.topics_seen.extend(self.partitions.keys().cloned());
        let target = assign(&self.members, &self.partitions);
        for (id, a) in target {
            if let Some(m) = self.members.get_mut(&id) {
                m.assignment = a;
            }
        }
        self.assignment_epoch = self.epoch;
    }
}

/// This shard's share groups (those whose coordinator partition it is home to).
#[derive(Default)]
pub struct ShareGroups {
    pub groups: RefCell<HashMap<String, ShareGroup>>,
}

thread_local! {
    static GROUPS: std::rc::Rc<ShareGroups> = std::rc::Rc::new(ShareGroups::default());
}

impl ShareGroups {
    /// This thread's table: a shard is a thread.
    pub fn here() -> std::rc::Rc<ShareGroups> {
        GROUPS.with(|g| g.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hb(id: &str, epoch: i32, topics: Option<&[&str]>) -> Heartbeat {
        Heartbeat {
            member_id: id.into(),
            member_epoch: epoch,
            subscribed: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn given_three_members_on_one_partition_when_joining_then_all_share_it() {
        let mut g = ShareGroup::default();
        let counts = |t: &str| (t == "t").then_some(1);
        let a = g
            .heartbeat(hb("a", 0, Some(&["t"])), 0, 45_000, counts)
            .unwrap();
        assert_eq!(a.member_epoch, 1);
        assert_eq!(a.assignment.unwrap()["t"], vec![0]);
        let b = g
            .heartbeat(hb("b", 0, Some(&["t"])), 1, 45_000, counts)
            .unwrap();
        assert_eq!(b.member_epoch, 2);
        assert_eq!(b.assignment.unwrap()["t"], vec![0]);
        // "a" still holds epoch 1: it is told epoch 2 with its (unchanged) assignment.
        let a = g.heartbeat(hb("a", 1, None), 2, 45_000, counts).unwrap();
        assert_eq!(a.member_epoch, 2);
        assert!(a.assignment.is_some());
        let a = g.heartbeat(hb("a", 2, None), 3, 45_000, counts).unwrap();
        assert_eq!(a.assignment, None);
        assert_eq!(
            g.heartbeat(hb("a", 1, None), 4, 45_000, counts),
            Err(ShareError::FencedMemberEpoch)
        );
        assert_eq!(
            g.heartbeat(hb("zz", 3, None), 4, 45_000, counts),
            Err(ShareError::UnknownMemberId)
        );
        // "b" stops heartbeating: it leaves when its session runs out.
        g.heartbeat(hb("a", 2, None), 40_000, 45_000, counts)
            .unwrap();
        let a = g
            .heartbeat(hb("a", 2, None), 50_000, 45_000, counts)
            .unwrap();
        assert_eq!((a.member_epoch, g.members.len()), (3, 1));
        g.heartbeat(hb("a", 3, None), 50_001, 45_000, counts)
            .unwrap();
        assert_eq!(
            g.heartbeat(hb("a", -1, None), 50_001, 45_000, counts)
                .unwrap()
                .member_epoch,
            -1
        );
        assert_eq!(g.state(), "Empty");
    }

    #[test]
    fn given_more_partitions_than_members_when_assigning_then_round_robin() {
        let mut members = BTreeMap::new();
        for id in ["a", "b"] {
            members.insert(
                id.to_string(),
                Member {
                    subscribed: vec!["t".into()],
                    ..Default::default()
                },
            );
        }
        let a = assign(&members, &BTreeMap::from([("t".to_string(), 5)]));
        assert_eq!(a["a"]["t"], vec![0, 2, 4]);
        assert_eq!(a["b"]["t"], vec![1, 3]);
    }
}
