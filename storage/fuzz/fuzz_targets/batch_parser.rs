//! Everything that parses record batches from the network or disk, on arbitrary bytes:
//! must not panic, and whatever validates must be self-consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::batch;

fuzz_target!(|data: &[u8]| {
    if let Ok(headers) = batch::validate_batches(data) {
        let total: usize = headers.iter().map(|h| h.total_size()).sum();
        assert_eq!(total, data.len());
        for h in &headers {
            assert_eq!(h.magic, 2);
            assert!(h.compression() <= 4);
        }
    }
    let mut at = 0;
    for item in batch::BatchIter::validating(data) {
        match item {
            Ok((h, bytes)) => {
                assert_eq!(bytes.len(), h.total_size());
                at += bytes.len();
                let _ = batch::record_timestamps(bytes);
            }
            Err(_) => break,
        }
    }
    assert!(at <= data.len());
    let _ = batch::BatchHeader::parse(data);
});
