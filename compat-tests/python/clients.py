"""The same produce/consume work done through each Python client, with results in one
normalized shape so the tests compare what the broker stored byte for byte.

Clients: confluent-kafka (librdkafka), kafka-python, aiokafka. Consumers use manual
assignment and never commit offsets (Strom has no consumer groups yet).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import dataclass

CLIENTS = ("confluent", "kafka-python", "aiokafka")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# (acks, idempotence): idempotence needs acks=all in every client.
ACKS_MODES = (("0", False), ("1", False), ("all", False), ("all", True))

# Records carry explicit CreateTime timestamps BASE_TS + i (ms). They must be recent:
# Kafka deletes a segment, the active one included, once its largest timestamp is older
# than retention.ms (7 days), on its 5-minute retention check; old timestamps made records
# vanish mid-test (FINDINGS.md). Future ones past message.timestamp.after.max.ms (1 hour)
# are refused. Ten minutes ago, whole seconds, leaves room for 100k records at +1 ms each.
BASE_TS = (int(time.time()) - 600) * 1000
OP_TIMEOUT_S = 60.0
# A consumer that has received nothing new for this long has stalled: stop waiting.
STALL_S = 15.0


class Progress:
    """Ends a consume loop when everything arrived, nothing new came for STALL_S, or
    OP_TIMEOUT_S passed, whichever is first."""

    def __init__(self, total: int):
        self.total = total
        self.deadline = time.monotonic() + OP_TIMEOUT_S
        self.last_n = 0
        self.last_progress = time.monotonic()

    def more(self, n: int) -> bool:
        now = time.monotonic()
        if n != self.last_n:
            self.last_n, self.last_progress = n, now
        return n < self.total and now < self.deadline and now - self.last_progress < STALL_S


@dataclass(frozen=True)
class Rec:
    """A record as consumed (or as expected), normalized across clients."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int
    timestamp_type: str  # "create" | "log_append"


@dataclass(frozen=True)
class Out:
    """A record to produce."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The partition's end offset (high watermark), read with confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        c.close()


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_records(
    n: int, partitions: int, *, null_header_values: bool, null_key_and_value: bool = True, seed: int = 7
) -> list[Out]:
    """Deterministic records covering the shapes that break codecs and parsers: null and
    empty keys and values, no headers, repeated and empty header values, incompressible
    and very compressible values, and a few 100 KB values that span batches."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 7 == 0:
            key = None
        elif i % 17 == 0:
            key = b""
        else:
            key = f"key-{i % 1000}".encode()
        if i % 11 == 0:
            value = None
        elif i % 13 == 0:
            value = b""
        elif i % 2503 == 0:
            value = rng.randbytes(100_000)
        elif i % 2 == 0:
            value = rng.randbytes(rng.randint(1, 300))
        else:
            value = (f"value-{i}-".encode()) * rng.randint(1, 20)
        if key is None and value is None and not null_key_and_value:
            key = b"tombstone"
        if i % 3 == 0:
            headers: tuple = ()
        elif i % 3 == 1:
            headers = (("trace", f"t{i}".encode()),)
        else:
            headers = (("h", b"a"), ("empty", b""), ("h", b"dup-key"))
            if null_header_values:
                headers = headers + (("null", None),)
        out.append(Out(partition=i % partitions, key=key, value=value, headers=headers, timestamp=BASE_TS + i))
    return out


def expected(recs: list[Out]) -> list[Rec]:
    """What a consumer must read back: per partition, in produce order, offsets from 0."""
    next_off: dict[int, int] = {}
    exp = []
    for r in recs:
        off = next_off.get(r.partition, 0)
        next_off[r.partition] = off + 1
        exp.append(Rec(r.partition, off, r.key, r.value, r.headers, r.timestamp, "create"))
    return sorted(exp, key=lambda x: (x.partition, x.offset))


def describe_mismatch(got: list[Rec], exp: list[Rec]) -> str:
    def per_partition(rs):
        out: dict[int, list[int]] = {}
        for r in rs:
            lo_hi = out.setdefault(r.partition, [r.offset, r.offset, 0])
            lo_hi[0], lo_hi[1], lo_hi[2] = min(lo_hi[0], r.offset), max(lo_hi[1], r.offset), lo_hi[2] + 1
        return {p: f"{n} records, offsets {lo}..{hi}" for p, (lo, hi, n) in sorted(out.items())}

    lines = [
        f"got {len(got)} records, expected {len(exp)}",
        f"  got per partition:      {per_partition(got)}",
        f"  expected per partition: {per_partition(exp)}",
    ]
    for i, (g, e) in enumerate(zip(got, exp)):
        if g != e:
            lines.append(f"first difference at index {i}:\n  got      {_short(g)}\n  expected {_short(e)}")
            break
    return "\n".join(lines)


def _short(r: Rec) -> str:
    def b(x):
        if x is None:
            return "None"
        return repr(x[:40]) + (f"...({len(x)} bytes)" if len(x) > 40 else "")

    return (
        f"p{r.partition}@{r.offset} key={b(r.key)} value={b(r.value)} headers={r.headers!r} "
        f"ts={r.timestamp}/{r.timestamp_type}"
    )


def _norm_headers(h) -> tuple:
    if not h:
        return ()
    return tuple((k, None if v is None else bytes(v)) for k, v in h)


# ---------------------------------------------------------------- confluent-kafka


def confluent_produce(bootstrap: str, topic: str, recs: list[Out], codec: str, acks: str, idempotence: bool):
    """Returns the (partition, offset) the broker reported for each record (offset -1
    when acks=0 means the broker reported none)."""
    from confluent_kafka import KafkaException, Producer

    reported: list = [None] * len(recs)
    errors: list = []

    def on_delivery(i):
        def cb(err, msg):
            if err is not None:
                errors.append((i, err))
            else:
                reported[i] = (msg.partition(), msg.offset())

        return cb

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "acks": acks,
            "enable.idempotence": idempotence,
            "linger.ms": 5,
            "message.timeout.ms": int(OP_TIMEOUT_S * 1000),
        }
    )
    for i, r in enumerate(recs):
        while True:
            try:
                p.produce(
                    topic,
                    key=r.key,
                    value=r.value,
                    headers=list(r.headers) if r.headers else None,
                    partition=r.partition,
                    timestamp=r.timestamp,
                    on_delivery=on_delivery(i),
                )
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(OP_TIMEOUT_S)
    if left:
        raise KafkaException(f"{left} records still undelivered after {OP_TIMEOUT_S}s")
    if errors:
        raise AssertionError(f"{len(errors)} delivery errors, first: {errors[0]}")
    return reported


def confluent_consumer(bootstrap: str):
    from confluent_kafka import Consumer

    # librdkafka insists on a group.id even for assign(); nothing is ever committed.
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"compat-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
        }
    )


def confluent_consume(bootstrap: str, topic: str, partitions: int, total: int) -> list[Rec]:
    from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, TopicPartition

    c = confluent_consumer(bootstrap)
    got = []
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        progress = Progress(total)
        while progress.more(len(got)):
            for m in c.consume(num_messages=2000, timeout=0.5):
                if m.error():
                    raise AssertionError(f"consume error: {m.error()}")
                ts_type, ts = m.timestamp()
                got.append(
                    Rec(
                        m.partition(),
                        m.offset(),
                        m.key(),
                        m.value(),
                        _norm_headers(m.headers()),
                        ts,
                        "create" if ts_type == TIMESTAMP_CREATE_TIME else "log_append",
                    )
                )
    finally:
        c.close()
    return sorted(got, key=lambda x: (x.partition, x.offset))


# ---------------------------------------------------------------- kafka-python


def kafka_python_produce(bootstrap: str, topic: str, recs: list[Out], codec: str, acks: str, idempotence: bool):
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        acks=int(acks) if acks != "all" else "all",
        enable_idempotence=idempotence,
        linger_ms=5,
        request_timeout_ms=int(OP_TIMEOUT_S * 1000),
    )
    try:
        futures = [
            p.send(
                topic,
                key=r.key,
                value=r.value,
                headers=list(r.headers),
                partition=r.partition,
                timestamp_ms=r.timestamp,
            )
            for r in recs
        ]
        p.flush(timeout=OP_TIMEOUT_S)
        out = []
        for f in futures:
            md = f.get(timeout=OP_TIMEOUT_S)
            out.append((md.partition, md.offset))
        return out
    finally:
        p.close(timeout=10)


def kafka_python_consume(bootstrap: str, topic: str, partitions: int, total: int) -> list[Rec]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    got = []
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        c.seek_to_beginning()
        progress = Progress(total)
        while progress.more(len(got)):
            for tp, msgs in c.poll(timeout_ms=500, max_records=5000).items():
                for m in msgs:
                    got.append(
                        Rec(
                            m.partition,
                            m.offset,
                            m.key,
                            m.value,
                            _norm_headers(m.headers),
                            m.timestamp,
                            "create" if m.timestamp_type == 0 else "log_append",
                        )
                    )
    finally:
        c.close()
    return sorted(got, key=lambda x: (x.partition, x.offset))


# ---------------------------------------------------------------- aiokafka


def aiokafka_produce(bootstrap: str, topic: str, recs: list[Out], codec: str, acks: str, idempotence: bool):
    from aiokafka import AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            acks=int(acks) if acks != "all" else "all",
            enable_idempotence=idempotence,
            linger_ms=5,
            request_timeout_ms=int(OP_TIMEOUT_S * 1000),
        )
        await p.start()
        try:
            futs = []
            for r in recs:
                futs.append(
                    await p.send(
                        topic,
                        key=r.key,
                        value=r.value,
                        headers=list(r.headers),
                        partition=r.partition,
                        timestamp_ms=r.timestamp,
                    )
                )
            mds = await asyncio.wait_for(asyncio.gather(*futs), OP_TIMEOUT_S)
            # acks=0: aiokafka resolves each send with None (no broker answer to report).
            return [(r.partition, None) if md is None else (md.partition, md.offset) for r, md in zip(recs, mds)]
        finally:
            await p.stop()

    return bounded(run())


def bounded(coro, timeout_s: float = 2 * OP_TIMEOUT_S):
    """asyncio.run with a bound: aiokafka's start(), send() and seek_to_beginning() wait
    without limit while a broker keeps answering with errors or closing connections."""
    return asyncio.run(asyncio.wait_for(coro, timeout_s))


def aiokafka_consume(bootstrap: str, topic: str, partitions: int, total: int) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    async def run():
        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await c.start()
        got = []
        try:
            c.assign([TopicPartition(topic, p) for p in range(partitions)])
            await c.seek_to_beginning()
            progress = Progress(total)
            while progress.more(len(got)):
                batches = await c.getmany(timeout_ms=500, max_records=5000)
                for tp, msgs in batches.items():
                    for m in msgs:
                        got.append(
                            Rec(
                                m.partition,
                                m.offset,
                                m.key,
                                m.value,
                                _norm_headers(m.headers),
                                m.timestamp,
                                "create" if m.timestamp_type == 0 else "log_append",
                            )
                        )
        finally:
            await c.stop()
        return got

    return sorted(bounded(run()), key=lambda x: (x.partition, x.offset))


PRODUCE = {"confluent": confluent_produce, "kafka-python": kafka_python_produce, "aiokafka": aiokafka_produce}
CONSUME = {"confluent": confluent_consume, "kafka-python": kafka_python_consume, "aiokafka": aiokafka_consume}
# What each client lets a caller send (client-side limits, see compat-tests/ALLOWLIST.md):
# kafka-python refuses headers whose value is None ("must be (str, bytes) tuples");
# kafka-python and aiokafka both refuse a record whose key and value are both None
# ("Need at least one: key or value").
RECORD_SHAPES = {
    "confluent": dict(null_header_values=True, null_key_and_value=True),
    "kafka-python": dict(null_header_values=False, null_key_and_value=False),
    "aiokafka": dict(null_header_values=True, null_key_and_value=False),
}
