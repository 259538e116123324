//! The Kafka side of an offline import: a stopped broker's log dirs (Kafka's `log.dirs`,
//! one or several) and the verified batches of their segments.
//!
//! Every partition must live in exactly one of the dirs; a partition found in two is
//! refused naming both (Kafka itself refuses to start with such a layout). What Kafka keeps
//! next to the partitions but that is not a partition's current replica (`-future` dirs of
//! a replica move, `-delete` dirs of a deletion, `-stray` dirs, unknown files) is reported as
//! not carried over, never imported.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use storage::batch::{self, BatchHeader};

use super::MigrateError;

/// A batch length above this in a segment is corruption (Kafka's message.max.bytes is far
/// below it), not an allocation to attempt.
const MAX_BATCH_BYTES: i32 = 1 << 30;
/// Bytes of a v2 batch header after the 12-byte offset and length prefix.
const MIN_BATCH_LENGTH: i32 = 49;
/// The KRaft metadata log's partition dir (in the first log dir or `metadata.log.dir`).
pub const METADATA_DIR: &str = "__cluster_metadata-0";

/// Files Kafka keeps at the top of a log dir that belong to no partition.
const KAFKA_DIR_FILES: &[&str] = &[
    "meta.properties",
    ".lock",
    ".kafka_cleanshutdown",
    "bootstrap.checkpoint",
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
];

/// One `topic-partition` directory of a Kafka log dir.
#[derive(Debug, Clone)]
pub struct SourcePartition {
    pub topic: String,
    pub partition: i32,
    pub dir: PathBuf,
}

/// What the log dirs hold.
#[derive(Debug, Default)]
pub struct Scan {
    /// Sorted by (topic, partition); each found in exactly one dir.
    pub partitions: Vec<SourcePartition>,
    /// `__cluster_metadata-0` dirs found among the log dirs.
    pub metadata: Vec<PathBuf>,
    /// Kafka's log start offsets of every dir (`log-start-offset-checkpoint`).
    pub log_starts: HashMap<(String, i32), i64>,
    /// The node id of the broker (meta.properties).
    pub node_id: Option<i32>,
    pub not_carried: Vec<String>,
}

/// The partitions of a stopped Kafka broker's log dirs (refused when a dir is not one, is
/// still locked, belongs to another cluster than the first, or a partition is in two).
pub fn scan(dirs: &[PathBuf]) -> Result<Scan, MigrateError> {
    let mut out = Scan::default();
    let mut cluster: Option<(String, &Path)> = None;
    let mut found: BTreeMap<(String, i32), PathBuf> = BTreeMap::new();
    for from in dirs {
        let props = read_meta_properties(from)?;
        let id = props.get("cluster.id").cloned().unwrap_or_default();
        match &cluster {
            Some((first, path)) if *first != id => {
                return Err(MigrateError::Refused(format!(
                    "{} belongs to cluster {id:?}, {} to cluster {first:?}: \
                     the log dirs of one broker are needed",
                    from.display(),
                    path.display()
                )))
            }
            Some(_) => {}
            None => cluster = Some((id, from)),
        }
        if out.node_id.is_none() {
            out.node_id = props.get("node.id").and_then(|n| n.parse().ok());
        }
        if lock_held(&from.join(".lock")) {
            return Err(MigrateError::Refused(format!(
                "{} is locked: stop the Kafka broker first",
                from.display()
            )));
        }
        let io = |e: std::io::Error| MigrateError::Source(format!("{}: {e}", from.display()));
        let mut names = Vec::new();
        for entry in std::fs::read_dir(from).map_err(io)? {
            let entry = entry.map_err(io)?;
            let is_dir = entry.file_type().map_err(io)?.is_dir();
            names.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
        }
        names.sort();
        for (name, is_dir) in names {
            let path = from.join(&name);
            let shown = path.display();
            if !is_dir {
                if !KAFKA_DIR_FILES.contains(&name.as_str()) {
                    out.not_carried.push(format!("{shown}: stray file"));
                }
                continue;
            }
            if name == METADATA_DIR {
                out.metadata.push(path);
                continue;
            }
            let why = if name.ends_with("-future") {
                Some("a replica move in progress (Kafka's -future copy); the current replica is imported")
            } else if name.ends_with("-delete") {
                Some("a partition Kafka was deleting")
            } else if name.ends_with("-stray") {
                Some("a stray partition Kafka had set aside")
            } else {
                None
            };
            if let Some(why) = why {
                out.not_carried.push(format!("{shown}: {why}"));
                continue;
            }
            let Some(tp) = storage::logdir::parse_partition_dir(&name) else {
                out.not_carried
                    .push(format!("{shown}: not a partition directory"));
                continue;
            };
            if let Some(other) = found.get(&tp) {
                return Err(MigrateError::Refused(format!(
                    "partition {name} is in two log dirs: {} and {}",
                    other.display(),
                    path.display()
                )));
            }
            found.insert(tp, path);
        }
        let starts = storage::logdir::read_checkpoint(&from.join("log-start-offset-checkpoint"))
            .unwrap_or_default();
        out.log_starts.extend(starts);
    }
    out.partitions = found
        .into_iter()
        .map(|((topic, partition), dir)| SourcePartition {
            topic,
            partition,
            dir,
        })
        .collect();
    Ok(out)
}

/// meta.properties of a Kafka log dir; refused when missing or without a cluster id.
fn read_meta_properties(from: &Path) -> Result<HashMap<String, String>, MigrateError> {
    let text = std::fs::read_to_string(from.join("meta.properties")).map_err(|e| {
        MigrateError::Refused(format!(
            "{} is not a Kafka log dir (meta.properties: {e})",
            from.display()
        ))
    })?;
    let props: HashMap<String, String> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    if !props.contains_key("cluster.id") && !props.contains_key("broker.id") {
        return Err(MigrateError::Refused(format!(
            "{} is not a Kafka log dir (meta.properties has no cluster.id)",
            from.display()
        )));
    }
    Ok(props)
}

/// Whether another process holds a POSIX lock on `path` (Kafka locks its log dir's `.lock`
/// with `FileChannel.tryLock`, an fcntl lock, which flock does not see).
fn lock_held(path: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    else {
        return false;
    };
    // SAFETY: a zeroed flock is a valid argument; F_GETLK only writes into it.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: fcntl on a descriptor we own with a pointer to a live struct.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut fl) };
    rc == 0 && fl.l_type != libc::F_UNLCK as libc::c_short
}

/// The batches of segment files in offset order, each checked as Kafka's own recovery
/// checks it (framing, CRC, offset range) plus: offsets strictly increasing across batches
/// and segments, no batch below its segment's base offset, no torn tail.
pub struct BatchReader {
    segments: Vec<(i64, PathBuf)>,
    next_segment: usize,
    current: Option<(BufReader<File>, u64)>,
    last_offset: i64,
    pub batches: usize,
}

impl BatchReader {
    /// The `.log` segments of a partition dir.
    pub fn open(dir: &Path) -> Result<BatchReader, MigrateError> {
        let segments = numbered_files(dir, |name| {
            name.strip_suffix(".log").and_then(|s| s.parse().ok())
        })?;
        Ok(BatchReader::files(segments))
    }

    /// Files of record batches, each with the lowest offset it may hold.
    pub fn files(mut segments: Vec<(i64, PathBuf)>) -> BatchReader {
        segments.sort();
        BatchReader {
            segments,
            next_segment: 0,
            current: None,
            last_offset: -1,
            batches: 0,
        }
    }

    /// The segments, in offset order.
    pub fn segments(&self) -> &[(i64, PathBuf)] {
        &self.segments
    }

    /// Index into `segments()` of the file the last returned batch came from.
    pub fn segment_index(&self) -> usize {
        self.next_segment
    }

    pub fn next_batch(&mut self) -> Result<Option<(BatchHeader, Vec<u8>)>, MigrateError> {
        loop {
            let Some((file, pos)) = &mut self.current else {
                let Some((_, path)) = self.segments.get(self.next_segment) else {
                    return Ok(None);
                };
                let f = File::open(path)
                    .map_err(|e| MigrateError::Source(format!("{}: {e}", path.display())))?;
                self.current = Some((BufReader::with_capacity(1 << 20, f), 0));
                continue;
            };
            let (base, path) = &self.segments[self.next_segment];
            let corrupt = |pos: u64, why: String| {
                MigrateError::Refused(format!(
                    "corrupt segment {} at file position {pos}: {why}",
                    path.display()
                ))
            };
            let mut prefix = [0u8; 12];
            let got = read_full(file, &mut prefix).map_err(|e| corrupt(*pos, e.to_string()))?;
            if got == 0 {
                self.current = None;
                self.next_segment += 1;
                continue;
            }
            if got < prefix.len() {
                return Err(corrupt(*pos, "torn batch header at the end".into()));
            }
            let length = i32::from_be_bytes(prefix[8..12].try_into().expect("4 bytes"));
            if !(MIN_BATCH_LENGTH..=MAX_BATCH_BYTES).contains(&length) {
                return Err(corrupt(*pos, format!("batch length {length}")));
            }
            let mut buf = vec![0u8; 12 + length as usize];
            buf[..12].copy_from_slice(&prefix);
            let got = read_full(file, &mut buf[12..]).map_err(|e| corrupt(*pos, e.to_string()))?;
            if got < length as usize {
                return Err(corrupt(*pos, "torn batch at the end".into()));
            }
            let h = batch::validate_stored(&buf).map_err(|e| {
                let at = i64::from_be_bytes(prefix[..8].try_into().expect("8 bytes"));
                corrupt(*pos, format!("batch at offset {at}: {e}"))
            })?;
            if h.base_offset < *base || h.base_offset <= self.last_offset {
                return Err(corrupt(
                    *pos,
                    format!(
                        "batch at offset {} does not follow offset {} (segment base {base})",
                        h.base_offset, self.last_offset
                    ),
                ));
            }
            *pos += buf.len() as u64;
            self.last_offset = h.last_offset();
            self.batches += 1;
            return Ok(Some((h, buf)));
        }
    }
}

/// The files of `dir` whose name `number` maps to an offset, with that offset, unsorted.
pub fn numbered_files(
    dir: &Path,
    number: impl Fn(&str) -> Option<i64>,
) -> Result<Vec<(i64, PathBuf)>, MigrateError> {
    let io = |e: std::io::Error| MigrateError::Source(format!("{}: {e}", dir.display()));
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let name = entry.map_err(io)?.file_name();
        if let Some(n) = number(&name.to_string_lossy()) {
            out.push((n, dir.join(name)));
        }
    }
    Ok(out)
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_dir(cluster: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("meta.properties"),
            format!("version=1\ncluster.id={cluster}\nnode.id=1\n"),
        )
        .unwrap();
        d
    }

    #[test]
    fn given_dir_without_kafka_meta_properties_when_scanning_then_refused() {
        let d = tempfile::tempdir().unwrap();
        let err = scan(&[d.path().into()]).unwrap_err().to_string();
        assert!(err.contains("is not a Kafka log dir"), "{err}");
        std::fs::write(d.path().join("meta.properties"), "foo=bar\n").unwrap();
        let err = scan(&[d.path().into()]).unwrap_err().to_string();
        assert!(err.contains("no cluster.id"), "{err}");
    }

    #[test]
    fn given_two_log_dirs_when_scanning_then_partitions_merged_and_leftovers_reported() {
        let (a, b) = (log_dir("c1"), log_dir("c1"));
        for d in [
            "t-0",
            "__consumer_offsets-0",
            METADATA_DIR,
            "t-1.abc-delete",
        ] {
            std::fs::create_dir(a.path().join(d)).unwrap();
        }
        for d in ["t-1", "__consumer_offsets-1", "t-0.def-future", "junk"] {
            std::fs::create_dir(b.path().join(d)).unwrap();
        }
        std::fs::write(b.path().join("notes.txt"), "x").unwrap();
        std::fs::write(b.path().join("recovery-point-offset-checkpoint"), "0\n0\n").unwrap();
        let s = scan(&[a.path().into(), b.path().into()]).unwrap();
        let got: Vec<_> = s
            .partitions
            .iter()
            .map(|p| (p.topic.as_str(), p.partition, p.dir.starts_with(a.path())))
            .collect();
        assert_eq!(
            got,
            vec![
                ("__consumer_offsets", 0, true),
                ("__consumer_offsets", 1, false),
                ("t", 0, true),
                ("t", 1, false)
            ]
        );
        assert_eq!(s.metadata, vec![a.path().join(METADATA_DIR)]);
        let report = s.not_carried.join("\n");
        for want in [
            "t-1.abc-delete: a partition Kafka was deleting",
            "t-0.def-future: a replica move in progress",
            "junk: not a partition directory",
            "notes.txt: stray file",
        ] {
            assert!(report.contains(want), "{want} missing from {report}");
        }
        assert_eq!(s.not_carried.len(), 4, "{report}");

        // The same partition in both dirs: refused, naming both.
        std::fs::create_dir(b.path().join("t-0")).unwrap();
        let err = scan(&[a.path().into(), b.path().into()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("t-0 is in two log dirs")
                && err.contains(&a.path().join("t-0").display().to_string())
                && err.contains(&b.path().join("t-0").display().to_string()),
            "{err}"
        );
        // A log dir of another cluster: refused.
        let other = log_dir("c2");
        let err = scan(&[a.path().into(), other.path().into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("belongs to cluster"), "{err}");
    }
}
