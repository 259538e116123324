//! Property tests: batch header parsing and index arithmetic.

mod common;

use proptest::prelude::*;
use storage::batch::{self, BatchHeader};
use storage::index::{OffsetIndex, TimeIndex};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn given_arbitrary_bytes_when_parsing_then_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = batch::validate_batches(&buf);
        for item in batch::BatchIter::validating(&buf) {
            let _ = item;
        }
        let _ = batch::record_timestamps(&buf);
    }

    #[test]
    fn given_header_fields_when_encoded_then_parse_returns_them(
        base in any::<i64>(), epoch in any::<i32>(), attrs in any::<i16>(), delta in any::<i32>(),
        bts in any::<i64>(), mts in any::<i64>(), pid in any::<i64>(), pep in any::<i16>(),
        seq in any::<i32>(), count in any::<i32>(), len in 49i32..10_000,
    ) {
        let mut b = Vec::new();
        b.extend_from_slice(&base.to_be_bytes());
        b.extend_from_slice(&len.to_be_bytes());
        b.extend_from_slice(&epoch.to_be_bytes());
        b.push(2);
        b.extend_from_slice(&0xdeadbeefu32.to_be_bytes());
        b.extend_from_slice(&attrs.to_be_bytes());
        b.extend_from_slice(&delta.to_be_bytes());
        b.extend_from_slice(&bts.to_be_bytes());
        b.extend_from_slice(&mts.to_be_bytes());
        b.extend_from_slice(&pid.to_be_bytes());
        b.extend_from_slice(&pep.to_be_bytes());
        b.extend_from_slice(&seq.to_be_bytes());
        b.extend_from_slice(&count.to_be_bytes());
        let h = BatchHeader::parse(&b).unwrap();
        prop_assert_eq!(h, BatchHeader {
            base_offset: base, batch_length: len, partition_leader_epoch: epoch, magic: 2,
            crc: 0xdeadbeef, attributes: attrs, last_offset_delta: delta, base_timestamp: bts,
            max_timestamp: mts, producer_id: pid, producer_epoch: pep, base_sequence: seq,
            records_count: count,
        });
        prop_assert_eq!(h.total_size(), 12 + len as usize);
        prop_assert_eq!(h.compression(), (attrs & 7) as u8);
        prop_assert_eq!(h.is_transactional(), attrs & 0x10 != 0);
        prop_assert_eq!(h.is_control(), attrs & 0x20 != 0);
    }

    #[test]
    fn given_valid_batch_when_offset_and_epoch_rewritten_then_still_valid(
        n in 1usize..10, base in 0i64..i64::MAX / 2, epoch in any::<i32>(), ts in 0i64..1 << 40,
    ) {
        let vals: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; i * 3]).collect();
        let refs: Vec<&[u8]> = vals.iter().map(|v| v.as_slice()).collect();
        let mut b = common::batch(ts, &refs);
        batch::set_base_offset(&mut b, base);
        batch::set_partition_leader_epoch(&mut b, epoch);
        let h = batch::validate_batches(&b).unwrap()[0];
        prop_assert_eq!(h.base_offset, base);
        prop_assert_eq!(h.last_offset(), base + n as i64 - 1);
        let recs = batch::record_timestamps(&b).unwrap();
        prop_assert_eq!(recs.len(), n);
        prop_assert_eq!(recs[n - 1], (base + n as i64 - 1, ts + n as i64 - 1));
        // Any single flipped bit past the CRC field is caught.
        let mut c = b.clone();
        let at = 21 + (ts as usize % (b.len() - 21));
        c[at] ^= 1;
        prop_assert!(batch::validate_batches(&c).is_err());
    }

    #[test]
    fn given_sparse_entries_when_looking_up_then_matches_linear_scan(
        steps in proptest::collection::vec((1u32..50, 1u32..5000), 0..60),
        targets in proptest::collection::vec(0i64..4000, 1..40),
        base in 0i64..1_000_000,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = OffsetIndex::open(&dir.path().join("x.index"), base, 1 << 20).unwrap();
        let mut tidx = TimeIndex::open(&dir.path().join("x.timeindex"), base, 1 << 20).unwrap();
        let (mut off, mut pos) = (base, 0u32);
        let mut model = Vec::new();
        for (d, p) in steps {
            off += d as i64;
            pos += p;
            idx.append(off, pos).unwrap();
            tidx.maybe_append(off * 10, off, false).unwrap();
            model.push((off, pos));
        }
        for t in targets {
            let target = base + t;
            let want = model.iter().rev().find(|e| e.0 <= target).copied().unwrap_or((base, 0));
            prop_assert_eq!(idx.lookup(target), want);
            let want_t = model.iter().rev().find(|e| e.0 * 10 <= target * 10 + 5)
                .map(|e| (e.0 * 10, e.0)).unwrap_or((-1, base));
            prop_assert_eq!(tidx.lookup(target * 10 + 5), want_t);
        }
        // Reloading the files gives the same entries.
        drop(idx);
        let again = OffsetIndex::open(&dir.path().join("x.index"), base, 1 << 20).unwrap();
        prop_assert_eq!(again.entries().len(), model.len());
    }
}
