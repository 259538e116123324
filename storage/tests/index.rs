//! The generic lazy index against a model, for both entry kinds: whatever the sequence of
//! appends, truncations, unloads, reopenings and preallocation changes, the entries in
//! memory, the lookups and the file agree with a plain vector; and any bytes at all in an
//! index file load as a valid prefix of them.

use proptest::prelude::*;
use storage::index::{Bounds, IndexEntry, LazyIndex, OffsetEntry, TimeEntry};

const MAX_BYTES: u64 = 1 << 16;

/// Builds entries of one kind for the model test.
trait Gen: IndexEntry {
    /// An entry after `prev` (`a`, `b` >= 0 step its two fields), or, when `backwards`,
    /// one that does not follow it (to be skipped).
    fn after(prev: Option<Self>, a: u32, b: u32, backwards: bool) -> Self;
}

impl Gen for OffsetEntry {
    fn after(prev: Option<Self>, a: u32, b: u32, backwards: bool) -> Self {
        let p = prev.unwrap_or(OffsetEntry { rel: 0, pos: 0 });
        if backwards && prev.is_some() {
            return OffsetEntry {
                rel: p.rel.saturating_sub(a % 3),
                pos: p.pos + b,
            };
        }
        OffsetEntry {
            rel: p.rel + 1 + a,
            pos: p.pos + 1 + b,
        }
    }
}

impl Gen for TimeEntry {
    fn after(prev: Option<Self>, a: u32, b: u32, backwards: bool) -> Self {
        let p = prev.unwrap_or(TimeEntry { ts: 0, rel: 0 });
        if backwards && prev.is_some() {
            return TimeEntry {
                ts: p.ts - (a % 3) as i64,
                rel: p.rel + b,
            };
        }
        // Offsets may repeat in a time index; timestamps must grow.
        TimeEntry {
            ts: p.ts + 1 + a as i64,
            rel: p.rel + b,
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Push { a: u32, b: u32, backwards: bool },
    Truncate { rel: u32 },
    Unload,
    Reopen,
    Preallocate(bool),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..50, 0u32..5000, proptest::bool::weighted(0.15))
            .prop_map(|(a, b, backwards)| Op::Push { a, b, backwards }),
        1 => (0u32..3000).prop_map(|rel| Op::Truncate { rel }),
        1 => Just(Op::Unload),
        1 => Just(Op::Reopen),
        1 => any::<bool>().prop_map(Op::Preallocate),
    ]
}

fn check_model<E: Gen>(ops: &[Op], base: i64, probes: &[i64]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x");
    let mut idx = LazyIndex::<E>::open(&path, base, MAX_BYTES).unwrap();
    let mut model: Vec<E> = Vec::new();
    let mut preallocated = false;
    for op in ops {
        match *op {
            Op::Push { a, b, backwards } => {
                let e = E::after(model.last().copied(), a, b, backwards);
                let follows = model.last().is_none_or(|p| e.follows(p));
                prop_assert_eq!(idx.push(e).unwrap(), follows);
                if follows {
                    model.push(e);
                }
            }
            Op::Truncate { rel } => {
                idx.truncate_to(base + rel as i64).unwrap();
                model.retain(|e| e.relative_offset() < rel);
            }
            Op::Unload => idx.unload(),
            Op::Reopen => {
                drop(idx);
                idx = LazyIndex::<E>::open(&path, base, MAX_BYTES).unwrap();
                // A reopened file is not preallocated until told (as at segment open).
                preallocated = false;
            }
            Op::Preallocate(on) => {
                idx.set_preallocated(on).unwrap();
                preallocated = on;
            }
        }
        prop_assert_eq!(idx.entries(), &model[..]);
        let want_len = if preallocated {
            idx.capacity() * E::SIZE
        } else {
            model.len() * E::SIZE
        };
        prop_assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, want_len);
        for &k in probes {
            let want = model.iter().rev().find(|e| e.key() <= k).copied();
            prop_assert_eq!(idx.floor(k), want);
        }
    }
    drop(idx);
    let again = LazyIndex::<E>::open(&path, base, MAX_BYTES).unwrap();
    prop_assert_eq!(again.entries(), &model[..]);
    prop_assert_eq!(again.loads(), 1);
    Ok(())
}

fn check_garbage<E: IndexEntry>(raw: &[u8], bounds: Bounds) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x");
    std::fs::write(&path, raw).unwrap();
    let max_bytes = 40 * E::SIZE as u64;
    let idx = LazyIndex::<E>::open(&path, 7, max_bytes).unwrap();
    idx.set_bounds(bounds);
    let got = idx.entries();
    prop_assert!(got.len() <= idx.capacity() + 1);
    for (i, e) in got.iter().enumerate() {
        prop_assert_eq!(*e, E::decode(&raw[i * E::SIZE..(i + 1) * E::SIZE]));
        prop_assert!(e.plausible(i == 0, bounds));
        if i > 0 {
            prop_assert!(e.follows(&got[i - 1]));
        }
    }
    // Loading trimmed the file to what it kept.
    prop_assert_eq!(
        std::fs::metadata(&path).unwrap().len() as usize,
        got.len() * E::SIZE
    );
    Ok(())
}

fn arb_bounds() -> impl Strategy<Value = Bounds> {
    prop_oneof![
        Just(Bounds::NONE),
        (1u64..1 << 33, 1u64..1 << 33).prop_map(|(max_rel, max_pos)| Bounds { max_rel, max_pos }),
    ]
}

/// Index files with real entries followed by anything: garbage ends the index.
fn arb_index_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec((1u32..1000, 1u32..1000), 0..30),
        proptest::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(|(steps, tail)| {
            let (mut a, mut b) = (0u32, 0u32);
            let mut raw = Vec::new();
            for (x, y) in steps {
                a += x;
                b += y;
                // Valid as either kind: 8 bytes (a, b) for offsets; time entries read
                // the same bytes in 12-byte strides, mostly as garbage.
                raw.extend_from_slice(&a.to_be_bytes());
                raw.extend_from_slice(&b.to_be_bytes());
            }
            raw.extend_from_slice(&tail);
            raw
        })
}

proptest! {
    #[test]
    fn given_any_operations_when_applied_to_an_offset_index_then_it_matches_the_model(
        ops in proptest::collection::vec(arb_op(), 1..60),
        base in 0i64..1 << 40,
        probes in proptest::collection::vec(-5i64..200_000, 1..8),
    ) {
        check_model::<OffsetEntry>(&ops, base, &probes)?;
    }

    #[test]
    fn given_any_operations_when_applied_to_a_time_index_then_it_matches_the_model(
        ops in proptest::collection::vec(arb_op(), 1..60),
        base in 0i64..1 << 40,
        probes in proptest::collection::vec(-5i64..3_000, 1..8),
    ) {
        check_model::<TimeEntry>(&ops, base, &probes)?;
    }

    #[test]
    fn given_any_file_bytes_when_loaded_then_a_valid_prefix_of_entries(
        raw in arb_index_bytes(),
        bounds in arb_bounds(),
    ) {
        check_garbage::<OffsetEntry>(&raw, bounds)?;
        check_garbage::<TimeEntry>(&raw, bounds)?;
    }

    #[test]
    fn given_entries_when_encoded_then_decode_round_trips(
        rel in any::<u32>(), pos in any::<u32>(), ts in any::<i64>(),
    ) {
        fn round<E: IndexEntry>(e: E) -> E {
            let mut raw = vec![0u8; E::SIZE];
            e.encode(&mut raw);
            E::decode(&raw)
        }
        let o = OffsetEntry { rel, pos };
        prop_assert_eq!(round(o), o);
        let t = TimeEntry { ts, rel };
        prop_assert_eq!(round(t), t);
    }
}
