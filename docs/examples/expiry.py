"""Per-record expiry (docs/ai-features.md "Per-record expiry"): on a topic with
`strom.ttl.header=ttl-ms`, a record whose TTL has passed is not delivered by Fetch; the
consumer sees an offset gap, as on a compacted topic. A prompt that is useless after a second
(a user who gave up waiting) is never handed to an inference worker that starts late.

    python expiry.py [BOOTSTRAP]        # default $STROM_BOOTSTRAP or 127.0.0.1:9092
"""

import os
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("STROM_BOOTSTRAP", "127.0.0.1:9092")
topic = f"prompts-{uuid.uuid4().hex[:8]}"

admin_client = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures need it alive
admin_client.create_topics([NewTopic(topic, 1, config={
    "strom.ttl.header": "ttl-ms",         # a record's own TTL, in ms (ASCII digits)
    "strom.record.ttl.ms": "3600000",     # records without the header: 1 h
})])[topic].result(timeout=30)
print(f"created {topic} with strom.ttl.header=ttl-ms, strom.record.ttl.ms=3600000")

p = Producer({"bootstrap.servers": bootstrap})
p.produce(topic, value="summarize doc-1", headers=[("ttl-ms", "1000")], partition=0)
p.produce(topic, value="summarize doc-2", partition=0)
p.produce(topic, value="summarize doc-3", headers=[("ttl-ms", "600000")], partition=0)
assert p.flush(30) == 0
print("produced doc-1 (ttl 1 s), doc-2 (the topic's 1 h), doc-3 (ttl 10 min)")
time.sleep(1.5)  # the worker starts late: doc-1 has expired

c = Consumer({"bootstrap.servers": bootstrap, "group.id": "expiry-example", "enable.auto.commit": False,
              "enable.partition.eof": True})
c.assign([TopicPartition(topic, 0, 0)])
while True:
    m = c.poll(30)
    assert m is not None, "no end of partition within 30 s"
    if m.error():
        break  # _PARTITION_EOF
    print(f"offset {m.offset()}: {m.value().decode()}")
c.close()
