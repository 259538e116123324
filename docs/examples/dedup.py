"""Dedup by message id (docs/ai-features.md "Dedup by message id"): on a topic with
`strom.dedup.header=msg-id`, a record whose `msg-id` was already appended to the partition
within the window is not appended again, and the producer is answered success with the first
record's offset — a plain (non-idempotent) producer retrying after a restart, as a job
scheduler would.

    python dedup.py [BOOTSTRAP]        # default $STROM_BOOTSTRAP or 127.0.0.1:9092
"""

import os
import sys
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("STROM_BOOTSTRAP", "127.0.0.1:9092")
topic = f"jobs-{uuid.uuid4().hex[:8]}"  # a new topic per run: the example can be run again

admin_client = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures need it alive
admin_client.create_topics([NewTopic(topic, 1, config={
    "strom.dedup.header": "msg-id",
    "strom.dedup.window.ms": "120000",  # JetStream's default duplicate window, 2 min
})])[topic].result(timeout=30)
print(f"created {topic} with strom.dedup.header=msg-id")


def send(job: str, value: str) -> int:
    """One record from a fresh producer (as after a restart); its acknowledged offset."""
    p = Producer({"bootstrap.servers": bootstrap})
    acked = []
    p.produce(topic, value=value, headers=[("msg-id", job)], partition=0,
              on_delivery=lambda err, msg: acked.append((err, msg.offset())))
    assert p.flush(30) == 0 and acked[0][0] is None, acked
    return acked[0][1]


for job, value in (("job-1", "resize img-1"), ("job-2", "resize img-2"), ("job-1", "resize img-1")):
    print(f"sent {job}: acknowledged at offset {send(job, value)}")

c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dedup-example", "enable.auto.commit": False,
              "enable.partition.eof": True})
c.assign([TopicPartition(topic, 0, 0)])
stored = []
while True:
    m = c.poll(30)
    assert m is not None, "no end of partition within 30 s"
    if m.error():
        break  # _PARTITION_EOF: everything the log holds was read
    stored.append(m.value().decode())
c.close()
print(f"stored: {stored}")
