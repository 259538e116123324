//! Leader elections the controller makes on request (ElectLeaders, Kafka's
//! `kafka-leader-election.sh`) or on its own: preferred leaders back after restarts
//! (`auto.leader.rebalance.enable`, `controller.rs`) and, where a topic allows it, an unclean
//! leader for a partition whose in-sync replicas are all gone. Kafka's
//! `ReplicationControlManager.electLeader` and `PartitionChangeBuilder`, in our image.

use serde::{Deserialize, Serialize};

use super::{MetadataImage, PartitionRecord};

/// Kafka's `ElectionType` (ElectLeaders' `election_type`: 0 preferred, 1 unclean).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionType {
    /// The first replica leads again, if it is in sync and live.
    Preferred,
    /// A partition without a leader gets one: an in-sync replica if one is live, else any
    /// live replica (which may lose the records only the others had).
    Unclean,
}

/// One partition's election, in the order asked (Kafka's `ApiError` per partition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Elected {
    Done,
    /// Already led by the preferred replica (preferred), or led at all (unclean).
    NotNeeded,
    PreferredNotAvailable,
    EligibleNotAvailable,
    UnknownTopic,
    UnknownPartition,
}

/// The topic config that lets a partition take an out-of-sync leader (Kafka's name).
pub const UNCLEAN_CONFIG: &str = "unclean.leader.election.enable";

impl MetadataImage {
    /// Elects per `election` for each of `partitions` (Kafka's `electLeader`), each at a new
    /// leader epoch when its leader changes.
    pub(super) fn elect_leaders(
        &mut self,
        election: ElectionType,
        partitions: &[(String, i32)],
    ) -> Vec<Elected> {
        partitions
            .iter()
            .map(|(topic, partition)| self.elect_one(election, topic, *partition))
            .collect()
    }

    fn elect_one(&mut self, election: ElectionType, topic: &str, partition: i32) -> Elected {
        let Some(t) = self.topics.get(topic) else {
            return Elected::UnknownTopic;
        };
        let Some(p) = usize::try_from(partition)
            .ok()
            .and_then(|i| t.partitions.get(i))
        else {
            return Elected::UnknownPartition;
        };
        let (leader, isr) = match election {
            ElectionType::Preferred => {
                let preferred = p.replicas[0];
                if p.leader == preferred {
                    return Elected::NotNeeded;
                }
                if !p.in_sync().contains(&preferred) || !self.acceptable(preferred) {
                    return Elected::PreferredNotAvailable;
                }
                (preferred, p.in_sync())
            }
            ElectionType::Unclean => {
                if p.leader >= 0 {
                    return Elected::NotNeeded;
                }
                match self.leader_for_leaderless(p) {
                    Some(chosen) => chosen,
                    None => return Elected::EligibleNotAvailable,
                }
            }
        };
        let p = self.partition_mut(topic, partition).expect("found above");
        p.leader = leader;
        p.isr = isr;
        p.leader_epoch += 1;
        Elected::Done
    }

    /// A live in-sync replica of a partition without a leader (the clean choice), else the
    /// first live replica with an ISR of itself alone (unclean: what only the lost replicas
    /// had is gone).
    fn leader_for_leaderless(&self, p: &PartitionRecord) -> Option<(i32, Vec<i32>)> {
        let isr = p.in_sync();
        if let Some(r) = p
            .replicas
            .iter()
            .copied()
            .find(|r| isr.contains(r) && self.acceptable(*r))
        {
            return Some((r, isr));
        }
        let r = p.replicas.iter().copied().find(|r| self.acceptable(*r))?;
        Some((r, vec![r]))
    }

    /// A broker that may lead: registered, unfenced, not stopping (Kafka's `LeaderAcceptor`).
    pub(super) fn acceptable(&self, broker: i32) -> bool {
        self.brokers.contains_key(&broker)
            && !self.fenced.contains(&broker)
            && !self.shutting_down.contains(&broker)
    }

    /// Whether `topic` may take an out-of-sync leader: its override, else the cluster-wide
    /// dynamic default, else Kafka's default (false).
    pub(super) fn unclean_allowed(&self, topic: &str) -> bool {
        self.topics
            .get(topic)
            .and_then(|t| t.configs.get(UNCLEAN_CONFIG))
            .or_else(|| {
                self.broker_configs
                    .get("")
                    .and_then(|d| d.get(UNCLEAN_CONFIG))
            })
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// After a broker left or came back, or a config changed: partitions without a leader
    /// whose topic allows unclean election take any live replica (Kafka's unclean election
    /// on `unclean.leader.election.enable`). Returns them, for the log: the records only the
    /// lost in-sync replicas had are gone.
    pub(super) fn elect_unclean_where_allowed(&mut self) -> Vec<(String, i32, i32)> {
        let leaderless: Vec<(String, i32)> = self
            .topics
            .iter()
            .filter(|(name, _)| self.unclean_allowed(name))
            .flat_map(|(name, t)| {
                t.partitions
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.leader < 0)
                    .map(move |(i, _)| (name.clone(), i as i32))
            })
            .collect();
        let mut elected = Vec::new();
        for (topic, partition) in leaderless {
            if self.elect_one(ElectionType::Unclean, &topic, partition) == Elected::Done {
                let leader = self.partition(&topic, partition).map_or(-1, |p| p.leader);
                elected.push((topic, partition, leader));
            }
        }
        elected
    }

    /// Up to `max` partitions whose preferred replica could lead but does not (the
    /// controller's `auto.leader.rebalance.enable`, Kafka's `imbalancedPartitions`).
    pub fn imbalanced(&self, max: usize) -> Vec<(String, i32)> {
        self.topics
            .iter()
            .flat_map(|(name, t)| {
                t.partitions
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| {
                        let preferred = p.replicas[0];
                        p.leader != preferred
                            && p.in_sync().contains(&preferred)
                            && self.acceptable(preferred)
                    })
                    .map(move |(i, _)| (name.clone(), i as i32))
            })
            .take(max)
            .collect()
    }

    pub(super) fn partition_mut(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> Option<&mut PartitionRecord> {
        self.topics
            .get_mut(topic)?
            .partitions
            .get_mut(usize::try_from(partition).ok()?)
    }
}
