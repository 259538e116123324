//! Arbitrary bytes as a segment file: recovery must not panic, and a reader must only
//! ever get whole batches that pass CRC validation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::{IoBackend, IoBackendKind, LogConfig, PartitionLog};

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let part = dir.path().join("t-0");
    std::fs::create_dir(&part).unwrap();
    std::fs::write(part.join("00000000000000000000.log"), data).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let io = IoBackend::new(IoBackendKind::Sync).unwrap();
        let log = PartitionLog::open(dir.path(), "t", 0, LogConfig::default(), io, 0).unwrap();
        let r = log.read(0, usize::MAX, i64::MAX).unwrap();
        for chunk in &r.chunks {
            storage::batch::validate_batches(chunk).unwrap();
        }
    });
});
