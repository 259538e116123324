"""Share group administration (KIP-932) with Apache Kafka 4.4's own `kafka-share-groups.sh`
against Strom and Kafka alike: a console share consumer makes the group and consumes;
--describe --members shows it while it runs and --reset-offsets is refused then (the group
is not empty); once it stopped: --list, --describe --state/--offsets, --reset-offsets
--to-earliest --execute, --delete-offsets and --delete, each output parsed and compared.

The LAG column comes with DescribeShareGroupOffsets v1 (KIP-1226): after the reset to the
earliest offset, each partition's 5 records are all left to deliver on both brokers.
"""

from __future__ import annotations

import subprocess

import pytest

import admin
import kafka_tools as kt
from clients import unique_topic
from test_config_resources import alter

RECORDS = 10


@pytest.fixture(scope="module", autouse=True)
def tools_jars():
    kt.fetch()


def share_groups(broker, *args: str) -> kt.Run:
    return kt.run("kafka-share-groups", broker.bootstrap, *args)


def rows(r: kt.Run) -> list[dict[str, str]]:
    assert r.rc == 0, r.err
    return kt.table(r)


def test_kafka_share_groups_tool_lists_describes_resets_and_deletes(broker):
    from confluent_kafka import Producer

    b = broker.bootstrap
    topic, group = unique_topic("share-admin"), unique_topic("share-admin-g")
    admin.create_topic("confluent", b, topic, 2)
    p = Producer({"bootstrap.servers": b, "acks": "all"})
    for i in range(RECORDS):
        p.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    assert alter(b, "GROUP", group, {"share.auto.offset.reset": ("SET", "earliest")}) == 0

    consumer = kt.spawn("kafka-console-share-consumer", b, "--topic", topic, "--group", group)
    try:
        def members():
            r = share_groups(broker, "--describe", "--group", group, "--members")
            if r.rc != 0 or "no active members" in r.out + r.err:
                return None
            # Kafka assigns a moment after the join: a member shows 0 partitions until then.
            got = kt.table(r)
            return got if all(m["#PARTITIONS"] != "0" for m in got) else None

        got = admin.wait_for(members, "the console share consumer to be assigned", timeout_s=60)
        assert [(m["GROUP"], m["#PARTITIONS"]) for m in got] == [(group, "2")], got
        # A group with a member: the tool refuses before it alters anything.
        r = share_groups(broker, "--reset-offsets", "--group", group, "--topic", topic,
                         "--to-earliest", "--execute")
        assert f"Share group '{group}' is not empty." in r.out + r.err, (r.out, r.err)
    finally:
        consumer.terminate()
        try:
            consumer.wait(timeout=60)
        except subprocess.TimeoutExpired:
            consumer.kill()
            consumer.wait()

    # The consumer left on close: the group is empty and still listed.
    assert group in share_groups(broker, "--list").lines()
    state = rows(share_groups(broker, "--describe", "--group", group, "--state"))
    assert [(s["GROUP"], s["STATE"], s["#MEMBERS"]) for s in state] == [(group, "Empty", "0")]
    offsets = rows(share_groups(broker, "--describe", "--group", group))
    assert sorted((o["TOPIC"], o["PARTITION"]) for o in offsets) == [(topic, "0"), (topic, "1")]

    r = share_groups(broker, "--reset-offsets", "--group", group, "--topic", topic,
                     "--to-earliest", "--execute")
    assert sorted((o["PARTITION"], o["NEW-OFFSET"]) for o in rows(r)) == [("0", "0"), ("1", "0")]
    offsets = rows(share_groups(broker, "--describe", "--group", group))
    assert sorted((o["PARTITION"], o["START-OFFSET"]) for o in offsets) == [("0", "0"), ("1", "0")]
    assert {o["LAG"] for o in offsets} == {"5"}

    r = share_groups(broker, "--delete-offsets", "--group", group, "--topic", topic)
    assert rows(r) == [{"TOPIC": topic, "STATUS": "Successful"}]
    r = share_groups(broker, "--describe", "--group", group)
    assert (r.rc, r.lines()) == (0, [f"Share group '{group}' has no offset information."]), r.err

    r = share_groups(broker, "--delete", "--group", group)
    assert (r.rc, r.lines()) == (0, [f"Deletion of requested share groups ('{group}') was successful."]), r.err
    assert group not in share_groups(broker, "--list").lines()
