"""PII redaction on produce (docs/ai-features.md "PII redaction"): a topic with
`strom.redact.rules`, a record with an email, a phone number and a card number produced by a
plain Kafka client, and the record read back as the broker stored it — masked.

    python redact.py [BOOTSTRAP]        # default $STROM_BOOTSTRAP or 127.0.0.1:9092
"""

import os
import sys
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("STROM_BOOTSTRAP", "127.0.0.1:9092")
topic = f"chat-{uuid.uuid4().hex[:8]}"  # a new topic per run: the example can be run again

admin_client = AdminClient({"bootstrap.servers": bootstrap})
admin_client.create_topics([NewTopic(topic, 1, config={
    "strom.redact.rules": "email,phone,card",
    # The value and one header; other headers and the key are stored as sent.
    "strom.redact.scope": "value,header:x-prompt",
})])[topic].result(timeout=30)
print(f"created {topic} with strom.redact.rules=email,phone,card")

prompt = "I am li.wei@example.com, call 13812345678, card 4111 1111 1111 1111"
p = Producer({"bootstrap.servers": bootstrap})
p.produce(topic, key="conv-1", value=prompt, headers=[("x-prompt", prompt)])
assert p.flush(30) == 0, "not acknowledged"
print(f"produced: {prompt}")

c = Consumer({"bootstrap.servers": bootstrap, "group.id": "redact-example", "enable.auto.commit": False})
c.assign([TopicPartition(topic, 0, 0)])
m = c.poll(30)
c.close()
assert m is not None and not m.error(), m and m.error()
print(f"stored:   {m.value().decode()}")
print(f"header x-prompt: {dict(m.headers())['x-prompt'].decode()}")
