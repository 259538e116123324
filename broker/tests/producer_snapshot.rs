//! Producer snapshots at segment rolls, as Kafka takes them: after kill -9 the restarted
//! broker rebuilds producer state from the newest snapshot at or below the checkpointed
//! recovery point instead of replaying the whole log.
//!
//! What makes the snapshot observable: DeleteRecords moves the log start past every batch
//! of an idempotent producer. Kafka keeps that producer's state (it lives in the snapshots,
//! not in the deleted batches), so its retry is still answered as a duplicate. A broker
//! that rebuilt producer state by replaying the log from its start would no longer know the
//! producer and refuse the retry with OUT_OF_ORDER_SEQUENCE_NUMBER.
//!
//! The broker to kill runs in a child process: this test binary re-executed with
//! `STROM_SNAPSHOT_KILL_CHILD` set.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{
    batch, child_ready, idempotent_batch, kill_child_when_ready, produce, start_with, topic_name,
    Client,
};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "snap";
const CHILD_ENV: &str = "STROM_SNAPSHOT_KILL_CHILD";
const TEST_NAME: &str =
    "given_log_start_past_a_producers_batches_when_killed_and_restarted_then_its_state_comes_from_the_roll_snapshot";
const PID: i64 = 77;

fn config(c: &str, v: &str) -> CreatableTopicConfig {
    CreatableTopicConfig::default()
        .with_name(StrBytes::from_string(c.into()))
        .with_value(Some(StrBytes::from_string(v.into())))
}

fn delete_records_before(c: &mut Client, offset: i64) -> (i16, i64) {
    let req = DeleteRecordsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(topic_name(TOPIC))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(offset)])]);
    let r: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, 2, &req);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

/// `snap-0`'s entry in a checkpoint file, if there is one.
fn checkpointed(dir: &Path, file: &str) -> Option<i64> {
    let text = std::fs::read_to_string(dir.join(file)).ok()?;
    text.lines()
        .filter_map(|l| l.strip_prefix(&format!("{TOPIC} 0 ")))
        .find_map(|o| o.trim().parse().ok())
}

fn snapshots(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join(format!("{TOPIC}-0")))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".snapshot"))
        .collect();
    v.sort();
    v
}

/// The child: one segment per batch (segment.bytes=14), an idempotent producer's batches
/// at 0..6, plain ones after, the log start moved to 6, the recovery point checkpointed
/// past the last roll; says READY and waits to be killed.
fn child(dir: &str) -> ! {
    let dir = Path::new(dir);
    let server = start_with(dir, 1, |c| c.log_flush_offset_checkpoint_interval_ms = 50);
    let mut c = Client::connect(server.kafka_addr);
    let req = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name(TOPIC))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(vec![
            config("segment.bytes", "14"),
            // The test batches carry 2023 timestamps: keep retention out of it.
            config("retention.ms", "-1"),
        ])]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(r.topics[0].error_code, 0);
    for (i, seq) in [0, 2, 4].into_iter().enumerate() {
        let b = idempotent_batch(2, "p", PID, 0, seq);
        assert_eq!(produce(&mut c, TOPIC, 0, b), (0, 2 * i as i64));
    }
    assert_eq!(produce(&mut c, TOPIC, 0, batch(1, "a")), (0, 6));
    assert_eq!(delete_records_before(&mut c, 6), (0, 6));
    // This append rolls: its snapshot (at 8) still holds the producer, whose batches are
    // all below the log start now.
    assert_eq!(produce(&mut c, TOPIC, 0, batch(1, "b")), (0, 7));
    let deadline = Instant::now() + Duration::from_secs(60);
    while checkpointed(dir, "recovery-point-offset-checkpoint") != Some(8)
        || checkpointed(dir, "log-start-offset-checkpoint") != Some(6)
    {
        assert!(Instant::now() < deadline, "checkpoints never reached 8 / 6");
        std::thread::sleep(Duration::from_millis(20));
    }
    child_ready()
}

#[test]
fn given_log_start_past_a_producers_batches_when_killed_and_restarted_then_its_state_comes_from_the_roll_snapshot(
) {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
    }
    let dir = tempfile::tempdir().unwrap();
    kill_child_when_ready(TEST_NAME, CHILD_ENV, dir.path());
    // Written at rolls, not at shutdown; none below the log start is kept.
    let snaps = snapshots(dir.path());
    assert!(
        snaps.contains(&format!("{:020}.snapshot", 8)),
        "a snapshot at the last roll: {snaps:?}"
    );
    assert!(
        snaps.iter().all(|n| n[..20].parse::<i64>().unwrap() >= 6),
        "snapshots below the log start removed: {snaps:?}"
    );

    let server = start_with(dir.path(), 1, |_| {});
    let mut c = Client::connect(server.kafka_addr);
    // The retry of the producer's last batch is a duplicate, answered with its original
    // offset although that offset is below the log start now.
    assert_eq!(
        produce(&mut c, TOPIC, 0, idempotent_batch(2, "p", PID, 0, 4)),
        (0, 4)
    );
    // A gap is still refused; the next in-sequence batch lands at the log end.
    assert_eq!(
        produce(&mut c, TOPIC, 0, idempotent_batch(1, "p", PID, 0, 9)).0,
        45
    );
    assert_eq!(
        produce(&mut c, TOPIC, 0, idempotent_batch(1, "p", PID, 0, 6)),
        (0, 8)
    );
    drop(c);
    server.shutdown().unwrap();
}
