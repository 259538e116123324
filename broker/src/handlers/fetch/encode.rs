//! The Fetch response encoder that does not copy record data.
//!
//! Everything but the records goes through a small buffer; each partition's records are the
//! read's own `Bytes` slices of the mmapped segments, put into the frame's chunk list as they
//! are, so the connection writes them from the page cache to the socket (vectored write).
//! The kafka-protocol crate's encoder would copy every byte into its output buffer.
//!
//! The layout is Kafka's `FetchResponse` v4–v18, field for field as the crate's generated
//! encoder writes it (the test below holds the two byte for byte over every version). The
//! sub-structures that carry no records (aborted transactions, leader hints, node endpoints)
//! are encoded by the crate.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion};

use super::super::{FrameError, ResponseFrame};

/// A partition's records: the read's chunks (batch aligned, in offset order), or `None` for a
/// null records field (a partition with an error).
pub type RecordChunks = Option<Vec<Bytes>>;

/// Encodes `resp` (whose partitions' `records` are ignored) with `records[t][p]` as the
/// records of partition `p` of topic `t`, as a frame: size prefix, response header, body.
pub fn encode(
    resp: &FetchResponse,
    records: &[Vec<RecordChunks>],
    version: i16,
    correlation_id: i32,
) -> Result<ResponseFrame, FrameError> {
    let fail = |message: String| FrameError::Encode {
        key: ApiKey::Fetch.into(),
        version,
        message,
    };
    if !(4..=18).contains(&version) {
        return Err(fail("Fetch response versions are 4..=18".into()));
    }
    if records.len() != resp.responses.len()
        || records
            .iter()
            .zip(&resp.responses)
            .any(|(r, t)| r.len() != t.partitions.len())
    {
        return Err(fail(
            "records do not match the response's partitions".into(),
        ));
    }
    let mut w = ChunkWriter::default();
    let flexible = version >= 12;
    w.buf.put_i32(resp.throttle_time_ms);
    if version >= 7 {
        w.buf.put_i16(resp.error_code);
        w.buf.put_i32(resp.session_id);
    }
    w.array_len(resp.responses.len(), flexible);
    for (topic, chunks) in resp.responses.iter().zip(records) {
        encode_topic(&mut w, topic, chunks, version).map_err(|e| fail(format!("{e:#}")))?;
    }
    if flexible {
        if version >= 16 && !resp.node_endpoints.is_empty() {
            w.varint(1);
            let mut tagged = BytesMut::new();
            put_varint(&mut tagged, resp.node_endpoints.len() as u32 + 1);
            for n in &resp.node_endpoints {
                n.encode(&mut tagged, version)
                    .map_err(|e| fail(format!("{e:#}")))?;
            }
            w.varint(0);
            w.varint(tagged.len() as u32);
            w.buf.extend_from_slice(&tagged);
        } else {
            w.varint(0);
        }
    }
    let mut body = w.finish();
    // Size prefix and header in front of the body.
    let header_version = FetchResponse::header_version(version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_size = header
        .compute_size(header_version)
        .map_err(|e| fail(format!("{e:#}")))?;
    let size = header_size + body.iter().map(Bytes::len).sum::<usize>();
    let mut head = BytesMut::with_capacity(4 + header_size);
    head.put_i32(i32::try_from(size).map_err(|_| fail(format!("{size} bytes is too large")))?);
    header
        .encode(&mut head, header_version)
        .map_err(|e| fail(format!("{e:#}")))?;
    body.insert(0, head.freeze());
    Ok(ResponseFrame { chunks: body })
}

fn encode_topic(
    w: &mut ChunkWriter,
    topic: &FetchableTopicResponse,
    records: &[RecordChunks],
    version: i16,
) -> anyhow::Result<()> {
    let flexible = version >= 12;
    if version <= 12 {
        w.string(topic.topic.as_str(), flexible);
    }
    if version >= 13 {
        w.buf.put_slice(topic.topic_id.as_bytes());
    }
    w.array_len(topic.partitions.len(), flexible);
    for (p, chunks) in topic.partitions.iter().zip(records) {
        encode_partition(w, p, chunks, version)?;
    }
    if flexible {
        w.varint(0);
    }
    Ok(())
}

fn encode_partition(
    w: &mut ChunkWriter,
    p: &PartitionData,
    records: &RecordChunks,
    version: i16,
) -> anyhow::Result<()> {
    let flexible = version >= 12;
    w.buf.put_i32(p.partition_index);
    w.buf.put_i16(p.error_code);
    w.buf.put_i64(p.high_watermark);
    w.buf.put_i64(p.last_stable_offset);
    if version >= 5 {
        w.buf.put_i64(p.log_start_offset);
    }
    match &p.aborted_transactions {
        None if flexible => w.varint(0),
        None => w.buf.put_i32(-1),
        Some(list) => {
            w.array_len(list.len(), flexible);
            for t in list {
                t.encode(&mut w.buf, version)?;
            }
        }
    }
    if version >= 11 {
        w.buf.put_i32(p.preferred_read_replica.0);
    } else if p.preferred_read_replica != -1 {
        anyhow::bail!("preferred_read_replica needs Fetch v11");
    }
    match records {
        None if flexible => w.varint(0),
        None => w.buf.put_i32(-1),
        Some(chunks) => {
            let len: usize = chunks.iter().map(Bytes::len).sum();
            if flexible {
                w.varint(u32::try_from(len + 1)?);
            } else {
                w.buf.put_i32(i32::try_from(len)?);
            }
            for c in chunks {
                w.chunk(c.clone());
            }
        }
    }
    if flexible {
        let mut tagged: Vec<(u32, BytesMut)> = Vec::new();
        if p.diverging_epoch != Default::default() {
            let mut b = BytesMut::new();
            p.diverging_epoch.encode(&mut b, version)?;
            tagged.push((0, b));
        }
        if p.current_leader != Default::default() {
            let mut b = BytesMut::new();
            p.current_leader.encode(&mut b, version)?;
            tagged.push((1, b));
        }
        if p.snapshot_id != Default::default() {
            let mut b = BytesMut::new();
            p.snapshot_id.encode(&mut b, version)?;
            tagged.push((2, b));
        }
        w.varint(tagged.len() as u32);
        for (tag, b) in tagged {
            w.varint(tag);
            w.varint(b.len() as u32);
            w.buf.extend_from_slice(&b);
        }
    }
    Ok(())
}

/// Small fields into `buf`; record slices as chunks of their own.
#[derive(Default)]
struct ChunkWriter {
    chunks: Vec<Bytes>,
    buf: BytesMut,
}

impl ChunkWriter {
    fn chunk(&mut self, c: Bytes) {
        if c.is_empty() {
            return;
        }
        if !self.buf.is_empty() {
            self.chunks.push(self.buf.split().freeze());
        }
        self.chunks.push(c);
    }

    fn finish(mut self) -> Vec<Bytes> {
        if !self.buf.is_empty() {
            self.chunks.push(self.buf.split().freeze());
        }
        self.chunks
    }

    fn varint(&mut self, v: u32) {
        put_varint(&mut self.buf, v);
    }

    fn array_len(&mut self, n: usize, flexible: bool) {
        if flexible {
            self.varint(n as u32 + 1);
        } else {
            self.buf.put_i32(n as i32);
        }
    }

    fn string(&mut self, s: &str, flexible: bool) {
        if flexible {
            self.varint(s.len() as u32 + 1);
        } else {
            self.buf.put_i16(s.len() as i16);
        }
        self.buf.put_slice(s.as_bytes());
    }
}

fn put_varint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, LeaderIdAndEpoch, NodeEndpoint,
    };
    use kafka_protocol::messages::{BrokerId, ProducerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use proptest::prelude::*;

    /// One partition of a generated response: its record chunks (None = null), error code,
    /// and whether it carries aborted transactions and leader hints.
    type Part = (Option<Vec<Vec<u8>>>, i16, bool);

    /// A response as the broker builds one, with its records beside it.
    fn response(
        parts: &[Part],
        version: i16,
        endpoints: bool,
    ) -> (FetchResponse, Vec<Vec<RecordChunks>>) {
        let mut topics = Vec::new();
        let mut records = Vec::new();
        for (t, chunk) in parts.chunks(2).enumerate() {
            let mut partitions = Vec::new();
            let mut recs = Vec::new();
            for (i, (data, code, aborted)) in chunk.iter().enumerate() {
                let mut p = PartitionData::default()
                    .with_partition_index(i as i32)
                    .with_error_code(*code)
                    .with_high_watermark(100 + i as i64)
                    .with_last_stable_offset(90)
                    .with_log_start_offset(if version >= 5 { 3 } else { -1 })
                    .with_preferred_read_replica(BrokerId(if version >= 11 { 2 } else { -1 }))
                    .with_aborted_transactions(aborted.then(|| {
                        vec![AbortedTransaction::default()
                            .with_producer_id(ProducerId(7))
                            .with_first_offset(11)]
                    }));
                if version >= 12 && *aborted {
                    p = p
                        .with_current_leader(
                            LeaderIdAndEpoch::default()
                                .with_leader_id(BrokerId(1))
                                .with_leader_epoch(4),
                        )
                        .with_diverging_epoch(
                            EpochEndOffset::default().with_epoch(3).with_end_offset(50),
                        );
                }
                recs.push(
                    data.as_ref()
                        .map(|cs| cs.iter().map(|c| Bytes::from(c.clone())).collect()),
                );
                partitions.push(p);
            }
            topics.push(
                FetchableTopicResponse::default()
                    .with_topic(TopicName(StrBytes::from_string(format!("topic-{t}"))))
                    .with_topic_id(uuid::Uuid::from_u128(t as u128 + 1))
                    .with_partitions(partitions),
            );
            records.push(recs);
        }
        let mut resp = FetchResponse::default()
            .with_throttle_time_ms(5)
            .with_responses(topics);
        if version >= 7 {
            resp = resp.with_error_code(0).with_session_id(42);
        }
        if version >= 16 && endpoints {
            resp = resp.with_node_endpoints(vec![NodeEndpoint::default()
                .with_node_id(BrokerId(1))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(9092)]);
        }
        (resp, records)
    }

    /// What the crate's own encoder writes for the same response, records inlined.
    fn crate_encoding(
        resp: &FetchResponse,
        records: &[Vec<RecordChunks>],
        version: i16,
    ) -> BytesMut {
        let mut whole = resp.clone();
        for (t, recs) in whole.responses.iter_mut().zip(records) {
            for (p, r) in t.partitions.iter_mut().zip(recs) {
                p.records = r.as_ref().map(|cs| {
                    let mut b = BytesMut::new();
                    for c in cs {
                        b.extend_from_slice(c);
                    }
                    b.freeze()
                });
            }
        }
        crate::handlers::encode_response(ApiKey::Fetch, version, 9, &whole).unwrap()
    }

    proptest! {
        #[test]
        fn given_any_response_when_encoding_without_copies_then_same_bytes_as_the_crate(
            version in 4i16..=18,
            parts in proptest::collection::vec(
                (
                    proptest::option::of(proptest::collection::vec(
                        proptest::collection::vec(any::<u8>(), 0..64), 0..4)),
                    prop_oneof![Just(0i16), Just(1i16), Just(3i16)],
                    any::<bool>(),
                ),
                0..6,
            ),
            endpoints in any::<bool>(),
        ) {
            let (resp, records) = response(&parts, version, endpoints);
            let frame = encode(&resp, &records, version, 9).unwrap();
            prop_assert_eq!(frame.to_bytes(), crate_encoding(&resp, &records, version));
        }
    }

    #[test]
    fn given_records_when_encoding_then_their_bytes_are_chunks_of_their_own() {
        let data = Bytes::from(vec![7u8; 4096]);
        let (resp, _) = response(&[(Some(vec![]), 0, false)], 12, false);
        let records = vec![vec![Some(vec![data.clone()])]];
        let frame = encode(&resp, &records, 12, 1).unwrap();
        // The very allocation the read returned, not a copy of it.
        assert!(frame
            .chunks
            .iter()
            .any(|c| c.as_ptr() == data.as_ptr() && c.len() == data.len()));
    }
}
