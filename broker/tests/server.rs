//! The broker over real TCP, started in-process on port 0 (mini-redis style): restart
//! persistence, the data-dir lock, malformed input, many connections.

mod common;

use std::time::Duration;

use bytes::BytesMut;
use common::{
    batch, create_topic, fetch_all, idempotent_batch, produce, start, topic_name, Client,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;

#[test]
fn given_data_when_broker_restarts_then_everything_is_there_with_same_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), 2);
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, "keep", 4);
    for p in 0..4 {
        assert_eq!(produce(&mut c, "keep", p, batch(3, "a")), (0, 0));
        assert_eq!(produce(&mut c, "keep", p, batch(2, "b")), (0, 3));
    }
    let before: Vec<_> = (0..4).map(|p| fetch_all(&mut c, "keep", p)).collect();
    drop(c);
    server.shutdown().unwrap();
    assert!(
        dir.path().join(".kafka_cleanshutdown").exists(),
        "clean-shutdown marker written"
    );

    let server = start(dir.path(), 3); // a different shard count moves partitions' homes
    let mut c = Client::connect(server.kafka_addr);
    let after: Vec<_> = (0..4).map(|p| fetch_all(&mut c, "keep", p)).collect();
    assert_eq!(before, after);
    assert_eq!(after[0].len(), 5);
    assert_eq!(produce(&mut c, "keep", 0, batch(1, "c")), (0, 5));
    drop(c);
    server.shutdown().unwrap();
}

#[test]
fn given_idempotent_producer_when_broker_restarts_then_retry_is_a_duplicate_and_sequence_continues()
{
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), 1);
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, "idem", 1);
    let first = idempotent_batch(3, "a", 77, 0, 0);
    assert_eq!(produce(&mut c, "idem", 0, first.clone()), (0, 0));
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(2, "b", 77, 0, 3)),
        (0, 3)
    );
    drop(c);
    server.shutdown().unwrap();
    let snapshots: Vec<_> = std::fs::read_dir(dir.path().join("idem-0"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".snapshot"))
        .collect();
    assert_eq!(
        snapshots.len(),
        1,
        "one producer snapshot at clean shutdown"
    );

    let server = start(dir.path(), 1);
    let mut c = Client::connect(server.kafka_addr);
    // A retry of the last batch is answered with its original offset and not stored again.
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(2, "b", 77, 0, 3)),
        (0, 3)
    );
    // A gap is still refused; the next in-sequence batch lands right after.
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(1, "c", 77, 0, 9)).0,
        45
    );
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(1, "c", 77, 0, 5)),
        (0, 5)
    );
    assert_eq!(fetch_all(&mut c, "idem", 0).len(), 6);
    drop(c);
    server.shutdown().unwrap();
}

#[test]
fn given_corrupt_durable_log_when_restarting_then_that_partition_offline_and_others_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), 1);
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, "two", 2);
    for p in 0..2 {
        assert_eq!(produce(&mut c, "two", p, batch(3, "a")), (0, 0));
        assert_eq!(produce(&mut c, "two", p, batch(3, "b")), (0, 3));
    }
    drop(c);
    server.shutdown().unwrap();
    // Flip a byte inside the first batch of partition 0: below the recovery point, so storage
    // refuses to open that log rather than cutting acknowledged data.
    let seg = dir.path().join("two-0").join("00000000000000000000.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[70] ^= 0xff;
    std::fs::write(&seg, bytes).unwrap();

    let server = start(dir.path(), 1);
    let mut c = Client::connect(server.kafka_addr);
    assert_eq!(
        produce(&mut c, "two", 0, batch(1, "c")).0,
        56,
        "KAFKA_STORAGE_ERROR"
    );
    assert_eq!(produce(&mut c, "two", 1, batch(1, "c")), (0, 6));
    assert_eq!(fetch_all(&mut c, "two", 1).len(), 7);
    drop(c);
    server.shutdown().unwrap();
}

#[test]
fn given_running_broker_when_second_starts_on_same_dir_then_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), 1);
    let config = strom::config::BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        schema_registry_listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_path_buf(),
        shards: 1,
        ..Default::default()
    };
    let err = match strom::Server::start(config, Default::default()) {
        Ok(_) => panic!("second broker started on a locked dir"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("lock"), "{err}");
    server.shutdown().unwrap();
}

#[test]
fn given_malformed_frames_when_sent_then_connection_closed_and_others_unaffected() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), 2);
    let mut healthy = Client::connect(server.kafka_addr);
    create_topic(&mut healthy, "t", 1);
    let garbage: Vec<Vec<u8>> = vec![
        // 2 GiB length prefix: refused before allocating.
        vec![0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0],
        // Negative length.
        vec![0xff, 0xff, 0xff, 0xf0],
        // Too short for a header.
        vec![0, 0, 0, 3, 1, 2, 3],
        // Unknown API key 999.
        vec![0, 0, 0, 10, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff],
        // Produce v99 (unsupported version).
        vec![0, 0, 0, 10, 0, 0, 0, 99, 0, 0, 0, 1, 0xff, 0xff],
        // Produce v9 with a body of random bytes.
        {
            let mut f = vec![0, 0, 0, 30, 0, 0, 0, 9, 0, 0, 0, 1, 0x00];
            f.extend((0..21).map(|i| (i * 37 + 11) as u8));
            f
        },
    ];
    for bytes in garbage {
        let mut c = Client::connect(server.kafka_addr);
        c.send_raw(&bytes).unwrap();
        // The broker closes the connection without answering (or after a partial frame, on timeout of ours).
        let r = c.read_frame();
        assert!(r.is_err(), "broker answered garbage {bytes:?}");
        // The healthy connection still produces.
        let (code, _) = produce(&mut healthy, "t", 0, batch(1, "ok"));
        assert_eq!(code, 0);
    }
    // A truncated frame followed by a hang-up leaves nothing behind either.
    {
        let mut c = Client::connect(server.kafka_addr);
        c.send_raw(&[0, 0, 1, 0, 0, 0]).unwrap();
    }
    let values = fetch_all(&mut healthy, "t", 0);
    assert_eq!(
        values.len(),
        6,
        "only the healthy client's records are stored"
    );
    server.shutdown().unwrap();
}

#[test]
fn given_a_thousand_idle_connections_when_a_client_works_then_it_is_served() {
    // Both ends of 1000 connections live in this process: make room for 2000+ descriptors
    // where the soft limit is the common 1024.
    raise_fd_limit(4096);
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), 2);
    let idle: Vec<std::net::TcpStream> = (0..1000)
        .map(|_| std::net::TcpStream::connect(server.kafka_addr).expect("connect"))
        .collect();
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, "busy", 1);
    for i in 0..20 {
        assert_eq!(produce(&mut c, "busy", 0, batch(2, "x")), (0, i * 2));
    }
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(r.error_code, 0);
    drop(idle);
    std::thread::sleep(Duration::from_millis(100));
    server.shutdown().unwrap();
}

#[test]
fn given_pipelined_requests_when_sent_back_to_back_then_answers_in_request_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), 2);
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, "p", 8);
    // Write 40 produce requests to different partitions (homes on different shards) without
    // reading, then read: correlation ids must come back in order.
    let mut frames = BytesMut::new();
    for i in 0..40 {
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name("p"))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(i % 8)
                    .with_records(Some(batch(1, "q")))])]);
        frames.extend_from_slice(&c.encode(ApiKey::Produce, 11, &req));
    }
    c.send_raw(&frames).unwrap();
    for expected in 2..=41 {
        // (correlation id 1 was the CreateTopics call)
        let mut f = c.read_frame().unwrap();
        let corr = bytes::Buf::get_i32(&mut f);
        assert_eq!(corr, expected);
    }
    server.shutdown().unwrap();
}

fn raise_fd_limit(want: u64) {
    // SAFETY: getrlimit/setrlimit only read and write the rlimit struct we own.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < want {
            l.rlim_cur = want.min(l.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}
