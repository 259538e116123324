//! `__transaction_state` records in Kafka's schemas (`TransactionLogKey` v0,
//! `TransactionLogValue` v0/v1), so Kafka tools read our transaction log and we read theirs.
//!
//! Key: int16 version 0, then the transactional id (int16-length string). Value: int16
//! version; we write v0 (classic encoding, which Kafka 3 and 4 read) and read v0 and v1 (v1 is
//! flexible: compact strings/arrays and tagged fields, where tags 0/1/2 carry the previous and
//! next producer ids and the client's transaction version). A null value is a tombstone
//! (an expired transactional id).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::txn_stm::{TxnMetadata, TxnState};
use crate::coordinator::group::records::{put_str, Reader};

pub use crate::coordinator::group::records::RecordError;

/// One record of the transaction log: a transactional id and its state (`None`: removed).
#[derive(Debug, Clone, PartialEq)]
pub struct TxnRecord {
    pub transactional_id: String,
    pub value: Option<TxnMetadata>,
}

impl TxnRecord {
    /// (key, value) as stored in the log.
    pub fn encode(&self) -> (Bytes, Option<Bytes>) {
        let mut k = BytesMut::new();
        k.put_i16(0);
        put_str(&mut k, &self.transactional_id);
        let v = self.value.as_ref().map(|m| {
            let mut v = BytesMut::new();
            v.put_i16(0);
            v.put_i64(m.producer_id);
            v.put_i16(m.producer_epoch);
            v.put_i32(m.timeout_ms);
            v.put_i8(m.state as i8);
            // Kafka writes null partitions for a transaction with none (Empty/Complete*).
            if m.partitions.is_empty() {
                v.put_i32(-1);
            } else {
                let mut by_topic: Vec<(&str, Vec<i32>)> = Vec::new();
                for (t, p) in &m.partitions {
                    match by_topic.last_mut() {
                        Some((last, ps)) if *last == t.as_str() => ps.push(*p),
                        _ => by_topic.push((t.as_str(), vec![*p])),
                    }
                }
                v.put_i32(by_topic.len() as i32);
                for (t, ps) in by_topic {
                    put_str(&mut v, t);
                    v.put_i32(ps.len() as i32);
                    for p in ps {
                        v.put_i32(p);
                    }
                }
            }
            v.put_i64(m.last_update_ms);
            v.put_i64(m.start_ms);
            v.freeze()
        });
        (k.freeze(), v)
    }

    /// `Ok(None)` for a key that is not a transaction log key (skipped, as Kafka skips).
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<TxnRecord>, RecordError> {
        let mut k = Reader::new(key, false);
        if k.i16()? != 0 {
            return Ok(None);
        }
        let transactional_id = k.string()?;
        let Some(v) = value else {
            return Ok(Some(TxnRecord {
                transactional_id,
                value: None,
            }));
        };
        let mut r = Reader::new(v, false);
        let version = r.i16()?;
        if !(0..=1).contains(&version) {
            return Err(RecordError(format!("unknown value version {version}")));
        }
        r.flexible = version >= 1;
        let mut m = TxnMetadata::new(&transactional_id, r.i64()?, 0, 0);
        m.producer_epoch = r.i16()?;
        m.timeout_ms = r.i32()?;
        let status = r.i8()?;
        m.state = TxnState::from_id(status)
            .ok_or_else(|| RecordError(format!("unknown transaction status {status}")))?;
        if let Some(n) = r.len(true)? {
            for _ in 0..n {
                let topic = r.string()?;
                let parts = r.len(true)?.unwrap_or(0);
                for _ in 0..parts {
                    m.partitions.insert((topic.clone(), r.i32()?));
                }
                r.tagged_fields_with(|_, _| Ok(()))?;
            }
        }
        m.last_update_ms = r.i64()?;
        m.start_ms = r.i64()?;
        if r.flexible {
            r.tagged_fields_with(|tag, mut data: &[u8]| {
                match tag {
                    0 if data.len() == 8 => m.prev_producer_id = data.get_i64(),
                    1 if data.len() == 8 => m.next_producer_id = data.get_i64(),
                    2 if data.len() == 2 => m.client_txn_version = data.get_i16(),
                    _ => {}
                }
                Ok(())
            })?;
        }
        Ok(Some(TxnRecord {
            transactional_id,
            value: Some(m),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TxnMetadata {
        let mut m = TxnMetadata::new("tx-1", 4000, 60_000, 17);
        m.producer_epoch = 3;
        m.state = TxnState::Ongoing;
        m.partitions.insert(("a".into(), 0));
        m.partitions.insert(("a".into(), 2));
        m.partitions.insert(("b".into(), 1));
        m.start_ms = 16;
        m
    }

    #[test]
    fn given_txn_metadata_when_encoding_then_kafka_v0_layout_and_round_trip() {
        let rec = TxnRecord {
            transactional_id: "tx-1".into(),
            value: Some(sample()),
        };
        let (k, v) = rec.encode();
        assert_eq!(&k[..], &[0, 0, 0, 4, b't', b'x', b'-', b'1']);
        let v = v.unwrap();
        // version 0, producer id, epoch, timeout, status Ongoing = 1
        assert_eq!(&v[..2], &[0, 0]);
        assert_eq!(&v[2..10], &4000i64.to_be_bytes());
        assert_eq!(&v[10..12], &3i16.to_be_bytes());
        assert_eq!(&v[12..16], &60_000i32.to_be_bytes());
        assert_eq!(v[16], 1);
        assert_eq!(&v[17..21], &2i32.to_be_bytes(), "two topics");
        let back = TxnRecord::decode(&k, Some(&v)).unwrap().unwrap();
        assert_eq!(back, rec);
    }

    #[test]
    fn given_empty_partitions_when_encoding_then_null_array_and_tombstone_decodes() {
        let mut m = sample();
        m.partitions.clear();
        m.state = TxnState::CompleteCommit;
        let rec = TxnRecord {
            transactional_id: "tx-1".into(),
            value: Some(m),
        };
        let (k, v) = rec.encode();
        assert_eq!(&v.as_ref().unwrap()[17..21], &(-1i32).to_be_bytes());
        assert_eq!(TxnRecord::decode(&k, v.as_deref()).unwrap().unwrap(), rec);
        let tomb = TxnRecord::decode(&k, None).unwrap().unwrap();
        assert_eq!(tomb.value, None);
    }

    #[test]
    fn given_flexible_v1_value_when_decoding_then_tagged_producer_ids_read() {
        let mut v = BytesMut::new();
        v.put_i16(1);
        v.put_i64(9);
        v.put_i16(2);
        v.put_i32(1000);
        v.put_i8(4);
        v.put_u8(2); // compact array of one topic
        v.put_u8(2); // compact string "t"
        v.put_u8(b't');
        v.put_u8(2); // one partition
        v.put_i32(5);
        v.put_u8(0); // topic's tagged fields
        v.put_i64(11);
        v.put_i64(10);
        v.put_u8(2); // two tagged fields
        v.put_u8(0);
        v.put_u8(8);
        v.put_i64(7);
        v.put_u8(2);
        v.put_u8(2);
        v.put_i16(2);
        let k = TxnRecord {
            transactional_id: "x".into(),
            value: None,
        }
        .encode()
        .0;
        let m = TxnRecord::decode(&k, Some(&v))
            .unwrap()
            .unwrap()
            .value
            .unwrap();
        assert_eq!(
            (m.producer_id, m.producer_epoch, m.timeout_ms),
            (9, 2, 1000)
        );
        assert_eq!(m.state, TxnState::CompleteCommit);
        assert!(m.partitions.contains(&("t".to_string(), 5)));
        assert_eq!((m.last_update_ms, m.start_ms), (11, 10));
        assert_eq!((m.prev_producer_id, m.client_txn_version), (7, 2));
    }

    #[test]
    fn given_truncated_or_foreign_records_when_decoding_then_error_or_skipped() {
        let (k, v) = TxnRecord {
            transactional_id: "tx".into(),
            value: Some(sample()),
        }
        .encode();
        let v = v.unwrap();
        assert!(TxnRecord::decode(&k, Some(&v[..v.len() - 3])).is_err());
        assert_eq!(TxnRecord::decode(&[0, 1, 0, 0], Some(&v)).unwrap(), None);
        let mut bad = v.to_vec();
        bad[16] = 42;
        assert!(TxnRecord::decode(&k, Some(&bad)).is_err());
    }
}
