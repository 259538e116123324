//! Describe/AlterClientQuotas through the wire codec, in-process (`testing::Harness`).

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use crate::config::BrokerConfig;
use crate::handlers::testing::Harness;
use crate::security::authorizer::STANDARD_AUTHORIZER;

const INVALID_REQUEST: i16 = 42;
const UNSUPPORTED_VERSION: i16 = 35;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn entry(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> EntryData {
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    EntityData::default()
                        .with_entity_type(s(t))
                        .with_entity_name(n.map(s))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(k, v)| {
                    OpData::default()
                        .with_key(s(k))
                        .with_value(v.unwrap_or(0.0))
                        .with_remove(v.is_none())
                })
                .collect(),
        )
}

fn alter(
    h: &Harness,
    version: i16,
    entries: Vec<EntryData>,
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let r: AlterClientQuotasResponse = h.call(
        ApiKey::AlterClientQuotas,
        version,
        AlterClientQuotasRequest::default()
            .with_entries(entries)
            .with_validate_only(validate_only),
    );
    r.entries
        .iter()
        .map(|e| {
            (
                e.error_code,
                e.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

/// (match type, entity type, match): 0 exact, 1 default, 2 specified.
fn describe(
    h: &Harness,
    version: i16,
    components: &[(i8, &str, Option<&str>)],
    strict: bool,
) -> DescribeClientQuotasResponse {
    h.call(
        ApiKey::DescribeClientQuotas,
        version,
        DescribeClientQuotasRequest::default()
            .with_components(
                components
                    .iter()
                    .map(|(m, t, n)| {
                        ComponentData::default()
                            .with_match_type(*m)
                            .with_entity_type(s(t))
                            .with_match(n.map(s))
                    })
                    .collect(),
            )
            .with_strict(strict),
    )
}

/// The described entities as sorted ("type=name|<default>,...", [(key, value)]).
fn shown(r: &DescribeClientQuotasResponse) -> Vec<(String, Vec<(String, f64)>)> {
    let mut out: Vec<_> = r
        .entries
        .as_ref()
        .expect("entries")
        .iter()
        .map(|e| {
            let mut parts: Vec<String> = e
                .entity
                .iter()
                .map(|d| {
                    format!(
                        "{}={}",
                        d.entity_type,
                        d.entity_name
                            .as_ref()
                            .map_or("<default>".to_string(), |n| n.to_string())
                    )
                })
                .collect();
            parts.sort();
            (
                parts.join(","),
                e.values
                    .iter()
                    .map(|v| (v.key.to_string(), v.value))
                    .collect(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn seeded() -> Harness {
    let h = Harness::new();
    let ok = alter(
        &h,
        1,
        vec![
            entry(
                &[("user", Some("alice"))],
                &[("producer_byte_rate", Some(1024.0))],
            ),
            entry(
                &[("user", Some("alice")), ("client-id", Some("app"))],
                &[("consumer_byte_rate", Some(2048.0))],
            ),
            entry(&[("user", None)], &[("request_percentage", Some(50.0))]),
            entry(
                &[("client-id", None)],
                &[("producer_byte_rate", Some(4096.0))],
            ),
            entry(
                &[("client-id", Some("app"))],
                &[("controller_mutation_rate", Some(1.5))],
            ),
        ],
        false,
    );
    assert_eq!(ok, vec![(0, None); 5]);
    h
}

#[test]
fn given_quotas_when_filtering_then_exact_default_specified_and_strict_match_as_kafka() {
    let h = seeded();
    let all = describe(&h, 1, &[], false);
    assert_eq!(all.error_code, 0);
    assert_eq!(shown(&all).len(), 5);
    // EXACT user=alice: both entities that name alice.
    let r = describe(&h, 0, &[(0, "user", Some("alice"))], false);
    assert_eq!(
        shown(&r),
        vec![
            (
                "client-id=app,user=alice".into(),
                vec![("consumer_byte_rate".into(), 2048.0)]
            ),
            (
                "user=alice".into(),
                vec![("producer_byte_rate".into(), 1024.0)]
            ),
        ]
    );
    // ... strict: only the entity with nothing but the user.
    let r = describe(&h, 1, &[(0, "user", Some("alice"))], true);
    assert_eq!(
        shown(&r),
        vec![(
            "user=alice".into(),
            vec![("producer_byte_rate".into(), 1024.0)]
        )]
    );
    // DEFAULT client-id.
    let r = describe(&h, 1, &[(1, "client-id", None)], false);
    assert_eq!(
        shown(&r),
        vec![(
            "client-id=<default>".into(),
            vec![("producer_byte_rate".into(), 4096.0)]
        )]
    );
    // SPECIFIED client-id: any client-id entity, the default one included.
    let r = describe(&h, 1, &[(2, "client-id", None)], false);
    assert_eq!(shown(&r).len(), 3);
    let r = describe(&h, 1, &[(2, "client-id", None)], true);
    assert_eq!(shown(&r).len(), 2);
    let r = describe(&h, 1, &[(2, "user", None), (2, "client-id", None)], false);
    assert_eq!(
        shown(&r),
        vec![(
            "client-id=app,user=alice".into(),
            vec![("consumer_byte_rate".into(), 2048.0)]
        )]
    );
}

#[test]
fn given_bad_filters_when_describing_then_kafkas_errors() {
    let h = seeded();
    type Case<'a> = (&'a [(i8, &'a str, Option<&'a str>)], i16, &'a str);
    let cases: &[Case] = &[
        (&[(0, "", Some("x"))], INVALID_REQUEST, "Invalid empty entity type."),
        (&[(0, "user", Some("a")), (2, "user", None)], INVALID_REQUEST, "Entity type user cannot appear more than once in the filter."),
        (&[(0, "group", Some("a"))], UNSUPPORTED_VERSION, "Unsupported entity type group"),
        (&[(0, "user", None)], INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
        (&[(1, "user", Some("a"))], INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
        (&[(2, "user", Some("a"))], INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
        (&[(7, "user", None)], INVALID_REQUEST, "Unknown match type 7"),
        (&[(2, "ip", None), (2, "user", None)], INVALID_REQUEST, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."),
    ];
    for (components, code, message) in cases {
        let r = describe(&h, 1, components, false);
        assert_eq!(r.error_code, *code, "{message}");
        assert_eq!(r.error_message.as_deref(), Some(*message));
        assert!(r.entries.is_none());
    }
}

#[test]
fn given_bad_alterations_when_altering_then_each_entity_gets_kafkas_error_and_the_rest_applies() {
    let h = Harness::new();
    let r = alter(
        &h,
        1,
        vec![
            entry(&[], &[("producer_byte_rate", Some(1.0))]),
            entry(
                &[("group", Some("g"))],
                &[("producer_byte_rate", Some(1.0))],
            ),
            entry(&[("user", Some(""))], &[("producer_byte_rate", Some(1.0))]),
            entry(&[("user", Some("a"))], &[("nonsense", Some(1.0))]),
            entry(&[("user", Some("b"))], &[("producer_byte_rate", Some(0.0))]),
            entry(&[("user", Some("c"))], &[("producer_byte_rate", Some(1.5))]),
            entry(
                &[("user", Some("d"))],
                &[
                    ("producer_byte_rate", Some(1.0)),
                    ("producer_byte_rate", Some(2.0)),
                ],
            ),
            entry(
                &[("ip", Some("127.0.0.1")), ("user", Some("e"))],
                &[("connection_creation_rate", Some(1.0))],
            ),
            entry(
                &[("ip", Some("127.0.0.1"))],
                &[("producer_byte_rate", Some(1.0))],
            ),
            entry(
                &[("ip", Some("127.0.0.1"))],
                &[("connection_creation_rate", Some(1e10))],
            ),
            entry(
                &[("client-id", Some("ok"))],
                &[("request_percentage", Some(12.5))],
            ),
        ],
        false,
    );
    let expected: Vec<(i16, Option<String>)> = [
        "Invalid empty client quota entity",
        "Unhandled client quota entity type: group",
        "Empty user not supported",
        "Invalid configuration key nonsense",
        "Quota producer_byte_rate must be greater than 0",
        "producer_byte_rate cannot be a fractional value.",
        "Ignoring duplicate entity ClientQuotaEntity(entries={user=d})",
        "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
        // The first ip entity's own error is replaced: Kafka keeps one result per entity.
        "Ignoring duplicate entity ClientQuotaEntity(entries={ip=127.0.0.1})",
    ]
    .iter()
    .map(|m| (INVALID_REQUEST, Some(m.to_string())))
    .chain([(0, None)])
    .collect();
    assert_eq!(r, expected);
    // Only the valid entity was stored.
    let all = describe(&h, 1, &[], false);
    assert_eq!(
        shown(&all),
        vec![(
            "client-id=ok".into(),
            vec![("request_percentage".into(), 12.5)]
        )]
    );
}

#[test]
fn given_validate_only_or_removal_when_altering_then_nothing_stored_or_key_removed() {
    let h = seeded();
    let r = alter(
        &h,
        0,
        vec![entry(
            &[("user", Some("zed"))],
            &[("producer_byte_rate", Some(10.0))],
        )],
        true,
    );
    assert_eq!(r, vec![(0, None)]);
    assert!(shown(&describe(&h, 1, &[(0, "user", Some("zed"))], false)).is_empty());
    // Removing a key that is not there is fine; removing the last key drops the entity.
    let r = alter(
        &h,
        1,
        vec![entry(
            &[("user", Some("alice"))],
            &[("producer_byte_rate", None), ("consumer_byte_rate", None)],
        )],
        false,
    );
    assert_eq!(r, vec![(0, None)]);
    assert!(shown(&describe(&h, 1, &[(0, "user", Some("alice"))], true)).is_empty());
}

#[test]
fn given_an_authorizer_when_a_user_lacks_cluster_configs_then_cluster_authorization_failed() {
    let h = Harness::with_config(BrokerConfig {
        authorizer_class_name: STANDARD_AUTHORIZER.into(),
        super_users: "User:admin".into(),
        ..Default::default()
    });
    h.as_user("mallory");
    let r = alter(
        &h,
        1,
        vec![entry(
            &[("user", Some("mallory"))],
            &[("producer_byte_rate", Some(1e9))],
        )],
        false,
    );
    assert_eq!(r[0].0, CLUSTER_AUTHORIZATION_FAILED);
    let d = describe(&h, 1, &[], false);
    assert_eq!(d.error_code, CLUSTER_AUTHORIZATION_FAILED);
    h.as_user("admin");
    let r = alter(
        &h,
        1,
        vec![entry(
            &[("user", Some("mallory"))],
            &[("producer_byte_rate", Some(1e3))],
        )],
        false,
    );
    assert_eq!(r, vec![(0, None)]);
    assert_eq!(shown(&describe(&h, 1, &[], false)).len(), 1);
}

#[test]
fn given_an_infinite_double_quota_when_altering_then_refused_as_it_could_not_be_read_back() {
    let h = Harness::new();
    let r = alter(
        &h,
        1,
        vec![entry(
            &[("user", Some("inf"))],
            &[("request_percentage", Some(f64::INFINITY))],
        )],
        false,
    );
    assert_eq!(
        r,
        vec![(
            INVALID_REQUEST,
            Some("Quota request_percentage must be a finite number".into())
        )]
    );
    assert!(shown(&describe(&h, 1, &[], false)).is_empty());
}
