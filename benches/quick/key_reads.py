"""Session reads by key against a scan (issue 21, docs/ai-features.md "Session reads by key").

One `strom serve` (1 shard) in a temp data dir; a 1-partition topic with
`strom.key.index=true`; `--records` records (default 10M, ~100-byte values) over `--keys`
session keys (default 100k, the index's per-partition bound) produced by confluent-kafka as
fast as it goes (lz4, `--batch-bytes` batches). Then, for `--last` N values (default 4 and 64):

- **key read**: `GET /v1/topics/{topic}/keys/{key}/records?last=N` over one kept-alive
  connection for `--samples` random keys (default 300): latency p50/p99/max;
- **after a restart**: the broker is stopped (SIGTERM) and started on the same data dir; the
  first key read rebuilds the partition's index from the log, so its time is the rebuild
  (the broker logs it as `key index built from the log ... elapsed_ms`), the second is a
  normal read. Meanwhile a producer sends one record at a time (acks=1, each awaited) to
  another topic, `other`, on the same shard: how many complete while the first read waits
  for the build, and their latency p50/p99/max — the build steps through the log and
  yields between steps, so the shard's other partitions go on being served;
- **scan**: what a Kafka client must do without the index — a consumer assigned to the
  partition from offset 0 reads to the high watermark and keeps the key's last N records
  (`--scans` full scans, default 2, each for another key).

Each scan's answer is checked against the key read's (same offsets). Prints one JSON line
per measurement and a table with the ratio scan / key read p50. Not a test (no pass/fail):
figures for benches/README.md.

  compat-tests/.venv/bin/python benches/quick/key_reads.py [--records 10000000]
      [--keys 100000] [--last 4,64] [--samples 300] [--scans 2] [--batch-bytes 16384]

A smoke run: `--records 100000 --keys 1000`. Starts its own broker through
compat-tests/python/brokers.py (STROM_BIN, default target/release/strom), 127.0.0.1 only,
stops it by PID and removes its data.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat-tests" / "python"))

import admin  # noqa: E402
import brokers  # noqa: E402

TOPIC = "sessions"
OTHER = "other"


def key_of(i: int) -> str:
    return f"session-{i:06d}"


def produce(bootstrap: str, records: int, keys: int, batch_bytes: int) -> float:
    """Record i has key `key_of(i % keys)` and a value starting with i: ~100 bytes."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 50,
                  "batch.size": batch_bytes, "compression.type": "lz4",
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576})
    pad = "x" * 84
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                p.produce(TOPIC, key=key_of(i % keys), value=f"turn {i:010d} {pad}", partition=0)
                break
            except BufferError:
                p.poll(0.05)  # the local queue is full: let deliveries drain it
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(300) == 0, "records not acknowledged"
    return time.monotonic() - started


class OtherProducer(threading.Thread):
    """Produces one record at a time to OTHER (acks=1, each awaited) until stopped."""

    def __init__(self, bootstrap: str):
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
        self.one()  # connected, metadata known: the loop measures produces only
        self.stop = threading.Event()
        self.latencies_ms: list[float] = []

    def one(self) -> float:
        t = time.perf_counter()
        self.p.produce(OTHER, value=b"x" * 100, partition=0)
        assert self.p.flush(60) == 0, "produce to the other topic not acknowledged"
        return time.perf_counter() - t

    def run(self) -> None:
        while not self.stop.is_set():
            self.latencies_ms.append(self.one() * 1e3)


class KeyReader:
    """One kept-alive HTTP/1.1 connection to the admin port."""

    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def read(self, key: str, last: int) -> tuple[float, list[int]]:
        t = time.perf_counter()
        self.conn.request("GET", f"/v1/topics/{TOPIC}/keys/{key}/records?last={last}")
        r = self.conn.getresponse()
        body = r.read()
        elapsed = time.perf_counter() - t
        assert r.status == 200, (r.status, body[:300])
        return elapsed, [rec["offset"] for rec in json.loads(body)["records"]]

    def close(self) -> None:
        self.conn.close()


def scan(bootstrap: str, key: str, last: int) -> tuple[float, list[int], int]:
    """The last `last` records of `key` by reading the whole partition; (seconds, offsets,
    records read)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "key-reads-scan",
                  "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
                  "max.partition.fetch.bytes": 16 << 20, "queued.max.messages.kbytes": 262_144})
    try:
        started = time.monotonic()
        _, hw = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
        c.assign([TopicPartition(TOPIC, 0, 0)])
        want = key.encode()
        kept: deque[int] = deque(maxlen=last)
        seen, offset = 0, -1
        deadline = started + 1800
        while offset < hw - 1:
            assert time.monotonic() < deadline, f"scan stuck at {offset} of {hw}"
            for m in c.consume(num_messages=10_000, timeout=1.0):
                if m.error():
                    continue
                seen += 1
                offset = m.offset()
                if m.key() == want:
                    kept.append(offset)
        return time.monotonic() - started, list(kept), seen
    finally:
        c.close()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def emit(row: dict) -> dict:
    print(json.dumps(row), flush=True)
    return row


def index_build_ms(log: Path) -> int | None:
    """The last `key index built from the log` line's elapsed_ms in the broker's log."""
    ms = None
    for line in log.read_text(errors="replace").splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)  # the log's colours
        if "key index built from the log" in line and "elapsed_ms=" in line:
            ms = int(line.split("elapsed_ms=")[1].split()[0].strip(","))
    return ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--last", default="4,64")
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--scans", type=int, default=2)
    ap.add_argument("--seed", type=int, default=21)
    # A key read decompresses the whole batch holding each record it returns, so the batch
    # size is what its cost follows; 16 KiB is the Java producer's default batch.size.
    ap.add_argument("--batch-bytes", type=int, default=16384)
    args = ap.parse_args()
    lasts = [int(n) for n in args.last.split(",")]
    rng = random.Random(args.seed)
    data = Path(tempfile.mkdtemp(prefix="strom-bench-keys-"))
    b = brokers.start_strom(shards=1, data_dir=data)
    rows = []
    try:
        assert admin.create_topic("confluent", b.bootstrap, TOPIC, 1, {"strom.key.index": "true"}) == 0
        assert admin.create_topic("confluent", b.bootstrap, OTHER, 1, {}) == 0
        secs = produce(b.bootstrap, args.records, args.keys, args.batch_bytes)
        size = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
        rows.append(emit({"step": "produce", "records": args.records, "keys": args.keys,
                          "batch_bytes": args.batch_bytes,
                          "seconds": round(secs, 1), "records_per_s": round(args.records / secs),
                          "data_dir_mb": round(size / 1e6)}))
        port = b.extra["metrics_port"]
        reader = KeyReader(port)
        answers: dict[int, list] = {n: [] for n in lasts}
        for n in lasts:
            lat, sample = [], [key_of(rng.randrange(args.keys)) for _ in range(args.samples)]
            for k in sample:
                t, offsets = reader.read(k, n)
                assert len(offsets) == min(n, args.records // args.keys), (k, offsets)
                lat.append(t * 1e3)
                answers[n].append((k, offsets))
            rows.append(emit({"step": "key read", "last": n, "samples": len(lat),
                              "p50_ms": round(pct(lat, 0.5), 2), "p99_ms": round(pct(lat, 0.99), 2),
                              "max_ms": round(max(lat), 2)}))
        reader.close()

        # Restart on the same data: the index is not persisted, the first read rebuilds it.
        b.cleanup()  # its work dir (log, config); the data dir is ours
        b = brokers.start_strom(shards=1, data_dir=data)
        b.wait_ready(serving=True)
        reader = KeyReader(b.extra["metrics_port"])
        k = key_of(rng.randrange(args.keys))
        other = OtherProducer(b.bootstrap)
        other.start()
        first, offsets = reader.read(k, lasts[0])
        other.stop.set()
        other.join()
        during = other.latencies_ms
        second, again = reader.read(k, lasts[0])
        assert offsets == again and offsets, (offsets, again)
        reader.close()
        rows.append(emit({"step": "first key read after restart", "last": lasts[0],
                          "ms": round(first * 1e3, 1), "index_build_ms": index_build_ms(b.log_path),
                          "second_read_ms": round(second * 1e3, 2),
                          "other_produces_during": len(during),
                          "other_produce_p50_ms": round(pct(during, 0.5), 2) if during else None,
                          "other_produce_p99_ms": round(pct(during, 0.99), 2) if during else None,
                          "other_produce_max_ms": round(max(during), 2) if during else None}))

        for i in range(args.scans):
            n = lasts[i % len(lasts)]
            k, want = answers[n][i]
            secs, got, seen = scan(b.bootstrap, k, n)
            assert got == want, f"scan found {got}, the key read {want}"
            assert seen == args.records, (seen, args.records)
            rows.append(emit({"step": "scan", "last": n, "key": k, "seconds": round(secs, 2),
                              "records_read": seen, "records_per_s": round(seen / secs)}))
    finally:
        b.cleanup()
        shutil.rmtree(data, ignore_errors=True)

    reads = {r["last"]: r for r in rows if r["step"] == "key read"}
    print(f"\n{args.records:,} records, {args.keys:,} keys, 1 partition, batch.size {args.batch_bytes:,} (lz4)")
    print(f"{'last':>5} | {'key read p50':>12} | {'p99':>8} | {'scan':>9} | {'scan / key read p50':>19}")
    for r in (r for r in rows if r["step"] == "scan"):
        kr = reads[r["last"]]
        print(f"{r['last']:>5} | {kr['p50_ms']:>9.2f} ms | {kr['p99_ms']:>5.2f} ms | "
              f"{r['seconds']:>7.2f} s | {r['seconds'] * 1e3 / kr['p50_ms']:>18,.0f}x")
    restart = next(r for r in rows if r["step"].startswith("first"))
    print(f"first key read after a restart (index rebuilt from the log): {restart['ms']:,.0f} ms "
          f"(broker: build {restart['index_build_ms']} ms); the next read {restart['second_read_ms']} ms")
    print(f"meanwhile {restart['other_produces_during']} produces to another topic on the shard, "
          f"p50 {restart['other_produce_p50_ms']} ms, p99 {restart['other_produce_p99_ms']} ms, "
          f"max {restart['other_produce_max_ms']} ms")


if __name__ == "__main__":
    main()
