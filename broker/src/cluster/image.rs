//! The metadata state machine: what the Raft log replicates (Kafka's KRaft records, in our own
//! shape). Pure: `apply` takes a command and the image and decides alone, so every node that
//! applies the same log reaches the same image. No I/O here; `store.rs` persists, and
//! `materialize.rs` turns applied commands into local catalog and partition changes.

use std::collections::BTreeMap;

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

/// One partition's placement. Until partition data is replicated, `replicas == [leader]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
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
}

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
    },
    DeleteTopic {
        name: String,
    },
    CreatePartitions {
        name: String,
        count: i32,
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
}

impl MetadataImage {
    pub fn apply(&mut self, cmd: &Command) -> Outcome {
        match cmd {
            Command::RegisterBroker { broker, cluster_id } => {
                self.cluster_id.get_or_insert_with(|| cluster_id.clone());
                self.brokers.insert(broker.id, broker.clone());
                Outcome::Done
            }
            Command::CreateTopic {
                name,
                id,
                partitions,
                configs,
                internal,
            } => {
                if self.topics.contains_key(name) {
                    return Outcome::TopicExists;
                }
                if self.brokers.is_empty() {
                    return Outcome::NoBrokers;
                }
                let placed = (0..*partitions).map(|p| self.place(name, p)).collect();
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
                let added: Vec<_> = (current..*count).map(|p| self.place(name, p)).collect();
                self.topics
                    .get_mut(name)
                    .expect("checked above")
                    .partitions
                    .extend(added);
                Outcome::Done
            }
        }
    }

    /// Round-robin over the registered brokers, starting at an offset from the topic name so
    /// that single-partition topics spread over the nodes too. crc32c: the same on every node
    /// and every build (std's hasher is not stable).
    fn place(&self, topic: &str, partition: i32) -> PartitionRecord {
        let ids: Vec<i32> = self.brokers.keys().copied().collect();
        let start = crc32c::crc32c(topic.as_bytes()) as usize;
        let leader = ids[(start + partition as usize) % ids.len()];
        PartitionRecord {
            leader,
            leader_epoch: 0,
            replicas: vec![leader],
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
