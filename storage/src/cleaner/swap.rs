//! The file dance that makes a cleaning pass crash safe, as Kafka's `replaceSegments`
//! and `LogLoader` do it.
//!
//! - `<base>.{index,timeindex,txnindex,log}.cleaned`: being written; worthless after a
//!   crash (deleted at open).
//! - `.cleaned` -> `.swap`, the `.log` last: once `<base>.log.swap` exists the new segment
//!   is complete and fsynced, and it replaces every old segment whose base lies in
//!   `[base, end of the swap segment)`.
//! - old segments deleted, then `.swap` -> final names, the `.log` last again: while
//!   `<base>.log.swap` exists, the index files named `<base>.*` may be old or new, so
//!   [`recover`] rebuilds the offset and time indexes.

use std::io;
use std::path::{Path, PathBuf};

use crate::batch;
use crate::segment::file_name;

pub const CLEANED: &str = ".cleaned";
pub const SWAP: &str = ".swap";
const INDEXES: [&str; 3] = ["index", "timeindex", "txnindex"];

pub fn cleaned_path(dir: &Path, base: i64, ext: &str) -> PathBuf {
    dir.join(format!("{}{CLEANED}", file_name(base, ext)))
}

fn swap_path(dir: &Path, base: i64, ext: &str) -> PathBuf {
    dir.join(format!("{}{SWAP}", file_name(base, ext)))
}

fn rename_if_exists(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::rename(from, to) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

fn remove_if_exists(p: &Path) -> io::Result<()> {
    match std::fs::remove_file(p) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// `.cleaned` -> `.swap`, the log last: the commit point of a group.
pub fn commit(dir: &Path, base: i64) -> io::Result<()> {
    for ext in INDEXES {
        rename_if_exists(&cleaned_path(dir, base, ext), &swap_path(dir, base, ext))?;
    }
    std::fs::rename(cleaned_path(dir, base, "log"), swap_path(dir, base, "log"))
}

/// `.swap` -> final names (old segments already deleted), the log last.
pub fn finish(dir: &Path, base: i64) -> io::Result<()> {
    for ext in INDEXES {
        rename_if_exists(&swap_path(dir, base, ext), &dir.join(file_name(base, ext)))?;
    }
    std::fs::rename(
        swap_path(dir, base, "log"),
        dir.join(file_name(base, "log")),
    )
}

/// Removes a group's `.cleaned` and `.swap` files (a pass abandoned before deleting
/// anything old).
pub fn discard(dir: &Path, base: i64) {
    for ext in INDEXES.iter().chain(["log"].iter()) {
        for p in [cleaned_path(dir, base, ext), swap_path(dir, base, ext)] {
            if let Err(e) = remove_if_exists(&p) {
                tracing::warn!(file = %p.display(), error = %e, "cannot remove cleaner file");
            }
        }
    }
}

/// Offset after the last complete, valid batch of `path`.
fn end_offset(path: &Path, base: i64) -> io::Result<i64> {
    let data = std::fs::read(path)?;
    let mut end = base;
    let mut pos = 0;
    while pos < data.len() {
        match batch::validate_stored(&data[pos..]) {
            Ok(h) => {
                end = h.last_offset() + 1;
                pos += h.total_size();
            }
            Err(_) => break,
        }
    }
    Ok(end)
}

fn parse(name: &str) -> Option<(i64, &str)> {
    let (stem, ext) = name.split_once('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stem.parse().ok()?, ext))
}

/// At open, before segments are loaded: completes every committed swap (`<base>.log.swap`
/// present: delete the segments it replaces, give it its final name, drop its possibly
/// stale offset and time indexes so they are rebuilt) and removes every other `.swap`
/// file (an uncommitted group: its old segments are intact). `.cleaned` files are left
/// for the loader, which removes them. Returns whether anything changed (the caller
/// syncs the directory).
pub fn recover(dir: &Path) -> io::Result<bool> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        names.push(entry?.file_name().to_string_lossy().into_owned());
    }
    let swaps: Vec<i64> = names
        .iter()
        .filter_map(|n| parse(n))
        .filter(|(_, ext)| *ext == "log.swap")
        .map(|(b, _)| b)
        .collect();
    let mut changed = false;
    for &base in &swaps {
        let end = end_offset(&swap_path(dir, base, "log"), base)?;
        tracing::warn!(dir = %dir.display(), base, end, "completing an interrupted log cleaning swap");
        for n in &names {
            let Some((b, ext)) = parse(n) else { continue };
            let replaced = b >= base && b < end.max(base + 1);
            if replaced && matches!(ext, "log" | "index" | "timeindex") {
                remove_if_exists(&dir.join(n))?;
            }
            // The old txnindex goes only where the swap brings its own (every cleaned
            // group writes one, maybe empty; a missing one means `finish` already
            // renamed it to its final name).
            if replaced
                && ext == "txnindex"
                && (b != base || swap_path(dir, base, "txnindex").exists())
            {
                remove_if_exists(&dir.join(n))?;
            }
        }
        rename_if_exists(
            &swap_path(dir, base, "txnindex"),
            &dir.join(file_name(base, "txnindex")),
        )?;
        remove_if_exists(&swap_path(dir, base, "index"))?;
        remove_if_exists(&swap_path(dir, base, "timeindex"))?;
        std::fs::rename(
            swap_path(dir, base, "log"),
            dir.join(file_name(base, "log")),
        )?;
        changed = true;
    }
    for n in &names {
        if let Some((b, ext)) = parse(n) {
            if ext.ends_with(SWAP) && !swaps.contains(&b) {
                tracing::info!(file = %n, "removing uncommitted cleaner swap file");
                remove_if_exists(&dir.join(n))?;
                changed = true;
            }
        }
    }
    Ok(changed)
}
