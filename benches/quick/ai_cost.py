"""What the per-record AI features cost at produce (issues 20 and 21, docs/ai-features.md).

One broker (one shard, so its CPU is one thread's work), one topic per feature, the same
records produced to each by several librdkafka producer processes (acks=1: the append path
without fdatasync, so the feature's own work is not hidden behind the disk):

- `plain`: no feature (the reference);
- `dedup`: `strom.dedup.header=msg-id`, a window of 1M ids (`strom.dedup.max.ids`, the
  issue's figure), every record a new id (the worst case: every id inserted, and once the
  window is full every insert evicts one);
- `ttl`: `strom.ttl.header=ttl-ms` (every record of every mode carries a 10-minute `ttl-ms`
  header, so only the feature differs);
- `priority`: `strom.priority=critical` (one lane busy at a time, so nothing is throttled:
  what the gate's bookkeeping costs);
- `embed_f32`: `strom.embedding.format=f32le`, dimension 384, normalized;
- `embed_json`: `strom.embedding.format=json` at `/embedding`, dimension 384, normalized;
- `redact`: `strom.redact.rules=email,phone` over the value (JSON text with an e-mail address
  and a phone number per record: every record rewritten, every batch re-encoded).

The values are the same 384-float vectors for every mode (f32le, or JSON with the vector and a
text field for the JSON modes), so MB/s compare. Prints per mode the records/s, MB/s and the
broker's CPU seconds per GB produced (utime + stime of its process from /proc, which is
steadier than throughput on a shared machine), and each as a ratio to `plain`. Not a test.

  compat-tests/.venv/bin/python benches/quick/ai_cost.py [--seconds S] [--producers N] [--rounds R]

Starts its own broker through compat-tests/python/brokers.py (STROM_BIN, default
target/release/strom) and stops it by PID.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat-tests" / "python"))

import admin  # noqa: E402
import brokers  # noqa: E402

DIM = 384
MODES = {
    "plain": ("f32", {}),
    "dedup": ("f32", {"strom.dedup.header": "msg-id", "strom.dedup.max.ids": "1000000"}),
    "ttl": ("f32", {"strom.ttl.header": "ttl-ms"}),
    "priority": ("f32", {"strom.priority": "critical"}),
    "embed_f32": ("f32", {"strom.embedding.format": "f32le", "strom.embedding.dimension": str(DIM),
                          "strom.embedding.normalized": "true"}),
    "plain_json": ("json", {}),
    "embed_json": ("json", {"strom.embedding.format": "json", "strom.embedding.field": "/embedding",
                            "strom.embedding.dimension": str(DIM), "strom.embedding.normalized": "true"}),
    "redact": ("json", {"strom.redact.rules": "email,phone"}),
}


def values(kind: str, n: int = 64) -> list[bytes]:
    """`n` unit vectors, as raw f32le or as JSON documents carrying PII."""
    out = []
    for i in range(n):
        v = [((i * 31 + j * 7) % 97) / 97.0 + 0.01 for j in range(DIM)]
        norm = sum(x * x for x in v) ** 0.5
        v = [x / norm for x in v]
        if kind == "f32":
            out.append(struct.pack(f"<{DIM}f", *v))
        else:
            doc = {"text": f"call +1 415 555 01{i % 100:02d} or mail user{i}@example.com",
                   "embedding": [round(x, 6) for x in v]}
            out.append(json.dumps(doc).encode())
    return out


def produce(bootstrap: str, topic: str, kind: str, seconds: float, out) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                  "batch.size": 1 << 20, "queue.buffering.max.kbytes": 65536})
    vals = values(kind)
    acked = [0, 0]

    def cb(err, msg):
        if err is None:
            acked[0] += 1
            acked[1] += len(msg.value())

    pid = os.getpid()
    i = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            p.produce(topic, vals[i % len(vals)], headers=[("msg-id", f"{pid}-{i}".encode()), ("ttl-ms", b"600000")], on_delivery=cb)
            i += 1
        except BufferError:
            p.poll(0.005)
        p.poll(0)
    p.flush(60)
    out.put(tuple(acked))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_mode(b, mode: str, args, created: set) -> dict:
    kind, configs = MODES[mode]
    topic = f"cost-{mode}"
    if topic not in created:
        assert admin.create_topic("confluent", b.bootstrap, topic, 4, configs) == 0
        created.add(topic)
    q: mp.Queue = mp.Queue()
    procs = [mp.Process(target=produce, args=(b.bootstrap, topic, kind, args.seconds, q))
             for _ in range(args.producers)]
    cpu0, t0 = cpu_seconds(b.proc.pid), time.monotonic()
    for pr in procs:
        pr.start()
    got = [q.get(timeout=args.seconds + 120) for _ in procs]
    elapsed = time.monotonic() - t0
    cpu = cpu_seconds(b.proc.pid) - cpu0
    for pr in procs:
        pr.join(60)
    records, nbytes = sum(g[0] for g in got), sum(g[1] for g in got)
    return {"mode": mode, "records_s": records / elapsed, "mb_s": nbytes / 1e6 / elapsed,
            "cpu_s_per_gb": cpu / (nbytes / 1e9) if nbytes else float("nan"), "records": records,
            "load1": os.getloadavg()[0]}


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every mode this many times, interleaved; ratios are per round, "
                         "then the median (a shared machine's load drifts between modes)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    modes = args.modes.split(",")
    b = brokers.start_strom(shards=1)
    created: set = set()
    rounds = []
    try:
        for _ in range(args.rounds):
            rounds.append({m: run_mode(b, m, args, created) for m in modes})
    finally:
        b.cleanup()
    base_of = {"f32": "plain", "json": "plain_json"}
    print(f"\n{args.producers} producers × {args.seconds:.0f} s per mode × {args.rounds} rounds, acks=1, "
          f"{DIM}-float values, one shard; medians over rounds, ratios per round then median")
    print(f"{'mode':11} {'records/s':>10} {'MB/s':>8} {'CPU s/GB':>9} {'CPU/plain':>10} {'MB/s/plain':>11} {'load1':>6}")
    summary = []
    for m in modes:
        rows = [r[m] for r in rounds]
        base = base_of[MODES[m][0]]
        cpu_ratio = median([r[m]["cpu_s_per_gb"] / r[base]["cpu_s_per_gb"] for r in rounds]) \
            if base in modes else float("nan")
        mb_ratio = median([r[m]["mb_s"] / r[base]["mb_s"] for r in rounds]) if base in modes else float("nan")
        row = {"mode": m, **{k: median([r[k] for r in rows]) for k in ("records_s", "mb_s", "cpu_s_per_gb", "load1")},
               "cpu_ratio": cpu_ratio, "mb_ratio": mb_ratio, "rounds": rows}
        summary.append(row)
        print(f"{m:11} {row['records_s']:10.0f} {row['mb_s']:8.1f} {row['cpu_s_per_gb']:9.2f} "
              f"{cpu_ratio:10.2f} {mb_ratio:11.2f} {row['load1']:6.1f}")
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
