use super::*;
use crate::remote::store::StoreConfig;
use crate::remote::transfer::{upload_segment, SegmentUpload, Source};
use proptest::prelude::*;

/// A v2 batch header for offsets `[base, base + n)` padded to `size` bytes (the reads only
/// look at headers).
fn batch(base: i64, n: i32, size: usize) -> Vec<u8> {
    assert!(size >= HEADER_SIZE);
    let mut b = vec![0u8; size];
    b[0..8].copy_from_slice(&base.to_be_bytes());
    b[8..12].copy_from_slice(&((size - 12) as i32).to_be_bytes());
    b[16] = 2;
    b[23..27].copy_from_slice(&(n - 1).to_be_bytes());
    b[57..61].copy_from_slice(&n.to_be_bytes());
    b
}

/// A segment of `count` batches of `per` records each, `size` bytes each, from `base`, and
/// its `.index` with an entry every `every` batches (as Kafka's index.interval.bytes does).
fn segment(base: i64, count: usize, per: i32, size: usize, every: usize) -> (Vec<u8>, Vec<u8>) {
    let (mut log, mut index) = (Vec::new(), Vec::new());
    for i in 0..count {
        let b = base + (i as i64) * per as i64;
        if i > 0 && i % every == 0 {
            let e = OffsetEntry {
                rel: (b + per as i64 - 1 - base) as u32,
                pos: log.len() as u32,
            };
            let mut raw = [0u8; 8];
            e.encode(&mut raw);
            index.extend_from_slice(&raw);
        }
        log.extend_from_slice(&batch(b, per, size));
    }
    (log, index)
}

fn offsets(buf: &[u8]) -> Vec<i64> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let h = BatchHeader::parse(&buf[at..]).unwrap();
        out.extend(h.base_offset..=h.last_offset());
        at += h.total_size();
    }
    out
}

#[test]
fn given_index_when_looking_up_then_floor_position_of_batch_ending_at_or_before() {
    let (log, index) = segment(100, 10, 5, 100, 2);
    // Entries: batch 2 (ends 114) at 200, batch 4 (ends 124) at 400, ...
    assert_eq!(index_position(&index, 100, 100), 0);
    assert_eq!(index_position(&index, 100, 113), 0);
    assert_eq!(index_position(&index, 100, 114), 200);
    assert_eq!(index_position(&index, 100, 123), 200);
    assert_eq!(index_position(&index, 100, 149), 800);
    assert_eq!(index_position(&[], 100, 149), 0);
    // A garbled tail (not increasing) ends the search.
    let mut bad = index.clone();
    bad.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    assert_eq!(index_position(&bad, 100, 1 << 40), 800);
    assert_eq!(log.len(), 1000);
}

#[test]
fn given_ranges_when_computing_chunks_then_aligned_and_bounded_by_size() {
    let size = 3 * CHUNK_BYTES + 10;
    assert_eq!(chunks_for(0, 1, size), 0..1);
    assert_eq!(chunks_for(CHUNK_BYTES - 1, 2, size), 0..2);
    assert_eq!(chunks_for(CHUNK_BYTES, CHUNK_BYTES, size), 1..2);
    assert_eq!(chunks_for(3 * CHUNK_BYTES, 1 << 30, size), 3..4);
    assert_eq!(chunks_for(size, 10, size), 0..0);
    assert_eq!(chunk_range(3, size), 3 * CHUNK_BYTES..size);
}

#[test]
fn given_buffer_when_selecting_then_whole_batches_from_target_within_limit() {
    let (log, _) = segment(0, 10, 5, 100, 100);
    let buf = Bytes::from(log);
    // From the batch holding 12 (10..15), 250 bytes allow two whole batches.
    let Selected::Batches(b) = select_batches(&buf, 12, 250, true) else {
        panic!()
    };
    assert_eq!(offsets(&b), (10..20).collect::<Vec<_>>());
    // A limit below one batch still returns the first whole.
    let Selected::Batches(b) = select_batches(&buf, 0, 1, true) else {
        panic!()
    };
    assert_eq!(offsets(&b), (0..5).collect::<Vec<_>>());
    // The first batch cut by the buffer's end: more bytes are needed.
    assert_eq!(
        select_batches(&buf.slice(..170), 7, 1, false),
        Selected::NeedBytes(200)
    );
    assert_eq!(
        select_batches(&buf.slice(..150), 7, 1, false),
        Selected::NeedBytes(161)
    );
    // Past the last batch of the segment: nothing.
    assert_eq!(
        select_batches(&buf, 50, 1000, true),
        Selected::Batches(Bytes::new())
    );
    // Not a batch.
    let junk = Bytes::from(vec![9u8; 100]);
    assert_eq!(select_batches(&junk, 0, 1000, true), Selected::Corrupt(0));
}

proptest! {
    /// Wherever the index points and whatever the limit, the read starts at the batch
    /// holding the target, is whole batches in order, and stays within the limit unless
    /// one batch alone exceeds it.
    #[test]
    fn selection_starts_at_target_and_respects_limit(
        count in 1usize..40, per in 1i32..6, size in 61usize..300, every in 1usize..8,
        pick in 0usize..1000, max_bytes in 1usize..3000,
    ) {
        let (log, index) = segment(1000, count, per, size, every);
        let total = count as i64 * per as i64;
        let target = 1000 + (pick as i64 % total);
        let from = index_position(&index, 1000, target) as usize;
        let buf = Bytes::from(log).slice(from..);
        let Selected::Batches(b) = select_batches(&buf, target, max_bytes, true) else {
            panic!("no batches")
        };
        let got = offsets(&b);
        prop_assert!(got.first().is_some_and(|&f| f <= target && target < f + per as i64));
        prop_assert!(got.windows(2).all(|w| w[1] == w[0] + 1));
        prop_assert!(b.len() <= max_bytes.max(size));
    }

    /// Bytes that are not batches never panic the selection.
    #[test]
    fn selection_of_garbage_does_not_panic(buf in proptest::collection::vec(any::<u8>(), 0..400),
        target in any::<i64>(), max in 0usize..1000, at_end in any::<bool>()) {
        let _ = select_batches(&Bytes::from(buf), target, max, at_end);
    }
}

fn seg_meta(id: &str, base: i64, end: i64, size: u64) -> RemoteSegment {
    RemoteSegment {
        id: id.into(),
        base_offset: base,
        end_offset: end,
        max_timestamp_ms: 0,
        size_bytes: size,
        leader_epochs: vec![],
        state: crate::remote::manifest::SegmentState::CopySegmentFinished,
        updated_ms: 0,
    }
}

async fn uploaded(
    store: &Arc<dyn ObjectStore>,
    log: Vec<u8>,
    index: Vec<u8>,
    txn: Vec<u8>,
) -> (String, RemoteSegment) {
    let prefix = "tenant-a/t/0".to_string();
    let size = log.len() as u64;
    let up = SegmentUpload {
        prefix: prefix.clone(),
        segment_id: "s1".into(),
        base_offset: 0,
        files: vec![
            (FileKind::Log, Source::Bytes(log.into())),
            (FileKind::OffsetIndex, Source::Bytes(index.into())),
            (FileKind::TxnIndex, Source::Bytes(txn.into())),
        ],
    };
    upload_segment(store, &up).await.unwrap();
    (prefix, seg_meta("s1", 0, 0, size))
}

#[tokio::test]
async fn given_remote_segment_when_reading_then_batches_from_offset_and_cached() {
    let root = tempfile::tempdir().unwrap();
    let store = StoreConfig::Local {
        path: root.path().join("b"),
    }
    .build()
    .unwrap();
    // Batches of 70 KiB: a read crosses chunk boundaries.
    let (log, index) = segment(0, 40, 10, 70 << 10, 3);
    let mut txn = Vec::new();
    for (f, l) in [(5i64, 8i64), (300, 320)] {
        txn.extend_from_slice(
            &AbortedTxn {
                producer_id: 1,
                first_offset: f,
                last_offset: l,
                last_stable_offset: l,
            }
            .encode(),
        );
    }
    let (prefix, mut seg) = uploaded(&store, log, index, txn).await;
    seg.end_offset = 399;
    let reader = RemoteReader::new(store.clone(), 4 << 20, 2);
    let got = reader
        .read(&prefix, &seg, 155, 200 << 10, true)
        .await
        .unwrap();
    assert!(got.cache_misses > 0);
    assert_eq!(offsets(&got.batches), (150..170).collect::<Vec<_>>());
    assert_eq!(got.aborted, Some(vec![]));
    let got = reader.read(&prefix, &seg, 0, 1, true).await.unwrap();
    assert_eq!(offsets(&got.batches), (0..10).collect::<Vec<_>>());
    assert_eq!(got.aborted.unwrap().len(), 1);
    // The same range again comes from the cache.
    let again = reader
        .read(&prefix, &seg, 155, 200 << 10, false)
        .await
        .unwrap();
    assert_eq!(offsets(&again.batches), (150..170).collect::<Vec<_>>());
    assert_eq!(again.cache_misses, 0);
    assert!(again.cache_hits > 0);
    // The last batch, and past it nothing.
    let got = reader
        .read(&prefix, &seg, 399, 1 << 30, false)
        .await
        .unwrap();
    assert_eq!(offsets(&got.batches), (390..400).collect::<Vec<_>>());
}

#[tokio::test]
async fn given_small_cache_when_reading_many_chunks_then_cache_stays_within_bound() {
    let root = tempfile::tempdir().unwrap();
    let store = StoreConfig::Local {
        path: root.path().join("b"),
    }
    .build()
    .unwrap();
    let (log, index) = segment(0, 64, 1, 100 << 10, 4);
    let (prefix, mut seg) = uploaded(&store, log, index, Vec::new()).await;
    seg.end_offset = 63;
    let bound = 2 * CHUNK_BYTES + (64 << 10);
    let reader = RemoteReader::new(store.clone(), bound, 1);
    for o in 0..64 {
        let got = reader.read(&prefix, &seg, o, 1, false).await.unwrap();
        assert_eq!(offsets(&got.batches), vec![o]);
        assert!(reader.cached_bytes() <= bound, "{}", reader.cached_bytes());
    }
}

#[tokio::test]
async fn given_store_without_objects_when_reading_then_error_not_panic() {
    let root = tempfile::tempdir().unwrap();
    let store = StoreConfig::Local {
        path: root.path().join("b"),
    }
    .build()
    .unwrap();
    let reader = RemoteReader::new(store, 1 << 20, 1);
    let seg = seg_meta("gone", 0, 9, 1000);
    let e = reader.read("tenant-a/t/0", &seg, 3, 100, false).await;
    assert!(matches!(e, Err(RemoteReadError::Transfer(_))), "{e:?}");
}
