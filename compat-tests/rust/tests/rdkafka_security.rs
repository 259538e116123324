//! The rdkafka crate (librdkafka with OpenSSL) over TLS with a client certificate (the
//! broker's SSL listener requires one) and over SASL_SSL with SCRAM-SHA-512, against the
//! listeners compat-tests/run-clients.sh starts on Strom and on Apache Kafka alike
//! (certificates made per run): each produces and reads back; a wrong password is refused
//! with Kafka's SASL_AUTHENTICATION_FAILED message.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(30);

fn env(name: &str) -> String {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is not set (run through compat-tests/run-clients.sh)"))
}

fn config(way: &str, password: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("ssl.ca.location", env("STROM_COMPAT_CA"));
    if way == "ssl" {
        c.set("bootstrap.servers", env("STROM_COMPAT_SSL_BOOTSTRAP"))
            .set("security.protocol", "SSL")
            .set("ssl.certificate.location", env("STROM_COMPAT_CLIENT_CERT"))
            .set("ssl.key.location", env("STROM_COMPAT_CLIENT_KEY"));
    } else {
        c.set("bootstrap.servers", env("STROM_COMPAT_SASL_SSL_BOOTSTRAP"))
            .set("security.protocol", "SASL_SSL")
            .set("sasl.mechanisms", "SCRAM-SHA-512")
            .set("sasl.username", env("STROM_COMPAT_SASL_USER"))
            .set("sasl.password", password);
    }
    c
}

fn produce_and_consume(way: &str) {
    let base = config(way, &env("STROM_COMPAT_SASL_PASSWORD"));
    let topic = format!("rust-{way}-{:08x}", rand_u32());
    let admin: AdminClient<DefaultClientContext> = base.create().expect("admin");
    let created = block_on(admin.create_topics(
        &[NewTopic::new(&topic, 1, TopicReplication::Fixed(1))],
        &AdminOptions::new().operation_timeout(Some(TIMEOUT)),
    ))
    .expect("create_topics");
    assert!(created[0].is_ok(), "{created:?}");
    let records: Vec<(String, String)> = (0..50)
        .map(|i| (format!("k{i}"), format!("v{i}-{:08x}", rand_u32())))
        .collect();
    let producer: BaseProducer = base.clone().set("acks", "all").create().expect("producer");
    for (k, v) in &records {
        producer
            .send(BaseRecord::to(&topic).partition(0).key(k).payload(v))
            .map_err(|(e, _)| e)
            .expect("send");
    }
    producer.flush(TIMEOUT).expect("flush");
    let consumer: BaseConsumer = base
        .clone()
        .set("group.id", format!("rust-{way}-{:08x}", rand_u32()))
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).expect("assign");
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < records.len() && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(500)) {
            let m = m.expect("fetch");
            got.push((
                String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
            ));
        }
    }
    assert_eq!(got, records);
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() as u32
}

#[test]
fn ssl_with_a_client_certificate_produces_and_consumes() {
    produce_and_consume("ssl");
}

#[test]
fn sasl_ssl_scram_sha_512_produces_and_consumes() {
    produce_and_consume("sasl-ssl");
}

/// Keeps the client's error events: librdkafka reports a failed SASL exchange there (a
/// metadata request just times out while it retries), served by poll().
#[derive(Default)]
struct Errors(Mutex<Vec<String>>);

impl ClientContext for Errors {
    fn error(&self, error: KafkaError, reason: &str) {
        self.0.lock().unwrap().push(format!("{error:?}: {reason}"));
    }
}
impl ConsumerContext for Errors {}

#[test]
fn sasl_ssl_wrong_password_is_refused() {
    let consumer: BaseConsumer<Errors> = config("sasl-ssl", "not-the-password")
        .set("group.id", "rust-wrong-password")
        .create_with_context(Errors::default())
        .expect("consumer");
    let deadline = Instant::now() + Duration::from_secs(20);
    let want = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512";
    loop {
        // Error events reach the context from poll(); the metadata request starts the
        // connection (and its SASL exchange).
        let _ = consumer.fetch_metadata(None, Duration::from_millis(200));
        let _ = consumer.poll(Duration::from_millis(200));
        let errors = consumer.context().0.lock().unwrap().clone();
        if errors.iter().any(|e| e.contains(want)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no SASL failure reported: {errors:?}"
        );
    }
}
