//! Opening a partition dir: which segments exist, which can be trusted, and recovery of
//! the rest.
//!
//! A segment that ends at or below the recovery point was fdatasync'd before the point
//! was checkpointed, so it is trusted and nothing of it is read at open: its indexes load
//! on first lookup (entries outside the segment are dropped then, and a lookup whose
//! index entry does not point at a batch falls back to a scan). Only a segment whose
//! offset index is missing is scanned at open. From the
//! segment holding the recovery point on, every batch is validated and the indexes
//! rebuilt; the first bad batch ends the log (the file is cut there and later segments are
//! deleted, with a warning naming both). Nothing below the recovery point is ever cut or
//! deleted: a bad batch there fails the open with `StorageError::Corrupt` instead, because
//! cutting would silently drop acknowledged data, all later segments included.

use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

use crate::clock::now_ms;
use crate::config::LogConfig;
use crate::error::StorageError;
use crate::segment::Segment;

/// Parses `<20 digits>.<ext>`.
fn parse_name(name: &str) -> Option<(i64, &str)> {
    let (stem, ext) = name.split_once('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stem.parse().ok()?, ext))
}

pub(crate) fn load_segments(
    dir: &Path,
    cfg: &LogConfig,
    recovery_point: i64,
) -> Result<BTreeMap<i64, Rc<Segment>>, StorageError> {
    // A log cleaning pass interrupted after its commit point is completed first, so the
    // listing below sees the segments it left.
    crate::cleaner::swap::recover(dir).map_err(|e| StorageError::io(e, dir))?;
    let mut bases = Vec::new();
    let mut others = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| StorageError::io(e, dir))?;
    for entry in rd {
        let entry = entry.map_err(|e| StorageError::io(e, dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((base, ext)) = parse_name(&name) else {
            continue;
        };
        match ext {
            "log" => bases.push(base),
            // Leftovers of an interrupted delete or copy-truncate: the real file is intact.
            e if e.ends_with(".deleted") || e.ends_with(".cleaned") => {
                let p = entry.path();
                tracing::info!(file = %p.display(), "removing leftover file");
                std::fs::remove_file(&p).map_err(|e| StorageError::io(e, &p))?;
            }
            "index" | "timeindex" | "txnindex" => others.push((base, entry.path())),
            _ => {}
        }
    }
    bases.sort_unstable();
    for (base, path) in others {
        if bases.binary_search(&base).is_err() {
            tracing::info!(file = %path.display(), "removing index without a log segment");
            std::fs::remove_file(&path).map_err(|e| StorageError::io(e, &path))?;
        }
    }
    let now = now_ms();
    let mut segments: BTreeMap<i64, Rc<Segment>> = BTreeMap::new();
    if bases.is_empty() {
        let seg = Segment::create(dir, 0, cfg, now).map_err(|e| StorageError::io(e, dir))?;
        segments.insert(0, Rc::new(seg));
        return Ok(segments);
    }
    let last_i = bases.len() - 1;
    let mut recover_from: Option<usize> = None;
    for (i, &base) in bases.iter().enumerate() {
        let seg = Segment::open(dir, base, cfg, now).map_err(|e| StorageError::io(e, dir))?;
        match bases.get(i + 1) {
            Some(&next) if next <= recovery_point && seg.index_file_present(cfg) => {
                // Wholly below the recovery point: durable, acknowledged data, trusted
                // without reading it so that opening after a clean shutdown does not
                // depend on the log's size (Kafka's rule). Its indexes load on first use.
                seg.open_trusted(next);
                segments.insert(base, Rc::new(seg));
            }
            Some(&next) if next <= recovery_point => {
                // Below the recovery point but its index is missing: scan it. Nothing
                // here is cut, nor anything after it deleted: a bad batch is reported as
                // corruption instead.
                if !(seg.restore_from_indexes()? && seg.next_offset.get() <= next) {
                    tracing::warn!(file = %seg.log_path().display(),
                        "index of a segment below the recovery point disagrees with it; rebuilding");
                    seg.recover(false, recovery_point)?;
                    if seg.next_offset.get() > next {
                        return Err(StorageError::Corrupt {
                            path: seg.log_path(),
                            reason: format!(
                                "offsets reach {} but the next segment starts at {next}",
                                seg.next_offset.get()
                            ),
                        });
                    }
                }
                // The scan rebuilt the indexes; the time index ends with the segment's
                // largest timestamp, as a rolled segment's does (read when trusted later).
                seg.seal()
                    .map_err(|e| StorageError::io(e, seg.log_path()))?;
                segments.insert(base, Rc::new(seg));
            }
            Some(_) => {
                segments.insert(base, Rc::new(seg));
                recover_from = Some(i);
                break;
            }
            None => {
                let trusted =
                    seg.restore_from_indexes()? && seg.next_offset.get() <= recovery_point;
                segments.insert(base, Rc::new(seg));
                if !trusted {
                    recover_from = Some(i);
                }
            }
        }
    }
    if let Some(start) = recover_from {
        let mut i = start;
        while i < bases.len() {
            let base = bases[i];
            let seg = match segments.get(&base) {
                Some(s) => s.clone(),
                None => {
                    let s =
                        Segment::open(dir, base, cfg, now).map_err(|e| StorageError::io(e, dir))?;
                    let s = Rc::new(s);
                    segments.insert(base, s.clone());
                    s
                }
            };
            // Cuts only at or above the recovery point (see Segment::recover).
            let cut = seg.recover(i == last_i, recovery_point)?;
            // A segment must end before the next one starts; one that does not is as
            // broken as a torn tail. The next segment starts above the recovery point
            // (earlier ones were handled above), so cutting there keeps durable data.
            let overlaps = bases
                .get(i + 1)
                .is_some_and(|&next| seg.next_offset.get() > next);
            // A hole before the next segment, above the recovery point, is a write lost
            // in a crash (writes complete out of order: the first batch of a new segment
            // can reach the disk while the last one of the old segment never did). Nothing
            // after the hole was acknowledged (acks need a contiguous written prefix), so
            // the log ends at the hole. (Holes left by Kafka's cleaner lie below the
            // recovery point of a cleanly stopped Kafka, which is handled above.)
            let hole = bases
                .get(i + 1)
                .is_some_and(|&next| seg.next_offset.get() < next);
            if cut > 0 || overlaps || hole {
                for &later in &bases[i + 1..] {
                    tracing::warn!(dir = %dir.display(), segment = later,
                        "deleting segment after a corrupt one");
                    let s = match segments.remove(&later) {
                        Some(s) => s,
                        None => Rc::new(
                            Segment::open(dir, later, cfg, now)
                                .map_err(|e| StorageError::io(e, dir))?,
                        ),
                    };
                    s.delete_files().map_err(|e| StorageError::io(e, dir))?;
                }
                if overlaps {
                    let next = bases[i + 1];
                    seg.truncate_to(next)?;
                }
                break;
            }
            i += 1;
        }
        // Everything recovered is made durable now, so durable_end = log_end holds. That
        // includes the `.txnindex` entries the crashed process left in the page cache: the
        // broker's replay treats the entries it finds as known and does not write them again.
        for seg in segments.range(bases[start]..).map(|(_, s)| s) {
            seg.file
                .borrow()
                .sync_data()
                .map_err(|e| StorageError::io(e, seg.log_path()))?;
            let idx = seg.txn_index.borrow();
            idx.sync().map_err(|e| StorageError::io(e, idx.path()))?;
        }
    }
    // Kafka's layout: only the active segment keeps preallocated indexes.
    let n = segments.len();
    for (i, seg) in segments.values().enumerate() {
        let active = i + 1 == n;
        seg.set_active(active)
            .map_err(|e| StorageError::io(e, seg.log_path()))?;
    }
    Ok(segments)
}

#[cfg(test)]
mod tests {
    use super::parse_name;

    #[test]
    fn given_kafka_file_names_when_parsing_then_base_and_ext_extracted() {
        assert_eq!(parse_name("00000000000000000042.log"), Some((42, "log")));
        assert_eq!(
            parse_name("00000000000000000042.log.deleted"),
            Some((42, "log.deleted"))
        );
        assert_eq!(parse_name("leader-epoch-checkpoint"), None);
        assert_eq!(parse_name("0042.log"), None);
    }
}
