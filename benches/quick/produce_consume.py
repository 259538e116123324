"""Quick side-by-side throughput: the same librdkafka (confluent-kafka) producer and consumer
against Strom and Apache Kafka, one after the other in one run, on 127.0.0.1.

Not a test (no pass/fail): figures for closing notes until the full harness (issue 7) lands.

  compat-tests/.venv/bin/python benches/quick/produce_consume.py [--records N] [--size B]

Starts its own brokers through compat-tests/python/brokers.py and stops them by PID.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat-tests" / "python"))

import admin  # noqa: E402
import brokers  # noqa: E402


def produce(bootstrap: str, topic: str, n: int, size: int, acks: str) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                  "enable.idempotence": acks == "all"})
    payload = b"x" * size
    errors = []
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, on_delivery=lambda e, m: e and errors.append(e))
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0 and not errors, errors[:3]
    return time.perf_counter() - t0


def consume(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, t0 = 0, time.perf_counter()
    while got < n and time.perf_counter() - t0 < 120:
        msgs = c.consume(10000, 1.0)
        got += sum(1 for m in msgs if not m.error())
    dt = time.perf_counter() - t0
    c.close()
    assert got >= n, f"consumed {got} of {n}"
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--brokers", default="strom,kafka")
    args = ap.parse_args()
    rows = []
    for name in args.brokers.split(","):
        b = brokers.start_strom() if name == "strom" else brokers.start_kafka()
        try:
            admin.wait_for(lambda: admin.create_topic("confluent", b.bootstrap, "warm", 1) in (0, 36),
                           f"{name} ready", timeout_s=60)
            for acks in ("1", "all"):
                topic = f"bench-{acks}"
                assert admin.create_topic("confluent", b.bootstrap, topic, args.partitions) == 0
                pt = produce(b.bootstrap, topic, args.records, args.size, acks)
                ct = consume(b.bootstrap, topic, args.partitions, args.records)
                mb = args.records * args.size / 1e6
                rows.append((name, acks, args.records / pt, mb / pt, args.records / ct, mb / ct))
        finally:
            b.cleanup()
    print(f"\n{args.records} records of {args.size} B, {args.partitions} partitions, librdkafka, 127.0.0.1")
    print(f"{'broker':8} {'acks':5} {'produce msg/s':>14} {'MB/s':>8} {'consume msg/s':>14} {'MB/s':>8}")
    for r in rows:
        print(f"{r[0]:8} {r[1]:5} {r[2]:14.0f} {r[3]:8.1f} {r[4]:14.0f} {r[5]:8.1f}")


if __name__ == "__main__":
    main()
