//! A KIP-848 group in `__consumer_offsets`: the records that bring the log up to date with the
//! group (only what changed since the last write), and the replay of those records at load.

use std::collections::BTreeSet;

use super::{ConsumerConfig, ConsumerGroup, ConsumerMember, PersistedMember};
use crate::coordinator::group::assignor::{Assignment, Assignor};
use crate::coordinator::group::records::{
    ConsumerMemberMetadata, CurrentAssignment, GroupRecord, ResolvedRegex, TopicPartitions,
};
use crate::coordinator::group::topic_regex::TopicRegex;

impl ConsumerMember {
    fn blank(id: &str) -> ConsumerMember {
        ConsumerMember {
            member_id: id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            epoch: 0,
            previous_epoch: 0,
            subscribed: BTreeSet::new(),
            regex: None,
            compiled: None,
            effective: BTreeSet::new(),
            rebalance_timeout_ms: 0,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            session_deadline: 0,
            revocation_deadline: None,
            send_assignment: true,
        }
    }

    fn metadata(&self, assignor: Assignor) -> ConsumerMemberMetadata {
        ConsumerMemberMetadata {
            instance_id: self.instance_id.clone(),
            rack_id: self.rack_id.clone(),
            client_id: self.client_id.clone(),
            client_host: self.client_host.clone(),
            subscribed: self.subscribed.iter().cloned().collect(),
            regex: self.regex.clone(),
            rebalance_timeout_ms: self.rebalance_timeout_ms,
            server_assignor: Some(assignor.name().to_string()),
        }
    }
}

fn to_ids(a: &Assignment, id_of: &dyn Fn(&str) -> Option<uuid::Uuid>) -> TopicPartitions {
    a.iter()
        .filter_map(|(t, ps)| Some((id_of(t)?, ps.iter().copied().collect())))
        .collect()
}

fn to_names(tps: &TopicPartitions, name_of: &dyn Fn(&uuid::Uuid) -> Option<String>) -> Assignment {
    let mut a = Assignment::new();
    for (id, ps) in tps {
        if let Some(t) = name_of(id) {
            a.entry(t).or_default().extend(ps.iter().copied());
        }
    }
    a
}

impl ConsumerGroup {
    /// The records that bring `__consumer_offsets` up to date with this group (Kafka's
    /// KIP-848 record types), and marks them written.
    pub fn take_records(
        &mut self,
        group: &str,
        id_of: &dyn Fn(&str) -> Option<uuid::Uuid>,
    ) -> Vec<GroupRecord> {
        let mut out = Vec::new();
        let g = group.to_string();
        if self.persisted.group_epoch != Some(self.group_epoch) {
            out.push(GroupRecord::ConsumerEpoch {
                group: g.clone(),
                value: Some(self.group_epoch),
            });
            self.persisted.group_epoch = Some(self.group_epoch);
        }
        let gone: Vec<String> = self
            .persisted
            .members
            .keys()
            .filter(|id| !self.members.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            self.persisted.members.remove(&id);
            for rec in [
                GroupRecord::CurrentAssignment {
                    group: g.clone(),
                    member: id.clone(),
                    value: None,
                },
                GroupRecord::TargetMember {
                    group: g.clone(),
                    member: id.clone(),
                    value: None,
                },
                GroupRecord::ConsumerMember {
                    group: g.clone(),
                    member: id.clone(),
                    value: None,
                },
            ] {
                out.push(rec);
            }
        }
        let empty = Assignment::new();
        let target_moved = self.persisted.assignment_epoch != Some(self.assignment_epoch);
        for (id, m) in &self.members {
            let now = PersistedMember {
                metadata: m.metadata(self.assignor),
                current: (
                    m.epoch,
                    m.previous_epoch,
                    m.assigned.clone(),
                    m.pending_revocation.clone(),
                ),
                target: self.target.get(id).unwrap_or(&empty).clone(),
            };
            let before = self.persisted.members.get(id);
            if before.map(|b| &b.metadata) != Some(&now.metadata) {
                out.push(GroupRecord::ConsumerMember {
                    group: g.clone(),
                    member: id.clone(),
                    value: Some(now.metadata.clone()),
                });
            }
            if target_moved || before.map(|b| &b.target) != Some(&now.target) {
                out.push(GroupRecord::TargetMember {
                    group: g.clone(),
                    member: id.clone(),
                    value: Some(to_ids(&now.target, id_of)),
                });
            }
            if before.map(|b| &b.current) != Some(&now.current) {
                let state = if !m.pending_revocation.is_empty() {
                    1
                } else if m.assigned != now.target {
                    2
                } else {
                    0
                };
                out.push(GroupRecord::CurrentAssignment {
                    group: g.clone(),
                    member: id.clone(),
                    value: Some(CurrentAssignment {
                        epoch: m.epoch,
                        previous_epoch: m.previous_epoch,
                        state,
                        assigned: to_ids(&m.assigned, id_of),
                        pending_revocation: to_ids(&m.pending_revocation, id_of),
                    }),
                });
            }
            self.persisted.members.insert(id.clone(), now);
        }
        for (re, r) in &self.regexes {
            if self.persisted.regexes.get(re) != Some(r) {
                out.push(GroupRecord::ConsumerRegex {
                    group: g.clone(),
                    regex: re.clone(),
                    value: Some(r.clone()),
                });
            }
        }
        for re in self.persisted.regexes.keys() {
            if !self.regexes.contains_key(re) {
                out.push(GroupRecord::ConsumerRegex {
                    group: g.clone(),
                    regex: re.clone(),
                    value: None,
                });
            }
        }
        self.persisted.regexes.clone_from(&self.regexes);
        if target_moved {
            out.push(GroupRecord::TargetEpoch {
                group: g,
                value: Some(self.assignment_epoch),
            });
            self.persisted.assignment_epoch = Some(self.assignment_epoch);
        }
        out
    }

    /// Replays one KIP-848 record read from `__consumer_offsets`.
    pub fn restore(&mut self, rec: GroupRecord, name_of: &dyn Fn(&uuid::Uuid) -> Option<String>) {
        match rec {
            GroupRecord::ConsumerEpoch { value, .. } => self.group_epoch = value.unwrap_or(0),
            GroupRecord::TargetEpoch { value, .. } => self.assignment_epoch = value.unwrap_or(0),
            GroupRecord::ConsumerMember {
                member,
                value: None,
                ..
            } => {
                self.members.remove(&member);
                self.target.remove(&member);
            }
            GroupRecord::ConsumerMember {
                member,
                value: Some(md),
                ..
            } => {
                let m = self
                    .members
                    .entry(member.clone())
                    .or_insert_with(|| ConsumerMember::blank(&member));
                m.instance_id = md.instance_id;
                m.rack_id = md.rack_id;
                m.client_id = md.client_id;
                m.client_host = md.client_host;
                m.subscribed = md.subscribed.into_iter().collect();
                m.compiled = md.regex.as_deref().and_then(|r| TopicRegex::parse(r).ok());
                m.regex = md.regex;
                m.rebalance_timeout_ms = md.rebalance_timeout_ms.max(0);
                if let Some(a) = md.server_assignor.as_deref().and_then(Assignor::by_name) {
                    self.assignor = a;
                }
            }
            GroupRecord::TargetMember { member, value, .. } => match value {
                Some(tps) => {
                    self.target.insert(member, to_names(&tps, name_of));
                }
                None => {
                    self.target.remove(&member);
                }
            },
            GroupRecord::ConsumerRegex {
                regex,
                value: Some(r),
                ..
            } => {
                // Resolved against a catalog this shard has not seen: due again (`regex`).
                let version = super::regex::LOADED_VERSION;
                self.regexes.insert(regex, ResolvedRegex { version, ..r });
            }
            GroupRecord::ConsumerRegex {
                regex, value: None, ..
            } => {
                self.regexes.remove(&regex);
            }
            GroupRecord::CurrentAssignment {
                member,
                value: Some(c),
                ..
            } => {
                let m = self
                    .members
                    .entry(member.clone())
                    .or_insert_with(|| ConsumerMember::blank(&member));
                m.epoch = c.epoch;
                m.previous_epoch = c.previous_epoch;
                m.assigned = to_names(&c.assigned, name_of);
                m.pending_revocation = to_names(&c.pending_revocation, name_of);
            }
            _ => {}
        }
    }

    /// After a load: sessions start now, and what was read counts as written.
    pub fn finish_restore(&mut self, now: i64, cfg: &ConsumerConfig) {
        self.static_members.clear();
        for m in self.members.values_mut() {
            m.session_deadline = now + cfg.session_timeout_ms as i64;
            if !m.pending_revocation.is_empty() {
                m.revocation_deadline = Some(now + m.rebalance_timeout_ms as i64);
            }
            if let Some(iid) = &m.instance_id {
                self.static_members.insert(iid.clone(), m.member_id.clone());
            }
        }
        self.seed_unrecorded_regexes();
        let _ = self.take_records("", &|_| None);
    }

    /// A group written before Strom kept record 16 has subscribed regexes without a
    /// resolution. Until its first heartbeat resolves them (at once: the seed is as old as
    /// can be), each stands for the matching topics its subscribers' targets hold, so that a
    /// timer's rebalance meanwhile keeps them instead of dropping them for one round.
    fn seed_unrecorded_regexes(&mut self) {
        for m in self.members.values() {
            let (Some(re), Some(compiled)) = (&m.regex, &m.compiled) else {
                continue;
            };
            if self
                .regexes
                .get(re)
                .is_some_and(|r| r.timestamp != i64::MIN)
            {
                continue;
            }
            let seed = self.regexes.entry(re.clone()).or_insert(ResolvedRegex {
                topics: BTreeSet::new(),
                version: super::regex::LOADED_VERSION,
                timestamp: i64::MIN,
            });
            let targeted = self
                .target
                .get(&m.member_id)
                .into_iter()
                .flat_map(|a| a.keys());
            seed.topics
                .extend(targeted.filter(|t| compiled.matches(t)).cloned());
        }
    }
}
