"""Schema registry throughput: lookups per second against a real `strom serve`, with the
clients' own HTTP stacks (one keep-alive connection per worker thread).

    compat-tests/.venv/bin/python benches/quick/schema_registry.py [seconds] [threads]

Measures, one after the other, for `seconds` each (default 5) with `threads` workers
(default 4):
- `GET /schemas/ids/{id}`: what a deserializer asks once per schema id (clients cache it);
- `POST /subjects/{s}`: a schema lookup under a subject (parse + canonicalize + match);
- `POST /subjects/{s}/versions` of an already registered schema (a serializer's register
  call; answered without a write);
- registrations of new schemas (each one an fdatasync'd `_schemas` append);
- produce throughput of Avro records (20 string fields, Confluent's wire format) to three
  topics: no validation, `confluent.value.schema.validation` (the id is checked), and with
  `strom.schema.validation.deep` (the payload is decoded with its schema too): records/s
  and the broker's CPU seconds per million records (utime + stime from /proc).
Prints one JSON line per workload. Bounded in time; the broker is stopped by its PID.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat-tests" / "python"))
import brokers  # noqa: E402

CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def schema(i: int) -> str:
    fields = [{"name": f"f{j}", "type": ["null", "string"], "default": None} for j in range(20)]
    return json.dumps({"type": "record", "name": f"R{i}", "namespace": "bench", "fields": fields})


def run(name: str, seconds: float, threads: int, make_call) -> dict:
    counts = [0] * threads
    errors = [0] * threads
    stop = time.monotonic() + seconds

    def worker(k: int):
        s = requests.Session()
        call = make_call(s, k)
        while time.monotonic() < stop:
            if call():
                counts[k] += 1
            else:
                errors[k] += 1

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    start = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.monotonic() - start
    return {"workload": name, "per_s": round(sum(counts) / elapsed), "errors": sum(errors), "threads": threads, "seconds": round(elapsed, 1)}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_avro(b, url: str, seconds: float) -> None:
    """The same serialized record to each topic for `seconds`, acks=1 (no fdatasync in the
    way of what validation costs)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    check = {"confluent.value.schema.validation": "true"}
    modes = {"produce_no_validation": {}, "produce_id_validation": check,
             "produce_deep_validation": {**check, "strom.schema.validation.deep": "true"}}
    client = SchemaRegistryClient({"url": url})
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in a.create_topics([NewTopic(f"bench-{m}", 1, config=c) for m, c in modes.items()]).values():
        f.result(timeout=30)
    doc = {f"f{j}": f"value {j} of a model's output" for j in range(20)}
    for mode in modes:
        topic = f"bench-{mode}"
        value = AvroSerializer(client, schema(0))(doc, SerializationContext(topic, MessageField.VALUE))
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
                      "queue.buffering.max.kbytes": 65536, "enable.idempotence": False})
        acked, failed = [0], [0]

        def cb(err, _msg):
            (failed if err else acked)[0] += 1

        cpu0, t0 = cpu_seconds(b.proc.pid), time.monotonic()
        while time.monotonic() - t0 < seconds:
            try:
                p.produce(topic, value=value, on_delivery=cb)
            except BufferError:
                p.poll(0.01)
        p.flush(60)
        elapsed, cpu = time.monotonic() - t0, cpu_seconds(b.proc.pid) - cpu0
        print(json.dumps({"workload": mode, "records_per_s": round(acked[0] / elapsed),
                          "mb_per_s": round(acked[0] * len(value) / elapsed / 1e6, 1),
                          "broker_cpu_s_per_million": round(cpu / max(acked[0], 1) * 1e6, 2),
                          "value_bytes": len(value), "failed": failed[0]}), flush=True)


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    b = brokers.start_strom(shards=2)
    try:
        url = f"http://127.0.0.1:{b.extra['schema_registry_port']}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{url}/subjects", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.2)
        ids = []
        for i in range(10):
            r = requests.post(f"{url}/subjects/bench-{i}/versions", data=json.dumps({"schema": schema(i)}), headers=CT, timeout=10)
            r.raise_for_status()
            ids.append(r.json()["id"])
        body = {i: json.dumps({"schema": schema(i)}) for i in range(10)}

        def by_id(s, k):
            return lambda: s.get(f"{url}/schemas/ids/{ids[k % 10]}", timeout=10).status_code == 200

        def lookup(s, k):
            return lambda: s.post(f"{url}/subjects/bench-{k % 10}", data=body[k % 10], headers=CT, timeout=10).status_code == 200

        def reregister(s, k):
            return lambda: s.post(f"{url}/subjects/bench-{k % 10}/versions", data=body[k % 10], headers=CT, timeout=10).status_code == 200

        def register_new(s, k):
            n = [0]

            def call():
                n[0] += 1
                subject = f"new-{k}-{n[0]}"
                return s.post(f"{url}/subjects/{subject}/versions", data=json.dumps({"schema": schema(1000 + k * 100000 + n[0])}), headers=CT, timeout=10).status_code == 200

            return call

        for name, make in [("get_schema_by_id", by_id), ("lookup_under_subject", lookup), ("register_existing", reregister), ("register_new", register_new)]:
            print(json.dumps(run(name, seconds, threads, make)), flush=True)
        produce_avro(b, url, seconds)
    finally:
        b.cleanup()


if __name__ == "__main__":
    main()
