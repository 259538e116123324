"""Strom only (issue 20, docs/ai-features.md): dedup by message id, per-record expiry,
embedding validation at produce and priority lanes, with unchanged Kafka clients (confluent-kafka and
kafka-python) against a real `strom serve`. Apache Kafka has none of these topic configs,
so nothing here runs against it. Dedup also across a clean restart and a kill -9.
"""

from __future__ import annotations

import math
import os
import re
import struct
import time
import urllib.request

import pytest

import admin
from clients import unique_topic
from test_durability import Restartable

INVALID_RECORD = 87
INVALID_CONFIG = 40

pytestmark = pytest.mark.skipif(
    "strom" not in [b.strip() for b in os.environ.get("STROM_COMPAT_BROKERS", "strom,kafka").split(",")],
    reason="Strom-only features (no Kafka equivalent)",
)


@pytest.fixture
def strom(strom_broker):
    return strom_broker


def metric(metrics_port: int, name: str, topic: str) -> float:
    """Sum over shards of `name{topic=...}` on the admin port's /metrics."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    total = 0.0
    for line in body.splitlines():
        if line.startswith(name + "{") and f'topic="{topic}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def confluent_send(bootstrap: str, topic: str, msgs, idempotence=False, linger_ms=0, producer=None):
    """Produces (value, headers) pairs; returns [(offset, error code or 0)] in order."""
    from confluent_kafka import Producer

    p = producer or Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotence,
                              "linger.ms": linger_ms, "acks": "all"})
    out: list = [None] * len(msgs)

    def report(i):
        def cb(err, msg):
            out[i] = (msg.offset(), err.code() if err else 0, str(err) if err else "")
        return cb

    for i, (value, headers) in enumerate(msgs):
        p.produce(topic, value=value, headers=headers, partition=0, on_delivery=report(i))
    assert p.flush(60) == 0
    return [(o, c) for o, c, _ in out], [m for *_, m in out]


def confluent_read(bootstrap: str, topic: str, expect_end: int | None = None, timeout_s: float = 30):
    """Every record of partition 0 from the beginning to its end: [(offset, value, headers)]."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("g"),
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out, deadline = [], time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF: the end, gaps stepped over
                    return out
                raise AssertionError(m.error())
            out.append((m.offset(), m.value(), dict(m.headers() or [])))
        raise AssertionError(f"no EOF within {timeout_s}s; got {out}")
    finally:
        c.close()


def kafka_python_read(bootstrap: str, topic: str):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        out = []
        deadline = time.monotonic() + 30
        while c.position(tp) < end and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                out.extend((r.offset, r.value, dict(r.headers or [])) for r in recs)
        assert c.position(tp) >= end, f"kafka-python stuck at {c.position(tp)} < {end}"
        return out
    finally:
        c.close()


# ---------------------------------------------------------------- configs


BAD_CONFIGS = [
    ("strom.dedup.window.ms", "0"),
    ("strom.dedup.max.ids", "0"),
    ("strom.record.ttl.ms", "-5"),
    ("strom.embedding.format", "bf16"),
    ("strom.embedding.field", "no-slash"),
    ("strom.embedding.dimension", "-1"),
    ("strom.embedding.normalized", "maybe"),
    ("strom.embedding.normalized.epsilon", "0"),
    ("strom.priority", "urgent"),
]


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_bad_flow_config_values_are_refused_and_nothing_created(strom, client):
    for key, value in BAD_CONFIGS:
        topic = unique_topic("flow-bad")
        code = admin.create_topic(client, strom.bootstrap, topic, 1, {key: value})
        assert code == INVALID_CONFIG, f"{key}={value}: {code}"
        assert admin.topic_partitions("confluent", strom.bootstrap, topic) is None


def test_flow_configs_described_altered_and_refused_by_name(strom):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)

    topic = unique_topic("flow-cfg")
    assert admin.create_topic("confluent", strom.bootstrap, topic, 1, {"strom.dedup.header": "msg-id"}) == 0
    described = admin.describe_topic_configs(strom.bootstrap, topic)
    assert described["strom.dedup.header"] == ("msg-id", "DYNAMIC_TOPIC_CONFIG")
    a = AdminClient({"bootstrap.servers": strom.bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("strom.dedup.window.ms", "abc", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as e:
        a.incremental_alter_configs([res])[res].result(timeout=30)
    assert e.value.args[0].code() == INVALID_CONFIG
    assert "strom.dedup.window.ms" in str(e.value)
    assert "strom.dedup.window.ms" not in admin.describe_topic_configs(strom.bootstrap, topic)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("strom.dedup.window.ms", "5000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res])[res].result(timeout=30)
    assert admin.describe_topic_configs(strom.bootstrap, topic)["strom.dedup.window.ms"][0] == "5000"


# ---------------------------------------------------------------- dedup


@pytest.mark.parametrize("idempotence", [False, True])
def test_dedup_confluent_duplicates_answered_with_original_offsets_and_mixed_batches_keep_new(strom, idempotence):
    from confluent_kafka import Producer

    topic = unique_topic("flow-dedup")
    assert admin.create_topic("confluent", strom.bootstrap, topic, 1, {"strom.dedup.header": "msg-id"}) == 0
    first, _ = confluent_send(strom.bootstrap, topic, [(b"a", [("msg-id", b"A")]), (b"b", [("msg-id", b"B")])],
                              idempotence)
    assert first == [(0, 0), (1, 0)]
    # A new producer (a restarted client) sends A again, alone: answered with A's offset.
    again, _ = confluent_send(strom.bootstrap, topic, [(b"a-again", [("msg-id", b"A")])], idempotence)
    assert again == [(0, 0)]
    # One batch (linger) mixing a duplicate, two new ids, a record without id and an id
    # repeated inside the batch: the new ones are appended, the duplicates are not.
    p = Producer({"bootstrap.servers": strom.bootstrap, "enable.idempotence": idempotence,
                  "linger.ms": 200, "acks": "all"})
    mixed, _ = confluent_send(strom.bootstrap, topic, [
        (b"b-again", [("msg-id", b"B")]), (b"c", [("msg-id", b"C")]), (b"plain", []),
        (b"d", [("msg-id", b"D")]), (b"c-again", [("msg-id", b"C")])], producer=p)
    assert all(code == 0 for _, code in mixed), mixed
    # The same producer goes on: its sequence numbers still line up (idempotent case).
    after, _ = confluent_send(strom.bootstrap, topic, [(b"e", [("msg-id", b"E")])], producer=p)
    assert after[0][1] == 0
    got = confluent_read(strom.bootstrap, topic)
    assert [v for _, v, _ in got] == [b"a", b"b", b"c", b"plain", b"d", b"e"]
    offsets = [o for o, _, _ in got]
    # Offsets stay as the producer was told: the kept records of the mixed batch sit at
    # base + their index in it, the dropped ones leave gaps.
    base = mixed[0][0]
    assert offsets[2:5] == [base + 1, base + 2, base + 3]
    assert after[0][0] == offsets[5]
    assert kafka_python_read(strom.bootstrap, topic) == got
    assert metric(strom.extra["metrics_port"], "strom_dedup_duplicates_total", topic) == 3


def test_dedup_kafka_python_and_window_expiry(strom):
    from kafka import KafkaProducer

    topic = unique_topic("flow-dedup-kp")
    assert admin.create_topic("kafka-python", strom.bootstrap, topic, 1,
                              {"strom.dedup.header": "msg-id", "strom.dedup.window.ms": "1500"}) == 0
    p = KafkaProducer(bootstrap_servers=strom.bootstrap, acks="all")
    try:
        send = lambda v, i: p.send(topic, value=v, partition=0, headers=[("msg-id", i)]).get(timeout=30).offset
        assert send(b"x", b"X") == 0
        assert send(b"x2", b"X") == 0
        # kafka-python 3 producers are idempotent by default: their batch of duplicates only
        # is kept empty (it carries the producer's sequence numbers) and takes offset 1.
        assert send(b"y", b"Y") == 2
        time.sleep(2.0)  # the window (1.5 s) has ended for X
        assert send(b"x3", b"X") == 3
    finally:
        p.close()
    assert [v for _, v, _ in kafka_python_read(strom.bootstrap, topic)] == [b"x", b"y", b"x3"]


def test_dedup_window_bounded_by_max_ids(strom):
    topic = unique_topic("flow-dedup-cap")
    assert admin.create_topic("confluent", strom.bootstrap, topic, 1,
                              {"strom.dedup.header": "msg-id", "strom.dedup.max.ids": "3"}) == 0
    for i in range(5):
        confluent_send(strom.bootstrap, topic, [(b"v", [("msg-id", b"id%d" % i)])])
    # id0 and id1 were evicted (3 kept): id0 is appended again, id4 is still a duplicate.
    r, _ = confluent_send(strom.bootstrap, topic, [(b"v", [("msg-id", b"id0")])])
    assert r == [(5, 0)]
    r, _ = confluent_send(strom.bootstrap, topic, [(b"v", [("msg-id", b"id4")])])
    assert r == [(4, 0)]
    assert metric(strom.extra["metrics_port"], "strom_dedup_ids_evicted_total", topic) >= 2


@pytest.mark.parametrize("how", ["restart", "kill9"])
def test_dedup_survives_restart_and_kill9(how):
    b = Restartable()
    try:
        b.start()
        topic = unique_topic(f"flow-dedup-{how}")
        assert admin.create_topic("confluent", b.bootstrap, topic, 1,
                                  {"strom.dedup.header": "msg-id", "strom.dedup.window.ms": "600000",
                                   "compression.type": "zstd"}) == 0
        msgs = [(b"v%d" % i, [("msg-id", b"m%d" % i)]) for i in range(50)]
        first, _ = confluent_send(b.bootstrap, topic, msgs, idempotence=True, linger_ms=20)
        assert [o for o, _ in first] == list(range(50))
        if how == "kill9":
            b.kill9()
        else:
            assert b.stop() == 0
        b.start()
        # One record per batch: a produce response has one base offset per partition, so
        # only a batch's first duplicate is told its original offset (docs/ai-features.md).
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 0})
        again = [confluent_send(b.bootstrap, topic, [m], producer=p)[0][0] for m in msgs[::-1]]
        assert [o for o, _ in again] == list(range(50))[::-1], again
        got = confluent_read(b.bootstrap, topic)
        assert [o for o, _, _ in got] == list(range(50)), "nothing appended again"
    finally:
        b.cleanup()


# ---------------------------------------------------------------- expiry


def test_ttl_header_expired_records_not_delivered_offsets_gap(strom):
    topic = unique_topic("flow-ttl")
    assert admin.create_topic("confluent", strom.bootstrap, topic, 1, {"strom.ttl.header": "ttl-ms"}) == 0
    msgs = [(b"short", [("ttl-ms", b"300")]), (b"keep", []), (b"long", [("ttl-ms", b"600000")]),
            (b"short2", [("ttl-ms", b"300")])]
    r, _ = confluent_send(strom.bootstrap, topic, msgs, linger_ms=100)
    assert [c for _, c in r] == [0, 0, 0, 0]
    assert [v for _, v, _ in confluent_read(strom.bootstrap, topic)] == [b"short", b"keep", b"long", b"short2"]
    time.sleep(1.0)
    got = confluent_read(strom.bootstrap, topic)
    assert [(o, v) for o, v, _ in got] == [(1, b"keep"), (2, b"long")]
    assert [(o, v) for o, v, _ in kafka_python_read(strom.bootstrap, topic)] == [(1, b"keep"), (2, b"long")]
    assert metric(strom.extra["metrics_port"], "strom_records_expired_total", topic) >= 2
    # A TTL header that is not a number of ms is refused at produce.
    bad, _ = confluent_send(strom.bootstrap, topic, [(b"bad", [("ttl-ms", b"soon")])])
    assert bad[0][1] == INVALID_RECORD


def test_all_expired_batches_consumers_step_over_and_see_new_records(strom):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    topic = unique_topic("flow-ttl-all")
    assert admin.create_topic("confluent", strom.bootstrap, topic, 1, {"strom.ttl.header": "ttl-ms"}) == 0
    confluent_send(strom.bootstrap, topic, [(b"old%d" % i, [("ttl-ms", b"300")]) for i in range(20)], linger_ms=50)
    time.sleep(1.0)
    # Every stored batch is all expired: consumers get empty batches and reach the end.
    assert confluent_read(strom.bootstrap, topic) == []
    assert kafka_python_read(strom.bootstrap, topic) == []
    confluent_send(strom.bootstrap, topic, [(b"new", [])])
    got = confluent_read(strom.bootstrap, topic)
    assert [(o, v) for o, v, _ in got] == [(20, b"new")]
    # Turned off: applied at once, the old records are delivered again.
    a = AdminClient({"bootstrap.servers": strom.bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("strom.ttl.header", None, incremental_operation=AlterConfigOpType.DELETE)])
    a.incremental_alter_configs([res])[res].result(timeout=30)
    admin.wait_for(lambda: len(confluent_read(strom.bootstrap, topic)) == 21, "TTL removal applied")


def test_topic_ttl_bounds_retention(strom):
    from kafka import KafkaConsumer, TopicPartition

    topic = unique_topic("flow-ttl-retention")
    assert admin.create_topic("confluent", strom.bootstrap, topic, 1, {"strom.record.ttl.ms": "500"}) == 0
    confluent_send(strom.bootstrap, topic, [(b"old%d" % i, []) for i in range(20)], linger_ms=50)
    c = KafkaConsumer(bootstrap_servers=strom.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        # retention.ms is 7 days; the TTL removes the segment (checked every second here).
        admin.wait_for(lambda: c.beginning_offsets([tp])[tp] == 20, "segments past the TTL deleted")
    finally:
        c.close()
    assert confluent_read(strom.bootstrap, topic) == []


def test_compaction_removes_expired_records_from_the_log(strom):
    """Fetch hides an expired record at once; on a compacted topic the cleaner also removes
    it from the segment files, even as the latest record of its key (read from the bytes
    on disk: a consumer could not tell the two apart)."""
    from confluent_kafka import Producer

    topic = unique_topic("flow-ttl-compact")
    configs = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
               "min.compaction.lag.ms": "0", "strom.ttl.header": "ttl-ms"}
    assert admin.create_topic("confluent", strom.bootstrap, topic, 1, configs) == 0
    p = Producer({"bootstrap.servers": strom.bootstrap, "linger.ms": 0, "acks": "all"})
    p.produce(topic, key=b"a", value=b"expiring-value-a", headers=[("ttl-ms", b"300")], partition=0)
    p.produce(topic, key=b"b", value=b"kept-value-b", partition=0)
    p.produce(topic, key=b"c", value=b"expiring-value-c", headers=[("ttl-ms", b"300")], partition=0)
    assert p.flush(30) == 0
    part_dir = strom.workdir / "data" / f"{topic}-0"

    def on_disk() -> bytes:
        return b"".join(f.read_bytes() for f in sorted(part_dir.glob("*.log")))

    assert b"expiring-value-a" in on_disk() and b"expiring-value-c" in on_disk()
    time.sleep(0.5)
    # segment.ms counts record time: these close the first segment, so it can be cleaned.
    for i in range(3):
        p.produce(topic, key=b"t%d" % i, value=b"trigger", partition=0)
        assert p.flush(30) == 0
        time.sleep(0.2)
    admin.wait_for(lambda: b"expiring-value" not in on_disk(), "the cleaner to remove expired records",
                   timeout_s=60, interval_s=0.5)
    assert b"kept-value-b" in on_disk()
    assert [(o, v) for o, v, _ in confluent_read(strom.bootstrap, topic) if v != b"trigger"] == [(1, b"kept-value-b")]


# ---------------------------------------------------------------- embeddings


def f32le(v) -> bytes:
    return struct.pack(f"<{len(v)}f", *v)


def test_embedding_validation_confluent_and_kafka_python(strom):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    topic = unique_topic("flow-emb")
    assert admin.create_topic("confluent", strom.bootstrap, topic, 1, {
        "strom.embedding.format": "f32le", "strom.embedding.dimension": "4",
        "strom.embedding.normalized": "true", "strom.embedding.normalized.epsilon": "0.01"}) == 0
    good = f32le([0.5, 0.5, 0.5, 0.5])
    r, _ = confluent_send(strom.bootstrap, topic, [(good, [])])
    assert r == [(0, 0)]
    for bad in [f32le([math.nan, 0, 0, 1]), f32le([math.inf, 0, 0, 0]), f32le([1, 0, 0]), f32le([1, 1, 0, 0]),
                b"\x00\x01"]:
        r, messages = confluent_send(strom.bootstrap, topic, [(bad, [])])
        assert r[0][1] == INVALID_RECORD, (bad, r, messages)
    # One batch with a bad vector: refused whole, as Kafka refuses a batch with an invalid
    # record (the good record fails with it; KIP-467 names the bad one). The linger keeps the
    # three in one batch even on a loaded machine (200 ms split them once in a full run).
    r, _ = confluent_send(strom.bootstrap, topic, [(good, []), (f32le([math.nan] * 4), []), (good, [])],
                          linger_ms=2000)
    assert [c for _, c in r] == [INVALID_RECORD] * 3
    p = KafkaProducer(bootstrap_servers=strom.bootstrap, acks="all", retries=0)
    try:
        assert p.send(topic, value=good, partition=0).get(timeout=30).offset == 1
        with pytest.raises(KafkaError) as e:
            p.send(topic, value=f32le([0, 0, 0, 2]), partition=0).get(timeout=30)
        assert "INVALID_RECORD" in type(e.value).__name__.upper() or "InvalidRecord" in repr(e.value)
    finally:
        p.close()
    assert [v for _, v, _ in confluent_read(strom.bootstrap, topic)] == [good, good]
    assert metric(strom.extra["metrics_port"], "strom_embedding_rejected_total", topic) >= 7


def test_embedding_validation_json_pointer(strom):
    topic = unique_topic("flow-emb-json")
    assert admin.create_topic("confluent", strom.bootstrap, topic, 1, {
        "strom.embedding.format": "json", "strom.embedding.field": "/doc/vec",
        "strom.embedding.dimension": "3"}) == 0
    ok = b'{"doc": {"vec": [1, 2, 3]}, "title": "t"}'
    r, _ = confluent_send(strom.bootstrap, topic, [(ok, [])])
    assert r == [(0, 0)]
    for bad in [b'{"doc": {"vec": [1, 2]}}', b'{"doc": {}}', b'{"doc": {"vec": [1, "x", 3]}}', b"not json",
                b'{"doc": {"vec": [1, 1e39, 3]}}']:
        r, messages = confluent_send(strom.bootstrap, topic, [(bad, [])])
        assert r[0][1] == INVALID_RECORD, (bad, r)
        assert re.search(r"invalid embedding|INVALID_RECORD|Broker: Invalid record", messages[0]), messages[0]


# ---------------------------------------------------------------- priority lanes


def test_priority_lanes_throttle_lower_lanes_only_while_a_higher_one_is_busy():
    """A saturated shard (here forced: a static threshold of 0 ms, so any produce latency is
    over it) answers the low lane's produce and fetch with throttle_time_ms and never the
    critical lane's; once the critical lane is idle, and for topics at the default lane,
    nobody is throttled. One shard, so both clients' connections share its gate."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = Restartable(shards=1)
    try:
        b.start("--set", "priority_static_threshold_ms=0", "--set", "priority_max_throttle_ms=200")
        crit, low, norm = (unique_topic(f"prio-{n}") for n in ("crit", "low", "norm"))
        for t, lane in ((crit, "critical"), (low, "low"), (norm, None)):
            cfg = {"strom.priority": lane} if lane else {}
            assert admin.create_topic("confluent", b.bootstrap, t, 1, cfg) == 0
        assert admin.describe_topic_configs(b.bootstrap, crit)["strom.priority"] == \
            ("critical", "DYNAMIC_TOPIC_CONFIG")

        throttles: dict[str, list[int]] = {"crit": [], "low": [], "norm": [], "fetch": []}

        def producer(name):
            return Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0,
                             "throttle_cb": lambda e: throttles[name].append(e.throttle_time)})

        pc, pl, pn = producer("crit"), producer("low"), producer("norm")
        for i in range(8):
            pc.produce(crit, value=b"c%d" % i, partition=0)
            assert pc.flush(30) == 0
            pl.produce(low, value=b"l%d" % i, partition=0)
            assert pl.flush(30) == 0
            pc.poll(0)
        assert throttles["low"], "the low lane is slowed while critical is busy"
        assert max(throttles["low"]) <= 200, throttles["low"]
        assert throttles["crit"] == [], "the top lane is never throttled"

        # A consumer of the low lane's topic is slowed the same way (Fetch throttle_time_ms).
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique_topic("g"),
                      "fetch.wait.max.ms": 50, "enable.auto.commit": False,
                      "throttle_cb": lambda e: throttles["fetch"].append(e.throttle_time)})
        try:
            c.assign([TopicPartition(low, 0, 0)])
            got, deadline = 0, time.monotonic() + 30
            while (got < 8 or not throttles["fetch"]) and time.monotonic() < deadline:
                pc.produce(crit, value=b"more", partition=0)
                pc.flush(30)
                m = c.poll(0.2)
                if m is not None and not m.error():
                    got += 1
            assert got == 8 and throttles["fetch"], (got, throttles["fetch"])
        finally:
            c.close()

        # The critical lane idle for longer than its activity window (1 s): the default lane
        # alone is never throttled, saturated or not — a broker without strom.priority behaves
        # as Kafka does.
        time.sleep(1.5)
        for i in range(8):
            pn.produce(norm, value=b"n%d" % i, partition=0)
            assert pn.flush(30) == 0
        assert throttles["norm"] == []
        assert metric_lane(b.metrics_port, "strom_priority_throttled_total", "low") >= len(throttles["low"])
        assert metric_lane(b.metrics_port, "strom_priority_throttled_total", "critical") == 0
        assert metric_lane(b.metrics_port, "strom_priority_requests_total", "critical") >= 8
    finally:
        b.cleanup()


def metric_lane(metrics_port: int, name: str, lane: str) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if line.startswith(name + "{") and f'lane="{lane}"' in line)
