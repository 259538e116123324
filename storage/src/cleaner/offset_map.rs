//! Key -> latest offset over the dirty section: Kafka's `SkimpyOffsetMap`.
//!
//! Like Kafka, keys are stored as a 128-bit digest, not in full, so the map's memory
//! depends on the number of distinct keys only. The digest is two independently,
//! randomly keyed SipHashes: a producer cannot craft two keys that collide (which would
//! make the cleaner drop the older one's latest value), and the chance of an accidental
//! collision among n keys is about n^2 / 2^129.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// Bytes one entry costs: digest, offset and the hash table's own overhead.
pub const ENTRY_BYTES: usize = 40;

pub struct OffsetMap {
    h1: std::collections::hash_map::RandomState,
    h2: std::collections::hash_map::RandomState,
    map: HashMap<u128, i64>,
    /// Largest offset put (Kafka's `latestOffset`).
    latest: i64,
}

impl Default for OffsetMap {
    fn default() -> Self {
        Self::new()
    }
}

impl OffsetMap {
    pub fn new() -> Self {
        OffsetMap {
            h1: Default::default(),
            h2: Default::default(),
            map: HashMap::new(),
            latest: -1,
        }
    }

    fn digest(&self, key: &[u8]) -> u128 {
        let mut a = self.h1.build_hasher();
        a.write(key);
        let mut b = self.h2.build_hasher();
        b.write(key);
        ((a.finish() as u128) << 64) | b.finish() as u128
    }

    /// Records `offset` as the latest for `key` (offsets come in increasing order).
    pub fn put(&mut self, key: &[u8], offset: i64) {
        let d = self.digest(key);
        self.map.insert(d, offset);
        self.latest = self.latest.max(offset);
    }

    /// The latest offset of `key`, or -1 when the key is not in the dirty section.
    pub fn get(&self, key: &[u8]) -> i64 {
        self.map.get(&self.digest(key)).copied().unwrap_or(-1)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn memory_bytes(&self) -> usize {
        self.map.len() * ENTRY_BYTES
    }

    pub fn latest_offset(&self) -> i64 {
        self.latest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_puts_when_getting_then_latest_offset_per_key() {
        let mut m = OffsetMap::new();
        m.put(b"a", 1);
        m.put(b"b", 2);
        m.put(b"a", 5);
        assert_eq!(m.get(b"a"), 5);
        assert_eq!(m.get(b"b"), 2);
        assert_eq!(m.get(b"c"), -1);
        assert_eq!(m.len(), 2);
        assert_eq!(m.latest_offset(), 5);
    }
}
