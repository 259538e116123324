//! Every API in the table, at every version it advertises: the request encodes, the handler
//! answers, the response encodes and decodes at that version, with no error. This is what
//! keeps ApiVersions honest — a field set on a version that lacks it fails here, not in a client.

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::API_TABLE;
use crate::handlers::testing::{batch, create, produce_req};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn versions(key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let s = API_TABLE.iter().find(|s| s.key == key).expect("in table");
    s.min..=s.max
}

#[test]
fn given_every_api_and_version_when_called_then_answers_without_error() {
    // Groups complete their first rebalance at once (no group.initial.rebalance.delay.ms).
    let h = super::group_tests::harness();
    create(&h, "t", 2);
    let id = h.state.ctx.catalog.snapshot().get("t").unwrap().id;
    for key in API_TABLE.iter().map(|s| s.key) {
        for v in versions(key) {
            let ctx = format!("{key:?} v{v}");
            match key {
                ApiKey::ApiVersions => {
                    let req = crate::codec::api_versions::ApiVersionsRequest::default();
                    let r: crate::codec::Capped<ApiVersionsResponse> = h.call(key, v, req);
                    assert_eq!(r.error_code, 0, "{ctx}");
                    assert_eq!(r.finalized_features.is_empty(), v < 3, "{ctx}");
                }
                ApiKey::Metadata => {
                    let t = MetadataRequestTopic::default().with_name(Some(name("t")));
                    let r: MetadataResponse = h.call(
                        key,
                        v,
                        MetadataRequest::default().with_topics(Some(vec![t])),
                    );
                    assert_eq!(r.topics[0].error_code, 0, "{ctx}");
                    assert_eq!(r.topics[0].partitions.len(), 2, "{ctx}");
                }
                ApiKey::Produce => {
                    let mut req = produce_req("t", 1, 1, batch(2, -1, -1, -1));
                    if v >= 13 {
                        req.topic_data[0].name = TopicName::default();
                        req.topic_data[0].topic_id = id;
                    }
                    let r: ProduceResponse = h.call(key, v, req);
                    assert_eq!(r.responses[0].partition_responses[0].error_code, 0, "{ctx}");
                }
                ApiKey::Fetch => {
                    let mut t =
                        FetchTopic::default().with_partitions(vec![FetchPartition::default()
                            .with_partition(1)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20)]);
                    if v >= 13 {
                        t.topic_id = id;
                    } else {
                        t.topic = name("t");
                    }
                    let req = FetchRequest::default()
                        .with_max_bytes(1 << 20)
                        .with_min_bytes(1)
                        .with_topics(vec![t]);
                    let r: FetchResponse = h.call(key, v, req);
                    let p = &r.responses[0].partitions[0];
                    assert_eq!(p.error_code, 0, "{ctx}");
                    assert!(p.high_watermark >= 2, "{ctx}");
                    assert!(!p.records.as_ref().unwrap().is_empty(), "{ctx}");
                }
                ApiKey::ListOffsets => {
                    let req =
                        ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default(
                        )
                        .with_name(name("t"))
                        .with_partitions(vec![ListOffsetsPartition::default()
                            .with_partition_index(1)
                            .with_timestamp(-1)])]);
                    let r: crate::codec::Capped<ListOffsetsResponse> =
                        h.call(key, v, crate::codec::Capped(req));
                    assert_eq!(r.topics[0].partitions[0].error_code, 0, "{ctx}");
                    assert!(r.topics[0].partitions[0].offset >= 2, "{ctx}");
                }
                ApiKey::DeleteRecords => {
                    use kafka_protocol::messages::delete_records_request::{
                        DeleteRecordsPartition, DeleteRecordsTopic,
                    };
                    // Partition 0 holds nothing: deleting up to its high watermark (-1).
                    let req = DeleteRecordsRequest::default().with_topics(vec![
                        DeleteRecordsTopic::default()
                            .with_name(name("t"))
                            .with_partitions(vec![DeleteRecordsPartition::default()
                                .with_partition_index(0)
                                .with_offset(-1)]),
                    ]);
                    let r: DeleteRecordsResponse = h.call(key, v, req);
                    let p = &r.topics[0].partitions[0];
                    assert_eq!((p.error_code, p.low_watermark), (0, 0), "{ctx}");
                }
                ApiKey::OffsetForLeaderEpoch => {
                    use kafka_protocol::messages::offset_for_leader_epoch_request::{
                        OffsetForLeaderPartition, OffsetForLeaderTopic,
                    };
                    let req = OffsetForLeaderEpochRequest::default().with_topics(vec![
                        OffsetForLeaderTopic::default()
                            .with_topic(name("t"))
                            .with_partitions(vec![OffsetForLeaderPartition::default()
                                .with_partition(1)
                                .with_current_leader_epoch(0)
                                .with_leader_epoch(0)]),
                    ]);
                    let r: OffsetForLeaderEpochResponse = h.call(key, v, req);
                    let p = &r.topics[0].partitions[0];
                    assert_eq!((p.error_code, p.leader_epoch), (0, 0), "{ctx}");
                    assert!(p.end_offset >= 2, "{ctx}");
                }
                ApiKey::CreateTopics => {
                    let t = CreatableTopic::default()
                        .with_name(name(&format!("c{v}")))
                        .with_num_partitions(1)
                        .with_replication_factor(1);
                    let r: CreateTopicsResponse =
                        h.call(key, v, CreateTopicsRequest::default().with_topics(vec![t]));
                    assert_eq!(r.topics[0].error_code, 0, "{ctx}");
                }
                ApiKey::DeleteTopics => {
                    let topic = format!("c{}", v + 1);
                    let req = if v >= 6 {
                        DeleteTopicsRequest::default().with_topics(vec![DeleteTopicState::default(
                        )
                        .with_name(Some(name(&topic)))])
                    } else {
                        DeleteTopicsRequest::default().with_topic_names(vec![name(&topic)])
                    };
                    let r: DeleteTopicsResponse = h.call(key, v, req);
                    assert_eq!(r.responses[0].error_code, 0, "{ctx}");
                }
                ApiKey::InitProducerId => {
                    let r: InitProducerIdResponse = h.call(
                        key,
                        v,
                        InitProducerIdRequest::default().with_transactional_id(None),
                    );
                    assert_eq!(r.error_code, 0, "{ctx}");
                }
                ApiKey::DescribeConfigs => {
                    let req = DescribeConfigsRequest::default().with_resources(vec![
                        DescribeConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_static_str("t")),
                        DescribeConfigsResource::default()
                            .with_resource_type(4)
                            .with_resource_name(StrBytes::from_static_str("0")),
                    ]);
                    let r: DescribeConfigsResponse = h.call(key, v, req);
                    assert!(
                        r.results
                            .iter()
                            .all(|r| r.error_code == 0 && !r.configs.is_empty()),
                        "{ctx}"
                    );
                }
                ApiKey::AlterConfigs => {
                    use kafka_protocol::messages::alter_configs_request::{
                        AlterConfigsResource, AlterableConfig,
                    };
                    let value = format!("{}", 1000 + v);
                    let req = AlterConfigsRequest::default().with_resources(vec![
                        AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_static_str("t"))
                            .with_configs(vec![AlterableConfig::default()
                                .with_name(StrBytes::from_static_str("retention.ms"))
                                .with_value(Some(StrBytes::from_string(value.clone())))]),
                    ]);
                    let r: AlterConfigsResponse = h.call(key, v, req);
                    assert_eq!(r.responses[0].error_code, 0, "{ctx}");
                    let cat = h.state.ctx.catalog.snapshot();
                    assert_eq!(
                        cat.get("t").unwrap().configs["retention.ms"],
                        value,
                        "{ctx}"
                    );
                }
                ApiKey::IncrementalAlterConfigs => {
                    use kafka_protocol::messages::incremental_alter_configs_request::{
                        AlterConfigsResource, AlterableConfig,
                    };
                    let value = format!("{}", 2000 + v);
                    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
                        AlterConfigsResource::default()
                            .with_resource_type(4)
                            .with_resource_name(StrBytes::from_static_str(""))
                            .with_configs(vec![AlterableConfig::default()
                                .with_name(StrBytes::from_static_str("log.roll.ms"))
                                .with_config_operation(0)
                                .with_value(Some(StrBytes::from_string(value.clone())))]),
                    ]);
                    let r: IncrementalAlterConfigsResponse = h.call(key, v, req);
                    assert_eq!(r.responses[0].error_code, 0, "{ctx}");
                    let view = h.state.ctx.catalog.broker();
                    assert_eq!(view.cluster["log.roll.ms"], value, "{ctx}");
                }
                ApiKey::DescribeLogDirs => {
                    let r: crate::codec::describe_log_dirs::DescribeLogDirsResponse = h.call(
                        key,
                        v,
                        crate::codec::Capped(DescribeLogDirsRequest::default().with_topics(None)),
                    );
                    assert_eq!(r.results[0].error_code, 0, "{ctx}");
                }
                ApiKey::CreatePartitions => {
                    create(&h, &format!("p{v}"), 1);
                    let t = CreatePartitionsTopic::default()
                        .with_name(name(&format!("p{v}")))
                        .with_count(2)
                        .with_assignments(None);
                    let r: CreatePartitionsResponse = h.call(
                        key,
                        v,
                        CreatePartitionsRequest::default().with_topics(vec![t]),
                    );
                    assert_eq!(r.results[0].error_code, 0, "{ctx}");
                }
                ApiKey::DescribeCluster => {
                    let r: DescribeClusterResponse =
                        h.call(key, v, DescribeClusterRequest::default());
                    assert_eq!(r.error_code, 0, "{ctx}");
                }
                ApiKey::WriteTxnMarkers => {
                    use crate::codec::write_txn_markers::*;
                    let m = WritableTxnMarker {
                        producer_id: 77,
                        producer_epoch: v,
                        topics: vec![WritableTxnMarkerTopic {
                            name: StrBytes::from_static_str("t"),
                            partition_indexes: vec![0],
                            ..Default::default()
                        }],
                        ..Default::default()
                    };
                    let req = WriteTxnMarkersRequest {
                        markers: vec![m],
                        ..Default::default()
                    };
                    let r: crate::codec::Capped<WriteTxnMarkersResponse> = h.call(key, v, req);
                    let p = &r.markers[0].topics[0].partitions[0];
                    assert_eq!(p.error_code, 0, "{ctx}");
                }
                ApiKey::DescribeProducers => {
                    use kafka_protocol::messages::describe_producers_request::TopicRequest;
                    let t = TopicRequest::default()
                        .with_name(name("t"))
                        .with_partition_indexes(vec![0]);
                    let r: DescribeProducersResponse = h.call(
                        key,
                        v,
                        DescribeProducersRequest::default().with_topics(vec![t]),
                    );
                    let p = &r.topics[0].partitions[0];
                    assert_eq!(p.error_code, 0, "{ctx}");
                    assert!(
                        p.active_producers.iter().any(|s| s.producer_id.0 == 77),
                        "{ctx}"
                    );
                }
                ApiKey::DescribeTopicPartitions => {
                    let r: DescribeTopicPartitionsResponse =
                        h.call(key, v, DescribeTopicPartitionsRequest::default());
                    let t = r.topics.iter().find(|t| t.name == Some(name("t")));
                    assert_eq!(t.map(|t| t.partitions.len()), Some(2), "{ctx}");
                }
                ApiKey::DescribeQuorum => {
                    use kafka_protocol::messages::describe_quorum_request::*;
                    let req =
                        DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
                            .with_topic_name(name("__cluster_metadata"))
                            .with_partitions(vec![PartitionData::default()])]);
                    let r: DescribeQuorumResponse = h.call(key, v, req);
                    let p = &r.topics[0].partitions[0];
                    assert_eq!(
                        (r.error_code, p.error_code, p.leader_id.0),
                        (0, 0, 0),
                        "{ctx}"
                    );
                }
                ApiKey::ElectLeaders => {
                    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
                    let tp = TopicPartitions::default()
                        .with_topic(name("t"))
                        .with_partitions(vec![1]);
                    let req = ElectLeadersRequest::default().with_topic_partitions(Some(vec![tp]));
                    let r: ElectLeadersResponse = h.call(key, v, req);
                    let p = &r.replica_election_results[0].partition_result[0];
                    assert_eq!(p.error_code, 84, "{ctx}");
                }
                ApiKey::UpdateFeatures => {
                    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
                    // Re-finalizing the current level is a no-op that every version accepts.
                    let u = FeatureUpdateKey::default()
                        .with_feature(StrBytes::from_static_str("group.version"))
                        .with_max_version_level(1)
                        .with_upgrade_type(1);
                    let req = UpdateFeaturesRequest::default().with_feature_updates(vec![u]);
                    let r: UpdateFeaturesResponse = h.call(key, v, req);
                    assert_eq!(r.error_code, 0, "{ctx}");
                    assert_eq!(r.results.len(), usize::from(v <= 1), "{ctx}");
                }
                // Outside a SASL listener's authenticator both answer ILLEGAL_SASL_STATE,
                // as Kafka's KafkaApis does.
                ApiKey::SaslHandshake => {
                    let r: SaslHandshakeResponse = h.call(key, v, SaslHandshakeRequest::default());
                    assert_eq!(r.error_code, 34, "{ctx}");
                }
                ApiKey::SaslAuthenticate => {
                    let r: SaslAuthenticateResponse =
                        h.call(key, v, SaslAuthenticateRequest::default());
                    assert_eq!(r.error_code, 34, "{ctx}");
                }
                ApiKey::AlterUserScramCredentials => {
                    use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
                    let u = ScramCredentialUpsertion::default()
                        .with_name(StrBytes::from_static_str("all-versions"))
                        .with_mechanism(2)
                        .with_iterations(4096)
                        .with_salt(bytes::Bytes::from_static(b"salt"))
                        .with_salted_password(bytes::Bytes::from_static(&[1; 64]));
                    let r: AlterUserScramCredentialsResponse = h.call(
                        key,
                        v,
                        AlterUserScramCredentialsRequest::default().with_upsertions(vec![u]),
                    );
                    assert_eq!(r.results[0].error_code, 0, "{ctx}");
                }
                ApiKey::DescribeUserScramCredentials => {
                    let r: DescribeUserScramCredentialsResponse = h.call(
                        key,
                        v,
                        DescribeUserScramCredentialsRequest::default().with_users(None),
                    );
                    assert_eq!(r.error_code, 0, "{ctx}");
                }
                // No authorizer on this broker: Kafka's answer is SECURITY_DISABLED (the
                // ACL APIs with an authorizer are `acl_tests`).
                ApiKey::CreateAcls => {
                    let c = kafka_protocol::messages::create_acls_request::AclCreation::default();
                    let r: CreateAclsResponse =
                        h.call(key, v, CreateAclsRequest::default().with_creations(vec![c]));
                    assert_eq!(r.results[0].error_code, 54, "{ctx}");
                }
                ApiKey::DescribeAcls => {
                    let r: DescribeAclsResponse = h.call(key, v, DescribeAclsRequest::default());
                    assert_eq!(r.error_code, 54, "{ctx}");
                }
                ApiKey::DeleteAcls => {
                    let f =
                        kafka_protocol::messages::delete_acls_request::DeleteAclsFilter::default();
                    let r: DeleteAclsResponse =
                        h.call(key, v, DeleteAclsRequest::default().with_filters(vec![f]));
                    assert_eq!(r.filter_results[0].error_code, 54, "{ctx}");
                }
                ApiKey::AlterClientQuotas => {
                    use kafka_protocol::messages::alter_client_quotas_request as acq;
                    let e = acq::EntryData::default()
                        .with_entity(vec![acq::EntityData::default()
                            .with_entity_type("client-id".into())
                            .with_entity_name(Some("all-versions".into()))])
                        .with_ops(vec![acq::OpData::default()
                            .with_key("producer_byte_rate".into())
                            .with_value(1e9)]);
                    let r: AlterClientQuotasResponse = h.call(
                        key,
                        v,
                        AlterClientQuotasRequest::default().with_entries(vec![e]),
                    );
                    assert_eq!(r.entries[0].error_code, 0, "{ctx}");
                }
                ApiKey::ShareGroupHeartbeat => {
                    let r: ShareGroupHeartbeatResponse =
                        h.call(key, v, ShareGroupHeartbeatRequest::default());
                    assert_eq!(r.error_code, 42, "{ctx}: no group id");
                }
                ApiKey::ShareGroupDescribe => {
                    let req = ShareGroupDescribeRequest::default()
                        .with_group_ids(vec![GroupId("none".into())]);
                    let r: ShareGroupDescribeResponse = h.call(key, v, req);
                    assert_eq!(r.groups[0].error_code, 69, "{ctx}");
                }
                ApiKey::ShareFetch => {
                    let req = crate::codec::share_fetch::ShareFetchRequest::default();
                    let r: crate::codec::Capped<ShareFetchResponse> = h.call(key, v, req);
                    assert_eq!(r.error_code, 42, "{ctx}: no group id");
                }
                ApiKey::ShareAcknowledge => {
                    use crate::codec::share_acknowledge as a;
                    let r: a::ShareAcknowledgeResponse =
                        h.call(key, v, a::ShareAcknowledgeRequest::default());
                    assert_eq!(r.error_code, 42, "{ctx}: no group id");
                }
                ApiKey::DescribeShareGroupOffsets => {
                    use kafka_protocol::messages::describe_share_group_offsets_request as d;
                    let req = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                        d::DescribeShareGroupOffsetsRequestGroup::default()
                            .with_group_id(GroupId("none".into()))
                            .with_topics(Some(vec![])),
                    ]);
                    let r: crate::codec::describe_share_group_offsets::DescribeShareGroupOffsetsResponse =
                        h.call(key, v, crate::codec::Capped(req));
                    assert_eq!(r.groups[0].error_code, 0, "{ctx}");
                }
                ApiKey::AlterShareGroupOffsets => {
                    let req = AlterShareGroupOffsetsRequest::default()
                        .with_group_id(GroupId("none".into()));
                    let r: AlterShareGroupOffsetsResponse = h.call(key, v, req);
                    // As Kafka 4.4: an unknown id becomes an empty share group.
                    assert_eq!(r.error_code, 0, "{ctx}: an empty share group made");
                }
                ApiKey::DeleteShareGroupOffsets => {
                    // Not "none": the AlterShareGroupOffsets call above made that one.
                    let req = DeleteShareGroupOffsetsRequest::default()
                        .with_group_id(GroupId("missing".into()));
                    let r: DeleteShareGroupOffsetsResponse = h.call(key, v, req);
                    assert_eq!(r.error_code, 69, "{ctx}: no such share group");
                }
                ApiKey::DescribeClientQuotas => {
                    let r: DescribeClientQuotasResponse =
                        h.call(key, v, DescribeClientQuotasRequest::default());
                    assert_eq!(r.error_code, 0, "{ctx}");
                    assert!(r.entries.is_some(), "{ctx}");
                }
                ApiKey::GetTelemetrySubscriptions | ApiKey::PushTelemetry => {
                    // A new instance (zero id), then its first push (right after the get).
                    let get = GetTelemetrySubscriptionsRequest::default();
                    let g: GetTelemetrySubscriptionsResponse =
                        h.call(ApiKey::GetTelemetrySubscriptions, 0, get);
                    assert_eq!(g.error_code, 0, "{ctx}");
                    assert!(!g.client_instance_id.is_nil(), "{ctx}");
                    if key == ApiKey::PushTelemetry {
                        let req = PushTelemetryRequest::default()
                            .with_client_instance_id(g.client_instance_id)
                            .with_subscription_id(g.subscription_id);
                        let r: PushTelemetryResponse = h.call(key, v, req);
                        assert_eq!(r.error_code, 0, "{ctx}");
                    }
                }
                ApiKey::ListConfigResources => {
                    let r: ListConfigResourcesResponse =
                        h.call(key, v, ListConfigResourcesRequest::default());
                    assert_eq!(r.error_code, 0, "{ctx}");
                    // v1 lists the broker itself among the types; v0 only subscriptions.
                    assert_eq!(
                        r.config_resources.iter().any(|c| c.resource_type == 4),
                        v >= 1,
                        "{ctx}"
                    );
                }
                key if super::group_tests::is_group_api(key) => {
                    super::group_tests::call_at_version(&h, key, v);
                }
                key if super::txn_coordinator_tests::is_txn_api(key) => {
                    super::txn_coordinator_tests::call_at_version(&h, key, v);
                }
                key if super::CLUSTERED_ONLY.contains(&key) => {
                    // A single node neither advertises nor answers them; the cluster's
                    // answers are covered by compat-tests/python/test_cluster_reassign.py.
                    let mut frame = bytes::BytesMut::new();
                    RequestHeader::default()
                        .with_request_api_key(key as i16)
                        .with_request_api_version(v)
                        .encode(&mut frame, key.request_header_version(v))
                        .expect("header encodes");
                    let r = h.block_on(super::handle_frame(
                        h.state.clone(),
                        h.session(),
                        frame.freeze(),
                    ));
                    assert!(
                        matches!(r, Err(super::FrameError::UnsupportedApi(_))),
                        "{ctx}"
                    );
                }
                other => panic!("{other:?} is in the table but not covered by this test"),
            }
        }
    }
}
