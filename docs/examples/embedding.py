"""Embedding validation at produce (docs/ai-features.md "Embedding validation at produce"):
a topic that carries 4-dimension unit vectors as raw little-endian f32s. A good vector is
appended; a NaN, a vector of the wrong dimension and one that is not unit length are refused
with INVALID_RECORD (the KIP-467 record error names why), so no bad vector reaches the log or
the vector-database sinks that read it.

    python embedding.py [BOOTSTRAP]        # default $STROM_BOOTSTRAP or 127.0.0.1:9092
"""

import os
import struct
import sys
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("STROM_BOOTSTRAP", "127.0.0.1:9092")
topic = f"vectors-{uuid.uuid4().hex[:8]}"

admin_client = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures need it alive
admin_client.create_topics([NewTopic(topic, 1, config={
    "strom.embedding.format": "f32le",  # or "json" with strom.embedding.field=/embedding
    "strom.embedding.dimension": "4",
    "strom.embedding.normalized": "true",
})])[topic].result(timeout=30)
print(f"created {topic} with strom.embedding.format=f32le, dimension 4, normalized")

vectors = {
    "unit": [0.5, 0.5, 0.5, 0.5],
    "nan": [float("nan"), 0.0, 0.0, 1.0],
    "3-dim": [0.6, 0.8, 0.0],
    "long": [1.0, 1.0, 1.0, 1.0],
}
# One request per record (linger.ms=0, flushed one by one): Kafka refuses a batch with a bad
# record whole, so a good record sent in the same batch as a bad one would be refused too.
p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
for name, v in vectors.items():
    result = []
    p.produce(topic, value=struct.pack(f"<{len(v)}f", *v), partition=0,
              on_delivery=lambda err, msg: result.append((err, msg.offset())))
    p.flush(30)
    err, offset = result[0]
    # librdkafka reports the code; the broker's reason ("invalid embedding: vector element 0
    # is NaN or infinite", the KIP-467 record error) reaches clients that read record errors,
    # as the Java client's InvalidRecordException message.
    print(f"{name}: " + (f"appended at offset {offset}" if err is None else f"refused, {err.name()}"))
