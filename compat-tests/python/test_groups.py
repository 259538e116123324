"""Consumer groups with real clients (classic protocol): partition ownership across members,
rebalance when a member leaves, committed offsets (with metadata) that a restarted consumer
resumes from — also across a broker restart and a kill -9 — static membership (KIP-345) and
the group admin APIs.

Clients: confluent-kafka (librdkafka) with `group.protocol=classic` and with
`group.protocol=consumer` (KIP-848), kafka-python, aiokafka.
Every wait is bounded. Brokers run with Kafka's default `group.initial.rebalance.delay.ms`
(3 s), so a first rebalance takes a few seconds on both.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

import admin
import clients

# "confluent-consumer" is librdkafka with group.protocol=consumer (KIP-848, server-side
# assignment); the others use the classic protocol.
CLIENTS = ["confluent", "confluent-consumer", "kafka-python", "aiokafka"]
PARTITIONS = 6
MEMBERS = 3
SESSION_MS = 10000
WAIT_S = 90


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions)
    assert p.flush(30) == 0, "records left unsent"


def produce_slowly(bootstrap: str, topic: str, n: int) -> None:
    """`n` more records (offsets continue per partition), spread over about 10 s."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=f"late{i}".encode(), value=b"v", partition=i % PARTITIONS)
        if i % 60 == 59:
            p.flush(30)
            time.sleep(0.5)
    assert p.flush(30) == 0, "records left unsent"


class Member:
    """One group consumer of any client, driven synchronously: `poll` returns
    [(partition, offset)], `assignment` the partitions it owns now."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, events: list | None = None, **extra):
        self.topic = topic
        self.loop = None
        if client == "confluent-consumer":
            from confluent_kafka import Consumer

            self.client = "confluent"
            conf = {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
            conf.update(extra)
            self.c = Consumer(conf)
            if events is None:
                self.c.subscribe([topic])
            else:
                self.c.subscribe([topic], on_assign=lambda c, ps: events.append("assign"),
                                 on_revoke=lambda c, ps: events.append("revoke"))
            return
        self.client = client
        if client == "confluent":
            from confluent_kafka import Consumer

            conf = {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "classic",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 500,
            }
            conf.update(extra)
            self.c = Consumer(conf)
            if events is None:
                self.c.subscribe([topic])
            else:
                self.c.subscribe([topic], on_assign=lambda c, ps: events.append("assign"),
                                 on_revoke=lambda c, ps: events.append("revoke"))
        elif client == "kafka-python":
            from kafka import KafkaConsumer

            self.c = KafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=500,
                **extra,
            )
        elif client == "aiokafka":
            from aiokafka import AIOKafkaConsumer

            self.loop = asyncio.new_event_loop()

            async def make():
                c = AIOKafkaConsumer(
                    topic,
                    bootstrap_servers=bootstrap,
                    group_id=group,
                    auto_offset_reset="earliest",
                    enable_auto_commit=False,
                    session_timeout_ms=SESSION_MS,
                    heartbeat_interval_ms=500,
                    **extra,
                )
                await c.start()
                return c

            self.c = self.loop.run_until_complete(make())
        else:
            raise ValueError(client)

    def poll(self, timeout_s: float = 0.2) -> list[tuple[int, int]]:
        if self.client == "confluent":
            out = []
            for m in self.c.consume(num_messages=500, timeout=timeout_s):
                if m.error():
                    continue
                out.append((m.partition(), m.offset()))
            return out
        if self.client == "kafka-python":
            got = self.c.poll(timeout_ms=int(timeout_s * 1000))
            return [(tp.partition, m.offset) for tp, ms in got.items() for m in ms]
        got = self.loop.run_until_complete(self.c.getmany(timeout_ms=int(timeout_s * 1000)))
        return [(tp.partition, m.offset) for tp, ms in got.items() for m in ms]

    def assignment(self) -> set[int]:
        if self.client == "confluent":
            return {tp.partition for tp in self.c.assignment()}
        return {tp.partition for tp in self.c.assignment()}

    def commit(self, partition: int, offset: int, metadata: str) -> None:
        if self.client == "confluent":
            from confluent_kafka import TopicPartition

            self.c.commit(offsets=[TopicPartition(self.topic, partition, offset, metadata=metadata)],
                          asynchronous=False)
        elif self.client == "kafka-python":
            from kafka import TopicPartition
            from kafka.structs import OffsetAndMetadata

            self.c.commit({TopicPartition(self.topic, partition): OffsetAndMetadata(offset, metadata, -1)})
        else:
            from aiokafka import TopicPartition

            self.loop.run_until_complete(self.c.commit({TopicPartition(self.topic, partition): (offset, metadata)}))

    def committed(self, partition: int) -> tuple[int, str]:
        if self.client == "confluent":
            from confluent_kafka import TopicPartition

            (tp,) = self.c.committed([TopicPartition(self.topic, partition)], timeout=30)
            return tp.offset, tp.metadata
        if self.client == "kafka-python":
            from kafka import TopicPartition

            tp = TopicPartition(self.topic, partition)
            off = self.c.committed(tp, metadata=True)
            return off.offset, off.metadata
        from aiokafka import TopicPartition

        tp = TopicPartition(self.topic, partition)
        off = self.loop.run_until_complete(self.c.committed(tp))
        # aiokafka's committed() gives the offset only; metadata is checked with the others.
        return off, None

    def close(self) -> None:
        if self.client == "aiokafka":
            self.loop.run_until_complete(self.c.stop())
            self.loop.close()
        else:
            self.c.close()


class Runner(threading.Thread):
    """A member polling in its own thread, as applications do: kafka-python drops a JoinGroup
    answer that arrives between two short polls and joins again, so round-robin polling from
    one thread would keep a group rebalancing (on Kafka too)."""

    def __init__(self, make):
        super().__init__(daemon=True)
        self.make = make
        self.lock = threading.Lock()
        self.owned: set[int] = set()
        self.seen: set[tuple[int, int]] = set()
        self.error: BaseException | None = None
        self.stopping = threading.Event()
        self.ready = threading.Event()

    def run(self):
        try:
            m = self.make()
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            self.error = e
            self.ready.set()
            return
        self.ready.set()
        try:
            while not self.stopping.is_set():
                got = m.poll(0.5)
                owned = m.assignment()
                with self.lock:
                    self.seen.update(got)
                    self.owned = owned
        except BaseException as e:  # noqa: BLE001
            self.error = e
        finally:
            m.close()

    def assignment(self) -> set[int]:
        with self.lock:
            return set(self.owned)

    def consumed(self) -> set[tuple[int, int]]:
        with self.lock:
            return set(self.seen)

    def stop(self):
        self.stopping.set()
        self.join(timeout=60)
        assert not self.is_alive(), "consumer did not close within 60s"


def until_owned(members: list, deadline_s: float = WAIT_S, sizes: list[int] | None = None) -> list[set[int]]:
    """Waits until each member owns at least one partition and together they own each
    partition exactly once (and, given `sizes`, the sorted assignment sizes are those);
    returns their assignments. A KIP-848 group gets there in steps (a partition moves only
    once its owner has revoked it), so an exclusive cover can be uneven for a moment."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        for m in members:
            if getattr(m, "error", None):
                raise AssertionError(f"consumer failed: {m.error!r}")
        last = [m.assignment() for m in members]
        owned = [p for a in last for p in a]
        if all(last) and sorted(owned) == list(range(PARTITIONS)):
            if sizes is None or sorted(len(a) for a in last) == sizes:
                return last
        time.sleep(0.2)
    want = f" of sizes {sizes}" if sizes else ""
    raise AssertionError(f"no exclusive assignment of every partition{want} within {deadline_s}s: {last}")


@pytest.mark.parametrize("client", CLIENTS)
def test_groups_three_members_own_each_partition_once_and_rebalance_on_leave(broker, client):
    topic = clients.unique_topic("groups")
    assert admin.create_topic("confluent", broker.bootstrap, topic, PARTITIONS) == 0
    total = 1200
    produce(broker.bootstrap, topic, total // 2, PARTITIONS)
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [Runner(lambda: Member(client, broker.bootstrap, group, topic)) for _ in range(MEMBERS)]
    for m in members:
        m.start()
    # The second half is written while the group forms and rebalances.
    producer = threading.Thread(target=produce_slowly, args=(broker.bootstrap, topic, total // 2), daemon=True)
    producer.start()
    try:
        until_owned(members, sizes=[2, 2, 2])
        leaving = members.pop()
        leaving.stop()
        seen = leaving.consumed()
        until_owned(members)
        producer.join(timeout=WAIT_S)
        assert not producer.is_alive(), "producer did not finish"
        per_partition = total // PARTITIONS
        want = {(p, o) for p in range(PARTITIONS) for o in range(per_partition)}

        def all_consumed():
            got = seen.union(*(m.consumed() for m in members))
            return want <= got

        admin.wait_for(all_consumed, "every record consumed by the group", timeout_s=WAIT_S)
    finally:
        for m in members:
            m.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_groups_commit_then_new_consumer_resumes_from_committed_offset(broker, client):
    topic = clients.unique_topic("groups-commit")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 1) == 0
    produce(broker.bootstrap, topic, 100, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    m = Member(client, broker.bootstrap, group, topic)
    try:
        admin.wait_for(lambda: m.poll(5.0) and True, "first records", timeout_s=WAIT_S)
        m.commit(0, 40, "meta-40")
        offset, metadata = m.committed(0)
        assert offset == 40
        assert metadata in ("meta-40", None)
    finally:
        m.close()
    m = Member(client, broker.bootstrap, group, topic)
    try:
        got = admin.wait_for(lambda: m.poll(5.0), "records after rejoin", timeout_s=WAIT_S)
        assert min(o for _, o in got) == 40, got[:5]
    finally:
        m.close()


def _committed_confluent(bootstrap: str, group: str, topic: str) -> tuple[int, str]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = c.committed([TopicPartition(topic, 0)], timeout=30)
        return tp.offset, tp.metadata
    finally:
        c.close()


def test_groups_deleted_topic_takes_its_committed_offsets_with_it(broker):
    """Kafka deletes a deleted topic's committed offsets from every group
    (`onPartitionsDeleted`): the topic created again under the same name starts with none,
    instead of at an offset of its former life."""
    from confluent_kafka import Consumer, TopicPartition

    topic = clients.unique_topic("groups-deleted")
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert admin.create_topic("confluent", broker.bootstrap, topic, 1) == 0
    produce(broker.bootstrap, topic, 10, 1)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = c.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
        assert tp.error is None, tp.error
    finally:
        c.close()
    assert _committed_confluent(broker.bootstrap, group, topic)[0] == 7
    assert admin.delete_topic("confluent", broker.bootstrap, topic) == 0
    # Kafka removes a deleted topic in the background: creating it again fails for a moment.
    admin.wait_for(lambda: admin.create_topic("confluent", broker.bootstrap, topic, 1) == 0,
                   "the topic created again", timeout_s=WAIT_S, interval_s=1.0)
    # OFFSET_INVALID (-1001): no committed offset (Kafka tombstones them asynchronously).
    admin.wait_for(lambda: _committed_confluent(broker.bootstrap, group, topic)[0] == -1001,
                   "no committed offset for the new topic", timeout_s=WAIT_S, interval_s=1.0)


def test_groups_committed_offsets_survive_broker_restart_and_kill9():
    from confluent_kafka import Consumer, TopicPartition

    from test_durability import Restartable

    r = Restartable()
    try:
        r.start()
        topic = clients.unique_topic("groups-durable")
        assert admin.create_topic("confluent", r.bootstrap, topic, 1) == 0
        group = "durable-group"
        c = Consumer({"bootstrap.servers": r.bootstrap, "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(topic, 0, 17, metadata="m17")], asynchronous=False)
        c.close()
        assert r.stop() == 0
        r.start()
        assert admin.wait_for(lambda: _committed_confluent(r.bootstrap, group, topic), "commit after restart",
                              timeout_s=WAIT_S) == (17, "m17")
        c = Consumer({"bootstrap.servers": r.bootstrap, "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(topic, 0, 23, metadata="m23")], asynchronous=False)
        c.close()
        r.kill9()
        r.start()
        assert _committed_confluent(r.bootstrap, group, topic) == (23, "m23")
    finally:
        r.cleanup()


@pytest.mark.parametrize("client", ["confluent", "confluent-consumer"])
def test_groups_static_member_restart_causes_no_rebalance(broker, client):
    topic = clients.unique_topic("groups-static")
    assert admin.create_topic("confluent", broker.bootstrap, topic, PARTITIONS) == 0
    group = f"g-{uuid.uuid4().hex[:8]}"
    events: list[str] = []
    static_conf = {"group.instance.id": "static-1"}
    dynamic = Runner(lambda: Member(client, broker.bootstrap, group, topic, events=events))
    static = Runner(lambda: Member(client, broker.bootstrap, group, topic, **static_conf))
    dynamic.start()
    static.start()
    try:
        before = until_owned([dynamic, static])
        time.sleep(2)
        events.clear()
        # A static member sends no LeaveGroup when it closes; a new instance with the same
        # group.instance.id takes its place within the session timeout.
        static.stop()
        static = Runner(lambda: Member(client, broker.bootstrap, group, topic, **static_conf))
        static.start()
        after = until_owned([dynamic, static])
        time.sleep(5)
        assert after == before
        assert events == [], f"the dynamic member saw a rebalance: {events}"
    finally:
        dynamic.stop()
        static.stop()


def test_groups_admin_list_describe_delete(broker):
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
    from confluent_kafka.admin import AdminClient

    topic = clients.unique_topic("groups-admin")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 2) == 0
    group = f"g-{uuid.uuid4().hex[:8]}"
    m = Member("confluent", broker.bootstrap, group, topic, **{"client.id": "admin-test"})
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        until_owned_partial(m)
        listed = a.list_consumer_groups(request_timeout=30).result()
        assert group in {g.group_id for g in listed.valid}
        d = a.describe_consumer_groups([group], request_timeout=30)[group].result()
        assert str(d.state).upper().endswith("STABLE")
        assert len(d.members) == 1 and d.members[0].client_id == "admin-test"
        assert {tp.partition for tp in d.members[0].assignment.topic_partitions} == {0, 1}
        with pytest.raises(KafkaException) as e:
            a.delete_consumer_groups([group], request_timeout=30)[group].result()
        assert e.value.args[0].code() == 68  # NON_EMPTY_GROUP
        from confluent_kafka import TopicPartition

        m.c.commit(offsets=[TopicPartition(topic, 1, 5)], asynchronous=False)
    finally:
        m.close()
    offsets = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=30)[group].result()
    assert {(tp.partition, tp.offset) for tp in offsets.topic_partitions} >= {(1, 5)}
    a.delete_consumer_groups([group], request_timeout=30)[group].result()
    listed = a.list_consumer_groups(request_timeout=30).result()
    assert group not in {g.group_id for g in listed.valid}


def until_owned_partial(m: Member) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        m.poll(0.1)
        if m.assignment():
            return
    raise AssertionError("never assigned")


KILLED_CONSUMER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "classic",
              "session.timeout.ms": int(sys.argv[4]), "heartbeat.interval.ms": 500,
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe([sys.argv[3]])
deadline = time.monotonic() + 170
while time.monotonic() < deadline:
    c.poll(0.2)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_groups_killed_member_partitions_reassigned_within_session_timeout(broker):
    import subprocess
    import sys

    topic = clients.unique_topic("groups-kill")
    assert admin.create_topic("confluent", broker.bootstrap, topic, PARTITIONS) == 0
    group = f"g-{uuid.uuid4().hex[:8]}"
    survivor = Runner(lambda: Member("confluent", broker.bootstrap, group, topic))
    survivor.start()
    victim = subprocess.Popen(
        [sys.executable, "-c", KILLED_CONSUMER, broker.bootstrap, group, topic, str(SESSION_MS)],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )
    try:
        admin.wait_for(lambda: 0 < len(survivor.assignment()) < PARTITIONS,
                       "the partitions split between the two members", timeout_s=WAIT_S)
        victim.kill()  # SIGKILL: no LeaveGroup, only the session timeout can tell
        victim.wait(timeout=20)
        killed_at = time.monotonic()
        admin.wait_for(lambda: survivor.assignment() == set(range(PARTITIONS)),
                       "the survivor to own every partition", timeout_s=WAIT_S)
        # Session timeout, then a rebalance bounded by the survivor's next heartbeat/join.
        assert time.monotonic() - killed_at < SESSION_MS / 1000 + 10
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(timeout=20)
        survivor.stop()


def test_groups_kip848_regex_subscription_gets_matching_topics(broker):
    from confluent_kafka import Consumer

    prefix = f"rx{uuid.uuid4().hex[:6]}"
    for name, parts in [(f"{prefix}-a", 2), (f"{prefix}-b", 1), (f"other-{prefix}", 1)]:
        assert admin.create_topic("confluent", broker.bootstrap, name, parts) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{prefix}",
                  "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        c.subscribe([f"^{prefix}-.*"])

        def assigned():
            c.poll(0.5)
            return {(tp.topic, tp.partition) for tp in c.assignment()}

        want = {(f"{prefix}-a", 0), (f"{prefix}-a", 1), (f"{prefix}-b", 0)}
        admin.wait_for(lambda: assigned() == want, "the regex's topics assigned", timeout_s=WAIT_S)
    finally:
        c.close()


def test_groups_kip848_regex_resolves_internal_topics_too(broker):
    """Kafka's coordinator resolves a KIP-848 regex against every topic it has, internal ones
    included (franz-go's Test848RegexBrokerResolves expects __consumer_offsets assigned)."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-internal-{uuid.uuid4().hex[:6]}",
                  "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["^__consumer_offsets$"])

        def topics():
            c.poll(0.5)
            return {tp.topic for tp in c.assignment()}

        admin.wait_for(lambda: topics() == {"__consumer_offsets"}, "__consumer_offsets assigned",
                       timeout_s=WAIT_S)
    finally:
        c.close()


def test_groups_kip848_member_keeps_assignment_across_broker_restart():
    """Strom only: the KIP-848 group (epochs, members, assignments) is durable, so a member
    that heartbeats after a broker restart keeps its partitions instead of being fenced."""
    from test_durability import Restartable

    r = Restartable()
    try:
        r.start()
        topic = clients.unique_topic("groups-848-restart")
        assert admin.create_topic("confluent", r.bootstrap, topic, 2) == 0
        events: list[str] = []
        m = Runner(lambda: Member("confluent-consumer", r.bootstrap, "g848", topic, events=events))
        m.start()
        try:
            admin.wait_for(lambda: m.assignment() == {0, 1}, "assignment", timeout_s=WAIT_S)
            time.sleep(2)
            events.clear()
            assert r.stop() == 0
            r.start()
            # Several heartbeat intervals (5 s) against the restarted broker.
            time.sleep(15)
            assert m.error is None, m.error
            assert m.assignment() == {0, 1}
            assert "revoke" not in events, f"partitions were lost across the restart: {events}"
        finally:
            m.stop()
    finally:
        r.cleanup()


class RawClient:
    """Hand-encoded non-flexible requests, to compare error codes byte for byte where client
    libraries would retry or hide them."""

    def __init__(self, bootstrap: str):
        import socket

        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.corr = 0

    @staticmethod
    def s(v: str | None) -> bytes:
        import struct

        if v is None:
            return struct.pack(">h", -1)
        b = v.encode()
        return struct.pack(">h", len(b)) + b

    def call(self, key: int, version: int, body: bytes) -> bytes:
        import struct

        self.corr += 1
        frame = struct.pack(">hhi", key, version, self.corr) + self.s("raw-probe") + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", self._read(4))[0]
        resp = self._read(size)
        assert struct.unpack(">i", resp[:4])[0] == self.corr
        return resp[4:]

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "connection closed"
            out += chunk
        return out

    def close(self):
        self.sock.close()


def test_groups_error_codes_of_bad_group_requests_match_kafka(broker):
    import struct

    c = RawClient(broker.bootstrap)
    i16 = lambda b, at=0: struct.unpack(">h", b[at:at + 2])[0]  # noqa: E731
    s = RawClient.s
    group = f"raw-{uuid.uuid4().hex[:8]}"
    try:
        # FindCoordinator v0 until the coordinator is ready (it creates __consumer_offsets).
        admin.wait_for(lambda: i16(c.call(10, 0, s(group))) == 0, "coordinator", timeout_s=WAIT_S)
        # Kafka answers NOT_COORDINATOR / LOAD_IN_PROGRESS while it loads a fresh
        # __consumer_offsets partition: wait that out first.
        hb = s(group) + struct.pack(">i", 1) + s("ghost")
        admin.wait_for(lambda: i16(c.call(12, 0, hb)) not in (14, 15, 16), "coordinator loaded",
                       timeout_s=WAIT_S)
        # Heartbeat v0 / LeaveGroup v0 / SyncGroup v0 on a group nobody joined.
        assert i16(c.call(12, 0, hb)) == 25
        assert i16(c.call(13, 0, s(group) + s("ghost"))) == 25
        assert i16(c.call(14, 0, s(group) + struct.pack(">i", 1) + s("ghost") + struct.pack(">i", 0))) == 25
        # JoinGroup v0 with a session timeout under group.min.session.timeout.ms (6 s).
        join = s(group) + struct.pack(">i", 10) + s("") + s("consumer") + struct.pack(">i", 1) + s("range") + struct.pack(">i", 0)
        assert i16(c.call(11, 0, join)) == 26
        # JoinGroup v0 with an empty protocol type: INCONSISTENT_GROUP_PROTOCOL.
        join = s(group) + struct.pack(">i", 10000) + s("") + s("") + struct.pack(">i", 0)
        assert i16(c.call(11, 0, join)) == 23
        # DescribeGroups v0 of a group never used: no error, state Dead. (A fresh name: after
        # the rejected joins above, Kafka 4.4 sometimes reports that group Empty instead —
        # the same side effect as the DeleteGroups note below.)
        unknown = f"raw-{uuid.uuid4().hex[:8]}"
        r = c.call(15, 0, struct.pack(">i", 1) + s(unknown))
        assert struct.unpack(">i", r[:4])[0] == 1 and i16(r, 4) == 0
        gid_len = i16(r, 6)
        state_at = 8 + gid_len
        state_len = i16(r, state_at)
        assert r[state_at + 2:state_at + 2 + state_len] == b"Dead"
        # DeleteGroups v0 of an unknown group: GROUP_ID_NOT_FOUND.
        # DeleteGroups v0 of a group never used: GROUP_ID_NOT_FOUND. (After the rejected
        # joins above Kafka answers 0 here: see FINDINGS.md.)
        fresh = f"raw-{uuid.uuid4().hex[:8]}"
        r = c.call(42, 0, struct.pack(">i", 1) + s(fresh))
        assert i16(r, 8 + 2 + len(fresh)) == 69, r.hex()
    finally:
        c.close()


def test_groups_kip848_admin_describe_and_list(broker):
    from confluent_kafka.admin import AdminClient

    topic = clients.unique_topic("groups-848-admin")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 3) == 0
    group = f"g-{uuid.uuid4().hex[:8]}"
    m = Runner(lambda: Member("confluent-consumer", broker.bootstrap, group, topic, **{"client.id": "kip848-admin"}))
    m.start()
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        admin.wait_for(lambda: m.assignment() == {0, 1, 2}, "assignment", timeout_s=WAIT_S)
        d = a.describe_consumer_groups([group], request_timeout=30)[group].result()
        assert str(d.type).upper().endswith("CONSUMER"), d.type
        assert str(d.state).upper().endswith("STABLE"), d.state
        assert len(d.members) == 1 and d.members[0].client_id == "kip848-admin"
        assert {tp.partition for tp in d.members[0].assignment.topic_partitions} == {0, 1, 2}
        listed = a.list_consumer_groups(request_timeout=30).result()
        (g,) = [g for g in listed.valid if g.group_id == group]
        assert str(g.type).upper().endswith("CONSUMER"), g.type
    finally:
        m.stop()
