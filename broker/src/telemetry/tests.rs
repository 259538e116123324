use super::otlp::tests::{gauge, kv, payload};
use super::*;

fn meta(client_id: &str) -> ClientMeta {
    ClientMeta {
        client_id: client_id.into(),
        software_name: "librdkafka".into(),
        software_version: "2.16.1".into(),
        source_address: "127.0.0.1".into(),
        source_port: "50000".into(),
    }
}

fn configs(pairs: &[(&str, &str)]) -> Overrides {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn push<'a>(g: &Granted, metrics: &'a [u8]) -> Push<'a> {
    Push {
        instance_id: g.instance_id,
        subscription_id: g.subscription_id,
        terminating: false,
        compression: 0,
        metrics,
    }
}

/// The text `/metrics` would show for `t` now.
fn scrape(t: &ClientTelemetry, now: i64) -> String {
    let mut out = Vec::new();
    prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &t.families(now), &mut out)
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn given_subscriptions_when_clients_ask_then_union_of_matches_at_smallest_interval() {
    let dir = tempfile::tempdir().unwrap();
    let t = ClientTelemetry::open(dir.path(), "").unwrap();
    // No subscription: a new id, nothing to push, the default interval.
    let g = t.subscribe(Uuid::nil(), meta("app-1"), 0).unwrap();
    assert!(!g.instance_id.is_nil());
    assert!(g.metrics.is_empty());
    assert_eq!(g.interval_ms, subscription::DEFAULT_INTERVAL_MS);

    t.alter(
        "producers",
        configs(&[
            ("metrics", "org.apache.kafka.producer."),
            ("interval.ms", "1000"),
            ("match", "client_id=app-.*"),
        ]),
        false,
    )
    .unwrap();
    t.alter(
        "everyone",
        configs(&[
            ("metrics", "org.apache.kafka.consumer."),
            ("interval.ms", "2000"),
        ]),
        false,
    )
    .unwrap();
    // A changed subscription reaches a known instance at once, under a new id.
    let again = t.subscribe(g.instance_id, meta("app-1"), 10).unwrap();
    assert_eq!(
        again.metrics,
        ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    );
    assert_eq!(again.interval_ms, 1000);
    assert_ne!(again.subscription_id, g.subscription_id);
    let other = t.subscribe(Uuid::nil(), meta("batch"), 10).unwrap();
    assert_eq!(other.metrics, ["org.apache.kafka.consumer."]);
    assert_eq!(other.interval_ms, 2000);

    // Within the interval: throttled; after it: answered, with the same id (deterministic).
    assert_eq!(
        t.subscribe(g.instance_id, meta("app-1"), 500),
        Err(TelemetryError::Throttled(uuid_text(&g.instance_id)))
    );
    let later = t.subscribe(g.instance_id, meta("app-1"), 1010).unwrap();
    assert_eq!(later.subscription_id, again.subscription_id);

    // Persisted: a restarted broker computes the same subscription id.
    let reopened = ClientTelemetry::open(dir.path(), "").unwrap();
    assert_eq!(
        reopened
            .subscribe(g.instance_id, meta("app-1"), 0)
            .unwrap()
            .subscription_id,
        again.subscription_id
    );
    assert_eq!(reopened.names(), ["everyone", "producers"]);
    // An empty config removes the subscription; a bad one changes nothing.
    t.alter("everyone", Overrides::new(), false).unwrap();
    assert!(t
        .alter("x", configs(&[("match", "rack=1")]), false)
        .is_err());
    assert_eq!(t.names(), ["producers"]);
}

#[test]
fn given_pushes_when_checked_then_kafkas_order_and_metrics_shown() {
    let dir = tempfile::tempdir().unwrap();
    let t = ClientTelemetry::open(dir.path(), "").unwrap();
    t.alter(
        "all",
        configs(&[("metrics", "*"), ("interval.ms", "1000")]),
        false,
    )
    .unwrap();
    let g = t.subscribe(Uuid::nil(), meta("app-1"), 0).unwrap();
    assert_eq!(g.metrics, ["*"]);
    let body = payload(
        vec![gauge(
            "org.apache.kafka.producer.record.queue.time.avg",
            2.5,
            vec![kv("client_id", "spoofed")],
        )],
        vec![],
    );
    // Right after the get: accepted, whatever the jitter.
    t.push(&push(&g, &body), meta("app-1"), 100).unwrap();
    let text = scrape(&t, 100);
    let id = uuid_text(&g.instance_id);
    assert!(
        text.contains(&format!(
            "strom_client_producer_record_queue_time_avg{{client_instance_id=\"{id}\",client_id=\"app-1\",client_software_name=\"librdkafka\",client_software_version=\"2.16.1\",client_source_address=\"127.0.0.1\"}} 2.5"
        )),
        "{text}"
    );
    // Too soon after the last push.
    assert_eq!(
        t.push(&push(&g, &body), meta("app-1"), 500),
        Err(TelemetryError::Throttled(id.clone()))
    );
    // Checked in Kafka's order: subscription id, compression, size, then the payload.
    let mut wrong = push(&g, &body);
    wrong.subscription_id ^= 1;
    assert!(matches!(
        t.push(&wrong, meta("app-1"), 1200),
        Err(TelemetryError::UnknownSubscription(_))
    ));
    // After UNKNOWN_SUBSCRIPTION_ID the client may re-subscribe at once.
    let g = t.subscribe(g.instance_id, meta("app-1"), 1201).unwrap();
    let mut codec = push(&g, &body);
    codec.compression = 9;
    assert!(matches!(
        t.push(&codec, meta("app-1"), 1202),
        Err(TelemetryError::UnsupportedCompression(9, _))
    ));
    let g = t.subscribe(g.instance_id, meta("app-1"), 1203).unwrap();
    let big = vec![0u8; MAX_PUSH_BYTES + 1];
    assert!(matches!(
        t.push(&push(&g, &big), meta("app-1"), 1204),
        Err(TelemetryError::TooLarge(..))
    ));
    let g = t.subscribe(g.instance_id, meta("app-1"), 2300).unwrap();
    assert!(matches!(
        t.push(&push(&g, b"\xff\xff"), meta("app-1"), 2301),
        Err(TelemetryError::InvalidRecord(_))
    ));
    // A compressed push (zstd) decodes the same.
    let g = t.subscribe(g.instance_id, meta("app-1"), 3400).unwrap();
    let mut zstd = push(&g, &[]);
    let packed = zstd::encode_all(&body[..], 3).unwrap();
    zstd.metrics = &packed;
    zstd.compression = 4;
    t.push(&zstd, meta("app-1"), 3401).unwrap();
    // A terminating push is taken even inside the interval; nothing after it is.
    let mut last = push(&g, &body);
    last.terminating = true;
    t.push(&last, meta("app-1"), 3402).unwrap();
    assert!(matches!(
        t.push(&push(&g, &body), meta("app-1"), 9000),
        Err(TelemetryError::InvalidRequest(_))
    ));
    let text = scrape(&t, 9000);
    assert!(
        text.contains(
            "strom_client_telemetry_push_refused_total{error=\"UNKNOWN_SUBSCRIPTION_ID\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("strom_client_telemetry_pushes_total 3"),
        "{text}"
    );
    // Forgotten max(60 s, 3 × interval) after its last request: its series go with it.
    let text = scrape(&t, 9000 + 60_001);
    assert!(!text.contains("queue_time_avg"), "{text}");
    assert!(
        text.contains("strom_client_telemetry_instances 0"),
        "{text}"
    );
}

#[test]
fn given_the_zero_or_reserved_id_when_pushed_then_invalid_request() {
    let dir = tempfile::tempdir().unwrap();
    let t = ClientTelemetry::open(dir.path(), "").unwrap();
    for id in [Uuid::nil(), Uuid::from_u128(1)] {
        let p = Push {
            instance_id: id,
            subscription_id: 0,
            terminating: false,
            compression: 0,
            metrics: &[],
        };
        assert!(matches!(
            t.push(&p, meta("a"), 0),
            Err(TelemetryError::InvalidRequest(_))
        ));
    }
}
