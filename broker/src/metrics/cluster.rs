//! Replication and metadata-quorum families of a scrape (docs/operations.md "Cluster
//! metrics"), after Kafka's: a partition's health is reported by its leader
//! (`kafka.cluster:type=Partition` and `ReplicaManager`'s totals), offline partitions by the
//! active controller (`KafkaController.OfflinePartitionsCount`: a partition without a live
//! leader has no leader to report it), and the metadata Raft by every node
//! (`raft-metrics`). Pure over the image, the shards' partition snapshots and a `RaftView`,
//! so it is tested without a cluster.

use std::collections::BTreeMap;

use super::families::{labels, Families};
use super::snapshot::PartitionSnapshot;
use crate::cluster::image::MetadataImage;
use crate::cluster::raft_stats::RaftView;

/// What the scrape knows of this node's place in the cluster; `None` on a single node.
pub struct ClusterState<'a> {
    pub image: &'a MetadataImage,
    pub raft: RaftView,
}

/// Replication figures of one partition this node leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Health {
    replicas: usize,
    in_sync: usize,
    min_isr: i32,
}

impl Health {
    fn under_replicated(&self) -> bool {
        self.in_sync < self.replicas
    }
    fn under_min_isr(&self) -> bool {
        (self.in_sync as i64) < self.min_isr as i64
    }
    /// Kafka's `AtMinIsr`: one more replica lost and acks=all stops.
    fn at_min_isr(&self) -> bool {
        self.in_sync as i64 == self.min_isr as i64 && self.min_isr > 1
    }
}

/// The partition's health when this node leads it: every partition on a single node (an
/// ISR of one), on a cluster those the image gives this node.
fn led_here(cluster: Option<&ClusterState>, p: &PartitionSnapshot, me: i32) -> Option<Health> {
    let Some(c) = cluster else {
        return Some(Health {
            replicas: 1,
            in_sync: 1,
            min_isr: p.min_isr,
        });
    };
    let record = c.image.partition(&p.topic, p.partition)?;
    (record.leader == me).then(|| Health {
        replicas: record.replicas.len(),
        in_sync: record.in_sync().len(),
        min_isr: p.min_isr,
    })
}

/// Partitions without a live leader, as the active controller sees them: no leader, or a
/// leader the controller fenced or that never registered (a replication factor 1
/// partition keeps its fenced leader in the image).
fn offline(image: &MetadataImage) -> Vec<(&str, i32)> {
    image
        .topics
        .iter()
        .flat_map(|(name, t)| {
            t.partitions
                .iter()
                .enumerate()
                .filter(|(_, p)| {
                    p.leader < 0
                        || !image.brokers.contains_key(&p.leader)
                        || image.fenced.contains(&p.leader)
                })
                .map(move |(i, _)| (name.as_str(), i as i32))
        })
        .collect()
}

pub(super) fn families(
    f: &mut Families,
    me: i32,
    cluster: Option<&ClusterState>,
    partitions: &[&PartitionSnapshot],
) {
    let mut totals = BTreeMap::from([
        ("strom_leader_partitions", 0usize),
        ("strom_under_replicated_partitions", 0),
        ("strom_under_min_isr_partitions", 0),
        ("strom_at_min_isr_partitions", 0),
    ]);
    for p in partitions {
        let Some(h) = led_here(cluster, p, me) else {
            continue;
        };
        let ps = p.partition.to_string();
        let pl = || labels(&[("topic", &p.topic), ("partition", &ps)]);
        *totals.entry("strom_leader_partitions").or_default() += 1;
        *totals
            .entry("strom_under_replicated_partitions")
            .or_default() += h.under_replicated() as usize;
        *totals.entry("strom_under_min_isr_partitions").or_default() += h.under_min_isr() as usize;
        *totals.entry("strom_at_min_isr_partitions").or_default() += h.at_min_isr() as usize;
        f.gauge(
            "strom_partition_replicas",
            "Replicas of a partition this node leads (Kafka's ReplicasCount).",
            pl(),
            h.replicas as f64,
        );
        f.gauge(
            "strom_partition_in_sync_replicas",
            "In-sync replicas of a partition this node leads (Kafka's InSyncReplicasCount).",
            pl(),
            h.in_sync as f64,
        );
        f.gauge(
            "strom_partition_under_replicated",
            "1 when a partition this node leads has fewer in-sync replicas than replicas (Kafka's UnderReplicated).",
            pl(),
            h.under_replicated() as u8 as f64,
        );
        f.gauge(
            "strom_partition_under_min_isr",
            "1 when a partition this node leads has fewer in-sync replicas than min.insync.replicas: acks=all is refused (Kafka's UnderMinIsr).",
            pl(),
            h.under_min_isr() as u8 as f64,
        );
        for lag in &p.followers {
            let r = lag.replica.to_string();
            let rl = || labels(&[("topic", &p.topic), ("partition", &ps), ("replica", &r)]);
            if let Some(offsets) = lag.lag {
                f.gauge(
                    "strom_partition_replica_lag_offsets",
                    "Offsets a follower lacks of the leader's log, as of its last fetch from this leader (absent before its first).",
                    rl(),
                    offsets as f64,
                );
            }
            if let Some(ago) = lag.caught_up_ago {
                f.gauge(
                    "strom_partition_replica_caught_up_age_seconds",
                    "Seconds since a follower last had everything this leader had (Kafka's lastCaughtUpTimeMs; above replica lag max it leaves the ISR).",
                    rl(),
                    ago.as_secs_f64(),
                );
            }
        }
    }
    for (name, help) in [
        (
            "strom_leader_partitions",
            "Partitions this node leads (Kafka's ReplicaManager LeaderCount).",
        ),
        (
            "strom_under_replicated_partitions",
            "Partitions this node leads with fewer in-sync replicas than replicas (Kafka's ReplicaManager UnderReplicatedPartitions).",
        ),
        (
            "strom_under_min_isr_partitions",
            "Partitions this node leads with fewer in-sync replicas than min.insync.replicas (Kafka's UnderMinIsrPartitionCount).",
        ),
        (
            "strom_at_min_isr_partitions",
            "Partitions this node leads with exactly min.insync.replicas (above 1) in sync (Kafka's AtMinIsrPartitionCount).",
        ),
    ] {
        f.gauge(name, help, vec![], totals[name] as f64);
    }
    if let Some(c) = cluster {
        controller(f, c);
    }
}

/// The metadata Raft on every node; what only the active controller reports, on it alone
/// (the others report 0, as Kafka's inactive controllers do), so that a sum over nodes
/// counts each partition once.
fn controller(f: &mut Families, c: &ClusterState) {
    let r = &c.raft;
    let active = r.leader == Some(r.node_id);
    f.gauge(
        "strom_active_controller",
        "1 on the node that leads the metadata quorum (Kafka's ActiveControllerCount).",
        vec![],
        active as u8 as f64,
    );
    let offline = if active { offline(c.image) } else { Vec::new() };
    f.gauge(
        "strom_offline_partitions",
        "Partitions without a live leader, reported by the active controller (Kafka's OfflinePartitionsCount).",
        vec![],
        offline.len() as f64,
    );
    for (topic, partition) in &offline {
        f.gauge(
            "strom_partition_offline",
            "1 for each partition without a live leader, reported by the active controller.",
            labels(&[("topic", topic), ("partition", &partition.to_string())]),
            1.0,
        );
    }
    if active {
        let fenced = c
            .image
            .brokers
            .keys()
            .filter(|b| c.image.fenced.contains(b))
            .count();
        f.gauge(
            "strom_fenced_brokers",
            "Registered brokers the controller fenced (Kafka's FencedBrokerCount).",
            vec![],
            fenced as f64,
        );
        f.gauge(
            "strom_active_brokers",
            "Registered brokers not fenced (Kafka's ActiveBrokerCount).",
            vec![],
            (c.image.brokers.len() - fenced) as f64,
        );
    }
    for (name, help, value) in [
        (
            "strom_metadata_raft_term",
            "The metadata Raft's current term (KRaft's current-epoch).",
            r.term as f64,
        ),
        (
            "strom_metadata_raft_leader",
            "Node id of the metadata Raft's leader, the controller; -1 while none is known (KRaft's current-leader).",
            r.leader.map_or(-1.0, f64::from),
        ),
        (
            "strom_metadata_raft_last_log_index",
            "Index of the last entry in this node's metadata log; -1 empty (KRaft's log-end-offset minus one).",
            r.last_log_index as f64,
        ),
        (
            "strom_metadata_raft_commit_index",
            "Index of the last metadata entry this node knows committed; -1 none (KRaft's high-watermark minus one).",
            r.commit_index as f64,
        ),
        (
            "strom_metadata_raft_applied_index",
            "Index of the last metadata entry applied to this node's image; -1 none.",
            r.applied_index as f64,
        ),
        (
            "strom_metadata_raft_voters",
            "Voters of the metadata quorum.",
            r.voters as f64,
        ),
    ] {
        f.gauge(name, help, vec![], value);
    }
    f.counter(
        "strom_metadata_raft_leader_changes_total",
        "Metadata Raft leaderships this node saw established since it started (one per term with a leader).",
        vec![],
        r.leader_changes as f64,
    );
}

/// Every family name a clustered node serves here (for the test that keeps deploy/ in
/// sync, which scrapes a single node): one of each, from an active controller leading one
/// replicated partition with a follower, beside an offline one.
pub fn names() -> Vec<String> {
    use crate::cluster::image::{BrokerRecord, PartitionRecord, TopicRecord};
    let mut image = MetadataImage::default();
    image
        .brokers
        .insert(1, BrokerRecord::new(1, None, Vec::new()));
    let part = |leader: i32| PartitionRecord {
        leader,
        leader_epoch: 0,
        replicas: vec![1, 2],
        isr: vec![1],
        adding: Vec::new(),
        removing: Vec::new(),
    };
    image.topics.insert(
        "t".into(),
        TopicRecord {
            id: uuid::Uuid::nil(),
            configs: Default::default(),
            internal: false,
            partitions: vec![part(1), part(-1)],
        },
    );
    let led = PartitionSnapshot {
        topic: "t".into(),
        partition: 0,
        size_bytes: 0,
        log_start: 0,
        log_end: 0,
        high_watermark: 0,
        last_stable: 0,
        open_transactions: 0,
        min_isr: 1,
        followers: vec![crate::partition::replica::FollowerLag {
            replica: 2,
            lag: Some(0),
            caught_up_ago: Some(std::time::Duration::ZERO),
        }],
    };
    let state = ClusterState {
        image: &image,
        raft: RaftView {
            node_id: 1,
            term: 1,
            leader: Some(1),
            last_log_index: 0,
            commit_index: 0,
            applied_index: 0,
            leader_changes: 1,
            voters: 1,
        },
    };
    let mut f = Families::new();
    families(&mut f, 1, Some(&state), &[&led]);
    f.into_vec().iter().map(|f| f.name().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cluster::image::{BrokerRecord, PartitionRecord, TopicRecord};
    use crate::partition::replica::FollowerLag;
    use prometheus::proto::MetricFamily;

    fn image() -> MetadataImage {
        let mut image = MetadataImage::default();
        for id in 1..=3 {
            image
                .brokers
                .insert(id, BrokerRecord::new(id, None, Vec::new()));
        }
        let part = |leader: i32, replicas: &[i32], isr: &[i32]| PartitionRecord {
            leader,
            leader_epoch: 0,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            adding: Vec::new(),
            removing: Vec::new(),
        };
        image.topics.insert(
            "t".into(),
            TopicRecord {
                id: uuid::Uuid::nil(),
                configs: Default::default(),
                internal: false,
                partitions: vec![
                    part(1, &[1, 2, 3], &[1, 2, 3]), // healthy, led by 1
                    part(1, &[1, 2, 3], &[1, 3]),    // under-replicated, led by 1
                    part(2, &[2, 3, 1], &[2]),       // led by 2: not node 1's to report
                    part(-1, &[3, 1, 2], &[3]),      // offline: no leader
                ],
            },
        );
        // Replication factor 1 on a fenced broker: offline, its leader stays in the image.
        image.topics.insert(
            "one".into(),
            TopicRecord {
                id: uuid::Uuid::nil(),
                configs: Default::default(),
                internal: false,
                partitions: vec![part(3, &[3], &[3])],
            },
        );
        image.fenced.insert(3);
        image
    }

    fn snapshot(topic: &str, partition: i32, followers: Vec<FollowerLag>) -> PartitionSnapshot {
        PartitionSnapshot {
            topic: topic.into(),
            partition,
            size_bytes: 0,
            log_start: 0,
            log_end: 0,
            high_watermark: 0,
            last_stable: 0,
            open_transactions: 0,
            min_isr: 2,
            followers,
        }
    }

    fn raft(leader: i32) -> RaftView {
        RaftView {
            node_id: 1,
            term: 7,
            leader: Some(leader),
            last_log_index: 41,
            commit_index: 40,
            applied_index: 40,
            leader_changes: 2,
            voters: 3,
        }
    }

    fn render(cluster: Option<&ClusterState>, parts: &[PartitionSnapshot]) -> Vec<MetricFamily> {
        let mut f = Families::new();
        families(&mut f, 1, cluster, &parts.iter().collect::<Vec<_>>());
        f.into_vec()
    }

    /// (labels "k=v,...", value) of a family's series.
    fn series(fams: &[MetricFamily], name: &str) -> Vec<(String, f64)> {
        let Some(f) = fams.iter().find(|f| f.name() == name) else {
            return Vec::new();
        };
        let counter = f.get_field_type() == prometheus::proto::MetricType::COUNTER;
        f.get_metric()
            .iter()
            .map(|m| {
                let l: Vec<String> = m
                    .get_label()
                    .iter()
                    .map(|l| format!("{}={}", l.name(), l.value()))
                    .collect();
                let v = if counter {
                    m.get_counter().get_value()
                } else {
                    m.get_gauge().get_value()
                };
                (l.join(","), v)
            })
            .collect()
    }

    fn all_partitions() -> Vec<PartitionSnapshot> {
        let lag = |replica, lag, secs: Option<u64>| FollowerLag {
            replica,
            lag,
            caught_up_ago: secs.map(Duration::from_secs),
        };
        vec![
            snapshot(
                "t",
                0,
                vec![lag(2, Some(0), Some(0)), lag(3, Some(5), Some(1))],
            ),
            snapshot("t", 1, vec![lag(2, None, None), lag(3, Some(0), Some(0))]),
            snapshot("t", 2, vec![]),
            snapshot("t", 3, vec![]),
            snapshot("one", 0, vec![]),
        ]
    }

    #[test]
    fn given_a_leader_with_a_shrunk_isr_when_scraped_then_it_reports_that_partition_under_replicated(
    ) {
        let image = image();
        let c = ClusterState {
            image: &image,
            raft: raft(2),
        };
        let fams = render(Some(&c), &all_partitions());
        assert_eq!(
            series(&fams, "strom_partition_under_replicated"),
            vec![
                ("topic=t,partition=0".to_string(), 0.0),
                ("topic=t,partition=1".to_string(), 1.0)
            ],
            "only the partitions node 1 leads"
        );
        assert_eq!(
            series(&fams, "strom_under_replicated_partitions"),
            vec![(String::new(), 1.0)]
        );
        assert_eq!(
            series(&fams, "strom_at_min_isr_partitions"),
            vec![(String::new(), 1.0)],
            "ISR of 2 at min.insync.replicas 2"
        );
        assert_eq!(
            series(&fams, "strom_leader_partitions"),
            vec![(String::new(), 2.0)]
        );
        // A follower's lag only once it fetched from this leader.
        assert_eq!(
            series(&fams, "strom_partition_replica_lag_offsets"),
            vec![
                ("topic=t,partition=0,replica=2".to_string(), 0.0),
                ("topic=t,partition=0,replica=3".to_string(), 5.0),
                ("topic=t,partition=1,replica=3".to_string(), 0.0),
            ]
        );
        // Not the controller: offline partitions are not this node's to report.
        assert_eq!(
            series(&fams, "strom_offline_partitions"),
            vec![(String::new(), 0.0)]
        );
        assert!(series(&fams, "strom_partition_offline").is_empty());
        assert!(series(&fams, "strom_fenced_brokers").is_empty());
        assert_eq!(
            series(&fams, "strom_metadata_raft_leader"),
            vec![(String::new(), 2.0)]
        );
        assert_eq!(
            series(&fams, "strom_metadata_raft_leader_changes_total"),
            vec![(String::new(), 2.0)]
        );
    }

    #[test]
    fn given_the_active_controller_when_scraped_then_it_reports_partitions_without_a_live_leader() {
        let image = image();
        let c = ClusterState {
            image: &image,
            raft: raft(1),
        };
        let fams = render(Some(&c), &all_partitions());
        assert_eq!(
            series(&fams, "strom_active_controller"),
            vec![(String::new(), 1.0)]
        );
        assert_eq!(
            series(&fams, "strom_offline_partitions"),
            vec![(String::new(), 2.0)]
        );
        assert_eq!(
            series(&fams, "strom_partition_offline"),
            vec![
                ("topic=one,partition=0".to_string(), 1.0),
                ("topic=t,partition=3".to_string(), 1.0)
            ]
        );
        assert_eq!(
            series(&fams, "strom_fenced_brokers"),
            vec![(String::new(), 1.0)]
        );
        assert_eq!(
            series(&fams, "strom_active_brokers"),
            vec![(String::new(), 2.0)]
        );
    }

    #[test]
    fn given_a_single_node_when_scraped_then_every_partition_is_led_here_and_none_under_replicated()
    {
        let fams = render(None, &all_partitions());
        assert_eq!(
            series(&fams, "strom_leader_partitions"),
            vec![(String::new(), 5.0)]
        );
        assert_eq!(
            series(&fams, "strom_under_replicated_partitions"),
            vec![(String::new(), 0.0)]
        );
        // min.insync.replicas 2 on a node alone: acks=all is refused, which this says.
        assert_eq!(
            series(&fams, "strom_under_min_isr_partitions"),
            vec![(String::new(), 5.0)]
        );
        assert!(series(&fams, "strom_metadata_raft_term").is_empty());
        assert!(series(&fams, "strom_offline_partitions").is_empty());
    }
}
