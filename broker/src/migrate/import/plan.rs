//! Which of the scanned partitions an import takes: the topics matching `--topics` that are
//! live in Kafka's metadata, each with all its partitions; Kafka's `__consumer_offsets` apart
//! (for the group offsets). What is left out is reported, what is ambiguous refused.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::report::Report;
use crate::coordinator::group::topic_regex::TopicRegex;
use crate::coordinator::group::OFFSETS_TOPIC;
use crate::migrate::kraft::MetadataImage;
use crate::migrate::source::SourcePartition;
use crate::migrate::state::copied_topic;
use crate::migrate::MigrateError;

/// The topics to import: name -> (topic id, its partitions 0..n in order).
pub(super) type Topics = BTreeMap<String, ([u8; 16], Vec<SourcePartition>)>;

/// Splits the scanned partitions into the topics to import and Kafka's `__consumer_offsets`
/// partitions; refuses a topic whose partitions disagree on its id or are not all there.
pub(super) fn select_partitions(
    partitions: Vec<SourcePartition>,
    metadata: Option<&MetadataImage>,
    topics_re: &TopicRegex,
    report: &mut Report,
) -> Result<(Topics, Vec<SourcePartition>), MigrateError> {
    let mut topics = Topics::new();
    let mut offsets_parts = Vec::new();
    let mut stale = BTreeSet::new();
    for p in partitions {
        if p.topic == OFFSETS_TOPIC {
            offsets_parts.push(p);
        } else if copied_topic(&p.topic, topics_re) {
            let id = storage::logdir::read_partition_metadata(&p.dir).ok_or_else(|| {
                MigrateError::Refused(format!(
                    "{}: no readable partition.metadata (topic id)",
                    p.dir.display()
                ))
            })?;
            // A partition dir of a topic Kafka's metadata does not have (deleted, or
            // deleted and created again under a new id) is a leftover Kafka would set
            // aside at its next start, not data of a live topic.
            if let Some(m) = metadata {
                if m.topic_id(&p.topic) != Some(id) {
                    if stale.insert(p.topic.clone()) {
                        report.not_carried.push(format!(
                            "topic {} (id {}): not a live topic in Kafka's metadata (deleted \
                             on Kafka); not imported",
                            p.topic,
                            storage::logdir::uuid_to_base64(&id)
                        ));
                    }
                    continue;
                }
            }
            let t = topics.entry(p.topic.clone()).or_insert((id, Vec::new()));
            if t.0 != id {
                return Err(MigrateError::Refused(format!(
                    "{}: topic id differs from the topic's other partitions",
                    p.dir.display()
                )));
            }
            t.1.push(p);
        } else if p.partition == 0 {
            let why = match p.topic.as_str() {
                "__transaction_state" => {
                    "transactional ids are not carried: a transactional producer calls \
                     InitProducerId again on Strom"
                }
                t if t.starts_with("__") => "internal topic",
                _ => "does not match --topics",
            };
            report.not_carried.push(format!("topic {}: {why}", p.topic));
        }
    }
    for (name, (_, parts)) in &topics {
        // The scan sorts, so partitions 0..n in order means none is missing.
        if parts
            .iter()
            .enumerate()
            .any(|(i, p)| p.partition != i as i32)
        {
            return Err(MigrateError::Refused(format!(
                "topic {name}: partition directories are not 0..{} (a partition is missing \
                 from every --from dir)",
                parts.len()
            )));
        }
    }
    Ok((topics, offsets_parts))
}

/// `--link` needs every `--from` dir on the filesystem of Strom's data dir: a hard link
/// cannot cross filesystems. Refused up front rather than silently copying, because
/// whoever asks for links counts on not needing the disk space of a copy.
pub(super) fn check_same_filesystem(from: &[PathBuf], data_dir: &Path) -> Result<(), MigrateError> {
    use std::os::unix::fs::MetadataExt;
    // The data dir may not exist yet: its nearest existing ancestor is where it will be.
    let target = data_dir
        .ancestors()
        .find_map(|a| {
            std::fs::metadata(if a.as_os_str().is_empty() {
                Path::new(".")
            } else {
                a
            })
            .ok()
        })
        .map(|m| m.dev());
    for f in from {
        let dev = std::fs::metadata(f)
            .map_err(|e| MigrateError::Source(format!("{}: {e}", f.display())))?
            .dev();
        if Some(dev) != target {
            return Err(MigrateError::Refused(format!(
                "--link: {} and Strom's data dir {} are on different filesystems (a hard link \
                 cannot cross them); run without --link to copy the segments",
                f.display(),
                data_dir.display()
            )));
        }
    }
    Ok(())
}
