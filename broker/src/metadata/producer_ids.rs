//! Producer id allocation for InitProducerId. Ids must never repeat across restarts (a reused
//! id would make a new producer's batches look like an old one's duplicates), so ids are handed
//! out from blocks whose upper end is persisted before any id of the block is used — Kafka's
//! controller does the same with its producer id blocks.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

const BLOCK: i64 = 1000;

pub struct ProducerIdAllocator {
    path: PathBuf,
    state: Mutex<(i64, i64)>, // (next id, end of persisted block, exclusive)
}

impl ProducerIdAllocator {
    pub fn open(data_dir: &Path) -> std::io::Result<ProducerIdAllocator> {
        let path = data_dir.join("strom-producer-ids");
        let next = match std::fs::read_to_string(&path) {
            Ok(s) => s.trim().parse::<i64>().map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Ok(ProducerIdAllocator {
            path,
            state: Mutex::new((next, next)),
        })
    }

    pub fn next(&self) -> std::io::Result<i64> {
        let mut s = self.state.lock().expect("producer id lock");
        if s.0 >= s.1 {
            let end = s.1 + BLOCK;
            storage::logdir::write_atomic(&self.path, end.to_string().as_bytes())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            s.1 = end;
        }
        let id = s.0;
        s.0 += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_restart_when_allocating_then_ids_never_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let a = ProducerIdAllocator::open(dir.path()).unwrap();
        let first: Vec<i64> = (0..3).map(|_| a.next().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(a);
        let b = ProducerIdAllocator::open(dir.path()).unwrap();
        assert!(b.next().unwrap() >= BLOCK);
    }
}
