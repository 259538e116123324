"""Log lifecycle through real clients: DeleteRecords with the AdminClients of confluent-kafka and
kafka-python (low watermark, errors, earliest offset), and a short-retention topic that loses
its old segments while a consumer keeps reading. Both brokers run the retention check every
second (STROM_LOG_RETENTION_CHECK_INTERVAL_MS / log.retention.check.interval.ms in
brokers.py and kafka.sh)."""

from __future__ import annotations

import time

import pytest

import admin
from clients import Out, confluent_produce, unique_topic

OFFSET_OUT_OF_RANGE = 1
N = 100


def _fill(bootstrap: str, n: int = N, configs: dict | None = None) -> str:
    topic = unique_topic("lc")
    assert admin.create_topic("confluent", bootstrap, topic, 1, configs) == admin.NONE
    # Timestamps of now: older ones would fall to the topic's 7-day retention at once.
    now_ms = int(time.time() * 1000)
    recs = [Out(0, f"k{i}".encode(), f"v{i}".encode(), (), now_ms) for i in range(n)]
    confluent_produce(bootstrap, topic, recs, "none", "all", True)
    return topic


def _delete_confluent(bootstrap: str, topic: str, offset: int) -> tuple[int, int]:
    """(error code, low watermark or -1)."""
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    a = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0, offset)
    fut = a.delete_records([tp], request_timeout=admin.ADMIN_TIMEOUT_S)[tp]
    try:
        r = fut.result(timeout=admin.ADMIN_TIMEOUT_S)
        return admin.NONE, r.low_watermark
    except KafkaException as e:
        return e.args[0].code(), -1


def _delete_kafka_python(bootstrap: str, topic: str, offset: int, leader: int | None = None) -> tuple[int, int]:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import KafkaError

    a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(admin.ADMIN_TIMEOUT_S * 1000))
    try:
        tp = TopicPartition(topic, 0)
        try:
            r = a.delete_records({tp: offset}, timeout_ms=int(admin.ADMIN_TIMEOUT_S * 1000),
                                 partition_leader_id=leader)
        except KafkaError as e:
            return e.errno, -1
        got = r[tp]
        if isinstance(got, dict):
            return got.get("error_code", admin.NONE), got.get("low_watermark", -1)
        return admin.NONE, got
    finally:
        a.close()


DELETE = {"confluent": _delete_confluent, "kafka-python": _delete_kafka_python}


def _earliest_latest(bootstrap: str, topic: str) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lc-watermarks"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=admin.ADMIN_TIMEOUT_S)
    finally:
        c.close()


def _consume_from_beginning(bootstrap: str, topic: str, until: int, timeout_s: float = 60.0) -> list[int]:
    """Offsets a fresh consumer reads from the beginning up to `until` (exclusive)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "lc-reader",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    # Assigned, not subscribed: no group join, so it reads at once.
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and (not got or got[-1] < until - 1):
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got.append(m.offset())
    finally:
        c.close()
    return got


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_delete_records_moves_low_watermark_and_earliest(broker, client):
    b = broker.bootstrap
    topic = _fill(b)
    delete = DELETE[client]
    assert delete(b, topic, 40) == (admin.NONE, 40)
    # Below the current log start: nothing changes.
    assert delete(b, topic, 10) == (admin.NONE, 40)
    assert delete(b, topic, N + 1)[0] == OFFSET_OUT_OF_RANGE
    assert _earliest_latest(b, topic) == (40, N)
    got = _consume_from_beginning(b, topic, N)
    assert got == list(range(40, N))
    # -1: up to the high watermark.
    assert delete(b, topic, -1) == (admin.NONE, N)
    assert _earliest_latest(b, topic) == (N, N)


def test_delete_records_of_unknown_topic_fails(broker):
    """Sent straight to node 0 (librdkafka resolves an unknown topic locally and never asks)."""
    code, low = _delete_kafka_python(broker.bootstrap, unique_topic("lc-missing"), 0, leader=0)
    assert code == admin.UNKNOWN_TOPIC_OR_PARTITION and low == -1


def test_short_retention_deletes_old_segments_while_consumer_keeps_up(broker):
    """segment.ms rolls a segment per burst; retention.ms expires the old ones; a consumer that
    follows the producer reads every offset in order, and a late one starts at the low
    watermark, which has moved past 0."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = broker.bootstrap
    topic = unique_topic("lc-ret")
    configs = {"retention.ms": "3000", "segment.ms": "300", "file.delete.delay.ms": "1000"}
    assert admin.create_topic("confluent", b, topic, 1, configs) == admin.NONE
    follower = Consumer({
        "bootstrap.servers": b,
        "group.id": "lc-follower",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    # From offset 0, assigned (no group join that could start it after 0 expired).
    follower.assign([TopicPartition(topic, 0, 0)])
    p = Producer({"bootstrap.servers": b, "acks": "all", "linger.ms": 0})
    seen: list[int] = []
    produced = 0
    low = 0
    deadline = time.monotonic() + 90
    try:
        # Bursts 0.5 s apart: every burst after the first rolls the segment (segment.ms).
        while time.monotonic() < deadline:
            for _ in range(10):
                p.produce(topic, value=f"v{produced}".encode())
                produced += 1
            assert p.flush(30) == 0
            stop = time.monotonic() + 0.5
            while time.monotonic() < stop:
                m = follower.poll(0.1)
                if m is not None and not m.error():
                    seen.append(m.offset())
            low, high = _earliest_latest(b, topic)
            if low > 0 and produced >= 100:
                break
        assert low > 0, f"retention deleted nothing after {produced} records"
        # The follower drains what is left, having never lost its place.
        stop = time.monotonic() + 30
        while time.monotonic() < stop and (not seen or seen[-1] < produced - 1):
            m = follower.poll(0.2)
            if m is not None and not m.error():
                seen.append(m.offset())
        assert seen == list(range(produced))
    finally:
        follower.close()
    low, high = _earliest_latest(b, topic)
    assert high == produced and 0 < low <= produced
    late = _consume_from_beginning(b, topic, produced, timeout_s=10)
    # Segments keep expiring while the late consumer starts: it starts at or after `low`
    # (or finds nothing, when even the last segment expired meanwhile).
    if late:
        assert late[0] >= low and late == list(range(late[0], produced))
    else:
        assert _earliest_latest(b, topic) == (produced, produced)
