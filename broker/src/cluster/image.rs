//! The metadata state machine: what the Raft log replicates (Kafka's KRaft records, in our own
//! shape). Pure: `apply` takes a command and the image and decides alone, so every node that
//! applies the same log reaches the same image. No I/O here; `store.rs` persists, and
//! `materialize.rs` turns applied commands into local catalog and partition changes.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A broker as clients see it (Metadata's broker list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRecord {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// One partition's placement: its replicas (the first is the preferred leader), the leader
/// (-1: none, every in-sync replica is fenced), the leader epoch and the in-sync replicas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    /// Empty in images written before replication: read as `[leader]` (`in_sync`).
    #[serde(default)]
    pub isr: Vec<i32>,
}

impl PartitionRecord {
    /// The in-sync replicas.
    pub fn in_sync(&self) -> Vec<i32> {
        if self.isr.is_empty() {
            vec![self.leader]
        } else {
            self.isr.clone()
        }
    }

    /// Replicated: more than one replica, so followers fetch and the ISR decides acks.
    pub fn replicated(&self) -> bool {
        self.replicas.len() > 1
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    pub id: Uuid,
    pub configs: BTreeMap<String, String>,
    pub internal: bool,
    pub partitions: Vec<PartitionRecord>,
}

/// The replicated metadata. `BTreeMap`s so that a snapshot serialises the same on every node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataImage {
    /// Set by the first broker that registers; every node reports this one.
    pub cluster_id: Option<String>,
    pub brokers: BTreeMap<i32, BrokerRecord>,
    pub topics: BTreeMap<String, TopicRecord>,
    /// Brokers the controller found gone (no heartbeat within the session timeout).
    #[serde(default)]
    pub fenced: BTreeSet<i32>,
    /// The first producer id not yet handed out in a block (Kafka's controller
    /// `ProducerIdsRecord.nextProducerId`).
    #[serde(default)]
    pub next_producer_id: i64,
    /// Brokers in controlled shutdown (Kafka's `BrokerRegistration.inControlledShutdown`):
    /// fenced, and not unfenced by their heartbeats until they register again (restart).
    #[serde(default)]
    pub shutting_down: BTreeSet<i32>,
}

/// Producer ids per `AllocateProducerIds` block (Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`).
pub const PRODUCER_ID_BLOCK: i64 = 1000;

/// What a node proposes. The proposer picks what must not differ between nodes (topic ids);
/// `apply` decides the rest from the image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    RegisterBroker {
        broker: BrokerRecord,
        cluster_id: String,
    },
    CreateTopic {
        name: String,
        id: Uuid,
        partitions: i32,
        configs: BTreeMap<String, String>,
        internal: bool,
        /// 0 in entries written before replication: one replica.
        #[serde(default)]
        replication_factor: i32,
    },
    DeleteTopic {
        name: String,
    },
    CreatePartitions {
        name: String,
        count: i32,
    },
    /// The controller lost (or regained) a broker's heartbeats.
    FenceBroker {
        id: i32,
    },
    UnfenceBroker {
        id: i32,
    },
    /// A broker stopping cleanly asks to lead nothing and leave every ISR first (Kafka's
    /// controlled shutdown), so its clients move to the new leaders before it goes.
    ControlledShutdown {
        id: i32,
    },
    /// A leader changes its partition's ISR (Kafka's AlterPartition); refused unless the
    /// proposer still leads at `leader_epoch`.
    AlterIsr {
        topic: String,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
        isr: Vec<i32>,
    },
    /// A broker takes the next block of producer ids (Kafka's AllocateProducerIds): blocks
    /// never overlap, so no two nodes hand out the same id.
    AllocateProducerIds {
        broker: i32,
    },
}

/// The outcome of one applied command, returned to its proposer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Done,
    TopicExists,
    UnknownTopic,
    /// The partition count would not grow.
    InvalidPartitions,
    /// No broker registered yet to lead partitions.
    NoBrokers,
    /// The replication factor exceeds the unfenced brokers (their count).
    InvalidReplicationFactor(i32),
    /// An ISR change from a leader that no longer leads at that epoch.
    Stale,
    /// A command about a broker that never registered.
    UnknownBroker,
    /// The producer id block `[start, start + len)` for the proposing broker.
    ProducerIds {
        start: i64,
        len: i64,
    },
}

impl MetadataImage {
    pub fn apply(&mut self, cmd: &Command) -> Outcome {
        match cmd {
            Command::RegisterBroker { broker, cluster_id } => {
                self.cluster_id.get_or_insert_with(|| cluster_id.clone());
                self.brokers.insert(broker.id, broker.clone());
                // A new life of the broker: its heartbeats may unfence it again.
                self.shutting_down.remove(&broker.id);
                Outcome::Done
            }
            Command::CreateTopic {
                name,
                id,
                partitions,
                configs,
                internal,
                replication_factor,
            } => {
                if self.topics.contains_key(name) {
                    return Outcome::TopicExists;
                }
                if self.brokers.is_empty() {
                    return Outcome::NoBrokers;
                }
                let rf = (*replication_factor).max(1);
                let live = self.live_brokers().len() as i32;
                if rf > 1 && rf > live {
                    return Outcome::InvalidReplicationFactor(live);
                }
                let placed = (0..*partitions).map(|p| self.place(name, p, rf)).collect();
                self.topics.insert(
                    name.clone(),
                    TopicRecord {
                        id: *id,
                        configs: configs.clone(),
                        internal: *internal,
                        partitions: placed,
                    },
                );
                Outcome::Done
            }
            Command::AllocateProducerIds { .. } => {
                let start = self.next_producer_id;
                self.next_producer_id = start.saturating_add(PRODUCER_ID_BLOCK);
                Outcome::ProducerIds {
                    start,
                    len: PRODUCER_ID_BLOCK,
                }
            }
            Command::DeleteTopic { name } => match self.topics.remove(name) {
                Some(_) => Outcome::Done,
                None => Outcome::UnknownTopic,
            },
            Command::CreatePartitions { name, count } => {
                let Some(current) = self.topics.get(name).map(|t| t.partitions.len() as i32) else {
                    return Outcome::UnknownTopic;
                };
                if *count <= current {
                    return Outcome::InvalidPartitions;
                }
                let rf = self.topics[name].partitions[0].replicas.len() as i32;
                let added: Vec<_> = (current..*count).map(|p| self.place(name, p, rf)).collect();
                self.topics
                    .get_mut(name)
                    .expect("checked above")
                    .partitions
                    .extend(added);
                Outcome::Done
            }
            Command::ControlledShutdown { id } => {
                if !self.brokers.contains_key(id) {
                    return Outcome::UnknownBroker;
                }
                self.shutting_down.insert(*id);
                self.fence(*id)
            }
            Command::FenceBroker { id } => self.fence(*id),
            Command::UnfenceBroker { id } if self.shutting_down.contains(id) => Outcome::Done,
            Command::UnfenceBroker { id } => {
                self.fenced.remove(id);
                for p in self.replicated_partitions_mut() {
                    if p.leader == -1 && p.in_sync().contains(id) {
                        p.leader = *id;
                        p.leader_epoch += 1;
                    }
                }
                Outcome::Done
            }
            Command::AlterIsr {
                topic,
                partition,
                leader,
                leader_epoch,
                isr,
            } => {
                let Some(p) = self
                    .topics
                    .get_mut(topic)
                    .and_then(|t| t.partitions.get_mut(usize::try_from(*partition).ok()?))
                else {
                    return Outcome::UnknownTopic;
                };
                let valid = isr.contains(leader) && isr.iter().all(|r| p.replicas.contains(r));
                if p.leader != *leader || p.leader_epoch != *leader_epoch || !valid {
                    return Outcome::Stale;
                }
                p.isr = isr.clone();
                Outcome::Done
            }
        }
    }

    /// Broker `id` is out (gone, or stopping): it leaves every ISR it can leave and every
    /// partition it led gets a new leader (`fence_in`).
    fn fence(&mut self, id: i32) -> Outcome {
        self.fenced.insert(id);
        let fenced = self.fenced.clone();
        for p in self.replicated_partitions_mut() {
            fence_in(p, id, &fenced);
        }
        Outcome::Done
    }

    /// Whether `id` leads a replicated partition that another in-sync replica could lead:
    /// a broker in controlled shutdown waits until it leads none.
    pub fn leads_movable(&self, id: i32) -> bool {
        self.topics.values().flat_map(|t| &t.partitions).any(|p| {
            p.leader == id
                && p.replicated()
                && p.in_sync()
                    .iter()
                    .any(|r| *r != id && !self.fenced.contains(r))
        })
    }

    fn replicated_partitions_mut(&mut self) -> impl Iterator<Item = &mut PartitionRecord> {
        self.topics
            .values_mut()
            .flat_map(|t| t.partitions.iter_mut())
            .filter(|p| p.replicated())
    }

    /// Registered brokers the controller has not fenced.
    pub fn live_brokers(&self) -> Vec<i32> {
        self.brokers
            .keys()
            .copied()
            .filter(|b| !self.fenced.contains(b))
            .collect()
    }

    /// Round-robin over the registered brokers, starting at an offset from the topic name so
    /// that single-partition topics spread over the nodes too; the `rf` replicas are the
    /// leader and the live brokers after it. crc32c: the same on every node and every build
    /// (std's hasher is not stable).
    fn place(&self, topic: &str, partition: i32, rf: i32) -> PartitionRecord {
        let ids: Vec<i32> = if rf > 1 {
            self.live_brokers()
        } else {
            self.brokers.keys().copied().collect()
        };
        let start = crc32c::crc32c(topic.as_bytes()) as usize + partition as usize;
        let replicas: Vec<i32> = (0..rf as usize)
            .map(|i| ids[(start + i) % ids.len()])
            .collect();
        PartitionRecord {
            leader: replicas[0],
            leader_epoch: 0,
            isr: replicas.clone(),
            replicas,
        }
    }

    /// The partition's placement, if the topic and partition exist.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionRecord> {
        self.topics
            .get(topic)?
            .partitions
            .get(usize::try_from(partition).ok()?)
    }
}

/// Broker `id` is gone: out of the ISR (but for the last member, which Kafka keeps so the
/// partition can come back with it), and if it led, the next unfenced ISR member leads at a
/// new epoch (none: no leader until one returns).
fn fence_in(p: &mut PartitionRecord, id: i32, fenced: &BTreeSet<i32>) {
    let mut isr = p.in_sync();
    if !isr.contains(&id) && p.leader != id {
        return;
    }
    if isr.len() > 1 {
        isr.retain(|r| *r != id);
    }
    p.isr = isr;
    if p.leader == id {
        p.leader = p
            .isr
            .iter()
            .copied()
            .find(|r| !fenced.contains(r))
            .unwrap_or(-1);
        p.leader_epoch += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(image: &mut MetadataImage, id: i32) {
        let broker = BrokerRecord {
            id,
            host: "127.0.0.1".into(),
            port: 9000 + id,
            rack: None,
        };
        let cluster_id = format!("c{id}");
        assert_eq!(
            image.apply(&Command::RegisterBroker { broker, cluster_id }),
            Outcome::Done
        );
    }

    fn create(name: &str, partitions: i32) -> Command {
        Command::CreateTopic {
            name: name.into(),
            id: Uuid::new_v4(),
            partitions,
            configs: BTreeMap::new(),
            internal: false,
            replication_factor: 1,
        }
    }

    #[test]
    fn given_three_brokers_when_creating_topic_then_leaders_spread_over_all() {
        let mut image = MetadataImage::default();
        for id in 1..=3 {
            register(&mut image, id);
        }
        assert_eq!(image.cluster_id.as_deref(), Some("c1"), "first one wins");
        assert_eq!(image.apply(&create("t", 6)), Outcome::Done);
        let leaders: Vec<i32> = image.topics["t"]
            .partitions
            .iter()
            .map(|p| p.leader)
            .collect();
        for id in 1..=3 {
            assert_eq!(
                leaders.iter().filter(|l| **l == id).count(),
                2,
                "{leaders:?}"
            );
        }
        assert!(image.topics["t"]
            .partitions
            .iter()
            .all(|p| p.replicas == vec![p.leader] && p.leader_epoch == 0));
    }

    #[test]
    fn given_two_brokers_when_allocating_producer_ids_then_blocks_never_overlap() {
        let mut image = MetadataImage::default();
        let mut blocks = Vec::new();
        for broker in [1, 2, 1, 3, 2] {
            match image.apply(&Command::AllocateProducerIds { broker }) {
                Outcome::ProducerIds { start, len } => blocks.push((start, start + len)),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(blocks[0], (0, PRODUCER_ID_BLOCK));
        for (i, a) in blocks.iter().enumerate() {
            for b in &blocks[i + 1..] {
                assert!(a.1 <= b.0 || b.1 <= a.0, "{a:?} overlaps {b:?}");
            }
        }
        // A restarted node replays the same entries to the same state: the next block is new.
        let replayed =
            serde_json::from_str::<MetadataImage>(&serde_json::to_string(&image).unwrap()).unwrap();
        assert_eq!(replayed.next_producer_id, 5 * PRODUCER_ID_BLOCK);
    }

    #[test]
    fn given_existing_topic_when_creating_again_then_exists_and_unchanged() {
        let mut image = MetadataImage::default();
        register(&mut image, 1);
        assert_eq!(image.apply(&create("t", 1)), Outcome::Done);
        let before = image.clone();
        assert_eq!(image.apply(&create("t", 3)), Outcome::TopicExists);
        assert_eq!(image, before);
    }

    #[test]
    fn given_no_broker_when_creating_topic_then_no_brokers() {
        let mut image = MetadataImage::default();
        assert_eq!(image.apply(&create("t", 1)), Outcome::NoBrokers);
        assert!(image.topics.is_empty());
    }

    #[test]
    fn given_topic_when_adding_partitions_then_grows_and_refuses_shrink() {
        let mut image = MetadataImage::default();
        register(&mut image, 1);
        register(&mut image, 2);
        image.apply(&create("t", 1));
        let grow = |count| Command::CreatePartitions {
            name: "t".into(),
            count,
        };
        assert_eq!(image.apply(&grow(3)), Outcome::Done);
        assert_eq!(image.topics["t"].partitions.len(), 3);
        assert_eq!(image.apply(&grow(3)), Outcome::InvalidPartitions);
        assert_eq!(
            image.apply(&Command::CreatePartitions {
                name: "u".into(),
                count: 2
            }),
            Outcome::UnknownTopic
        );
        let delete = Command::DeleteTopic { name: "t".into() };
        assert_eq!(image.apply(&delete), Outcome::Done);
        assert_eq!(image.apply(&delete), Outcome::UnknownTopic);
    }

    fn create_rf(name: &str, partitions: i32, rf: i32) -> Command {
        match create(name, partitions) {
            Command::CreateTopic {
                name,
                id,
                partitions,
                configs,
                internal,
                ..
            } => Command::CreateTopic {
                name,
                id,
                partitions,
                configs,
                internal,
                replication_factor: rf,
            },
            _ => unreachable!(),
        }
    }

    #[test]
    fn given_three_brokers_when_creating_rf3_then_every_broker_replicates_and_leaders_spread() {
        let mut image = MetadataImage::default();
        for id in 1..=3 {
            register(&mut image, id);
        }
        assert_eq!(image.apply(&create_rf("r", 3, 3)), Outcome::Done);
        let parts = &image.topics["r"].partitions;
        let leaders: BTreeSet<i32> = parts.iter().map(|p| p.leader).collect();
        assert_eq!(leaders, BTreeSet::from([1, 2, 3]));
        for p in parts {
            let mut replicas = p.replicas.clone();
            replicas.sort_unstable();
            assert_eq!(replicas, vec![1, 2, 3]);
            assert_eq!(p.replicas[0], p.leader, "the preferred leader leads");
            assert_eq!(p.isr, p.replicas);
        }
        assert_eq!(
            image.apply(&create_rf("big", 1, 4)),
            Outcome::InvalidReplicationFactor(3)
        );
        assert!(!image.topics.contains_key("big"));
    }

    #[test]
    fn given_fenced_broker_when_creating_rf3_then_refused_as_too_few_live_brokers() {
        let mut image = MetadataImage::default();
        for id in 1..=3 {
            register(&mut image, id);
        }
        image.apply(&Command::FenceBroker { id: 2 });
        assert_eq!(
            image.apply(&create_rf("r", 1, 3)),
            Outcome::InvalidReplicationFactor(2)
        );
        assert_eq!(image.apply(&create_rf("r", 1, 2)), Outcome::Done);
        assert!(!image.topics["r"].partitions[0].replicas.contains(&2));
    }

    #[test]
    fn given_leader_fenced_when_isr_has_others_then_next_leads_at_new_epoch_and_rejoins_by_alter_isr(
    ) {
        let mut image = MetadataImage::default();
        for id in 1..=3 {
            register(&mut image, id);
        }
        image.apply(&create_rf("r", 1, 3));
        let before = image.topics["r"].partitions[0].clone();
        let old = before.leader;
        image.apply(&Command::FenceBroker { id: old });
        let p = image.topics["r"].partitions[0].clone();
        assert_ne!(p.leader, old);
        assert!(before.isr.contains(&p.leader));
        assert_eq!(p.leader_epoch, before.leader_epoch + 1);
        assert_eq!(p.isr.len(), 2);
        assert!(!p.isr.contains(&old));
        // Back: unfenced, but only the leader's AlterIsr puts it into the ISR again.
        image.apply(&Command::UnfenceBroker { id: old });
        assert_eq!(image.topics["r"].partitions[0], p);
        let mut grown = before.isr.clone();
        grown.sort_unstable();
        let alter = |leader, leader_epoch| Command::AlterIsr {
            topic: "r".into(),
            partition: 0,
            leader,
            leader_epoch,
            isr: grown.clone(),
        };
        assert_eq!(
            image.apply(&alter(p.leader, p.leader_epoch - 1)),
            Outcome::Stale
        );
        assert_eq!(image.apply(&alter(old, p.leader_epoch)), Outcome::Stale);
        assert_eq!(image.apply(&alter(p.leader, p.leader_epoch)), Outcome::Done);
        assert_eq!(image.topics["r"].partitions[0].isr, grown);
    }

    #[test]
    fn given_all_isr_fenced_then_no_leader_and_last_member_returns_as_leader() {
        let mut image = MetadataImage::default();
        for id in 1..=3 {
            register(&mut image, id);
        }
        image.apply(&create_rf("r", 1, 3));
        let first = image.topics["r"].partitions[0].leader;
        let order: Vec<i32> = {
            let mut v = vec![first];
            v.extend(
                image.topics["r"].partitions[0]
                    .isr
                    .iter()
                    .filter(|b| **b != first),
            );
            v
        };
        image.apply(&Command::FenceBroker { id: order[0] });
        let second = image.topics["r"].partitions[0].leader;
        image.apply(&Command::FenceBroker { id: second });
        let last = image.topics["r"].partitions[0].leader;
        image.apply(&Command::FenceBroker { id: last });
        let p = image.topics["r"].partitions[0].clone();
        assert_eq!(p.leader, -1);
        assert_eq!(p.isr, vec![last], "Kafka keeps the last ISR member");
        // A broker outside the ISR coming back does not lead (it may miss records).
        image.apply(&Command::UnfenceBroker { id: order[0] });
        assert_eq!(image.topics["r"].partitions[0].leader, -1);
        image.apply(&Command::UnfenceBroker { id: last });
        let p = image.topics["r"].partitions[0].clone();
        assert_eq!(p.leader, last);
        assert_eq!(p.leader_epoch, 4);
    }

    #[test]
    fn given_leader_in_controlled_shutdown_then_leads_nothing_until_it_registers_again() {
        let mut image = MetadataImage::default();
        for id in 1..=3 {
            register(&mut image, id);
        }
        image.apply(&create_rf("r", 3, 3));
        let before = image.topics["r"].clone();
        let me = before.partitions[0].leader;
        assert!(image.leads_movable(me));
        assert_eq!(
            image.apply(&Command::ControlledShutdown { id: me }),
            Outcome::Done
        );
        assert!(!image.leads_movable(me));
        for (old, new) in before.partitions.iter().zip(&image.topics["r"].partitions) {
            assert_ne!(new.leader, me);
            assert!(!new.isr.contains(&me), "{new:?}");
            let moved = old.leader == me;
            assert_eq!(new.leader_epoch, old.leader_epoch + i32::from(moved));
        }
        assert!(!image.live_brokers().contains(&me));
        // Its heartbeats until it stops do not bring it back...
        let stopping = image.clone();
        image.apply(&Command::UnfenceBroker { id: me });
        assert_eq!(image, stopping);
        // ...its next life does.
        register(&mut image, me);
        image.apply(&Command::UnfenceBroker { id: me });
        assert!(image.live_brokers().contains(&me));
        assert_eq!(
            image.apply(&Command::ControlledShutdown { id: 9 }),
            Outcome::UnknownBroker
        );
    }

    #[test]
    fn given_sole_isr_member_in_controlled_shutdown_then_partition_waits_for_it() {
        let mut image = MetadataImage::default();
        for id in 1..=2 {
            register(&mut image, id);
        }
        image.apply(&create_rf("r", 1, 2));
        let p = image.topics["r"].partitions[0].clone();
        let other = p.replicas[1];
        image.apply(&Command::FenceBroker { id: other });
        image.apply(&Command::ControlledShutdown { id: p.leader });
        let now = &image.topics["r"].partitions[0];
        assert_eq!(now.leader, -1, "no in-sync replica to take over");
        assert_eq!(now.isr, vec![p.leader]);
        assert!(!image.leads_movable(p.leader));
    }

    #[test]
    fn given_records_from_before_replication_when_read_then_one_replica_in_sync() {
        let p: PartitionRecord =
            serde_json::from_str(r#"{"leader":2,"leader_epoch":0,"replicas":[2]}"#).unwrap();
        assert_eq!(p.in_sync(), vec![2]);
        assert!(!p.replicated());
        let c: Command = serde_json::from_str(
            r#"{"CreateTopic":{"name":"t","id":"00000000-0000-0000-0000-000000000001","partitions":1,"configs":{},"internal":false}}"#,
        )
        .unwrap();
        let mut image = MetadataImage::default();
        register(&mut image, 1);
        register(&mut image, 2);
        assert_eq!(image.apply(&c), Outcome::Done);
        assert_eq!(image.topics["t"].partitions[0].replicas.len(), 1);
    }

    #[test]
    fn given_rf1_partition_when_its_broker_is_fenced_then_unchanged() {
        let mut image = MetadataImage::default();
        register(&mut image, 1);
        register(&mut image, 2);
        image.apply(&create("t", 2));
        let before = image.topics["t"].clone();
        image.apply(&Command::FenceBroker { id: 1 });
        assert_eq!(image.topics["t"], before);
    }

    #[test]
    fn given_same_commands_when_applied_on_two_images_then_identical() {
        let cmds = vec![
            Command::RegisterBroker {
                broker: BrokerRecord {
                    id: 2,
                    host: "h".into(),
                    port: 1,
                    rack: None,
                },
                cluster_id: "x".into(),
            },
            create("a", 4),
            create("b", 2),
            Command::DeleteTopic { name: "a".into() },
        ];
        let (mut x, mut y) = (MetadataImage::default(), MetadataImage::default());
        for c in &cmds {
            assert_eq!(x.apply(c), y.apply(c));
        }
        assert_eq!(
            serde_json::to_vec(&x).unwrap(),
            serde_json::to_vec(&y).unwrap()
        );
    }
}
