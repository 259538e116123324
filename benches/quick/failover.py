"""Failover time of a 3-node cluster (issue 16), Strom and Apache Kafka 4.4 alike: under an
idempotent acks=all producer (confluent-kafka) sending to every partition of an RF=3 topic
(min.insync.replicas 2), `--cycles` times kill -9 the leader of one partition and time how
long until every partition it led has an acknowledged write again — on its new leader, since
the old one is dead. Then restart the node on its data, wait until every ISR is full again and
the producer is acknowledged, and go on to the next cycle.

    compat-tests/.venv/bin/python benches/quick/failover.py [--brokers strom,kafka]
        [--cycles 10] [--partitions 3] [--strom-shards 2] [--out FILE.json]

benches/cluster.sh runs it after the throughput runs; `strom-bench report` renders the JSON it
writes. The clusters are compat-tests/python/brokers.py's `start_cluster` (the ones
test_cluster.py kills and checks for lost records): Strom with `STROM_BIN` (default
target/release/strom), Kafka through compat-tests/kafka/kafka.sh `node`, with
`broker.session.timeout.ms` 3000 and `broker.heartbeat.interval.ms` 500 — Strom's fixed
session, so both detect the dead node after the same 3 s (Kafka's default 9 s would add ~6 s
to each of its figures). A Python script rather than strom-bench: killing and restarting
nodes needs their command lines, which brokers.py already keeps; the client is the same
librdkafka either way.

Every wait is bounded; everything runs on 127.0.0.1; each node is stopped by its own PID.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "compat-tests" / "python"))

import brokers  # noqa: E402  (compat-tests/python, added to the path above)
from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

NODES = 3
TOPIC = "failover"
# librdkafka's connection-refused and disconnect lines (syslog levels 3–6) are what a kill is
# expected to cause; errors that matter reach the delivery reports (counted) or a timeout.
QUIET = {"log_level": 2}


def wait_for(what, check, timeout_s=30.0):
    """`check()` until it returns something true; a client error counts as "not yet"."""
    deadline = time.monotonic() + timeout_s
    last_error = None
    while time.monotonic() < deadline:
        try:
            v = check()
        except KafkaException as e:
            v, last_error = None, e
        if v:
            return v
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}"
                       + (f" (last error: {last_error})" if last_error else ""))


def partition_md(bootstrap, p):
    t = AdminClient({"bootstrap.servers": bootstrap, **QUIET}).list_topics(topic=TOPIC, timeout=5).topics.get(TOPIC)
    if t is None or t.error is not None or p not in t.partitions:
        return None
    return t.partitions[p]


def wait_isr(cluster, p, size, timeout_s=60.0):
    """Partition `p` with a leader and an ISR of `size`, as every live node tells it."""
    def check():
        last = None
        for n in cluster:
            if not n.alive():
                continue
            md = partition_md(n.bootstrap, p)
            if md is None or md.leader < 0 or len(md.isrs) != size:
                return None
            last = md
        return last
    return wait_for(f"{TOPIC}-{p} with an ISR of {size}", check, timeout_s)


class Acks:
    """When each acknowledgement was heard (partition, time.monotonic()), and the errors."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []
        self.errors = 0

    def __len__(self):
        with self.lock:
            return len(self.items)

    def delivered(self, err, msg):
        with self.lock:
            if err:
                self.errors += 1
            else:
                self.items.append((msg.partition(), time.monotonic()))

    def first_after(self, index, t, partitions):
        """The latest of the first acks (past `index`, heard after `t`) of each of
        `partitions`: when all of them took writes again; None until then."""
        with self.lock:
            tail = self.items[index:]
        first = {}
        for p, at in tail:
            if at > t and p in partitions and p not in first:
                first[p] = at
        return max(first.values()) if len(first) == len(partitions) else None


def produce(cluster, partitions, acks, stop):
    """Round-robin over the partitions, one record every ~2 ms: an ack lands on each
    partition every few ms, which bounds the resolution of the figures."""
    producer = Producer({"bootstrap.servers": ",".join(n.bootstrap for n in cluster),
                         "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 500,
                         "topic.metadata.refresh.interval.ms": 1000, **QUIET})
    i = 0
    while not stop.is_set():
        try:
            producer.produce(TOPIC, value=b"x" * 100, partition=i % partitions, on_delivery=acks.delivered)
            i += 1
        except BufferError:
            pass
        producer.poll(0.002)
    producer.flush(60)


def measure(kind, cycles, partitions, shards):
    """One cluster of `kind`: the failover seconds of each cycle, and what went wrong."""
    result = {"broker": kind, "partitions": partitions, "seconds": [], "producer_errors": 0, "note": ""}
    cluster = brokers.start_cluster(kind, NODES, shards=shards)
    stop = threading.Event()
    acks = Acks()
    producer = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap, **QUIET})
        wait_for("every broker in Metadata", lambda: len(admin.list_topics(timeout=5).brokers) == NODES, 120)
        admin.create_topics([NewTopic(TOPIC, num_partitions=partitions, replication_factor=NODES,
                                      config={"min.insync.replicas": "2"})])[TOPIC].result(timeout=60)
        for p in range(partitions):
            wait_isr(cluster, p, NODES)
        producer = threading.Thread(target=produce, args=(cluster, partitions, acks, stop))
        producer.start()
        wait_for("first acks on every partition", lambda: acks.first_after(0, 0, set(range(partitions))), 60)
        for k in range(cycles):
            leader = wait_isr(cluster, k % partitions, NODES).leader
            led = {p for p in range(partitions) if wait_isr(cluster, p, NODES).leader == leader}
            killed_at = time.monotonic()
            cluster.kill9(leader)
            # Responses the dead leader sent before it died may still reach the callbacks.
            time.sleep(0.2)
            before = len(acks)
            first = wait_for(f"an ack on each of {sorted(led)} after the kill of node {leader}",
                             lambda: acks.first_after(before, killed_at, led), 60)
            result["seconds"].append(round(first - killed_at, 3))
            print(f"{kind}: cycle {k + 1}/{cycles}: node {leader} (leading {sorted(led)}) killed, "
                  f"writes acknowledged again after {first - killed_at:.2f} s", flush=True)
            cluster.restart(leader)
            for p in range(partitions):
                wait_isr(cluster, p, NODES, 120)
            mark = len(acks)
            wait_for("acks after the rejoin", lambda: len(acks) > mark + 20)
    except (TimeoutError, brokers.BrokerStartError, KafkaException) as e:
        result["note"] = f"stopped after {len(result['seconds'])} cycles: {e}".splitlines()[0][:300]
        print(f"{kind}: {e}", flush=True)
    finally:
        stop.set()
        if producer is not None:
            producer.join(120)
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)
    result["producer_errors"] = acks.errors
    s = result["seconds"]
    if s:
        print(f"{kind}: failover over {len(s)} cycles: min {min(s):.2f} s, median {statistics.median(s):.2f} s, "
              f"max {max(s):.2f} s", flush=True)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="strom,kafka", help="strom and/or kafka, comma-separated")
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--strom-shards", type=int, default=2, help="shards of each Strom node")
    ap.add_argument("--out", type=Path, default=ROOT / "benches" / "results" / "cluster-failover.json")
    a = ap.parse_args()
    runs = []
    for kind in [b for b in a.brokers.split(",") if b]:
        if kind not in ("strom", "kafka"):
            ap.error(f"unknown broker {kind}")
        try:
            runs.append(measure(kind, a.cycles, a.partitions, a.strom_shards))
        except brokers.BrokerStartError as e:
            runs.append({"broker": kind, "partitions": a.partitions, "seconds": [], "producer_errors": 0,
                         "note": f"cluster did not start: {str(e).splitlines()[0][:300]}"})
        # Written after each broker, so a run cut short keeps what it measured.
        a.out.write_text(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
                                     "failover": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
