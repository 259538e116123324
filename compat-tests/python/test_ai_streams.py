"""Issue 21's AI-native streams (docs/ai-features.md) with real clients against a real
`strom serve`: PII redaction on produce (confluent-kafka and kafka-python producing through
every compression codec, consumed redacted; a rule change applies to the next batch; an
idempotent producer through redaction; named rule sets from the broker config file), token
streams over SSE (curl, Python, and headless Chromium's EventSource across a broker
restart), and session reads by key after a restart, DeleteRecords and compaction.

Strom only: Apache Kafka has none of these features, so there is nothing to compare with.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

import brokers
from conftest import BROKERS

pytestmark = pytest.mark.skipif("strom" not in BROKERS, reason="Strom-only features (issue 21)")

TIMEOUT_S = 30
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def cn_id(first17: str) -> str:
    """A valid GB 11643 resident ID from its first 17 digits."""
    weights = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
    s = sum(int(d) * w for d, w in zip(first17, weights))
    return first17 + "10X98765432"[s % 11]


ID = cn_id("11010519900307457")
CARD = "4111111111111111"  # Luhn-valid test number
PII = f"name Li, id {ID}, mail li.wei@example.com, phone 13812345678, card {CARD}, from 10.20.30.40"
REDACTED = (
    "name Li, id <REDACTED_ID>, mail <REDACTED_EMAIL>, phone *******5678, "
    "card ************1111, from <REDACTED_IP>"
)
ALL_RULES = "cn_id,email,phone,card,ip"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(bootstrap: str, topic: str, configs: dict, partitions: int = 1) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    fs = a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1, config=configs)])
    fs[topic].result(timeout=TIMEOUT_S)


def alter(bootstrap: str, topic: str, configs: dict) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    r = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
        ],
    )
    for f in a.incremental_alter_configs([r]).values():
        f.result(timeout=TIMEOUT_S)


def consume(bootstrap: str, topic: str, n: int, partitions: int = 1) -> list:
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": unique("g"),
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            out.append(m)
    finally:
        c.close()
    assert len(out) == n, f"consumed {len(out)} of {n} from {topic}"
    return out


def produce_confluent(bootstrap: str, topic: str, values: list[str], codec: str, **conf) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, **conf})
    for i, v in enumerate(values):
        p.produce(topic, key=f"k{i}", value=v, headers=[("x-prompt", v), ("x-other", v)])
    assert p.flush(TIMEOUT_S) == 0


def produce_kafka_python(bootstrap: str, topic: str, values: list[str], codec: str) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
    )
    for i, v in enumerate(values):
        p.send(topic, key=f"k{i}".encode(), value=v.encode(),
               headers=[("x-prompt", v.encode()), ("x-other", v.encode())])
    p.flush(TIMEOUT_S)
    p.close()


def metrics(b) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{b.extra['metrics_port']}/metrics", timeout=TIMEOUT_S) as r:
        return r.read().decode()


def redactions(b, topic: str, rule: str) -> int:
    """strom_redactions_total for (topic, rule), summed over shards."""
    total = 0
    for line in metrics(b).splitlines():
        if line.startswith("strom_redactions_total{") and f'topic="{topic}"' in line and f'rule="{rule}"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
@pytest.mark.parametrize("codec", CODECS)
def test_pii_is_redacted_through_every_codec(strom_broker, client, codec):
    b = strom_broker
    topic = unique(f"redact-{codec}")
    create(b.bootstrap, topic, {"strom.redact.rules": ALL_RULES, "strom.redact.scope": "value,header:x-prompt"})
    values = [PII, "no personal data here", f"only {ID}"] * 5
    if client == "confluent":
        produce_confluent(b.bootstrap, topic, values, codec)
    else:
        produce_kafka_python(b.bootstrap, topic, values, codec)
    got = consume(b.bootstrap, topic, len(values))
    want = [REDACTED, "no personal data here", "only <REDACTED_ID>"] * 5
    assert [m.value().decode() for m in got] == want
    for m, original, redacted in zip(got, values, want):
        headers = dict(m.headers())
        assert headers["x-prompt"].decode() == redacted, "a header in scope is redacted"
        assert headers["x-other"].decode() == original, "a header out of scope is kept"
        assert m.key().decode().startswith("k")
    # Per rule: 5 records of PII (value + x-prompt header) and 5 of the ID alone, twice each.
    assert redactions(b, topic, "cn_id") == 20
    for rule in ("email", "phone", "card", "ip"):
        assert redactions(b, topic, rule) == 10, rule


def test_rule_change_applies_to_the_next_batch_and_bad_rules_are_refused(strom_broker):
    b = strom_broker
    topic = unique("redact-reload")
    create(b.bootstrap, topic, {"strom.redact.rules": "cn_id"})
    text = f"{ID} li.wei@example.com"
    produce_confluent(b.bootstrap, topic, [text], "none")
    alter(b.bootstrap, topic, {"strom.redact.rules": "email"})
    produce_confluent(b.bootstrap, topic, [text], "none")
    alter(b.bootstrap, topic, {"strom.redact.rules": "email,cn_id", "strom.redact.scope": "json:/msg"})
    produce_confluent(b.bootstrap, topic, [json.dumps({"user": "li.wei@example.com", "msg": {"t": text}})], "lz4")
    got = [m.value().decode() for m in consume(b.bootstrap, topic, 3)]
    assert got[0] == "<REDACTED_ID> li.wei@example.com"
    assert got[1] == f"{ID} <REDACTED_EMAIL>"
    assert json.loads(got[2]) == {"user": "li.wei@example.com", "msg": {"t": "<REDACTED_ID> <REDACTED_EMAIL>"}}
    # Unknown rule sets and scopes: INVALID_CONFIG, the topic keeps its rules.
    for bad in ({"strom.redact.rules": "cn_id,nope"}, {"strom.redact.scope": "body"}):
        with pytest.raises(KafkaException) as e:
            alter(b.bootstrap, topic, bad)
        assert e.value.args[0].name() == "INVALID_CONFIG", e.value
    with pytest.raises(KafkaException) as e:
        create(b.bootstrap, unique("redact-bad"), {"strom.redact.rules": "no_such_set"})
    assert e.value.args[0].name() == "INVALID_CONFIG"


def test_idempotent_producer_through_redaction(strom_broker):
    """Many batches in flight from an idempotent producer: all arrive once, in order,
    redacted (the rewrite keeps the producer id, epoch and sequence numbers)."""
    b = strom_broker
    topic = unique("redact-idem")
    create(b.bootstrap, topic, {"strom.redact.rules": ALL_RULES})
    n = 2000
    p = Producer({
        "bootstrap.servers": b.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": "zstd",
        "linger.ms": 2,
        "batch.num.messages": 50,
        "max.in.flight.requests.per.connection": 5,
    })
    for i in range(n):
        p.produce(topic, value=f"{i} {PII}")
    assert p.flush(TIMEOUT_S) == 0
    got = consume(b.bootstrap, topic, n)
    assert [m.value().decode() for m in got] == [f"{i} {REDACTED}" for i in range(n)]
    assert [m.offset() for m in got] == list(range(n))


def test_transactional_producer_through_redaction(strom_broker):
    b = strom_broker
    topic = unique("redact-txn")
    create(b.bootstrap, topic, {"strom.redact.rules": "email"})
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": unique("tx")})
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    p.produce(topic, value="aborted a@example.com")
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.produce(topic, value="committed b@example.com")
    p.commit_transaction(TIMEOUT_S)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("g"),
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while not got and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    assert got == ["committed <REDACTED_EMAIL>"]


# --- SSE token streams -------------------------------------------------------------------


def admin_url(b) -> str:
    return f"http://127.0.0.1:{b.extra['metrics_port']}"


def sse_events(url: str, n: int, headers: dict | None = None, timeout_s: float = TIMEOUT_S) -> list[dict]:
    """The first `n` events of an SSE stream (id, data parsed), read with a plain HTTP client."""
    req = urllib.request.Request(url, headers=headers or {})
    events, current = [], {}
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        for raw in r:
            line = raw.decode().rstrip("\n")
            if line == "":
                if "data" in current:
                    events.append(current)
                    if len(events) == n:
                        return events
                current = {}
            elif line.startswith(":"):
                continue
            else:
                k, _, v = line.partition(":")
                current[k] = v[1:] if v.startswith(" ") else v
    return events


def produce_tokens(bootstrap: str, topic: str, conv: str, tokens: list[str], start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, t in enumerate(tokens):
        value = json.dumps({"token": t, "chunk_token_offset": start + i, "function_call_id": None})
        p.produce(topic, key=conv, value=value, headers=[("x-trace-id", "trace-1")])
    assert p.flush(TIMEOUT_S) == 0


def test_sse_stream_with_key_filter_and_last_event_id_resume(strom_broker):
    b = strom_broker
    topic = unique("tokens")
    create(b.bootstrap, topic, {})
    produce_tokens(b.bootstrap, topic, "conv-a", ["Hel", "lo", ","], 0)
    produce_tokens(b.bootstrap, topic, "conv-b", ["other"], 0)
    produce_tokens(b.bootstrap, topic, "conv-a", [" wor", "ld"], 3)
    url = f"{admin_url(b)}/v1/topics/{topic}/partitions/0/stream?offset=0&key=conv-a"
    events = sse_events(url, 5)
    tokens = [json.loads(e["data"]) for e in events]
    assert "".join(json.loads(t["value"])["token"] for t in tokens) == "Hello, world"
    assert [int(e["id"]) for e in events] == [0, 1, 2, 4, 5]
    assert tokens[0]["chunk"] == {"token": "Hel", "chunk_token_offset": 0, "function_call_id": None,
                                  "x-trace-id": "trace-1"}
    assert tokens[0]["key"] == "conv-a"
    # Resume after id 2: the rest, nothing twice; live records arrive as they are produced.
    def later():
        time.sleep(1)
        produce_tokens(b.bootstrap, topic, "conv-a", ["!"], 5)

    threading.Thread(target=later, daemon=True).start()
    resumed = sse_events(url, 3, headers={"Last-Event-ID": "2"})
    assert [int(e["id"]) for e in resumed] == [4, 5, 6]
    # curl, as a shell user would.
    out = subprocess.run(
        ["curl", "-sN", "--max-time", "5", f"{admin_url(b)}/v1/topics/{topic}/partitions/0/stream?offset=earliest"],
        capture_output=True, text=True, timeout=30,
    ).stdout
    assert re.findall(r"^id: ?(\d+)$", out, re.M) == [str(i) for i in range(7)]


KEEP_ALIVE_S = 15  # broker/src/server/streams.rs KEEP_ALIVE


def test_given_an_idle_topic_when_streaming_then_a_keep_alive_comment_comes_within_the_interval(strom_broker):
    """Nothing to send: the stream still writes an SSE comment every interval, so proxies
    and load balancers that close idle connections keep it open, and the reader sees it is
    alive."""
    b = strom_broker
    topic = unique("tokens-idle")
    create(b.bootstrap, topic, {})
    url = f"{admin_url(b)}/v1/topics/{topic}/partitions/0/stream?offset=latest"
    started = time.monotonic()
    # The socket timeout bounds each read: a stream without keep-alives fails here.
    with urllib.request.urlopen(url, timeout=KEEP_ALIVE_S + 5) as r:
        for raw in r:
            line = raw.decode().rstrip("\n")
            assert not line.startswith(("id:", "data:")), f"an event on an idle topic: {line!r}"
            if line.startswith(":"):
                break
    elapsed = time.monotonic() - started
    assert line == ": keep-alive", line
    assert elapsed < KEEP_ALIVE_S + 2, f"the first keep-alive after {elapsed:.1f} s"


def group_offset(bootstrap: str, group: str, topic: str) -> int:
    """G's committed offset of partition 0 (OffsetFetch, as kafka-consumer-groups reads it)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    a = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
    [tp] = a.list_consumer_group_offsets([req])[group].result(timeout=TIMEOUT_S).topic_partitions
    return tp.offset


def wait_group_offset(bootstrap: str, group: str, topic: str, want: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while (got := group_offset(bootstrap, group, topic)) != want:
        assert time.monotonic() < deadline, f"group {group} committed {got}, want {want}"
        time.sleep(0.2)


def test_sse_group_commits_delivered_offsets_and_resumes_from_them(strom_broker):
    """`?group=G`: the stream commits what it delivered to G (seen by Kafka's own
    kafka-consumer-groups --describe and a Kafka consumer of G), a new stream of G without an
    offset starts there, and Last-Event-ID or a numeric offset still win."""
    import kafka_tools as kt

    b = strom_broker
    topic, group = unique("tokens-g"), unique("sse-group")
    create(b.bootstrap, topic, {})
    produce_tokens(b.bootstrap, topic, "conv", ["a", "b", "c", "d", "e"])
    base = f"{admin_url(b)}/v1/topics/{topic}/partitions/0/stream?group={group}"
    # No committed offset: `earliest` is the reset policy.
    assert [int(e["id"]) for e in sse_events(base + "&offset=earliest", 5)] == [0, 1, 2, 3, 4]
    wait_group_offset(b.bootstrap, group, topic, 5)
    produce_tokens(b.bootstrap, topic, "conv", ["f", "g", "h"], 5)
    # No offset: from G's committed offset (`latest` would be nothing).
    assert [int(e["id"]) for e in sse_events(base, 3)] == [5, 6, 7]
    wait_group_offset(b.bootstrap, group, topic, 8)
    # An explicit position wins over the group's (and the stream commits where it got to).
    assert [int(e["id"]) for e in sse_events(base, 6, headers={"Last-Event-ID": "1"})] == [2, 3, 4, 5, 6, 7]
    assert [int(e["id"]) for e in sse_events(base + "&offset=6", 2)] == [6, 7]
    wait_group_offset(b.bootstrap, group, topic, 8)
    # A Kafka consumer of G (assign, committed offset) carries on from the stream's commit.
    produce_tokens(b.bootstrap, topic, "conv", ["i"], 8)
    from confluent_kafka import TopicPartition
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0)])
        m = c.poll(TIMEOUT_S)
        assert m is not None and not m.error() and m.offset() == 8, m
    finally:
        c.close()
    # Kafka's own tool describes the group: no active member, the stream's position and lag.
    kt.fetch()
    r = kt.run("kafka-consumer-groups", b.bootstrap, "--describe", "--group", group)
    assert r.rc == 0, r.err
    [row] = [row for row in kt.table(r) if row.get("TOPIC") == topic]
    assert (row["PARTITION"], row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == ("0", "8", "9", "1"), r.out
    assert row["CONSUMER-ID"] == "-", r.out



def txn_producer(bootstrap: str, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(TIMEOUT_S)
    return p


def test_sse_read_committed_skips_aborted_transactions_and_stops_at_the_lso(strom_broker):
    """`?isolation=read_committed` streams what a read_committed consumer gets: two
    transactional producers interleave batch by batch, one aborts and one commits; a third
    transaction stays open with a plain record after it. The stream has the committed records
    only, and nothing past the open transaction until it commits; the default stream
    (read_uncommitted) has every record, aborted ones included."""
    b = strom_broker
    topic = unique("tokens-txn")
    create(b.bootstrap, topic, {})
    aborting, committing = txn_producer(b.bootstrap, unique("a")), txn_producer(b.bootstrap, unique("b"))
    aborting.begin_transaction()
    committing.begin_transaction()
    for i in range(3):
        for p, name in ((aborting, "a"), (committing, "b")):
            p.produce(topic, key="conv", value=f"{name}{i}", partition=0)
            assert p.flush(TIMEOUT_S) == 0
    aborting.abort_transaction(TIMEOUT_S)
    committing.commit_transaction(TIMEOUT_S)
    pending = txn_producer(b.bootstrap, unique("c"))
    pending.begin_transaction()
    pending.produce(topic, key="conv", value="c0", partition=0)
    assert pending.flush(TIMEOUT_S) == 0
    plain = Producer({"bootstrap.servers": b.bootstrap})
    plain.produce(topic, key="conv", value="d0", partition=0)
    assert plain.flush(TIMEOUT_S) == 0

    def values(events):
        return [json.loads(e["data"])["value"] for e in events]

    stream = f"{admin_url(b)}/v1/topics/{topic}/partitions/0/stream?offset=earliest"
    assert values(sse_events(stream, 8)) == ["a0", "b0", "a1", "b1", "a2", "b2", "c0", "d0"]
    committed_at = []

    def commit_later():
        time.sleep(2)
        committed_at.append(time.monotonic())
        pending.commit_transaction(TIMEOUT_S)

    threading.Thread(target=commit_later, daemon=True).start()
    events = sse_events(stream + "&isolation=read_committed", 5)
    got_at = time.monotonic()
    assert values(events) == ["b0", "b1", "b2", "c0", "d0"], events
    # c0 and d0 only once c committed: the stream waited at the LSO.
    assert committed_at and got_at >= committed_at[0], (committed_at, got_at)
    # A read_committed `latest` is the LSO, which is the high watermark again now.
    threading.Thread(target=lambda: (time.sleep(1), produce_tokens(b.bootstrap, topic, "conv", ["e"])),
                     daemon=True).start()
    [e] = sse_events(stream.replace("offset=earliest", "offset=latest") + "&isolation=read_committed", 1)
    assert json.loads(json.loads(e["data"])["value"])["token"] == "e"

def test_sse_bad_requests_are_4xx(strom_broker):
    b = strom_broker
    topic = unique("tokens-bad")
    create(b.bootstrap, topic, {})
    for path, code in [
        (f"/v1/topics/{topic}/partitions/0/stream?offset=abc", 400),
        (f"/v1/topics/{topic}/partitions/7/stream", 404),
        ("/v1/topics/no-such-topic/partitions/0/stream", 404),
        (f"/v1/topics/{topic}/partitions/0/stream?group=", 400),
        (f"/v1/topics/{topic}/partitions/0/stream?isolation=committed", 400),
        (f"/v1/topics/{topic}/keys/k/records?last=5", 400),  # not a key-indexed topic
    ]:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(admin_url(b) + path, timeout=TIMEOUT_S)
        assert e.value.code == code, path
        assert "message" in json.loads(e.value.read())
    assert metrics(b)  # still up


def test_sse_and_key_reads_follow_the_acls():
    """With Kafka's StandardAuthorizer, a stream or a key read needs what a consumer needs:
    READ on the topic (checked before its existence), READ on the group it commits for. The
    caller signs in with HTTP Basic (a SCRAM user), else it is User:ANONYMOUS."""
    import base64

    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    from conftest import _ready_check

    users = {"admin": "admin-secret", "alice": "alice-secret"}
    b = brokers.start_strom(security={
        "listeners": ["SASL_PLAINTEXT"],
        "settings": {"sasl.enabled.mechanisms": "SCRAM-SHA-512",
                     "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                     "super.users": "User:admin"},
        "users": [(u, p, "SCRAM-SHA-512") for u, p in users.items()],
    })
    try:
        _ready_check(b)
        sasl = {"bootstrap.servers": f"127.0.0.1:{b.extra['ports']['SASL_PLAINTEXT']}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin", "sasl.password": users["admin"]}
        granted, denied, group = unique("acl-granted"), unique("acl-denied"), unique("acl-g")
        a = AdminClient(sasl)
        for f in a.create_topics([NewTopic(t, 1, config={"strom.key.index": "true"}) for t in (granted, denied)]).values():
            f.result(timeout=TIMEOUT_S)
        acls = [AclBinding(ResourceType.TOPIC, granted, ResourcePatternType.LITERAL, "User:alice", "*",
                           AclOperation.READ, AclPermissionType.ALLOW),
                AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*",
                           AclOperation.READ, AclPermissionType.ALLOW)]
        for f in a.create_acls(acls).values():
            f.result(timeout=TIMEOUT_S)
        p = Producer({**sasl, "linger.ms": 0})
        for t in (granted, denied):
            p.produce(t, key="conv", value=json.dumps({"token": "hi", "chunk_token_offset": 0}))
        assert p.flush(TIMEOUT_S) == 0

        def basic(user, password):
            return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}

        alice = basic("alice", users["alice"])
        stream = f"{admin_url(b)}/v1/topics/{{}}/partitions/0/stream?offset=earliest"
        assert [json.loads(json.loads(e["data"])["value"])["token"] for e in sse_events(stream.format(granted), 1, alice)] == ["hi"]
        assert sse_events(stream.format(granted) + f"&group={group}", 1, alice)
        keys = f"{admin_url(b)}/v1/topics/{{}}/keys/conv/records?last=1"
        with urllib.request.urlopen(urllib.request.Request(keys.format(granted), headers=alice), timeout=TIMEOUT_S) as r:
            assert len(json.loads(r.read())["records"]) == 1
        for url, headers, status, name in [
            (stream.format(denied), alice, 403, "TOPIC_AUTHORIZATION_FAILED"),
            (stream.format("no-such-topic"), alice, 403, "TOPIC_AUTHORIZATION_FAILED"),
            (stream.format(granted) + "&group=not-hers", alice, 403, "GROUP_AUTHORIZATION_FAILED"),
            (stream.format(granted), {}, 403, "TOPIC_AUTHORIZATION_FAILED"),  # User:ANONYMOUS
            (keys.format(denied), alice, 403, "TOPIC_AUTHORIZATION_FAILED"),
            (keys.format(granted), {}, 403, "TOPIC_AUTHORIZATION_FAILED"),
            (stream.format(granted), basic("alice", "wrong"), 401, "wrong user or password"),
        ]:
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S)
            body = json.loads(e.value.read())
            assert (e.value.code, name in body["message"]) == (status, True), (url, headers, body)
    finally:
        b.cleanup()


# --- session reads after DeleteRecords and compaction ---------------------------------------


def key_read(b, topic: str, key: str, n: int = 100) -> list[tuple[int, str]]:
    body = get_json(f"{admin_url(b)}/v1/topics/{topic}/keys/{key}/records?last={n}")
    return [(r["offset"], r["value"]) for r in body["records"]]


def test_given_delete_records_when_reading_a_key_then_the_deleted_records_are_gone(strom_broker):
    """DeleteRecords moves the log start: the index, built before it (by the first read),
    keeps the older offsets, and the read must not answer them."""
    from confluent_kafka import TopicPartition

    b = strom_broker
    topic = unique("sessions-deleted")
    create(b.bootstrap, topic, {"strom.key.index": "true"})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for turn in range(10):
        p.produce(topic, key="s", value=f"turn {turn}", partition=0)
        p.produce(topic, key="other", value=f"other {turn}", partition=0)
    assert p.flush(TIMEOUT_S) == 0
    assert key_read(b, topic, "s") == [(2 * t, f"turn {t}") for t in range(10)]
    tp = TopicPartition(topic, 0, 11)  # deletes turns 0..5 of "s" (offsets 0, 2, .., 10)
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    assert a.delete_records([tp], request_timeout=TIMEOUT_S)[tp].result(timeout=TIMEOUT_S).low_watermark == 11
    assert key_read(b, topic, "s") == [(2 * t, f"turn {t}") for t in range(6, 10)]
    assert key_read(b, topic, "s", 2) == [(16, "turn 8"), (18, "turn 9")]
    assert key_read(b, topic, "other") == [(2 * t + 1, f"other {t}") for t in range(5, 10)]


def test_given_a_compacted_topic_when_the_cleaner_ran_then_a_key_read_has_only_the_survivors(strom_broker):
    """Five rounds over two keys, each round in its own segment (segment.ms counts record
    time), and a key written once: after the cleaner ran, the index still holds every
    offset it saw, and the read answers only the records compaction kept."""
    b = strom_broker
    topic = unique("sessions-compacted")
    create(b.bootstrap, topic, {"strom.key.index": "true", "cleanup.policy": "compact", "segment.ms": "100",
                                "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    offsets = {}

    def report(err, m):
        assert err is None, err
        offsets[m.value().decode()] = m.offset()

    p.produce(topic, key="once", value="once v0", partition=0, on_delivery=report)
    for r in range(5):
        for k in ("a", "b"):
            p.produce(topic, key=k, value=f"{k} v{r}", partition=0, on_delivery=report)
        assert p.flush(TIMEOUT_S) == 0
        if r == 0:
            # The first read builds the index, before the cleaner can have run; the
            # appends after it keep it up to date.
            assert key_read(b, topic, "a") == [(offsets["a v0"], "a v0")]
        time.sleep(0.3)
    # Rolls the last round's segment closed, so all of it is cleanable.
    p.produce(topic, key="zz-trigger", value="t", partition=0, on_delivery=report)
    assert p.flush(TIMEOUT_S) == 0

    def compacted():
        values = [m.value().decode() for m in consume_all(b.bootstrap, topic, len(offsets))]
        return values == ["once v0", "a v4", "b v4", "t"]

    deadline = time.monotonic() + TIMEOUT_S
    while not compacted():
        assert time.monotonic() < deadline, "the cleaner did not compact the topic"
        time.sleep(1)
    assert key_read(b, topic, "a") == [(offsets["a v4"], "a v4")]
    assert key_read(b, topic, "b") == [(offsets["b v4"], "b v4")]
    assert key_read(b, topic, "once") == [(offsets["once v0"], "once v0")]


def consume_all(bootstrap: str, topic: str, most: int) -> list:
    """Partition 0 from the start to the high watermark (a compacted topic has fewer records
    than offsets)."""
    from confluent_kafka import TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        out, deadline = [], time.monotonic() + 10
        while time.monotonic() < deadline and (not out or out[-1].offset() < high - 1) and len(out) < most:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m)
        return out
    finally:
        c.close()


# --- a broker of our own: named rule sets, session reads and the browser across restarts ---

CONFIG = """
[redact.rule_sets.orders]
rules = [
  { name = "order_id", pattern = "ORD-[0-9]{8}", mask = "keep_last:4" },
  { builtin = "cn_id", mask = "<ID>" },
]
"""


@pytest.fixture(scope="module")
def own_broker():
    """A Strom with a config file and a data dir that outlives restarts."""
    state = Path(tempfile.mkdtemp(prefix="strom-ai-streams-"))
    (state / "strom.toml").write_text(CONFIG)
    holder = {}

    def start():
        b = brokers.start_strom(data_dir=state / "data", extra_args=["--config", str(state / "strom.toml")])
        b.wait_ready(serving=True)
        holder["b"] = b
        return b

    def restart(b, kill: bool = False):
        if kill:
            b.proc.kill()  # SIGKILL: no clean shutdown, the log as a crash leaves it
            b.proc.wait(timeout=TIMEOUT_S)
        b.stop()
        shutil.rmtree(b.workdir, ignore_errors=True)
        return start()

    yield start, restart, holder
    if "b" in holder:
        holder["b"].cleanup()
    shutil.rmtree(state, ignore_errors=True)


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as r:
        return json.loads(r.read())


def test_named_rule_sets_and_session_reads_survive_a_restart(own_broker):
    """The key index is not persisted: after a restart it is built from the log by the first
    key read or the first append to the partition (docs/ai-features.md). Either way, every
    session's read answers the same records as before, after a clean stop and after a kill -9
    (acks=all records are on disk)."""
    start, restart, _ = own_broker
    b = start()
    topic = unique("sessions")
    create(b.bootstrap, topic, {"strom.redact.rules": "orders", "strom.key.index": "true"}, partitions=3)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2, "acks": "all"})
    for turn in range(30):
        for s in ("s1", "s2", "s3"):
            p.produce(topic, key=s, value=f"{s} turn {turn} ORD-{turn:08d} {ID}")
    assert p.flush(TIMEOUT_S) == 0

    def read(session: str, n: int) -> list[tuple[int, int, str]]:
        body = get_json(f"{admin_url(b)}/v1/topics/{topic}/keys/{session}/records?last={n}")
        return [(r["partition"], r["offset"], r["value"]) for r in body["records"]]

    def last(session: str, n: int) -> list[str]:
        return [v for _, _, v in read(session, n)]

    def all_sessions() -> dict:
        return {s: read(s, 100) for s in ("s1", "s2", "s3")}

    want = [f"s2 turn {t} ********{str(t).zfill(8)[-4:]} <ID>" for t in range(26, 30)]
    assert last("s2", 4) == want
    before = all_sessions()
    assert [len(v) for v in before.values()] == [30, 30, 30]

    # A clean stop; the first thing the partition sees after the start is a key read.
    b = restart(b)
    assert last("s2", 4) == want, "the index is rebuilt from the log after a restart"
    assert all_sessions() == before

    # A kill -9; the first thing the sessions' partitions see after the start is an append,
    # which builds the index before it adds its own records.
    b = restart(b, kill=True)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for s in ("s1", "s2", "s3"):
        p.produce(topic, key=s, value=f"{s} turn 30")
    assert p.flush(TIMEOUT_S) == 0
    after = all_sessions()
    for s in ("s1", "s2", "s3"):
        assert after[s][:-1] == before[s], f"{s}: the records before the kill are not all read back"
        assert after[s][-1][2] == f"{s} turn 30"
    assert last("s2", 2) == [want[-1], "s2 turn 30"]


@pytest.fixture(scope="module")
def browser():
    chromium = os.environ.get("STROM_CHROMIUM", "/usr/bin/chromium")
    driver_bin = os.environ.get("STROM_CHROMEDRIVER", "/usr/bin/chromedriver")
    for exe in (chromium, driver_bin):
        if not Path(exe).is_file():
            pytest.fail(f"{exe} missing: apt-get install chromium chromium-driver (scripts/test-all.sh setup does)")
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="strom-sse-chromium-")
    opts = Options()
    opts.binary_location = chromium
    for a in ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}"]:
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


PAGE = """<!doctype html><meta charset="utf-8"><title>tokens</title><pre id="out"></pre>
<script>
  window.tokens = []; window.ids = []; window.opens = 0; window.errors = 0;
  const es = new EventSource(new URLSearchParams(location.search).get("src"));
  es.onopen = () => { window.opens++; };
  es.onerror = () => { window.errors++; };
  es.onmessage = (e) => {
    const r = JSON.parse(e.data);
    window.ids.push(Number(e.lastEventId));
    window.tokens.push(JSON.parse(r.value).token);
    document.getElementById("out").textContent = window.tokens.join("");
  };
</script>"""


def serve_page():
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = PAGE.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_browser_event_source_resumes_across_a_broker_restart(own_broker, browser):
    """Headless Chromium opens an EventSource on a page served by the test (another origin:
    the stream answers CORS), receives tokens produced by a Kafka client, and after the broker
    restarts reconnects by itself with Last-Event-ID and goes on without loss or duplicates."""
    start, restart, holder = own_broker
    b = holder.get("b") or start()
    topic = unique("browser-tokens")
    create(b.bootstrap, topic, {})
    srv = serve_page()
    try:
        src = f"{admin_url(b)}/v1/topics/{topic}/partitions/0/stream?offset=0"
        browser.get(f"http://127.0.0.1:{srv.server_address[1]}/?src={urllib.parse.quote(src)}")
        first = ["Once", " upon", " a", " time"]
        produce_tokens(b.bootstrap, topic, "c", first)
        wait_js(browser, "return window.tokens.length", 4)
        metrics_port = b.extra["metrics_port"]
        # Same ports after the restart, so the page's EventSource finds the broker again.
        b = restart_on_same_ports(b, holder)
        assert b.extra["metrics_port"] == metrics_port
        second = [" there", " was", " a", " broker"]
        produce_tokens(b.bootstrap, topic, "c", second, 4)
        wait_js(browser, "return window.tokens.length", 8)
        assert browser.execute_script("return window.tokens.join('')") == "".join(first + second)
        assert browser.execute_script("return window.ids") == list(range(8))
        assert browser.execute_script("return window.opens") >= 2, "it reconnected"
    finally:
        srv.shutdown()


def wait_js(driver, script: str, want, timeout_s: float = TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    got = None
    while time.monotonic() < deadline:
        got = driver.execute_script(script)
        if got == want:
            return
        time.sleep(0.2)
    raise AssertionError(f"{script}: {got!r}, wanted {want!r}")


def restart_on_same_ports(b, holder):
    """Stops `b` and starts a broker on its data dir with the same Kafka and admin ports."""
    argv = list(b.extra["cmdline"])
    b.stop()
    workdir = Path(tempfile.mkdtemp(prefix="strom-compat-strom-"))
    b2 = brokers._spawn("strom", argv, workdir, b.port, {"STROM_LOG_RETENTION_CHECK_INTERVAL_MS": "1000"},
                        **{k: v for k, v in b.extra.items()})
    shutil.rmtree(b.workdir, ignore_errors=True)
    b2.wait_ready(serving=True)
    holder["b"] = b2
    return b2
