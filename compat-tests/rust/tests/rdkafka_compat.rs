//! The rdkafka crate (librdkafka) against the broker at STROM_COMPAT_BOOTSTRAP (`strom
//! serve` or Apache Kafka; compat-tests/run-clients.sh runs the same tests against both).
//! No consumer groups: the consumer uses assign() and never commits. librdkafka refuses
//! assign() without a group.id ("Local: Unknown group"), so it gets a random unused one.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_executor::block_on;
use rdkafka::admin::{
    AdminClient, AdminOptions, ConfigSource, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Header, Headers, Message, OwnedHeaders, Timestamp};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

const PARTITIONS: i32 = 3;
const TIMEOUT: Duration = Duration::from_secs(30);

fn bootstrap() -> String {
    std::env::var("STROM_COMPAT_BOOTSTRAP")
        .expect("STROM_COMPAT_BOOTSTRAP is not set (run through compat-tests/run-clients.sh)")
}

fn record_count() -> usize {
    std::env::var("STROM_COMPAT_CLIENT_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

fn topic_name(what: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "rust-rdkafka-{what}-{:08x}",
        nanos ^ std::process::id().rotate_left(16)
    )
}

/// Ten minutes in the past: explicit, yet recent enough for retention.
fn base_timestamp() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 600_000
}

/// One record as sent: what the consumer must give back byte for byte.
#[derive(Clone)]
struct Sent {
    partition: i32,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp: i64,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

fn pseudo_random(seed: usize, len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ seed as u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The record shapes every language's suite sends: null and empty keys and values,
/// no/one/repeated/empty/null-valued headers, incompressible, compressible and 100 KB values.
fn make_records(n: usize, base: i64) -> Vec<Sent> {
    (0..n)
        .map(|i| Sent {
            partition: (i % PARTITIONS as usize) as i32,
            key: match i % 7 {
                0 => None,
                1 => Some(vec![]),
                _ => Some(format!("key-{i}").into_bytes()),
            },
            value: if i % 11 == 0 {
                None
            } else if i % 11 == 1 {
                Some(vec![])
            } else if i % 13 == 5 {
                Some("compressible ".repeat(150).into_bytes())
            } else if i == 17 {
                Some(pseudo_random(i, 100_000))
            } else {
                Some(pseudo_random(i, 1 + (i * 37) % 300))
            },
            timestamp: base + i as i64,
            headers: match i % 5 {
                1 => vec![("h".into(), Some(format!("v-{i}").into_bytes()))],
                2 => vec![
                    ("dup".into(), Some(b"a".to_vec())),
                    ("dup".into(), Some(b"b".to_vec())),
                ],
                3 => vec![("empty".into(), Some(vec![]))],
                4 => vec![("null-value".into(), None)],
                _ => vec![],
            },
        })
        .collect()
}

fn admin() -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("admin client")
}

fn create_topic(topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let mut nt = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        nt = nt.set(k, v);
    }
    let opts = AdminOptions::new()
        .operation_timeout(Some(TIMEOUT))
        .request_timeout(Some(TIMEOUT));
    let res = block_on(admin().create_topics(&[nt], &opts)).expect("CreateTopics");
    assert_eq!(res.len(), 1);
    if let Err((t, code)) = &res[0] {
        panic!("CreateTopics {t}: {code:?}");
    }
    // Wait until every partition answers ListOffsets: Kafka answers CreateTopics before the
    // broker has created the partitions, and drops acks=0 records sent in between (FINDINGS.md).
    let c = consumer();
    let deadline = Instant::now() + TIMEOUT;
    for p in 0..partitions {
        while let Err(e) = c.fetch_watermarks(topic, p, Duration::from_secs(5)) {
            assert!(
                Instant::now() < deadline,
                "partition {p} of {topic} not ready: {e}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Records each delivery report: the offset, or the error, by the record's index.
struct Acks(Mutex<Vec<Option<Result<i64, KafkaError>>>>);

impl ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = Box<usize>;

    fn delivery(&self, result: &DeliveryResult<'_>, index: Self::DeliveryOpaque) {
        let r = match result {
            Ok(m) => Ok(m.offset()),
            Err((e, _)) => Err(e.clone()),
        };
        self.0.lock().unwrap()[*index] = Some(r);
    }
}

/// Sends every record and returns the offsets the acks reported (-1 under acks=0).
fn produce(topic: &str, codec: &str, mode: &str, records: &[Sent]) -> Vec<i64> {
    let (acks, idempotence) = match mode {
        "acks0" => ("0", "false"),
        "acks1" => ("1", "false"),
        "acksall" => ("all", "false"),
        "acksall-idempotent" => ("all", "true"),
        _ => unreachable!("{mode}"),
    };
    let producer: ThreadedProducer<Acks> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("compression.codec", codec)
        .set("acks", acks)
        .set("enable.idempotence", idempotence)
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000")
        .create_with_context(Acks(Mutex::new(vec![None; records.len()])))
        .expect("producer");
    for (i, s) in records.iter().enumerate() {
        let mut headers = OwnedHeaders::new();
        for (k, v) in &s.headers {
            headers = headers.insert(Header {
                key: k,
                value: v.as_deref(),
            });
        }
        let mut rec: BaseRecord<'_, [u8], [u8], Box<usize>> =
            BaseRecord::with_opaque_to(topic, Box::new(i))
                .partition(s.partition)
                .timestamp(s.timestamp)
                .headers(headers);
        if let Some(k) = &s.key {
            rec = rec.key(k.as_slice());
        }
        if let Some(v) = &s.value {
            rec = rec.payload(v.as_slice());
        }
        let mut rec = rec;
        // A full local queue is back-pressure, not an error: wait for deliveries and retry.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r))
                    if Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                    rec = r;
                }
                Err((e, _)) => panic!("send record {i}: {e}"),
            }
        }
    }
    producer.flush(Duration::from_secs(90)).expect("flush");
    let acks = std::mem::take(&mut *producer.context().0.lock().unwrap());
    acks.into_iter()
        .enumerate()
        .map(|(i, a)| match a {
            Some(Ok(o)) => o,
            Some(Err(e)) => panic!("record {i} not delivered: {e}"),
            None => panic!("record {i}: no delivery report"),
        })
        .collect()
}

fn consumer() -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", topic_name("unused-group"))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("check.crcs", "true")
        .create()
        .expect("consumer")
}

struct Got {
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp: Timestamp,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Reads every partition from the beginning until it holds want[p] records.
fn consume_all(topic: &str, want: &[usize]) -> Vec<Vec<Got>> {
    let c = consumer();
    let mut tpl = TopicPartitionList::new();
    for p in 0..want.len() as i32 {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).expect("assign");
    let mut got: Vec<Vec<Got>> = want.iter().map(|_| vec![]).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.iter().zip(want).any(|(g, w)| g.len() < *w) {
        let have: Vec<usize> = got.iter().map(Vec::len).collect();
        assert!(
            Instant::now() < deadline,
            "consume timed out: have {have:?} of {want:?}"
        );
        match c.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(e)) => panic!("consume: {e}"),
            Some(Ok(m)) => got[m.partition() as usize].push(Got {
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
                timestamp: m.timestamp(),
                headers: m
                    .headers()
                    .map(|hs| {
                        hs.iter()
                            .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default(),
            }),
        }
    }
    for (p, w) in want.iter().enumerate() {
        let (low, high) = c
            .fetch_watermarks(topic, p as i32, TIMEOUT)
            .expect("watermarks");
        assert_eq!((low, high), (0, *w as i64), "watermarks of partition {p}");
    }
    got
}

fn show(b: &Option<Vec<u8>>) -> String {
    match b {
        None => "null".into(),
        Some(v) if v.len() > 24 => format!("{} bytes {:02x?}…", v.len(), &v[..24]),
        Some(v) => format!("{:?}", String::from_utf8_lossy(v)),
    }
}

fn produce_consume(codec: &str, mode: &str) {
    let topic = topic_name(&format!("{codec}-{mode}"));
    create_topic(&topic, PARTITIONS, &[]);
    let records = make_records(record_count(), base_timestamp());
    let acked = produce(&topic, codec, mode, &records);
    let mut order: Vec<Vec<usize>> = vec![vec![]; PARTITIONS as usize];
    for (i, r) in records.iter().enumerate() {
        order[r.partition as usize].push(i);
    }
    if mode != "acks0" {
        for (p, idx) in order.iter().enumerate() {
            for (j, &i) in idx.iter().enumerate() {
                assert_eq!(
                    acked[i], j as i64,
                    "record {i} acked offset in partition {p}"
                );
            }
        }
    }
    let want: Vec<usize> = order.iter().map(Vec::len).collect();
    let got = consume_all(&topic, &want);
    let mut errs = vec![];
    for (p, idx) in order.iter().enumerate() {
        if got[p].len() != idx.len() {
            errs.push(format!(
                "partition {p}: {} records, want {}",
                got[p].len(),
                idx.len()
            ));
        }
        for (j, g) in got[p].iter().enumerate() {
            let s = &records[idx[j]];
            let at = format!("partition {p} offset {j}");
            if g.offset != j as i64 {
                errs.push(format!(
                    "{at}: offset {} (offsets must be contiguous from 0)",
                    g.offset
                ));
            }
            if g.key != s.key {
                errs.push(format!("{at}: key {}, want {}", show(&g.key), show(&s.key)));
            }
            if g.value != s.value {
                errs.push(format!(
                    "{at}: value {}, want {}",
                    show(&g.value),
                    show(&s.value)
                ));
            }
            if g.timestamp != Timestamp::CreateTime(s.timestamp) {
                errs.push(format!(
                    "{at}: timestamp {:?}, want CreateTime({})",
                    g.timestamp, s.timestamp
                ));
            }
            if g.headers != s.headers {
                errs.push(format!(
                    "{at}: headers {:?}, want {:?}",
                    g.headers, s.headers
                ));
            }
        }
    }
    assert!(
        errs.is_empty(),
        "{} differences, first: {:#?}",
        errs.len(),
        &errs[..errs.len().min(10)]
    );
}

macro_rules! produce_consume_tests {
    ($($name:ident: $codec:literal, $mode:literal;)*) => {
        $(#[test]
        fn $name() {
            produce_consume($codec, $mode);
        })*
    };
}

produce_consume_tests! {
    none_acks0: "none", "acks0";
    none_acks1: "none", "acks1";
    none_acksall: "none", "acksall";
    none_acksall_idempotent: "none", "acksall-idempotent";
    gzip_acks0: "gzip", "acks0";
    gzip_acks1: "gzip", "acks1";
    gzip_acksall: "gzip", "acksall";
    gzip_acksall_idempotent: "gzip", "acksall-idempotent";
    snappy_acks0: "snappy", "acks0";
    snappy_acks1: "snappy", "acks1";
    snappy_acksall: "snappy", "acksall";
    snappy_acksall_idempotent: "snappy", "acksall-idempotent";
    lz4_acks0: "lz4", "acks0";
    lz4_acks1: "lz4", "acks1";
    lz4_acksall: "lz4", "acksall";
    lz4_acksall_idempotent: "lz4", "acksall-idempotent";
    zstd_acks0: "zstd", "acks0";
    zstd_acks1: "zstd", "acks1";
    zstd_acksall: "zstd", "acksall";
    zstd_acksall_idempotent: "zstd", "acksall-idempotent";
}

#[test]
fn admin_create_metadata_describe_configs_delete() {
    let topic = topic_name("admin");
    create_topic(&topic, PARTITIONS, &[("max.message.bytes", "2000000")]);
    let a = admin();
    let opts = AdminOptions::new()
        .operation_timeout(Some(TIMEOUT))
        .request_timeout(Some(TIMEOUT));

    let again = block_on(a.create_topics(
        &[NewTopic::new(
            &topic,
            PARTITIONS,
            TopicReplication::Fixed(1),
        )],
        &opts,
    ))
    .expect("CreateTopics");
    assert!(
        matches!(&again[0], Err((_, RDKafkaErrorCode::TopicAlreadyExists))),
        "second CreateTopics: {:?}",
        again[0]
    );

    let md = a
        .inner()
        .fetch_metadata(Some(&topic), TIMEOUT)
        .expect("metadata");
    assert_eq!(md.topics().len(), 1);
    let t = &md.topics()[0];
    assert!(t.error().is_none(), "metadata error {:?}", t.error());
    assert_eq!(t.partitions().len(), PARTITIONS as usize);
    for p in t.partitions() {
        assert_eq!(
            p.replicas(),
            &[p.leader()],
            "replicas of partition {}",
            p.id()
        );
        assert_eq!(p.isr(), &[p.leader()], "isr of partition {}", p.id());
    }
    assert_eq!(md.brokers().len(), 1, "brokers in metadata");

    let res = block_on(a.describe_configs(&[ResourceSpecifier::Topic(&topic)], &opts))
        .expect("DescribeConfigs");
    let cfg = res[0].as_ref().expect("DescribeConfigs result");
    assert!(
        cfg.entries.len() >= 20,
        "DescribeConfigs has {} entries",
        cfg.entries.len()
    );
    let check = |name: &str, value: &str, source: ConfigSource| {
        let e = cfg.get(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(e.value.as_deref(), Some(value), "{name} value");
        assert_eq!(e.source, source, "{name} source");
    };
    check("max.message.bytes", "2000000", ConfigSource::DynamicTopic);
    check("cleanup.policy", "delete", ConfigSource::Default);
    check("retention.ms", "604800000", ConfigSource::Default);

    let del = block_on(a.delete_topics(&[&topic], &opts)).expect("DeleteTopics");
    assert!(del[0].is_ok(), "DeleteTopics: {:?}", del[0]);
}

#[test]
fn list_offsets_by_timestamp() {
    let topic = topic_name("list-offsets");
    create_topic(&topic, 1, &[]);
    let n = 200i64;
    let base = base_timestamp();
    let records: Vec<Sent> = (0..n)
        .map(|i| Sent {
            partition: 0,
            key: Some(format!("k{i}").into_bytes()),
            value: Some(format!("v{i}").into_bytes()),
            timestamp: base + 10 * i,
            headers: vec![],
        })
        .collect();
    produce(&topic, "none", "acksall-idempotent", &records);
    let c = consumer();
    // target timestamp -> expected offset; librdkafka reports "none at or after" as End (-1).
    let cases = [
        (base - 1000, Offset::Offset(0)),
        (base, Offset::Offset(0)),
        (base + 1, Offset::Offset(1)),
        (base + 570, Offset::Offset(57)),
        (base + 575, Offset::Offset(58)),
        (base + 10 * (n - 1), Offset::Offset(n - 1)),
        (base + 10 * n, Offset::End),
    ];
    for (ts, want) in cases {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, Offset::Offset(ts))
            .unwrap();
        let r = c
            .offsets_for_times(tpl, TIMEOUT)
            .expect("offsets_for_times");
        let e = r.elements_for_topic(&topic);
        assert_eq!(e.len(), 1);
        assert!(
            e[0].error().is_ok(),
            "ListOffsets at base+{}: {:?}",
            ts - base,
            e[0].error()
        );
        assert_eq!(e[0].offset(), want, "ListOffsets at base+{}", ts - base);
    }
    assert_eq!(
        c.fetch_watermarks(&topic, 0, TIMEOUT).expect("watermarks"),
        (0, n)
    );
}
