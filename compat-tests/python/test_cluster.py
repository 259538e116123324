"""A 3-node Strom cluster (metadata quorum over `controller.quorum.voters`) driven by
confluent-kafka: a topic created through node 1 is placed on all three nodes, a producer
bootstrapped on node 1 only sends each partition's records to its leader (NOT_LEADER_OR_
FOLLOWER elsewhere makes librdkafka follow Metadata), and each record is stored on its
leader's disk only (partition data is not replicated yet: docs/design.md "Cluster").

Strom only: the 3-node Apache Kafka counterpart comes with partition replication.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import brokers

NODES = 3
PARTITIONS = 6
PER_PARTITION = 100


@pytest.fixture(scope="module")
def cluster():
    if not brokers.STROM_BIN.is_file():
        raise brokers.BrokerStartError("build target/release/strom first")
    root = Path(tempfile.mkdtemp(prefix="strom-compat-cluster-"))
    ports = {i: (brokers.free_port(), brokers.free_port(), brokers.free_port()) for i in range(1, NODES + 1)}
    voters = ",".join(f"{i}@127.0.0.1:{p[1]}" for i, p in ports.items())
    nodes = []
    try:
        for i, (kafka, raft, metrics) in ports.items():
            workdir = root / f"node-{i}"
            workdir.mkdir()
            argv = [
                str(brokers.STROM_BIN), "serve",
                "--node-id", str(i),
                "--listen", f"127.0.0.1:{kafka}",
                "--metrics-listen", f"127.0.0.1:{metrics}",
                "--data-dir", str(workdir / "data"),
                "--shards", "1",
                "--set", f"controller.quorum.voters={voters}",
                "--set", "schema_registry_enable=false",
            ]
            nodes.append(brokers._spawn(f"strom-{i}", argv, workdir, kafka))
        for n in nodes:
            n.wait_ready(serving=True)
        yield nodes
    finally:
        for n in nodes:
            n.stop()
        shutil.rmtree(root, ignore_errors=True)


def wait_for(what, check, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = check()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_producer_bootstrapped_on_one_node_reaches_every_partition_leader(cluster):
    n1, _, n3 = cluster
    admin = AdminClient({"bootstrap.servers": n1.bootstrap})
    wait_for("3 brokers in node 1's metadata", lambda: len(admin.list_topics(timeout=5).brokers) == NODES)
    futures = admin.create_topics([NewTopic("routed", num_partitions=PARTITIONS, replication_factor=1)])
    futures["routed"].result(timeout=30)

    # Node 3 answers with the same placement, leaders on all three nodes.
    admin3 = AdminClient({"bootstrap.servers": n3.bootstrap})
    md = wait_for("the topic on node 3", lambda: admin3.list_topics(topic="routed", timeout=5).topics.get("routed")
                  if admin3.list_topics(topic="routed", timeout=5).topics["routed"].error is None else None)
    leaders = {p.id: p.leader for p in md.partitions.values()}
    assert sorted(leaders) == list(range(PARTITIONS))
    assert set(leaders.values()) == {1, 2, 3}, leaders
    assert sorted(admin3.list_topics(timeout=5).brokers) == [1, 2, 3]

    errors = []
    producer = Producer({"bootstrap.servers": n1.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    for i in range(PARTITIONS * PER_PARTITION):
        p = i % PARTITIONS
        producer.produce("routed", value=f"{p}-{i // PARTITIONS}".encode(), partition=p,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(60) == 0
    assert errors == []

    consumer = Consumer({"bootstrap.servers": n3.bootstrap, "group.id": "cluster-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("routed", p, 0) for p in range(PARTITIONS)])
    got = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    while sum(map(len, got.values())) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is None or m.error():
            continue
        got[m.partition()].append(m.value().decode())
    consumer.close()
    for p in range(PARTITIONS):
        assert got[p] == [f"{p}-{j}" for j in range(PER_PARTITION)], f"partition {p}"

    # Each partition's records are on its leader's disk and nowhere else.
    for p, leader in leaders.items():
        for node_id, n in zip((1, 2, 3), cluster):
            log = n.workdir / "data" / f"routed-{p}" / "00000000000000000000.log"
            size = log.stat().st_size if log.exists() else 0
            if node_id == leader:
                assert size > 0, f"partition {p} on its leader {leader}"
            else:
                assert size == 0, f"partition {p} written on node {node_id}, led by {leader}"
