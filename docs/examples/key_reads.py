"""Session reads by key (docs/ai-features.md "Session reads by key"): on a topic with
`strom.key.index=true`, the last N records of one key (the last turns of a chat session)
over HTTP, without scanning the partition.

    python key_reads.py [BOOTSTRAP] [ADMIN_URL]
    # defaults: $STROM_BOOTSTRAP or 127.0.0.1:9092, $STROM_ADMIN or http://127.0.0.1:9644
"""

import json
import os
import sys
import urllib.request
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("STROM_BOOTSTRAP", "127.0.0.1:9092")
admin = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("STROM_ADMIN", "http://127.0.0.1:9644")
topic = f"sessions-{uuid.uuid4().hex[:8]}"
admin_client = AdminClient({"bootstrap.servers": bootstrap})
admin_client.create_topics(
    [NewTopic(topic, 3, config={"strom.key.index": "true"})])[topic].result(timeout=30)

p = Producer({"bootstrap.servers": bootstrap})
for turn in range(10):
    for session in ("s1", "s2", "s3"):
        p.produce(topic, key=session, value=f"{session} turn {turn}")
assert p.flush(30) == 0
print(f"produced 10 turns of sessions s1, s2, s3 to {topic} (3 partitions)")

with urllib.request.urlopen(f"{admin}/v1/topics/{topic}/keys/s2/records?last=3", timeout=30) as r:
    body = json.loads(r.read())
for rec in body["records"]:
    print(f"partition {rec['partition']} offset {rec['offset']}: {rec['value']}")
print(f"last 3 of {body['key']}: {[rec['value'] for rec in body['records']]}")
