//! Micro-benchmarks of the request path's codec work, per request: decoding a Produce
//! request (header + body, the records stay one `Bytes` slice), encoding a Fetch response
//! carrying record data, and encoding a Metadata response for a cluster of many
//! partitions — through `strom::handlers::encode_response`, the function every handler's
//! answer goes through.
//!
//! `cargo bench -p strom --bench codec`.

#[path = "../tests/common/mod.rs"]
mod common;

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use strom::handlers::encode_response;

/// A Produce v11 request frame (without the size prefix) as librdkafka sends it: one batch
/// per partition.
fn produce_frame(partitions: i32, records_per_batch: usize) -> Bytes {
    let batch = common::batch(records_per_batch, "bench");
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(common::topic_name("bench"))
            .with_partition_data(
                (0..partitions)
                    .map(|p| {
                        PartitionProduceData::default()
                            .with_index(p)
                            .with_records(Some(batch.clone()))
                    })
                    .collect(),
            )]);
    let frame = common::Client::encode_detached(ApiKey::Produce, 11, &req);
    Bytes::from(frame).slice(4..)
}

fn decode_produce(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode_produce_v11");
    for (partitions, records) in [(1, 100), (16, 100)] {
        let frame = produce_frame(partitions, records);
        g.throughput(Throughput::Bytes(frame.len() as u64));
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("{partitions}p x {records} records")),
            &frame,
            |b, frame| {
                b.iter(|| {
                    let mut buf = frame.clone();
                    let header =
                        RequestHeader::decode(&mut buf, ApiKey::Produce.request_header_version(11))
                            .unwrap();
                    let req = ProduceRequest::decode(&mut buf, 11).unwrap();
                    black_box((header, req))
                })
            },
        );
    }
    g.finish();
}

fn encode_fetch(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode_fetch_v12");
    // What one fetch of `partitions` partitions answers with 64 KiB of records each.
    let records = Bytes::from(vec![0x42u8; 64 << 10]);
    for partitions in [1, 16] {
        let resp = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(common::topic_name("bench"))
            .with_partitions(
                (0..partitions)
                    .map(|p| {
                        PartitionData::default()
                            .with_partition_index(p)
                            .with_high_watermark(1_000_000)
                            .with_records(Some(records.clone()))
                    })
                    .collect(),
            )]);
        g.throughput(Throughput::Bytes(partitions as u64 * records.len() as u64));
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("{partitions}p x 64KiB")),
            &resp,
            |b, resp| b.iter(|| encode_response(ApiKey::Fetch, 12, 7, black_box(resp)).unwrap()),
        );
    }
    g.finish();
}

fn encode_metadata(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode_metadata_v12");
    let s = |v: &str| StrBytes::from_string(v.to_string());
    for (topics, partitions) in [(1, 1), (100, 10)] {
        let resp = MetadataResponse::default()
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(0))
                .with_host(s("127.0.0.1"))
                .with_port(9092)])
            .with_cluster_id(Some(s("strom-bench")))
            .with_topics(
                (0..topics)
                    .map(|t| {
                        MetadataResponseTopic::default()
                            .with_name(Some(common::topic_name(&format!("topic-{t}"))))
                            .with_partitions(
                                (0..partitions)
                                    .map(|p| {
                                        MetadataResponsePartition::default()
                                            .with_partition_index(p)
                                            .with_leader_id(BrokerId(0))
                                            .with_replica_nodes(vec![BrokerId(0)])
                                            .with_isr_nodes(vec![BrokerId(0)])
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("{topics} topics x {partitions} partitions")),
            &resp,
            |b, resp| b.iter(|| encode_response(ApiKey::Metadata, 12, 7, black_box(resp)).unwrap()),
        );
    }
    g.finish();
}

criterion_group!(benches, decode_produce, encode_fetch, encode_metadata);
criterion_main!(benches);
