//! Partition reassignment (AlterPartitionReassignments, `kafka-reassign-partitions`), as
//! Kafka's KRaft controller does it (`ReplicationControlManager.alterPartitionReassignment`,
//! `PartitionReassignmentReplicas`, `PartitionReassignmentRevert`, `PartitionChangeBuilder`):
//!
//! 1. The request records the target: `replicas` becomes the target followed by the replicas
//!    it drops (`removing`), and `adding` names the new ones. The leader and ISR stay.
//! 2. The new replicas follow the leader like any follower (they are in `replicas`), catch up
//!    and join the ISR through the leader's `AlterIsr`.
//! 3. The `AlterIsr` that puts the last target replica in the ISR completes the move in the
//!    same entry: `replicas` := target, the ISR loses the removed ones, the leader moves to a
//!    target replica if it was removed, and the leader epoch bumps (the removed replicas'
//!    fetches at the old epoch are refused from then on). A move that needs no catching up
//!    (only removals or a reordering) completes at once.
//!
//! Cancelling (null replicas) reverts to the replicas before the move, minus nothing the ISR
//! needs: the added replicas leave the ISR and `replicas`. Every step is a pure function of
//! the image, so each node decides alike; `materialize.rs` opens a new replica's log and
//! deletes a removed replica's.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{MetadataImage, PartitionRecord};

/// One partition of an AlterPartitionReassignments: its target replicas, `None` to cancel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    pub replicas: Option<Vec<i32>>,
}

/// One partition's outcome, in the order asked (Kafka's `ApiError` per partition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reassigned {
    /// Recorded (and completed, if nothing had to catch up), or cancelled.
    Done,
    /// UNKNOWN_TOPIC_OR_PARTITION, with Kafka's message.
    UnknownTopicOrPartition(String),
    /// INVALID_REPLICA_ASSIGNMENT, with Kafka's message.
    InvalidReplicaAssignment(String),
    /// INVALID_REPLICATION_FACTOR (v1's `allow_replication_factor_change` = false).
    InvalidReplicationFactor(String),
    /// NO_REASSIGNMENT_IN_PROGRESS: a cancel of a partition that is not moving.
    NoReassignmentInProgress,
}

impl PartitionRecord {
    /// Whether a reassignment is under way (Kafka's `isReassignmentInProgress`).
    pub fn reassigning(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// The replica set the partition is headed for: `replicas` without the ones a move
    /// removes. What the replication factor of the topic is while a partition moves.
    pub fn target_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.removing.contains(r))
            .collect()
    }
}

/// A partition's next state, as `PartitionChangeBuilder` assembles it before `build`.
struct Change {
    replicas: Vec<i32>,
    isr: Vec<i32>,
    adding: Vec<i32>,
    removing: Vec<i32>,
    /// Whether an out-of-sync replica may lead (a cancel that leaves no in-sync replica, on a
    /// topic that allows unclean election).
    unclean: bool,
}

impl MetadataImage {
    /// AlterPartitionReassignments: each partition decided on its own, as Kafka's controller
    /// does (one failing does not stop the others). `allow_rf_change` false refuses a target
    /// whose size differs from where the partition is headed (v1, KIP-860).
    pub(super) fn alter_reassignments(
        &mut self,
        asked: &[Reassignment],
        allow_rf_change: bool,
    ) -> Vec<Reassigned> {
        asked
            .iter()
            .map(|r| self.reassign_one(r, allow_rf_change))
            .collect()
    }

    fn reassign_one(&mut self, r: &Reassignment, allow_rf_change: bool) -> Reassigned {
        let Some(topic) = self.topics.get(&r.topic) else {
            let why = format!("Unable to find a topic named {}.", r.topic);
            return Reassigned::UnknownTopicOrPartition(why);
        };
        let Some(part) = usize::try_from(r.partition)
            .ok()
            .and_then(|i| topic.partitions.get(i))
        else {
            let why = format!("Unable to find partition {}:{}.", r.topic, r.partition);
            return Reassigned::UnknownTopicOrPartition(why);
        };
        let change = match &r.replicas {
            None => match self.revert(&r.topic, r.partition, part) {
                Ok(c) => c,
                Err(refused) => return refused,
            },
            Some(target) => {
                if !allow_rf_change && part.target_replicas().len() != target.len() {
                    return Reassigned::InvalidReplicationFactor(format!(
                        "The replication factor is changed from {} to {}",
                        part.target_replicas().len(),
                        target.len()
                    ));
                }
                if let Err(why) = self.validate_assignment(target) {
                    return Reassigned::InvalidReplicaAssignment(why);
                }
                moving_to(part, target)
            }
        };
        let next = self.build(part, change);
        *self
            .partition_mut(&r.topic, r.partition)
            .expect("found above") = next;
        Reassigned::Done
    }

    /// Kafka's `validateManualPartitionAssignment`: not empty, every broker registered, none
    /// twice; checked in ascending broker order, so the message names the lowest offender.
    fn validate_assignment(&self, target: &[i32]) -> Result<(), String> {
        if target.is_empty() {
            return Err("The manual partition assignment includes an empty replica list.".into());
        }
        let mut sorted = target.to_vec();
        sorted.sort_unstable();
        let mut previous = None;
        for id in sorted {
            if !self.brokers.contains_key(&id) {
                return Err(format!(
                    "The manual partition assignment includes broker {id}, but no such broker is registered."
                ));
            }
            if previous == Some(id) {
                return Err(format!(
                    "The manual partition assignment includes the broker {id} more than once."
                ));
            }
            previous = Some(id);
        }
        Ok(())
    }

    /// Kafka's `cancelPartitionReassignment` with `PartitionReassignmentRevert`: the replicas
    /// before the move, the ISR without the added ones; an ISR left empty needs the first
    /// remaining replica to lead out of sync, which only a topic allowing unclean election
    /// accepts.
    fn revert(
        &self,
        topic: &str,
        partition: i32,
        part: &PartitionRecord,
    ) -> Result<Change, Reassigned> {
        if !part.reassigning() {
            return Err(Reassigned::NoReassignmentInProgress);
        }
        let replicas: Vec<i32> = without(&part.replicas, &part.adding);
        let mut isr = without(&part.in_sync(), &part.adding);
        let mut unclean = false;
        if isr.is_empty() {
            let Some(first) = replicas.first() else {
                return Err(Reassigned::InvalidReplicaAssignment(
                    "Invalid replica assignment: addingReplicas contains all replicas.".into(),
                ));
            };
            if !self.unclean_allowed(topic) {
                return Err(Reassigned::InvalidReplicaAssignment(format!(
                    "Unable to revert partition assignment for {topic}:{partition} because it would require an unclean leader election."
                )));
            }
            isr.push(*first);
            unclean = true;
        }
        Ok(Change {
            replicas,
            isr,
            adding: Vec::new(),
            removing: Vec::new(),
            unclean,
        })
    }

    /// After a leader's `AlterIsr`: the ISR may now hold every target replica, which
    /// completes the partition's move (Kafka runs `PartitionChangeBuilder` on every
    /// AlterPartition, whose first step is `completeReassignmentIfNeeded`).
    pub(super) fn complete_reassignment(&mut self, topic: &str, partition: i32) {
        let Some(part) = self.partition(topic, partition).filter(|p| p.reassigning()) else {
            return;
        };
        let change = Change {
            replicas: part.replicas.clone(),
            isr: part.in_sync(),
            adding: part.adding.clone(),
            removing: part.removing.clone(),
            unclean: false,
        };
        let next = self.build(part, change);
        if let Some(p) = self.partition_mut(topic, partition) {
            if !p.reassigning() || !next.reassigning() {
                tracing::info!(topic, partition, replicas = ?next.replicas, leader = next.leader, "partition reassignment completed");
            }
            *p = next;
        }
    }

    /// Kafka's `PartitionChangeBuilder.build` for a reassignment: complete it if the ISR
    /// allows, keep the leader if it is still an in-sync target replica and may lead, else
    /// elect the first target replica that is (or, unclean, any that may lead; else none),
    /// and bump the leader epoch when the leader changes or a replica leaves
    /// (`triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`): a removed replica's fetches
    /// at the old epoch are then refused.
    fn build(&self, part: &PartitionRecord, mut c: Change) -> PartitionRecord {
        complete_if_ready(&mut c);
        let valid = |r: i32| c.isr.contains(&r) && self.acceptable(r);
        let mut isr = c.isr.clone();
        let leader = if valid(part.leader) {
            part.leader
        } else if let Some(r) = c.replicas.iter().copied().find(|r| valid(*r)) {
            r
        } else if let Some(r) = c
            .replicas
            .iter()
            .copied()
            .find(|r| c.unclean && self.acceptable(*r))
        {
            isr = vec![r];
            r
        } else {
            -1
        };
        let dropped = part.replicas.iter().any(|r| !c.replicas.contains(r));
        let bump = leader != part.leader || dropped;
        PartitionRecord {
            leader,
            leader_epoch: part.leader_epoch + i32::from(bump),
            replicas: c.replicas,
            isr,
            adding: c.adding,
            removing: c.removing,
        }
    }
}

/// `PartitionReassignmentReplicas(current, target)`: `removing` = current − target,
/// `adding` = target − current (both ascending), `replicas` = target then `removing`; the
/// ISR as it is.
fn moving_to(part: &PartitionRecord, target: &[i32]) -> Change {
    let current: BTreeSet<i32> = part.replicas.iter().copied().collect();
    let wanted: BTreeSet<i32> = target.iter().copied().collect();
    let removing: Vec<i32> = current.difference(&wanted).copied().collect();
    let adding: Vec<i32> = wanted.difference(&current).copied().collect();
    let mut replicas = target.to_vec();
    replicas.extend(&removing);
    Change {
        replicas,
        isr: part.in_sync(),
        adding,
        removing,
        unclean: false,
    }
}

/// `PartitionReassignmentReplicas.maybeCompleteReassignment`: once the ISR without the
/// removed replicas still has a member and holds every remaining replica, the removed ones
/// go and the move is over.
fn complete_if_ready(c: &mut Change) {
    if c.adding.is_empty() && c.removing.is_empty() {
        return;
    }
    let isr = without(&c.isr, &c.removing);
    let replicas = without(&c.replicas, &c.removing);
    if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|r| isr.contains(r)) {
        return;
    }
    c.isr = isr;
    c.replicas = replicas;
    c.adding.clear();
    c.removing.clear();
}

fn without(of: &[i32], drop: &[i32]) -> Vec<i32> {
    of.iter().copied().filter(|r| !drop.contains(r)).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use uuid::Uuid;

    use super::super::{BrokerRecord, Command, Outcome};
    use super::*;

    fn image_with(brokers: &[i32], replicas: &[i32]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for id in brokers {
            image
                .brokers
                .insert(*id, BrokerRecord::new(*id, None, Vec::new()));
        }
        image.topics.insert(
            "t".into(),
            super::super::TopicRecord {
                id: Uuid::nil(),
                configs: BTreeMap::new(),
                internal: false,
                partitions: vec![PartitionRecord {
                    leader: replicas[0],
                    leader_epoch: 3,
                    replicas: replicas.to_vec(),
                    isr: replicas.to_vec(),
                    adding: Vec::new(),
                    removing: Vec::new(),
                }],
            },
        );
        image
    }

    fn reassign(image: &mut MetadataImage, replicas: Option<&[i32]>) -> Reassigned {
        let cmd = Command::AlterReassignments {
            reassignments: vec![Reassignment {
                topic: "t".into(),
                partition: 0,
                replicas: replicas.map(<[i32]>::to_vec),
            }],
            allow_rf_change: true,
        };
        match image.apply(&cmd) {
            Outcome::Reassignments(mut v) => v.remove(0),
            other => panic!("{other:?}"),
        }
    }

    fn alter_isr(image: &mut MetadataImage, isr: &[i32]) -> Outcome {
        let p = image.partition("t", 0).unwrap().clone();
        image.apply(&Command::AlterIsr {
            topic: "t".into(),
            partition: 0,
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            isr: isr.to_vec(),
            from: None,
        })
    }

    fn state(image: &MetadataImage) -> (Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>, i32, i32) {
        let p = image.partition("t", 0).unwrap();
        (
            p.replicas.clone(),
            p.isr.clone(),
            p.adding.clone(),
            p.removing.clone(),
            p.leader,
            p.leader_epoch,
        )
    }

    #[test]
    fn given_a_move_when_the_new_replica_joins_the_isr_then_it_completes_and_the_leader_moves() {
        let mut image = image_with(&[1, 2, 3], &[1, 2]);
        assert_eq!(reassign(&mut image, Some(&[2, 3])), Reassigned::Done);
        // The union, target first; leader and ISR unchanged while 3 catches up.
        assert_eq!(
            state(&image),
            (vec![2, 3, 1], vec![1, 2], vec![3], vec![1], 1, 3)
        );
        assert!(image.partition("t", 0).unwrap().reassigning());
        assert_eq!(alter_isr(&mut image, &[1, 2, 3]), Outcome::Done);
        // Done: the removed leader hands over to the first in-sync target replica.
        assert_eq!(
            state(&image),
            (vec![2, 3], vec![2, 3], vec![], vec![], 2, 4)
        );
    }

    #[test]
    fn given_a_move_keeping_the_leader_when_completed_then_the_epoch_still_bumps() {
        let mut image = image_with(&[1, 2, 3], &[1, 2]);
        reassign(&mut image, Some(&[1, 3]));
        alter_isr(&mut image, &[1, 2, 3]);
        // Replica 2 left: its fetches at epoch 3 must be refused from now on.
        assert_eq!(
            state(&image),
            (vec![1, 3], vec![1, 3], vec![], vec![], 1, 4)
        );
    }

    #[test]
    fn given_only_removals_or_a_reordering_when_reassigned_then_done_at_once() {
        let mut image = image_with(&[1, 2, 3], &[1, 2, 3]);
        assert_eq!(reassign(&mut image, Some(&[3, 2])), Reassigned::Done);
        // The removed leader hands over to the first in-sync target replica.
        assert_eq!(
            state(&image),
            (vec![3, 2], vec![2, 3], vec![], vec![], 3, 4)
        );
        assert_eq!(reassign(&mut image, Some(&[2, 3])), Reassigned::Done);
        // Same members: no epoch bump, the leader stays (a preferred election moves it).
        assert_eq!(
            state(&image),
            (vec![2, 3], vec![2, 3], vec![], vec![], 3, 4)
        );
    }

    #[test]
    fn given_a_move_when_cancelled_then_the_old_replicas_and_isr_are_back() {
        let mut image = image_with(&[1, 2, 3], &[1, 2]);
        reassign(&mut image, Some(&[2, 3]));
        assert_eq!(reassign(&mut image, None), Reassigned::Done);
        // Replica 3 left (an epoch bump, as in Kafka); the order is the union's, without it.
        assert_eq!(
            state(&image),
            (vec![2, 1], vec![1, 2], vec![], vec![], 1, 4)
        );
        assert_eq!(
            reassign(&mut image, None),
            Reassigned::NoReassignmentInProgress
        );
    }

    #[test]
    fn given_invalid_targets_when_reassigned_then_kafkas_errors_and_nothing_changes() {
        let mut image = image_with(&[1, 2, 3], &[1, 2]);
        let before = image.clone();
        let invalid = |why: &str| Reassigned::InvalidReplicaAssignment(why.into());
        assert_eq!(
            reassign(&mut image, Some(&[])),
            invalid("The manual partition assignment includes an empty replica list.")
        );
        assert_eq!(
            reassign(&mut image, Some(&[2, 2])),
            invalid("The manual partition assignment includes the broker 2 more than once.")
        );
        assert_eq!(
            reassign(&mut image, Some(&[1, 9])),
            invalid(
                "The manual partition assignment includes broker 9, but no such broker is registered."
            )
        );
        let unknown = Command::AlterReassignments {
            reassignments: vec![
                Reassignment {
                    topic: "nope".into(),
                    partition: 0,
                    replicas: Some(vec![1]),
                },
                Reassignment {
                    topic: "t".into(),
                    partition: 7,
                    replicas: None,
                },
            ],
            allow_rf_change: true,
        };
        assert_eq!(
            image.apply(&unknown),
            Outcome::Reassignments(vec![
                Reassigned::UnknownTopicOrPartition("Unable to find a topic named nope.".into()),
                Reassigned::UnknownTopicOrPartition("Unable to find partition t:7.".into()),
            ])
        );
        let same_rf = Command::AlterReassignments {
            reassignments: vec![Reassignment {
                topic: "t".into(),
                partition: 0,
                replicas: Some(vec![1, 2, 3]),
            }],
            allow_rf_change: false,
        };
        assert_eq!(
            image.apply(&same_rf),
            Outcome::Reassignments(vec![Reassigned::InvalidReplicationFactor(
                "The replication factor is changed from 2 to 3".into()
            )])
        );
        assert_eq!(image, before);
    }

    #[test]
    fn given_a_moving_partition_when_its_isr_shrinks_or_a_stale_leader_alters_then_no_completion() {
        let mut image = image_with(&[1, 2, 3], &[1, 2]);
        reassign(&mut image, Some(&[2, 3]));
        // 2 leaves the ISR: the target is not in sync, the move goes on.
        assert_eq!(alter_isr(&mut image, &[1]), Outcome::Done);
        assert!(image.partition("t", 0).unwrap().reassigning());
        // A new replica not among the partition's replicas cannot join.
        assert_eq!(alter_isr(&mut image, &[1, 4]), Outcome::Stale);
        assert_eq!(alter_isr(&mut image, &[1, 2, 3]), Outcome::Done);
        assert_eq!(state(&image).0, vec![2, 3]);
    }

    #[test]
    fn given_a_cancel_whose_isr_holds_only_added_replicas_then_refused_unless_unclean_allowed() {
        let mut image = image_with(&[1, 2, 3], &[1]);
        reassign(&mut image, Some(&[2]));
        {
            let p = image.partition_mut("t", 0).unwrap();
            p.isr = vec![2];
        }
        assert!(matches!(
            reassign(&mut image, None),
            Reassigned::InvalidReplicaAssignment(m) if m.contains("unclean leader election")
        ));
        image
            .topics
            .get_mut("t")
            .unwrap()
            .configs
            .insert(super::super::UNCLEAN_CONFIG.into(), "true".into());
        assert_eq!(reassign(&mut image, None), Reassigned::Done);
        let (replicas, isr, ..) = state(&image);
        assert_eq!((replicas, isr), (vec![1], vec![1]));
    }

    #[test]
    fn given_a_fenced_target_when_completing_then_a_live_one_leads() {
        let mut image = image_with(&[1, 2, 3], &[1, 2]);
        reassign(&mut image, Some(&[2, 3]));
        image.fenced.insert(2);
        alter_isr(&mut image, &[1, 2, 3]);
        let (replicas, _, _, _, leader, _) = state(&image);
        assert_eq!((replicas, leader), (vec![2, 3], 3));
    }
}
