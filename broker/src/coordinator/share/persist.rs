//! A share group in `__consumer_offsets`, in Kafka's own records (types 10–15, the codec
//! generated from the group coordinator's schemas): what changed since the last write
//! becomes records (`take_records`), and a load replays them (`restore`), so a restarted
//! broker still lists and describes its share groups with their epochs and members, and the
//! members carry on at their epochs instead of rejoining. The share-partition state itself
//! is in `__share_group_state` (`records`).
//!
//! Kafka writes, per change: the member's metadata (10), the group epoch (11), the target
//! assignment of each member (13) and its epoch (12), the member's current assignment (14),
//! and the topics with share state (15). Strom's member takes its target at its next
//! heartbeat, so the current assignment it writes is the target at the member's epoch.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use kafka_protocol::protocol::Decodable;
use uuid::Uuid;

use super::group::{Assignment, Member, ShareGroup};
use crate::codec::generated::{decode_record_value as decode, encode_record as encode};
use crate::codec::generated::{
    share_group_current_member_assignment_key as current_key,
    share_group_current_member_assignment_value as current_value,
    share_group_member_metadata_key as member_key,
    share_group_member_metadata_value as member_value, share_group_metadata_key as meta_key,
    share_group_metadata_value as meta_value,
    share_group_state_partition_metadata_key as state_key,
    share_group_state_partition_metadata_value as state_value,
    share_group_target_assignment_member_key as target_key,
    share_group_target_assignment_member_value as target_value,
    share_group_target_assignment_metadata_key as target_meta_key,
    share_group_target_assignment_metadata_value as target_meta_value,
};

/// One share group record; `None` values are tombstones.
#[derive(Debug, Clone, PartialEq)]
pub enum ShareRecord {
    Metadata(String, Option<meta_value::ShareGroupMetadataValue>),
    Member(
        String,
        String,
        Option<member_value::ShareGroupMemberMetadataValue>,
    ),
    TargetMetadata(
        String,
        Option<target_meta_value::ShareGroupTargetAssignmentMetadataValue>,
    ),
    TargetMember(
        String,
        String,
        Option<target_value::ShareGroupTargetAssignmentMemberValue>,
    ),
    Current(
        String,
        String,
        Option<current_value::ShareGroupCurrentMemberAssignmentValue>,
    ),
    StatePartitions(
        String,
        Option<state_value::ShareGroupStatePartitionMetadataValue>,
    ),
}

/// The record types (key versions) of share group records.
pub fn is_share_type(t: i16) -> bool {
    (member_key::API_KEY..=state_key::API_KEY).contains(&t)
}

impl ShareRecord {
    pub fn group(&self) -> &str {
        match self {
            ShareRecord::Metadata(g, _)
            | ShareRecord::Member(g, _, _)
            | ShareRecord::TargetMetadata(g, _)
            | ShareRecord::TargetMember(g, _, _)
            | ShareRecord::Current(g, _, _)
            | ShareRecord::StatePartitions(g, _) => g,
        }
    }

    pub fn encode(&self) -> (Bytes, Option<Bytes>) {
        let g = |g: &String| g.clone();
        match self {
            ShareRecord::Metadata(gid, v) => {
                let k = meta_key::ShareGroupMetadataKey {
                    group_id: g(gid),
                    ..Default::default()
                };
                encode(meta_key::API_KEY, &k, v.as_ref())
            }
            ShareRecord::Member(gid, m, v) => {
                let k = member_key::ShareGroupMemberMetadataKey {
                    group_id: g(gid),
                    member_id: m.clone(),
                    ..Default::default()
                };
                encode(member_key::API_KEY, &k, v.as_ref())
            }
            ShareRecord::TargetMetadata(gid, v) => {
                let k = target_meta_key::ShareGroupTargetAssignmentMetadataKey {
                    group_id: g(gid),
                    ..Default::default()
                };
                encode(target_meta_key::API_KEY, &k, v.as_ref())
            }
            ShareRecord::TargetMember(gid, m, v) => {
                let k = target_key::ShareGroupTargetAssignmentMemberKey {
                    group_id: g(gid),
                    member_id: m.clone(),
                    ..Default::default()
                };
                encode(target_key::API_KEY, &k, v.as_ref())
            }
            ShareRecord::Current(gid, m, v) => {
                let k = current_key::ShareGroupCurrentMemberAssignmentKey {
                    group_id: g(gid),
                    member_id: m.clone(),
                    ..Default::default()
                };
                encode(current_key::API_KEY, &k, v.as_ref())
            }
            ShareRecord::StatePartitions(gid, v) => {
                let k = state_key::ShareGroupStatePartitionMetadataKey {
                    group_id: g(gid),
                    ..Default::default()
                };
                encode(state_key::API_KEY, &k, v.as_ref())
            }
        }
    }

    /// `key` without its record type `t` (the first two bytes).
    pub fn decode(t: i16, key: &[u8], value: Option<&[u8]>) -> anyhow::Result<ShareRecord> {
        let mut k = Bytes::copy_from_slice(key);
        Ok(match t {
            meta_key::API_KEY => {
                let k = meta_key::ShareGroupMetadataKey::decode(&mut k, 0)?;
                ShareRecord::Metadata(k.group_id, decode(value)?)
            }
            member_key::API_KEY => {
                let k = member_key::ShareGroupMemberMetadataKey::decode(&mut k, 0)?;
                ShareRecord::Member(k.group_id, k.member_id, decode(value)?)
            }
            target_meta_key::API_KEY => {
                let k = target_meta_key::ShareGroupTargetAssignmentMetadataKey::decode(&mut k, 0)?;
                ShareRecord::TargetMetadata(k.group_id, decode(value)?)
            }
            target_key::API_KEY => {
                let k = target_key::ShareGroupTargetAssignmentMemberKey::decode(&mut k, 0)?;
                ShareRecord::TargetMember(k.group_id, k.member_id, decode(value)?)
            }
            current_key::API_KEY => {
                let k = current_key::ShareGroupCurrentMemberAssignmentKey::decode(&mut k, 0)?;
                ShareRecord::Current(k.group_id, k.member_id, decode(value)?)
            }
            state_key::API_KEY => {
                let k = state_key::ShareGroupStatePartitionMetadataKey::decode(&mut k, 0)?;
                ShareRecord::StatePartitions(k.group_id, decode(value)?)
            }
            other => anyhow::bail!("record type {other} is not a share group's"),
        })
    }
}

/// Strom's `MetadataHash`: FNV-1a over the subscribed topics' names and partition counts.
/// Kafka hashes more (topic ids, racks) with Murmur3; a Kafka broker reading Strom's records
/// would see a different hash and recompute the assignment once, as after any change.
pub fn metadata_hash(partitions: &BTreeMap<String, i32>) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (topic, n) in partitions {
        for b in topic.bytes().chain([0]).chain(n.to_be_bytes()).chain([0]) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h as i64
}

fn member_meta(m: &Member) -> member_value::ShareGroupMemberMetadataValue {
    member_value::ShareGroupMemberMetadataValue {
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topic_names: m.subscribed.clone(),
        ..Default::default()
    }
}

/// An assignment by topic id (topics without an id any more are left out).
fn by_id(a: &Assignment, id_of: &dyn Fn(&str) -> Option<Uuid>) -> Vec<(Uuid, Vec<i32>)> {
    a.iter()
        .filter_map(|(t, ps)| Some((id_of(t)?, ps.clone())))
        .collect()
}

fn by_name(
    parts: impl IntoIterator<Item = (Uuid, Vec<i32>)>,
    name_of: &dyn Fn(&Uuid) -> Option<String>,
) -> Assignment {
    parts
        .into_iter()
        .filter_map(|(id, ps)| Some((name_of(&id)?, ps)))
        .collect()
}

impl ShareGroup {
    /// The records that bring `__consumer_offsets` up to this group, in Kafka's order: the
    /// members' metadata, the group epoch, the target assignment and its epoch, the members'
    /// current assignments, the topics with share state; a member gone leaves tombstones.
    pub fn take_records(
        &mut self,
        group: &str,
        id_of: &dyn Fn(&str) -> Option<Uuid>,
    ) -> Vec<ShareRecord> {
        let g = || group.to_string();
        let mut out = Vec::new();
        let gone: Vec<String> = self
            .persisted
            .members
            .keys()
            .filter(|m| !self.members.contains_key(*m))
            .cloned()
            .collect();
        for m in gone {
            out.push(ShareRecord::Current(g(), m.clone(), None));
            out.push(ShareRecord::TargetMember(g(), m.clone(), None));
            out.push(ShareRecord::Member(g(), m.clone(), None));
            self.persisted.members.remove(&m);
            self.persisted.targets.remove(&m);
            self.persisted.current.remove(&m);
        }
        for (id, m) in &self.members {
            let meta = member_meta(m);
            if self.persisted.members.get(id) != Some(&meta) {
                out.push(ShareRecord::Member(g(), id.clone(), Some(meta.clone())));
                self.persisted.members.insert(id.clone(), meta);
            }
        }
        let hash = metadata_hash(&self.partitions);
        if self.persisted.metadata != Some((self.epoch, hash)) {
            out.push(ShareRecord::Metadata(
                g(),
                Some(meta_value::ShareGroupMetadataValue {
                    epoch: self.epoch,
                    metadata_hash: hash,
                    ..Default::default()
                }),
            ));
            self.persisted.metadata = Some((self.epoch, hash));
        }
        for (id, m) in &self.members {
            if self.persisted.targets.get(id) != Some(&m.assignment) {
                let topic_partitions = by_id(&m.assignment, id_of)
                    .into_iter()
                    .map(|(topic_id, partitions)| target_value::TopicPartition {
                        topic_id,
                        partitions,
                        ..Default::default()
                    })
                    .collect();
                out.push(ShareRecord::TargetMember(
                    g(),
                    id.clone(),
                    Some(target_value::ShareGroupTargetAssignmentMemberValue {
                        topic_partitions,
                        ..Default::default()
                    }),
                ));
                self.persisted
                    .targets
                    .insert(id.clone(), m.assignment.clone());
            }
        }
        if self.persisted.target_epoch != Some(self.assignment_epoch) {
            out.push(ShareRecord::TargetMetadata(
                g(),
                Some(target_meta_value::ShareGroupTargetAssignmentMetadataValue {
                    assignment_epoch: self.assignment_epoch,
                    assignment_timestamp: crate::now_ms(),
                    ..Default::default()
                }),
            ));
            self.persisted.target_epoch = Some(self.assignment_epoch);
        }
        for (id, m) in &self.members {
            let now = (m.epoch, m.assignment.clone());
            let before = self.persisted.current.get(id);
            if before != Some(&now) {
                let previous = before.map(|(e, _)| *e).unwrap_or(m.epoch);
                out.push(ShareRecord::Current(
                    g(),
                    id.clone(),
                    Some(current_value::ShareGroupCurrentMemberAssignmentValue {
                        member_epoch: m.epoch,
                        previous_member_epoch: previous,
                        // Kafka's MemberState.STABLE: a share member has nothing to revoke.
                        state: 0,
                        assigned_partitions: by_id(&m.assignment, id_of)
                            .into_iter()
                            .map(|(topic_id, partitions)| current_value::TopicPartitions {
                                topic_id,
                                partitions,
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    }),
                ));
                self.persisted.current.insert(id.clone(), now);
            }
        }
        if self.persisted.topics_seen.as_ref() != Some(&self.topics_seen) {
            let initialized_topics = self
                .topics_seen
                .iter()
                .filter_map(|t| {
                    Some(state_value::TopicPartitionsInfo {
                        topic_id: id_of(t)?,
                        topic_name: t.clone(),
                        partitions: (0..self.partitions.get(t).copied().unwrap_or(0)).collect(),
                        ..Default::default()
                    })
                })
                .collect();
            out.push(ShareRecord::StatePartitions(
                g(),
                Some(state_value::ShareGroupStatePartitionMetadataValue {
                    initialized_topics,
                    ..Default::default()
                }),
            ));
            self.persisted.topics_seen = Some(self.topics_seen.clone());
        }
        out
    }

    /// The tombstones that delete the group from `__consumer_offsets` (DeleteGroups): each
    /// member's records, then the group's, as Kafka writes them.
    pub fn tombstones(&self, group: &str) -> Vec<ShareRecord> {
        let g = || group.to_string();
        let mut out = Vec::new();
        let members: BTreeSet<&String> = self
            .persisted
            .members
            .keys()
            .chain(self.members.keys())
            .collect();
        for m in members {
            out.push(ShareRecord::Current(g(), m.clone(), None));
            out.push(ShareRecord::TargetMember(g(), m.clone(), None));
            out.push(ShareRecord::Member(g(), m.clone(), None));
        }
        out.push(ShareRecord::TargetMetadata(g(), None));
        out.push(ShareRecord::Metadata(g(), None));
        out.push(ShareRecord::StatePartitions(g(), None));
        out
    }

    /// After every record of the group is replayed: members heartbeat anew within a session
    /// from now (Kafka schedules their session timers at load), and the partition counts the
    /// assignment was made with are taken from the catalog when their hash is the one
    /// written; otherwise they stay unknown and the next heartbeat reassigns.
    pub fn finish_restore(&mut self, now: i64, counts: &BTreeMap<String, i32>) {
        for m in self.members.values_mut() {
            m.last_heartbeat_ms = now;
        }
        let current: BTreeMap<String, i32> = self
            .subscribed_topics()
            .into_iter()
            .filter_map(|t| Some((t.clone(), *counts.get(&t)?)))
            .collect();
        if self.persisted.restored_hash.take() == Some(metadata_hash(&current)) {
            self.partitions = current;
        }
    }
}

/// Replays one record into `groups` (a load of `__consumer_offsets`).
pub fn restore(
    groups: &mut HashMap<String, ShareGroup>,
    rec: ShareRecord,
    name_of: &dyn Fn(&Uuid) -> Option<String>,
) {
    let gid = rec.group().to_string();
    // Tombstones touch only a group that is there: a deletion's last records must not
    // bring it back.
    let g = match &rec {
        ShareRecord::Metadata(_, None) => {
            groups.remove(&gid);
            return;
        }
        ShareRecord::Member(_, _, None)
        | ShareRecord::TargetMetadata(_, None)
        | ShareRecord::TargetMember(_, _, None)
        | ShareRecord::Current(_, _, None)
        | ShareRecord::StatePartitions(_, None) => match groups.get_mut(&gid) {
            Some(g) => g,
            None => return,
        },
        _ => groups.entry(gid).or_default(),
    };
    match rec {
        ShareRecord::Metadata(_, None) => {}
        ShareRecord::Metadata(_, Some(v)) => {
            g.epoch = v.epoch;
            g.persisted.metadata = Some((v.epoch, v.metadata_hash));
            g.persisted.restored_hash = Some(v.metadata_hash);
        }
        ShareRecord::Member(_, m, Some(v)) => {
            let member = g.members.entry(m.clone()).or_default();
            member.rack_id = v.rack_id.clone();
            member.client_id = v.client_id.clone();
            member.client_host = v.client_host.clone();
            member.subscribed = v.subscribed_topic_names.clone();
            g.persisted.members.insert(m, v);
        }
        ShareRecord::Member(_, m, None) => {
            g.members.remove(&m);
            g.persisted.members.remove(&m);
            g.persisted.targets.remove(&m);
            g.persisted.current.remove(&m);
        }
        ShareRecord::TargetMetadata(_, Some(v)) => {
            g.assignment_epoch = v.assignment_epoch;
            g.persisted.target_epoch = Some(v.assignment_epoch);
        }
        ShareRecord::TargetMember(_, m, Some(v)) => {
            let a = by_name(
                v.topic_partitions
                    .into_iter()
                    .map(|tp| (tp.topic_id, tp.partitions)),
                name_of,
            );
            g.members.entry(m.clone()).or_default().assignment = a.clone();
            g.persisted.targets.insert(m, a);
        }
        ShareRecord::Current(_, m, Some(v)) => {
            let a = by_name(
                v.assigned_partitions
                    .into_iter()
                    .map(|tp| (tp.topic_id, tp.partitions)),
                name_of,
            );
            let member = g.members.entry(m.clone()).or_default();
            member.epoch = v.member_epoch;
            // The target, when its record was written, is what the member gets next.
            if !g.persisted.targets.contains_key(&m) {
                member.assignment = a.clone();
            }
            g.persisted.current.insert(m, (v.member_epoch, a));
        }
        ShareRecord::StatePartitions(_, Some(v)) => {
            g.topics_seen = v
                .initializing_topics
                .into_iter()
                .chain(v.initialized_topics)
                .map(|t| t.topic_name)
                .chain(v.deleting_topics.into_iter().map(|t| t.topic_name))
                .collect();
            g.persisted.topics_seen = Some(g.topics_seen.clone());
        }
        ShareRecord::TargetMetadata(_, None)
        | ShareRecord::TargetMember(_, _, None)
        | ShareRecord::Current(_, _, None)
        | ShareRecord::StatePartitions(_, None) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::share::group::Heartbeat;

    fn hb(id: &str, epoch: i32, topics: Option<&[&str]>) -> Heartbeat {
        Heartbeat {
            member_id: id.into(),
            member_epoch: epoch,
            subscribed: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
            client_id: format!("client-{id}"),
            client_host: "/127.0.0.1".into(),
            ..Default::default()
        }
    }

    /// Encodes and decodes every record, then replays them as a load does.
    fn replay(records: &[ShareRecord], into: &mut HashMap<String, ShareGroup>) {
        let ids: HashMap<Uuid, String> = [(Uuid::from_u128(7), "t".to_string())].into();
        for r in records {
            let (k, v) = r.encode();
            let t = i16::from_be_bytes([k[0], k[1]]);
            assert!(is_share_type(t));
            let back = ShareRecord::decode(t, &k[2..], v.as_deref()).unwrap();
            assert_eq!(&back, r);
            restore(into, back, &|id| ids.get(id).cloned());
        }
    }

    #[test]
    fn given_a_share_group_when_its_records_are_replayed_then_members_and_epochs_come_back() {
        let counts = |t: &str| (t == "t").then_some(2);
        let id_of = |t: &str| (t == "t").then_some(Uuid::from_u128(7));
        let mut g = ShareGroup::default();
        g.heartbeat(hb("a", 0, Some(&["t"])), 0, 45_000, counts)
            .unwrap();
        g.heartbeat(hb("b", 0, Some(&["t"])), 1, 45_000, counts)
            .unwrap();
        g.heartbeat(hb("a", 1, None), 2, 45_000, counts).unwrap();
        let mut written = g.take_records("sg", &id_of);
        assert!(
            g.take_records("sg", &id_of).is_empty(),
            "nothing changed since"
        );
        // A member leaves: its three tombstones and the new epoch, nothing else rewritten.
        g.heartbeat(hb("b", -1, None), 3, 45_000, counts).unwrap();
        let leave = g.take_records("sg", &id_of);
        assert_eq!(
            leave
                .iter()
                .filter(|r| matches!(r, ShareRecord::Member(_, m, None) if m == "b"))
                .count(),
            1
        );
        written.extend(leave);

        let mut loaded = HashMap::new();
        replay(&written, &mut loaded);
        let r = loaded.get_mut("sg").expect("the group is back");
        r.finish_restore(10_000, &BTreeMap::from([("t".to_string(), 2)]));
        assert_eq!((r.epoch, r.assignment_epoch), (g.epoch, g.assignment_epoch));
        assert_eq!(r.members.keys().collect::<Vec<_>>(), vec!["a"]);
        let (m, orig) = (&r.members["a"], &g.members["a"]);
        assert_eq!(
            (m.epoch, &m.assignment, &m.subscribed, &m.client_id),
            (
                orig.epoch,
                &orig.assignment,
                &orig.subscribed,
                &orig.client_id
            )
        );
        assert_eq!(m.last_heartbeat_ms, 10_000);
        assert_eq!(r.partitions, g.partitions, "same counts: no reassignment");
        assert_eq!(r.topics_seen, g.topics_seen);
        assert!(
            r.take_records("sg", &id_of).is_empty(),
            "a load writes nothing"
        );
        // The member carries on at its epoch; a partition added while down reassigns.
        let a = r
            .heartbeat(hb("a", orig.epoch, None), 10_001, 45_000, counts)
            .unwrap();
        assert_eq!(a.member_epoch, g.epoch);

        let mut grown = HashMap::new();
        replay(&written, &mut grown);
        let r = grown.get_mut("sg").unwrap();
        r.finish_restore(10_000, &BTreeMap::from([("t".to_string(), 3)]));
        let three = |t: &str| (t == "t").then_some(3);
        let a = r
            .heartbeat(hb("a", g.members["a"].epoch, None), 10_001, 45_000, three)
            .unwrap();
        assert_eq!(a.member_epoch, g.epoch + 1);
        assert_eq!(a.assignment.unwrap()["t"], vec![0, 1, 2]);
    }

    #[test]
    fn given_a_silent_member_when_the_timer_expires_it_then_tombstones_and_a_new_epoch() {
        let counts = |t: &str| (t == "t").then_some(1);
        let id_of = |t: &str| (t == "t").then_some(Uuid::from_u128(7));
        let mut g = ShareGroup::default();
        g.heartbeat(hb("a", 0, Some(&["t"])), 0, 45_000, counts)
            .unwrap();
        g.heartbeat(hb("b", 0, Some(&["t"])), 40_000, 45_000, counts)
            .unwrap();
        g.take_records("sg", &id_of);
        assert!(!g.expire_members(44_999, 45_000, counts));
        assert!(
            g.expire_members(45_000, 45_000, counts),
            "a's session ran out"
        );
        let recs = g.take_records("sg", &id_of);
        assert!(recs.contains(&ShareRecord::Member("sg".into(), "a".into(), None)));
        assert!(recs
            .iter()
            .any(|r| matches!(r, ShareRecord::Metadata(_, Some(v)) if v.epoch == 3)));
        assert_eq!(g.members.keys().collect::<Vec<_>>(), vec!["b"]);
    }

    #[test]
    fn given_a_deleted_share_group_when_replayed_then_it_is_gone() {
        let counts = |t: &str| (t == "t").then_some(1);
        let id_of = |t: &str| (t == "t").then_some(Uuid::from_u128(7));
        let mut g = ShareGroup::default();
        g.heartbeat(hb("a", 0, Some(&["t"])), 0, 45_000, counts)
            .unwrap();
        let mut written = g.take_records("sg", &id_of);
        written.extend(g.tombstones("sg"));
        let mut loaded = HashMap::new();
        replay(&written, &mut loaded);
        assert!(loaded.is_empty(), "{loaded:?}");
    }
}
