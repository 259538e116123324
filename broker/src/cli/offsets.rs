//! Offsets as people name them (`start`, `end`, `42`, `@1717000000000`) and ListOffsets by
//! partition leader, shared by `topic`, `group seek`, `consume` and the console.

use std::collections::BTreeMap;

use kafka_protocol::messages::{
    list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
    BrokerId, ListOffsetsRequest,
};

use super::client::Client;
use super::error::CliError;
use super::topic_name;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Start,
    /// The high watermark (the next offset to be written).
    End,
    /// An exact offset.
    Exact(i64),
    /// The first offset whose timestamp is at or after this (ms since the epoch); the end
    /// when there is none.
    Timestamp(i64),
}

impl OffsetSpec {
    pub fn parse(s: &str) -> Result<OffsetSpec, CliError> {
        let bad = || {
            CliError::Usage(format!(
                "offset {s:?}: expected start, end, a number or @TIMESTAMP_MS"
            ))
        };
        match s {
            "start" | "beginning" | "earliest" | "oldest" => Ok(OffsetSpec::Start),
            "end" | "latest" | "newest" => Ok(OffsetSpec::End),
            _ => {
                if let Some(ts) = s.strip_prefix('@') {
                    let ts: i64 = ts.parse().map_err(|_| bad())?;
                    if ts < 0 {
                        return Err(bad());
                    }
                    Ok(OffsetSpec::Timestamp(ts))
                } else {
                    let o: i64 = s.parse().map_err(|_| bad())?;
                    if o < 0 {
                        return Err(bad());
                    }
                    Ok(OffsetSpec::Exact(o))
                }
            }
        }
    }

    /// ListOffsets' timestamp argument (-2 earliest, -1 latest), `None` for an exact offset.
    fn list_timestamp(self) -> Option<i64> {
        match self {
            OffsetSpec::Start => Some(-2),
            OffsetSpec::End => Some(-1),
            OffsetSpec::Timestamp(ts) => Some(ts),
            OffsetSpec::Exact(_) => None,
        }
    }
}

/// Per partition: the offset ListOffsets answers for `spec`, or its error code. `leaders` is
/// (partition, leader node). A timestamp past the last record answers -1, as Kafka does.
pub async fn list(
    client: &mut Client,
    topic: &str,
    leaders: &[(i32, i32)],
    spec: OffsetSpec,
) -> Result<BTreeMap<i32, Result<i64, i16>>, CliError> {
    let Some(ts) = spec.list_timestamp() else {
        let OffsetSpec::Exact(o) = spec else {
            unreachable!()
        };
        return Ok(leaders.iter().map(|(p, _)| (*p, Ok(o))).collect());
    };
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (p, l) in leaders {
        by_leader.entry(*l).or_default().push(*p);
    }
    let mut out = BTreeMap::new();
    for (leader, parts) in by_leader {
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(0)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(
                    parts
                        .iter()
                        .map(|p| {
                            ListOffsetsPartition::default()
                                .with_partition_index(*p)
                                .with_current_leader_epoch(-1)
                                .with_timestamp(ts)
                        })
                        .collect(),
                )]);
        let node = client.route(leader);
        let (resp, _) = client.call(node, &req, 9).await?;
        for t in resp.topics {
            for p in t.partitions {
                let r = if p.error_code == 0 {
                    Ok(p.offset)
                } else {
                    Err(p.error_code)
                };
                out.insert(p.partition_index, r);
            }
        }
    }
    Ok(out)
}

/// Like `list`, with a timestamp past the last record resolved to the end (where a reader or
/// a group positioned "at that time" would be), as kafka-consumer-groups' --to-datetime does.
pub async fn resolve(
    client: &mut Client,
    topic: &str,
    leaders: &[(i32, i32)],
    spec: OffsetSpec,
) -> Result<BTreeMap<i32, Result<i64, i16>>, CliError> {
    let mut out = list(client, topic, leaders, spec).await?;
    if matches!(spec, OffsetSpec::Timestamp(_)) && out.values().any(|r| r == &Ok(-1)) {
        let ends = list(client, topic, leaders, OffsetSpec::End).await?;
        for (p, r) in out.iter_mut() {
            if *r == Ok(-1) {
                *r = ends.get(p).cloned().unwrap_or(Err(3));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_offset_words_when_parsed_then_specs() {
        let cases = [
            ("start", OffsetSpec::Start),
            ("earliest", OffsetSpec::Start),
            ("end", OffsetSpec::End),
            ("42", OffsetSpec::Exact(42)),
            ("@1717000000000", OffsetSpec::Timestamp(1_717_000_000_000)),
        ];
        for (s, want) in cases {
            assert_eq!(OffsetSpec::parse(s).unwrap(), want, "{s}");
        }
    }

    #[test]
    fn given_bad_offsets_when_parsed_then_usage_errors() {
        for s in ["", "-1", "@", "@x", "@-5", "next", "1.5"] {
            let e = OffsetSpec::parse(s).unwrap_err();
            assert_eq!(e.exit_code(), super::super::error::EXIT_USAGE, "{s}");
        }
    }
}
