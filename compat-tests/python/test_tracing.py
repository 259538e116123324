"""Issue 21's trace propagation (docs/ai-features.md "Trace propagation"): records produced
by real clients (confluent-kafka, kafka-python) with a W3C `traceparent` header, or the
`x-trace-id` alias, give broker spans — one for the produce, one for each consumer fetch
that delivers the record — as children of the record's context, received by a real OTLP/HTTP
receiver (OpenTelemetry's own protobuf types) started by the test. Records without a header
give none.

Strom only: Apache Kafka emits no spans for records.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

import admin
import brokers
from clients import unique_topic
from otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.skipif(
    "strom" not in [b.strip() for b in os.environ.get("STROM_COMPAT_BROKERS", "strom,kafka").split(",")],
    reason="Strom-only feature (no Kafka equivalent)",
)


@pytest.fixture(scope="module")
def traced():
    """One receiver and one broker exporting to it, for the module."""
    rx = OtlpReceiver()
    b = brokers.start_strom(extra_args=["--set", f"otel_exporter_otlp_endpoint={rx.endpoint}"])
    try:
        yield b, rx
    finally:
        b.cleanup()
        rx.close()


def traceparent() -> tuple[str, str, str]:
    trace_id, span_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def consume_all(bootstrap: str, topic: str, n: int) -> list:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("g"),
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got, deadline = [], time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m)
        assert len(got) == n, f"consumed {len(got)} of {n}"
        return got
    finally:
        c.close()


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_traced_records_get_produce_and_fetch_spans_under_their_parent(traced, codec):
    from confluent_kafka import Producer

    b, rx = traced
    topic = unique_topic(f"traced-{codec}")
    assert admin.create_topic("confluent", b.bootstrap, topic, 1) == 0
    tp, trace_a, parent_a = traceparent()
    alias = str(uuid.uuid4())
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 50,
                  "compression.type": codec})
    # One batch (linger): a traced record, an x-trace-id record, an untraced one.
    p.produce(topic, value=b"a", partition=0,
              headers=[("traceparent", tp.encode()), ("tracestate", b"vendor=1")])
    p.produce(topic, value=b"bb", partition=0, headers=[("x-trace-id", alias.encode())])
    p.produce(topic, value=b"ccc", partition=0, headers=[("other", b"x")])
    assert p.flush(30) == 0
    consume_all(b.bootstrap, topic, 3)

    def mine(spans):
        return [s for s in spans if s.attributes.get("messaging.destination.name") == topic]

    spans = mine(rx.wait_for(lambda s: len([x for x in mine(s) if x.name.startswith("receive")]) >= 2
                             and len([x for x in mine(s) if x.name.startswith("send")]) >= 2))
    by = {(s.name.split()[0], s.trace_id): s for s in spans}
    send_a, recv_a = by[("send", trace_a)], by[("receive", trace_a)]
    for s in (send_a, recv_a):
        assert s.parent_span_id == parent_a, s
        assert s.attributes["messaging.kafka.offset"] == 0
        assert s.attributes["messaging.destination.partition.id"] == "0"
        assert s.attributes["messaging.message.body.size"] == 1
        assert s.resource.get("service.name") == "strom"
        assert s.end_ns >= s.start_ns > 0
    assert send_a.name == f"send {topic}" and recv_a.name == f"receive {topic}"
    alias_trace = alias.replace("-", "")
    assert by[("send", alias_trace)].attributes["messaging.kafka.offset"] == 1
    assert by[("receive", alias_trace)].attributes["messaging.kafka.offset"] == 1
    # The untraced record (offset 2) has no span at all.
    assert {s.trace_id for s in spans} == {trace_a, alias_trace}, spans


def test_kafka_python_traced_record_gets_a_produce_span(traced):
    from kafka import KafkaProducer

    b, rx = traced
    topic = unique_topic("traced-kp")
    assert admin.create_topic("confluent", b.bootstrap, topic, 1) == 0
    tp, trace_id, parent = traceparent()
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all")
    try:
        p.send(topic, b"v", partition=0, headers=[("traceparent", tp.encode())]).get(timeout=30)
    finally:
        p.close()
    spans = rx.wait_for(lambda s: any(x.trace_id == trace_id for x in s))
    [send] = [s for s in spans if s.trace_id == trace_id]
    assert send.name == f"send {topic}" and send.parent_span_id == parent
    assert send.attributes["messaging.client.id"].startswith("kafka-python")
