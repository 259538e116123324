"""Share groups (KIP-932) side by side: Strom and Apache Kafka 4.4 (issue 22's benchmarks).

For each broker (one after the other, each started here on 127.0.0.1 through
compat-tests/python/brokers.py and stopped by PID):

- **throughput**: `--records` records (default 200k, 100-byte values) on one partition,
  produced by confluent-kafka; then for each consumer count in `--consumers` (default
  1,4,16) a fresh share group (`share.auto.offset.reset=earliest`) of that many Java
  `KafkaShareConsumer`s (kafka-clients 4.4, explicit ACCEPT of every record, commitSync per
  poll; `benches/quick/ShareBench.java`) shares the partition until every offset is accepted:
  records/s of distinct offsets from the first delivery on (the time to the first delivery,
  group join included, is printed apart), and how many deliveries that took.
- brokers: `strom`, `kafka` (Kafka's defaults: appends acknowledged from the page cache,
  its share state writes too) and `kafka-durable` (`log.flush.interval.messages=1`: an
  fsync per append, as Strom's acks=all and its share state writes always have).
- **redelivery**: with `share.record.lock.duration.ms=1000` (Kafka's floor lowered to 1000
  by `group.share.min.record.lock.duration.ms`), `--rounds` times (default 10) a holder
  acquires the one record just produced and stops polling; the time after its lock ran out
  until another member gets the record back (p50; single rounds of -1000 or +1000 ms on
  either broker are the Java client's: the holder's poll returned the record a lock
  duration after the broker acquired it, or the other member fetched a second late).

Prints one JSON line per measurement and a table with the Strom/Kafka ratios. Not a test:
figures for benches/README.md.

  compat-tests/.venv/bin/python benches/quick/share_groups.py [--records 200000]
      [--consumers 1,4,16] [--rounds 10] [--brokers strom,kafka,kafka-durable]

Needs java and mvn (the class path is kafka-clients 4.4 as compat-tests/java pins it) and
the release binary (STROM_BIN, default target/release/strom).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "compat-tests" / "python"))

import admin  # noqa: E402
import brokers  # noqa: E402

BENCH = Path(__file__).resolve().parent / "ShareBench.java"
LOCK_MS = 1000


def classpath() -> str:
    out = Path(tempfile.mkdtemp(prefix="share-bench-")) / "cp"
    r = subprocess.run(
        ["mvn", "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={out}", "-Dmdep.includeScope=test"],
        cwd=ROOT / "compat-tests" / "java", capture_output=True, text=True, timeout=900,
    )
    if r.returncode != 0:
        sys.exit(f"mvn could not give the class path:\n{r.stdout}\n{r.stderr}")
    return out.read_text().strip()


def java(cp: str, *args: str) -> dict:
    r = subprocess.run(["java", "-cp", cp, str(BENCH), *args], capture_output=True, text=True, timeout=1800)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not line:
        sys.exit(f"ShareBench {args[0]} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return json.loads(line[-1])


def produce(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "compression.type": "lz4"})
    value = b"x" * 100
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def group_configs(bootstrap: str, group: str, extra: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    a = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)]
    for k, v in (extra or {}).items():
        entries.append(ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET))
    res = ConfigResource("GROUP", group, incremental_configs=entries)
    for f in a.incremental_alter_configs([res]).values():
        f.result(30)


def run_broker(name: str, cp: str, records: int, counts: list[int], rounds: int) -> dict:
    kafka = {"group.share.min.record.lock.duration.ms": str(LOCK_MS)}
    if name == "kafka-durable":
        # fsync per append, as Strom's acks=all (its share state writes included).
        kafka["log.flush.interval.messages"] = "1"
    sec = {"kafka_settings": kafka}
    b = brokers.start_strom(shards=2) if name == "strom" else brokers.start_kafka(security=sec)
    try:
        out: dict = {"broker": name, "throughput": [], "redelivery": None}
        topic = f"share-bench-{uuid.uuid4()}"
        assert admin.create_topic("confluent", b.bootstrap, topic, 1) == 0
        produce(b.bootstrap, topic, records)
        for n in counts:
            group = f"sb-{n}-{uuid.uuid4()}"
            group_configs(b.bootstrap, group)
            m = java(cp, "throughput", b.bootstrap, topic, group, str(n), str(records))
            m["records_per_s"] = round(records / m["seconds"])
            print(json.dumps({"broker": name, **m}), flush=True)
            out["throughput"].append(m)
        rtopic = f"share-redeliver-{uuid.uuid4()}"
        assert admin.create_topic("confluent", b.bootstrap, rtopic, 1) == 0
        group = f"sr-{uuid.uuid4()}"
        group_configs(b.bootstrap, group, {"share.record.lock.duration.ms": str(LOCK_MS)})
        m = java(cp, "redelivery", b.bootstrap, rtopic, group, str(LOCK_MS), str(rounds))
        m["p50_ms"] = statistics.median(m["late_ms"])
        m["max_ms"] = max(m["late_ms"])
        print(json.dumps({"broker": name, **m}), flush=True)
        out["redelivery"] = m
        return out
    finally:
        b.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--consumers", default="1,4,16")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--brokers", default="strom,kafka,kafka-durable")
    args = ap.parse_args()
    counts = [int(x) for x in args.consumers.split(",")]
    cp = classpath()
    results = {name: run_broker(name, cp, args.records, counts, args.rounds) for name in args.brokers.split(",")}
    print()
    names = list(results)
    others = names[1:] if names and names[0] == "strom" else []
    print(f"| share group, 1 partition, {args.records} records | " + " | ".join(names)
          + "".join(f" | Strom/{o}" for o in others) + " |")
    print("|---|" + "---|" * (len(names) + len(others)))
    for i, n in enumerate(counts):
        rates = [results[k]["throughput"][i]["records_per_s"] for k in names]
        ratios = "".join(f" | {rates[0] / results[o]['throughput'][i]['records_per_s']:.2f}" for o in others)
        print(f"| {n} consumer(s), records/s | " + " | ".join(f"{x:,}" for x in rates) + ratios + " |")
    pad = " |" * len(others)
    firsts = [results[k]["throughput"][0]["first_record_s"] for k in names]
    print("| 1 consumer, seconds to the first delivery | " + " | ".join(f"{x:.2f}" for x in firsts) + pad)
    late = [results[k]["redelivery"]["p50_ms"] for k in names]
    print("| redelivery after a 1 s lock, p50 ms past the lock | " + " | ".join(f"{x:.0f}" for x in late) + pad)

if __name__ == "__main__":
    main()
