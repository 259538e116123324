//! Create/Describe/DeleteAcls and the handlers' authorization checks, through
//! `handle_frame` as real principals (`Harness::as_user`).

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::testing::*;
use crate::config::BrokerConfig;
use crate::security::acl::{Operation, PatternType, Permission, ResourceType};
use crate::security::authorizer::STANDARD_AUTHORIZER;

const SECURITY_DISABLED: i16 = 54;
const INVALID_REQUEST: i16 = 42;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn secured() -> Harness {
    let config = BrokerConfig {
        authorizer_class_name: STANDARD_AUTHORIZER.into(),
        super_users: "User:admin".into(),
        ..Default::default()
    };
    Harness::with_config(config)
}

fn creation(
    rtype: ResourceType,
    name: &str,
    pattern: PatternType,
    principal: &str,
    op: Operation,
    perm: Permission,
) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rtype.code())
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern.code())
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(op.code())
        .with_permission_type(perm.code())
}

fn create_acls(h: &Harness, creations: Vec<AclCreation>) -> Vec<i16> {
    let r: CreateAclsResponse = h.call(
        ApiKey::CreateAcls,
        3,
        CreateAclsRequest::default().with_creations(creations),
    );
    r.results.iter().map(|r| r.error_code).collect()
}

fn describe_all(h: &Harness, pattern: PatternType, name: Option<&str>) -> DescribeAclsResponse {
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(ResourceType::Any.code())
        .with_resource_name_filter(name.map(s))
        .with_pattern_type_filter(pattern.code())
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(Operation::Any.code())
        .with_permission_type(Permission::Any.code());
    h.call(ApiKey::DescribeAcls, 3, req)
}

#[test]
fn given_no_authorizer_when_calling_acl_apis_then_security_disabled() {
    let h = Harness::new();
    let c = creation(
        ResourceType::Topic,
        "t",
        PatternType::Literal,
        "User:a",
        Operation::Read,
        Permission::Allow,
    );
    assert_eq!(create_acls(&h, vec![c.clone(), c]), [SECURITY_DISABLED; 2]);
    let d = describe_all(&h, PatternType::Any, None);
    assert_eq!(d.error_code, SECURITY_DISABLED);
    let r: DeleteAclsResponse = h.call(
        ApiKey::DeleteAcls,
        1,
        DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()]),
    );
    assert_eq!(r.filter_results[0].error_code, SECURITY_DISABLED);
}

#[test]
fn given_super_user_when_creating_describing_deleting_acls_then_kafkas_answers() {
    let h = secured();
    h.as_user("admin");
    use Operation::{Alter, Read, Write};
    use PatternType::*;
    let codes = create_acls(
        &h,
        vec![
            creation(
                ResourceType::Topic,
                "ord",
                Prefixed,
                "User:alice",
                Read,
                Permission::Allow,
            ),
            creation(
                ResourceType::Topic,
                "orders",
                Literal,
                "User:*",
                Write,
                Permission::Deny,
            ),
            creation(
                ResourceType::Topic,
                "x",
                Match,
                "User:alice",
                Read,
                Permission::Allow,
            ),
            creation(
                ResourceType::Cluster,
                "c",
                Literal,
                "User:alice",
                Alter,
                Permission::Allow,
            ),
            creation(
                ResourceType::Topic,
                "",
                Literal,
                "User:alice",
                Read,
                Permission::Allow,
            ),
            creation(
                ResourceType::Topic,
                "x",
                Literal,
                "User:alice",
                Operation::Any,
                Permission::Allow,
            ),
        ],
    );
    assert_eq!(
        codes,
        [
            0,
            0,
            INVALID_REQUEST,
            INVALID_REQUEST,
            INVALID_REQUEST,
            INVALID_REQUEST
        ]
    );

    // MATCH: what applies to "orders" (both); LITERAL "orders": one; a topic nothing covers.
    let m = describe_all(&h, Match, Some("orders"));
    assert_eq!(m.error_code, 0);
    assert_eq!(m.resources.len(), 2);
    assert_eq!(describe_all(&h, Literal, Some("orders")).resources.len(), 1);
    assert!(describe_all(&h, Match, Some("zzz")).resources.is_empty());
    let bad = describe_all(&h, PatternType::Unknown, None);
    assert_eq!(bad.error_code, INVALID_REQUEST);

    // Another user may not touch ACLs.
    h.as_user("alice");
    let c = creation(
        ResourceType::Topic,
        "t",
        Literal,
        "User:alice",
        Read,
        Permission::Allow,
    );
    assert_eq!(create_acls(&h, vec![c]), [CLUSTER_AUTHORIZATION_FAILED]);
    assert_eq!(
        describe_all(&h, Any, None).error_code,
        CLUSTER_AUTHORIZATION_FAILED
    );

    h.as_user("admin");
    let filter = DeleteAclsFilter::default()
        .with_resource_type_filter(ResourceType::Topic.code())
        .with_resource_name_filter(Some(s("ord")))
        .with_pattern_type_filter(Prefixed.code())
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(Operation::Any.code())
        .with_permission_type(Permission::Any.code());
    let unknown = DeleteAclsFilter::default();
    let r: DeleteAclsResponse = h.call(
        ApiKey::DeleteAcls,
        3,
        DeleteAclsRequest::default().with_filters(vec![filter, unknown]),
    );
    assert_eq!(r.filter_results[0].error_code, 0);
    let gone = &r.filter_results[0].matching_acls;
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].principal.as_str(), "User:alice");
    assert_eq!(r.filter_results[1].error_code, INVALID_REQUEST);
    assert_eq!(describe_all(&h, Any, None).resources.len(), 1);
}

fn meta_topic(name: &str) -> MetadataRequestTopic {
    MetadataRequestTopic::default().with_name(Some(TopicName(s(name))))
}

#[test]
fn given_acls_when_producing_fetching_and_reading_metadata_then_only_what_is_allowed() {
    use Operation::*;
    use PatternType::*;
    let h = secured();
    h.as_user("admin");
    create(&h, "orders", 1);
    create(&h, "secret", 1);
    let codes = create_acls(
        &h,
        vec![
            creation(
                ResourceType::Topic,
                "ord",
                Prefixed,
                "User:alice",
                Write,
                Permission::Allow,
            ),
            creation(
                ResourceType::Topic,
                "ord",
                Prefixed,
                "User:alice",
                Read,
                Permission::Allow,
            ),
        ],
    );
    assert_eq!(codes, [0, 0]);

    h.as_user("alice");
    let ok: ProduceResponse = h.call(
        ApiKey::Produce,
        9,
        produce_req("orders", 0, 1, batch(2, -1, 0, 0)),
    );
    assert_eq!(ok.responses[0].partition_responses[0].error_code, 0);
    let denied: ProduceResponse = h.call(
        ApiKey::Produce,
        9,
        produce_req("secret", 0, 1, batch(2, -1, 0, 0)),
    );
    assert_eq!(
        denied.responses[0].partition_responses[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    // An unknown topic the client may not write is refused before it is looked up.
    let unknown: ProduceResponse = h.call(
        ApiKey::Produce,
        9,
        produce_req("nope", 0, 1, batch(1, -1, 0, 0)),
    );
    assert_eq!(
        unknown.responses[0].partition_responses[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert!(!fetch_records(&h, "orders", 0).is_empty());

    // Metadata: all topics shows only "orders"; "secret" named is refused; auto-create of
    // a topic without CREATE is refused and creates nothing.
    let all: MetadataResponse = h.call(
        ApiKey::Metadata,
        12,
        MetadataRequest::default().with_topics(None),
    );
    let names: Vec<&str> = all
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().as_str())
        .collect();
    assert_eq!(names, ["orders"]);
    let named: MetadataResponse = h.call(
        ApiKey::Metadata,
        12,
        MetadataRequest::default()
            .with_topics(Some(vec![
                meta_topic("secret"),
                meta_topic("orders-new"),
                meta_topic("orders"),
            ]))
            .with_allow_auto_topic_creation(true)
            .with_include_topic_authorized_operations(true),
    );
    let codes: Vec<i16> = named.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        [TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED, 0]
    );
    assert!(!h.catalog_has("orders-new"));
    // READ and WRITE, and the DESCRIBE they imply.
    assert_eq!(
        named.topics[2].topic_authorized_operations,
        (1 << 3) | (1 << 4) | (1 << 8)
    );

    // Nothing moved on the refused topic.
    h.as_user("admin");
    assert!(fetch_records(&h, "secret", 0).is_empty());
    h.as_user("bob");
    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(s("orders")))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = h.call(ApiKey::Fetch, 12, fetch);
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert!(r.responses[0].partitions[0]
        .records
        .as_ref()
        .is_none_or(|r| r.is_empty()));
}

#[test]
fn given_no_group_or_txn_acl_when_coordinating_then_group_and_txn_id_authorization_failed() {
    let h = secured();
    h.as_user("admin");
    create(&h, "orders", 1);
    let codes = create_acls(
        &h,
        vec![creation(
            ResourceType::Topic,
            "orders",
            PatternType::Literal,
            "User:alice",
            Operation::Write,
            Permission::Allow,
        )],
    );
    assert_eq!(codes, [0]);
    h.as_user("alice");
    let find: FindCoordinatorResponse = h.call(
        ApiKey::FindCoordinator,
        4,
        FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![s("g")]),
    );
    assert_eq!(find.coordinators[0].error_code, GROUP_AUTHORIZATION_FAILED);
    let join: JoinGroupResponse = h.call(
        ApiKey::JoinGroup,
        9,
        JoinGroupRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_session_timeout_ms(10_000)
            .with_protocol_type(s("consumer")),
    );
    assert_eq!(join.error_code, GROUP_AUTHORIZATION_FAILED);
    let txn: InitProducerIdResponse = h.call(
        ApiKey::InitProducerId,
        4,
        InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(s("tx"))))
            .with_transaction_timeout_ms(10_000),
    );
    assert_eq!(txn.error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    // Idempotence: WRITE on some topic is enough (KIP-679) ...
    let idem: InitProducerIdResponse = h.call(
        ApiKey::InitProducerId,
        4,
        InitProducerIdRequest::default().with_transactional_id(None),
    );
    assert_eq!(idem.error_code, 0);
    // ... and without it, CLUSTER_AUTHORIZATION_FAILED.
    h.as_user("bob");
    let idem: InitProducerIdResponse = h.call(
        ApiKey::InitProducerId,
        4,
        InitProducerIdRequest::default().with_transactional_id(None),
    );
    assert_eq!(idem.error_code, CLUSTER_AUTHORIZATION_FAILED);
    let created: CreateTopicsResponse = h.call(
        ApiKey::CreateTopics,
        7,
        CreateTopicsRequest::default().with_topics(vec![
            create_topics_request::CreatableTopic::default()
                .with_name(TopicName(s("bobs")))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ]),
    );
    assert_eq!(created.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(!h.catalog_has("bobs"));
}

#[test]
fn given_topic_acls_only_when_committing_fetching_offsets_deleting_describing_then_kafkas_codes() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    let h = secured();
    h.as_user("admin");
    create(&h, "orders", 1);
    let read_orders = creation(
        ResourceType::Topic,
        "orders",
        PatternType::Literal,
        "User:alice",
        Operation::Read,
        Permission::Allow,
    );
    assert_eq!(create_acls(&h, vec![read_orders]), [0]);
    h.as_user("alice");
    let commit = || {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("orders")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(1)])])
    };
    // No READ on the group: every partition GROUP_AUTHORIZATION_FAILED.
    let r: OffsetCommitResponse = h.call(ApiKey::OffsetCommit, 8, commit());
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    let r: OffsetFetchResponse = h.call(
        ApiKey::OffsetFetch,
        7,
        OffsetFetchRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_topics(None),
    );
    assert_eq!(r.error_code, GROUP_AUTHORIZATION_FAILED);
    // DELETE is not implied by READ; DESCRIBE_CONFIGS is not either.
    let d: DeleteTopicsResponse = h.call(
        ApiKey::DeleteTopics,
        5,
        DeleteTopicsRequest::default().with_topic_names(vec![TopicName(s("orders"))]),
    );
    assert_eq!(d.responses[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(h.catalog_has("orders"));
    let c: DescribeConfigsResponse = h.call(
        ApiKey::DescribeConfigs,
        4,
        DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_configuration_keys(None),
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(s("0"))
                .with_configuration_keys(None),
            // A group's configs are checked on the group, a broker's loggers on the cluster.
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(32)
                .with_resource_name(s("g"))
                .with_configuration_keys(None),
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(8)
                .with_resource_name(s("0"))
                .with_configuration_keys(None),
        ]),
    );
    let codes: Vec<i16> = c.results.iter().map(|r| r.error_code).collect();
    assert_eq!(
        codes,
        [
            TOPIC_AUTHORIZATION_FAILED,
            CLUSTER_AUTHORIZATION_FAILED,
            GROUP_AUTHORIZATION_FAILED,
            CLUSTER_AUTHORIZATION_FAILED
        ]
    );
    // ListGroups without DESCRIBE on the cluster: only groups it may DESCRIBE (none).
    h.as_user("admin");
    let r: OffsetCommitResponse = h.call(ApiKey::OffsetCommit, 8, commit());
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    let l: ListGroupsResponse = h.call(ApiKey::ListGroups, 4, ListGroupsRequest::default());
    assert_eq!(l.groups.len(), 1, "the super user sees the group");
    h.as_user("alice");
    let l: ListGroupsResponse = h.call(ApiKey::ListGroups, 4, ListGroupsRequest::default());
    assert!(l.groups.is_empty(), "{:?}", l.groups);
}

#[test]
fn given_no_cluster_action_when_fetching_as_a_follower_then_every_partition_topic_authorization_failed(
) {
    let h = secured();
    h.as_user("admin");
    create(&h, "orders", 1);
    let all_on_orders = creation(
        ResourceType::Topic,
        "orders",
        PatternType::Literal,
        "User:alice",
        Operation::All,
        Permission::Allow,
    );
    assert_eq!(create_acls(&h, vec![all_on_orders]), [0]);
    let id = h.state.ctx.catalog.snapshot().get("orders").unwrap().id;
    let fetch = |replica: i32, topic_id: uuid::Uuid| {
        FetchRequest::default()
            .with_max_wait_ms(0)
            .with_session_epoch(-1)
            .with_replica_state(
                fetch_request::ReplicaState::default().with_replica_id(BrokerId(replica)),
            )
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_partition_max_bytes(1 << 20)])])
    };
    h.as_user("alice");
    let code = |r: FetchResponse| r.responses[0].partitions[0].error_code;
    // A consumer with READ: served; an unknown id: UNKNOWN_TOPIC_ID (100).
    assert_eq!(code(h.call(ApiKey::Fetch, 15, fetch(-1, id))), 0);
    assert_eq!(
        code(h.call(ApiKey::Fetch, 15, fetch(-1, uuid::Uuid::new_v4()))),
        100
    );
    // A follower needs CLUSTER_ACTION: refused, unknown id or not.
    assert_eq!(
        code(h.call(ApiKey::Fetch, 15, fetch(1, id))),
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(
        code(h.call(ApiKey::Fetch, 15, fetch(1, uuid::Uuid::new_v4()))),
        TOPIC_AUTHORIZATION_FAILED
    );
}

/// KIP-848 regex subscriptions resolve to the topics the heartbeat's principal may DESCRIBE
/// (Kafka 4's `TopicRegexResolver`), and a coordinator that loads the group again from
/// `__consumer_offsets` keeps that resolution (record 16) until one is due again: a super
/// user's heartbeat right after the load does not widen it.
#[test]
fn given_regex_subscription_when_principal_may_describe_some_matches_then_only_those_assigned_across_a_load(
) {
    let h = secured();
    h.as_user("admin");
    create(&h, "rx-a", 2);
    create(&h, "rx-b", 1);
    let codes = create_acls(
        &h,
        vec![
            creation(
                ResourceType::Topic,
                "rx-a",
                PatternType::Prefixed,
                "User:alice",
                Operation::Read,
                Permission::Allow,
            ),
            creation(
                ResourceType::Group,
                "grx",
                PatternType::Literal,
                "User:alice",
                Operation::Read,
                Permission::Allow,
            ),
            creation(
                ResourceType::Group,
                "grx",
                PatternType::Literal,
                "User:carol",
                Operation::Describe,
                Permission::Allow,
            ),
        ],
    );
    assert_eq!(codes, [0, 0, 0]);
    let heartbeat = |epoch: i32, regex: Option<&str>| -> Vec<String> {
        let r: ConsumerGroupHeartbeatResponse = h.call(
            ApiKey::ConsumerGroupHeartbeat,
            1,
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s("grx")))
                .with_member_id(s("m1"))
                .with_member_epoch(epoch)
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_regex(regex.map(s))
                .with_topic_partitions(Some(vec![])),
        );
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
        let catalog = h.state.ctx.catalog.snapshot();
        let assignment = r.assignment.expect("an assignment");
        assignment
            .topic_partitions
            .iter()
            .map(|tp| catalog.by_id(&tp.topic_id).unwrap().name.to_string())
            .collect()
    };
    h.as_user("alice");
    assert_eq!(heartbeat(0, Some("rx-.*")), ["rx-a"]);

    let gs = crate::coordinator::group::GroupShard::of(&h.state);
    gs.groups.borrow_mut().clear();
    gs.forget_loaded();
    h.as_user("admin");
    assert_eq!(heartbeat(1, None), ["rx-a"], "the replayed resolution");

    // ConsumerGroupDescribe: alice sees her group; carol may describe the group but not rx-a.
    let describe = |user: &str| {
        h.as_user(user);
        let r: ConsumerGroupDescribeResponse = h.call(
            ApiKey::ConsumerGroupDescribe,
            1,
            ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("grx"))]),
        );
        r.groups.into_iter().next().unwrap()
    };
    let mine = describe("alice");
    assert_eq!((mine.error_code, mine.members.len()), (0, 1));
    let theirs = describe("carol");
    assert_eq!(theirs.error_code, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(
        theirs.error_message.as_deref(),
        Some("The group has described topic(s) that the client is not authorized to describe.")
    );
    assert!(theirs.members.is_empty());
}
