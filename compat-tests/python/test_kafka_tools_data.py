"""Apache Kafka 4.4's everyday tools against Strom and Kafka alike (test_kafka_tools.py has the
feature/quorum/election ones): topics, configs, the console producer and consumer,
consumer-groups and groups, delete-records, log-dirs, transactions, client-metrics and the
perf tests, each command's exit code and output checked. One JVM per command (1.5-3 s
each): the 22 commands here cost about 55 s per broker on 2 loaded cores, so CI skips this
file (the APIs it exercises have their own client tests); `STROM_COMPAT_KAFKA_TOOLS_ALL=1`
runs it. test_kafka_tools.py (the newer APIs) always runs.
"""

from __future__ import annotations

import json
import os
import re

import pytest

import admin
import kafka_tools as kt
from kafka_tools import ok
from clients import unique_topic

pytestmark = pytest.mark.skipif(
    os.environ.get("STROM_COMPAT_KAFKA_TOOLS_ALL") != "1",
    reason="about 110 s for both brokers: set STROM_COMPAT_KAFKA_TOOLS_ALL=1 (outside CI)",
)


@pytest.fixture(scope="module", autouse=True)
def tools_jars():
    kt.fetch()



def test_topics_create_list_alter_describe_delete(broker):
    topic = unique_topic("tools-topics")
    r = ok(kt.run("kafka-topics", broker.bootstrap, "--create", "--topic", topic, "--partitions", "2"))
    assert r.lines() == [f"Created topic {topic}."]
    assert topic in ok(kt.run("kafka-topics", broker.bootstrap, "--list")).lines()
    r = ok(kt.run("kafka-topics", broker.bootstrap, "--alter", "--topic", topic, "--partitions", "3"))
    assert r.lines() == []
    r = ok(kt.run("kafka-topics", broker.bootstrap, "--describe", "--topic", topic))
    assert "PartitionCount: 3\tReplicationFactor: 1" in r.lines()[0]
    assert [re.search(r"Partition: (\d+)", line)[1] for line in r.lines()[1:]] == ["0", "1", "2"]
    # The topic already exists: Kafka's message, exit code 1.
    r = kt.run("kafka-topics", broker.bootstrap, "--create", "--topic", topic, "--partitions", "1")
    assert r.rc == 1 and f"Topic '{topic}' already exists." in r.out + r.err
    assert ok(kt.run("kafka-topics", broker.bootstrap, "--delete", "--topic", topic)).lines() == []
    admin.wait_for(lambda: admin.topic_partitions("confluent", broker.bootstrap, topic) is None,
                   f"{topic} to be deleted")


def test_configs_alter_then_describe_shows_the_dynamic_config(broker):
    topic = unique_topic("tools-configs")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 1) == 0
    r = ok(kt.run("kafka-configs", broker.bootstrap, "--alter", "--entity-type", "topics",
                  "--entity-name", topic, "--add-config", "retention.ms=12345"))
    assert r.lines() == [f"Completed updating config for topic {topic}."]
    r = ok(kt.run("kafka-configs", broker.bootstrap, "--describe", "--entity-type", "topics",
                  "--entity-name", topic))
    assert r.lines() == [
        f"Dynamic configs for topic {topic} are:",
        "  retention.ms=12345 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=12345}",
    ]


def test_console_round_trip_then_consumer_groups_list_describe_reset_delete(broker):
    topic, group = unique_topic("tools-console"), unique_topic("tools-group")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 2) == 0
    sent = [f"k{i}\tv{i}" for i in range(6)]
    ok(kt.run("kafka-console-producer", broker.bootstrap, "--topic", topic, "--reader-property",
              "parse.key=true", stdin="".join(f"{line}\n" for line in sent)))
    r = ok(kt.run("kafka-console-consumer", broker.bootstrap, "--topic", topic, "--from-beginning",
                  "--max-messages", "6", "--group", group, "--formatter-property", "print.key=true",
                  "--timeout-ms", "30000"))
    assert sorted(r.lines()) == sent
    assert "Processed a total of 6 messages" in r.err

    assert group in ok(kt.run("kafka-consumer-groups", broker.bootstrap, "--list")).lines()
    r = ok(kt.run("kafka-consumer-groups", broker.bootstrap, "--describe", "--group", group))
    rows = kt.table(r)
    assert sorted(row["PARTITION"] for row in rows) == ["0", "1"]
    assert all(row["CURRENT-OFFSET"] == row["LOG-END-OFFSET"] and row["LAG"] == "0" for row in rows), rows
    assert sum(int(row["CURRENT-OFFSET"]) for row in rows) == 6
    assert f"Consumer group '{group}' has no active members." in r.err

    r = ok(kt.run("kafka-consumer-groups", broker.bootstrap, "--reset-offsets", "--group", group,
                  "--topic", topic, "--to-earliest", "--execute"))
    assert sorted((row["PARTITION"], row["NEW-OFFSET"]) for row in kt.table(r)) == [("0", "0"), ("1", "0")]

    r = ok(kt.run("kafka-groups", broker.bootstrap, "--list"))
    assert {"GROUP": group, "TYPE": "Classic", "PROTOCOL": "consumer"} in kt.table(r)

    r = ok(kt.run("kafka-consumer-groups", broker.bootstrap, "--delete-offsets", "--group", group,
                  "--topic", topic))
    assert r.lines()[0] == f"Request succeeded for deleting offsets from group {group}."
    assert sorted((row["PARTITION"], row["STATUS"]) for row in kt.table(kt.Run(0, "\n".join(r.lines()[1:]), ""))) \
        == [("0", "Successful"), ("1", "Successful")]

    r = ok(kt.run("kafka-consumer-groups", broker.bootstrap, "--delete", "--group", group))
    assert r.lines() == [f"Deletion of requested consumer groups ('{group}') was successful."]
    r = kt.run("kafka-consumer-groups", broker.bootstrap, "--delete", "--group", group)
    assert r.rc == 0 and "GroupIdNotFoundException" in r.out + r.err, (r.out, r.err)


def test_delete_records_then_log_dirs_report_the_partition(broker):
    topic = unique_topic("tools-records")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 1) == 0
    ok(kt.run("kafka-console-producer", broker.bootstrap, "--topic", topic, stdin="a\nb\nc\n"))
    spec = broker.workdir / f"{topic}-delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 2}]}))
    r = ok(kt.run("kafka-delete-records", broker.bootstrap, "--offset-json-file", str(spec)))
    assert r.lines() == ["Executing records delete operation", "Records delete operation completed:",
                         f"partition: {topic}-0\tlow_watermark: 2"]

    r = ok(kt.run("kafka-log-dirs", broker.bootstrap, "--describe", "--topic-list", topic))
    assert r.lines()[:2] == ["Querying brokers for log directories information",
                             "Received log directory information from brokers 0"]
    dirs = json.loads(r.lines()[2])
    assert dirs["version"] == 1 and [b["broker"] for b in dirs["brokers"]] == [0]
    (d,) = dirs["brokers"][0]["logDirs"]
    assert d["error"] is None and d["logDir"].startswith("/")
    (p,) = d["partitions"]
    assert (p["partition"], p["offsetLag"], p["isFuture"]) == (f"{topic}-0", 0, False)
    assert p["size"] > 0


def test_transactions_list_and_describe_a_committed_transaction(broker):
    from confluent_kafka import Producer

    topic, tid = unique_topic("tools-txn"), unique_topic("tools-tid")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 1) == 0
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(topic, b"x")
    p.commit_transaction(60)

    r = ok(kt.run("kafka-transactions", broker.bootstrap, "list"))
    assert r.lines()[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    (row,) = [row for row in kt.table(r) if row["TransactionalId"] == tid]
    assert (row["Coordinator"], row["TransactionState"]) == ("0", "CompleteCommit")

    r = ok(kt.run("kafka-transactions", broker.bootstrap, "describe", "--transactional-id", tid))
    # Tab-separated, padded cells; an empty one (no partitions in a completed transaction).
    names, *rows = [[cell.strip() for cell in line.split("\t")] for line in r.lines()]
    (desc,) = [dict(zip(names, cells)) for cells in rows]
    assert (desc["CoordinatorId"], desc["TransactionalId"], desc["ProducerId"], desc["TransactionState"],
            desc["TopicPartitions"]) == ("0", tid, row["ProducerId"], "CompleteCommit", ""), desc


def test_client_metrics_list(broker):
    # KIP-714's ListConfigResources (key 74); test_client_metrics.py has the rest.
    r = ok(kt.run("kafka-client-metrics", broker.bootstrap, "--list"))
    assert all(line.strip() for line in r.lines())


def test_producer_and_consumer_perf(broker):
    topic = unique_topic("tools-perf")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 2) == 0
    r = ok(kt.run("kafka-producer-perf-test", None, "--topic", topic, "--num-records", "2000",
                  "--record-size", "100", "--throughput", "-1",
                  "--command-property", f"bootstrap.servers={broker.bootstrap}"))
    assert r.lines()[-1].startswith("2000 records sent, "), r.out
    r = ok(kt.run("kafka-consumer-perf-test", broker.bootstrap, "--topic", topic, "--num-records", "2000",
                  "--timeout", "30000"))
    head, row = r.lines()[-2:]
    fields = dict(zip([h.strip() for h in head.split(",")], [v.strip() for v in row.split(",")]))
    assert fields["data.consumed.in.nMsg"] == "2000", r.out
