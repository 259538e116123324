"""Priority lanes under a flood (issue 20, docs/ai-features.md "Priority lanes").

A `critical` topic produced at a fixed rate (acks=all, one record per request) beside a `low`
topic flooded by several producer processes as fast as librdkafka sends (acks=all, 16 KiB
records). For each mode the broker is started afresh on one shard (both lanes on one gate):

- `unloaded`: the critical producer alone (its p99 is the reference);
- `off`: the flood with both topics at the default lane (what Kafka does: no lanes);
- `adaptive`: the flood with `strom.priority` set, adaptive threshold (the default);
- `static`: the same with `strom.priority.static.threshold.ms=500` (the requirements
  document's static comparison).

Prints, per mode, the critical lane's p50/p99 send→ack latency and the flood's MB/s, and the
ratios to `unloaded` / `off`. Not a test (no pass/fail): figures for closing notes.

  compat-tests/.venv/bin/python benches/quick/priority.py [--seconds S] [--rate R] [--flooders N]

Starts its own brokers through compat-tests/python/brokers.py (STROM_BIN, default
target/release/strom) and stops them by PID.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat-tests" / "python"))

import admin  # noqa: E402
import brokers  # noqa: E402


def flood(bootstrap: str, topic: str, seconds: float, out) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "batch.size": 1 << 20, "queue.buffering.max.kbytes": 65536})
    payload = os.urandom(16384)
    acked = [0]

    def cb(err, _msg):
        if err is None:
            acked[0] += 1

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            p.produce(topic, payload, on_delivery=cb)
        except BufferError:
            p.poll(0.005)
        p.poll(0)
    p.flush(60)
    out.put(acked[0] * len(payload))


def critical(bootstrap: str, topic: str, seconds: float, rate: float) -> list[float]:
    """Send→ack latencies (ms) of records sent on a fixed schedule, measured from each
    record's intended send time (a stalled producer is not hidden)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    lat: list[float] = []
    start = time.monotonic()
    n = int(seconds * rate)
    for i in range(n):
        due = start + i / rate
        while time.monotonic() < due:
            p.poll(max(0.0, min(0.001, due - time.monotonic())))

        def cb(err, _msg, due=due):
            if err is None:
                lat.append((time.monotonic() - due) * 1000)

        p.produce(topic, b"c" * 200, on_delivery=cb)
        p.poll(0)
    p.flush(60)
    return lat


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def run_mode(mode: str, args) -> dict:
    extra = ["--set", f"priority_static_threshold_ms={args.static_ms}"] if mode == "static" else []
    b = brokers.start_strom(shards=1, extra_args=extra)
    try:
        lanes = mode in ("adaptive", "static")
        assert admin.create_topic("confluent", b.bootstrap, "crit", 1,
                                  {"strom.priority": "critical"} if lanes else {}) == 0
        assert admin.create_topic("confluent", b.bootstrap, "low", 4,
                                  {"strom.priority": "low"} if lanes else {}) == 0
        q: mp.Queue = mp.Queue()
        procs = []
        if mode != "unloaded":
            procs = [mp.Process(target=flood, args=(b.bootstrap, "low", args.seconds + 2, q))
                     for _ in range(args.flooders)]
            for pr in procs:
                pr.start()
            time.sleep(2)  # the flood at full pressure before the critical lane is measured
        lat = critical(b.bootstrap, "crit", args.seconds, args.rate)
        flooded = sum(q.get(timeout=120) for _ in procs)
        for pr in procs:
            pr.join(60)
        body = urllib.request.urlopen(f"http://127.0.0.1:{b.extra['metrics_port']}/metrics", timeout=10).read().decode()
        throttled = sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
                        if line.startswith("strom_priority_throttled_total{") and 'lane="low"' in line)
        return {"mode": mode, "low_throttled": throttled, "critical_p50_ms": pct(lat, 0.5), "critical_p99_ms": pct(lat, 0.99),
                "critical_acked": len(lat), "flood_mb_s": flooded / 1e6 / (args.seconds + 2)}
    finally:
        b.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rate", type=float, default=100)
    ap.add_argument("--flooders", type=int, default=4)
    ap.add_argument("--modes", default="unloaded,off,adaptive,static")
    ap.add_argument("--static-ms", type=int, default=500,
                    help="the static mode's threshold (the requirements document's: 500)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    rows = [run_mode(m, args) for m in args.modes.split(",")]
    base = next((r for r in rows if r["mode"] == "unloaded"), None)
    off = next((r for r in rows if r["mode"] == "off"), None)
    print(f"\ncritical: {args.rate:.0f} msg/s acks=all for {args.seconds:.0f} s; "
          f"flood: {args.flooders} producers, 16 KiB acks=all; one shard")
    print(f"{'mode':9} {'p50 ms':>8} {'p99 ms':>8} {'p99/unloaded':>13} {'flood MB/s':>11} {'flood/off':>10} {'throttled':>10}")
    for r in rows:
        ratio = r["critical_p99_ms"] / base["critical_p99_ms"] if base else float("nan")
        fl = r["flood_mb_s"] / off["flood_mb_s"] if off and off["flood_mb_s"] else float("nan")
        print(f"{r['mode']:9} {r['critical_p50_ms']:8.1f} {r['critical_p99_ms']:8.1f} {ratio:13.2f} "
              f"{r['flood_mb_s']:11.1f} {fl:10.2f} {r['low_throttled']:10.0f}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
