"""Issue 21's SSE token streams hold no unbounded buffer for a slow client
(docs/ai-features.md "Token streams (SSE)", `broker/src/server/streams.rs`): a reader that
opened a stream and stopped reading must cost the broker a bounded amount of memory however
much is produced meanwhile, must not hold up the partition's other readers, and must get
every record, in order, once it reads again.

The slow reader is a raw socket with a small receive buffer that sends the GET and then
reads nothing. While a Kafka client produces PRODUCED_BYTES to the partition, a second SSE
reader and a Kafka consumer read everything; the broker's anonymous resident memory
(`RssAnon` in /proc/PID/status: the heap, where a buffered backlog would live; the mapped
log segments the readers touch are file pages and are not in it) is sampled throughout. A
broker that queued the slow reader's events would hold nearly all of PRODUCED_BYTES (more, as
JSON): the bound is a sixth of it. Measured on a 2-core VM: 2-4 MiB, and 120-150 MiB with
the stream fed through an unbounded channel by a task of its own (not committed).

Strom only, with a broker of its own, so no other test's traffic is in the memory figures.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import brokers
from conftest import BROKERS, _ready_check

pytestmark = pytest.mark.skipif("strom" not in BROKERS, reason="Strom-only feature (issue 21)")

TIMEOUT_S = 90
VALUE_BYTES = 16 * 1024
WARM_UP_RECORDS = 512  # 8 MiB through every path before the baseline
RECORDS = 6144  # 96 MiB while the slow reader does not read
PRODUCED_BYTES = RECORDS * VALUE_BYTES


@pytest.fixture(scope="module")
def broker():
    b = brokers.start_strom()
    try:
        _ready_check(b)
        yield b
    finally:
        b.cleanup()


def value_of(i: int) -> str:
    """Record i's value: its index first, so a reader can tell a gap or a reorder."""
    head = f"{i:08d} "
    return head + chr(ord("a") + i % 26) * (VALUE_BYTES - len(head))


def produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(first, first + count):
        while True:
            try:
                p.produce(topic, value=value_of(i), partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(TIMEOUT_S) == 0, "records not acknowledged"


def rss_anon_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc/PID/status")


class Sampler(threading.Thread):
    """The highest RssAnon of `pid` seen until stopped."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, rss_anon_bytes(pid), threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, rss_anon_bytes(self.pid))
            time.sleep(0.02)

    def stop(self) -> int:
        self.done.set()
        self.join()
        return max(self.peak, rss_anon_bytes(self.pid))


class SseEvents:
    """Parses an SSE byte stream, whatever its chunking, into (offset, the value is the one
    produced there) per event: the values themselves are not kept (96 MiB per reader)."""

    def __init__(self):
        self.buf, self.event = b"", {}

    def feed(self, data: bytes) -> list[tuple[int, bool]]:
        self.buf += data
        return self.events()

    def events(self) -> list[tuple[int, bool]]:
        out = []
        while (nl := self.buf.find(b"\n")) >= 0:
            line, self.buf = self.buf[:nl].decode(), self.buf[nl + 1:]
            if line == "":
                if "data" in self.event:
                    offset = int(self.event["id"])
                    out.append((offset, json.loads(self.event["data"])["value"] == value_of(offset)))
                self.event = {}
            elif not line.startswith(":"):
                k, _, v = line.partition(":")
                self.event[k] = v[1:] if v.startswith(" ") else v
        return out


class ChunkedSseEvents(SseEvents):
    """SseEvents of a raw HTTP/1.1 response body in chunked transfer encoding (what the
    broker sends a stream as; urllib decodes it for the other reader)."""

    def __init__(self):
        super().__init__()
        self.raw = b""

    def feed(self, data: bytes) -> list[tuple[int, bool]]:
        self.raw += data
        while (nl := self.raw.find(b"\r\n")) >= 0:
            size = int(self.raw[:nl].split(b";")[0], 16)
            if len(self.raw) < nl + 2 + size + 2:
                break
            self.buf += self.raw[nl + 2:nl + 2 + size]
            self.raw = self.raw[nl + 2 + size + 2:]
        return self.events()


def check_in_order(got: list[tuple[int, bool]], first: int, count: int, who: str) -> None:
    """Offsets first .. first + count - 1, each with the value produced there."""
    assert len(got) == count, f"{who} got {len(got)} of {count} records"
    for n, (offset, value_ok) in enumerate(got):
        assert offset == first + n, f"{who}: record {n} at offset {offset}, wanted {first + n} (a gap or a reorder)"
        assert value_ok, f"{who}: offset {offset} has another value than was produced there"


def fast_sse_reader(url: str, want: int, got: list) -> None:
    """Reads the stream as fast as it comes until `want` events; appends them to `got`."""
    parser = SseEvents()
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as r:
        while len(got) < want:
            chunk = r.read1(1 << 16)
            if not chunk:
                return
            got.extend(parser.feed(chunk))


def kafka_reader(bootstrap: str, topic: str, first: int, want: int, got: list) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, first)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < want and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                if not m.error():
                    got.append((m.offset(), m.value() == value_of(m.offset()).encode()))
    finally:
        c.close()


def test_given_a_reader_that_stops_reading_when_many_mb_are_produced_then_broker_memory_stays_bounded_and_others_read_on(broker):
    b = broker
    topic = f"sse-slow-{uuid.uuid4().hex[:8]}"
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=TIMEOUT_S)
    stream_url = f"http://127.0.0.1:{b.extra['metrics_port']}/v1/topics/{topic}/partitions/0/stream"

    # Warm-up: produce, fetch and stream once, so the baseline has each path's pools.
    produce(b.bootstrap, topic, 0, WARM_UP_RECORDS)
    warm_sse, warm_kafka = [], []
    fast_sse_reader(f"{stream_url}?offset=0", WARM_UP_RECORDS, warm_sse)
    kafka_reader(b.bootstrap, topic, 0, WARM_UP_RECORDS, warm_kafka)
    check_in_order(warm_sse, 0, WARM_UP_RECORDS, "the warm-up SSE reader")
    check_in_order(warm_kafka, 0, WARM_UP_RECORDS, "the warm-up Kafka consumer")

    # The slow reader: a small receive window (set before connect, so the kernel does not
    # grow it), the GET, the response head, then nothing.
    first = WARM_UP_RECORDS
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.settimeout(TIMEOUT_S)
    slow.connect(("127.0.0.1", b.extra["metrics_port"]))
    slow.sendall(f"GET /v1/topics/{topic}/partitions/0/stream?offset={first} HTTP/1.1\r\n"
                 f"Host: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = slow.recv(1)
        assert chunk, "the broker closed the slow reader's stream"
        head += chunk
    assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head, head
    assert b"transfer-encoding: chunked" in head.lower(), head

    sse_got, kafka_got = [], []
    readers = [
        threading.Thread(target=fast_sse_reader, args=(f"{stream_url}?offset={first}", RECORDS, sse_got), daemon=True),
        threading.Thread(target=kafka_reader, args=(b.bootstrap, topic, first, RECORDS, kafka_got), daemon=True),
    ]
    for t in readers:
        t.start()
    time.sleep(1)  # both readers connected and waiting at the high watermark
    baseline = rss_anon_bytes(b.proc.pid)
    sampler = Sampler(b.proc.pid)
    sampler.start()
    produce(b.bootstrap, topic, first, RECORDS)
    for t in readers:
        t.join(TIMEOUT_S)
    peak = sampler.stop()

    # The other readers of the partition got everything while the slow one read nothing.
    check_in_order(sse_got, first, RECORDS, "the other SSE reader")
    check_in_order(kafka_got, first, RECORDS, "the Kafka consumer")

    # Bounded. The kernel holds at most a few MiB of the backlog (the slow socket's 4 KiB
    # window, the broker's send buffer up to net.ipv4.tcp_wmem's max); the rest is either
    # still in the log or buffered in the broker's heap.
    growth = peak - baseline
    assert growth < PRODUCED_BYTES // 6, (
        f"the broker's heap grew by {growth / 2**20:.1f} MiB while {PRODUCED_BYTES / 2**20:.0f} MiB were "
        f"produced past a reader that did not read: its backlog is buffered")

    # Once it reads, the slow reader gets every record from where it was, in order.
    parser, events = ChunkedSseEvents(), []
    while len(events) < RECORDS:
        chunk = slow.recv(1 << 16)
        assert chunk, f"the stream ended after {len(events)} of {RECORDS} events"
        events.extend(parser.feed(chunk))
    slow.close()
    check_in_order(events, first, RECORDS, "the slow reader")
