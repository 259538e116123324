//! This module's codecs against Apache Kafka's own message schemas (the `common/message/*.json`
//! files inside the kafka-clients jar the compat suite fetches, `compat-tests/kafka/kafka.sh
//! fetch`; `STROM_KAFKA_CLIENTS_JAR` names another). Without the jar these tests say so and
//! pass, except under CI (`CI` set), where the jar is always fetched first and its absence
//! fails.
//!
//! - Capped messages: at every version above the crate's maximum, the schema's fields (at
//!   every nesting level) are the maximum's.
//! - Hand-derived messages: a schema-driven encoder writes a sample at each version; our
//!   decoder reads it whole and our encoder writes the same bytes back.

use std::path::PathBuf;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable};
use serde_json::{json, Value};

use super::wire;

const KAFKA_VERSION: &str = "4.4.0";

fn jar() -> Option<PathBuf> {
    let path = std::env::var_os("STROM_KAFKA_CLIENTS_JAR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
                "../compat-tests/.cache/kafka-{KAFKA_VERSION}/kafka-clients-{KAFKA_VERSION}.jar"
            ))
        });
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} missing: run compat-tests/kafka/kafka.sh fetch",
        path.display()
    );
    eprintln!(
        "skipped: {} missing (compat-tests/kafka/kafka.sh fetch)",
        path.display()
    );
    None
}

/// A message schema, its `//` comment lines removed (Kafka's JSON has them).
fn schema(jar: &PathBuf, name: &str) -> Value {
    let unzip = |j: &PathBuf| {
        std::process::Command::new("unzip")
            .arg("-p")
            .arg(j)
            .arg(format!("common/message/{name}.json"))
            .output()
            .expect("unzip runs")
    };
    let mut out = unzip(jar);
    if !out.status.success() || out.stdout.is_empty() {
        // The coordinator records are in the group coordinator's jar.
        out = unzip(&jar.with_file_name(format!("kafka-group-coordinator-{KAFKA_VERSION}.jar")));
    }
    assert!(
        out.status.success() && !out.stdout.is_empty(),
        "{name} in the jar"
    );
    let text: String = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// "3+", "0-2", "none" as a predicate on versions.
fn in_range(spec: Option<&Value>, v: i16) -> bool {
    let Some(s) = spec.and_then(Value::as_str) else {
        return false;
    };
    if s == "none" {
        return false;
    }
    if let Some(min) = s.strip_suffix('+') {
        return v >= min.parse::<i16>().unwrap();
    }
    match s.split_once('-') {
        Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).contains(&v),
        None => v == s.parse::<i16>().unwrap(),
    }
}

fn valid_max(schema: &Value) -> i16 {
    let s = schema["validVersions"].as_str().unwrap();
    s.rsplit('-').next().unwrap().parse().unwrap()
}

/// What a version of the message looks like on the wire: every field present at it, with
/// its type, nullability and tag, nested structs included.
fn layout(fields: &Value, v: i16) -> Vec<String> {
    let mut out = Vec::new();
    for f in fields.as_array().into_iter().flatten() {
        if !in_range(f.get("versions"), v) {
            continue;
        }
        out.push(format!(
            "{} {} null={} tag={}",
            f["name"],
            f["type"],
            in_range(f.get("nullableVersions"), v),
            if in_range(f.get("taggedVersions"), v) {
                f["tag"].to_string()
            } else {
                "-".into()
            }
        ));
        if let Some(sub) = f.get("fields") {
            out.extend(layout(sub, v).into_iter().map(|l| format!("  {l}")));
        }
    }
    out
}

#[test]
fn given_capped_messages_when_compared_with_kafka_schema_then_no_field_added_above_the_cap() {
    let Some(jar) = jar() else { return };
    for (name, cap) in super::CAPPED {
        let s = schema(&jar, name);
        let max = valid_max(&s);
        assert!(
            max > *cap,
            "{name}: Kafka's maximum {max} is the crate's, no cap needed"
        );
        let flexible = |v| in_range(s.get("flexibleVersions"), v);
        for v in cap + 1..=max {
            assert_eq!(flexible(v), flexible(*cap), "{name} v{v} flexibility");
            assert_eq!(
                layout(&s["fields"], v),
                layout(&s["fields"], *cap),
                "{name} v{v}"
            );
        }
    }
}

/// Kafka's generated serialisation, driven by the schema: non-tagged fields in order, then
/// (flexible versions) the tagged ones. Missing values are the type's zero (or null).
/// `common` holds the schema's `commonStructs`, which fields name by type instead of
/// nesting their fields.
struct SchemaEncoder<'a> {
    common: &'a Value,
}

impl SchemaEncoder<'_> {
    fn struct_fields<'b>(&'b self, f: &'b Value) -> Option<&'b Value> {
        if let Some(sub) = f.get("fields") {
            return Some(sub);
        }
        let name = f["type"].as_str().unwrap().trim_start_matches("[]");
        self.common
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == name)
            .map(|c| &c["fields"])
    }

    fn encode(&self, fields: &Value, value: &Value, v: i16, flexible: bool, out: &mut BytesMut) {
        let mut tagged = Vec::new();
        for f in fields.as_array().into_iter().flatten() {
            if !in_range(f.get("versions"), v) {
                continue;
            }
            let val = &value[f["name"].as_str().unwrap()];
            if flexible && in_range(f.get("taggedVersions"), v) {
                let mut b = BytesMut::new();
                self.field(f, val, v, flexible, &mut b);
                tagged.push((f["tag"].as_u64().unwrap() as u32, b));
                continue;
            }
            self.field(f, val, v, flexible, out);
        }
        if flexible {
            wire::put_uvarint(out, tagged.len() as u32);
            for (tag, b) in tagged {
                wire::put_uvarint(out, tag);
                wire::put_uvarint(out, b.len() as u32);
                out.put_slice(&b);
            }
        }
    }

    fn field(&self, f: &Value, val: &Value, v: i16, flexible: bool, out: &mut BytesMut) {
        let ty = f["type"].as_str().unwrap();
        let nullable = in_range(f.get("nullableVersions"), v);
        if let Some(elem) = ty.strip_prefix("[]") {
            if val.is_null() && nullable {
                wire::put_null_array(out, flexible);
                return;
            }
            let items = val.as_array().cloned().unwrap_or_default();
            wire::put_array_len(out, items.len(), flexible);
            for item in &items {
                match self.struct_fields(f) {
                    Some(sub) => self.encode(sub, item, v, flexible, out),
                    None => encode_scalar(elem, item, false, flexible, out),
                }
            }
            return;
        }
        match self.struct_fields(f) {
            Some(sub) => {
                // A nullable struct is preceded by -1 (null) or 1 (present), as Kafka writes it.
                if nullable {
                    if val.is_null() {
                        out.put_i8(-1);
                        return;
                    }
                    out.put_i8(1);
                }
                self.encode(sub, val, v, flexible, out)
            }
            None => encode_scalar(ty, val, nullable, flexible, out),
        }
    }
}

fn schema_encode(s: &Value, value: &Value, v: i16, flexible: bool, out: &mut BytesMut) {
    let common = s.get("commonStructs").cloned().unwrap_or(Value::Null);
    SchemaEncoder { common: &common }.encode(&s["fields"], value, v, flexible, out)
}

fn encode_scalar(ty: &str, val: &Value, nullable: bool, flexible: bool, out: &mut BytesMut) {
    let int = || val.as_i64().unwrap_or(0);
    match ty {
        "int8" => out.put_i8(int() as i8),
        "int16" => out.put_i16(int() as i16),
        "uint16" => out.put_u16(int() as u16),
        "int32" => out.put_i32(int() as i32),
        "int64" => out.put_i64(int()),
        "bool" => out.put_u8(u8::from(val.as_bool().unwrap_or(false))),
        "uuid" => out.put_u128(
            val.as_str()
                .map_or(0, |s| uuid::Uuid::parse_str(s).unwrap().as_u128()),
        ),
        "string" => match val.as_str() {
            Some(s) => wire::put_string(out, s, flexible),
            None if nullable => wire::put_nullable_string(out, None, flexible),
            None => wire::put_string(out, "", flexible),
        },
        other => panic!("type {other} not handled by the schema encoder"),
    }
}

/// Our codec of `T` against the schema of `name` at every version it serves.
fn round_trip<T: Encodable + Decodable>(
    name: &str,
    versions: std::ops::RangeInclusive<i16>,
    sample: Value,
) {
    let Some(jar) = jar() else { return };
    let s = schema(&jar, name);
    assert_eq!(
        *versions.end(),
        valid_max(&s),
        "{name}: serve Kafka's maximum"
    );
    for v in versions {
        let flexible = in_range(s.get("flexibleVersions"), v);
        let mut kafka = BytesMut::new();
        schema_encode(&s, &sample, v, flexible, &mut kafka);
        let kafka: Bytes = kafka.freeze();
        let mut input = kafka.clone();
        let decoded = T::decode(&mut input, v).unwrap_or_else(|e| panic!("{name} v{v}: {e:#}"));
        assert!(input.is_empty(), "{name} v{v}: {} bytes left", input.len());
        let mut ours = BytesMut::new();
        decoded.encode(&mut ours, v).unwrap();
        assert_eq!(ours.freeze(), kafka, "{name} v{v}");
        assert_eq!(
            decoded.compute_size(v).unwrap(),
            kafka.len(),
            "{name} v{v} size"
        );
    }
}

#[test]
fn given_api_versions_request_when_round_tripped_with_kafka_schema_then_same_bytes() {
    round_trip::<super::api_versions::ApiVersionsRequest>(
        "ApiVersionsRequest",
        0..=5,
        json!({"ClientSoftwareName": "strom-test", "ClientSoftwareVersion": "1.2",
               "ClusterId": "c-1", "NodeId": 7}),
    );
}

#[test]
fn given_delete_groups_response_when_round_tripped_with_kafka_schema_then_same_bytes() {
    round_trip::<super::delete_groups::DeleteGroupsResponse>(
        "DeleteGroupsResponse",
        0..=3,
        json!({"ThrottleTimeMs": 3, "Results": [
            {"GroupId": "g1", "ErrorCode": 69, "ErrorMessage": "gone"},
            {"GroupId": "g2", "ErrorCode": 0}]}),
    );
}

#[test]
fn given_describe_log_dirs_response_when_round_tripped_with_kafka_schema_then_same_bytes() {
    round_trip::<super::describe_log_dirs::DescribeLogDirsResponse>(
        "DescribeLogDirsResponse",
        1..=5,
        json!({"ThrottleTimeMs": 1, "ErrorCode": 57, "Results": [
            {"ErrorCode": 0, "LogDir": "/d", "TotalBytes": 100, "UsableBytes": 40, "IsCordoned": true,
             "Topics": [{"Name": "t", "Partitions": [
                {"PartitionIndex": 2, "PartitionSize": 77, "OffsetLag": 1, "IsFutureKey": true}]}]}]}),
    );
}

#[test]
fn given_write_txn_markers_request_when_round_tripped_with_kafka_schema_then_same_bytes() {
    round_trip::<super::write_txn_markers::WriteTxnMarkersRequest>(
        "WriteTxnMarkersRequest",
        1..=2,
        json!({"Markers": [{"ProducerId": 9, "ProducerEpoch": 3, "TransactionResult": true,
            "Topics": [{"Name": "t", "PartitionIndexes": [0, 4]}], "CoordinatorEpoch": 5,
            "TransactionVersion": 2}]}),
    );
}

#[test]
fn given_offset_commit_request_when_round_tripped_with_kafka_schema_then_same_bytes() {
    round_trip::<super::ById<kafka_protocol::messages::OffsetCommitRequest>>(
        "OffsetCommitRequest",
        2..=10,
        json!({"GroupId": "g", "GenerationIdOrMemberEpoch": 4, "MemberId": "m-1",
               "GroupInstanceId": "i-1", "RetentionTimeMs": 60000, "Topics": [
            {"Name": "t", "TopicId": "0b9c3f6a-2d4e-4f70-9a1b-5c6d7e8f9012", "Partitions": [
                {"PartitionIndex": 3, "CommittedOffset": 42, "CommittedLeaderEpoch": 5,
                 "CommittedMetadata": "md"},
                {"PartitionIndex": 4, "CommittedOffset": 7, "CommittedLeaderEpoch": -1}]}]}),
    );
}

#[test]
fn given_offset_fetch_request_when_round_tripped_with_kafka_schema_then_same_bytes() {
    let topics = json!([{"Name": "t", "TopicId": "0b9c3f6a-2d4e-4f70-9a1b-5c6d7e8f9012",
                         "PartitionIndexes": [0, 2]}]);
    round_trip::<super::ById<kafka_protocol::messages::OffsetFetchRequest>>(
        "OffsetFetchRequest",
        1..=10,
        json!({"GroupId": "g", "Topics": topics, "RequireStable": true, "Groups": [
            {"GroupId": "g", "MemberId": "m-1", "MemberEpoch": 3, "Topics": topics},
            {"GroupId": "all", "MemberEpoch": -1}]}),
    );
}

#[test]
fn given_describe_share_group_offsets_response_when_round_tripped_with_kafka_schema_then_same_bytes(
) {
    round_trip::<super::describe_share_group_offsets::DescribeShareGroupOffsetsResponse>(
        "DescribeShareGroupOffsetsResponse",
        0..=1,
        json!({"ThrottleTimeMs": 2, "Groups": [
            {"GroupId": "g", "ErrorCode": 0, "Topics": [
                {"TopicName": "t", "TopicId": "0b9c3f6a-2d4e-4f70-9a1b-5c6d7e8f9012", "Partitions": [
                    {"PartitionIndex": 1, "StartOffset": 40, "LeaderEpoch": 0, "Lag": 12,
                     "ErrorCode": 0},
                    {"PartitionIndex": 2, "StartOffset": -1, "LeaderEpoch": 0, "Lag": -1,
                     "ErrorCode": 3, "ErrorMessage": "unknown"}]}]},
            {"GroupId": "h", "ErrorCode": 16, "ErrorMessage": "not coordinator"}]}),
    );
}

#[test]
fn given_share_fetch_request_when_round_tripped_with_kafka_schema_then_same_bytes() {
    round_trip::<super::share_fetch::ShareFetchRequest>(
        "ShareFetchRequest",
        1..=2,
        json!({"GroupId": "g", "MemberId": "m-1", "ShareSessionEpoch": 3, "MaxWaitMs": 500,
               "MinBytes": 1, "MaxBytes": 1024, "MaxRecords": 50, "BatchSize": 10,
               "ShareAcquireMode": 1, "IsRenewAck": true, "Topics": [
            {"TopicId": "0b9c3f6a-2d4e-4f70-9a1b-5c6d7e8f9012", "Partitions": [
                {"PartitionIndex": 2, "AcknowledgementBatches": [
                    {"FirstOffset": 4, "LastOffset": 6, "AcknowledgeTypes": [1, 4, 2]},
                    {"FirstOffset": 9, "LastOffset": 12, "AcknowledgeTypes": [3]}]},
                {"PartitionIndex": 5}]}],
            "ForgottenTopicsData": [
                {"TopicId": "1b9c3f6a-2d4e-4f70-9a1b-5c6d7e8f9012", "Partitions": [0, 7]}]}),
    );
}

#[test]
fn given_share_acknowledge_request_when_round_tripped_with_kafka_schema_then_same_bytes() {
    round_trip::<super::share_acknowledge::ShareAcknowledgeRequest>(
        "ShareAcknowledgeRequest",
        1..=2,
        json!({"GroupId": "g", "MemberId": "m-1", "ShareSessionEpoch": 2, "IsRenewAck": true,
               "Topics": [{"TopicId": "0b9c3f6a-2d4e-4f70-9a1b-5c6d7e8f9012", "Partitions": [
                {"PartitionIndex": 1, "AcknowledgementBatches": [
                    {"FirstOffset": 0, "LastOffset": 1, "AcknowledgeTypes": [4, 1]}]}]}]}),
    );
}

#[test]
fn given_share_acknowledge_response_when_round_tripped_with_kafka_schema_then_same_bytes() {
    round_trip::<super::share_acknowledge::ShareAcknowledgeResponse>(
        "ShareAcknowledgeResponse",
        1..=2,
        json!({"ThrottleTimeMs": 4, "ErrorCode": 0, "AcquisitionLockTimeoutMs": 30000,
               "Responses": [{"TopicId": "0b9c3f6a-2d4e-4f70-9a1b-5c6d7e8f9012", "Partitions": [
                {"PartitionIndex": 1, "ErrorCode": 121, "ErrorMessage": "not acquired",
                 "CurrentLeader": {"LeaderId": 1, "LeaderEpoch": 0}},
                {"PartitionIndex": 2, "ErrorCode": 0,
                 "CurrentLeader": {"LeaderId": -1, "LeaderEpoch": -1}}]}],
               "NodeEndpoints": [{"NodeId": 1, "Host": "127.0.0.1", "Port": 9092, "Rack": "r1"},
                                 {"NodeId": 2, "Host": "h2", "Port": 9093}]}),
    );
}

#[test]
fn given_streams_group_heartbeat_when_round_tripped_with_kafka_schema_then_same_bytes() {
    use super::generated::{
        streams_group_heartbeat_request as req, streams_group_heartbeat_response as resp,
    };
    let tasks = json!([{"SubtopologyId": "0", "Partitions": [0, 2]}, {"SubtopologyId": "1", "Partitions": []}]);
    round_trip::<req::StreamsGroupHeartbeatRequest>(
        "StreamsGroupHeartbeatRequest",
        req::MIN_VERSION..=req::MAX_VERSION,
        json!({"GroupId": "app", "MemberId": "m-1", "MemberEpoch": 0, "EndpointInformationEpoch": 2,
               "InstanceId": null, "RackId": "r1", "RebalanceTimeoutMs": 30000,
               "Topology": {"Epoch": 1, "Subtopologies": [
                   {"SubtopologyId": "0", "SourceTopics": ["in"], "SourceTopicRegex": [],
                    "StateChangelogTopics": [{"Name": "app-store-changelog", "Partitions": 0,
                        "ReplicationFactor": 0, "TopicConfigs": [{"Key": "cleanup.policy", "Value": "compact"}]}],
                    "RepartitionSinkTopics": ["app-rep"], "RepartitionSourceTopics": [],
                    "CopartitionGroups": [{"SourceTopics": [0], "SourceTopicRegex": [], "RepartitionSourceTopics": [1, 2]}]}]},
               "ActiveTasks": tasks, "StandbyTasks": [], "WarmupTasks": null,
               "ProcessId": "p-1", "UserEndpoint": {"Host": "h", "Port": 65000},
               "ClientTags": [{"Key": "zone", "Value": "a"}],
               "TaskOffsets": [{"SubtopologyId": "0", "Partition": 1, "Offset": 99}],
               "TaskEndOffsets": null, "ShutdownApplication": true}),
    );
    round_trip::<resp::StreamsGroupHeartbeatResponse>(
        "StreamsGroupHeartbeatResponse",
        resp::MIN_VERSION..=resp::MAX_VERSION,
        json!({"ThrottleTimeMs": 1, "ErrorCode": 0, "ErrorMessage": null, "MemberId": "m-1",
               "MemberEpoch": 3, "HeartbeatIntervalMs": 5000, "AcceptableRecoveryLagLegacy": 10000,
               "TaskOffsetIntervalMs": 60000, "AcceptableRecoveryLag": 10000,
               "Status": [{"StatusCode": 3, "StatusDetail": "missing"}],
               "ActiveTasks": tasks, "StandbyTasks": [], "WarmupTasks": null,
               "TopologyDescriptionRequired": true, "EndpointInformationEpoch": 1,
               "PartitionsByUserEndpoint": [{"UserEndpoint": {"Host": "h", "Port": 1},
                   "ActivePartitions": [{"Topic": "in", "Partitions": [0]}], "StandbyPartitions": []}]}),
    );
}

#[test]
fn given_streams_group_describe_when_round_tripped_with_kafka_schema_then_same_bytes() {
    use super::generated::{
        streams_group_describe_request as req, streams_group_describe_response as resp,
    };
    round_trip::<req::StreamsGroupDescribeRequest>(
        "StreamsGroupDescribeRequest",
        req::MIN_VERSION..=req::MAX_VERSION,
        json!({"GroupIds": ["a", "b"], "IncludeAuthorizedOperations": true, "IncludeTopologyDescription": true}),
    );
    let node = json!({"Name": "KSTREAM-SOURCE-0000000000", "NodeType": 1, "SourceTopics": ["in"],
                      "SinkTopic": null, "Stores": [], "Successors": ["KSTREAM-MAP-0000000001"]});
    let assignment = json!({"ActiveTasks": [{"SubtopologyId": "0", "Partitions": [1]}],
                            "StandbyTasks": [], "WarmupTasks": []});
    round_trip::<resp::StreamsGroupDescribeResponse>(
        "StreamsGroupDescribeResponse",
        resp::MIN_VERSION..=resp::MAX_VERSION,
        json!({"ThrottleTimeMs": 0, "Groups": [
            {"ErrorCode": 0, "GroupId": "a", "GroupState": "Stable", "GroupEpoch": 4, "AssignmentEpoch": 4,
             "Topology": {"Epoch": 0, "Subtopologies": [{"SubtopologyId": "0", "SourceTopics": ["in"],
                 "RepartitionSinkTopics": [], "StateChangelogTopics": [], "RepartitionSourceTopics": []}]},
             "Members": [{"MemberId": "m", "MemberEpoch": 4, "InstanceId": null, "RackId": null,
                 "ClientId": "c", "ClientHost": "/127.0.0.1", "TopologyEpoch": 0, "ProcessId": "p",
                 "UserEndpoint": null, "ClientTags": [], "TaskOffsets": [], "TaskEndOffsets": [],
                 "Assignment": assignment, "TargetAssignment": assignment, "IsClassic": false}],
             "AuthorizedOperations": -2147483648,
             "TopologyDescription": {"Subtopologies": [{"SubtopologyId": "0", "Nodes": [node]}],
                 "GlobalStores": [{"Source": node, "Processor": node}]},
             "TopologyDescriptionStatus": 1, "AssignorName": "sticky"},
            {"ErrorCode": 69, "ErrorMessage": "no such group", "GroupId": "b", "GroupState": "Dead",
             "GroupEpoch": -1, "AssignmentEpoch": -1, "Topology": null, "Members": [],
             "AuthorizedOperations": 0, "TopologyDescription": null}]}),
    );
}

#[test]
fn given_streams_group_topology_description_update_when_round_tripped_with_kafka_schema_then_same_bytes(
) {
    use super::generated::{
        streams_group_topology_description_update_request as req,
        streams_group_topology_description_update_response as resp,
    };
    let node = json!({"Name": "n", "NodeType": 3, "SourceTopics": [], "SinkTopic": "out",
                      "Stores": ["s"], "Successors": []});
    round_trip::<req::StreamsGroupTopologyDescriptionUpdateRequest>(
        "StreamsGroupTopologyDescriptionUpdateRequest",
        req::MIN_VERSION..=req::MAX_VERSION,
        json!({"GroupId": "a", "MemberId": "m", "TopologyEpoch": 2, "TopologyDescription": {
            "Subtopologies": [{"SubtopologyId": "0", "Nodes": [node]}], "GlobalStores": []}}),
    );
    round_trip::<resp::StreamsGroupTopologyDescriptionUpdateResponse>(
        "StreamsGroupTopologyDescriptionUpdateResponse",
        resp::MIN_VERSION..=resp::MAX_VERSION,
        json!({"ThrottleTimeMs": 3, "ErrorCode": 25, "ErrorMessage": "unknown member"}),
    );
}

#[test]
fn given_vendored_schemas_when_compared_with_the_kafka_jars_then_identical() {
    let Some(jar) = jar() else { return };
    // The coordinator records' schemas are in the group coordinator's jar, beside the clients'.
    let coordinator = jar.with_file_name(format!("kafka-group-coordinator-{KAFKA_VERSION}.jar"));
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/codec/schemas");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let ours = std::fs::read(&path).unwrap();
        let theirs = [&jar, &coordinator].into_iter().find_map(|j| {
            let out = std::process::Command::new("unzip")
                .arg("-p")
                .arg(j)
                .arg(format!("common/message/{name}.json"))
                .output()
                .expect("unzip runs");
            (out.status.success() && !out.stdout.is_empty()).then_some(out.stdout)
        });
        assert_eq!(Some(ours), theirs, "{name}.json is Kafka {KAFKA_VERSION}'s");
    }
}

#[test]
fn given_streams_group_records_when_round_tripped_with_kafka_schema_then_same_bytes() {
    use super::generated::{
        streams_group_current_member_assignment_value as current,
        streams_group_metadata_key as key, streams_group_metadata_value as metadata,
        streams_group_topology_value as topology,
    };
    round_trip::<key::StreamsGroupMetadataKey>(
        "StreamsGroupMetadataKey",
        0..=0,
        json!({"GroupId": "app"}),
    );
    // Every tagged field away from its default: Kafka writes them only then.
    round_trip::<metadata::StreamsGroupMetadataValue>(
        "StreamsGroupMetadataValue",
        0..=0,
        json!({"Epoch": 5, "MetadataHash": -77, "ValidatedTopologyEpoch": 0,
               "LastAssignmentConfigs": [{"Key": "num.standby.replicas", "Value": "0"}],
               "StoredDescriptionTopologyEpoch": 2, "FailedDescriptionTopologyEpoch": 1}),
    );
    round_trip::<current::StreamsGroupCurrentMemberAssignmentValue>(
        "StreamsGroupCurrentMemberAssignmentValue",
        0..=0,
        json!({"MemberEpoch": 4, "PreviousMemberEpoch": 3, "State": 1,
               "ActiveTasks": [{"SubtopologyId": "0", "Partitions": [0, 2], "AssignmentEpochs": [3, 4]}],
               "StandbyTasks": [], "WarmupTasks": [],
               "ActiveTasksPendingRevocation": [{"SubtopologyId": "1", "Partitions": [1], "AssignmentEpochs": [2]}],
               "StandbyTasksPendingRevocation": [], "WarmupTasksPendingRevocation": []}),
    );
    round_trip::<topology::StreamsGroupTopologyValue>(
        "StreamsGroupTopologyValue",
        0..=0,
        json!({"Epoch": 0, "Subtopologies": [{"SubtopologyId": "0", "SourceTopics": ["in"],
               "SourceTopicRegex": [], "StateChangelogTopics": [{"Name": "c", "Partitions": 0,
               "ReplicationFactor": 0, "TopicConfigs": [{"Key": "cleanup.policy", "Value": "compact"}]}],
               "RepartitionSinkTopics": [], "RepartitionSourceTopics": [], "CopartitionGroups": []}]}),
    );
}

#[test]
fn given_consumer_group_regex_records_when_round_tripped_with_kafka_schema_then_same_bytes() {
    use super::generated::{
        consumer_group_regular_expression_key as key,
        consumer_group_regular_expression_value as value,
    };
    round_trip::<key::ConsumerGroupRegularExpressionKey>(
        "ConsumerGroupRegularExpressionKey",
        0..=0,
        json!({"GroupId": "g", "RegularExpression": "^rx-.*"}),
    );
    round_trip::<value::ConsumerGroupRegularExpressionValue>(
        "ConsumerGroupRegularExpressionValue",
        0..=0,
        json!({"Topics": ["rx-a1", "rx-b1"], "Version": 42, "Timestamp": 1_700_000_000_000_i64}),
    );
}

#[test]
fn given_tagged_fields_at_their_defaults_when_encoded_then_left_out() {
    use super::generated::streams_group_metadata_value::StreamsGroupMetadataValue;
    let v = StreamsGroupMetadataValue {
        epoch: 1,
        ..Default::default()
    };
    assert_eq!(v.validated_topology_epoch, -1, "the schema's default");
    let mut b = BytesMut::new();
    v.encode(&mut b, 0).unwrap();
    // Epoch, MetadataHash, then an empty tagged section.
    assert_eq!(b.len(), 4 + 8 + 1);
    let back = StreamsGroupMetadataValue::decode(&mut b.freeze(), 0).unwrap();
    assert_eq!(back, v);
}
