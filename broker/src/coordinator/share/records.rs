//! `__share_group_state` records in Kafka's share-coordinator format
//! (`ShareSnapshotKey` / `ShareSnapshotValue`, record type 0, of
//! `share-coordinator/src/main/resources/common/message`): the key is not flexible
//! (int16 type, string group id, uuid topic id, int32 partition); the value is flexible
//! (int16 version 0, compact array of state batches, tagged fields). A `ShareUpdate`
//! (type 1) is read as a snapshot too: Strom writes only snapshots, and a Kafka update
//! holds the same fields minus the timestamps.

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::inflight::StateBatch;

pub const SNAPSHOT_TYPE: i16 = 0;
pub const UPDATE_TYPE: i16 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StateKey {
    pub group_id: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

impl StateKey {
    /// Kafka's `SharePartitionKey.asCoordinatorKey()`: what places the key on a partition.
    pub fn coordinator_key(&self) -> String {
        format!("{}:{}:{}", self.group_id, self.topic_id, self.partition)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub snapshot_epoch: i32,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    pub create_ms: i64,
    pub write_ms: i64,
    pub batches: Vec<StateBatch>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed share state record: {0}")]
pub struct RecordError(&'static str);

pub fn encode_key(k: &StateKey) -> Bytes {
    let mut b = BytesMut::with_capacity(2 + 2 + k.group_id.len() + 16 + 4);
    b.put_i16(SNAPSHOT_TYPE);
    b.put_i16(k.group_id.len().min(i16::MAX as usize) as i16);
    b.put_slice(k.group_id.as_bytes());
    b.put_slice(k.topic_id.as_bytes());
    b.put_i32(k.partition);
    b.freeze()
}

pub fn encode_snapshot(s: &Snapshot) -> Bytes {
    let mut b = BytesMut::with_capacity(48 + s.batches.len() * 20);
    b.put_i16(0); // value version
    b.put_i32(s.snapshot_epoch);
    b.put_i32(s.state_epoch);
    b.put_i32(s.leader_epoch);
    b.put_i64(s.start_offset);
    b.put_i64(s.create_ms);
    b.put_i64(s.write_ms);
    put_uvarint(&mut b, s.batches.len() as u64 + 1);
    for &(first, last, state, count) in &s.batches {
        b.put_i64(first);
        b.put_i64(last);
        b.put_i8(state);
        b.put_i16(count);
        put_uvarint(&mut b, 0); // no tagged fields
    }
    put_uvarint(&mut b, 0);
    b.freeze()
}

/// The key's record type and the key (`None` for a type this module does not know).
pub fn decode_key(mut b: &[u8]) -> Result<Option<StateKey>, RecordError> {
    let kind = take_i16(&mut b)?;
    if kind != SNAPSHOT_TYPE && kind != UPDATE_TYPE {
        return Ok(None);
    }
    let len = take_i16(&mut b)?;
    let len = usize::try_from(len).map_err(|_| RecordError("negative group id length"))?;
    let group = take(&mut b, len)?;
    let group_id = String::from_utf8(group.to_vec()).map_err(|_| RecordError("group id utf-8"))?;
    let id: [u8; 16] = take(&mut b, 16)?.try_into().expect("16 bytes");
    let partition = take_i32(&mut b)?;
    Ok(Some(StateKey {
        group_id,
        topic_id: Uuid::from_bytes(id),
        partition,
    }))
}

/// A snapshot value (update values carry no timestamps: read as 0).
pub fn decode_value(kind_is_update: bool, mut b: &[u8]) -> Result<Snapshot, RecordError> {
    let _version = take_i16(&mut b)?;
    let snapshot_epoch = take_i32(&mut b)?;
    let state_epoch = if kind_is_update { 0 } else { take_i32(&mut b)? };
    let leader_epoch = take_i32(&mut b)?;
    let start_offset = take_i64(&mut b)?;
    let (create_ms, write_ms) = if kind_is_update {
        (0, 0)
    } else {
        (take_i64(&mut b)?, take_i64(&mut b)?)
    };
    let n = take_uvarint(&mut b)?
        .checked_sub(1)
        .ok_or(RecordError("null state batches"))?;
    // Each batch is at least 20 bytes: a count larger than what is left is a lie.
    if n > (b.len() / 20) as u64 {
        return Err(RecordError("state batch count past the record"));
    }
    let mut batches = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let first = take_i64(&mut b)?;
        let last = take_i64(&mut b)?;
        let state = take(&mut b, 1)?[0] as i8;
        let count = take_i16(&mut b)?;
        skip_tagged(&mut b)?;
        if last < first {
            return Err(RecordError("state batch ends before it starts"));
        }
        batches.push((first, last, state, count));
    }
    Ok(Snapshot {
        snapshot_epoch,
        state_epoch,
        leader_epoch,
        start_offset,
        create_ms,
        write_ms,
        batches,
    })
}

/// Whether a key's bytes name an update record (type 1).
pub fn is_update(key: &[u8]) -> bool {
    key.get(..2) == Some(&UPDATE_TYPE.to_be_bytes())
}

fn put_uvarint(b: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], RecordError> {
    if b.len() < n {
        return Err(RecordError("truncated"));
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

fn take_i16(b: &mut &[u8]) -> Result<i16, RecordError> {
    Ok(i16::from_be_bytes(take(b, 2)?.try_into().expect("2 bytes")))
}

fn take_i32(b: &mut &[u8]) -> Result<i32, RecordError> {
    Ok(i32::from_be_bytes(take(b, 4)?.try_into().expect("4 bytes")))
}

fn take_i64(b: &mut &[u8]) -> Result<i64, RecordError> {
    Ok(i64::from_be_bytes(take(b, 8)?.try_into().expect("8 bytes")))
}

fn take_uvarint(b: &mut &[u8]) -> Result<u64, RecordError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = take(b, 1)?[0];
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(RecordError("varint too long"))
}

fn skip_tagged(b: &mut &[u8]) -> Result<(), RecordError> {
    let n = take_uvarint(b)?;
    for _ in 0..n {
        let _tag = take_uvarint(b)?;
        let len = take_uvarint(b)?;
        let len = usize::try_from(len).map_err(|_| RecordError("tagged field too long"))?;
        take(b, len)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn given_a_snapshot_when_encoded_then_kafka_layout_and_round_trip() {
        let key = StateKey {
            group_id: "g".into(),
            topic_id: Uuid::from_u128(1),
            partition: 3,
        };
        let k = encode_key(&key);
        // type 0, len 1, "g", 16-byte uuid, partition 3.
        assert_eq!(&k[..5], &[0, 0, 0, 1, b'g']);
        assert_eq!(k.len(), 2 + 2 + 1 + 16 + 4);
        assert_eq!(decode_key(&k).unwrap(), Some(key));
        let s = Snapshot {
            snapshot_epoch: 4,
            state_epoch: 0,
            leader_epoch: 0,
            start_offset: 10,
            create_ms: 1,
            write_ms: 2,
            batches: vec![(10, 12, 0, 1), (13, 13, 2, 1)],
        };
        let v = encode_snapshot(&s);
        assert_eq!(v.len(), 2 + 12 + 24 + 1 + 2 * 20 + 1);
        assert_eq!(decode_value(false, &v).unwrap(), s);
    }

    proptest! {
        #[test]
        fn prop_decoding_arbitrary_bytes_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_key(&b);
            let _ = decode_value(false, &b);
            let _ = decode_value(true, &b);
        }
    }
}
