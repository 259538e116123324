//! `__transaction_state` records in Kafka's schemas (`TransactionLogKey` v0,
//! `TransactionLogValue` v0/v1), so Kafka tools read our transaction log and we read theirs.
//!
//! Key: int16 version 0, then the transactional id (int16-length string). Value: int16
//! version, then v0 (classic encoding) or v1 (flexible: compact strings/arrays and tagged
//! fields, where tags 0/1/2 carry the previous and next producer ids and the client's
//! transaction version; Kafka's tag 3, KIP-939's next epoch, is read past). We write what
//! Kafka 4.4 writes: v1 once `transaction.version` >= 1 is finalized, else v0 — and v1
//! whenever the value holds a next producer id, which v0 cannot carry and without which a
//! reloaded rotation would be lost. A null value is a tombstone (an expired transactional
//! id).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::txn_stm::{TxnMetadata, TxnState};
use crate::coordinator::group::records::{put_compact_str, put_str, put_uvarint, Reader};

pub use crate::coordinator::group::records::RecordError;

/// One record of the transaction log: a transactional id and its state (`None`: removed).
#[derive(Debug, Clone, PartialEq)]
pub struct TxnRecord {
    pub transactional_id: String,
    pub value: Option<TxnMetadata>,
}

/// The value version to write `m` at under the finalized `transaction.version` (module doc).
pub fn value_version(transaction_version: i16, m: &TxnMetadata) -> i16 {
    if transaction_version >= 1 || m.next_producer_id != -1 {
        1
    } else {
        0
    }
}

impl TxnRecord {
    /// (key, value) as stored in the log, the value at `version` (0 or 1).
    pub fn encode(&self, version: i16) -> (Bytes, Option<Bytes>) {
        let mut k = BytesMut::new();
        k.put_i16(0);
        put_str(&mut k, &self.transactional_id);
        let flexible = version >= 1;
        let v = self.value.as_ref().map(|m| {
            let mut v = BytesMut::new();
            v.put_i16(if flexible { 1 } else { 0 });
            v.put_i64(m.producer_id);
            v.put_i16(m.producer_epoch);
            v.put_i32(m.timeout_ms);
            v.put_i8(m.state as i8);
            let len = |v: &mut BytesMut, n: usize| {
                if flexible {
                    put_uvarint(v, n as u64 + 1);
                } else {
                    v.put_i32(n as i32);
                }
            };
            // Kafka writes null partitions for a transaction with none (Empty/Complete*).
            if m.partitions.is_empty() {
                if flexible {
                    put_uvarint(&mut v, 0);
                } else {
                    v.put_i32(-1);
                }
            } else {
                let mut by_topic: Vec<(&str, Vec<i32>)> = Vec::new();
                for (t, p) in &m.partitions {
                    match by_topic.last_mut() {
                        Some((last, ps)) if *last == t.as_str() => ps.push(*p),
                        _ => by_topic.push((t.as_str(), vec![*p])),
                    }
                }
                len(&mut v, by_topic.len());
                for (t, ps) in by_topic {
                    if flexible {
                        put_compact_str(&mut v, Some(t));
                    } else {
                        put_str(&mut v, t);
                    }
                    len(&mut v, ps.len());
                    for p in ps {
                        v.put_i32(p);
                    }
                    if flexible {
                        v.put_u8(0); // the topic entry's tagged fields
                    }
                }
            }
            v.put_i64(m.last_update_ms);
            v.put_i64(m.start_ms);
            if flexible {
                // Tagged fields in tag order, each only when it differs from its default, as
                // Kafka's generated writer does.
                let mut tagged: Vec<(u64, Vec<u8>)> = Vec::new();
                if m.prev_producer_id != -1 {
                    tagged.push((0, m.prev_producer_id.to_be_bytes().to_vec()));
                }
                if m.next_producer_id != -1 {
                    tagged.push((1, m.next_producer_id.to_be_bytes().to_vec()));
                }
                if m.client_txn_version != 0 {
                    tagged.push((2, m.client_txn_version.to_be_bytes().to_vec()));
                }
                put_uvarint(&mut v, tagged.len() as u64);
                for (tag, data) in tagged {
                    put_uvarint(&mut v, tag);
                    put_uvarint(&mut v, data.len() as u64);
                    v.put_slice(&data);
                }
            }
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
        let (k, v) = rec.encode(0);
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
        let (k, v) = rec.encode(0);
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
        .encode(0)
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
        .encode(0);
        let v = v.unwrap();
        assert!(TxnRecord::decode(&k, Some(&v[..v.len() - 3])).is_err());
        assert_eq!(TxnRecord::decode(&[0, 1, 0, 0], Some(&v)).unwrap(), None);
        let mut bad = v.to_vec();
        bad[16] = 42;
        assert!(TxnRecord::decode(&k, Some(&bad)).is_err());
    }

    #[test]
    fn given_tv_level_or_rotation_when_choosing_value_version_then_kafkas_and_never_lossy() {
        let mut m = sample();
        assert_eq!(value_version(0, &m), 0);
        assert_eq!(value_version(1, &m), 1);
        assert_eq!(value_version(2, &m), 1);
        // A prepared rotation needs the next producer id after a reload: v1 even at level 0.
        m.next_producer_id = 77;
        assert_eq!(value_version(0, &m), 1);
    }

    #[test]
    fn given_v1_value_when_encoding_then_flexible_layout_with_tagged_ids_and_round_trip() {
        let mut m = sample();
        m.state = TxnState::PrepareCommit;
        m.producer_epoch = i16::MAX;
        m.prev_producer_id = 4000;
        m.next_producer_id = 77;
        m.client_txn_version = 2;
        let rec = TxnRecord {
            transactional_id: "tx-1".into(),
            value: Some(m),
        };
        let (k, v) = rec.encode(1);
        let v = v.unwrap();
        assert_eq!(&v[..2], &[0, 1]);
        assert_eq!(v[17], 3, "a compact array of two topics");
        // Last: three tagged fields (0, 1, 2), each tag, size, then the value.
        let tail: Vec<u8> = [
            vec![3, 0, 8],
            4000i64.to_be_bytes().to_vec(),
            vec![1, 8],
            77i64.to_be_bytes().to_vec(),
            vec![2, 2],
            2i16.to_be_bytes().to_vec(),
        ]
        .concat();
        assert_eq!(&v[v.len() - tail.len()..], &tail[..]);
        let mut back = TxnRecord::decode(&k, Some(&v)).unwrap().unwrap();
        assert_eq!(back, rec);
        // Defaults are left out, and an empty transaction's partitions are null.
        let mut plain = back.value.take().unwrap();
        plain.state = TxnState::CompleteCommit;
        plain.partitions.clear();
        (
            plain.prev_producer_id,
            plain.next_producer_id,
            plain.client_txn_version,
        ) = (-1, -1, 0);
        let plain = TxnRecord {
            transactional_id: "tx-1".into(),
            value: Some(plain),
        };
        let v = plain.encode(1).1.unwrap();
        assert_eq!((v[17], v[v.len() - 1]), (0, 0));
        assert_eq!(TxnRecord::decode(&k, Some(&v)).unwrap().unwrap(), plain);
    }
}
