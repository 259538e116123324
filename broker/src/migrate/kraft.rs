//! Topic configs from Kafka's KRaft metadata log (`__cluster_metadata-0`), for an offline
//! import without `--configs-from`.
//!
//! The metadata log is a partition like any other: record batches (CRC-checked here like
//! every imported batch) whose records have no key and a value framed as Kafka's
//! `ApiMessageAndVersion`: unsigned varints frame version (1), record type (api key) and
//! record version, then the record in Kafka's flexible-version message encoding. The
//! newest snapshot (`<end offset>-<epoch>.checkpoint`, batches of the same records) holds
//! the whole image up to its end offset; the log's records from there on are replayed on
//! top, as a restarting Kafka does. Only three record types matter for topic configs
//! (schemas in Kafka's metadata/src/main/resources/common/metadata/):
//! - `TopicRecord` (type 2, v0): Name (string), TopicId (uuid);
//! - `ConfigRecord` (type 4, v0): ResourceType (int8), ResourceName, Name (strings),
//!   Value (nullable string: null deletes the key);
//! - `RemoveTopicRecord` (type 9, v0): TopicId; Kafka drops the topic's configs with it.
//!
//! Every other record type is skipped by its type number without being parsed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::source::BatchReader;
use super::MigrateError;

/// Kafka's `ConfigResource.Type` codes of ConfigRecord.ResourceType.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

const TOPIC_RECORD: u32 = 2;
const CONFIG_RECORD: u32 = 4;
const REMOVE_TOPIC_RECORD: u32 = 9;

/// The records of the metadata log this module understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataRecord {
    Topic {
        name: String,
        id: [u8; 16],
    },
    Config {
        resource_type: i8,
        resource_name: String,
        name: String,
        value: Option<String>,
    },
    RemoveTopic {
        id: [u8; 16],
    },
    /// Any other record type (partitions, brokers, features, ...), not parsed.
    Other(u32),
}

/// Why a record could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("record ends early")]
    Short,
    #[error("unsupported frame version {0} (only 1)")]
    Frame(u32),
    #[error("record type {0} version {1} is not understood")]
    Version(u32, u32),
    #[error("string is not UTF-8")]
    Utf8,
    #[error("{0} bytes after the record")]
    Trailing(usize),
}

struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError::Short);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn uvarint(&mut self) -> Result<u32, DecodeError> {
        let mut v = 0u32;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            v |= ((b & 0x7f) as u32) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::Short)
    }

    /// A compact (nullable) string: unsigned varint length + 1, 0 for null.
    fn string(&mut self) -> Result<Option<String>, DecodeError> {
        let n = self.uvarint()?;
        if n == 0 {
            return Ok(None);
        }
        let bytes = self.take(n as usize - 1)?;
        std::str::from_utf8(bytes)
            .map(|s| Some(s.to_string()))
            .map_err(|_| DecodeError::Utf8)
    }

    fn uuid(&mut self) -> Result<[u8; 16], DecodeError> {
        Ok(self.take(16)?.try_into().expect("16 bytes"))
    }

    /// The tagged-field section every flexible version ends with (none of these records
    /// defines a tag, so all are skipped).
    fn tagged_fields(&mut self) -> Result<(), DecodeError> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.take(size as usize)?;
        }
        Ok(())
    }
}

/// Decodes one metadata record value (an `ApiMessageAndVersion` frame).
pub fn decode(value: &[u8]) -> Result<MetadataRecord, DecodeError> {
    let mut c = Cursor { buf: value };
    let frame = c.uvarint()?;
    if frame != 1 {
        return Err(DecodeError::Frame(frame));
    }
    let kind = c.uvarint()?;
    let version = c.uvarint()?;
    if !matches!(kind, TOPIC_RECORD | CONFIG_RECORD | REMOVE_TOPIC_RECORD) {
        return Ok(MetadataRecord::Other(kind));
    }
    if version != 0 {
        return Err(DecodeError::Version(kind, version));
    }
    let string = |c: &mut Cursor| c.string()?.ok_or(DecodeError::Short);
    let rec = match kind {
        TOPIC_RECORD => MetadataRecord::Topic {
            name: string(&mut c)?,
            id: c.uuid()?,
        },
        CONFIG_RECORD => MetadataRecord::Config {
            resource_type: c.take(1)?[0] as i8,
            resource_name: string(&mut c)?,
            name: string(&mut c)?,
            value: c.string()?,
        },
        _ => MetadataRecord::RemoveTopic { id: c.uuid()? },
    };
    c.tagged_fields()?;
    if !c.buf.is_empty() {
        return Err(DecodeError::Trailing(c.buf.len()));
    }
    Ok(rec)
}

/// The part of Kafka's metadata image an import needs: live topics and every config.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MetadataImage {
    topics: BTreeMap<[u8; 16], String>,
    /// (resource type, resource name) -> key -> value.
    configs: BTreeMap<(i8, String), BTreeMap<String, String>>,
    /// What was read, for the report.
    pub source: String,
}

impl MetadataImage {
    pub fn apply(&mut self, rec: MetadataRecord) {
        match rec {
            MetadataRecord::Topic { name, id } => {
                self.topics.insert(id, name);
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => {
                let key = (resource_type, resource_name);
                match value {
                    Some(v) => {
                        self.configs.entry(key).or_default().insert(name, v);
                    }
                    None => {
                        if let Some(c) = self.configs.get_mut(&key) {
                            c.remove(&name);
                            if c.is_empty() {
                                self.configs.remove(&key);
                            }
                        }
                    }
                }
            }
            MetadataRecord::RemoveTopic { id } => {
                if let Some(name) = self.topics.remove(&id) {
                    self.configs.remove(&(RESOURCE_TOPIC, name));
                }
            }
            MetadataRecord::Other(_) => {}
        }
    }

    /// The live topic's id, if Kafka's metadata has a topic of that name.
    pub fn topic_id(&self, name: &str) -> Option<[u8; 16]> {
        self.topics
            .iter()
            .find_map(|(id, n)| (n == name).then_some(*id))
    }

    /// The topic's configs set on Kafka (those not at their default).
    pub fn topic_configs(&self, name: &str) -> BTreeMap<String, String> {
        self.configs
            .get(&(RESOURCE_TOPIC, name.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    /// Configs of other resources: (resource type, resource name, key, value).
    pub fn other_configs(&self) -> impl Iterator<Item = (i8, &str, &str, &str)> {
        self.configs
            .iter()
            .filter(|((t, _), _)| *t != RESOURCE_TOPIC)
            .flat_map(|((t, r), c)| {
                c.iter()
                    .map(move |(k, v)| (*t, r.as_str(), k.as_str(), v.as_str()))
            })
    }
}

/// The metadata partition dir: `dir` itself, or its `__cluster_metadata-0`.
pub fn metadata_partition_dir(dir: &Path) -> PathBuf {
    if dir
        .file_name()
        .is_some_and(|n| n == super::source::METADATA_DIR)
    {
        dir.to_path_buf()
    } else {
        dir.join(super::source::METADATA_DIR)
    }
}

/// Reads the newest snapshot and the log after it (every batch CRC-checked).
pub fn read(dir: &Path) -> Result<MetadataImage, MigrateError> {
    // Kafka's snapshot names: `<end offset>-<epoch>.checkpoint`.
    let mut snapshots = super::source::numbered_files(dir, |name| {
        let (offset, _epoch) = name.strip_suffix(".checkpoint")?.split_once('-')?;
        offset.parse().ok()
    })?;
    snapshots.sort();
    let mut image = MetadataImage::default();
    let from = match snapshots.pop() {
        Some((end, path)) => {
            replay(BatchReader::files(vec![(0, path.clone())]), 0, &mut image)?;
            image.source = format!("snapshot {}", path.display());
            end
        }
        None => 0,
    };
    let log = BatchReader::open(dir)?;
    if let Some((first, path)) = log.segments().first() {
        if *first > from {
            return Err(MigrateError::Source(format!(
                "{}: the metadata log starts at offset {first}, the newest snapshot ends at \
                 {from}: records in between are missing",
                path.display()
            )));
        }
    }
    let n = replay(log, from, &mut image)?;
    let log_part = format!("{n} records of {} from offset {from}", dir.display());
    image.source = if image.source.is_empty() {
        log_part
    } else {
        format!("{} + {log_part}", image.source)
    };
    Ok(image)
}

/// Applies the records at or above offset `from`; returns how many were applied.
fn replay(mut r: BatchReader, from: i64, image: &mut MetadataImage) -> Result<usize, MigrateError> {
    let mut n = 0;
    while let Some((h, b)) = r.next_batch()? {
        // Control batches (leader changes, snapshot header and footer, voters) carry no
        // metadata records.
        if h.is_control() || h.last_offset() < from {
            continue;
        }
        let at = |e: String| {
            MigrateError::Source(format!(
                "{}: batch at offset {}: {e}",
                r.segments()[r.segment_index()].1.display(),
                h.base_offset
            ))
        };
        let mut buf = Bytes::from(b);
        let sets = RecordBatchDecoder::decode_all(&mut buf).map_err(|e| at(format!("{e:#}")))?;
        for rec in sets.iter().flat_map(|s| s.records.iter()) {
            if rec.offset < from {
                continue;
            }
            let value = rec.value.as_deref().unwrap_or_default();
            let m = decode(value)
                .map_err(|e| at(format!("metadata record at offset {}: {e}", rec.offset)))?;
            image.apply(m);
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use proptest::prelude::*;

    fn uvarint(out: &mut Vec<u8>, mut v: u32) {
        while v >= 0x80 {
            out.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn string(out: &mut Vec<u8>, s: Option<&str>) {
        match s {
            None => uvarint(out, 0),
            Some(s) => {
                uvarint(out, s.len() as u32 + 1);
                out.extend_from_slice(s.as_bytes());
            }
        }
    }

    /// Kafka's encoding of a record, as its generated `write` and the frame serde do.
    pub(crate) fn encode(rec: &MetadataRecord) -> Vec<u8> {
        let mut out = vec![1];
        match rec {
            MetadataRecord::Topic { name, id } => {
                out.extend_from_slice(&[TOPIC_RECORD as u8, 0]);
                string(&mut out, Some(name));
                out.extend_from_slice(id);
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => {
                out.extend_from_slice(&[CONFIG_RECORD as u8, 0, *resource_type as u8]);
                string(&mut out, Some(resource_name));
                string(&mut out, Some(name));
                string(&mut out, value.as_deref());
            }
            MetadataRecord::RemoveTopic { id } => {
                out.extend_from_slice(&[REMOVE_TOPIC_RECORD as u8, 0]);
                out.extend_from_slice(id);
            }
            MetadataRecord::Other(kind) => {
                uvarint(&mut out, *kind);
                out.extend_from_slice(&[0, 0, 0, 0, 1, 2]);
                return out;
            }
        }
        out.push(0); // no tagged fields
        out
    }

    /// A batch of metadata records at `base` (a control batch when `control`).
    pub(crate) fn batch(base: i64, recs: &[MetadataRecord], control: bool) -> BytesMut {
        let records: Vec<Record> = recs
            .iter()
            .enumerate()
            .map(|(i, r)| Record {
                transactional: false,
                control,
                delete_horizon: false,
                partition_leader_epoch: 1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: base + i as i64,
                sequence: -1,
                timestamp: 1_700_000_000_000,
                key: control.then(|| Bytes::from_static(&[0, 0, 0, 2])),
                value: Some(Bytes::from(encode(r))),
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        let opts = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, &records, &opts).unwrap();
        buf
    }

    pub(crate) fn config(topic: &str, k: &str, v: Option<&str>) -> MetadataRecord {
        MetadataRecord::Config {
            resource_type: RESOURCE_TOPIC,
            resource_name: topic.into(),
            name: k.into(),
            value: v.map(Into::into),
        }
    }

    #[test]
    fn given_kafka_bytes_when_decoded_then_fields_as_in_the_schemas() {
        // A ConfigRecord as Kafka 4.x writes it: frame 1, type 4, version 0, TOPIC, "t",
        // "retention.ms", "1000", no tagged fields.
        let bytes = b"\x01\x04\x00\x02\x02t\x0dretention.ms\x051000\x00";
        assert_eq!(decode(bytes), Ok(config("t", "retention.ms", Some("1000"))));
        let deleted = b"\x01\x04\x00\x02\x02t\x0dretention.ms\x00\x00";
        assert_eq!(decode(deleted), Ok(config("t", "retention.ms", None)));
        assert_eq!(decode(b"\x00\x04\x00"), Err(DecodeError::Frame(0)));
        assert_eq!(decode(b"\x01\x04\x01\x02"), Err(DecodeError::Version(4, 1)));
        assert_eq!(decode(&bytes[..9]), Err(DecodeError::Short));
        let mut long = bytes.to_vec();
        long.push(7);
        assert_eq!(decode(&long), Err(DecodeError::Trailing(1)));
        // A PartitionRecord (type 3) is skipped unparsed.
        assert_eq!(decode(b"\x01\x03\x01garbage"), Ok(MetadataRecord::Other(3)));
    }

    fn record() -> impl Strategy<Value = MetadataRecord> {
        let name = "[a-z._-]{0,20}";
        prop_oneof![
            (name, any::<[u8; 16]>()).prop_map(|(name, id)| MetadataRecord::Topic { name, id }),
            (any::<i8>(), name, name, proptest::option::of("\\PC{0,40}")).prop_map(
                |(resource_type, resource_name, name, value)| MetadataRecord::Config {
                    resource_type,
                    resource_name,
                    name,
                    value
                }
            ),
            any::<[u8; 16]>().prop_map(|id| MetadataRecord::RemoveTopic { id }),
            (0u32..300)
                .prop_filter("other types", |k| ![2, 4, 9].contains(k))
                .prop_map(MetadataRecord::Other),
        ]
    }

    proptest! {
        #[test]
        fn encoded_records_decode_to_themselves(rec in record()) {
            prop_assert_eq!(decode(&encode(&rec)), Ok(rec));
        }

        #[test]
        fn truncated_or_garbage_input_is_an_error_not_a_panic(
            rec in record(), cut in any::<prop::sample::Index>(), noise in any::<Vec<u8>>()
        ) {
            let bytes = encode(&rec);
            if !matches!(rec, MetadataRecord::Other(_)) {
                let at = cut.index(bytes.len());
                prop_assert!(decode(&bytes[..at]).is_err());
            }
            let _ = decode(&noise);
        }
    }

    #[test]
    fn given_snapshot_and_log_when_read_then_latest_topic_configs_and_removed_topics_gone() {
        let d = tempfile::tempdir().unwrap();
        let (t1, t2, t3) = ([1u8; 16], [2u8; 16], [3u8; 16]);
        let topic = |name: &str, id| MetadataRecord::Topic {
            name: name.into(),
            id,
        };
        // The snapshot ends at offset 4: it holds the image of offsets 0..=3.
        // Its first batch is the header (a control batch), as Kafka writes snapshots.
        let mut snap = batch(0, &[MetadataRecord::Other(20)], true);
        snap.extend_from_slice(&batch(
            1,
            &[
                topic("a", t1),
                config("a", "cleanup.policy", Some("compact")),
                topic("gone", t2),
                config("gone", "retention.ms", Some("5")),
            ],
            false,
        ));
        std::fs::write(
            d.path().join("00000000000000000004-0000000001.checkpoint"),
            &snap,
        )
        .unwrap();
        // An older snapshot that would resurrect a stale value if it were read.
        let old = batch(0, &[config("a", "max.message.bytes", Some("1"))], false);
        std::fs::write(
            d.path().join("00000000000000000001-0000000001.checkpoint"),
            &old,
        )
        .unwrap();
        // The log: offsets 0..=3, which the snapshot already reflects (segment.ms is not in
        // it: replaying them again would be wrong), then newer records.
        let mut log = batch(0, &[config("a", "segment.ms", Some("9"))], false);
        log.extend_from_slice(&batch(1, &[MetadataRecord::Other(3)], false));
        log.extend_from_slice(&batch(2, &[MetadataRecord::Other(12)], true));
        log.extend_from_slice(&batch(3, &[MetadataRecord::Other(3)], false));
        log.extend_from_slice(&batch(
            4,
            &[
                config("a", "retention.ms", Some("100")),
                config("a", "retention.ms", Some("200")), // altered
                config("a", "max.message.bytes", Some("5000")),
                config("a", "max.message.bytes", None), // deleted
                MetadataRecord::RemoveTopic { id: t2 },
                topic("gone", t3), // recreated: the old configs do not come back
                MetadataRecord::Config {
                    resource_type: RESOURCE_BROKER,
                    resource_name: String::new(),
                    name: "log.retention.ms".into(),
                    value: Some("7".into()),
                },
            ],
            false,
        ));
        std::fs::write(d.path().join("00000000000000000000.log"), &log).unwrap();
        let image = read(d.path()).unwrap();
        let want: BTreeMap<String, String> =
            [("cleanup.policy", "compact"), ("retention.ms", "200")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(image.topic_configs("a"), want);
        assert_eq!(image.topic_id("a"), Some(t1));
        assert_eq!(image.topic_id("gone"), Some(t3));
        assert!(image.topic_configs("gone").is_empty());
        let others: Vec<_> = image.other_configs().collect();
        assert_eq!(others, vec![(RESOURCE_BROKER, "", "log.retention.ms", "7")]);
        assert!(image.source.contains("snapshot"), "{}", image.source);

        // A flipped byte in the log: an error naming the file, not a wrong image.
        let mut bad = log.to_vec();
        let n = bad.len();
        bad[n - 10] ^= 1;
        std::fs::write(d.path().join("00000000000000000000.log"), &bad).unwrap();
        let err = read(d.path()).unwrap_err().to_string();
        assert!(
            err.contains("00000000000000000000.log") && err.contains("CRC"),
            "{err}"
        );

        // Log segments that start after the newest snapshot's end: records are missing.
        std::fs::remove_file(d.path().join("00000000000000000000.log")).unwrap();
        std::fs::write(
            d.path().join("00000000000000000009.log"),
            batch(9, &[MetadataRecord::Other(3)], false),
        )
        .unwrap();
        let err = read(d.path()).unwrap_err().to_string();
        assert!(err.contains("records in between are missing"), "{err}");
    }
}
