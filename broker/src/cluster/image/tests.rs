//! The state machine's unit tests: each command on a small image, and replays that must
//! reach the same image.

use super::*;
use crate::metadata::features::{FeatureUpdate, Finalized, UpgradeType, TRANSACTION_VERSION};
use crate::metadata::quotas::{entity, PRODUCER_BYTE_RATE, USER};
use crate::metadata::scram::{CredentialChange, ScramMechanism, StoredCredential};
use crate::security::acl::{
    AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType,
};

fn register(image: &mut MetadataImage, id: i32) {
    let broker = BrokerRecord::new(
        id,
        None,
        vec![Endpoint {
            listener: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9000 + id,
            protocol: "PLAINTEXT".into(),
        }],
    );
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
fn given_leader_fenced_when_isr_has_others_then_next_leads_at_new_epoch_and_rejoins_by_alter_isr() {
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
        from: None,
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
fn given_isr_reordered_by_rejoins_when_leader_fenced_then_next_in_assignment_order_leads() {
    let mut image = MetadataImage::default();
    for id in 1..=3 {
        register(&mut image, id);
    }
    image.apply(&create_rf("r", 1, 3));
    let replicas = image.topics["r"].partitions[0].replicas.clone();
    let p = image.topics["r"].partitions[0].clone();
    // The second replica rejoined last: the ISR lists it after the third.
    let drifted = vec![replicas[0], replicas[2], replicas[1]];
    let alter = Command::AlterIsr {
        topic: "r".into(),
        partition: 0,
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        isr: drifted.clone(),
        from: None,
    };
    assert_eq!(image.apply(&alter), Outcome::Done);
    assert_eq!(image.topics["r"].partitions[0].isr, drifted);
    image.apply(&Command::FenceBroker { id: replicas[0] });
    assert_eq!(
        image.topics["r"].partitions[0].leader, replicas[1],
        "Kafka elects the first live in-sync replica of the assignment, not of the ISR"
    );
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
            broker: BrokerRecord::new(2, None, Vec::new()),
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

// ---- ACLs, SCRAM credentials, quotas, configs, feature levels (settings.rs) ----

fn acl(name: &str, principal: &str) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: name.into(),
        pattern_type: PatternType::Literal,
        principal: principal.into(),
        host: "*".into(),
        operation: Operation::Write,
        permission: Permission::Allow,
    }
}

fn by_principal(principal: &str) -> AclFilter {
    AclFilter {
        resource_type: ResourceType::Any,
        resource_name: None,
        pattern_type: PatternType::Any,
        principal: Some(principal.into()),
        host: None,
        operation: Operation::Any,
        permission: Permission::Any,
    }
}

fn cred(iterations: i32) -> StoredCredential {
    StoredCredential {
        salt: vec![1; 16],
        stored_key: vec![2; 64],
        server_key: vec![3; 64],
        iterations,
    }
}

fn upsert(user: &str, iterations: i32) -> CredentialChange {
    CredentialChange::Upsert {
        user: user.into(),
        mechanism: ScramMechanism::Sha512,
        credential: cred(iterations),
    }
}

#[test]
fn given_acls_when_created_twice_and_deleted_by_filter_then_the_rest_stays_and_removed_are_named() {
    let mut image = MetadataImage::default();
    let create = |acls| Command::CreateAcls { acls };
    let (a, b) = (acl("t", "User:alice"), acl("t", "User:bob"));
    assert_eq!(
        image.apply(&create(vec![a.clone(), b.clone()])),
        Outcome::Done
    );
    assert_eq!(image.apply(&create(vec![a.clone()])), Outcome::Done);
    assert_eq!(image.acls, vec![a.clone(), b.clone()], "no binding twice");
    let delete = Command::DeleteAcls {
        filters: vec![by_principal("User:alice"), by_principal("User:alice")],
    };
    assert_eq!(
        image.apply(&delete),
        Outcome::AclsDeleted(vec![vec![a.clone()], vec![a]]),
        "a binding two filters match is reported by both, as Kafka does"
    );
    assert_eq!(image.acls, vec![b]);
    assert_eq!(
        image.apply(&delete),
        Outcome::AclsDeleted(vec![vec![], vec![]])
    );
}

#[test]
fn given_credential_changes_when_applied_then_upsert_replaces_and_last_delete_drops_the_user() {
    let mut image = MetadataImage::default();
    let alter = |changes| Command::AlterCredentials { changes };
    image.apply(&alter(vec![upsert("alice", 4096), upsert("bob", 4096)]));
    image.apply(&alter(vec![upsert("alice", 8192)]));
    assert_eq!(image.users["alice"][&ScramMechanism::Sha512], cred(8192));
    let delete = CredentialChange::Delete {
        user: "bob".into(),
        mechanism: ScramMechanism::Sha512,
    };
    assert_eq!(image.apply(&alter(vec![delete])), Outcome::Done);
    assert!(!image.users.contains_key("bob"));
}

#[test]
fn given_quota_alterations_when_applied_and_snapshotted_then_kept_and_an_emptied_entity_goes() {
    let mut image = MetadataImage::default();
    let alice = entity(&[(USER, Some("alice"))]);
    let defaults = entity(&[(USER, None)]);
    let set = |e: &crate::metadata::quotas::QuotaEntity, v| Command::AlterQuotas {
        changes: vec![(e.clone(), [(PRODUCER_BYTE_RATE.to_string(), v)].into())],
    };
    image.apply(&set(&alice, Some(1024.0)));
    image.apply(&set(&defaults, Some(2048.0)));
    assert_eq!(image.quotas[&alice][PRODUCER_BYTE_RATE], 1024.0);
    // Entities are maps: the snapshot holds them as pairs, and reads them back.
    let json = serde_json::to_string(&image).unwrap();
    let back: MetadataImage = serde_json::from_str(&json).unwrap();
    assert_eq!(back, image);
    image.apply(&set(&alice, None));
    assert!(!image.quotas.contains_key(&alice));
    assert!(image.quotas.contains_key(&defaults));
}

#[test]
fn given_config_sets_when_applied_then_each_resource_holds_its_set_and_empty_removes_it() {
    let mut image = MetadataImage::default();
    register(&mut image, 1);
    image.apply(&create("t", 1));
    let set = |resource, pairs: &[(&str, &str)]| Command::SetConfigs {
        resource,
        configs: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let topic = ConfigResource::Topic("t".into());
    assert_eq!(
        image.apply(&set(topic.clone(), &[("max.message.bytes", "2000")])),
        Outcome::Done
    );
    assert_eq!(image.topics["t"].configs["max.message.bytes"], "2000");
    assert_eq!(
        image.apply(&set(ConfigResource::Topic("nope".into()), &[("a", "1")])),
        Outcome::UnknownTopic
    );
    image.apply(&set(
        ConfigResource::Broker(None),
        &[("log.retention.ms", "1")],
    ));
    image.apply(&set(
        ConfigResource::Broker(Some(2)),
        &[("log.retention.ms", "2")],
    ));
    image.apply(&set(ConfigResource::Group("g".into()), &[("a", "1")]));
    image.apply(&set(
        ConfigResource::ClientMetrics("m".into()),
        &[("b", "2")],
    ));
    assert_eq!(image.broker_configs[""]["log.retention.ms"], "1");
    assert_eq!(image.broker_configs["2"]["log.retention.ms"], "2");
    assert_eq!(image.group_configs["g"]["a"], "1");
    assert_eq!(image.client_metrics["m"]["b"], "2");
    image.apply(&set(ConfigResource::Broker(Some(2)), &[]));
    image.apply(&set(ConfigResource::Group("g".into()), &[]));
    image.apply(&set(topic, &[]));
    assert!(!image.broker_configs.contains_key("2"));
    assert!(image.group_configs.is_empty());
    assert!(image.topics["t"].configs.is_empty());
}

#[test]
fn given_feature_updates_when_applied_then_decided_against_the_image_levels_all_or_nothing() {
    let mut image = MetadataImage::default();
    let update = |level, upgrade, local: &Finalized| Command::UpdateFeatures {
        updates: vec![FeatureUpdate {
            name: TRANSACTION_VERSION.into(),
            level,
            upgrade,
        }],
        node: 2,
        local: local.clone(),
    };
    // No levels in the image yet: the proposer's own are the base.
    let mut local = Finalized::bootstrap();
    local.levels.insert(TRANSACTION_VERSION.into(), 0);
    assert_eq!(
        image.apply(&update(1, UpgradeType::Upgrade, &local)),
        Outcome::Done
    );
    let levels = image.features.clone().unwrap();
    assert_eq!(levels.level(TRANSACTION_VERSION), 1);
    assert_eq!(levels.epoch, local.epoch + 1);
    // From now on the image's levels decide, whatever a proposer has locally.
    match image.apply(&update(0, UpgradeType::Upgrade, &Finalized::bootstrap())) {
        Outcome::Refused(msg) => assert!(msg.contains("Can't downgrade"), "{msg}"),
        other => panic!("{other:?}"),
    }
    match image.apply(&update(9, UpgradeType::Upgrade, &local)) {
        Outcome::Refused(msg) => {
            assert!(msg.contains("Local controller 2 only supports"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        image.features,
        Some(levels),
        "a refused update changes nothing"
    );
}

// ---- a single node's data dir joining the image (migrate.rs) ----

fn migration(node: i32, topic: &str, id: Uuid) -> Migration {
    let mut m = Migration {
        node,
        topics: BTreeMap::new(),
        acls: vec![acl(topic, "User:alice")],
        users: Default::default(),
        quotas: Default::default(),
        broker_configs: [(
            String::new(),
            [("log.retention.ms".into(), "9".into())].into(),
        )]
        .into(),
        group_configs: Default::default(),
        client_metrics: Default::default(),
        features: Finalized::bootstrap(),
        next_producer_id: 5 * PRODUCER_ID_BLOCK,
    };
    m.topics.insert(
        topic.into(),
        MigratedTopic {
            id,
            partitions: 3,
            configs: [("retention.ms".into(), "1000".into())].into(),
            internal: false,
        },
    );
    crate::metadata::scram::apply_changes(&mut m.users, &[upsert("alice", 4096)]);
    m
}

#[test]
fn given_single_node_metadata_when_migrated_then_topics_keep_ids_on_that_node_and_ids_continue() {
    let mut image = MetadataImage::default();
    for id in 1..=3 {
        register(&mut image, id);
    }
    image.apply(&Command::AllocateProducerIds { broker: 2 });
    image.apply(&create("other", 1));
    let id = Uuid::new_v4();
    let m = migration(1, "legacy", id);
    let cmd = Command::Migrate(Box::new(m.clone()));
    assert_eq!(cmd.topics(), vec!["legacy".to_string()]);
    assert_eq!(cmd.sections(), Section::ALL);
    assert_eq!(image.apply(&cmd), Outcome::Migrated { kept: vec![] });
    let t = &image.topics["legacy"];
    assert_eq!((t.id, t.partitions.len()), (id, 3));
    assert_eq!(t.configs["retention.ms"], "1000");
    for p in &t.partitions {
        assert_eq!(
            (p.leader, p.leader_epoch, &p.replicas, &p.isr),
            (1, 0, &vec![1], &vec![1])
        );
    }
    assert!(image.topics.contains_key("other"), "the cluster's own stay");
    assert_eq!(image.acls, m.acls);
    assert_eq!(image.users, m.users);
    assert_eq!(image.broker_configs[""]["log.retention.ms"], "9");
    assert_eq!(image.features, Some(Finalized::bootstrap()));
    assert_eq!(image.next_producer_id, 5 * PRODUCER_ID_BLOCK);
    match image.apply(&Command::AllocateProducerIds { broker: 1 }) {
        Outcome::ProducerIds { start, .. } => assert_eq!(start, 5 * PRODUCER_ID_BLOCK),
        other => panic!("{other:?}"),
    }
    // A retry after a crash before the node noted it done changes nothing.
    let before = image.clone();
    assert_eq!(image.apply(&cmd), Outcome::Migrated { kept: vec![] });
    assert_eq!(image, before);
}

#[test]
fn given_cluster_topic_of_same_name_or_id_when_migrating_then_refused_and_nothing_changes() {
    let mut image = MetadataImage::default();
    register(&mut image, 1);
    image.apply(&create("legacy", 1));
    let theirs = image.topics["legacy"].id;
    let before = image.clone();
    let mut m = migration(1, "legacy", Uuid::new_v4());
    m.topics.insert(
        "fine".into(),
        MigratedTopic {
            id: Uuid::new_v4(),
            partitions: 1,
            configs: BTreeMap::new(),
            internal: false,
        },
    );
    match image.apply(&Command::Migrate(Box::new(m))) {
        Outcome::MigrationConflict(why) => {
            assert!(
                why.contains("legacy") && why.contains(&theirs.to_string()),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
    let same_id = migration(1, "renamed", theirs);
    assert!(matches!(
        image.apply(&Command::Migrate(Box::new(same_id))),
        Outcome::MigrationConflict(_)
    ));
    assert_eq!(image, before, "all or nothing");
}

#[test]
fn given_second_node_migrating_same_user_with_other_salt_then_the_clusters_credential_is_kept() {
    let mut image = MetadataImage::default();
    let first = migration(1, "a", Uuid::new_v4());
    image.apply(&Command::Migrate(Box::new(first.clone())));
    let mut second = migration(2, "b", Uuid::new_v4());
    second.users.clear();
    crate::metadata::scram::apply_changes(&mut second.users, &[upsert("alice", 8192)]);
    crate::metadata::scram::apply_changes(&mut second.users, &[upsert("carol", 4096)]);
    second.broker_configs = [(
        String::new(),
        [("log.retention.ms".into(), "7".into())].into(),
    )]
    .into();
    match image.apply(&Command::Migrate(Box::new(second))) {
        Outcome::Migrated { kept } => assert_eq!(
            kept,
            vec![
                "the SCRAM-SHA-512 credential of user alice".to_string(),
                "the dynamic broker config log.retention.ms of \"\"".to_string(),
            ]
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(image.users["alice"], first.users["alice"]);
    assert!(image.users.contains_key("carol"));
    assert_eq!(image.broker_configs[""]["log.retention.ms"], "9");
    assert_eq!(image.topics["b"].partitions[0].leader, 2);
    assert_eq!(image.acls.len(), 2);
}

#[test]
fn given_snapshot_from_before_these_sections_when_loaded_then_they_are_empty() {
    let old = r#"{"cluster_id":"c","brokers":{},"topics":{},"fenced":[],"next_producer_id":7}"#;
    let image: MetadataImage = serde_json::from_str(old).unwrap();
    assert_eq!(image.next_producer_id, 7);
    assert!(image.acls.is_empty() && image.users.is_empty() && image.quotas.is_empty());
    assert!(image.broker_configs.is_empty() && image.features.is_none());
}

fn elect(
    image: &mut MetadataImage,
    election: ElectionType,
    partitions: &[(&str, i32)],
) -> Vec<Elected> {
    let partitions = partitions
        .iter()
        .map(|(t, p)| (t.to_string(), *p))
        .collect();
    match image.apply(&Command::ElectLeaders {
        election,
        partitions,
    }) {
        Outcome::Elections(v) => v,
        other => panic!("{other:?}"),
    }
}

#[test]
fn given_leader_moved_when_electing_preferred_then_first_replica_leads_again_if_in_sync() {
    let mut image = MetadataImage::default();
    for id in 1..=3 {
        register(&mut image, id);
    }
    image.apply(&create_rf("r", 1, 3));
    let preferred = image.topics["r"].partitions[0].replicas[0];
    assert_eq!(
        elect(
            &mut image,
            ElectionType::Preferred,
            &[("r", 0), ("r", 7), ("x", 0)]
        ),
        vec![
            Elected::NotNeeded,
            Elected::UnknownPartition,
            Elected::UnknownTopic
        ]
    );
    image.apply(&Command::FenceBroker { id: preferred });
    assert_eq!(image.imbalanced(10), vec![], "the preferred one is gone");
    assert_eq!(
        elect(&mut image, ElectionType::Preferred, &[("r", 0)]),
        vec![Elected::PreferredNotAvailable]
    );
    // Back, but out of the ISR until its leader takes it in: still not available.
    image.apply(&Command::UnfenceBroker { id: preferred });
    assert_eq!(
        elect(&mut image, ElectionType::Preferred, &[("r", 0)]),
        vec![Elected::PreferredNotAvailable]
    );
    let p = image.topics["r"].partitions[0].clone();
    let mut isr = p.isr.clone();
    isr.push(preferred);
    image.apply(&Command::AlterIsr {
        topic: "r".into(),
        partition: 0,
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        isr,
        from: None,
    });
    assert_eq!(image.imbalanced(10), vec![("r".to_string(), 0)]);
    assert_eq!(
        elect(&mut image, ElectionType::Preferred, &[("r", 0)]),
        vec![Elected::Done]
    );
    let now = &image.topics["r"].partitions[0];
    assert_eq!(now.leader, preferred);
    assert_eq!(now.leader_epoch, p.leader_epoch + 1);
    assert_eq!(image.imbalanced(10), vec![]);
}

#[test]
fn given_leaderless_partition_when_electing_unclean_then_a_live_replica_leads_alone() {
    let mut image = MetadataImage::default();
    for id in 1..=3 {
        register(&mut image, id);
    }
    image.apply(&create_rf("r", 1, 3));
    let order = image.topics["r"].partitions[0].replicas.clone();
    assert_eq!(
        elect(&mut image, ElectionType::Unclean, &[("r", 0)]),
        vec![Elected::NotNeeded],
        "it has a leader"
    );
    // The ISR shrinks to the last one standing, which then goes too.
    for id in &order {
        image.apply(&Command::FenceBroker { id: *id });
    }
    let last = image.topics["r"].partitions[0].isr.clone();
    assert_eq!(image.topics["r"].partitions[0].leader, -1);
    assert_eq!(
        elect(&mut image, ElectionType::Unclean, &[("r", 0)]),
        vec![Elected::EligibleNotAvailable],
        "nobody is live"
    );
    let stale = order.iter().copied().find(|r| !last.contains(r)).unwrap();
    image.apply(&Command::UnfenceBroker { id: stale });
    assert_eq!(
        image.topics["r"].partitions[0].leader, -1,
        "clean: it waits"
    );
    assert_eq!(
        elect(&mut image, ElectionType::Unclean, &[("r", 0)]),
        vec![Elected::Done]
    );
    let p = &image.topics["r"].partitions[0];
    assert_eq!((p.leader, p.isr.clone()), (stale, vec![stale]));
}

#[test]
fn given_topic_allowing_unclean_when_its_last_in_sync_replica_goes_then_a_live_one_leads() {
    let mut image = MetadataImage::default();
    for id in 1..=3 {
        register(&mut image, id);
    }
    image.apply(&create_rf("r", 1, 3));
    let order = image.topics["r"].partitions[0].replicas.clone();
    // The ISR is down to one member (the others fell behind), which then dies.
    let p = image.topics["r"].partitions[0].clone();
    image.apply(&Command::AlterIsr {
        topic: "r".into(),
        partition: 0,
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        isr: vec![order[0]],
        from: None,
    });
    image.apply(&Command::FenceBroker { id: order[0] });
    assert_eq!(image.topics["r"].partitions[0].leader, -1);
    image.apply(&Command::SetConfigs {
        resource: ConfigResource::Topic("r".into()),
        configs: BTreeMap::from([(UNCLEAN_CONFIG.to_string(), "true".to_string())]),
    });
    let p = &image.topics["r"].partitions[0];
    assert_eq!(p.leader, order[1], "the first live replica");
    assert_eq!(p.isr, vec![order[1]]);
}

#[test]
fn given_isr_changed_by_fence_at_same_epoch_when_alter_isr_from_older_isr_then_stale() {
    let mut image = MetadataImage::default();
    for id in 1..=3 {
        register(&mut image, id);
    }
    image.apply(&create_rf("r", 1, 3));
    let p = image.topics["r"].partitions[0].clone();
    let follower = *p.isr.iter().find(|r| **r != p.leader).expect("RF 3");
    // The controller fences a follower: the ISR shrinks, the leader epoch stays.
    image.apply(&Command::FenceBroker { id: follower });
    let fenced = image.topics["r"].partitions[0].clone();
    assert_eq!(fenced.leader_epoch, p.leader_epoch);
    assert!(!fenced.isr.contains(&follower));
    // A change the leader decided on the ISR before the fence would put the follower back.
    let alter = |isr: Vec<i32>, from: Vec<i32>| Command::AlterIsr {
        topic: "r".into(),
        partition: 0,
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        isr,
        from: Some(from),
    };
    let shrunk: Vec<i32> = p.isr.iter().copied().filter(|r| *r != follower).collect();
    let other = *shrunk.iter().find(|r| **r != p.leader).expect("RF 3");
    let without_other: Vec<i32> = p.isr.iter().copied().filter(|r| *r != other).collect();
    assert_eq!(
        image.apply(&alter(without_other, p.isr.clone())),
        Outcome::Stale
    );
    assert_eq!(image.topics["r"].partitions[0].isr, fenced.isr);
    // Made on the ISR the image shows, it is taken.
    assert_eq!(
        image.apply(&alter(vec![p.leader], fenced.isr.clone())),
        Outcome::Done
    );
    assert_eq!(image.topics["r"].partitions[0].isr, vec![p.leader]);
}
