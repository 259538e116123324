//! The metadata state machine: what the Raft log replicates (Kafka's KRaft records, in our own
//! shape). Pure: `apply` takes a command and the image and decides alone, so every node that
//! applies the same log reaches the same image. No I/O here; `store.rs` persists, and
//! `materialize.rs` turns applied commands into local catalog and partition changes and
//! mirrors the other sections into the node's stores.
//!
//! Topics, placement and producer-id blocks are here, the brokers' listeners in `brokers.rs`;
//! the arms of the rest of what Kafka keeps in KRaft — ACLs, SCRAM credentials, client quotas,
//! dynamic configs, feature levels — are in `settings.rs`, and a single node's data dir
//! joining a cluster (`Command::Migrate`) in `migrate.rs`. The rules those arms apply are the ones a single node
//! applies to its files (`metadata::{acls, scram, quotas, features}`), written once.

mod brokers;
mod elect;
mod migrate;
mod racks;
mod reassign;
mod settings;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::metadata::features::{FeatureUpdate, Finalized};
use crate::metadata::group_configs::Overrides;
use crate::metadata::quotas::{self, QuotaAlteration, QuotaEntity, Quotas};
use crate::metadata::scram::{CredentialChange, Users};
use crate::security::acl::{AclBinding, AclFilter};
pub use elect::{Elected, ElectionType, UNCLEAN_CONFIG};
pub use reassign::{Reassigned, Reassignment};

pub use brokers::{BrokerNode, BrokerRecord, Endpoint};

/// One partition's placement: its replicas (the first is the preferred leader), the leader
/// (-1: none, every in-sync replica is fenced), the leader epoch and the in-sync replicas;
/// while it moves (`reassign.rs`), `replicas` is the target followed by the replicas being
/// removed, and `adding` / `removing` say which are which (Kafka's `PartitionRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    /// Empty in images written before replication: read as `[leader]` (`in_sync`).
    #[serde(default)]
    pub isr: Vec<i32>,
    /// Replicas a reassignment adds (not in sync yet, or the move would be over).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding: Vec<i32>,
    /// Replicas a reassignment removes once every target replica is in sync.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing: Vec<i32>,
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
/// Every field after `topics` is `serde(default)`: a snapshot written before it loads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// ACL bindings (Kafka's `AccessControlEntryRecord`s), in creation order.
    #[serde(default)]
    pub acls: Vec<AclBinding>,
    /// SCRAM credentials (`UserScramCredentialRecord`s): salts and keys, never a password.
    #[serde(default)]
    pub users: Users,
    /// Client quotas (`ClientQuotaRecord`s).
    #[serde(default, with = "quotas::as_pairs")]
    pub quotas: Quotas,
    /// Dynamic broker configs (`ConfigRecord`s of resource BROKER): `""` holds the
    /// cluster-wide defaults, `"<node id>"` one broker's own values. A broker applies the
    /// defaults and its own; every node holds them all, as Kafka's quorum does.
    #[serde(default)]
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// GROUP config overrides, by group id.
    #[serde(default)]
    pub group_configs: BTreeMap<String, Overrides>,
    /// CLIENT_METRICS subscriptions (KIP-714), by name.
    #[serde(default)]
    pub client_metrics: BTreeMap<String, Overrides>,
    /// Finalized feature levels (`FeatureLevelRecord`s); `None` until the first UpdateFeatures
    /// or migrated node sets them: until then each node keeps the levels its data dir has.
    #[serde(default)]
    pub features: Option<Finalized>,
}

/// A resource whose configs the image holds (the resource of Kafka's `ConfigRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigResource {
    /// A topic's overrides (kept in its `TopicRecord`).
    Topic(String),
    /// `None`: the cluster-wide dynamic defaults (resource `""`); else one broker's.
    Broker(Option<i32>),
    Group(String),
    ClientMetrics(String),
}

/// The parts of the image besides topics that a node mirrors into its own stores
/// (`materialize.rs`) when a command may have changed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Acls,
    Users,
    Quotas,
    BrokerConfigs,
    GroupConfigs,
    ClientMetrics,
    Features,
}

impl Section {
    pub const ALL: &'static [Section] = &[
        Section::Acls,
        Section::Users,
        Section::Quotas,
        Section::BrokerConfigs,
        Section::GroupConfigs,
        Section::ClientMetrics,
        Section::Features,
    ];
}

/// What a single node's data dir holds of the metadata, proposed into the image on the
/// node's first clustered start (`Command::Migrate`, `cluster/migrate.rs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Migration {
    /// The node whose data dir this is: it leads (and alone holds) the migrated partitions.
    pub node: i32,
    pub topics: BTreeMap<String, MigratedTopic>,
    pub acls: Vec<AclBinding>,
    pub users: Users,
    #[serde(with = "quotas::as_pairs")]
    pub quotas: Quotas,
    /// `""`: the cluster-wide defaults; `"<node>"`: this node's own values.
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    pub group_configs: BTreeMap<String, Overrides>,
    pub client_metrics: BTreeMap<String, Overrides>,
    pub features: Finalized,
    /// Above every producer id the single node handed out.
    pub next_producer_id: i64,
}

/// A single node's topic as it joins the image: same id, partition count and configs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigratedTopic {
    pub id: Uuid,
    pub partitions: i32,
    pub configs: BTreeMap<String, String>,
    pub internal: bool,
}

/// Producer ids per `AllocateProducerIds` block (Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`).
pub const PRODUCER_ID_BLOCK: i64 = 1000;

/// What a node proposes. The proposer picks what must not differ between nodes (topic ids);
/// `apply` decides the rest from the image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// proposer still leads at `leader_epoch` and the ISR is still `from` (what Kafka's
    /// partition epoch guards: the controller may have changed the ISR at the same leader
    /// epoch meanwhile, fencing a broker, and a change made on an older ISR would undo that).
    AlterIsr {
        topic: String,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
        isr: Vec<i32>,
        /// `None` in entries written before the check.
        #[serde(default)]
        from: Option<Vec<i32>>,
    },
    /// A broker takes the next block of producer ids (Kafka's AllocateProducerIds): blocks
    /// never overlap, so no two nodes hand out the same id.
    AllocateProducerIds {
        broker: i32,
    },
    /// CreateAcls: the bindings not there yet are added.
    CreateAcls {
        acls: Vec<AclBinding>,
    },
    /// DeleteAcls: every binding a filter matches goes (`Outcome::AclsDeleted`).
    DeleteAcls {
        filters: Vec<AclFilter>,
    },
    /// AlterUserScramCredentials' upserts and deletions, applied together.
    AlterCredentials {
        changes: Vec<CredentialChange>,
    },
    /// AlterClientQuotas' valid entities, applied together.
    AlterQuotas {
        changes: Vec<(QuotaEntity, QuotaAlteration)>,
    },
    /// AlterConfigs / IncrementalAlterConfigs: the resource's whole new config set (the
    /// proposer resolved SET/DELETE/APPEND/SUBTRACT and validated it); empty removes it.
    SetConfigs {
        resource: ConfigResource,
        configs: BTreeMap<String, String>,
    },
    /// UpdateFeatures, decided here against the image's levels (Kafka's
    /// `FeatureControlManager`), or against the proposer's `local` ones while the image has
    /// none; `node` names the deciding controller in a refusal.
    UpdateFeatures {
        updates: Vec<FeatureUpdate>,
        node: i32,
        local: Finalized,
    },
    /// A single node's data dir joins the cluster (`migrate.rs`).
    Migrate(Box<Migration>),
    /// ElectLeaders (`kafka-leader-election.sh`) and the controller's preferred-leader
    /// rebalance (`elect.rs`).
    ElectLeaders {
        election: ElectionType,
        partitions: Vec<(String, i32)>,
    },
    /// AlterPartitionReassignments (`kafka-reassign-partitions`, `reassign.rs`): start,
    /// change or cancel (`replicas: None`) each partition's move.
    AlterReassignments {
        reassignments: Vec<Reassignment>,
        /// v1's `allow_replication_factor_change` (KIP-860); true before v1.
        allow_rf_change: bool,
    },
}

impl Command {
    /// The topics an applied command may have changed (the node follows each).
    pub fn topics(&self) -> Vec<String> {
        match self {
            Command::CreateTopic { name, .. }
            | Command::DeleteTopic { name }
            | Command::CreatePartitions { name, .. }
            | Command::SetConfigs {
                resource: ConfigResource::Topic(name),
                ..
            } => vec![name.clone()],
            Command::Migrate(m) => m.topics.keys().cloned().collect(),
            // The replicas may change (an ISR change completes a move): each node opens the
            // logs of the replicas it gains and deletes those of the ones it loses.
            Command::AlterIsr { topic, .. } => vec![topic.clone()],
            Command::AlterReassignments { reassignments, .. } => {
                let topics: BTreeSet<&String> = reassignments.iter().map(|r| &r.topic).collect();
                topics.into_iter().cloned().collect()
            }
            _ => Vec::new(),
        }
    }

    /// The other sections an applied command may have changed (the node mirrors each).
    pub fn sections(&self) -> &'static [Section] {
        match self {
            Command::CreateAcls { .. } | Command::DeleteAcls { .. } => &[Section::Acls],
            Command::AlterCredentials { .. } => &[Section::Users],
            Command::AlterQuotas { .. } => &[Section::Quotas],
            Command::SetConfigs { resource, .. } => match resource {
                ConfigResource::Topic(_) => &[],
                ConfigResource::Broker(_) => &[Section::BrokerConfigs],
                ConfigResource::Group(_) => &[Section::GroupConfigs],
                ConfigResource::ClientMetrics(_) => &[Section::ClientMetrics],
            },
            Command::UpdateFeatures { .. } => &[Section::Features],
            Command::Migrate(_) => Section::ALL,
            _ => &[],
        }
    }
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
    /// Per DeleteAcls filter, the bindings it removed.
    AclsDeleted(Vec<Vec<AclBinding>>),
    /// Refused with Kafka's message (UpdateFeatures: INVALID_UPDATE_VERSION).
    Refused(String),
    /// The single node's metadata is in the image; `kept` names what the image already held
    /// with another value and kept (the cluster's wins).
    Migrated {
        kept: Vec<String>,
    },
    /// Nothing migrated: the image holds a topic the node's data dir contradicts.
    MigrationConflict(String),
    /// Per partition of an ElectLeaders, in the order asked.
    Elections(Vec<Elected>),
    /// Per partition of an AlterPartitionReassignments, in the order asked.
    Reassignments(Vec<Reassigned>),
}

impl MetadataImage {
    pub fn apply(&mut self, cmd: &Command) -> Outcome {
        let outcome = self.apply_command(cmd);
        // A partition may have lost its last in-sync leader, or a topic may now allow an
        // out-of-sync one (Kafka elects uncleanly on those same events).
        let may_elect = matches!(
            cmd,
            Command::FenceBroker { .. }
                | Command::UnfenceBroker { .. }
                | Command::ControlledShutdown { .. }
                | Command::SetConfigs {
                    resource: ConfigResource::Topic(_) | ConfigResource::Broker(None),
                    ..
                }
        );
        if may_elect {
            for (topic, partition, leader) in self.elect_unclean_where_allowed() {
                tracing::warn!(
                    topic,
                    partition,
                    leader,
                    "unclean leader election (unclean.leader.election.enable): records only the lost in-sync replicas had are gone"
                );
            }
        }
        outcome
    }

    fn apply_command(&mut self, cmd: &Command) -> Outcome {
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
                // Where partition 0 is headed, if it is moving.
                let rf = self.topics[name].partitions[0].target_replicas().len() as i32;
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
                from,
            } => {
                let Some(p) = self
                    .topics
                    .get_mut(topic)
                    .and_then(|t| t.partitions.get_mut(usize::try_from(*partition).ok()?))
                else {
                    return Outcome::UnknownTopic;
                };
                let valid = isr.contains(leader) && isr.iter().all(|r| p.replicas.contains(r));
                let moved = from.as_ref().is_some_and(|f| *f != p.isr);
                if p.leader != *leader || p.leader_epoch != *leader_epoch || !valid || moved {
                    return Outcome::Stale;
                }
                p.isr = isr.clone();
                self.complete_reassignment(topic, *partition);
                Outcome::Done
            }
            Command::CreateAcls { acls } => self.create_acls(acls),
            Command::DeleteAcls { filters } => self.delete_acls(filters),
            Command::AlterCredentials { changes } => self.alter_credentials(changes),
            Command::AlterQuotas { changes } => self.alter_quotas(changes),
            Command::SetConfigs { resource, configs } => self.set_configs(resource, configs),
            Command::UpdateFeatures {
                updates,
                node,
                local,
            } => self.update_features(updates, *node, local),
            Command::Migrate(m) => self.migrate(m),
            Command::ElectLeaders {
                election,
                partitions,
            } => Outcome::Elections(self.elect_leaders(*election, partitions)),
            Command::AlterReassignments {
                reassignments,
                allow_rf_change,
            } => Outcome::Reassignments(self.alter_reassignments(reassignments, *allow_rf_change)),
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
    /// (std's hasher is not stable). When any broker has a rack, Kafka's rack-aware
    /// assignment instead (`racks.rs`): a partition's replicas in as many racks as there are.
    fn place(&self, topic: &str, partition: i32, rf: i32) -> PartitionRecord {
        let ids: Vec<i32> = if rf > 1 {
            self.live_brokers()
        } else {
            self.brokers.keys().copied().collect()
        };
        let topic_start = crc32c::crc32c(topic.as_bytes()) as usize;
        let racked: Vec<(i32, Option<&str>)> = ids
            .iter()
            .map(|id| (*id, self.brokers[id].rack.as_deref()))
            .collect();
        let replicas: Vec<i32> = if racked.iter().any(|(_, rack)| rack.is_some()) {
            racks::replicas(&racked, topic_start, partition, rf as usize)
        } else {
            let start = topic_start + partition as usize;
            (0..rf as usize)
                .map(|i| ids[(start + i) % ids.len()])
                .collect()
        };
        PartitionRecord {
            leader: replicas[0],
            leader_epoch: 0,
            isr: replicas.clone(),
            replicas,
            adding: Vec::new(),
            removing: Vec::new(),
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
/// partition can come back with it), and if it led, the first unfenced ISR member in
/// assignment order leads at a new epoch (none: no leader until one returns). Assignment
/// order, as Kafka's `PartitionLeaderElectionAlgorithms`, not ISR order: a replica that
/// rejoined is appended to the ISR, so ISR order drifts with every restart and would pile
/// the leaders of all partitions onto whichever node stayed up longest.
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
            .replicas
            .iter()
            .copied()
            .find(|r| p.isr.contains(r) && !fenced.contains(r))
            .unwrap_or(-1);
        p.leader_epoch += 1;
    }
}

#[cfg(test)]
mod tests;
