"""read_committed consumers of three independent client implementations (librdkafka,
kafka-python, aiokafka) over a partition where two transactional producers interleave:
one aborts, one commits, a third stays open. Each client drops aborted records itself,
using the aborted_transactions list of the Fetch response, and must stop at the last stable
offset, so this checks the broker's Fetch (LSO, aborted list from .txnindex, control
batches) and ListOffsets with isolation level against Apache Kafka side by side.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

import admin

WAIT_S = 60
CLIENTS = ["confluent", "kafka-python", "aiokafka"]


def txn_producer(bootstrap: str, tid: str):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(WAIT_S)
    return p


def send(p, topic: str, values: list[str]):
    for v in values:
        p.produce(topic, value=v.encode(), partition=0)
    p.flush(WAIT_S)


def write_interleaved(bootstrap: str, topic: str):
    """a: aborted, b: committed, interleaved batch by batch; then c: left open, then d: a
    plain (non-transactional) record after it. Returns the still-open producer."""
    a = txn_producer(bootstrap, f"a-{topic}")
    b = txn_producer(bootstrap, f"b-{topic}")
    a.begin_transaction()
    b.begin_transaction()
    for i in range(3):
        send(a, topic, [f"a{i}"])
        send(b, topic, [f"b{i}"])
    a.abort_transaction(WAIT_S)
    b.commit_transaction(WAIT_S)
    c = txn_producer(bootstrap, f"c-{topic}")
    c.begin_transaction()
    send(c, topic, ["c0"])
    from confluent_kafka import Producer

    plain = Producer({"bootstrap.servers": bootstrap})
    send(plain, topic, ["d0"])
    return c


def consume_values(client: str, bootstrap: str, topic: str, isolation: str, want: int, quiet_s: float = 3.0):
    """Values read from offset 0 until `want` arrived and then nothing more for `quiet_s`,
    or WAIT_S passed; plus the end offset the client's ListOffsets gives for `isolation`."""
    if client == "confluent":
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": f"rc-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        })
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            got, deadline, last = [], time.monotonic() + WAIT_S, time.monotonic()
            while time.monotonic() < deadline and (len(got) < want or time.monotonic() - last < quiet_s):
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    raise AssertionError(f"consume error: {m.error()}")
                got.append(m.value().decode())
                last = time.monotonic()
            # librdkafka asks ListOffsets with its isolation level.
            _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            return got, high
        finally:
            c.close()
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                          auto_offset_reset="earliest", isolation_level=isolation)
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            got, deadline, last = [], time.monotonic() + WAIT_S, time.monotonic()
            while time.monotonic() < deadline and (len(got) < want or time.monotonic() - last < quiet_s):
                for _, msgs in c.poll(timeout_ms=200).items():
                    for m in msgs:
                        got.append(m.value.decode())
                        last = time.monotonic()
            return got, c.end_offsets([tp])[tp]
        finally:
            c.close()

    async def run():
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition

        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level=isolation)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            got, deadline, last = [], time.monotonic() + WAIT_S, time.monotonic()
            while time.monotonic() < deadline and (len(got) < want or time.monotonic() - last < quiet_s):
                for _, msgs in (await c.getmany(timeout_ms=200)).items():
                    for m in msgs:
                        got.append(m.value.decode())
                        last = time.monotonic()
            return got, (await c.end_offsets([tp]))[tp]
        finally:
            await c.stop()

    return asyncio.run(asyncio.wait_for(run(), 2 * WAIT_S))


@pytest.mark.parametrize("client", CLIENTS)
def test_read_committed_skips_interleaved_aborted_data_and_stops_at_open_transaction(broker, client):
    topic = f"rc-{client}-{uuid.uuid4().hex[:6]}"
    assert admin.create_topic("confluent", broker.bootstrap, topic, 1) == admin.NONE
    open_txn = write_interleaved(broker.bootstrap, topic)
    # Offsets: a0 b0 a1 b1 a2 b2 (0-5), ABORT(a) 6, COMMIT(b) 7, c0 8 (open), d0 9.
    got, end = consume_values(client, broker.bootstrap, topic, "read_committed", 3)
    assert got == ["b0", "b1", "b2"], got
    assert end == 8, "read_committed end offset is the last stable offset"
    got, end = consume_values(client, broker.bootstrap, topic, "read_uncommitted", 8)
    assert got == ["a0", "b0", "a1", "b1", "a2", "b2", "c0", "d0"], got
    assert end == 10
    open_txn.commit_transaction(WAIT_S)
    got, end = consume_values(client, broker.bootstrap, topic, "read_committed", 5)
    assert got == ["b0", "b1", "b2", "c0", "d0"], got
    assert end == 11
