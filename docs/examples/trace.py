"""Trace propagation (docs/ai-features.md "Trace propagation"): a record produced with a W3C
`traceparent` and `tracestate` gets a `send {topic}` span from the broker, and a consumer's
fetch of it a `receive {topic}` span, both children of the producer's span, exported to the
broker's `otel.exporter.otlp.endpoint` (look them up by the trace id printed below).

    python trace.py [BOOTSTRAP]         # default $STROM_BOOTSTRAP or 127.0.0.1:9092

The broker must run with an endpoint, e.g.
`strom serve --set otel_exporter_otlp_endpoint=http://127.0.0.1:4318`.
"""

import os
import secrets
import sys
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("STROM_BOOTSTRAP", "127.0.0.1:9092")
topic = f"llm-requests-{uuid.uuid4().hex[:8]}"
admin_client = AdminClient({"bootstrap.servers": bootstrap})
admin_client.create_topics([NewTopic(topic, 1)])[topic].result(timeout=30)

# The producer's own span (an OpenTelemetry SDK would make these ids; any random ones do).
trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
headers = [("traceparent", f"00-{trace_id}-{span_id}-01"), ("tracestate", "app=chat")]
offsets = []
p = Producer({"bootstrap.servers": bootstrap})
p.produce(topic, value="What is a vector database?", partition=0, headers=headers,
          on_delivery=lambda err, m: offsets.append(m.offset() if err is None else err))
assert p.flush(30) == 0 and isinstance(offsets[0], int), offsets
print(f"produced to {topic} offset {offsets[0]} in trace {trace_id} under span {span_id}")

c = Consumer({"bootstrap.servers": bootstrap, "group.id": "trace-example", "enable.auto.commit": False})
c.assign([TopicPartition(topic, 0, 0)])
m = c.poll(30)
c.close()
assert m is not None and not m.error(), m and m.error()
print(f"consumed offset {m.offset()}: the broker exports 'send {topic}' and 'receive {topic}' in trace {trace_id}")
