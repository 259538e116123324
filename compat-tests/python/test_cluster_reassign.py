"""Partition reassignment on a 3-node cluster with Apache Kafka's own
`kafka-reassign-partitions` (AlterPartitionReassignments / ListPartitionReassignments,
docs/design.md "Partition reassignment"), against 3 Strom nodes and 3 Kafka 4.4 nodes
(`brokers.start_cluster`, one cluster per broker for the module):

- an RF=2 partition moves off its leader to the third node with `--execute` while an
  idempotent acks=all producer runs, `--verify` until complete: the new replica set and
  leader are in Metadata, every acknowledged record reads back once at its offset, and the
  removed replica's partition directory is gone from its data dir;
- a move to a stopped broker (sent raw: the tool refuses brokers DescribeCluster does not
  list) stays in progress: `--list` shows the union with adding and removing replicas,
  `--verify` says it is still in progress, `--cancel` reverts it;
- `--throttle 1` keeps a move of several MiB in progress (the new replica gets one
  fetch's worth, then waits for the replication rate to fall back), and `--cancel` clears
  the throttles;
- the errors Kafka's controller gives (raw AlterPartitionReassignments v0, since the tool
  checks broker ids and duplicates itself): NO_REASSIGNMENT_IN_PROGRESS on cancelling
  nothing, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT for an empty list, a
  duplicate and an unknown broker, with Kafka's messages.

The tests run in file order and each leaves all nodes up.
"""

from __future__ import annotations

import functools
import json
import struct
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import cluster_nodes
import kafka_tools
from conftest import BROKERS
from raw_protocol import TOPIC, Reader, describe_configs, raw_call

NODES = 3


@pytest.fixture(scope="module", params=BROKERS)
def cluster(request):
    with cluster_nodes.started(request.param, NODES) as c:
        yield c


wait_for = functools.partial(cluster_nodes.wait_for, timeout_s=60.0)

def live_bootstrap(cluster):
    return ",".join(n.bootstrap for n in cluster if n.alive())


def partition_md(cluster, topic, p):
    admin = AdminClient({"bootstrap.servers": live_bootstrap(cluster)})
    t = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
    if t is None or t.error is not None or p not in t.partitions:
        return None
    return t.partitions[p]


def create_rf2(cluster, name):
    admin = AdminClient({"bootstrap.servers": live_bootstrap(cluster)})
    wait_for("every broker in the metadata", lambda: len(admin.list_topics(timeout=5).brokers) == NODES)
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=2)])[name].result(timeout=30)
    return wait_for(f"{name}-0 with an ISR of 2", lambda: (lambda md: md if md and md.leader >= 0
                                                          and len(md.isrs) == 2 else None)(
        partition_md(cluster, name, 0)))


def plan(tmp_path, topic, replicas):
    f = tmp_path / f"{topic}-plan.json"
    f.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas}]}))
    return str(f)


def reassign(cluster, *args):
    return kafka_tools.run("kafka-reassign-partitions", live_bootstrap(cluster), *args)


class Producing:
    """An idempotent acks=all producer sending to partition 0 of `topic` from its own thread
    until stopped; `acked` holds (offset, value) of every acknowledged record."""

    def __init__(self, cluster, topic):
        self.topic, self.acked, self.errors = topic, [], []
        self.producer = Producer({"bootstrap.servers": live_bootstrap(cluster), "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5})
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delivered(self, err, msg):
        if err:
            self.errors.append(err)
        else:
            self.acked.append((msg.offset(), msg.value().decode()))

    def _run(self):
        i = 0
        while not self.stopping.is_set():
            self.producer.produce(self.topic, value=f"r{i}".encode(), partition=0, on_delivery=self._delivered)
            i += 1
            self.producer.poll(0.005)

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=10)
        assert self.producer.flush(60) == 0


def read_all(cluster, topic, expected):
    consumer = Consumer({"bootstrap.servers": live_bootstrap(cluster), "group.id": f"{topic}-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < expected and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is not None and not m.error():
            got.append((m.offset(), m.value().decode()))
    consumer.close()
    return got


def test_reassign_moves_a_partition_off_its_leader_under_an_idempotent_producer(cluster, tmp_path):
    md = create_rf2(cluster, "moving")
    old, leader = list(md.replicas), md.leader
    spare = next(b for b in range(1, NODES + 1) if b not in old)
    kept = next(b for b in old if b != leader)
    # The leader goes, the new replica is first: leadership must move to an in-sync target.
    target = [spare, kept]

    producing = Producing(cluster, "moving")
    try:
        wait_for("records acknowledged before the move", lambda: len(producing.acked) > 200)
        r = kafka_tools.ok(reassign(cluster, "--execute", "--reassignment-json-file", plan(tmp_path, "moving", target)))
        assert "Successfully started partition reassignment for moving-0" in r.out, r.out

        def completed():
            out = reassign(cluster, "--verify", "--reassignment-json-file", plan(tmp_path, "moving", target)).out
            return "Reassignment of partition moving-0 is completed." in out and out
        out = wait_for("--verify to say the move completed", completed, timeout_s=90)
        # --verify clears the throttles it may have set (none here), broker and topic level.
        assert "Clearing broker-level throttles" in out and "Clearing topic-level throttles on topic moving" in out, out
        acked_at_completion = len(producing.acked)
        wait_for("records acknowledged after the move", lambda: len(producing.acked) > acked_at_completion + 200)
    finally:
        producing.stop()
    assert producing.errors == [], producing.errors[:5]

    md = wait_for("the new placement in Metadata", lambda: (lambda m: m if m and list(m.replicas) == target
                                                            and sorted(m.isrs) == sorted(target) else None)(
        partition_md(cluster, "moving", 0)))
    assert md.leader in target, md.leader

    # Every acknowledged record, once, at the offset it was acknowledged with.
    acked = sorted(producing.acked)
    got = read_all(cluster, "moving", len(acked))
    assert got[:len(acked)] == acked, f"{len(got)} read, {len(acked)} acknowledged"

    # The removed replica deleted its log (Kafka renames it `moving-0.<id>-delete` first and
    # deletes that a minute later; the partition directory itself is gone either way); the
    # new one holds the data.
    gone = cluster[leader - 1].workdir / "data" / "moving-0"
    wait_for(f"{gone} removed", lambda: not gone.exists(), timeout_s=30)
    added = cluster[spare - 1].workdir / "data" / "moving-0"
    assert any(f.suffix == ".log" and f.stat().st_size > 0 for f in added.iterdir()), list(added.iterdir())


def test_reassign_to_a_stopped_broker_lists_as_in_progress_and_cancels(cluster, tmp_path):
    md = create_rf2(cluster, "cancelled")
    old = list(md.replicas)
    spare = next(b for b in range(1, NODES + 1) if b not in old)
    # A broker that is down cannot catch up: the move stays in progress.
    target = [old[0], spare]
    cluster.kill9(spare)
    try:
        # Sent raw: the tool refuses a target naming a broker DescribeCluster does not list
        # (a fenced one), though the controller takes any registered broker.
        assert alter_reassignments(live_bootstrap(cluster).split(",")[0], "cancelled", 0, target) == (0, None)
        listed = kafka_tools.ok(reassign(cluster, "--list")).out
        union = ",".join(map(str, target + [old[1]]))
        assert f"cancelled-0: replicas: {union}. adding: {spare}. removing: {old[1]}." in listed, listed
        out = reassign(cluster, "--verify", "--reassignment-json-file", plan(tmp_path, "cancelled", target)).out
        assert "Reassignment of partition cancelled-0 is still in progress." in out, out

        # --preserve-throttles: clearing them alters every broker's configs, the stopped
        # one's too, which only it can answer (on both brokers).
        out = kafka_tools.ok(reassign(cluster, "--cancel", "--preserve-throttles", "--reassignment-json-file",
                                      plan(tmp_path, "cancelled", target))).out
        assert "Successfully cancelled partition reassignment for: cancelled-0" in out, out
        assert "No partition reassignments found." in kafka_tools.ok(reassign(cluster, "--list")).out
        md = wait_for("the old replicas back", lambda: (lambda m: m if m and sorted(m.replicas) == sorted(old)
                                                        else None)(partition_md(cluster, "cancelled", 0)))
        assert spare not in md.isrs
    finally:
        cluster.restart(spare)
    # Nothing is moving: cancelling again names none active.
    out = kafka_tools.ok(reassign(cluster, "--cancel", "--reassignment-json-file",
                                  plan(tmp_path, "cancelled", target))).out
    assert "None of the specified partition reassignments are active." in out, out


def test_throttled_move_stays_in_progress_and_cancel_clears_the_throttles(cluster, tmp_path):
    """`--throttle 1` (1 B/s): the tool sets the throttled replicas on the topic (the current
    replicas on the leader side, the new one on the follower side) and the rates on every
    broker of the move; the new replica, out of the ISR, gets one fetch's worth (1 MiB)
    and then waits for the rate over the last 11 s to fall below 1 B/s, so a partition of
    several MiB stays in progress. `--cancel` reverts it and clears the throttles."""
    md = create_rf2(cluster, "throttled")
    old = sorted(md.replicas)
    spare = next(b for b in range(1, NODES + 1) if b not in old)
    producer = Producer({"bootstrap.servers": live_bootstrap(cluster), "acks": "all", "linger.ms": 5})
    for i in range(6000):
        producer.produce("throttled", value=b"x" * 1000, partition=0)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    target = [old[0], old[1], spare]

    out = kafka_tools.ok(reassign(cluster, "--execute", "--throttle", "1", "--reassignment-json-file",
                                  plan(tmp_path, "throttled", target))).out
    assert "The inter-broker throttle limit was set to 1 B/s" in out, out
    configs = describe_configs(cluster[0].bootstrap, TOPIC, "throttled")
    assert configs["leader.replication.throttled.replicas"] == f"0:{old[0]},0:{old[1]}", configs
    assert configs["follower.replication.throttled.replicas"] == f"0:{spare}", configs
    out = reassign(cluster, "--verify", "--preserve-throttles", "--reassignment-json-file",
                   plan(tmp_path, "throttled", target)).out
    assert "Reassignment of partition throttled-0 is still in progress." in out, out
    # The new replica took at most a couple of fetches (1 MiB each) of the 6 MB.
    copy = cluster[spare - 1].workdir / "data" / "throttled-0"
    held = sum(f.stat().st_size for f in copy.glob("*.log")) if copy.exists() else 0
    assert held < 4_000_000, held
    assert partition_md(cluster, "throttled", 0).isrs.count(spare) == 0

    out = kafka_tools.ok(reassign(cluster, "--cancel", "--reassignment-json-file",
                                  plan(tmp_path, "throttled", target))).out
    assert "Successfully cancelled partition reassignment for: throttled-0" in out, out
    assert "Clearing topic-level throttles on topic throttled" in out, out
    configs = describe_configs(cluster[0].bootstrap, TOPIC, "throttled")
    assert configs.get("leader.replication.throttled.replicas") in ("", None), configs
    wait_for(f"{copy} removed", lambda: not copy.exists(), timeout_s=30)


def uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def compact_string(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


def nullable_compact_string(r: Reader):
    n = r.uvarint()
    if n == 0:
        return None
    s = r.data[r.pos:r.pos + n - 1].decode()
    r.pos += n - 1
    return s


def alter_reassignments(bootstrap, topic, partition, replicas):
    """AlterPartitionReassignments v0 (flexible) of one partition; (code, message)."""
    reps = uvarint(0) if replicas is None else uvarint(len(replicas) + 1) + b"".join(
        struct.pack(">i", r) for r in replicas)
    part = struct.pack(">i", partition) + reps + b"\x00"
    body = struct.pack(">i", 30000) + uvarint(2) + compact_string(topic) + uvarint(2) + part + b"\x00" + b"\x00"
    r = Reader(raw_call(bootstrap, 45, 0, body, flexible=True))
    r.take("b")  # the response header's tags
    r.take("i")  # throttle
    top = (r.take("h"), nullable_compact_string(r))
    assert top == (0, None), top
    assert r.uvarint() == 2, "one topic"
    r.compact_string()
    assert r.uvarint() == 2, "one partition"
    assert r.take("i") == partition
    return r.take("h"), nullable_compact_string(r)


def test_reassignment_errors_are_kafkas(cluster):
    md = wait_for("cancelled-0", lambda: partition_md(cluster, "cancelled", 0))
    boot = cluster[0].bootstrap
    # Kafka leaves out a message that is the code's default ("No partition reassignment is
    # in progress."), and so does Strom.
    assert alter_reassignments(boot, "cancelled", 0, None) == (85, None)
    assert alter_reassignments(boot, "no-such-topic", 0, [1]) == (3, "Unable to find a topic named no-such-topic.")
    assert alter_reassignments(boot, "cancelled", 5, [1]) == (3, "Unable to find partition cancelled:5.")
    assert alter_reassignments(boot, "cancelled", 0, []) == (
        39, "The manual partition assignment includes an empty replica list.")
    assert alter_reassignments(boot, "cancelled", 0, [2, 1, 2]) == (
        39, "The manual partition assignment includes the broker 2 more than once.")
    assert alter_reassignments(boot, "cancelled", 0, [1, 7]) == (
        39, "The manual partition assignment includes broker 7, but no such broker is registered.")
    # Nothing of that changed the partition.
    assert sorted(partition_md(cluster, "cancelled", 0).replicas) == sorted(md.replicas)
