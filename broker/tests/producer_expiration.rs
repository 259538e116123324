//! Producer state expires as in Kafka: each shard checks every
//! `producer.id.expiration.check.interval.ms` and forgets the producers whose last batch's
//! timestamp is older than `producer.id.expiration.ms`, so the state of short-lived producers
//! does not pile up in memory. A producer that wrote recently keeps its state.

mod common;

use common::{create_topic, idempotent_batch_at, produce, producer_ids, start_with, Client};

const TOPIC: &str = "expiring";

#[test]
fn given_idle_producer_when_expiration_passes_then_its_state_is_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(dir.path(), 1, |c| {
        c.producer_id_expiration_ms = 3_600_000;
        c.producer_id_expiration_check_interval_ms = 100;
    });
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, TOPIC, 1);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // Producer 11 last wrote two hours ago (by its batch's timestamps), producer 22 now.
    let old = idempotent_batch_at(3, "old", 11, 0, now - 7_200_000);
    assert_eq!(produce(&mut c, TOPIC, 0, old).0, 0);
    let new = idempotent_batch_at(3, "new", 22, 0, now);
    assert_eq!(produce(&mut c, TOPIC, 0, new).0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while producer_ids(&mut c, TOPIC) != [22] {
        assert!(
            std::time::Instant::now() < deadline,
            "producer 11 not expired: {:?}",
            producer_ids(&mut c, TOPIC)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Forgotten means a fresh start: its next batch is accepted from any sequence.
    let again = idempotent_batch_at(2, "old", 11, 40, now);
    assert_eq!(produce(&mut c, TOPIC, 0, again).0, 0);
    assert_eq!(producer_ids(&mut c, TOPIC), [11, 22]);
    server.shutdown().unwrap();
}
