//! Dynamic configs over real TCP: topic overrides and dynamic broker defaults altered on a
//! running broker apply to its partitions at once and survive a restart.

mod common;

use common::{
    batch, create_topic, idempotent_batch_at, produce, producer_ids, start, start_with, Client,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const MESSAGE_TOO_LARGE: i16 = 10;
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;

fn set(c: &mut Client, kind: i8, name: &str, key: &str, value: Option<&str>) {
    let op = if value.is_some() { 0 } else { 1 };
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.into()))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_string(key.into()))
                .with_config_operation(op)
                .with_value(value.map(|v| StrBytes::from_string(v.into())))]),
    ]);
    let r: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    assert_eq!(r.responses[0].error_code, 0, "{:?}", r.responses[0]);
}

fn describe(c: &mut Client, kind: i8, name: &str, key: &str) -> (String, i8) {
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.into()))
            .with_configuration_keys(Some(vec![StrBytes::from_string(key.into())]))]);
    let r: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req);
    let e = &r.results[0].configs[0];
    (
        e.value.as_deref().unwrap_or("").to_string(),
        e.config_source,
    )
}

#[test]
fn given_altered_configs_when_broker_restarts_then_they_still_apply() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), 2);
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, "limited", 4);
    create_topic(&mut c, "plain", 4);
    let big = batch(50, "x"); // well over 100 bytes
    for p in 0..4 {
        assert_eq!(produce(&mut c, "limited", p, big.clone()).0, 0);
    }
    set(&mut c, 2, "limited", "max.message.bytes", Some("100"));
    // Every partition, on whichever shard it lives, refuses at once.
    for p in 0..4 {
        assert_eq!(
            produce(&mut c, "limited", p, big.clone()).0,
            MESSAGE_TOO_LARGE
        );
        assert_eq!(produce(&mut c, "plain", p, big.clone()).0, 0);
    }
    set(&mut c, 4, "", "message.max.bytes", Some("200"));
    set(&mut c, 4, "0", "log.retention.ms", Some("3600000"));
    assert_eq!(
        produce(&mut c, "plain", 1, big.clone()).0,
        MESSAGE_TOO_LARGE
    );
    drop(c);
    server.shutdown().unwrap();

    let server = start(dir.path(), 3);
    let mut c = Client::connect(server.kafka_addr);
    for p in 0..4 {
        assert_eq!(
            produce(&mut c, "limited", p, big.clone()).0,
            MESSAGE_TOO_LARGE
        );
        assert_eq!(
            produce(&mut c, "plain", p, big.clone()).0,
            MESSAGE_TOO_LARGE
        );
    }
    assert_eq!(
        describe(&mut c, 2, "limited", "max.message.bytes"),
        ("100".into(), DYNAMIC_TOPIC_CONFIG)
    );
    assert_eq!(
        describe(&mut c, 2, "plain", "max.message.bytes"),
        ("200".into(), DYNAMIC_DEFAULT_BROKER_CONFIG)
    );
    assert_eq!(
        describe(&mut c, 2, "plain", "retention.ms"),
        ("3600000".into(), DYNAMIC_BROKER_CONFIG)
    );
    // Removing the broker default lets the topic without an override accept big batches.
    set(&mut c, 4, "", "message.max.bytes", None);
    assert_eq!(produce(&mut c, "plain", 2, big.clone()).0, 0);
    assert_eq!(produce(&mut c, "limited", 2, big).0, MESSAGE_TOO_LARGE);
    drop(c);
    server.shutdown().unwrap();
}

/// `producer.id.expiration.ms` is a dynamic broker config in Kafka; lowering it on a running
/// broker expires producer state at the next check, without a restart.
#[test]
fn given_running_broker_when_producer_expiration_lowered_then_next_check_applies_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(dir.path(), 2, |c| {
        c.producer_id_expiration_check_interval_ms = 100;
    });
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, "idle", 1);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // Two hours idle: within the default day, past an hour.
    let old = idempotent_batch_at(3, "idle", 5, 0, now - 7_200_000);
    assert_eq!(produce(&mut c, "idle", 0, old).0, 0);
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(
        producer_ids(&mut c, "idle"),
        [5],
        "expired under the default"
    );
    set(&mut c, 4, "", "producer.id.expiration.ms", Some("3600000"));
    assert_eq!(
        describe(&mut c, 4, "", "producer.id.expiration.ms"),
        ("3600000".into(), DYNAMIC_DEFAULT_BROKER_CONFIG)
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !producer_ids(&mut c, "idle").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "not expired after the change"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(c);
    server.shutdown().unwrap();
}
