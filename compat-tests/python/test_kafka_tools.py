"""Apache Kafka 4.4's command-line tools (the kafka-tools jar from Maven Central) against
Strom and Kafka alike: each command's exit code and output checked, as a new user would run
them. Features changed here are put back in `finally`: both brokers live for the session.

Strom advertises fewer features than Kafka (FINDINGS.md: only what it implements), so the
feature checks compare the lines Strom has, and each broker's own answer for the rest.
"""

from __future__ import annotations

import re
import urllib.request

import pytest

import admin
import kafka_tools as kt
from clients import unique_topic

# What a fresh Kafka 4.4 cluster finalizes, and Strom too (metadata.version by its name).
COMMON = {
    "metadata.version": {"SupportedMinVersion": "3.3-IV3", "SupportedMaxVersion": "4.4-IV2",
                         "FinalizedVersionLevel": "4.4-IV2"},
    "group.version": {"SupportedMinVersion": "0", "SupportedMaxVersion": "1", "FinalizedVersionLevel": "1"},
    # KIP-1071 streams groups.
    "streams.version": {"SupportedMinVersion": "0", "SupportedMaxVersion": "1", "FinalizedVersionLevel": "1"},
    # KIP-890 part 2, transactions v2.
    "transaction.version": {"SupportedMinVersion": "0", "SupportedMaxVersion": "2", "FinalizedVersionLevel": "2"},
}


@pytest.fixture(scope="module", autouse=True)
def tools_jars():
    kt.fetch()


def test_features_describe_lists_metadata_and_group_version(broker):
    got = kt.features(broker.bootstrap)
    for name, want in COMMON.items():
        assert {k: got[name][k] for k in want} == want, name
        assert int(got[name]["Epoch"]) >= 0
    # Share groups (KIP-932) with their dead-letter topics (KIP-1191): a fresh Kafka 4.4 and a
    # fresh Strom both finalize share.version 2 (FINDINGS.md #21).
    assert got["share.version"]["FinalizedVersionLevel"] == "2"
    assert got["share.version"]["SupportedMaxVersion"] == "2"
    if broker.name == "strom":
        # No KRaft quorum, no eligible leader replicas: not advertised.
        assert set(got) == set(COMMON) | {"share.version"}
    else:
        assert set(COMMON) < set(got)


def test_features_downgrade_then_upgrade_group_version(broker):
    try:
        r = kt.run("kafka-features", broker.bootstrap, "downgrade", "--feature", "group.version=0")
        assert (r.rc, r.lines()) == (0, ["group.version was downgraded to 0."]), r.err
        got = kt.features(broker.bootstrap)
        assert got["group.version"]["FinalizedVersionLevel"] == "0"
    finally:
        r = kt.run("kafka-features", broker.bootstrap, "upgrade", "--feature", "group.version=1")
    assert (r.rc, r.lines()) == (0, ["group.version was upgraded to 1."]), r.err
    assert kt.features(broker.bootstrap)["group.version"]["FinalizedVersionLevel"] == "1"


def test_features_refusals_say_what_kafka_says(broker):
    r = kt.run("kafka-features", broker.bootstrap, "upgrade", "--feature", "group.version=2")
    assert r.rc == 1
    assert r.lines() == [
        "Could not upgrade group.version to 2. The update failed for all features since the "
        "following feature had an error: Invalid update version 2 for feature group.version. "
        "Local controller 0 only supports versions 0-1",
    ]
    assert "1 out of 1 operation(s) failed." in r.err
    r = kt.run("kafka-features", broker.bootstrap, "downgrade", "--metadata", "4.3-IV0")
    assert r.rc == 1
    assert "Unsupported metadata.version downgrade from 33 to 30. Refusing to perform the requested " \
           "downgrade because it might delete metadata information." in r.out
    r = kt.run("kafka-features", broker.bootstrap, "upgrade", "--feature", "group.version=1", "--dry-run")
    assert (r.rc, r.lines()) == (0, ["group.version can be upgraded to 1."])


def test_metadata_quorum_describe_shows_the_node_as_leader_and_voter(broker):
    r = kt.run("kafka-metadata-quorum", broker.bootstrap, "describe", "--status")
    assert r.rc == 0, r.err
    status = dict(line.split(":", 1) for line in r.lines())
    assert status["LeaderId"].strip() == "0"
    assert status["CurrentVoters"].strip().startswith('[{"id": 0')
    assert status["CurrentObservers"].strip() == "[]"
    r = kt.run("kafka-metadata-quorum", broker.bootstrap, "describe", "--replication")
    assert r.rc == 0, r.err
    rows = [line.split() for line in r.lines()[1:]]
    assert [(row[0], row[-1]) for row in rows] == [("0", "Leader")]


def test_leader_election_needs_none_and_names_unknown_partitions(broker):
    topic = unique_topic("elect")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 2) == 0
    r = kt.run("kafka-leader-election", broker.bootstrap, "--election-type", "preferred",
               "--topic", topic, "--partition", "0")
    assert (r.rc, r.lines()) == (0, [f"Valid replica already elected for partitions {topic}-0"]), r.err
    r = kt.run("kafka-leader-election", broker.bootstrap, "--election-type", "unclean", "--all-topic-partitions")
    assert (r.rc, r.lines()) == (0, []), r.err
    r = kt.run("kafka-leader-election", broker.bootstrap, "--election-type", "unclean",
               "--topic", topic, "--partition", "5")
    assert r.rc == 1
    assert f"No such partition as {topic}-5" in r.out


def test_topics_describe_pages_through_describe_topic_partitions(broker):
    topic = unique_topic("pages")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 5) == 0
    # Two partitions per DescribeTopicPartitions answer: three pages, one topic.
    r = kt.run("kafka-topics", broker.bootstrap, "--describe", "--topic", topic,
               "--partition-size-limit-per-response", "2")
    assert r.rc == 0, r.err
    head, *parts = r.lines()
    assert f"Topic: {topic}\t" in head and "PartitionCount: 5\tReplicationFactor: 1" in head
    assert [p.strip() for p in parts] == [
        f"Topic: {topic}\tPartition: {i}\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: \tLastKnownElr:" for i in range(5)
    ]


def test_broker_api_versions_lists_the_new_apis_at_kafkas_versions(broker):
    r = kt.run("kafka-broker-api-versions", broker.bootstrap)
    assert r.rc == 0, r.err
    # "\tName(key): min to max [usable: n]," per key; the tool's own client is 4.4's.
    got = dict(re.findall(r"^\s+(\w+\(\d+\)): (.*?),?$", r.out, re.M))
    for api, want in {
        "ApiVersions(18)": "0 to 5 [usable: 5]",
        "ListOffsets(2)": "1 to 11 [usable: 11]",
        "OffsetCommit(8)": "2 to 10 [usable: 10]",
        "OffsetFetch(9)": "1 to 10 [usable: 10]",
        "WriteTxnMarkers(27)": "1 to 2 [usable: 2]",
        "DescribeLogDirs(35)": "1 to 5 [usable: 5]",
        "DeleteGroups(42)": "0 to 3 [usable: 3]",
        "ElectLeaders(43)": "0 to 2 [usable: 2]",
        "DescribeQuorum(55)": "0 to 2 [usable: 2]",
        "UpdateFeatures(57)": "0 to 2 [usable: 2]",
        "DescribeTopicPartitions(75)": "0 [usable: 0]",
        # KIP-1071 streams groups (Strom's codec for them is generated from Kafka's schemas).
        "StreamsGroupHeartbeat(88)": "0 to 1 [usable: 1]",
        "StreamsGroupDescribe(89)": "0 to 1 [usable: 1]",
        "StreamsGroupTopologyDescriptionUpdate(93)": "0 [usable: 0]",
    }.items():
        assert got.get(api) == want, (api, got.get(api))
    # Strom's count is FINDINGS.md #7's (its api_table!); Kafka 4.4 advertises 77 (telemetry off:
    # no GetTelemetrySubscriptions/PushTelemetry without a receiver plugin; Strom's is built in).
    served = [api for api, v in got.items() if v != "UNSUPPORTED"]
    assert len(served) == (63 if broker.name == "strom" else 77), served
    if broker.name == "strom":
        for api in ("GetTelemetrySubscriptions(71)", "PushTelemetry(72)"):
            assert got.get(api) == "0 [usable: 0]", (api, got.get(api))
        assert got.get("ListConfigResources(74)") == "0 to 1 [usable: 1]", got.get("ListConfigResources(74)")


def _requests_at(b, api: str, version: int) -> float:
    """How many `api` requests at `version` Strom has answered, over its shards (/metrics)."""
    url = f"http://127.0.0.1:{b.extra['metrics_port']}/metrics"
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    pattern = rf'^strom_request_duration_seconds_count{{[^}}]*api="{api}",version="{version}"}} (\S+)$'
    return sum(float(n) for n in re.findall(pattern, body, re.M))


def test_kip848_console_consumer_commits_and_resumes_by_topic_id(broker):
    """The 4.4 consumer with group.protocol=consumer names topics by id in OffsetCommit and
    OffsetFetch (v10): its commits land where the admin tools (by name) see them, and a second
    run resumes from them."""
    topic, group = unique_topic("tools-v10"), unique_topic("tools-v10-group")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 2) == 0

    def produce(lines):
        kt.ok(kt.run("kafka-console-producer", broker.bootstrap, "--topic", topic,
                     stdin="".join(f"{line}\n" for line in lines)))

    def consume(n):
        r = kt.ok(kt.run("kafka-console-consumer", broker.bootstrap, "--topic", topic, "--group", group,
                         "--from-beginning", "--max-messages", str(n), "--timeout-ms", "30000",
                         "--command-property", "group.protocol=consumer"))
        return sorted(r.lines())

    if broker.name == "strom":
        before = {api: _requests_at(broker, api, 10) for api in ("OffsetCommit", "OffsetFetch")}
    produce([f"a{i}" for i in range(6)])
    assert consume(6) == [f"a{i}" for i in range(6)]
    produce([f"b{i}" for i in range(3)])
    # Committed offsets exist now, so --from-beginning does not apply: only the new records.
    assert consume(3) == ["b0", "b1", "b2"]

    r = kt.ok(kt.run("kafka-consumer-groups", broker.bootstrap, "--describe", "--group", group))
    rows = kt.table(r)
    assert sum(int(row["CURRENT-OFFSET"]) for row in rows) == 9, rows
    assert all(row["LAG"] == "0" for row in rows), rows
    r = kt.ok(kt.run("kafka-groups", broker.bootstrap, "--list"))
    assert {"GROUP": group, "TYPE": "Consumer", "PROTOCOL": "consumer"} in kt.table(r)
    if broker.name == "strom":
        for api, n in before.items():
            assert _requests_at(broker, api, 10) > n, f"{api} v10 was not used"
