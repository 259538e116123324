"""Priority lanes (docs/ai-features.md "Priority lanes and adaptive backpressure"): an
inference topic in the `critical` lane beside a logging topic in the `low` lane. While a shard
is saturated and the critical lane is busy, the low lane's produce and fetch answers carry
`throttle_time_ms` and its connections are read later; the critical lane is never slowed.
This script shows the lanes as the broker sees them on its admin port's /metrics: every
request counted in its topic's lane, and the throttles so far (none on an idle broker; a
saturated one is what benches/quick/priority.py measures).

    python priority.py [BOOTSTRAP] [ADMIN_URL]
    # defaults: $STROM_BOOTSTRAP or 127.0.0.1:9092, $STROM_ADMIN or http://127.0.0.1:9644
"""

import os
import re
import sys
import urllib.request
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("STROM_BOOTSTRAP", "127.0.0.1:9092")
admin = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("STROM_ADMIN", "http://127.0.0.1:9644")
suffix = uuid.uuid4().hex[:8]
inference, logs = f"inference-{suffix}", f"app-logs-{suffix}"


def lanes() -> dict:
    """Per lane, (requests, throttled) summed over the broker's shards."""
    body = urllib.request.urlopen(f"{admin}/metrics", timeout=30).read().decode()
    out: dict = {}
    for name, lane, value in re.findall(
            r'^strom_priority_(requests|throttled)_total\{[^}]*lane="(\w+)"[^}]*\} (\S+)$', body, re.M):
        req, thr = out.get(lane, (0, 0))
        out[lane] = (req + int(float(value)), thr) if name == "requests" else (req, thr + int(float(value)))
    return out


a = AdminClient({"bootstrap.servers": bootstrap})
futures = a.create_topics([NewTopic(inference, 1, config={"strom.priority": "critical"}),
                           NewTopic(logs, 1, config={"strom.priority": "low"})])
for f in futures.values():
    f.result(timeout=30)
print(f"created {inference} (strom.priority=critical) and {logs} (strom.priority=low)")

before = lanes()
throttled = []
p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
              "throttle_cb": lambda e: throttled.append(e.throttle_time)})
for i in range(5):
    p.produce(inference, value=f"prompt {i}")
    assert p.flush(30) == 0
    p.produce(logs, value=f"log line {i}")
    assert p.flush(30) == 0
after = lanes()
for lane in ("critical", "low"):
    req = after.get(lane, (0, 0))[0] - before.get(lane, (0, 0))[0]
    thr = after.get(lane, (0, 0))[1] - before.get(lane, (0, 0))[1]
    print(f"lane {lane}: {req} produce requests, {thr} throttled")
print(f"throttle answers seen by the producer: {len(throttled)}")
