"""Token streams over SSE to many clients (issue 21, docs/ai-features.md "Token streaming over
SSE").

One `strom serve` (2 shards); `--clients` SSE streams (default 100) of one partition, opened
with `?offset=latest` by `--procs` client processes (asyncio, HTTP/1.1 with chunked decoding by
hand, so the client costs as little Python as it can). Once every stream answered, a
confluent-kafka producer sends tokens at each `--rates` value (tokens/s, one record each, the
send time in the value) for `--seconds`. Per rate: tokens delivered per second summed over the
clients (the fan-out), the share of produced tokens every client got, and produce→client
latency p50/p99/max (sampled, ~50 records per client per second, from the send time in the
record to its parse in the client). Not a test (no pass/fail): figures for benches/README.md.

  compat-tests/.venv/bin/python benches/quick/sse.py [--clients 100] [--rates 100,1000,3000]
      [--seconds 8] [--procs 2] [--out benches/results/sse.json]

Starts its own broker through compat-tests/python/brokers.py (STROM_BIN, default
target/release/strom), 127.0.0.1 only, and stops it by PID.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat-tests" / "python"))

import admin  # noqa: E402
import brokers  # noqa: E402


async def one_stream(port: int, path: str, sample_every: int, window, ready, stats) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n", 1)[0], head
    chunked = b"transfer-encoding: chunked" in head.lower()
    ready()
    buf = b""
    try:
        while True:
            if chunked:
                size = int((await reader.readline()).strip() or b"0", 16)
                if size == 0:
                    return
                data = await reader.readexactly(size)
                await reader.readexactly(2)
            else:
                data = await reader.read(65536)
                if not data:
                    return
            buf += data
            *events, buf = buf.split(b"\n\n")
            now_ns = time.time_ns()
            for e in events:
                if b"data:" not in e:
                    continue  # keep-alive comment, retry hint
                if not window[0]:
                    continue
                stats["events"] += 1
                i = e.find(b"id:")
                if i < 0:
                    continue
                offset = int(e[i + 3:e.index(b"\n", i) if b"\n" in e[i:] else None])
                if offset % sample_every == 0:
                    d = e[e.index(b"data:") + 5:].split(b"\n", 1)[0]
                    sent = json.loads(json.loads(d)["value"])["sent_ns"]
                    stats["lat_ms"].append((now_ns - sent) / 1e6)
    except (asyncio.IncompleteReadError, ConnectionError):
        return
    finally:
        writer.close()


def clients(port: int, path: str, n: int, sample_every: int, ready_q, ctl_q, out_q) -> None:
    """`n` streams in one process; counts while the window is open (ctl_q: "start", "stop")."""
    async def run() -> None:
        window = [False]
        stats = {"events": 0, "lat_ms": []}
        ready_n = [0]

        def ready() -> None:
            ready_n[0] += 1
            if ready_n[0] == n:
                ready_q.put(n)

        tasks = [asyncio.create_task(one_stream(port, path, sample_every, window, ready, stats))
                 for _ in range(n)]
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, ctl_q.get) == "start"
        window[0] = True
        assert await loop.run_in_executor(None, ctl_q.get) == "stop"
        window[0] = False
        for t in tasks:
            t.cancel()
        out_q.put(stats)

    asyncio.run(run())


def produce(bootstrap: str, topic: str, rate: float, seconds: float) -> int:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 1})
    sent, start = 0, time.monotonic()
    while (elapsed := time.monotonic() - start) < seconds:
        due = int(elapsed * rate) + 1
        while sent < due:
            value = json.dumps({"token": f"tok{sent}", "chunk_token_offset": sent, "sent_ns": time.time_ns()})
            p.produce(topic, key="conv", value=value, partition=0)
            sent += 1
        p.poll(0)
        time.sleep(0.002)
    assert p.flush(30) == 0
    return sent


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 1) if xs else float("nan")


def run_rate(b, args, rate: float) -> dict:
    topic = f"sse-bench-{int(rate)}-{time.time_ns() % 10**6}"
    assert admin.create_topic("confluent", b.bootstrap, topic, 1) == 0
    port = b.extra["metrics_port"]
    path = f"/v1/topics/{topic}/partitions/0/stream?offset=latest"
    sample_every = max(1, int(rate // 50))
    ctx = mp.get_context("spawn")
    ready_q, out_q = ctx.Queue(), ctx.Queue()
    per = [args.clients // args.procs + (1 if i < args.clients % args.procs else 0) for i in range(args.procs)]
    ctls = [ctx.Queue() for _ in per]
    procs = [ctx.Process(target=clients, args=(port, path, n, sample_every, ready_q, c, out_q))
             for n, c in zip(per, ctls)]
    for p in procs:
        p.start()
    assert sum(ready_q.get(timeout=120) for _ in procs) == args.clients
    for c in ctls:
        c.put("start")
    t0 = time.monotonic()
    sent = produce(b.bootstrap, topic, rate, args.seconds)
    produced_s = time.monotonic() - t0
    time.sleep(args.drain)  # what is in flight reaches the clients
    for c in ctls:
        c.put("stop")
    stats = [out_q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    events = sum(s["events"] for s in stats)
    lat = [x for s in stats for x in s["lat_ms"]]
    return {
        "rate_target": rate,
        "clients": args.clients,
        "produced": sent,
        "produced_per_s": round(sent / produced_s, 1),
        "delivered": events,
        "delivered_share": round(events / (sent * args.clients), 4),
        "delivered_per_s": round(events / produced_s, 1),
        "latency_samples": len(lat),
        "p50_ms": pct(lat, 0.50),
        "p99_ms": pct(lat, 0.99),
        "max_ms": pct(lat, 1.0),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--rates", default="100,1000,3000")
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--drain", type=float, default=3)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    b = brokers.start_strom(shards=2)
    rows = []
    try:
        for rate in [float(r) for r in args.rates.split(",")]:
            row = run_rate(b, args, rate)
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        b.cleanup()
    if args.out:
        Path(args.out).write_text(json.dumps({"strom_bin": str(brokers.STROM_BIN.name), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
