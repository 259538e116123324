"""Log compaction: a compacted topic read from the beginning by a real client yields the
latest value per key, at the offsets the records were produced at; with transactions,
aborted records are removed (even read_uncommitted no longer sees them) and
read_committed sees the latest committed value per key.

Both brokers run their cleaner with a 1 s backoff (brokers.py / kafka.sh); the topic rolls
segments every 100 ms of record time and is cleaned at any dirty ratio, so several values
per key and tombstones are cleaned within seconds.
"""

from __future__ import annotations

import time

import pytest

import admin
from clients import unique_topic

KEYS = 40
ROUNDS = 5
DELETED = {f"k{i:02d}" for i in range(0, KEYS, 7)}


def _produce(bootstrap: str, topic: str, codec: str) -> dict[tuple[bytes, bytes | None], int]:
    """Rounds of one value per key, the last round's tombstones for DELETED; each round in
    its own segment. Returns the offset every record was written at."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "compression.type": codec,
            "linger.ms": 5,
        }
    )
    offsets: dict[tuple[bytes, bytes | None], int] = {}

    def report(err, msg):
        assert err is None, err
        offsets[(msg.key(), msg.value())] = msg.offset()

    for r in range(ROUNDS):
        for i in range(KEYS):
            key = f"k{i:02d}"
            last = r == ROUNDS - 1
            value = None if last and key in DELETED else f"{key}-v{r}".encode()
            p.produce(topic, key=key.encode(), value=value, on_delivery=report)
        assert p.flush(30) == 0
        # segment.ms counts record time: the next round rolls a new segment.
        time.sleep(0.3)
    # Rolls the last round's segment closed, so all of it is cleanable.
    p.produce(topic, key=b"zz-trigger", value=b"t", on_delivery=report)
    assert p.flush(30) == 0
    return offsets


def _create_compacted(bootstrap: str, topic: str) -> None:
    """One partition, segments rolled every 100 ms of record time, cleaned at any dirty
    ratio, tombstones and markers kept 100 ms."""
    configs = {
        "cleanup.policy": "compact",
        "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "100",
        "min.compaction.lag.ms": "0",
    }
    assert admin.create_topic("confluent", bootstrap, topic, 1, configs) == admin.NONE


def _read_all(
    bootstrap: str, topic: str, isolation: str = "read_committed"
) -> list[tuple[int, bytes, bytes | None]]:
    """Every record from the beginning up to the end, at the given isolation level
    (librdkafka's default is read_committed)."""
    import uuid

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"compat-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": isolation,
        }
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    got = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                assert not m.error(), m.error()
                got.append((m.offset(), m.key(), m.value()))
            if got and got[-1][0] >= high - 1:
                break
    finally:
        c.close()
    return got


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_compacted_topic_read_from_beginning_yields_latest_value_per_key(broker, codec):
    topic = unique_topic("compact")
    _create_compacted(broker.bootstrap, topic)
    offsets = _produce(broker.bootstrap, topic, codec)
    latest = {}
    for (k, v), o in offsets.items():
        if k not in latest or o > latest[k][0]:
            latest[k] = (o, v)

    state = {}

    def compacted():
        got = _read_all(broker.bootstrap, topic)
        state["got"] = got
        keys = [k for _, k, _ in got]
        # One record per key, and no value of a deleted key (its tombstone may be gone).
        return len(keys) == len(set(keys)) and all(v is None for _, k, v in got if k.decode() in DELETED)

    admin.wait_for(compacted, f"{broker.name} to compact {topic}", timeout_s=90, interval_s=1.0)
    got = state["got"]
    for o, k, v in got:
        # Offsets never change: each survivor sits where it was produced.
        assert offsets[(k, v)] == o, (k, v, o)
        assert latest[k] == (o, v), f"{k!r}: got {(o, v)}, latest {latest[k]}"
    survivors = {k for _, k, v in got if v is not None}
    assert survivors == {k for k, (_, v) in latest.items() if v is not None}


TXN_KEYS = 12
TXN_ROUNDS = 4


def test_compacted_topic_with_transactions_drops_aborted_data_and_keeps_committed(broker):
    """Committed and aborted keyed transactions interleaved with plain writes, each round in
    its own segment: once cleaned, even a read_uncommitted consumer sees no aborted record
    and one record per key, and read_committed sees the latest committed value per key."""
    from confluent_kafka import Producer

    topic = unique_topic("compact-txn")
    _create_compacted(broker.bootstrap, topic)
    tx = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": f"{topic}-tx",
            "linger.ms": 5,
        }
    )
    tx.init_transactions(30)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    committed: dict[bytes, bytes] = {}
    for r in range(TXN_ROUNDS):
        # A committed transaction over every key, then an aborted one over half of them
        # plus keys nothing else writes, then plain writes to a few keys.
        tx.begin_transaction()
        for i in range(TXN_KEYS):
            tx.produce(topic, key=f"k{i:02d}".encode(), value=f"commit-{r}-{i}".encode())
        tx.commit_transaction(30)
        for i in range(TXN_KEYS):
            committed[f"k{i:02d}".encode()] = f"commit-{r}-{i}".encode()
        tx.begin_transaction()
        for i in range(0, TXN_KEYS, 2):
            tx.produce(topic, key=f"k{i:02d}".encode(), value=f"abort-{r}-{i}".encode())
        tx.produce(topic, key=f"aborted-only-{r}".encode(), value=f"abort-{r}".encode())
        assert tx.flush(30) == 0  # the aborted records reach the log before the abort
        tx.abort_transaction(30)
        for i in range(0, TXN_KEYS, 3):
            plain.produce(topic, key=f"k{i:02d}".encode(), value=f"plain-{r}-{i}".encode())
            committed[f"k{i:02d}".encode()] = f"plain-{r}-{i}".encode()
        assert plain.flush(30) == 0
        # segment.ms counts record time: the next round rolls a new segment.
        time.sleep(0.3)
    # Rolls the last round's segment closed, so all of it is cleanable.
    plain.produce(topic, key=b"zz-trigger", value=b"t")
    assert plain.flush(30) == 0
    committed[b"zz-trigger"] = b"t"

    state = {}

    def compacted():
        got = _read_all(broker.bootstrap, topic, "read_uncommitted")
        state["got"] = got
        keys = [k for _, k, _ in got]
        return len(keys) == len(set(keys)) and not any(v.startswith(b"abort") for _, _, v in got)

    admin.wait_for(compacted, f"{broker.name} to compact {topic}", timeout_s=90, interval_s=1.0)
    uncommitted = {k: v for _, k, v in state["got"]}
    assert uncommitted == committed
    got = _read_all(broker.bootstrap, topic, "read_committed")
    assert {k: v for _, k, v in got} == committed
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(offsets)
