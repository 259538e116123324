"""Partition reassignment under load (issue 17), Strom and Apache Kafka 4.4 alike: on a 3-node
cluster, an RF=2 partition holding `--gb` GiB of records moves its follower to the third node
with Kafka's own `kafka-reassign-partitions` (`--execute`, then `--verify` until complete),
while an idempotent acks=all producer sends `--rate` records/s of 1 KiB to that partition.
Reported: MB/s moved (the partition's log bytes over the time from `--execute` to `--verify`
saying complete), and the producer's ack latency p50/p99/max before the move and during it.

    compat-tests/.venv/bin/python benches/quick/reassign.py [--brokers strom,kafka]
        [--gb 1] [--rate 500] [--throttle BYTES_PER_S] [--strom-shards 2] [--out FILE.json]

The clusters are compat-tests/python/brokers.py's `start_cluster` (failover.py says why);
Strom with `STROM_BIN` (default target/release/strom). A partition is filled by one
librdkafka producer with acks=1 and 64 KiB values (fast, uncompressed), so `--gb 1` takes
a minute or so per broker on two cores; the move itself is what is timed.

Every wait is bounded; everything runs on 127.0.0.1; each node is stopped by its own PID.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "compat-tests" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import brokers  # noqa: E402  (compat-tests/python, added to the path above)
import kafka_tools  # noqa: E402
from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from failover import QUIET, wait_for  # noqa: E402  (benches/quick)

NODES = 3
TOPIC = "moving"
FILL_VALUE = 64 * 1024
PROBE_VALUE = 1024


def leader_and_replicas(bootstrap):
    t = AdminClient({"bootstrap.servers": bootstrap, **QUIET}).list_topics(topic=TOPIC, timeout=5).topics.get(TOPIC)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    md = t.partitions[0]
    return md if md.leader >= 0 and len(md.isrs) == len(md.replicas) else None


def fill(bootstrap, total):
    """`total` bytes of values into partition 0, acks=1, as fast as librdkafka sends them."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.kbytes": 256 * 1024, "message.max.bytes": 2 << 20, **QUIET})
    value = os.urandom(FILL_VALUE)
    sent = 0
    while sent < total:
        try:
            producer.produce(TOPIC, value=value, partition=0)
            sent += FILL_VALUE
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    if producer.flush(300) != 0:
        raise TimeoutError("the fill producer did not deliver everything in 300 s")


class Latencies:
    """(sent at, acked at) of the probe producer's records, and its errors."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []
        self.errors = 0

    def callback(self, sent_at):
        def delivered(err, _msg):
            now = time.monotonic()
            with self.lock:
                if err:
                    self.errors += 1
                else:
                    self.items.append((sent_at, now))
        return delivered

    def window(self, start, end):
        """Ack latencies in ms of the records sent in [start, end): p50, p99, max, count."""
        with self.lock:
            ms = sorted((a - s) * 1000 for s, a in self.items if start <= s < end)
        if not ms:
            return {"p50_ms": None, "p99_ms": None, "max_ms": None, "records": 0}
        return {"p50_ms": round(statistics.median(ms), 2), "p99_ms": round(ms[int(0.99 * (len(ms) - 1))], 2),
                "max_ms": round(ms[-1], 2), "records": len(ms)}


def probe(bootstrap, rate, latencies, stop):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0, "message.timeout.ms": 120000, **QUIET})
    value = b"p" * PROBE_VALUE
    interval = 1.0 / rate
    next_at = time.monotonic()
    while not stop.is_set():
        now = time.monotonic()
        if now < next_at:
            producer.poll(min(next_at - now, 0.01))
            continue
        next_at += interval
        try:
            producer.produce(TOPIC, value=value, partition=0, on_delivery=latencies.callback(now))
        except BufferError:
            pass
        producer.poll(0)
    producer.flush(120)


def log_bytes(node):
    return sum(f.stat().st_size for f in (node.workdir / "data" / f"{TOPIC}-0").glob("*.log"))


def measure(kind, gb, rate, throttle, shards):
    result = {"broker": kind, "gb": gb, "rate": rate, "throttle": throttle, "note": ""}
    cluster = brokers.start_cluster(kind, NODES, shards=shards)
    stop = threading.Event()
    latencies = Latencies()
    prober = None
    bootstrap = ",".join(n.bootstrap for n in cluster)
    work = Path(tempfile.mkdtemp(prefix="strom-bench-reassign-"))
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        wait_for("every broker in Metadata", lambda: len(admin.list_topics(timeout=5).brokers) == NODES, 120)
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=2,
                                      config={"min.insync.replicas": "2", "max.message.bytes": str(2 << 20)})]
                            )[TOPIC].result(timeout=60)
        md = wait_for("the partition in sync", lambda: leader_and_replicas(bootstrap), 60)
        started = time.monotonic()
        fill(bootstrap, int(gb * (1 << 30)))
        md = wait_for("the partition in sync after the fill", lambda: leader_and_replicas(bootstrap), 300)
        result["fill_s"] = round(time.monotonic() - started, 1)
        size = log_bytes(cluster[md.leader - 1])
        result["partition_mb"] = round(size / 1e6, 1)
        follower = next(r for r in md.replicas if r != md.leader)
        spare = next(i for i in range(1, NODES + 1) if i not in md.replicas)
        target = [md.leader, spare]
        plan = work / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0,
                                                                  "replicas": target}]}))
        prober = threading.Thread(target=probe, args=(bootstrap, rate, latencies, stop))
        prober.start()
        time.sleep(10)
        execute = ["--execute", "--reassignment-json-file", str(plan)]
        if throttle:
            execute += ["--throttle", str(throttle)]
        moved_at = time.monotonic()
        kafka_tools.ok(kafka_tools.run("kafka-reassign-partitions", bootstrap, *execute))

        def completed():
            out = kafka_tools.run("kafka-reassign-partitions", bootstrap, "--verify",
                                  "--reassignment-json-file", str(plan)).out
            return f"Reassignment of partition {TOPIC}-0 is completed." in out
        wait_for("--verify to say the move completed", completed, 3600)
        done_at = time.monotonic()
        time.sleep(5)
        result["moved_s"] = round(done_at - moved_at, 1)
        result["moved_mb_per_s"] = round(size / 1e6 / (done_at - moved_at), 1)
        result["before"] = latencies.window(moved_at - 10, moved_at)
        result["during"] = latencies.window(moved_at, done_at)
        result["after"] = latencies.window(done_at, done_at + 5)
        print(f"{kind}: {size / 1e6:.0f} MB moved from node {follower} to node {spare} in {done_at - moved_at:.1f} s "
              f"({result['moved_mb_per_s']} MB/s); probe p99 before {result['before']['p99_ms']} ms, during "
              f"{result['during']['p99_ms']} ms", flush=True)
    except (TimeoutError, AssertionError, brokers.BrokerStartError, KafkaException) as e:
        result["note"] = str(e).splitlines()[0][:300]
        print(f"{kind}: {e}", flush=True)
    finally:
        stop.set()
        if prober is not None:
            prober.join(150)
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    result["probe_errors"] = latencies.errors
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="strom,kafka", help="strom and/or kafka, comma-separated")
    ap.add_argument("--gb", type=float, default=1.0, help="GiB in the partition before the move")
    ap.add_argument("--rate", type=int, default=500, help="probe records per second during the move")
    ap.add_argument("--throttle", type=int, default=0, help="kafka-reassign-partitions --throttle, B/s (0: none)")
    ap.add_argument("--strom-shards", type=int, default=2, help="shards of each Strom node")
    ap.add_argument("--out", type=Path, default=ROOT / "benches" / "results" / "cluster-reassign.json")
    a = ap.parse_args()
    runs = []
    for kind in [b for b in a.brokers.split(",") if b]:
        if kind not in ("strom", "kafka"):
            ap.error(f"unknown broker {kind}")
        runs.append(measure(kind, a.gb, a.rate, a.throttle, a.strom_shards))
        # Written after each broker, so a run cut short keeps what it measured.
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
                                     "reassign": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
