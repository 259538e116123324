//! A page of records of one partition, by Fetch: the console's message browser (offset or
//! timestamp seek, search by key). Records are decoded (any codec) and shown as text, and
//! keys and values in the schema registry's wire format also as the JSON their schema reads
//! (`decode_schemas`).

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{
    fetch_request::{FetchPartition, FetchTopic},
    BrokerId, FetchRequest,
};
use kafka_protocol::records::RecordBatchDecoder;
use serde::Serialize;

use super::client::Client;
use super::error::CliError;
use super::offsets::{self, OffsetSpec};
use super::topic_name;
use crate::partition::schema_ids::{Decoded, SchemaView};

/// Bytes asked per fetch: enough for a page of ordinary records, bounded for a browser.
const FETCH_BYTES: i32 = 1 << 20;
/// A value longer than this is cut in the page (the full size is reported).
const MAX_SHOWN: usize = 16 << 10;
/// Records a key search reads at most before it answers with what it found.
pub const MAX_SCAN: usize = 20_000;

#[derive(Debug, Clone, Serialize)]
pub struct Header {
    pub key: String,
    pub value: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MessageView {
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<String>,
    pub value: Option<String>,
    pub value_size: usize,
    pub truncated: bool,
    pub headers: Vec<Header>,
    /// The key / value read through the schema registry (`decode_schemas`), when they are in
    /// its wire format.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_schema: Option<SchemaDecoded>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_schema: Option<SchemaDecoded>,
    /// The whole key and value, for `decode_schemas` (not part of the answer).
    #[serde(skip)]
    raw: (Option<Bytes>, Option<Bytes>),
}

/// A key or value in the wire format, as its schema reads it.
#[derive(Debug, Clone, Serialize)]
pub struct SchemaDecoded {
    pub schema_id: i32,
    /// AVRO, PROTOBUF or JSON; null when the registry does not know the id.
    pub schema_type: Option<&'static str>,
    pub json: Option<serde_json::Value>,
    /// Why the payload could not be read through its schema.
    pub error: Option<String>,
}

impl SchemaDecoded {
    fn of(d: Decoded) -> SchemaDecoded {
        let (json, error) = match d.json {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e)),
        };
        SchemaDecoded {
            schema_id: d.schema_id,
            schema_type: d.schema_type,
            json,
            error,
        }
    }
}

/// Reads each key and value of `page` in the wire format through `view` (the broker's
/// registry). A value larger than the page shows is not decoded: its JSON would be cut too.
pub fn decode_schemas(page: &mut Page, view: &dyn SchemaView) {
    for m in &mut page.messages {
        let (key, value) = std::mem::take(&mut m.raw);
        m.key_schema = key.and_then(|k| view.decode(&k)).map(SchemaDecoded::of);
        m.value_schema = value.and_then(|v| {
            let d = view.decode(&v)?;
            Some(SchemaDecoded::of(if m.truncated {
                Decoded {
                    json: Err(format!(
                        "{} bytes, more than the {MAX_SHOWN} the browser decodes",
                        v.len()
                    )),
                    ..d
                }
            } else {
                d
            }))
        });
    }
}

#[derive(Debug, Serialize)]
pub struct Page {
    pub topic: String,
    pub partition: i32,
    pub start_offset: i64,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    /// Where the next page starts.
    pub next_offset: i64,
    /// Records read to fill the page (more than the page when searching by key).
    pub scanned: usize,
    pub messages: Vec<MessageView>,
}

fn text(b: &Option<Bytes>) -> Option<String> {
    b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned())
}

/// Up to `limit` records of `topic`/`partition` from `from` (`end` means the last `limit`),
/// only those whose key is `key` when given.
pub async fn browse(
    client: &mut Client,
    topic: &str,
    partition: i32,
    from: OffsetSpec,
    limit: usize,
    key: Option<&str>,
) -> Result<Page, CliError> {
    let meta = super::topic::partitions_of(client, topic).await?;
    let p = meta
        .partitions
        .iter()
        .find(|p| p.partition_index == partition)
        .ok_or_else(|| CliError::kafka(format!("{topic} partition {partition}"), 3, None))?;
    let leader = client.route(p.leader_id.0);
    let one = [(partition, p.leader_id.0)];
    let get = |m: std::collections::BTreeMap<i32, Result<i64, i16>>| {
        m.get(&partition)
            .cloned()
            .unwrap_or(Err(3))
            .map_err(|c| CliError::kafka(format!("ListOffsets {topic}/{partition}"), c, None))
    };
    let log_start = get(offsets::list(client, topic, &one, OffsetSpec::Start).await?)?;
    let hw = get(offsets::list(client, topic, &one, OffsetSpec::End).await?)?;
    let start = match from {
        OffsetSpec::End => (hw - limit as i64).max(log_start),
        OffsetSpec::Exact(o) => o.clamp(log_start, hw),
        other => get(offsets::resolve(client, topic, &one, other).await?)?,
    };
    let mut page = Page {
        topic: topic.to_string(),
        partition,
        start_offset: start,
        log_start_offset: log_start,
        high_watermark: hw,
        next_offset: start,
        scanned: 0,
        messages: Vec::new(),
    };
    let mut offset = start;
    while offset < hw && page.messages.len() < limit && page.scanned < MAX_SCAN {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(FETCH_BYTES)
            .with_isolation_level(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_current_leader_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(FETCH_BYTES)])]);
        let (resp, _) = client.call(leader, &req, 12).await?;
        if resp.error_code != 0 {
            return Err(CliError::kafka("Fetch", resp.error_code, None));
        }
        let data = resp
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| CliError::Client("Fetch: partition missing from the answer".into()))?;
        if data.error_code != 0 {
            return Err(CliError::kafka(
                format!("Fetch {topic}/{partition}"),
                data.error_code,
                None,
            ));
        }
        let before = offset;
        let mut records = data.records.unwrap_or_default();
        for batch in whole_batches(&mut records) {
            let mut b = batch;
            let Ok(set) = RecordBatchDecoder::decode(&mut b) else {
                return Err(CliError::Client(format!(
                    "undecodable batch at offset {offset} of {topic}/{partition}"
                )));
            };
            for r in set.records {
                if r.offset < offset {
                    continue;
                }
                offset = r.offset + 1;
                if r.control {
                    continue;
                }
                page.scanned += 1;
                if key.is_some_and(|k| r.key.as_deref() != Some(k.as_bytes())) {
                    continue;
                }
                if page.messages.len() < limit {
                    let size = r.value.as_ref().map_or(0, |v| v.len());
                    let shown = r.value.as_ref().map(|v| v.slice(..v.len().min(MAX_SHOWN)));
                    page.messages.push(MessageView {
                        partition,
                        offset: r.offset,
                        timestamp: r.timestamp,
                        key: text(&r.key),
                        value: text(&shown),
                        value_size: size,
                        truncated: size > MAX_SHOWN,
                        headers: r
                            .headers
                            .iter()
                            .map(|(k, v)| Header {
                                key: k.to_string(),
                                value: text(v),
                            })
                            .collect(),
                        key_schema: None,
                        value_schema: None,
                        raw: (r.key.clone(), r.value.clone()),
                    });
                    page.next_offset = r.offset + 1;
                }
            }
            // A batch whose records all lie below (compacted away) still moves us on.
            if page.messages.len() >= limit {
                break;
            }
        }
        if offset == before {
            // Nothing decodable advanced us: a batch larger than the fetch, or the end.
            break;
        }
        if page.messages.len() < limit {
            page.next_offset = offset;
        }
    }
    Ok(page)
}

/// The complete batches of a Fetch answer (the last one may be cut at the size limit).
fn whole_batches(records: &mut Bytes) -> Vec<Bytes> {
    let mut out = Vec::new();
    while records.remaining() >= 12 {
        let len = i32::from_be_bytes([records[8], records[9], records[10], records[11]]);
        if len < 0 || records.remaining() < 12 + len as usize {
            break;
        }
        out.push(records.split_to(12 + len as usize));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_a_cut_last_batch_when_split_then_only_whole_batches() {
        let mut buf = Vec::new();
        for len in [20i32, 5] {
            buf.extend_from_slice(&0i64.to_be_bytes());
            buf.extend_from_slice(&len.to_be_bytes());
            buf.extend(std::iter::repeat_n(0u8, len as usize));
        }
        buf.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 99, 1, 2]); // cut
        let mut b = Bytes::from(buf);
        let got = whole_batches(&mut b);
        assert_eq!(
            got.iter().map(|b| b.len()).collect::<Vec<_>>(),
            vec![32, 17]
        );
        let mut neg = Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255]);
        assert!(whole_batches(&mut neg).is_empty());
    }
}
