//! The machine's own limits, measured in the same run as the brokers so every broker figure
//! can be read as a fraction of what the hardware allows: fdatasync-bound sequential writes
//! (what acks=all on one node is bounded by), loopback TCP (what any client–broker pair on
//! 127.0.0.1 is bounded by) and memcpy bandwidth (what each copy of the data costs).

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Limit {
    pub name: String,
    /// Megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    /// Operations per second where it means something (fdatasyncs).
    pub ops_per_s: Option<f64>,
}

/// Writes `block` bytes then fdatasyncs, in a loop, for `time`: one group commit per block.
pub fn fdatasync_write(dir: &Path, block: usize, time: Duration) -> anyhow::Result<Limit> {
    let path = dir.join(format!("strom-bench-fsync-{}", std::process::id()));
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)?;
    let buf = vec![0x5au8; block];
    let start = Instant::now();
    let (mut pos, mut syncs) = (0u64, 0u64);
    // Bounded by time and by 1 GiB of file, whichever comes first.
    while start.elapsed() < time && pos < 1 << 30 {
        file.write_all_at(&buf, pos)?;
        file.sync_data()?;
        pos += block as u64;
        syncs += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(Limit {
        name: format!("fdatasync write, {} per sync", human_bytes(block)),
        mb_per_s: pos as f64 / secs / 1e6,
        ops_per_s: Some(syncs as f64 / secs),
    })
}

/// One client streaming 1 MiB writes to a reader thread over 127.0.0.1 for `time`.
pub fn loopback_tcp(time: Duration) -> anyhow::Result<Limit> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            match s.read(&mut buf)? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    });
    let mut s = TcpStream::connect(addr)?;
    let buf = vec![0xa5u8; 1 << 20];
    let start = Instant::now();
    while start.elapsed() < time {
        s.write_all(&buf)?;
    }
    drop(s);
    let total = reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader panicked"))??;
    let secs = start.elapsed().as_secs_f64();
    Ok(Limit {
        name: "loopback TCP, one stream".into(),
        mb_per_s: total as f64 / secs / 1e6,
        ops_per_s: None,
    })
}

/// Copies a 64 MiB buffer (larger than any cache here) back and forth for `time`.
pub fn memcpy(time: Duration) -> Limit {
    let n = 64 << 20;
    let src = vec![1u8; n];
    let mut dst = vec![0u8; n];
    let start = Instant::now();
    let mut copied = 0u64;
    while start.elapsed() < time {
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst);
        copied += n as u64;
    }
    Limit {
        name: "memcpy, 64 MiB buffers".into(),
        mb_per_s: copied as f64 / start.elapsed().as_secs_f64() / 1e6,
        ops_per_s: None,
    }
}

pub fn human_bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}
