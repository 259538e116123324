//! Data-dir level files, in the formats Apache Kafka writes.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::StorageError;

/// Exclusive lock on the data dir (`.lock`, flock), released on drop.
pub struct DirLock {
    _file: File,
    path: PathBuf,
}

impl DirLock {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Takes the data dir's `.lock` (as Kafka does); a second broker gets `LockHeld`.
pub fn lock(data_dir: &Path) -> Result<DirLock, StorageError> {
    std::fs::create_dir_all(data_dir).map_err(|e| StorageError::io(e, data_dir))?;
    let path = data_dir.join(".lock");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| StorageError::io(e, &path))?;
    // SAFETY: flock on a descriptor we own; no memory is involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(StorageError::LockHeld(data_dir.to_path_buf()));
        }
        return Err(StorageError::io(err, &path));
    }
    Ok(DirLock { _file: file, path })
}

/// 16 random bytes from the kernel (version 4 UUID bits set).
pub fn random_uuid() -> [u8; 16] {
    let mut b = [0u8; 16];
    // SAFETY: getrandom writes at most 16 bytes into the 16-byte buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 16, 0) };
    if n != 16 {
        // Practically unreachable; time-derived bytes still make a usable id.
        let t = crate::clock::now_ms() as u128 ^ ((std::process::id() as u128) << 64);
        b = t.to_be_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Kafka's `Uuid.toString()`: URL-safe base64 without padding (22 chars).
pub fn uuid_to_base64(u: &[u8; 16]) -> String {
    let mut out = String::with_capacity(22);
    let mut bits = 0u32;
    let mut n = 0;
    for &byte in u {
        bits = (bits << 8) | byte as u32;
        n += 8;
        while n >= 6 {
            n -= 6;
            out.push(B64[((bits >> n) & 63) as usize] as char);
        }
    }
    if n > 0 {
        out.push(B64[((bits << (6 - n)) & 63) as usize] as char);
    }
    out
}

pub fn uuid_from_base64(s: &str) -> Option<[u8; 16]> {
    let s = s.trim();
    if s.len() != 22 {
        return None;
    }
    let mut out = Vec::with_capacity(17);
    let mut bits = 0u32;
    let mut n = 0;
    for c in s.bytes() {
        let v = B64.iter().position(|&x| x == c)? as u32;
        bits = (bits << 6) | v;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    out.truncate(16);
    out.try_into().ok()
}

/// Writes `contents` to `path` atomically: temp file, fsync, rename, fsync of the dir.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), StorageError> {
    let tmp = path.with_extension("tmp");
    let io = |e| StorageError::io(e, path);
    {
        let mut f = File::create(&tmp).map_err(io)?;
        f.write_all(contents).map_err(io)?;
        f.sync_all().map_err(io)?;
    }
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Some(parent) = path.parent() {
        File::open(parent).and_then(|d| d.sync_all()).map_err(io)?;
    }
    Ok(())
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaProperties {
    pub version: i32,
    pub node_id: i32,
    pub cluster_id: String,
    pub directory_id: String,
}

fn parse_properties(text: &str) -> HashMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// meta.properties (version=1, node.id, cluster.id, directory.id), created if missing.
/// An existing file for another node id is refused, as Kafka refuses it.
pub fn ensure_meta_properties(
    data_dir: &Path,
    node_id: i32,
) -> Result<MetaProperties, StorageError> {
    let path = data_dir.join("meta.properties");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let p = parse_properties(&text);
            let get = |k: &str| p.get(k).cloned().unwrap_or_default();
            let meta = MetaProperties {
                version: get("version").parse().unwrap_or(0),
                node_id: get("node.id").parse().unwrap_or(-1),
                cluster_id: get("cluster.id"),
                directory_id: get("directory.id"),
            };
            if meta.node_id != node_id {
                return Err(StorageError::Invalid {
                    what: "meta.properties",
                    reason: format!(
                        "{} belongs to node.id {}, this broker is {node_id}",
                        path.display(),
                        meta.node_id
                    ),
                });
            }
            Ok(meta)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(data_dir).map_err(|e| StorageError::io(e, data_dir))?;
            let meta = MetaProperties {
                version: 1,
                node_id,
                cluster_id: uuid_to_base64(&random_uuid()),
                directory_id: uuid_to_base64(&random_uuid()),
            };
            let text = format!(
                "#\n#Written by Strom\ncluster.id={}\ndirectory.id={}\nnode.id={}\nversion={}\n",
                meta.cluster_id, meta.directory_id, meta.node_id, meta.version
            );
            write_atomic(&path, text.as_bytes())?;
            Ok(meta)
        }
        Err(e) => Err(StorageError::io(e, &path)),
    }
}

fn bad_checkpoint(path: &Path, why: &str) -> StorageError {
    StorageError::Corrupt {
        path: path.to_path_buf(),
        reason: why.to_string(),
    }
}

/// Kafka checkpoint files: "0\n<count>\n<topic> <partition> <offset>\n...". A missing
/// file is an empty checkpoint.
pub fn read_checkpoint(path: &Path) -> Result<HashMap<(String, i32), i64>, StorageError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(StorageError::io(e, path)),
    };
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("0") {
        return Err(bad_checkpoint(path, "unsupported checkpoint version"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| bad_checkpoint(path, "bad entry count"))?;
    // The count comes from the file: bound what it can reserve by the lines present.
    let mut out = HashMap::with_capacity(count.min(text.len() / 6));
    for _ in 0..count {
        let line = lines
            .next()
            .ok_or_else(|| bad_checkpoint(path, "fewer entries than the count"))?;
        let mut parts = line.split(' ');
        let (Some(t), Some(p), Some(o), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad_checkpoint(path, "malformed entry"));
        };
        let p: i32 = p
            .parse()
            .map_err(|_| bad_checkpoint(path, "bad partition"))?;
        let o: i64 = o.parse().map_err(|_| bad_checkpoint(path, "bad offset"))?;
        out.insert((t.to_string(), p), o);
    }
    Ok(out)
}

/// Atomic: tmp+fsync+rename.
pub fn write_checkpoint(path: &Path, entries: &[(String, i32, i64)]) -> Result<(), StorageError> {
    let mut text = format!("0\n{}\n", entries.len());
    for (t, p, o) in entries {
        text.push_str(&format!("{t} {p} {o}\n"));
    }
    write_atomic(path, text.as_bytes())
}

/// Kafka's `leader-epoch-checkpoint` in a partition dir: "0\n<count>\n<epoch> <start offset>\n".
pub fn write_leader_epoch_checkpoint(
    partition_dir: &Path,
    entries: &[(i32, i64)],
) -> Result<(), StorageError> {
    let mut text = format!("0\n{}\n", entries.len());
    for (e, o) in entries {
        text.push_str(&format!("{e} {o}\n"));
    }
    write_atomic(
        &partition_dir.join("leader-epoch-checkpoint"),
        text.as_bytes(),
    )
}

pub fn read_leader_epoch_checkpoint(partition_dir: &Path) -> Result<Vec<(i32, i64)>, StorageError> {
    let path = partition_dir.join("leader-epoch-checkpoint");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StorageError::io(e, &path)),
    };
    let mut lines = text.lines().skip(2);
    let mut out = Vec::new();
    for line in lines.by_ref() {
        let (e, o) = line
            .split_once(' ')
            .ok_or_else(|| bad_checkpoint(&path, "malformed entry"))?;
        out.push((
            e.parse().map_err(|_| bad_checkpoint(&path, "bad epoch"))?,
            o.parse().map_err(|_| bad_checkpoint(&path, "bad offset"))?,
        ));
    }
    Ok(out)
}

/// `.kafka_cleanshutdown`: present iff the previous broker shut down cleanly.
pub fn clean_shutdown_marker(data_dir: &Path) -> PathBuf {
    data_dir.join(".kafka_cleanshutdown")
}

/// Partition dirs present: `<topic>-<partition>` (topic may contain '-'); dirs being
/// deleted or moved (`-delete`, `-future`, `-stray`) are skipped.
/// On a thread of its own, so that neither holds a shard's thread: makes the rename of a
/// partition dir to `*-delete` durable (a crash must not bring the partition back under its
/// name) and removes the renamed dir. Failures are logged: the dir is out of the broker's
/// way already, and the next start sweeps it (`sweep_deleted_dirs`).
pub fn remove_deleted_dir(dir: PathBuf) {
    let spawned = std::thread::Builder::new()
        .name("strom-delete".into())
        .spawn(move || {
            if let Some(parent) = dir.parent() {
                if let Err(e) = File::open(parent).and_then(|d| d.sync_all()) {
                    tracing::warn!(dir = %parent.display(), error = %e, "syncing the data dir after a delete failed");
                }
            }
            remove_now(&dir)
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no thread to remove a deleted partition dir; the next start does");
    }
}

fn remove_now(dir: &Path) {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "removing a deleted partition dir failed")
        }
    }
}

/// At start: removes the `*-delete` dirs a crash left behind (renamed but not removed yet),
/// each as `remove_deleted_dir` does. Returns how many it found.
pub fn sweep_deleted_dirs(data_dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(data_dir) else {
        return 0;
    };
    let left: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| e.file_name().to_string_lossy().ends_with("-delete"))
        .map(|e| e.path())
        .collect();
    let n = left.len();
    left.into_iter().for_each(remove_deleted_dir);
    n
}

pub fn list_partitions(data_dir: &Path) -> Result<Vec<(String, i32)>, StorageError> {
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(data_dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(StorageError::io(e, data_dir)),
    };
    for entry in rd {
        let entry = entry.map_err(|e| StorageError::io(e, data_dir))?;
        if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with("-delete") || name.ends_with("-future") || name.ends_with("-stray") {
            continue;
        }
        // KRaft's metadata log lives in the data dir too (Kafka's own layout); it is not a
        // partition of any topic the broker serves.
        if name == "__cluster_metadata-0" {
            continue;
        }
        if let Some(tp) = parse_partition_dir(&name) {
            out.push(tp);
        }
    }
    out.sort();
    Ok(out)
}

/// `<topic>-<partition>` (the topic may contain '-') as (topic, partition).
pub fn parse_partition_dir(name: &str) -> Option<(String, i32)> {
    let (topic, p) = name.rsplit_once('-')?;
    let p = p.parse::<i32>().ok()?;
    (!topic.is_empty() && p >= 0).then(|| (topic.to_string(), p))
}

/// Adopts closed segments of a Kafka log into a new partition dir by hard-linking their
/// `.log` files as `<data_dir>/<topic>-<partition>/<base>.log`, then creates an empty
/// segment at `end` (offset after the last linked batch) so that the log's appends never go
/// into a linked file. Only the `.log` files are linked: [`crate::PartitionLog::open`] with
/// recovery point `end` validates every batch (CRC) and builds the log's own indexes. The
/// names are fsync'd. Afterwards the log only renames or unlinks its own names (retention,
/// compaction) and never cuts a linked file in place (`Segment::truncate_file`), so the
/// other names keep their bytes. Refused when the partition dir holds segments already; a
/// hard link across filesystems fails with the OS's EXDEV error naming the file.
pub fn link_segments(
    data_dir: &Path,
    topic: &str,
    partition: i32,
    segments: &[(i64, PathBuf)],
    end: i64,
) -> Result<(), StorageError> {
    let dir = data_dir.join(format!("{topic}-{partition}"));
    std::fs::create_dir_all(&dir).map_err(|e| StorageError::io(e, &dir))?;
    let rd = std::fs::read_dir(&dir).map_err(|e| StorageError::io(e, &dir))?;
    for entry in rd {
        let entry = entry.map_err(|e| StorageError::io(e, &dir))?;
        if entry.file_name().to_string_lossy().ends_with(".log") {
            return Err(StorageError::Invalid {
                what: "segment link",
                reason: format!("{} holds segments already", dir.display()),
            });
        }
    }
    let mut prev = -1;
    for (base, _) in segments {
        if *base <= prev || *base >= end {
            return Err(StorageError::Invalid {
                what: "segment link",
                reason: format!("segment bases must increase and stay below {end}: {base}"),
            });
        }
        prev = *base;
    }
    for (base, src) in segments {
        let to = dir.join(crate::segment::file_name(*base, "log"));
        std::fs::hard_link(src, &to).map_err(|e| StorageError::io(e, src))?;
    }
    let active = dir.join(crate::segment::file_name(end, "log"));
    File::create(&active)
        .and_then(|f| f.sync_all())
        .map_err(|e| StorageError::io(e, &active))?;
    for d in [&dir, data_dir] {
        File::open(d)
            .and_then(|f| f.sync_all())
            .map_err(|e| StorageError::io(e, d))?;
    }
    Ok(())
}

/// partition.metadata: "version: 0\ntopic_id: <base64 uuid>\n".
pub fn write_partition_metadata(dir: &Path, topic_id: [u8; 16]) -> Result<(), StorageError> {
    let text = format!("version: 0\ntopic_id: {}\n", uuid_to_base64(&topic_id));
    write_atomic(&dir.join("partition.metadata"), text.as_bytes())
}

pub fn read_partition_metadata(dir: &Path) -> Option<[u8; 16]> {
    let text = std::fs::read_to_string(dir.join("partition.metadata")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("topic_id:"))
        .and_then(uuid_from_base64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_checkpoint_entries_when_written_then_kafka_text_format_and_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("recovery-point-offset-checkpoint");
        write_checkpoint(&p, &[("my-topic".into(), 3, 42)]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "0\n1\nmy-topic 3 42\n"
        );
        let m = read_checkpoint(&p).unwrap();
        assert_eq!(m[&("my-topic".to_string(), 3)], 42);
        assert!(read_checkpoint(&dir.path().join("none"))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn given_truncated_checkpoint_when_reading_then_corrupt_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cp");
        std::fs::write(&p, "0\n2\nt 0 1\n").unwrap();
        assert!(matches!(
            read_checkpoint(&p),
            Err(StorageError::Corrupt { .. })
        ));
    }

    #[test]
    fn given_uuid_when_base64_encoded_then_kafka_form_round_trips() {
        // Kafka's Uuid.ZERO_UUID prints as AAAAAAAAAAAAAAAAAAAAAA.
        assert_eq!(uuid_to_base64(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        let u = random_uuid();
        assert_eq!(uuid_from_base64(&uuid_to_base64(&u)), Some(u));
        let dir = tempfile::tempdir().unwrap();
        write_partition_metadata(dir.path(), u).unwrap();
        assert_eq!(read_partition_metadata(dir.path()), Some(u));
    }

    #[test]
    fn given_partition_dirs_when_listing_then_hyphenated_topics_parse_and_deletes_skip() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["a-b-c-0", "orders-12", "x-0.abc-delete", "noint-x"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        assert_eq!(
            list_partitions(dir.path()).unwrap(),
            vec![("a-b-c".to_string(), 0), ("orders".to_string(), 12)]
        );
    }

    #[test]
    fn given_locked_dir_when_locking_again_then_lock_held() {
        let dir = tempfile::tempdir().unwrap();
        let _l = lock(dir.path()).unwrap();
        assert!(matches!(lock(dir.path()), Err(StorageError::LockHeld(_))));
    }

    #[test]
    fn given_no_meta_properties_when_ensuring_then_created_and_stable() {
        let dir = tempfile::tempdir().unwrap();
        let m1 = ensure_meta_properties(dir.path(), 1).unwrap();
        let m2 = ensure_meta_properties(dir.path(), 1).unwrap();
        assert_eq!(m1, m2);
        assert_eq!(m1.version, 1);
        assert!(ensure_meta_properties(dir.path(), 2).is_err());
    }

    #[test]
    fn given_checkpoint_with_huge_count_when_reading_then_error_not_abort() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cp");
        std::fs::write(&p, format!("0\n{}\nt 0 5\n", usize::MAX)).unwrap();
        assert!(matches!(
            read_checkpoint(&p),
            Err(StorageError::Corrupt { .. })
        ));
    }

    #[test]
    fn given_kraft_metadata_dir_when_listing_partitions_then_skipped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("__cluster_metadata-0")).unwrap();
        std::fs::create_dir(dir.path().join("orders-3")).unwrap();
        assert_eq!(
            list_partitions(dir.path()).unwrap(),
            vec![("orders".to_string(), 3)]
        );
    }
}
