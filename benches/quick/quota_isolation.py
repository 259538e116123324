"""Quota isolation (issue 18): one tenant's flood must not raise another tenant's p99.

Two tenants on one broker, each a SCRAM user with a client id of its own, over a
SASL_PLAINTEXT listener: `victim` produces to its own 1-partition topic on a fixed schedule
(acks=all, one record per request), `flood` produces to its own 4-partition topic from
`--flooders` processes as fast as librdkafka sends (acks=1, 16 KiB incompressible records).
Scenarios, one after the other on one broker process:

- `alone`: the victim alone (its p99 is the reference);
- `flood`: the flood beside it, no quota;
- `quota client-id`: the flood's client id has `producer_byte_rate=--quota-mb`;
- `quota user`: that quota removed, the flood's user has the same one instead.

For each: the victim's send→ack latency from each record's *intended* send time (so a
stalled producer is not hidden; coordinated omission corrected), p50/p99/p99.9/max, its
records acknowledged of those due; the flood's MB/s acknowledged while the victim was measured
and the largest throttle time the brokers told each tenant (librdkafka's statistics); the
broker's CPU seconds (/proc). Strom, Kafka 4.4 (and Kafka with log.flush.interval.messages=1
as `kafka-durable`), each started afresh. Quotas are set with Kafka's own kafka-configs tool.

  compat-tests/.venv/bin/python benches/quick/quota_isolation.py [--brokers strom,kafka]
      [--seconds 10] [--rate 1000] [--size 1024] [--flooders 2] [--quota-mb 10] [--warmup 12]
      [--broker-warmup 5] [--quota-on client-id,user] [--strom-shards 2] [--readme]

Writes benches/results/quota_isolation.json and .md; with `--readme` the table also goes into
benches/README.md between the QUOTA-RESULTS markers. Starts its brokers through
compat-tests/python/brokers.py (STROM_BIN, default target/release/strom) and stops them by PID.
The clients run on the broker's machine: a flood without a quota also takes CPU from the
victim's client, which is part of what a quota gives back on a shared host. Timing resolution
~1 ms (the victim's loop polls librdkafka at most 1 ms apart).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results"
sys.path.insert(0, str(HERE.parents[1] / "compat-tests" / "python"))

import brokers  # noqa: E402
import kafka_tools as kt  # noqa: E402

USERS = {"victim": "victim-secret", "flood": "flood-secret"}
MECHANISM = "SCRAM-SHA-512"
FLOOD_VALUE = 16384


def security(durable: bool) -> dict:
    """A SASL_PLAINTEXT listener with the two tenants as SCRAM users (no authorizer: the
    principal is only what the quotas key on)."""
    kafka = {"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
             "org.apache.kafka.common.security.scram.ScramLoginModule required;"}
    if durable:
        kafka["log.flush.interval.messages"] = "1"
    return {
        "listeners": ["SASL_PLAINTEXT"],
        "settings": {"sasl.enabled.mechanisms": MECHANISM},
        "kafka_settings": kafka,
        "users": [(u, p, MECHANISM) for u, p in USERS.items()],
    }


def tenant_conf(bootstrap: str, tenant: str) -> dict:
    return {"bootstrap.servers": bootstrap, "client.id": tenant, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": MECHANISM, "sasl.username": tenant, "sasl.password": USERS[tenant]}


class Throttle:
    """The largest broker `throttle.max` (ms) in librdkafka's statistics."""

    def __init__(self):
        self.max_ms = 0

    def __call__(self, raw: str) -> None:
        for b in json.loads(raw).get("brokers", {}).values():
            self.max_ms = max(self.max_ms, b.get("throttle", {}).get("max", 0))


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": bootstrap})
    for f in a.create_topics([NewTopic(topic, partitions, 1, config=config or {})]).values():
        f.result(timeout=60)
    # Kafka answers CreateTopics before its partitions serve.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        t = a.list_topics(topic, timeout=5).topics.get(topic)
        if t and t.error is None and len(t.partitions) == partitions and all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{topic} not ready in 60 s")


def flood(bootstrap: str, topic: str, start: float, measure: tuple[float, float], end: float, out) -> None:
    """Sends from `start` to `end` (monotonic) as fast as librdkafka takes records; puts (bytes
    acknowledged inside `measure`, largest throttle ms). What is still queued at `end` is
    purged: under a quota it would take minutes to drain."""
    from confluent_kafka import Producer

    throttle = Throttle()
    p = Producer({**tenant_conf(bootstrap, "flood"), "acks": 1, "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 65536, "statistics.interval.ms": 500, "stats_cb": throttle})
    payload = os.urandom(FLOOD_VALUE)
    acked = [0]

    def cb(err, _msg):
        if err is None and measure[0] <= time.monotonic() <= measure[1]:
            acked[0] += FLOOD_VALUE

    while time.monotonic() < start:
        time.sleep(0.01)
    while time.monotonic() < end:
        try:
            p.produce(topic, payload, on_delivery=cb)
        except BufferError:
            p.poll(0.005)
        p.poll(0)
    p.poll(0.6)  # the last statistics interval
    p.purge()
    p.flush(10)
    out.put((acked[0], throttle.max_ms))


def victim_producer(bootstrap: str, topic: str):
    """The victim's producer, connected (SASL, metadata, a first record acknowledged) so that
    none of that is charged to the measured records."""
    from confluent_kafka import Producer

    throttle = Throttle()
    p = Producer({**tenant_conf(bootstrap, "victim"), "acks": "all", "linger.ms": 0,
                  "statistics.interval.ms": 500, "stats_cb": throttle})
    p.produce(topic, b"warm-up")
    if p.flush(30) != 0:
        raise RuntimeError("the victim's warm-up record was not acknowledged in 30 s")
    return p, throttle


def victim(p, throttle: Throttle, topic: str, start: float, seconds: float, rate: float, size: int) -> dict:
    """Send→ack latencies (ms) of records due on a fixed schedule from `start`, from each
    record's intended send time."""
    value = os.urandom(size)
    lat: list[float] = []
    n = int(seconds * rate)
    for i in range(n):
        due = start + i / rate
        while (now := time.monotonic()) < due:
            p.poll(min(0.001, due - now))

        def cb(err, _msg, due=due):
            if err is None:
                lat.append((time.monotonic() - due) * 1000)

        while True:
            try:
                p.produce(topic, value, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    p.flush(60)
    p.poll(0.6)  # the last statistics interval
    lat.sort()

    def q(x: float) -> float:
        return lat[min(len(lat) - 1, int(x * len(lat)))] if lat else float("nan")

    return {"victim_due": n, "victim_acked": len(lat), "victim_p50_ms": q(0.5), "victim_p99_ms": q(0.99),
            "victim_p999_ms": q(0.999), "victim_max_ms": lat[-1] if lat else float("nan"),
            "victim_throttle_max_ms": throttle.max_ms}


def cpu_seconds(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def configs(b, *args: str) -> None:
    r = kt.run("kafka-configs", b.bootstrap, "--alter", *args)
    if r.rc != 0:
        raise RuntimeError(f"kafka-configs {' '.join(args)}: {r.out}{r.err}")


def dirty_mb() -> float:
    """Page cache waiting for the disk (Dirty + Writeback in /proc/meminfo), in MB."""
    kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(("Dirty:", "Writeback:")):
            kb += int(line.split()[1])
    return kb / 1024


def settle_writeback(limit_mb: float = 64, timeout_s: float = 90) -> float:
    """Waits until the previous scenario's flood is on the disk; returns the seconds waited.
    An unthrottled flood leaves GBs of dirty page cache behind, and the next scenario's victim
    (acks=all: an fdatasync per request on Strom) would wait behind its writeback: ext4's
    journal commit in data=ordered mode writes other files' dirty data first. The `alone`
    reference after the warm-up measured that (p99 427 ms with p50 0.4 ms), not the broker."""
    t0 = time.monotonic()
    while dirty_mb() > limit_mb and time.monotonic() - t0 < timeout_s:
        time.sleep(0.2)
    return time.monotonic() - t0


def scenario(b, name: str, sasl: str, args, flood_topic: str, victim_topic: str,
             seconds: float | None = None) -> dict:
    seconds = seconds or args.seconds
    waited = settle_writeback()
    p, throttle = victim_producer(sasl, victim_topic)
    # Spawned, not forked: the parent holds a librdkafka client (threads) by now.
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    # The flood processes start together (a spawned interpreter takes a while to import the
    # client), `warmup` s before the victim's schedule.
    flood_start = time.monotonic() + 2.0
    start = flood_start + (0 if name in ("alone", "warm-up") else args.warmup)
    end = start + seconds
    procs = []
    if name != "alone":
        procs = [ctx.Process(target=flood, args=(sasl, flood_topic, flood_start, (start, end), end + 0.5, q))
                 for _ in range(args.flooders)]
        for pr in procs:
            pr.start()
    cpu0 = cpu_seconds(b.proc.pid)
    row = {"broker": b.name, "scenario": name, **victim(p, throttle, victim_topic, start, seconds, args.rate, args.size)}
    row["broker_cpu_s"] = cpu_seconds(b.proc.pid) - cpu0
    got = [q.get(timeout=120) for _ in procs]
    for pr in procs:
        pr.join(60)
    row["flood_mb_s"] = sum(g[0] for g in got) / 1e6 / seconds if procs else 0.0
    row["flood_throttle_max_ms"] = max((g[1] for g in got), default=0)
    row["writeback_wait_s"] = round(waited, 1)
    print(f"  {b.name} {name}: p50 {row['victim_p50_ms']:.2f} p99 {row['victim_p99_ms']:.2f} ms, "
          f"flood {row['flood_mb_s']:.1f} MB/s, flood throttled up to {row['flood_throttle_max_ms']} ms", flush=True)
    return row


def run_broker(kind: str, args) -> list[dict]:
    sec = security(kind == "kafka-durable")
    b = brokers.start_strom(shards=args.strom_shards, security=sec) if kind == "strom" else brokers.start_kafka(security=sec)
    b.name = kind
    try:
        sasl = f"127.0.0.1:{b.extra['ports']['SASL_PLAINTEXT']}"
        run_id = os.urandom(4).hex()
        flood_topic, victim_topic = f"flood-{run_id}", f"victim-{run_id}"
        # Bounded on disk: an unthrottled flood writes hundreds of MB/s for tens of seconds.
        create_topic(b.bootstrap, flood_topic, 4, {"retention.bytes": str(256 << 20), "segment.bytes": str(64 << 20)})
        create_topic(b.bootstrap, victim_topic, 1)
        quota = f"producer_byte_rate={int(args.quota_mb * 1e6)}"
        if args.broker_warmup > 0:
            # Unreported: a JVM compiles its hot paths in the first seconds of traffic, which
            # would otherwise be charged to the first scenario (the reference).
            scenario(b, "warm-up", sasl, args, flood_topic, victim_topic, seconds=args.broker_warmup)
        rows = [scenario(b, "alone", sasl, args, flood_topic, victim_topic),
                scenario(b, "flood", sasl, args, flood_topic, victim_topic)]
        entity = {"client-id": ["--entity-type", "clients", "--entity-name", "flood"],
                  "user": ["--entity-type", "users", "--entity-name", "flood"]}
        previous = None
        for on in args.quota_on.split(","):
            if previous:
                configs(b, *entity[previous], "--delete-config", "producer_byte_rate")
            configs(b, *entity[on], "--add-config", quota)
            time.sleep(1)  # the quota reaches the broker's quota manager through its metadata
            rows.append(scenario(b, f"quota {on}", sasl, args, flood_topic, victim_topic))
            previous = on
        return rows
    finally:
        b.cleanup()


def table(rows: list[dict], args, load: tuple[float, float]) -> str:
    out = [
        f"Victim: {args.rate:.0f} records/s of {args.size} B, acks=all, 1 partition, for {args.seconds:.0f} s; "
        f"flood: {args.flooders} producer processes, 16 KiB acks=1, 4 partitions, from {args.warmup:.0f} s before; "
        f"quota: producer_byte_rate {args.quota_mb:g} MB/s; Strom with {args.strom_shards} shards. "
        f"Load average (1 min) {load[0]:.2f} at the start, {load[1]:.2f} at the end."
        + (" A short run (under 10 s per scenario, or a flood warm-up inside the 11 quota windows) checks "
           "the setup: its figures are no result." if args.seconds < 10 or args.warmup < 11 else ""),
        "",
        "| broker | scenario | victim p50 ms | p99 | p99.9 | max | p99 / alone | victim acked / due | "
        "victim throttled ms | flood MB/s | flood throttled ms | broker CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        alone = next((x for x in rows if x["broker"] == r["broker"] and x["scenario"] == "alone"), None)
        ratio = r["victim_p99_ms"] / alone["victim_p99_ms"] if alone and alone["victim_p99_ms"] > 0 else float("nan")
        out.append(
            f"| {r['broker']} | {r['scenario']} | {r['victim_p50_ms']:.2f} | {r['victim_p99_ms']:.2f} | "
            f"{r['victim_p999_ms']:.2f} | {r['victim_max_ms']:.2f} | {ratio:.2f} | {r['victim_acked']} / {r['victim_due']} | "
            f"{r['victim_throttle_max_ms']} | {r['flood_mb_s']:.1f} | {r['flood_throttle_max_ms']} | {r['broker_cpu_s']:.1f} |")
    return "\n".join(out) + "\n"


def readme_block(name: str, text: str) -> None:
    readme = HERE.parent / "README.md"
    s = readme.read_text()
    start, end = f"<!-- {name}:START -->", f"<!-- {name}:END -->"
    head, rest = s.split(start, 1)
    _, tail = rest.split(end, 1)
    readme.write_text(f"{head}{start}\n{text}\n{end}{tail}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="strom,kafka", help="strom, kafka, kafka-durable")
    ap.add_argument("--seconds", type=float, default=10, help="the victim's schedule, per scenario")
    ap.add_argument("--rate", type=float, default=1000, help="the victim's records per second")
    ap.add_argument("--size", type=int, default=1024, help="the victim's record value, bytes")
    ap.add_argument("--flooders", type=int, default=2, help="flood producer processes")
    ap.add_argument("--quota-mb", type=float, default=10, help="the flood's producer_byte_rate, MB/s")
    ap.add_argument("--warmup", type=float, default=12,
                    help="seconds of flood before the victim is measured: past the 11 one-second quota "
                         "windows, so a new flood client's first burst is paid off")
    ap.add_argument("--broker-warmup", type=float, default=5,
                    help="seconds of both tenants, unreported, before the first scenario (0: none)")
    ap.add_argument("--quota-on", default="client-id,user", help="the quota scenarios, in order")
    ap.add_argument("--strom-shards", type=int, default=2)
    ap.add_argument("--readme", action="store_true", help="also write the table into benches/README.md")
    args = ap.parse_args()
    for on in args.quota_on.split(","):
        if on not in ("client-id", "user"):
            ap.error(f"--quota-on takes client-id and user, not {on!r}")
    kt.fetch()
    load0 = os.getloadavg()[0]
    rows = []
    for kind in args.brokers.split(","):
        if kind not in ("strom", "kafka", "kafka-durable"):
            ap.error(f"unknown broker {kind!r}")
        print(f"==> {kind}", flush=True)
        rows += run_broker(kind, args)
    load1 = os.getloadavg()[0]
    text = table(rows, args, (load0, load1))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "quota_isolation.json").write_text(json.dumps({"args": vars(args), "load": [load0, load1], "rows": rows}, indent=2) + "\n")
    (RESULTS / "quota_isolation.md").write_text(text)
    if args.readme:
        readme_block("QUOTA-RESULTS", text)
    print()
    print(text)


if __name__ == "__main__":
    main()
