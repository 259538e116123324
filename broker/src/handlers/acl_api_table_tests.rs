//! One row per API that Kafka authorizes and `acl_tests.rs` does not drive already: the
//! request as a principal without the ACL it needs, the error codes Kafka answers (the
//! resource, operation and response shape of `KafkaApis` / `ControllerApis` /
//! `getErrorResponse` named in each row), and, after the whole table, a super user's view
//! showing that none of the refused requests changed anything.
//!
//! `bob` has no ACL at all. `alice` has WRITE on transactional id `tx` and DELETE on group
//! `g` only, so the rows as alice show the check Kafka makes second.

use std::rc::Rc;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::testing::*;
use super::RequestContext;
use crate::config::BrokerConfig;
use crate::security::acl::{Operation, PatternType, Permission, ResourceType};
use crate::security::authorizer::STANDARD_AUTHORIZER;

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const INVALID_REQUEST: i16 = 42;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const RESOURCE_NOT_FOUND: i16 = 91;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_BROKER_LOGGER: i8 = 8;
const RESOURCE_CLIENT_METRICS: i8 = 16;
const RESOURCE_GROUP: i8 = 32;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn topic(v: &str) -> TopicName {
    TopicName(s(v))
}

/// What a row asks, as whom, and the codes Kafka answers, flattened in response order
/// (top-level code first where the response has one).
struct Row {
    api: &'static str,
    user: &'static str,
    call: fn(&Harness) -> Vec<i16>,
    want: &'static [i16],
}

/// A request straight to a handler, for the APIs a single node does not dispatch
/// (`CLUSTERED_ONLY`): their authorization comes before anything needs a cluster.
fn direct<R, F: std::future::Future<Output = R>>(
    h: &Harness,
    key: ApiKey,
    version: i16,
    handle: impl FnOnce(Rc<RequestContext>) -> F,
) -> R {
    h.block_on(handle(h.request_context(key, version)))
}

fn alter_configs(h: &Harness) -> Vec<i16> {
    use alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let resource = |t: i8, name: &str, key: &str, value: &str| {
        AlterConfigsResource::default()
            .with_resource_type(t)
            .with_resource_name(s(name))
            .with_configs(vec![AlterableConfig::default()
                .with_name(s(key))
                .with_value(Some(s(value)))])
    };
    let req = AlterConfigsRequest::default().with_resources(vec![
        resource(RESOURCE_TOPIC, "orders", "retention.ms", "1000"),
        resource(RESOURCE_BROKER, "0", "log.cleaner.threads", "2"),
        resource(RESOURCE_GROUP, "g", "consumer.session.timeout.ms", "50000"),
    ]);
    let r: AlterConfigsResponse = h.call(ApiKey::AlterConfigs, 2, req);
    let messages: Vec<Option<&str>> = r
        .responses
        .iter()
        .map(|r| r.error_message.as_deref())
        .collect();
    // The controller's `new ApiError(error)`: the error's own message.
    assert_eq!(
        messages,
        [
            Some("Topic authorization failed."),
            Some("Cluster authorization failed."),
            Some("Group authorization failed.")
        ],
        "AlterConfigs messages"
    );
    r.responses.iter().map(|r| r.error_code).collect()
}

fn incremental_alter_configs(h: &Harness) -> Vec<i16> {
    [
        (RESOURCE_TOPIC, "orders", "retention.ms", "1000"),
        (RESOURCE_BROKER, "0", "log.cleaner.threads", "2"),
        (RESOURCE_BROKER_LOGGER, "0", "kafka.server", "DEBUG"),
        (RESOURCE_GROUP, "g", "consumer.session.timeout.ms", "50000"),
        (RESOURCE_CLIENT_METRICS, "sub", "metrics", "org.apache"),
    ]
    .iter()
    .map(|&(t, name, key, value)| {
        let (code, message) = incremental_alter(h, t, name, &[(key, 0, Some(value))], false);
        // A broker logger is refused on the broker without a message, the rest by the
        // controller with the error's own.
        assert_eq!(
            message.is_empty(),
            t == RESOURCE_BROKER_LOGGER,
            "IncrementalAlterConfigs message of type {t}: {message:?}"
        );
        code
    })
    .collect()
}

/// Resources Kafka's broker refuses in its preprocessing, before the controller authorizes:
/// a key twice, a null value, another broker's id.
fn malformed_incremental_alter_configs(h: &Harness) -> Vec<i16> {
    let set = |k: &'static str, v: Option<&'static str>| (k, 0, v);
    [
        (
            RESOURCE_TOPIC,
            "orders",
            vec![
                set("retention.ms", Some("1")),
                set("retention.ms", Some("2")),
            ],
        ),
        (RESOURCE_TOPIC, "orders", vec![set("retention.ms", None)]),
        (
            RESOURCE_BROKER,
            "7",
            vec![set("log.cleaner.threads", Some("2"))],
        ),
    ]
    .iter()
    .map(|(t, name, ops)| incremental_alter(h, *t, name, ops, false).0)
    .collect()
}

fn txn_offset_commit(h: &Harness) -> Vec<i16> {
    use txn_offset_commit_request::{TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic};
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s("tx")))
        .with_group_id(GroupId(s("g")))
        .with_producer_id(ProducerId(1))
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(topic("orders"))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(3)])]);
    let r: TxnOffsetCommitResponse = h.call(ApiKey::TxnOffsetCommit, 3, req);
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

fn add_offsets_to_txn(h: &Harness) -> Vec<i16> {
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s("tx")))
        .with_producer_id(ProducerId(1))
        .with_group_id(GroupId(s("g")));
    let r: AddOffsetsToTxnResponse = h.call(ApiKey::AddOffsetsToTxn, 3, req);
    vec![r.error_code]
}

fn offset_delete(h: &Harness) -> Vec<i16> {
    use offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
    let req = OffsetDeleteRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_topics(vec![OffsetDeleteRequestTopic::default()
            .with_name(topic("orders"))
            .with_partitions(vec![
                OffsetDeleteRequestPartition::default().with_partition_index(0)
            ])]);
    let r: OffsetDeleteResponse = h.call(ApiKey::OffsetDelete, 0, req);
    std::iter::once(r.error_code)
        .chain(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        )
        .collect()
}

fn rows() -> Vec<Row> {
    vec![
        // KafkaApis.handleDeleteRecordsRequest: DELETE on the topic, per partition.
        Row {
            api: "DeleteRecords",
            user: "bob",
            call: |h| {
                use delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
                let req =
                    DeleteRecordsRequest::default().with_topics(vec![DeleteRecordsTopic::default(
                    )
                    .with_name(topic("orders"))
                    .with_partitions(vec![DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(2)])]);
                let r: DeleteRecordsResponse = h.call(ApiKey::DeleteRecords, 2, req);
                let p = &r.topics[0].partitions[0];
                assert_eq!(p.low_watermark, -1, "DeleteRecords low watermark");
                vec![p.error_code]
            },
            want: &[TOPIC_AUTHORIZATION_FAILED],
        },
        // ControllerApis.createPartitions: ALTER on the topic, per topic.
        Row {
            api: "CreatePartitions",
            user: "bob",
            call: |h| {
                let req = CreatePartitionsRequest::default().with_topics(vec![
                    create_partitions_request::CreatePartitionsTopic::default()
                        .with_name(topic("orders"))
                        .with_count(3),
                ]);
                let r: CreatePartitionsResponse = h.call(ApiKey::CreatePartitions, 3, req);
                assert_eq!(r.results[0].error_message, None, "CreatePartitions message");
                r.results.iter().map(|r| r.error_code).collect()
            },
            want: &[TOPIC_AUTHORIZATION_FAILED],
        },
        // ControllerApis.authorizeAlterResource: ALTER_CONFIGS on the topic, the cluster
        // (broker, client metrics) or the group.
        Row {
            api: "AlterConfigs",
            user: "bob",
            call: alter_configs,
            want: &[
                TOPIC_AUTHORIZATION_FAILED,
                CLUSTER_AUTHORIZATION_FAILED,
                GROUP_AUTHORIZATION_FAILED,
            ],
        },
        // The same, and a broker logger on the cluster (ConfigAdminManager.preprocess).
        Row {
            api: "IncrementalAlterConfigs",
            user: "bob",
            call: incremental_alter_configs,
            want: &[
                TOPIC_AUTHORIZATION_FAILED,
                CLUSTER_AUTHORIZATION_FAILED,
                CLUSTER_AUTHORIZATION_FAILED,
                GROUP_AUTHORIZATION_FAILED,
                CLUSTER_AUTHORIZATION_FAILED,
            ],
        },
        // ConfigAdminManager.preprocess runs on the broker before the controller authorizes.
        Row {
            api: "IncrementalAlterConfigs (malformed)",
            user: "bob",
            call: malformed_incremental_alter_configs,
            want: &[INVALID_REQUEST, INVALID_REQUEST, INVALID_REQUEST],
        },
        // The legacy AlterConfigs takes no broker logger: "Unknown resource type 8".
        Row {
            api: "AlterConfigs (broker logger)",
            user: "bob",
            call: |h| {
                use alter_configs_request::{AlterConfigsResource, AlterableConfig};
                let req = AlterConfigsRequest::default().with_resources(vec![
                    AlterConfigsResource::default()
                        .with_resource_type(RESOURCE_BROKER_LOGGER)
                        .with_resource_name(s("0"))
                        .with_configs(vec![AlterableConfig::default()
                            .with_name(s("kafka.server"))
                            .with_value(Some(s("DEBUG")))]),
                ]);
                let r: AlterConfigsResponse = h.call(ApiKey::AlterConfigs, 2, req);
                r.responses.iter().map(|r| r.error_code).collect()
            },
            want: &[INVALID_REQUEST],
        },
        // KafkaApis.handleTxnOffsetCommitRequest: WRITE on the transactional id, then READ
        // on the group, every partition answered with the refusal.
        Row {
            api: "TxnOffsetCommit",
            user: "bob",
            call: txn_offset_commit,
            want: &[TRANSACTIONAL_ID_AUTHORIZATION_FAILED],
        },
        Row {
            api: "TxnOffsetCommit",
            user: "alice",
            call: txn_offset_commit,
            want: &[GROUP_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleAddOffsetsToTxnRequest: the same two checks.
        Row {
            api: "AddOffsetsToTxn",
            user: "bob",
            call: add_offsets_to_txn,
            want: &[TRANSACTIONAL_ID_AUTHORIZATION_FAILED],
        },
        Row {
            api: "AddOffsetsToTxn",
            user: "alice",
            call: add_offsets_to_txn,
            want: &[GROUP_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleAddPartitionsToTxnRequest (v3): WRITE on the transactional id,
        // every partition refused.
        Row {
            api: "AddPartitionsToTxn",
            user: "bob",
            call: |h| {
                let req = AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(TransactionalId(s("tx")))
                    .with_v3_and_below_producer_id(ProducerId(1))
                    .with_v3_and_below_topics(vec![
                        add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                            .with_name(topic("orders"))
                            .with_partitions(vec![0]),
                    ]);
                let r: AddPartitionsToTxnResponse = h.call(ApiKey::AddPartitionsToTxn, 3, req);
                r.results_by_topic_v3_and_below
                    .iter()
                    .flat_map(|t| {
                        t.results_by_partition
                            .iter()
                            .map(|p| p.partition_error_code)
                    })
                    .collect()
            },
            want: &[TRANSACTIONAL_ID_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleEndTxnRequest: WRITE on the transactional id.
        Row {
            api: "EndTxn",
            user: "bob",
            call: |h| {
                let req = EndTxnRequest::default()
                    .with_transactional_id(TransactionalId(s("tx")))
                    .with_producer_id(ProducerId(1));
                let r: EndTxnResponse = h.call(ApiKey::EndTxn, 3, req);
                vec![r.error_code]
            },
            want: &[TRANSACTIONAL_ID_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleDescribeTransactionsRequest: DESCRIBE on each transactional id.
        Row {
            api: "DescribeTransactions",
            user: "bob",
            call: |h| {
                let req = DescribeTransactionsRequest::default()
                    .with_transactional_ids(vec![TransactionalId(s("tx"))]);
                let r: DescribeTransactionsResponse = h.call(ApiKey::DescribeTransactions, 0, req);
                r.transaction_states.iter().map(|t| t.error_code).collect()
            },
            want: &[TRANSACTIONAL_ID_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleWriteTxnMarkersRequest: CLUSTER_ACTION, every partition refused.
        Row {
            api: "WriteTxnMarkers",
            user: "bob",
            call: |h| {
                use write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
                let req = WriteTxnMarkersRequest::default().with_markers(vec![
                    WritableTxnMarker::default()
                        .with_producer_id(ProducerId(1))
                        .with_topics(vec![WritableTxnMarkerTopic::default()
                            .with_name(topic("orders"))
                            .with_partition_indexes(vec![0])]),
                ]);
                let r: WriteTxnMarkersResponse = h.call(ApiKey::WriteTxnMarkers, 1, req);
                r.markers
                    .iter()
                    .flat_map(|m| m.topics.iter())
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect()
            },
            want: &[CLUSTER_AUTHORIZATION_FAILED],
        },
        // ControllerApis.handleElectLeaders: ALTER on the cluster; ElectLeadersRequest's
        // error response repeats it for every partition asked.
        Row {
            api: "ElectLeaders",
            user: "bob",
            call: |h| {
                let req = ElectLeadersRequest::default().with_topic_partitions(Some(vec![
                    elect_leaders_request::TopicPartitions::default()
                        .with_topic(topic("orders"))
                        .with_partitions(vec![0]),
                ]));
                let r: ElectLeadersResponse = h.call(ApiKey::ElectLeaders, 2, req);
                std::iter::once(r.error_code)
                    .chain(
                        r.replica_election_results
                            .iter()
                            .flat_map(|t| t.partition_result.iter().map(|p| p.error_code)),
                    )
                    .collect()
            },
            want: &[CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleDeleteGroupsRequest: DELETE on each group.
        Row {
            api: "DeleteGroups",
            user: "bob",
            call: |h| {
                let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g"))]);
                let r: DeleteGroupsResponse = h.call(ApiKey::DeleteGroups, 2, req);
                r.results.iter().map(|r| r.error_code).collect()
            },
            want: &[GROUP_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleOffsetDeleteRequest: DELETE on the group (a top-level error, no
        // topics), then READ on each topic (its partitions refused).
        Row {
            api: "OffsetDelete",
            user: "bob",
            call: offset_delete,
            want: &[GROUP_AUTHORIZATION_FAILED],
        },
        Row {
            api: "OffsetDelete",
            user: "alice",
            call: offset_delete,
            want: &[0, TOPIC_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleDescribeGroupsRequest: DESCRIBE on each group.
        Row {
            api: "DescribeGroups",
            user: "bob",
            call: |h| {
                let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]);
                let r: DescribeGroupsResponse = h.call(ApiKey::DescribeGroups, 5, req);
                r.groups.iter().map(|g| g.error_code).collect()
            },
            want: &[GROUP_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleHeartbeatRequest / SyncGroup / LeaveGroup: READ on the group.
        Row {
            api: "Heartbeat",
            user: "bob",
            call: |h| {
                let req = HeartbeatRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_member_id(s("m"));
                let r: HeartbeatResponse = h.call(ApiKey::Heartbeat, 4, req);
                vec![r.error_code]
            },
            want: &[GROUP_AUTHORIZATION_FAILED],
        },
        Row {
            api: "SyncGroup",
            user: "bob",
            call: |h| {
                let req = SyncGroupRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_member_id(s("m"));
                let r: SyncGroupResponse = h.call(ApiKey::SyncGroup, 5, req);
                vec![r.error_code]
            },
            want: &[GROUP_AUTHORIZATION_FAILED],
        },
        Row {
            api: "LeaveGroup",
            user: "bob",
            call: |h| {
                let req = LeaveGroupRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_members(vec![
                        leave_group_request::MemberIdentity::default().with_member_id(s("m"))
                    ]);
                let r: LeaveGroupResponse = h.call(ApiKey::LeaveGroup, 4, req);
                vec![r.error_code]
            },
            want: &[GROUP_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleConsumerGroupHeartbeat: READ on the group.
        Row {
            api: "ConsumerGroupHeartbeat",
            user: "bob",
            call: |h| {
                let req = ConsumerGroupHeartbeatRequest::default()
                    .with_group_id(GroupId(s("g2")))
                    .with_rebalance_timeout_ms(10_000)
                    .with_subscribed_topic_names(Some(vec![topic("orders")]))
                    .with_topic_partitions(Some(vec![]));
                let r: ConsumerGroupHeartbeatResponse =
                    h.call(ApiKey::ConsumerGroupHeartbeat, 0, req);
                vec![r.error_code]
            },
            want: &[GROUP_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleDescribeProducersRequest: READ on the topic, per partition.
        Row {
            api: "DescribeProducers",
            user: "bob",
            call: |h| {
                let req = DescribeProducersRequest::default().with_topics(vec![
                    describe_producers_request::TopicRequest::default()
                        .with_name(topic("orders"))
                        .with_partition_indexes(vec![0]),
                ]);
                let r: DescribeProducersResponse = h.call(ApiKey::DescribeProducers, 0, req);
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect()
            },
            want: &[TOPIC_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleListOffsetRequest: DESCRIBE on the topic, per partition.
        Row {
            api: "ListOffsets",
            user: "bob",
            call: |h| {
                use list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
                let req = ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![ListOffsetsTopic::default()
                        .with_name(topic("orders"))
                        .with_partitions(vec![ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(-1)])]);
                let r: ListOffsetsResponse = h.call(ApiKey::ListOffsets, 7, req);
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect()
            },
            want: &[TOPIC_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleOffsetForLeaderEpochRequest: DESCRIBE on the topic (a consumer).
        Row {
            api: "OffsetForLeaderEpoch",
            user: "bob",
            call: |h| {
                use offset_for_leader_epoch_request::{
                    OffsetForLeaderPartition, OffsetForLeaderTopic,
                };
                let req = OffsetForLeaderEpochRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![OffsetForLeaderTopic::default()
                        .with_topic(topic("orders"))
                        .with_partitions(vec![OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(-1)
                            .with_leader_epoch(0)])]);
                let r: OffsetForLeaderEpochResponse = h.call(ApiKey::OffsetForLeaderEpoch, 4, req);
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect()
            },
            want: &[TOPIC_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleDescribeTopicPartitionsRequest: DESCRIBE on a named topic.
        Row {
            api: "DescribeTopicPartitions",
            user: "bob",
            call: |h| {
                let req = DescribeTopicPartitionsRequest::default()
                    .with_response_partition_limit(100)
                    .with_topics(vec![
                        describe_topic_partitions_request::TopicRequest::default()
                            .with_name(topic("orders")),
                    ]);
                let r: DescribeTopicPartitionsResponse =
                    h.call(ApiKey::DescribeTopicPartitions, 0, req);
                r.topics.iter().map(|t| t.error_code).collect()
            },
            want: &[TOPIC_AUTHORIZATION_FAILED],
        },
        // ControllerApis.handleAlterPartitionReassignments: ALTER on the cluster, the
        // request and every partition (AlterPartitionReassignmentsRequest.getErrorResponse).
        Row {
            api: "AlterPartitionReassignments",
            user: "bob",
            call: |h| {
                use alter_partition_reassignments_request::{
                    ReassignablePartition, ReassignableTopic,
                };
                let req = AlterPartitionReassignmentsRequest::default().with_topics(vec![
                    ReassignableTopic::default()
                        .with_name(topic("orders"))
                        .with_partitions(vec![ReassignablePartition::default()
                            .with_partition_index(0)
                            .with_replicas(Some(vec![BrokerId(0)]))]),
                ]);
                let r = direct(h, ApiKey::AlterPartitionReassignments, 1, |c| async move {
                    super::alter_partition_reassignments::handle(&c, req).await
                });
                std::iter::once(r.error_code)
                    .chain(
                        r.responses
                            .iter()
                            .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
                    )
                    .collect()
            },
            want: &[CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED],
        },
        // ControllerApis.handleListPartitionReassignments: DESCRIBE on the cluster.
        Row {
            api: "ListPartitionReassignments",
            user: "bob",
            call: |h| {
                let r = direct(h, ApiKey::ListPartitionReassignments, 0, |c| async move {
                    let req = ListPartitionReassignmentsRequest::default();
                    super::list_partition_reassignments::handle(&c, req).await
                });
                vec![r.error_code]
            },
            want: &[CLUSTER_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleDescribeLogDirsRequest: DESCRIBE on the cluster, no results.
        Row {
            api: "DescribeLogDirs",
            user: "bob",
            call: |h| {
                let r: DescribeLogDirsResponse = h.call(
                    ApiKey::DescribeLogDirs,
                    4,
                    DescribeLogDirsRequest::default().with_topics(None),
                );
                assert!(r.results.is_empty(), "DescribeLogDirs results");
                vec![r.error_code]
            },
            want: &[CLUSTER_AUTHORIZATION_FAILED],
        },
        // AclApis.handleDeleteAcls: ALTER on the cluster, every filter refused.
        Row {
            api: "DeleteAcls",
            user: "bob",
            call: |h| {
                let filter = delete_acls_request::DeleteAclsFilter::default()
                    .with_resource_type_filter(ResourceType::Any.code())
                    .with_pattern_type_filter(PatternType::Any.code())
                    .with_operation(Operation::Any.code())
                    .with_permission_type(Permission::Any.code());
                let req = DeleteAclsRequest::default().with_filters(vec![filter]);
                let r: DeleteAclsResponse = h.call(ApiKey::DeleteAcls, 3, req);
                r.filter_results.iter().map(|f| f.error_code).collect()
            },
            want: &[CLUSTER_AUTHORIZATION_FAILED],
        },
        // ControllerApis.handleAlterClientQuotas: ALTER_CONFIGS on the cluster, every entry.
        Row {
            api: "AlterClientQuotas",
            user: "bob",
            call: |h| {
                use alter_client_quotas_request::{EntityData, EntryData, OpData};
                let req =
                    AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
                        .with_entity(vec![EntityData::default()
                            .with_entity_type(s("user"))
                            .with_entity_name(Some(s("bob")))])
                        .with_ops(vec![OpData::default()
                            .with_key(s("producer_byte_rate"))
                            .with_value(1.0)])]);
                let r: AlterClientQuotasResponse = h.call(ApiKey::AlterClientQuotas, 1, req);
                r.entries.iter().map(|e| e.error_code).collect()
            },
            want: &[CLUSTER_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleDescribeClientQuotasRequest: DESCRIBE_CONFIGS on the cluster.
        Row {
            api: "DescribeClientQuotas",
            user: "bob",
            call: |h| {
                let r: DescribeClientQuotasResponse = h.call(
                    ApiKey::DescribeClientQuotas,
                    1,
                    DescribeClientQuotasRequest::default(),
                );
                assert!(r.entries.is_none(), "DescribeClientQuotas entries");
                vec![r.error_code]
            },
            want: &[CLUSTER_AUTHORIZATION_FAILED],
        },
        // KafkaApis.handleDescribeUserScramCredentialsRequest: DESCRIBE on the cluster, the
        // request and every user named.
        Row {
            api: "DescribeUserScramCredentials",
            user: "bob",
            call: |h| {
                let req = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                    describe_user_scram_credentials_request::UserName::default()
                        .with_name(s("admin")),
                ]));
                let r: DescribeUserScramCredentialsResponse =
                    h.call(ApiKey::DescribeUserScramCredentials, 0, req);
                std::iter::once(r.error_code)
                    .chain(r.results.iter().map(|u| u.error_code))
                    .collect()
            },
            want: &[CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED],
        },
        // ControllerApis.handleAlterUserScramCredentials: ALTER on the cluster, every user.
        Row {
            api: "AlterUserScramCredentials",
            user: "bob",
            call: |h| {
                let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
                    alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                        .with_name(s("bob"))
                        .with_mechanism(2)
                        .with_iterations(4096)
                        .with_salt(bytes::Bytes::from_static(b"salt"))
                        .with_salted_password(bytes::Bytes::from_static(&[7; 64])),
                ]);
                let r: AlterUserScramCredentialsResponse =
                    h.call(ApiKey::AlterUserScramCredentials, 0, req);
                r.results.iter().map(|u| u.error_code).collect()
            },
            want: &[CLUSTER_AUTHORIZATION_FAILED],
        },
        // ControllerApis.handleUpdateFeatures: ALTER on the cluster (no per-feature results
        // with a top-level error, UpdateFeaturesResponse.createWithErrors).
        Row {
            api: "UpdateFeatures",
            user: "bob",
            call: |h| {
                let req = UpdateFeaturesRequest::default().with_feature_updates(vec![
                    update_features_request::FeatureUpdateKey::default()
                        .with_feature(s("transaction.version"))
                        .with_max_version_level(2)
                        .with_upgrade_type(1),
                ]);
                let r: UpdateFeaturesResponse = h.call(ApiKey::UpdateFeatures, 1, req);
                std::iter::once(r.error_code)
                    .chain(r.results.iter().map(|f| f.error_code))
                    .collect()
            },
            want: &[CLUSTER_AUTHORIZATION_FAILED],
        },
        // ControllerApis.handleDescribeQuorum: DESCRIBE on the cluster.
        Row {
            api: "DescribeQuorum",
            user: "bob",
            call: |h| {
                use describe_quorum_request::{PartitionData, TopicData};
                let req = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
                    .with_topic_name(topic("__cluster_metadata"))
                    .with_partitions(vec![PartitionData::default()])]);
                let r: DescribeQuorumResponse = h.call(ApiKey::DescribeQuorum, 1, req);
                vec![r.error_code]
            },
            want: &[CLUSTER_AUTHORIZATION_FAILED],
        },
    ]
}

fn acl(rtype: ResourceType, name: &str, principal: &str, op: Operation) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rtype.code())
        .with_resource_name(s(name))
        .with_resource_pattern_type(PatternType::Literal.code())
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(op.code())
        .with_permission_type(Permission::Allow.code())
}

/// Group `g`'s committed offset of orders-0, read as the caller.
fn committed(h: &Harness) -> i64 {
    let r: OffsetFetchResponse = h.call(
        ApiKey::OffsetFetch,
        7,
        OffsetFetchRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_topics(None),
    );
    r.topics
        .iter()
        .find(|t| t.name.as_str() == "orders")
        .map_or(-1, |t| t.partitions[0].committed_offset)
}

fn config_value(h: &Harness, rtype: i8, name: &str, key: &str) -> Option<String> {
    let req = DescribeConfigsRequest::default().with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(rtype)
            .with_resource_name(s(name))
            .with_configuration_keys(Some(vec![s(key)])),
    ]);
    let r: DescribeConfigsResponse = h.call(ApiKey::DescribeConfigs, 4, req);
    r.results[0]
        .configs
        .iter()
        .find(|c| c.name.as_str() == key)
        .and_then(|c| c.value.as_ref().map(|v| v.to_string()))
}

#[test]
fn given_a_principal_without_the_acl_when_calling_each_authorized_api_then_kafkas_code_and_nothing_changes(
) {
    let h = Harness::with_config(BrokerConfig {
        authorizer_class_name: STANDARD_AUTHORIZER.into(),
        super_users: "User:admin".into(),
        ..Default::default()
    });
    h.as_user("admin");
    create(&h, "orders", 1);
    let p: ProduceResponse = h.call(
        ApiKey::Produce,
        9,
        produce_req("orders", 0, 1, batch(3, -1, 0, 0)),
    );
    assert_eq!(p.responses[0].partition_responses[0].error_code, 0);
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(topic("orders"))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1),
                ]),
        ]);
    let c: OffsetCommitResponse = h.call(ApiKey::OffsetCommit, 8, commit);
    assert_eq!(c.topics[0].partitions[0].error_code, 0);
    let grants = vec![
        acl(
            ResourceType::TransactionalId,
            "tx",
            "User:alice",
            Operation::Write,
        ),
        acl(ResourceType::Group, "g", "User:alice", Operation::Delete),
    ];
    let r: CreateAclsResponse = h.call(
        ApiKey::CreateAcls,
        3,
        CreateAclsRequest::default().with_creations(grants),
    );
    assert!(r.results.iter().all(|r| r.error_code == 0));
    let retention_before = config_value(&h, RESOURCE_TOPIC, "orders", "retention.ms");
    let session_before = config_value(&h, RESOURCE_GROUP, "g", "consumer.session.timeout.ms");

    let mut wrong = Vec::new();
    for row in rows() {
        h.as_user(row.user);
        let got = (row.call)(&h);
        if got != row.want {
            wrong.push(format!(
                "{} as {}: got {got:?}, Kafka answers {:?}",
                row.api, row.user, row.want
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));

    // Nothing the refused requests asked for happened.
    h.as_user("admin");
    let meta = h
        .state
        .ctx
        .catalog
        .snapshot()
        .get("orders")
        .cloned()
        .unwrap();
    assert_eq!(meta.partitions, 1, "CreatePartitions added partitions");
    assert!(
        !fetch_records(&h, "orders", 0).is_empty(),
        "DeleteRecords moved the log start"
    );
    assert_eq!(
        committed(&h),
        1,
        "DeleteGroups or OffsetDelete removed offsets"
    );
    assert_eq!(
        config_value(&h, RESOURCE_TOPIC, "orders", "retention.ms"),
        retention_before
    );
    assert_eq!(
        config_value(&h, RESOURCE_GROUP, "g", "consumer.session.timeout.ms"),
        session_before
    );
    let q: DescribeClientQuotasResponse = h.call(
        ApiKey::DescribeClientQuotas,
        1,
        DescribeClientQuotasRequest::default(),
    );
    assert_eq!(q.entries.map(|e| e.len()), Some(0), "a quota was stored");
    let scram: DescribeUserScramCredentialsResponse = h.call(
        ApiKey::DescribeUserScramCredentials,
        0,
        DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
            describe_user_scram_credentials_request::UserName::default().with_name(s("bob")),
        ])),
    );
    assert_eq!(scram.results[0].error_code, RESOURCE_NOT_FOUND);
    assert_eq!(h.state.ctx.acls.snapshot().len(), 2, "an ACL was deleted");
}
