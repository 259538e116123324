"""Token streams over SSE (docs/ai-features.md "Token streams (SSE)"): an LLM service
produces one record per token, keyed by conversation; a browser or any HTTP client reads one
conversation's tokens from the admin port as Server-Sent Events, no Kafka client needed.

    python sse.py [BOOTSTRAP] [ADMIN_URL]
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
topic = f"tokens-{uuid.uuid4().hex[:8]}"
admin_client = AdminClient({"bootstrap.servers": bootstrap})
admin_client.create_topics([NewTopic(topic, 1)])[topic].result(timeout=30)

p = Producer({"bootstrap.servers": bootstrap})
for conv, tokens in [("conv-1", ["Hel", "lo", ","]), ("conv-2", ["other"]), ("conv-1", [" wor", "ld"])]:
    for token in tokens:
        p.produce(topic, key=conv, value=json.dumps({"token": token}), partition=0)
assert p.flush(30) == 0
print(f"produced 6 tokens of two conversations to {topic}")

# One conversation from the start; a live stream would go on waiting for more tokens.
url = f"{admin}/v1/topics/{topic}/partitions/0/stream?offset=earliest&key=conv-1"
text, ids = "", []
with urllib.request.urlopen(url, timeout=30) as stream:
    for line in stream:
        line = line.decode().rstrip("\n")
        if line.startswith("id:"):
            ids.append(int(line[3:]))
        elif line.startswith("data:"):
            event = json.loads(line[5:])
            text += json.loads(event["value"])["token"]
            print(f"event offset {event['offset']} key {event['key']}: {text!r}")
            if len(ids) == 5:
                break  # an EventSource would reconnect with Last-Event-ID: ids[-1]
print(f"conv-1 says {text!r} (event ids {ids})")
