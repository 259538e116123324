//! Test support shared by the broker's unit tests, its integration tests (`tests/`) and its
//! benches: the one encoder of record batches as a client would send them. Compiled always
//! (it is small) so that integration tests, which see only the public library, use the same
//! code as the unit tests.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// A v2 record batch to encode: `records` records keyed `<tag>k<i>` and valued `<tag>v<i>`
/// (or `value_size` bytes), plain by default; `idempotent`/`transactional` make it a
/// producer's batch.
#[derive(Debug, Clone)]
pub struct TestBatch {
    pub records: usize,
    pub tag: String,
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    pub transactional: bool,
    pub compression: Compression,
    pub keyed: bool,
    pub value_size: Option<usize>,
    /// First record's timestamp; the others count up by 1 ms.
    pub timestamp_ms: i64,
    pub headers: Vec<(String, Option<Bytes>)>,
}

impl TestBatch {
    pub fn new(records: usize) -> TestBatch {
        TestBatch {
            records,
            tag: String::new(),
            producer_id: -1,
            epoch: -1,
            first_seq: -1,
            transactional: false,
            compression: Compression::None,
            keyed: true,
            value_size: None,
            timestamp_ms: crate::now_ms(),
            headers: Vec::new(),
        }
    }

    /// Keys and values prefixed `<tag>-`.
    pub fn tag(mut self, tag: &str) -> Self {
        self.tag = format!("{tag}-");
        self
    }

    /// An idempotent producer's batch (a sequence, no transaction).
    pub fn idempotent(mut self, producer_id: i64, epoch: i16, first_seq: i32) -> Self {
        self.producer_id = producer_id;
        self.epoch = epoch;
        self.first_seq = first_seq;
        self
    }

    /// A transactional producer's batch (the transactional attribute set).
    pub fn transactional(mut self, producer_id: i64, epoch: i16, first_seq: i32) -> Self {
        self.transactional = true;
        self.idempotent(producer_id, epoch, first_seq)
    }

    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    pub fn keyless(mut self) -> Self {
        self.keyed = false;
        self
    }

    pub fn value_size(mut self, bytes: usize) -> Self {
        self.value_size = Some(bytes);
        self
    }

    pub fn at(mut self, timestamp_ms: i64) -> Self {
        self.timestamp_ms = timestamp_ms;
        self
    }

    pub fn header(mut self, key: &str, value: Option<&[u8]>) -> Self {
        self.headers
            .push((key.to_string(), value.map(Bytes::copy_from_slice)));
        self
    }

    pub fn records(&self) -> Vec<Record> {
        (0..self.records)
            .map(|i| Record {
                transactional: self.transactional,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: self.producer_id,
                producer_epoch: self.epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // The encoder keeps one batch only while offset - sequence stays constant, so
                // a plain batch counts up from its base sequence -1 too.
                sequence: self.first_seq.wrapping_add(i as i32),
                timestamp: self.timestamp_ms + i as i64,
                key: self.keyed.then(|| Bytes::from(format!("{}k{i}", self.tag))),
                value: Some(match self.value_size {
                    Some(n) => Bytes::from(vec![b'v'; n]),
                    None => Bytes::from(format!("{}v{i}", self.tag)),
                }),
                headers: self
                    .headers
                    .iter()
                    .map(|(k, v)| {
                        (
                            kafka_protocol::protocol::StrBytes::from_string(k.clone()),
                            v.clone(),
                        )
                    })
                    .collect(),
            })
            .collect()
    }

    pub fn encode(&self) -> Bytes {
        self.encode_with(|_| {})
    }

    /// Encodes the records after `change` altered them (a key dropped, a timestamp moved).
    pub fn encode_with(&self, change: impl FnOnce(&mut Vec<Record>)) -> Bytes {
        let mut records = self.records();
        change(&mut records);
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: self.compression,
            },
        )
        .expect("a test batch encodes");
        buf.freeze()
    }
}
