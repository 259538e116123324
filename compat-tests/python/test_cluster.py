"""A 3-node cluster (every node a broker and a metadata voter: Strom's
`controller.quorum.voters`, Kafka 4.4's static KRaft quorum), run once per module for each
broker (`brokers.start_cluster`), the same scenarios against both (`test_x[strom]` next to
`test_x[kafka]`; compat-tests/FINDINGS.md #20 says where they differ and who is right):
a topic created through node 1 is placed on all three nodes, a producer bootstrapped on
node 1 only sends each partition's records to its leader (NOT_LEADER_OR_FOLLOWER elsewhere
makes the client follow Metadata), and an RF=1 record is stored on its leader's disk only.
Then partition replication (docs/design.md "Partition replication"): RF=3 topics of several
partitions keep every acknowledged record of an idempotent acks=all producer, confluent-kafka
and the Java client (java/.../ClusterProducer.java), exactly once, in order and at the
offset it was acknowledged with, while partition leaders are killed -9 and restarted
(`STROM_CLUSTER_CYCLES` cycles on Strom, 10 by default, `STROM_CLUSTER_KAFKA_CYCLES` on
Kafka, 3; each prints its cost); the replicas' logs end
byte-identical; with 2 of 3 nodes down acks=all is refused (Strom: NOT_ENOUGH_REPLICAS) or
times out (Kafka) and acks=1 still works on the survivor's partition. Then the coordinators
(group and transaction) across a kill -9 of the node that leads their internal partition,
and producer ids handed out by different nodes.

One cluster per broker for the module: the tests run in file order and each leaves all
nodes up.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

import brokers
import cluster_nodes
from raw_protocol import raw_call
from conftest import BROKERS

NODES = 3
PARTITIONS = 6
PER_PARTITION = 100
# Kill cycles per kill test: the issue asks for 10 on Strom in CI (about 7 s each for
# confluent-kafka, 10 s for the Java client); the Kafka side, a JVM start per cycle (20–25 s),
# runs 3 for the differential.
CYCLES = {"strom": int(os.environ.get("STROM_CLUSTER_CYCLES", "10")),
          "kafka": int(os.environ.get("STROM_CLUSTER_KAFKA_CYCLES", "3"))}
# Per kill cycle: a failover (3 s session), a restart (a JVM start for Kafka) and the
# replica's catch-up, each bounded by its own wait below.
CYCLES_TIMEOUT_S = 240 + 120 * max(CYCLES.values())

JAVA_PRODUCER = (Path(__file__).resolve().parent.parent / "java" / "src" / "test" / "java" / "dev" / "strom"
                 / "compat" / "ClusterProducer.java")
JAVA_RATE = 500  # records per second, all partitions together: about what the confluent loop sends


@pytest.fixture(scope="module", params=BROKERS)
def cluster(request):
    with cluster_nodes.started(request.param, NODES) as c:
        yield c


@pytest.fixture(autouse=True)
def every_node_back_up(request):
    """After each test, the nodes it killed and did not restart (it failed half-way) run
    again: otherwise one failure fails every later test of the module on a dead node."""
    yield
    if "cluster" in request.fixturenames:
        cluster_nodes.restart_dead(request.getfixturevalue("cluster"))


def wait_for(what, check, timeout_s=30.0):
    """`check()` until it returns something true. A client error counts as "not yet": on
    two loaded cores a node that serves Metadata may still time out a client's first
    requests (confluent-kafka's list_topics raises _TRANSPORT then)."""
    deadline = time.monotonic() + timeout_s
    last_error = None
    while time.monotonic() < deadline:
        try:
            v = check()
        except KafkaException as e:
            v, last_error = None, e
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}" + (f" (last error: {last_error})" if last_error else ""))


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

    # Each partition's records are on its leader's disk and nowhere else (neither broker
    # makes the directory elsewhere).
    for p, leader in leaders.items():
        for node_id, n in zip((1, 2, 3), cluster):
            log = n.workdir / "data" / f"routed-{p}" / "00000000000000000000.log"
            size = log.stat().st_size if log.exists() else 0
            if node_id == leader:
                assert size > 0, f"partition {p} on its leader {leader}"
            else:
                assert size == 0, f"partition {p} written on node {node_id}, led by {leader}"

    # kafka-log-dirs (DescribeLogDirs to every broker) names each partition on its one replica.
    import kafka_tools
    r = kafka_tools.run("kafka-log-dirs", n1.bootstrap, "--describe", "--broker-list", "1,2,3",
                        "--topic-list", "routed")
    assert r.rc == 0, f"kafka-log-dirs failed ({r.rc}):\n{r.out}\n{r.err}"
    described = json.loads(next(line for line in r.lines() if line.startswith("{")))
    hosted = {b["broker"]: sorted(int(q["partition"].rsplit("-", 1)[1]) for d in b["logDirs"]
                                  for q in d["partitions"]) for b in described["brokers"]}
    assert hosted == {b: sorted(p for p, l in leaders.items() if l == b) for b in (1, 2, 3)}, hosted


def partition_md(bootstrap, topic, p):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    t = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
    if t is None or t.error is not None or p not in t.partitions:
        return None
    return t.partitions[p]


def live_bootstrap(cluster):
    return ",".join(n.bootstrap for n in cluster if n.alive())


def wait_isr(cluster, topic, p, size, timeout_s=60.0):
    def check():
        for n in cluster:
            if not n.alive():
                continue
            try:
                md = partition_md(n.bootstrap, topic, p)
            except Exception:
                return None
            if md is None or md.leader < 0 or len(md.isrs) != size:
                return None
            last = md
        return last
    return wait_for(f"{topic}-{p} with an ISR of {size}", check, timeout_s)


def create(cluster, name, partitions, configs=None):
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    # CreateTopics goes to the controller, which Metadata names once the brokers registered.
    wait_for("every broker in node 1's metadata", lambda: len(admin.list_topics(timeout=5).brokers) == NODES)
    f = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3,
                                      config=configs or {})])
    f[name].result(timeout=30)
    for p in range(partitions):
        wait_isr(cluster, name, p, 3)


def read_all(cluster, topic, p, expected):
    consumer = Consumer({"bootstrap.servers": live_bootstrap(cluster), "group.id": f"{topic}-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < expected and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is None or m.error():
            continue
        got.append((m.offset(), m.value().decode()))
    # Anything past what was expected would be a duplicate or a lost-then-found record.
    m = consumer.poll(2.0)
    while m is not None:
        if not m.error():
            got.append((m.offset(), m.value().decode()))
        m = consumer.poll(0.5)
    consumer.close()
    return got


def test_kafka_topics_describe_shows_replicas_and_isr(cluster):
    """Kafka 4.4's kafka-topics --describe (DescribeTopicPartitions) tells what Metadata
    tells: every partition's leader, its three replicas and its ISR."""
    import kafka_tools

    topic = "described"
    create(cluster, topic, 2)
    r = kafka_tools.run("kafka-topics", cluster[1].bootstrap, "--describe", "--topic", topic)
    assert r.rc == 0, f"kafka-topics --describe failed ({r.rc}):\n{r.out}\n{r.err}"
    rows = {}
    for line in r.lines():
        fields = dict(re.findall(r"(\w+): (\S*)", line))
        if "Partition" in fields:
            rows[int(fields["Partition"])] = fields
    assert sorted(rows) == [0, 1], r.out
    for p, row in rows.items():
        md = partition_md(cluster[1].bootstrap, topic, p)
        assert int(row["Leader"]) == md.leader
        assert sorted(int(b) for b in row["Replicas"].split(",")) == sorted(md.replicas) == [1, 2, 3]
        assert sorted(int(b) for b in row["Isr"].split(",")) == sorted(md.isrs) == [1, 2, 3]


# --- Leader kill -9 cycles under idempotent acks=all producers. Values are
# `p<partition>-<seq, 7 digits>`: in one partition their order is the send order.


class Acks:
    """What a producer was told: acknowledged records (partition, offset, value, when it
    was heard, time.monotonic()) and errors, from its callbacks' thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []
        self.errors = []

    def add(self, partition, offset, value):
        with self.lock:
            self.items.append((partition, offset, value, time.monotonic()))

    def error(self, what):
        with self.lock:
            self.errors.append(what)

    def __len__(self):
        with self.lock:
            return len(self.items)

    def partitions(self):
        with self.lock:
            return {a[0] for a in self.items}

    def first_after(self, index, t, partitions):
        """When every one of `partitions` had an ack (past `index`) heard after `t`: the
        latest of their first such acks; None until then."""
        with self.lock:
            tail = self.items[index:]
        first = {}
        for p, _offset, _value, at in tail:
            if at > t and p in partitions and p not in first:
                first[p] = at
        return max(first.values()) if len(first) == len(partitions) else None


def leader_kill_cycles(cluster, topic, partitions, acks):
    """`CYCLES[kind]` times: kill -9 the leader of partition `cycle % partitions` (and so every
    partition it leads), wait until each of those has an ack written after the kill (the
    failover), a new leader without the dead one in its ISR and the dead broker gone from
    every survivor's Metadata; restart it, wait for full ISRs and for more acks. Prints the
    failover times and each cycle's cost."""
    failovers, costs = [], []
    for k in range(CYCLES[cluster.kind]):
        began = time.monotonic()
        leader = wait_isr(cluster, topic, k % partitions, 3).leader
        led = {p for p in range(partitions) if wait_isr(cluster, topic, p, 3).leader == leader}
        killed_at = time.monotonic()
        cluster.kill9(leader)
        # Acks the dead leader sent before it died may still reach their callbacks.
        time.sleep(0.2)
        before = len(acks)
        first = wait_for(f"an ack on each of {sorted(led)} written after the kill of {leader}",
                         lambda: acks.first_after(before, killed_at, led), 60)
        failovers.append(first - killed_at)
        for p in sorted(led):
            md = wait_for(f"a new leader of {topic}-{p} in metadata",
                          lambda p=p: (lambda m: m if m and m.leader not in (-1, leader) else None)(
                              partition_md(live_bootstrap(cluster), topic, p)))
            assert leader not in md.isrs, f"the dead leader left the ISR of {topic}-{p}"
        # A fenced broker is left out of Metadata, as Kafka lists only live brokers (every
        # survivor, once it has applied the fencing).
        for n in [n for n in cluster if n.alive()]:
            wait_for(f"node {n.name} to stop listing broker {leader}", lambda n=n: leader not in AdminClient(
                {"bootstrap.servers": n.bootstrap}).list_topics(timeout=5).brokers, 15)
        cluster.restart(leader)
        for p in range(partitions):
            wait_isr(cluster, topic, p, 3, 120)
        mark = len(acks)
        wait_for("acks after the rejoin", lambda: len(acks) > mark + 20)
        costs.append(time.monotonic() - began)
    print(f"{cluster.kind}: failover (kill -9 to first ack) over {len(failovers)} cycles: "
          f"min {min(failovers):.2f}s median {statistics.median(failovers):.2f}s max {max(failovers):.2f}s "
          f"all {[round(f, 2) for f in failovers]}; cycle cost {[round(c, 1) for c in costs]}s, "
          f"mean {statistics.mean(costs):.1f}s")


def check_read_back(cluster, topic, partitions, acks):
    """Every acknowledged record read back exactly once, at the offset it was acknowledged
    with, in send order per partition; nothing read that was not acknowledged. A record
    acknowledged without an offset (librdkafka reported one such against Kafka once,
    FINDINGS.md "Client quirks") is checked by its value only."""
    assert acks.errors == [], acks.errors[:5]
    for p in range(partitions):
        mine = [(o, v) for q, o, v, _ in acks.items if q == p]
        assert mine, f"nothing acknowledged on {topic}-{p}"
        known = sorted((o, v) for o, v in mine if o is not None)
        unknown = {v for o, v in mine if o is None}
        if unknown:
            print(f"{cluster.kind}: {topic}-{p}: {len(unknown)} acks without an offset, first {sorted(unknown)[:5]}")
        offsets = [o for o, _ in known]
        assert len(set(offsets)) == len(offsets), f"{topic}-{p}: two records acknowledged at one offset"
        got = read_all(cluster, topic, p, len(mine))
        values = [v for _, v in got]
        assert len(set(values)) == len(values), f"{topic}-{p}: a record read twice"
        assert values == sorted(values), f"{topic}-{p}: records out of order"
        by_offset = dict(got)
        moved = [(o, v, by_offset.get(o)) for o, v in known if by_offset.get(o) != v]
        assert not moved, f"{topic}-{p}: {len(moved)} acknowledged records not at their offset, first {moved[:3]}"
        assert unknown <= set(values), f"{topic}-{p}: acknowledged records missing: {sorted(unknown - set(values))[:5]}"
        # Every record sent was acknowledged (no error), so each one read is one of those.
        assert len(got) == len(mine), f"{topic}-{p}: {len(got)} read, {len(mine)} acknowledged"


def check_identical_replicas(cluster, topic, partitions, acks):
    """All replicas' logs end byte-identical (every record is below the high watermark now)."""
    for p in range(partitions):
        def logs(p=p):
            data = [(n.workdir / "data" / f"{topic}-{p}" / "00000000000000000000.log").read_bytes()
                    for n in cluster]
            return data if all(d == data[0] for d in data) else None
        data = wait_for(f"identical replica logs of {topic}-{p}", logs, 30)
        assert len(data[0]) >= 10 * sum(1 for a in acks.items if a[0] == p), \
            "every acknowledged value is in the compared bytes"


@pytest.mark.timeout(CYCLES_TIMEOUT_S)
def test_rf3_acks_all_keeps_every_acknowledged_record_across_leader_kills(cluster):
    topic, partitions = "replicated", 3
    create(cluster, topic, partitions, {"min.insync.replicas": "2"})
    acks = Acks()
    stop = threading.Event()
    unflushed = []

    def delivered(err, msg):
        if err:
            acks.error(err)
        else:
            acks.add(msg.partition(), msg.offset(), msg.value().decode())

    def produce():
        producer = Producer({"bootstrap.servers": ",".join(n.bootstrap for n in cluster),
                             "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 500,
                             "topic.metadata.refresh.interval.ms": 1000})
        seq = [0] * partitions
        i = 0
        while not stop.is_set():
            p = i % partitions
            try:
                producer.produce(topic, value=f"p{p}-{seq[p]:07d}".encode(), partition=p, on_delivery=delivered)
                seq[p] += 1
                i += 1
            except BufferError:
                pass
            producer.poll(0.002)
        unflushed.append(producer.flush(120))

    t = threading.Thread(target=produce)
    t.start()
    try:
        wait_for("first acks on every partition", lambda: acks.partitions() == set(range(partitions)))
        leader_kill_cycles(cluster, topic, partitions, acks)
    finally:
        stop.set()
        t.join(180)
    assert unflushed == [0], "every record delivered before the producer's end"
    check_read_back(cluster, topic, partitions, acks)
    check_identical_replicas(cluster, topic, partitions, acks)


@pytest.fixture(scope="module")
def java_classpath(tmp_path_factory):
    from test_share_groups import _classpath

    return _classpath(tmp_path_factory.mktemp("java-classpath"))


@pytest.mark.timeout(CYCLES_TIMEOUT_S)
def test_java_idempotent_producer_keeps_every_ack_across_leader_kills(cluster, java_classpath):
    """The same cycles under the Java client's KafkaProducer (idempotence on by default,
    acks=all), a child JVM printing each acknowledged (partition, offset, value)."""
    topic, partitions = "java-replicated", 3
    create(cluster, topic, partitions, {"min.insync.replicas": "2"})
    acks, done = Acks(), []
    stderr_path = cluster.root / "java-producer.err"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", java_classpath,
             str(JAVA_PRODUCER), ",".join(n.bootstrap for n in cluster), topic, str(partitions), str(JAVA_RATE)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
            preexec_fn=brokers._die_with_parent,
        )

    def pump():
        for line in proc.stdout:
            f = line.split()
            if f and f[0] == "ACK":
                # RecordMetadata.offset() is -1 when the client knows none.
                acks.add(int(f[1]), int(f[2]) if int(f[2]) >= 0 else None, f[3])
            elif f and f[0] == "ERR":
                acks.error(line.strip())
            elif f and f[0] == "DONE":
                done.append(int(f[1]))

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        # The source launcher compiles the program first: a few seconds of one busy core.
        wait_for("the Java producer's first acks on every partition",
                 lambda: acks.partitions() == set(range(partitions)) or proc.poll() is not None, 120)
        assert proc.poll() is None, f"the Java producer exited:\n{brokers.tail(stderr_path)}"
        leader_kill_cycles(cluster, topic, partitions, acks)
    finally:
        proc.stdin.close()  # its end stops the producer, which flushes and says DONE
        try:
            proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        t.join(10)
    assert proc.returncode == 0, f"the Java producer failed ({proc.returncode}):\n{brokers.tail(stderr_path)}"
    assert done == [len(acks) + len(acks.errors)], (done, len(acks), acks.errors[:5])
    check_read_back(cluster, topic, partitions, acks)
    check_identical_replicas(cluster, topic, partitions, acks)


def test_two_of_three_down_refuses_acks_all_and_takes_acks_1(cluster):
    """Nodes 2 and 3 killed at once: no metadata quorum is left, so nothing can shrink the
    ISR of a partition node 1 leads. Strom's leader knows it lost the quorum and refuses
    acks=all before the append (NOT_ENOUGH_REPLICAS); Kafka's appends and waits for the dead
    followers until the producer gives up (FINDINGS.md #20). acks=1 works on both."""
    topic = "minority"
    create(cluster, topic, 3, {"min.insync.replicas": "2"})
    survivor = 1
    mds = [partition_md(cluster[0].bootstrap, topic, p) for p in range(3)]
    own = next(p for p, md in enumerate(mds) if md.leader == survivor)
    try:
        for node_id in (2, 3):
            cluster.kill9(node_id)
        # The survivor notices it lost the metadata quorum within the session timeout (3 s).
        time.sleep(4)

        def send(acks):
            result = []
            producer = Producer({"bootstrap.servers": cluster[0].bootstrap, "acks": acks, "retries": 0,
                                 "enable.idempotence": False, "message.timeout.ms": 15000})
            producer.produce(topic, value=f"acks={acks}".encode(), partition=own,
                             on_delivery=lambda err, msg: result.append((err, msg.offset())))
            producer.flush(30)
            return result[0]

        err, _ = send("all")
        print(f"{cluster.kind}: acks=all with 2 of 3 down: {err}")
        assert err is not None
        if cluster.kind == "strom":
            assert err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
        else:
            assert err.code() in (KafkaError._MSG_TIMED_OUT, KafkaError.REQUEST_TIMED_OUT), err
        err, offset = send("1")
        print(f"{cluster.kind}: acks=1 with 2 of 3 down: {err} offset {offset}")
        assert err is None
    finally:
        for node_id in (2, 3):
            if not cluster[node_id - 1].alive():
                cluster.restart(node_id)
    wait_isr(cluster, topic, own, 3, 120)
    got = read_all(cluster, topic, own, 1)
    print(f"{cluster.kind}: read back after the restarts: {got}")
    if cluster.kind == "strom":
        assert got == [(0, "acks=1")]
    else:
        # The timed-out acks=all record is in the log before the acks=1 one.
        assert got == [(0, "acks=all"), (1, "acks=1")]


# --- Coordinators on the cluster (docs/design.md "Cluster": coordinators follow the leaders
# of their internal partitions). The internal topics have three replicas, so a committed
# offset or transaction state survives its coordinator's kill -9.


def coordinator_of(cluster, group):
    """The group's coordinator as DescribeGroups names it (None while it moves)."""
    admin = AdminClient({"bootstrap.servers": live_bootstrap(cluster)})
    try:
        return admin.describe_consumer_groups([group])[group].result(timeout=10).coordinator.id
    except Exception:
        return None


def test_group_resumes_from_committed_offsets_across_coordinator_kill(cluster):
    topic, group, n = "grouped", "failover-group", 100
    create(cluster, topic, 3)
    producer = Producer({"bootstrap.servers": live_bootstrap(cluster), "acks": "all",
                         "enable.idempotence": True})
    for p in range(3):
        for i in range(n):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(60) == 0

    consumer = Consumer({"bootstrap.servers": live_bootstrap(cluster), "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 45000, "topic.metadata.refresh.interval.ms": 1000})
    consumer.subscribe([topic])
    seen = []  # (partition, offset)
    commit_errors = []

    def consume(until, commit_each=False):
        deadline = time.monotonic() + 90
        while len(set(seen)) < until and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is None or m.error():
                continue
            seen.append((m.partition(), m.offset()))
            if commit_each:
                try:
                    consumer.commit(message=m, asynchronous=False)
                except KafkaException as e:
                    # The coordinator moves: the next commit goes to the new one.
                    commit_errors.append(e.args[0].code())

    consume(150)
    consumer.commit(asynchronous=False)
    parts = [TopicPartition(topic, p) for p in range(3)]
    # A partition the consumer has read nothing of has no commit (OFFSET_INVALID): it starts
    # at the beginning.
    committed = {tp.partition: max(tp.offset, 0) for tp in consumer.committed(parts, timeout=30)}
    assert sum(committed.values()) >= 150, committed
    old = wait_for("the group's coordinator", lambda: coordinator_of(cluster, group))
    cluster.kill9(old)
    wait_for("a new group coordinator", lambda: (lambda c: c if c not in (None, old) else None)(
        coordinator_of(cluster, group)), 60)
    consume(3 * n, commit_each=True)
    try:
        consumer.commit(asynchronous=False)  # what a commit lost in the failover left
    except KafkaException as e:
        assert e.args[0].code() == KafkaError._NO_OFFSET, e  # everything was committed
    consumer.close()
    # No record lost, and a record read twice is one past the last commit before the kill.
    assert set(seen) == {(p, o) for p in range(3) for o in range(n)}
    dups = {k for k in seen if seen.count(k) > 1}
    assert all(o >= committed[p] for p, o in dups), (committed, sorted(dups))

    # The new coordinator has the final commits; a fresh member of the group starts there.
    fresh = Consumer({"bootstrap.servers": live_bootstrap(cluster), "group.id": group,
                      "enable.auto.commit": False})
    got = fresh.committed(parts, timeout=30)
    fresh.close()
    final = {tp.partition: tp.offset for tp in got}
    assert final == {0: n, 1: n, 2: n}, ([(tp.partition, tp.offset, tp.error) for tp in got], commit_errors)
    cluster.restart(old)
    for p in range(3):
        wait_isr(cluster, topic, p, 3)


def test_transactions_commit_exactly_once_across_txn_coordinator_kill(cluster):
    topic, txn_id, per_txn = "txn-failover", "failover-txn", 5
    create(cluster, topic, 2)
    producer = Producer({"bootstrap.servers": live_bootstrap(cluster), "transactional.id": txn_id,
                         "transaction.timeout.ms": 60000, "message.timeout.ms": 60000,
                         "topic.metadata.refresh.interval.ms": 1000})
    producer.init_transactions(60)
    committed, aborted = [], []

    def one_txn(k, before_commit=None):
        values = [f"t{k}-{i}" for i in range(per_txn)]
        producer.begin_transaction()
        for i, v in enumerate(values):
            producer.produce(topic, value=v.encode(), partition=i % 2)
        producer.flush(60)
        if before_commit:
            before_commit()
        deadline = time.monotonic() + 60
        while True:
            try:
                producer.commit_transaction(30)
                committed.extend(values)
                return
            except KafkaException as e:
                err = e.args[0]
                if err.retriable() and time.monotonic() < deadline:
                    continue
                if err.txn_requires_abort():
                    producer.abort_transaction(60)
                    aborted.extend(values)
                    return
                raise

    killed, epochs = [], []

    def kill_coordinator():
        # Mid-transaction: its partitions are in the replicated log, the commit goes to the
        # node elected next. The previous transaction's markers are written (this one's
        # AddPartitionsToTxn waited for them).
        epochs.append(marker_coordinator_epoch(cluster, topic, 0))
        killed.append(txn_coordinator(cluster, txn_id))
        cluster.kill9(killed[0])

    for k in range(30):
        one_txn(k, kill_coordinator if k == 10 else None)
    coordinator = killed[0]
    assert txn_coordinator(cluster, txn_id) != coordinator
    producer.flush(30)
    assert len(committed) >= 20 * per_txn, (len(committed), len(aborted))

    consumer = Consumer({"bootstrap.servers": live_bootstrap(cluster), "group.id": "txn-failover-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < len(committed) and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is not None and not m.error():
            got.append(m.value().decode())
    m = consumer.poll(3.0)
    while m is not None:
        if not m.error():
            got.append(m.value().decode())
        m = consumer.poll(0.5)
    consumer.close()
    assert sorted(got) == sorted(committed), "every committed transaction exactly once"
    assert not set(got) & set(aborted)
    # Markers carry the coordinator epoch (the __transaction_state partition's leader epoch):
    # the new coordinator's are newer, so the partitions would fence the old one's.
    wait_for("markers of the new coordinator's epoch",
             lambda: marker_coordinator_epoch(cluster, topic, 0) > epochs[0], 30)
    cluster.restart(coordinator)
    for p in range(2):
        wait_isr(cluster, topic, p, 3)


def txn_coordinator(cluster, txn_id):
    """FindCoordinator (key type 1) over the wire: the node id it names."""
    body = struct.pack(">h", len(txn_id)) + txn_id.encode() + struct.pack(">b", 1)
    resp = raw_call(live_bootstrap(cluster).split(",")[0], 10, 1, body)
    _throttle, error, _msg_len = struct.unpack(">ihh", resp[:8])
    assert error == 0, error
    msg_len = _msg_len if _msg_len > 0 else 0
    (node,) = struct.unpack(">i", resp[8 + msg_len:12 + msg_len])
    return node


def marker_coordinator_epoch(cluster, topic, p):
    """DescribeProducers (v0, flexible) at the partition's leader: the highest coordinator
    epoch of its producers' last transaction markers."""
    md = wait_for(f"a leader of {topic}-{p}", lambda: (lambda m: m if m is not None and m.leader > 0 else None)(
        partition_md(live_bootstrap(cluster).split(",")[0], topic, p)))
    name = topic.encode()
    body = b"\x02" + bytes([len(name) + 1]) + name + b"\x02" + struct.pack(">i", p) + b"\x00\x00"
    r = raw_call(cluster[md.leader - 1].bootstrap, 61, 0, body, flexible=True)
    pos = 1 + 4  # response header tags, throttle
    assert r[pos] == 2, "one topic"
    pos += 1
    pos += r[pos]  # compact name: length + 1, then the bytes
    assert r[pos] == 2, "one partition"
    pos += 1
    (_index, error) = struct.unpack(">ih", r[pos:pos + 6])
    assert error == 0, error
    pos += 6
    pos += max(r[pos] - 1, 0) + 1  # error message (null: 0)
    count = r[pos] - 1
    pos += 1
    epochs = []
    for _ in range(count):
        (_pid, _epoch, _seq, _ts, coordinator_epoch, _start) = struct.unpack(">qiiqiq", r[pos:pos + 36])
        epochs.append(coordinator_epoch)
        pos += 36 + 1
    return max(epochs, default=-1)


def test_producer_ids_are_distinct_across_nodes(cluster):
    """InitProducerId (v0, no transactional id) on every node: each node takes its blocks of
    ids from the metadata image, so no two nodes hand out the same id."""
    ids = []
    for n in cluster:
        for _ in range(3):
            resp = wait_for("a producer id", lambda: (lambda r: r if struct.unpack(">h", r[4:6])[0] == 0 else None)(
                raw_call(n.bootstrap, 22, 0, struct.pack(">hi", -1, 60000))), 30)
            _throttle, error, pid, epoch = struct.unpack(">ihqh", resp[:16])
            assert error == 0 and epoch == 0
            ids.append(pid)
    assert len(set(ids)) == len(ids), ids
    # Each node's ids come from its own block (consecutive within the node).
    blocks = {pid // 1000 for pid in ids}
    assert len(blocks) == len(cluster), ids


# --- Controlled shutdown (docs/design.md "Cluster"): a node stopped cleanly (SIGTERM) first
# asks the quorum to move its leaderships to other in-sync replicas and take it out of every
# ISR, so a rolling restart of every node costs clients retriable errors only.


def test_rolling_restart_under_load_loses_nothing_and_gives_no_client_error(cluster):
    topic, group, partitions = "rolling", "rolling-group", 3
    create(cluster, topic, partitions, {"min.insync.replicas": "2"})
    acked, errors, consumer_errors, seen = [], [], [], set()
    lock, stop_producing, stop_consuming = threading.Lock(), threading.Event(), threading.Event()

    def delivered(err, msg):
        with lock:
            if err:
                errors.append(err)
            else:
                acked.append((msg.partition(), msg.offset(), msg.value().decode()))

    def produce():
        producer = Producer({"bootstrap.servers": ",".join(n.bootstrap for n in cluster),
                             "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 500,
                             "topic.metadata.refresh.interval.ms": 1000})
        i = 0
        while not stop_producing.is_set():
            try:
                producer.produce(topic, value=f"{i % partitions}-{i // partitions:07d}".encode(),
                                 partition=i % partitions, on_delivery=delivered)
                i += 1
            except BufferError:
                pass
            producer.poll(0.002)
        assert producer.flush(120) == 0

    def consume():
        consumer = Consumer({"bootstrap.servers": ",".join(n.bootstrap for n in cluster),
                             "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": True, "auto.commit.interval.ms": 500,
                             "topic.metadata.refresh.interval.ms": 1000})
        consumer.subscribe([topic])
        while not stop_consuming.is_set():
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error():
                consumer_errors.append(m.error())
                continue
            with lock:
                seen.add(m.value().decode())
        consumer.close()

    producer_thread, consumer_thread = threading.Thread(target=produce), threading.Thread(target=consume)
    producer_thread.start()
    consumer_thread.start()
    stops = []
    try:
        wait_for("first acks", lambda: len(acked) > 50)
        for node_id in (1, 2, 3):
            for p in range(partitions):
                wait_isr(cluster, topic, p, 3)
            node = cluster[node_id - 1]
            began = time.monotonic()
            # Kafka's JVM ends with 143 (SIGTERM) once its shutdown hook has run.
            clean = (0,) if cluster.kind == "strom" else (0, 143)
            assert node.stop() in clean, f"node {node_id} did not stop cleanly:\n{node.log_tail()}"
            stops.append(time.monotonic() - began)
            if cluster.kind == "strom":
                log = node.log_path.read_text(errors="replace")
                assert "controlled shutdown: leadership moved away" in log, node.log_tail()
            # It led nothing when it went: every partition had another leader in the image
            # (the survivors apply the entry within a Raft heartbeat or so; well before the
            # 3 s after which a node that just vanished would be fenced).
            for p in range(partitions):
                wait_for(f"{topic}-{p} led by a survivor", lambda: (lambda md: md is not None and md.leader
                         not in (-1, node_id))(partition_md(live_bootstrap(cluster), topic, p)), 2)
            with lock:
                mark = len(acked)
            wait_for(f"acks with node {node_id} down", lambda: len(acked) > mark + 20)
            cluster.restart(node_id)
        for p in range(partitions):
            wait_isr(cluster, topic, p, 3)
        with lock:
            mark = len(acked)
        wait_for("acks after the last restart", lambda: len(acked) > mark + 20)
    finally:
        stop_producing.set()
        producer_thread.join(180)
    print(f"clean stops took {[round(s, 2) for s in stops]} s")
    # Retriable errors are retried inside the client; none may reach the application.
    assert errors == []
    assert not any(e.fatal() for e in consumer_errors), consumer_errors
    try:
        wanted = {v for _, _, v in acked}
        # The group rejoins after each restart; on two cores shared with other suites that
        # once took longer than a minute.
        wait_for("the group to read every acknowledged record", lambda: wanted <= seen, 120)
    finally:
        stop_consuming.set()
        consumer_thread.join(60)
    for p in range(partitions):
        # A record acknowledged without an offset (librdkafka's "persisted, offset unknown",
        # FINDINGS.md "Client quirks") is checked by its value only.
        mine = sorted((o, v) for q, o, v in acked if q == p and o is not None)
        unknown = {v for q, o, v in acked if q == p and o is None}
        got = read_all(cluster, topic, p, len(mine) + len(unknown))
        values = [v for _, v in got]
        assert len(set(values)) == len(values), f"partition {p}: a record read twice"
        assert values == sorted(values), f"partition {p}: records out of order"
        assert dict(got).items() >= dict(mine).items(), f"partition {p}: an acknowledged record moved or is missing"
        assert unknown <= set(values), f"partition {p}: a record acknowledged without an offset is missing"


def test_node_replaced_on_an_empty_data_dir_catches_up_byte_identical(cluster):
    """docs/operations.md "Replacing a node": a node whose disk is lost comes back under its
    node id on an empty data dir; the quorum gives it the metadata, the leaders its
    partitions' data, and it rejoins every ISR with logs identical to its peers'."""
    if cluster.kind == "kafka":
        pytest.skip("Kafka 4.4's static KRaft quorum takes a voter back on an empty log dir only "
                    "after `kafka-storage format` with the cluster id and, for a lost metadata "
                    "log, KIP-853's directory ids: another procedure than Strom's")
    topic, partitions, n = "replaced", 2, 200
    create(cluster, topic, partitions, {"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": live_bootstrap(cluster), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})

    def send(tag):
        for i in range(n):
            producer.produce(topic, value=f"{tag}-{i:05d}".encode(), partition=i % partitions)
        assert producer.flush(60) == 0

    send("before")
    lost = 3
    cluster.kill9(lost)
    shutil.rmtree(cluster[lost - 1].workdir / "data")
    send("while-gone")
    cluster.restart(lost)
    for p in range(partitions):
        wait_isr(cluster, topic, p, 3)
    send("after")
    admin = AdminClient({"bootstrap.servers": cluster[lost - 1].bootstrap})
    assert topic in admin.list_topics(timeout=10).topics, "the replaced node knows the topic"
    for p in range(partitions):
        def logs():
            data = [(m.workdir / "data" / f"{topic}-{p}" / "00000000000000000000.log").read_bytes()
                    for m in cluster]
            return data if all(d == data[0] for d in data) else None
        data = wait_for(f"identical replica logs of {topic}-{p}", logs, 30)
        assert data[0].count(b"before-") == data[0].count(b"after-") == n // partitions


def test_delete_records_moves_every_replicas_log_start(cluster):
    """DeleteRecords goes to the leader and answers once the in-sync followers moved their
    log starts too (Kafka's low watermark): a new leader then starts where the old one did.
    A follower away meanwhile, whose log now ends below the leader's start, starts over
    there (Kafka's truncateFullyAndStartAt) and rejoins the ISR."""
    topic = "trimmed"
    create(cluster, topic, 1, {"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": live_bootstrap(cluster), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})

    def send(first, n):
        for i in range(first, first + n):
            producer.produce(topic, value=f"r{i:05d}".encode(), partition=0)
        assert producer.flush(60) == 0

    def delete_before(offset):
        admin = AdminClient({"bootstrap.servers": live_bootstrap(cluster)})
        f = admin.delete_records([TopicPartition(topic, 0, offset)])
        return list(f.values())[0].result(timeout=30).low_watermark

    def earliest():
        c = Consumer({"bootstrap.servers": live_bootstrap(cluster), "group.id": "trimmed-w"})
        try:
            return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
        finally:
            c.close()

    send(0, 100)
    assert delete_before(60) == 60
    leader = wait_isr(cluster, topic, 0, 3).leader
    cluster.kill9(leader)
    wait_for("a new leader", lambda: (lambda m: m if m and m.leader not in (-1, leader) else None)(
        partition_md(live_bootstrap(cluster), topic, 0)))
    # A client's metadata may still name the old leader for a moment (Kafka answers
    # NOT_LEADER_OR_FOLLOWER then, and librdkafka's watermark query does not retry).
    assert wait_for("the new leader's log start", earliest) == 60, "the new leader starts where the old one did"
    cluster.restart(leader)
    md = wait_isr(cluster, topic, 0, 3)

    away = next(i for i in (1, 2, 3) if i != md.leader)
    cluster.kill9(away)
    wait_isr(cluster, topic, 0, 2)
    send(100, 100)
    assert delete_before(150) == 150
    cluster.restart(away)
    wait_isr(cluster, topic, 0, 3)
    send(200, 10)
    data = cluster[away - 1].workdir / "data"
    logs = sorted((data / f"{topic}-0").glob("*.log"))
    # Its first segment is the leader's batch that holds offset 150, as Kafka's would be.
    assert logs and 100 <= int(logs[0].stem) <= 150, logs
    assert b"r00099" not in b"".join(f.read_bytes() for f in logs), "records it had before"
    if cluster.kind == "strom":
        # Kafka writes this file every 60 s (`log.flush.start.offset.checkpoint.interval.ms`),
        # Strom's cluster nodes every 5 s.
        checkpoint = data / "log-start-offset-checkpoint"
        wait_for("the returning follower's log start of 150 in its checkpoint", lambda: checkpoint.exists()
                 and f"{topic} 0 150" in checkpoint.read_text(), 15)
    got = read_all(cluster, topic, 0, 60)
    assert [v for _, v in got] == [f"r{i:05d}" for i in range(150, 210)]


# --- Operations with Kafka's own tools (issue 17): kafka-metadata-quorum, kafka-leader-election.


def test_metadata_quorum_tool_shows_one_leader_and_three_voters_from_every_node(cluster):
    import kafka_tools
    leaders = set()
    for n in cluster:
        r = kafka_tools.ok(kafka_tools.run("kafka-metadata-quorum", n.bootstrap, "describe", "--status"))
        status = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in r.lines())}
        leaders.add(status["LeaderId"])
        assert int(status["LeaderEpoch"]) >= 1 and int(status["HighWatermark"]) > 0, status
        voters = json.loads(status["CurrentVoters"])
        assert sorted(v["id"] for v in voters) == [1, 2, 3], status
        assert all(v["endpoints"] for v in voters), status
    assert len(leaders) == 1 and leaders <= {"1", "2", "3"}, leaders
    r = kafka_tools.ok(kafka_tools.run("kafka-metadata-quorum", cluster[0].bootstrap, "describe", "--replication"))
    rows = [line.split() for line in r.lines()[1:]]
    assert sorted(row[0] for row in rows) == ["1", "2", "3"], r.out
    assert [row[-1] for row in rows].count("Leader") == 1, r.out
    # Every follower has (nearly) all the leader has: a lag of a few entries at most.
    lags = [int(row[3]) for row in rows]
    assert max(lags) < 50, r.out


def test_leader_election_tool_gives_partitions_back_to_their_preferred_replica(cluster):
    import kafka_tools
    topic = "elected"
    create(cluster, topic, 3, {"min.insync.replicas": "2"})
    preferred = partition_md(cluster[0].bootstrap, topic, 0).replicas[0]
    node = cluster[preferred - 1]
    node.stop()  # a clean stop: its partitions move to the next in-sync replica
    cluster.restart(preferred)
    for p in range(3):
        wait_isr(cluster, topic, p, 3, 120)
    md = partition_md(live_bootstrap(cluster), topic, 0)
    assert md.leader != preferred, "the restarted node leads nothing yet"
    r = kafka_tools.ok(kafka_tools.run("kafka-leader-election", live_bootstrap(cluster), "--election-type",
                                       "preferred", "--topic", topic, "--partition", "0"))
    assert r.lines() == [f"Successfully completed leader election (PREFERRED) for partitions {topic}-0"], r.out
    wait_for(f"{topic}-0 led by {preferred} again", lambda: partition_md(live_bootstrap(cluster), topic, 0).leader
             == preferred, 15)
    r = kafka_tools.ok(kafka_tools.run("kafka-leader-election", live_bootstrap(cluster), "--election-type",
                                       "preferred", "--topic", topic, "--partition", "0"))
    assert r.lines() == [f"Valid replica already elected for partitions {topic}-0"], r.out
    # The others back too, with --all-topic-partitions: only those that needed it are named.
    r = kafka_tools.ok(kafka_tools.run("kafka-leader-election", live_bootstrap(cluster), "--election-type",
                                       "preferred", "--all-topic-partitions"))
    for p in range(3):
        md = wait_for(f"{topic}-{p} led by its preferred replica",
                      lambda p=p: (lambda m: m if m and m.leader == m.replicas[0] else None)(
                          partition_md(live_bootstrap(cluster), topic, p)), 15)
        assert md.leader == md.replicas[0]


def lose_the_last_in_sync_replica(cluster, topic, configs):
    """An RF=2 topic whose follower dies (the ISR shrinks to the leader), then its leader, and
    then the follower comes back: no in-sync replica is live. (With two of three nodes down
    the metadata quorum waits; the follower's return restores it.) Returns (dead leader,
    live out-of-sync follower)."""
    admin = AdminClient({"bootstrap.servers": live_bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=2, config=configs)])[topic] \
        .result(timeout=30)
    md = wait_isr(cluster, topic, 0, 2)
    leader, follower = md.leader, next(r for r in md.replicas if r != md.leader)
    cluster.kill9(follower)
    wait_isr(cluster, topic, 0, 1)
    producer = Producer({"bootstrap.servers": live_bootstrap(cluster), "acks": "1"})
    producer.produce(topic, value=b"only-on-the-leader")
    assert producer.flush(30) == 0
    cluster.kill9(leader)
    cluster.restart(follower)
    return leader, follower


def test_unclean_election_gives_a_leaderless_partition_a_live_out_of_sync_replica(cluster):
    """A clean cluster keeps such a partition without a leader;
    `kafka-leader-election --election-type unclean`, or the topic's
    `unclean.leader.election.enable`, makes the live out-of-sync replica its leader."""
    import kafka_tools

    def led_by(topic, leader):
        return lambda: (lambda m: m if m is not None and m.leader == leader else None)(
            partition_md(live_bootstrap(cluster), topic, 0))

    topic = "unclean-asked"
    leader, follower = lose_the_last_in_sync_replica(cluster, topic, {})
    wait_for(f"{topic} without a leader", led_by(topic, -1), 30)
    time.sleep(2)
    assert partition_md(live_bootstrap(cluster), topic, 0).leader == -1, "a clean cluster waits"
    r = kafka_tools.ok(kafka_tools.run("kafka-leader-election", live_bootstrap(cluster), "--election-type",
                                       "unclean", "--topic", topic, "--partition", "0"))
    assert r.lines() == [f"Successfully completed leader election (UNCLEAN) for partitions {topic}-0"], r.out
    md = wait_for(f"{topic} led by the out-of-sync replica", led_by(topic, follower), 30)
    assert md.isrs == [follower]
    cluster.restart(leader)
    wait_isr(cluster, topic, 0, 2, 120)

    topic = "unclean-allowed"
    leader, follower = lose_the_last_in_sync_replica(cluster, topic, {"unclean.leader.election.enable": "true"})
    md = wait_for(f"{topic} led by the out-of-sync replica on its own", led_by(topic, follower), 30)
    assert md.isrs == [follower]
    cluster.restart(leader)
    wait_isr(cluster, topic, 0, 2, 120)


def test_create_partitions_replicates_the_new_ones_and_delete_topics_empties_every_replica(cluster):
    """CreatePartitions on an RF=3 topic gives the new partitions three in-sync replicas that
    take acks=all writes; DeleteTopics then removes the topic's partition directories from
    every node (Kafka renames them `<topic>-<p>.<id>-delete` and removes them after
    `log.segment.delete.delay.ms`: either way no live directory stays)."""
    topic = "grown-then-deleted"
    create(cluster, topic, 2)
    admin = AdminClient({"bootstrap.servers": live_bootstrap(cluster)})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(timeout=30)
    for p in (2, 3):
        md = wait_isr(cluster, topic, p, 3)
        assert sorted(md.replicas) == [1, 2, 3], md.replicas
    producer = Producer({"bootstrap.servers": live_bootstrap(cluster), "acks": "all", "enable.idempotence": True})
    for p in range(4):
        for i in range(10):
            producer.produce(topic, value=f"p{p}-{i}".encode(), partition=p)
    assert producer.flush(60) == 0
    for p in range(4):
        assert [v for _, v in read_all(cluster, topic, p, 10)] == [f"p{p}-{i}" for i in range(10)]

    def live_dirs():
        return sorted(str(d) for n in cluster for d in (n.workdir / "data").glob(f"{topic}-*")
                      if re.fullmatch(rf"{re.escape(topic)}-\d+", d.name))
    assert len(live_dirs()) == 12, live_dirs()
    admin.delete_topics([topic])[topic].result(timeout=30)
    wait_for("no live partition directory of the deleted topic on any node", lambda: not live_dirs(), 60)
    wait_for("the topic gone from every node's metadata", lambda: all(
        topic not in AdminClient({"bootstrap.servers": n.bootstrap}).list_topics(timeout=5).topics for n in cluster))


# --- Adding a node (issue 17): a broker-only node, Kafka's process.roles=broker, which
# Strom runs as an observer of the metadata quorum (docs/design.md "Cluster").


def test_a_broker_only_node_joins_hosts_replicas_and_observes_the_quorum(cluster):
    """A fourth node outside the voters joins as a broker: every node's Metadata lists it,
    Kafka's quorum tool shows it as an observer beside the same three voters, a topic created
    afterwards places replicas on it, and it comes back after a kill -9 on its own data."""
    import kafka_tools
    n4 = cluster.add_broker_only_node()
    wait_for("four brokers in every node's metadata", lambda: all(
        len(AdminClient({"bootstrap.servers": n.bootstrap}).list_topics(timeout=5).brokers) == 4
        for n in cluster), 60)

    def observer_listed():
        r = kafka_tools.ok(kafka_tools.run("kafka-metadata-quorum", n4.bootstrap, "describe", "--status"))
        status = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in r.lines())}
        voters = sorted(v["id"] for v in json.loads(status["CurrentVoters"]))
        observers = [o["id"] for o in json.loads(status["CurrentObservers"])]
        assert voters == [1, 2, 3], status
        return 4 in observers
    wait_for("node 4 among the quorum's observers", observer_listed, 60)
    r = kafka_tools.ok(kafka_tools.run("kafka-metadata-quorum", n4.bootstrap, "describe", "--replication"))
    rows = {row[0]: row[-1] for row in (line.split() for line in r.lines()[1:])}
    assert rows.get("4") == "Observer", r.out

    topic = "four-nodes"
    admin = AdminClient({"bootstrap.servers": n4.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=3)])[topic].result(timeout=30)
    mds = [wait_isr(cluster, topic, p, 3) for p in range(4)]
    on_4 = [p for p, md in enumerate(mds) if 4 in md.replicas]
    assert len(on_4) == 3, [md.replicas for md in mds]
    producer = Producer({"bootstrap.servers": live_bootstrap(cluster), "acks": "all", "enable.idempotence": True})
    for p in on_4:
        for i in range(20):
            producer.produce(topic, value=f"p{p}-{i:02d}".encode(), partition=p)
    assert producer.flush(60) == 0
    cluster.kill9(4)
    cluster.restart(4)
    for p in on_4:
        wait_isr(cluster, topic, p, 3, 120)
        got = read_all(cluster, topic, p, 20)
        assert [v for _, v in got] == [f"p{p}-{i:02d}" for i in range(20)]
        log = cluster[3].workdir / "data" / f"{topic}-{p}" / "00000000000000000000.log"
        assert log.read_bytes().count(b"p%d-" % p) == 20, "node 4 holds a full replica"


def test_quorum_tool_promotes_an_observer_to_a_voter_and_removes_a_voter(cluster):
    """KIP-853 with Kafka's tool: `add-controller` makes the broker-only node 4 a voter,
    `remove-controller` takes the quorum's leader out of the voters (it steps down and stays
    a broker, an observer) and back in. Strom's voters are what its metadata log says;
    `controller.quorum.voters` only seeds the quorum. Kafka's static quorum (kraft.version 0)
    refuses both (FINDINGS)."""
    import kafka_tools
    if len(cluster) < 4:
        cluster.add_broker_only_node()

    def meta(node_id):
        text = (cluster[node_id - 1].workdir / "data" / "meta.properties").read_text()
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))

    def controller_config(node_id, raft_port):
        path = cluster.root / f"node-{node_id}-controller.properties"
        path.write_text(f"process.roles=broker,controller\nnode.id={node_id}\nlog.dirs={cluster[node_id - 1].workdir / 'data'}\n"
                        f"controller.listener.names=CONTROLLER\nlisteners=CONTROLLER://127.0.0.1:{raft_port}\n")
        return str(path)

    def quorum():
        """(voters, observers); ([], []) while no leader answers (one that removed itself
        steps down, and the others elect a new one)."""
        r = kafka_tools.run("kafka-metadata-quorum", cluster[0].bootstrap, "describe", "--status")
        if r.rc != 0:
            return [], []
        status = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in r.lines())}
        quorum.leader = int(status["LeaderId"])
        return (sorted(v["id"] for v in json.loads(status["CurrentVoters"])),
                sorted(o["id"] for o in json.loads(status["CurrentObservers"])))

    def add(node_id, raft_port):
        return kafka_tools.run("kafka-metadata-quorum", cluster[0].bootstrap, "--command-config",
                               controller_config(node_id, raft_port), "add-controller")

    def remove(node_id):
        return kafka_tools.run("kafka-metadata-quorum", cluster[0].bootstrap, "remove-controller",
                               "--controller-id", str(node_id), "--controller-directory-id",
                               meta(node_id)["directory.id"])

    def raft_port(node_id):
        if node_id == 4:
            return cluster[3].extra["raft_port"]
        return int(re.search(rf"{node_id}@127\.0\.0\.1:(\d+)", cluster.voters).group(1))

    if cluster.kind == "kafka":
        r = add(4, raft_port(4))
        assert r.rc != 0 and "UnsupportedVersion" in r.out + r.err, r
        assert quorum()[0] == [1, 2, 3]
        return

    r = kafka_tools.ok(add(4, raft_port(4)))
    assert "Added controller 4" in r.out, r.out
    assert wait_for("node 4 a voter", lambda: quorum()[0] == [1, 2, 3, 4], 30)
    # The leader removes itself: the hard case (openraft would let a learner go on leading).
    gone = quorum.leader
    rest = sorted({1, 2, 3, 4} - {gone})
    r = kafka_tools.ok(remove(gone))
    assert "Removed" in r.out, r.out
    voters, observers = wait_for(f"node {gone} out of the voters, another leader",
                                 lambda: (lambda q: q if q[0] == rest and quorum.leader in rest else None)(quorum()), 30)
    assert wait_for(f"node {gone} an observer", lambda: gone in quorum()[1], 30)
    # Not a voter, not an observer, a voter already: Kafka's errors.
    r = remove(gone)
    assert r.rc != 0 and "VoterNotFoundException" in r.out + r.err, r
    r = add(rest[0], raft_port(rest[0]))
    assert r.rc != 0 and "DuplicateVoterException" in r.out + r.err, r
    # The other three take metadata writes; the removed node, a broker, still hosts replicas.
    topic = "after-voter-changes"
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=4)])[topic].result(timeout=30)
    for p in range(4):
        wait_isr(cluster, topic, p, 4)
    # It restarts on its data as an observer (its log says so, whatever its config's voters say).
    cluster.kill9(gone)
    cluster.restart(gone)
    assert wait_for(f"node {gone} back as an observer", lambda: gone in quorum()[1], 30)
    kafka_tools.ok(add(gone, raft_port(gone)))
    assert wait_for(f"node {gone} a voter again", lambda: quorum()[0] == [1, 2, 3, 4], 30)
