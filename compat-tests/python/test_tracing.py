"""Issue 21's trace propagation (docs/ai-features.md "Trace propagation"): records produced
by real clients (confluent-kafka, kafka-python) with a W3C `traceparent` header, or the
`x-trace-id` alias, give broker spans — one for the produce, one for each consumer fetch
that delivers the record — as children of the record's context, received by a real OTLP/HTTP
receiver (OpenTelemetry's own protobuf types) started by the test. Records without a header
give none; a read_committed fetch gives none to the records of aborted transactions, which
its client drops. A `[[connectors]]` sink the broker runs (into a real Chroma server)
continues the trace into the database write (`sink {collection}` spans through the broker's
exporter), or into the dead-letter topic (`dead-letter {dlq topic}`).

Strom only: Apache Kafka emits no spans for records.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import admin
import brokers
from clients import unique_topic
from otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.skipif(
    "strom" not in [b.strip() for b in os.environ.get("STROM_COMPAT_BROKERS", "strom,kafka").split(",")],
    reason="Strom-only feature (no Kafka equivalent)",
)


CHROMA = brokers.REPO_ROOT / "compat-tests" / ".venv-vector" / "bin" / "chroma"
SUNK = unique_topic("sunk")
# The connectors' admin port (`strom connect status` reads it); its default 9645 may be taken.
CONNECT_ADMIN = f"127.0.0.1:{brokers.free_port()}"


def start_chroma(workdir: Path) -> tuple[subprocess.Popen, str]:
    """A real Chroma server (the vector venv's, as the connector tests run it) on 127.0.0.1."""
    port = brokers.free_port()
    log = open(workdir / "chroma.log", "wb")
    p = subprocess.Popen([str(CHROMA), "run", "--path", str(workdir / "chroma-data"),
                          "--host", "127.0.0.1", "--port", str(port)],
                         stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p, f"http://127.0.0.1:{port}"
        except OSError:
            if p.poll() is not None or time.monotonic() > deadline:
                p.kill()
                raise AssertionError((workdir / "chroma.log").read_text(errors="replace")[-2000:])
            time.sleep(0.2)


def connectors_config(chroma_url: str):
    """The serve config: one Chroma sink consuming SUNK from the broker itself."""
    return lambda port: f"""
connectors_admin_listen = "{CONNECT_ADMIN}"
[[connectors]]
name = "traced-sink"
[connectors.source]
bootstrap = "127.0.0.1:{port}"
topics = ["{SUNK}"]
group_id = "traced-sink"
[connectors.source.properties]
"topic.metadata.refresh.interval.ms" = "500"
[connectors.sink]
type = "chroma"
url = "{chroma_url}"
collection = "traced"
linger_ms = 200
"""


@pytest.fixture(scope="module")
def traced():
    """One receiver, one Chroma server and one broker exporting to the receiver and running a
    Chroma sink, for the module."""
    if not CHROMA.is_file():
        pytest.fail(f"{CHROMA} missing: scripts/test-all.sh's setup builds the vector venv")
    rx = OtlpReceiver()
    workdir = Path(tempfile.mkdtemp(prefix="strom-compat-chroma-"))
    chroma, url = start_chroma(workdir)
    try:
        b = brokers.start_strom(extra_args=["--set", f"otel_exporter_otlp_endpoint={rx.endpoint}"],
                                config=connectors_config(url))
        try:
            yield b, rx
        finally:
            b.cleanup()
    finally:
        chroma.kill()
        chroma.wait()
        rx.close()
        subprocess.run(["rm", "-rf", str(workdir)], check=False)


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
    # The record's `tracestate` goes on with its context: vendors' entries reach the spans.
    assert (send_a.trace_state, recv_a.trace_state) == ("vendor=1", "vendor=1")
    assert by[("send", alias.replace("-", ""))].trace_state == "", "x-trace-id carries no state"
    alias_trace = alias.replace("-", "")
    assert by[("send", alias_trace)].attributes["messaging.kafka.offset"] == 1
    assert by[("receive", alias_trace)].attributes["messaging.kafka.offset"] == 1
    # The untraced record (offset 2) has no span at all.
    assert {s.trace_id for s in spans} == {trace_a, alias_trace}, spans


@pytest.mark.parametrize("ratio", ["0", "1"])
def test_given_a_sampler_ratio_when_traced_records_are_produced_and_fetched_then_spans_only_if_sampled(ratio):
    """`otel.traces.sampler.ratio` 0 drops every trace, a sampled `traceparent` and an
    `x-trace-id` alike (the sampler decides by trace id, not by the parent's flag); 1 keeps
    every one. A broker of its own per ratio; its stop flushes the exporter, so what has not
    arrived by then was never exported."""
    from confluent_kafka import Producer

    rx = OtlpReceiver()
    try:
        b = brokers.start_strom(extra_args=["--set", f"otel_exporter_otlp_endpoint={rx.endpoint}",
                                            "--set", f"otel_traces_sampler_ratio={ratio}"])
        try:
            b.wait_ready(serving=True)
            topic = unique_topic(f"sampled-{ratio}")
            assert admin.create_topic("confluent", b.bootstrap, topic, 1) == 0
            tp, trace_id, _ = traceparent()
            alias = uuid.uuid4().hex
            p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
            p.produce(topic, value=b"a", partition=0, headers=[("traceparent", tp.encode())])
            p.produce(topic, value=b"b", partition=0, headers=[("x-trace-id", alias.encode())])
            assert p.flush(30) == 0
            consume_all(b.bootstrap, topic, 2)
        finally:
            b.cleanup()
        names = {(s.name, s.trace_id) for s in rx.spans}
        if ratio == "1":
            assert names == {(f"{op} {topic}", t) for op in ("send", "receive") for t in (trace_id, alias)}, names
        else:
            assert names == set(), names
    finally:
        rx.close()


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


def test_sink_write_continues_the_records_traces(traced):
    """Records of two traces (two of trace A with different parent spans, one of B) and an
    untraced one, in one produce batch, through the Chroma sink the broker runs: one `sink
    traced` span per trace, a CLIENT child of the trace's first record, linked to the trace's
    other records, with the database and Kafka attributes."""
    from confluent_kafka import Producer

    b, rx = traced
    assert admin.create_topic("confluent", b.bootstrap, SUNK, 1) == 0
    tp_a1, trace_a, parent_a1 = traceparent()
    parent_a2 = uuid.uuid4().hex[:16]
    tp_a2 = f"00-{trace_a}-{parent_a2}-01"
    tp_b, trace_b, parent_b = traceparent()
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 50})
    for i, headers in enumerate([[("traceparent", tp_a1.encode())], [("traceparent", tp_a2.encode())],
                                 [("traceparent", tp_b.encode())], []]):
        doc = {"title": f"doc {i}", "embedding": [0.1 * i, 0.2, 0.3]}
        p.produce(SUNK, value=json.dumps(doc).encode(), partition=0, headers=headers)
    assert p.flush(30) == 0

    def sink_spans(spans):
        return [s for s in spans if s.name == "sink traced"]

    spans = sink_spans(rx.wait_for(
        lambda s: {x.trace_id for x in sink_spans(s)} >= {trace_a, trace_b}, timeout_s=90))
    assert {s.trace_id for s in spans} == {trace_a, trace_b}, spans
    [span_b] = [s for s in spans if s.trace_id == trace_b]
    assert span_b.parent_span_id == parent_b, span_b
    assert span_b.kind == 3  # SPAN_KIND_CLIENT
    assert span_b.status_code != 2, span_b
    assert span_b.attributes["db.system.name"] == "chroma"
    assert span_b.attributes["db.system"] == "chroma"
    assert span_b.attributes["db.collection.name"] == "traced"
    assert span_b.attributes["messaging.destination.name"] == SUNK
    assert span_b.attributes["messaging.destination.partition.id"] == "0"
    assert span_b.attributes["messaging.kafka.offset"] == 2
    assert span_b.attributes["messaging.consumer.group.name"] == "traced-sink"
    assert 1 <= span_b.attributes["db.operation.batch.size"] <= 4
    assert span_b.resource.get("service.name") == "strom"
    assert span_b.end_ns >= span_b.start_ns > 0
    # Trace A's records: a child of the first, linked to the second (or, had the connector
    # split them into two writes, one child of each).
    spans_a = [s for s in spans if s.trace_id == trace_a]
    reached = {s.parent_span_id for s in spans_a} | {sid for s in spans_a for _, sid in s.links}
    assert reached == {parent_a1, parent_a2}, spans_a
    assert spans_a[0].parent_span_id == parent_a1
    assert spans_a[0].attributes["messaging.kafka.offset"] == 0



def test_sink_dead_letter_continues_the_records_trace(traced):
    """A traced record the Chroma sink cannot write (no embedding) goes to the DLQ with a
    span in its trace: `dead-letter {dlq topic}`, a PRODUCER child of the record's
    traceparent, error status, saying where the record came from, why (`error.type`) and
    where it landed. The DLQ record names that span in its own `traceparent`, so the
    broker's span for the DLQ produce is its child."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    b, rx = traced
    assert admin.create_topic("confluent", b.bootstrap, SUNK, 1) in (0, 36)  # 36: made by another test
    dlq = f"{SUNK}-dlq"
    tp, trace_id, parent = traceparent()
    acked = []
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    p.produce(SUNK, value=json.dumps({"title": "no vector"}).encode(), partition=0,
              headers=[("traceparent", tp.encode()), ("tracestate", b"vendor=dlq")],
              on_delivery=lambda err, m: acked.append((err, m.offset())))
    assert p.flush(30) == 0 and acked[0][0] is None, acked
    offset = acked[0][1]

    def ours(spans):
        return [s for s in spans if s.trace_id == trace_id]

    spans = ours(rx.wait_for(lambda s: {x.name for x in ours(s)} >= {f"dead-letter {dlq}", f"send {dlq}"},
                             timeout_s=90))
    [span] = [s for s in spans if s.name == f"dead-letter {dlq}"]
    assert span.parent_span_id == parent, span
    assert span.kind == 4  # SPAN_KIND_PRODUCER
    assert span.trace_state == "vendor=dlq", span
    assert span.status_code == 2, span  # error: the record did not reach the database
    a = span.attributes
    assert a["messaging.destination.name"] == dlq
    assert a["error.type"] == "missing_vector"
    assert a["strom.dlq.reason"].startswith("no vector"), a
    assert (a["strom.source.topic"], a["strom.source.partition"], a["strom.source.offset"]) == (SUNK, "0", offset)
    assert a["db.system.name"] == "chroma" and a["db.collection.name"] == "traced"
    assert a["strom.connector"] == "traced-sink" and a["messaging.consumer.group.name"] == "traced-sink"
    assert a["messaging.kafka.offset"] >= 0
    assert span.resource.get("service.name") == "strom"
    assert span.end_ns >= span.start_ns > 0
    # No sink write span: the record never reached the database.
    assert not [s for s in spans if s.name == "sink traced"], spans
    [broker_send] = [s for s in spans if s.name == f"send {dlq}"]
    assert broker_send.parent_span_id == span.span_id, (broker_send, span)
    assert broker_send.attributes["messaging.kafka.offset"] == a["messaging.kafka.offset"]
    # The DLQ record carries the span as its parent, next to the Connect-style error headers.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique_topic("g"), "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(dlq, int(a["messaging.destination.partition.id"]), a["messaging.kafka.offset"])])
        m, deadline = None, time.monotonic() + 30
        while m is None or m.error():
            assert time.monotonic() < deadline, "the DLQ record was not read"
            m = c.poll(0.5)
    finally:
        c.close()
    headers = dict(m.headers())
    assert headers["traceparent"].decode() == f"00-{trace_id}-{span.span_id}-01", headers
    assert headers["tracestate"] == b"vendor=dlq", headers
    assert headers["__connect.errors.offset"].decode() == str(offset)


def txn_producer(bootstrap: str, tid: str):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(30)
    return p


def test_read_committed_fetch_spans_only_the_committed_records(traced):
    """Two transactional producers interleave traced records on one partition: one aborts,
    one commits. A read_committed consumer's fetch carries both (up to the LSO, with the
    aborted list) and the client drops the aborted ones, so the broker gives `receive` spans
    only to the committed records; a read_uncommitted consumer of the same data, which
    delivers both, gets spans for both."""
    from confluent_kafka import Consumer, TopicPartition

    b, rx = traced
    topic = unique_topic("traced-txn")
    assert admin.create_topic("confluent", b.bootstrap, topic, 1) == 0
    aborting = txn_producer(b.bootstrap, f"abort-{topic}")
    committing = txn_producer(b.bootstrap, f"commit-{topic}")
    aborted, committed = [], []
    aborting.begin_transaction()
    committing.begin_transaction()
    for i in range(3):  # batch by batch: a's and c's batches alternate in the log
        for producer, traces in ((aborting, aborted), (committing, committed)):
            tp, trace_id, _ = traceparent()
            producer.produce(topic, value=f"v{i}".encode(), partition=0, headers=[("traceparent", tp.encode())])
            assert producer.flush(30) == 0
            traces.append(trace_id)
    aborting.abort_transaction(30)
    committing.commit_transaction(30)

    def consume(isolation: str, want: int) -> None:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique_topic("g"), "enable.auto.commit": False,
                      "isolation.level": isolation, "client.id": f"tracing-{isolation}"})
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            got, deadline = 0, time.monotonic() + 30
            while got < want:
                assert time.monotonic() < deadline, f"{isolation}: consumed {got} of {want}"
                m = c.poll(0.5)
                if m is not None and not m.error():
                    got += 1
        finally:
            c.close()

    consume("read_committed", 3)
    consume("read_uncommitted", 6)

    def receives(spans, isolation):
        return {s.trace_id for s in spans if s.name == f"receive {topic}"
                and s.attributes["messaging.client.id"] == f"tracing-{isolation}"}

    # The read_uncommitted spans were made after the read_committed ones and leave through
    # the same queue: once they are all here, every read_committed span is too.
    spans = rx.wait_for(lambda s: receives(s, "read_uncommitted") == set(aborted + committed)
                        and receives(s, "read_committed") >= set(committed))
    assert receives(spans, "read_committed") == set(committed), (aborted, committed, spans)
    assert {s.trace_id for s in spans if s.name == f"send {topic}"} >= set(aborted + committed)


def connect_status(fmt: str = "json"):
    r = subprocess.run([str(brokers.STROM_BIN), "connect", "status", "--admin", CONNECT_ADMIN, "--format", fmt],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout) if fmt == "json" else r.stdout


def test_connect_status_and_the_console_count_written_and_dead_lettered_records(traced):
    """`strom connect status` (table and JSON) and the console's connectors page read the
    running sink's figures: records written, records sent to the DLQ (a document without its
    embedding), lag back at 0."""
    from confluent_kafka import Producer

    b, _ = traced
    assert admin.create_topic("confluent", b.bootstrap, SUNK, 1) in (0, 36)  # 36: made by another test

    def sink():
        return {c["connector"]: c for c in connect_status()}.get("traced-sink")

    # The figures exist once the connector has started (its lag gauge first).
    deadline = time.monotonic() + 60
    while (before := sink()) is None:
        assert time.monotonic() < deadline, "the connector is not listed"
        time.sleep(0.5)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for doc in [{"title": "a", "embedding": [0.1, 0.2, 0.3]}, {"title": "b", "embedding": [0.3, 0.2, 0.1]},
                {"title": "no vector"}]:
        p.produce(SUNK, value=json.dumps(doc).encode(), partition=0)
    assert p.flush(30) == 0
    deadline = time.monotonic() + 90
    while True:
        now = sink()
        if (now["records_written"] >= before["records_written"] + 2
                and now["dlq_records"] >= before["dlq_records"] + 1 and now["lag"] == 0):
            break
        assert time.monotonic() < deadline, (before, now)
        time.sleep(0.5)
    assert now["batches_written"] >= 1, now
    table = [line.split() for line in connect_status("table").splitlines()]
    assert table[0] == ["CONNECTOR", "RECORDS-WRITTEN", "BATCHES", "DLQ-RECORDS", "ERRORS", "LAG"]
    row = next(r for r in table if r[0] == "traced-sink")
    assert int(row[1]) >= now["records_written"] and int(row[3]) >= now["dlq_records"] and row[5] == "0", row
    # The console's page reads the same metrics, in the broker that runs the connector.
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{b.extra['metrics_port']}/api/v1/connectors", timeout=10) as r:
        view = json.loads(r.read())
    assert view["running"] is True
    [c] = [c for c in view["connectors"] if c["connector"] == "traced-sink"]
    assert c["records_written"] >= now["records_written"] and c["dlq_records"] >= now["dlq_records"], c
