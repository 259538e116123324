"""Rack awareness on a 3-node cluster of each broker, one rack per node (`broker.rack`), with
Kafka's `replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector`:
DescribeCluster names each broker's rack, an RF 3 topic has a replica in every rack, and
(KIP-392) a confluent-kafka consumer with `client.rack` set to a follower's rack is sent by
the leader to that follower (`preferred_read_replica`) and reads every record from it —
librdkafka's statistics name the broker each partition is fetched from, and on Strom the
follower's /metrics count the records it served."""

from __future__ import annotations

import functools
import json
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import cluster_nodes
from conftest import BROKERS

NODES = 3
RACKS = {i: f"rack-{i}" for i in range(1, NODES + 1)}
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
RECORDS = 2000


@pytest.fixture(scope="module", params=BROKERS)
def cluster(request):
    settings = {i: {"broker.rack": rack, "replica.selector.class": SELECTOR} for i, rack in RACKS.items()}
    with cluster_nodes.started(request.param, NODES, settings=settings) as c:
        yield c


wait_for = functools.partial(cluster_nodes.wait_for, timeout_s=60.0)

def bootstrap(cluster):
    return ",".join(n.bootstrap for n in cluster)


def create(cluster, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    wait_for("every broker registered", lambda: len(admin.list_topics(timeout=5).brokers) == NODES)
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3)])[name].result(timeout=60)

    def placed():
        t = admin.list_topics(topic=name, timeout=5).topics[name]
        ps = t.partitions
        ok = t.error is None and len(ps) == partitions and all(len(p.isrs) == 3 and p.leader > 0 for p in ps.values())
        return ok and {p.id: (p.leader, list(p.replicas)) for p in ps.values()}
    return wait_for(f"{name} with full ISRs", placed, timeout_s=120)


def test_describe_cluster_names_each_brokers_rack_and_replicas_span_every_rack(cluster):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    nodes = wait_for("three brokers", lambda: (d := admin.describe_cluster().result(timeout=10)).nodes
                     and len(d.nodes) == NODES and d.nodes)
    assert {n.id: n.rack for n in nodes} == RACKS
    placed = create(cluster, "racked", 6)
    for p, (leader, replicas) in placed.items():
        assert sorted(RACKS[r] for r in replicas) == sorted(RACKS.values()), f"partition {p}: {replicas}"
    # Leadership spread over the racks too.
    assert {leader for leader, _ in placed.values()} == set(RACKS)


def strom_fetched_records(node, topic):
    url = f"http://127.0.0.1:{node.extra['metrics_port']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("strom_fetched_records_total{") and f'topic="{topic}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def consume(cluster, topic, rack):
    """Every record of partition 0, by a consumer in `rack` (None: no client.rack), with
    librdkafka's statistics every 500 ms."""
    stats = []
    conf = {
        "bootstrap.servers": bootstrap(cluster),
        "group.id": f"reader-{rack}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "statistics.interval.ms": 500,
        "stats_cb": lambda s: stats.append(json.loads(s)),
    }
    if rack:
        conf["client.rack"] = rack
    consumer = Consumer(conf)
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 90
    while len(got) < RECORDS and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None or m.error():
            continue
        got.append((m.offset(), m.key().decode(), m.value().decode()))
    # One more statistics round after the last record.
    end = time.monotonic() + 2
    while time.monotonic() < end:
        consumer.poll(0.2)
    consumer.close()
    return got, stats


def fetched_from(stats, topic):
    """(broker fetched from, leader) pairs of partition 0 over the statistics rounds."""
    return {(s["topics"][topic]["partitions"]["0"]["broker"], s["topics"][topic]["partitions"]["0"]["leader"])
            for s in stats if topic in s.get("topics", {})}


def test_consumer_in_a_followers_rack_reads_everything_from_that_follower(cluster):
    topic = "closest"
    (leader, replicas), = create(cluster, topic, 1).values()
    follower = next(r for r in replicas if r != leader)
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, key=str(i).encode(), value=f"value-{i}".encode(), partition=0)
    assert producer.flush(60) == 0

    got, stats = consume(cluster, topic, RACKS[follower])
    assert got == [(i, str(i), f"value-{i}") for i in range(RECORDS)]
    # librdkafka's view: the partition was fetched from the follower while its leader is
    # another broker, and the follower answered Fetch requests.
    assert (follower, leader) in fetched_from(stats, topic), fetched_from(stats, topic)
    last = stats[-1]
    fetches = {b["nodeid"]: b["req"].get("Fetch", 0) for b in last["brokers"].values() if b["nodeid"] > 0}
    assert fetches[follower] > 0, fetches
    if cluster.kind == "strom":
        # The follower served the records themselves: every one of them went out of its
        # Fetch responses (it serves no replica fetches, being a follower).
        assert strom_fetched_records(cluster[follower - 1], topic) == RECORDS

    # Without client.rack the leader keeps its consumer (the selector returns the leader).
    got, stats = consume(cluster, topic, None)
    assert got == [(i, str(i), f"value-{i}") for i in range(RECORDS)]
    assert {f for f in fetched_from(stats, topic) if f[0] > 0} == {(leader, leader)}
