"""The HTTP proxy on the admin port (docs/http-proxy.md): Confluent REST Proxy's v3 API for
clusters, topics, partitions and produce, its v2 API for consumer instances, driven with
`requests` against a real `strom serve`, and checked from the Kafka side with
confluent-kafka (records produced over HTTP read by a Kafka consumer, offsets committed
over HTTP seen by a Kafka client). Errors are checked for Confluent's status and
`error_code`.

Strom only: Apache Kafka ships no REST proxy.
"""

from __future__ import annotations

import base64
import json
import time
import uuid

import pytest
import requests
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

import brokers
from test_cli import create, js, strom

V2 = "application/vnd.kafka.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"
AVRO_V2 = "application/vnd.kafka.avro.v2+json"
TIMEOUT = 30


def base(b) -> str:
    return f"http://127.0.0.1:{b.extra['metrics_port']}"


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def cluster_id(b, auth=None) -> str:
    r = requests.get(f"{base(b)}/v3/clusters", auth=auth, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["data"][0]["cluster_id"]


def records_url(b, topic: str, auth=None) -> str:
    return f"{base(b)}/v3/clusters/{cluster_id(b, auth)}/topics/{topic}/records"


def produce(b, topic: str, *records: dict, auth=None) -> tuple[int, list[dict]]:
    """POSTs the records as one streaming body; returns the status and the answers."""
    body = "\n".join(json.dumps(r) for r in records)
    r = requests.post(records_url(b, topic, auth), data=body, auth=auth, timeout=TIMEOUT,
                      headers={"Content-Type": "application/json"})
    return r.status_code, [json.loads(line) for line in r.text.splitlines() if line.strip()]


def kafka_read(b, topic: str, n: int, value_deserializer=None) -> list:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": uid("reader"),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out, deadline = [], time.monotonic() + TIMEOUT
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append(m)
    finally:
        c.close()
    assert len(out) == n, f"read {len(out)} of {n}"
    return out


def error_of(r: requests.Response) -> tuple[int, int]:
    body = r.json()
    assert isinstance(body.get("message"), str) and body["message"], body
    return r.status_code, body["error_code"]


# ---------------------------------------------------------------- v3 topics

def test_clusters_topics_and_partitions_are_listed(strom_broker):
    b = strom_broker
    t = uid("proxy-topics")
    create(b, t, 3)
    cid = cluster_id(b)
    r = requests.get(f"{base(b)}/v3/clusters/{cid}", timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["kind"] == "KafkaCluster"
    r = requests.get(f"{base(b)}/v3/clusters/{cid}/topics", timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["kind"] == "KafkaTopicList"
    mine = [x for x in r.json()["data"] if x["topic_name"] == t]
    assert len(mine) == 1 and mine[0]["partitions_count"] == 3 and mine[0]["is_internal"] is False
    r = requests.get(f"{base(b)}/v3/clusters/{cid}/topics/{t}/partitions", timeout=TIMEOUT)
    assert [p["partition_id"] for p in r.json()["data"]] == [0, 1, 2]
    r = requests.get(f"{base(b)}/v3/clusters/{cid}/topics/{t}/partitions/2", timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["partition_id"] == 2
    assert error_of(requests.get(f"{base(b)}/v3/clusters/{cid}/topics/{t}/partitions/7", timeout=TIMEOUT)) == (404, 40402)
    assert error_of(requests.get(f"{base(b)}/v3/clusters/{cid}/topics/{uid('nope')}", timeout=TIMEOUT)) == (404, 40403)
    assert error_of(requests.get(f"{base(b)}/v3/clusters/not-this-one/topics", timeout=TIMEOUT)) == (404, 404)


def test_topic_create_and_delete(strom_broker):
    b = strom_broker
    t = uid("proxy-create")
    url = f"{base(b)}/v3/clusters/{cluster_id(b)}/topics"
    r = requests.post(url, json={"topic_name": t, "partitions_count": 2, "replication_factor": 1,
                                 "configs": [{"name": "cleanup.policy", "value": "compact"}]}, timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    assert r.json()["topic_name"] == t and r.json()["partitions_count"] == 2
    r = requests.post(url, json={"topic_name": t, "partitions_count": 2}, timeout=TIMEOUT)
    assert error_of(r) == (400, 40002)  # TOPIC_ALREADY_EXISTS
    assert requests.delete(f"{url}/{t}", timeout=TIMEOUT).status_code == 204
    assert error_of(requests.delete(f"{url}/{t}", timeout=TIMEOUT)) == (404, 40403)


# ---------------------------------------------------------------- v3 produce

def test_produce_json_binary_string_with_headers_then_kafka_reads_them(strom_broker):
    b = strom_broker
    t = uid("proxy-produce")
    create(b, t, 1)
    status, answers = produce(
        b, t,
        {"key": {"type": "STRING", "data": "k1"}, "value": {"type": "JSON", "data": {"n": 1}},
         "headers": [{"name": "trace", "value": base64.b64encode(b"abc").decode()}]},
        {"key": {"type": "BINARY", "data": base64.b64encode(b"\x00\x01").decode()},
         "value": {"type": "BINARY", "data": base64.b64encode(b"\xff\xfe").decode()}},
        {"value": {"type": "STRING", "data": "plain text"}},
        {"partition_id": 0, "value": {"data": [1, 2, 3]}},
    )
    assert status == 200
    # Streaming produce: one answer per record, in order, offsets consecutive.
    assert [a["error_code"] for a in answers] == [200] * 4, answers
    assert [a["offset"] for a in answers] == [0, 1, 2, 3]
    assert answers[0]["topic_name"] == t and answers[0]["partition_id"] == 0
    assert answers[0]["key"] == {"type": "STRING", "size": 2}
    assert answers[2]["key"] is None
    assert answers[3]["value"]["type"] == "JSON"
    got = kafka_read(b, t, 4)
    assert (got[0].key(), json.loads(got[0].value())) == (b"k1", {"n": 1})
    assert got[0].headers() == [("trace", b"abc")]
    assert (got[1].key(), got[1].value()) == (b"\x00\x01", b"\xff\xfe")
    assert (got[2].key(), got[2].value()) == (None, b"plain text")
    assert json.loads(got[3].value()) == [1, 2, 3]


def test_produce_avro_through_the_registry_then_avro_deserializer_reads_it(strom_broker):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    b = strom_broker
    t = uid("proxy-avro")
    create(b, t, 1)
    sr = SchemaRegistryClient({"url": f"http://127.0.0.1:{b.extra['schema_registry_port']}"})
    schema = json.dumps({"type": "record", "name": "Reading", "namespace": "proxy.test", "fields": [
        {"name": "sensor", "type": "string"}, {"name": "value", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None}]})
    sid = sr.register_schema(f"{t}-value", Schema(schema, "AVRO"))
    status, answers = produce(
        b, t,
        {"value": {"type": "AVRO", "schema_id": sid, "data": {"sensor": "a", "value": 1.5, "note": {"string": "x"}}}},
        # No type: the topic's subject (TopicNameStrategy) decides, latest version.
        {"value": {"data": {"sensor": "b", "value": 2.0, "note": None}}},
    )
    assert status == 200 and [a["error_code"] for a in answers] == [200, 200], answers
    assert answers[0]["value"]["schema_id"] == sid and answers[0]["value"]["type"] == "AVRO"
    assert answers[1]["value"]["subject"] == f"{t}-value"
    de = AvroDeserializer(sr)
    got = kafka_read(b, t, 2)
    ctx = SerializationContext(t, MessageField.VALUE)
    assert got[0].value()[:5] == b"\x00" + sid.to_bytes(4, "big")
    assert de(got[0].value(), ctx) == {"sensor": "a", "value": 1.5, "note": "x"}
    assert de(got[1].value(), ctx) == {"sensor": "b", "value": 2.0, "note": None}
    # Data that does not fit the schema: Confluent's 42203, nothing written.
    status, answers = produce(b, t, {"value": {"type": "AVRO", "schema_id": sid, "data": {"sensor": 5}}})
    assert status == 422 and answers[0]["error_code"] == 42203, answers
    # A schema'd key with no schema for its subject: 42201.
    status, answers = produce(b, t, {"key": {"type": "AVRO", "data": {"k": 1}}, "value": {"type": "STRING", "data": "v"}})
    assert status == 422 and answers[0]["error_code"] == 42201, answers


def test_produce_protobuf_with_a_reference_then_a_v2_protobuf_consumer_reads_it(strom_broker):
    """PROTOBUF values from Protobuf's JSON mapping, through the registry (the schema has an
    import, registered as a reference by confluent-kafka's serializer): the Kafka side reads
    them with ProtobufDeserializer, a v2 `protobuf` consumer gets the JSON mapping back."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from test_schema_registry import build_protobuf_classes

    b = strom_broker
    t = uid("proxy-proto")
    create(b, t, 1)
    sr = SchemaRegistryClient({"url": f"http://127.0.0.1:{b.extra['schema_registry_port']}"})
    Order = build_protobuf_classes()
    ctx = SerializationContext(t, MessageField.VALUE)
    # The serializer registers shop/order.proto under `{t}-value`, its import as a reference
    # (the serialized record itself is not produced).
    ProtobufSerializer(Order, sr, {"use.deprecated.format": False})(Order(id="seed"), ctx)
    sid = sr.get_latest_version(f"{t}-value").schema_id
    status, answers = produce(
        b, t,
        {"value": {"type": "PROTOBUF", "schema_id": sid,
                   "data": {"id": "o1", "price": {"units": "5", "currency": "EUR"}, "tags": ["a", "b"]}}},
        {"value": {"data": {"id": "o2"}}},  # no type: the topic's subject decides
    )
    assert status == 200 and [a["error_code"] for a in answers] == [200, 200], answers
    assert answers[0]["value"]["type"] == "PROTOBUF" and answers[0]["value"]["schema_id"] == sid
    de = ProtobufDeserializer(Order, {"use.deprecated.format": False})
    got = [de(m.value(), ctx) for m in kafka_read(b, t, 2)]
    assert got == [Order(id="o1", price={"units": 5, "currency": "EUR"}, tags=["a", "b"]), Order(id="o2")]
    # A field the message does not have: Confluent's 42203, nothing written.
    status, answers = produce(b, t, {"value": {"type": "PROTOBUF", "schema_id": sid, "data": {"nope": 1}}})
    assert status == 422 and answers[0]["error_code"] == 42203, answers

    g = uid("proxy-proto-g")
    inst = v2_post(f"{base(b)}/consumers/{g}", {"format": "protobuf", "auto.offset.reset": "earliest"}).json()["base_uri"]
    assert v2_post(f"{inst}/subscription", {"topics": [t]}).status_code == 204
    values = [r["value"] for r in poll_records(inst, 2, "application/vnd.kafka.protobuf.v2+json")]
    # Protobuf's JSON mapping: int64 as a string, defaults left out.
    assert values == [{"id": "o1", "price": {"units": "5", "currency": "EUR"}, "tags": ["a", "b"]}, {"id": "o2"}], values
    requests.delete(inst, timeout=TIMEOUT)


def test_produce_errors_have_confluents_codes(strom_broker):
    b = strom_broker
    t = uid("proxy-errors")
    create(b, t, 2)
    status, answers = produce(b, uid("missing"), {"value": {"type": "STRING", "data": "x"}})
    assert (status, answers[0]["error_code"]) == (404, 40403), answers
    status, answers = produce(b, t, {"partition_id": 9, "value": {"type": "STRING", "data": "x"}})
    assert (status, answers[0]["error_code"]) == (404, 40402), answers
    url = records_url(b, t)
    r = requests.post(url, data='{"value": {"type": "JSON", "data": ', headers={"Content-Type": "application/json"}, timeout=TIMEOUT)
    assert error_of(r) == (400, 400)
    r = requests.post(url, data='{"value": {"type": "STRING", "data": "x"}}', headers={"Content-Type": "text/plain"}, timeout=TIMEOUT)
    assert error_of(r) == (415, 415)
    huge = json.dumps({"value": {"type": "STRING", "data": "x" * (5 * 1024 * 1024)}})
    r = requests.post(url, data=huge, headers={"Content-Type": "application/json"}, timeout=TIMEOUT)
    assert error_of(r) == (413, 413)
    # In a stream, a bad record is answered in its place and the others still go.
    status, answers = produce(b, t, {"partition_id": 0, "value": {"type": "STRING", "data": "ok"}},
                              {"partition_id": 0, "value": {"type": "BINARY", "data": "%%%"}},
                              {"partition_id": 0, "value": {"type": "STRING", "data": "ok too"}})
    assert status == 200 and [a["error_code"] for a in answers] == [200, 400, 200], answers


# ---------------------------------------------------------------- v2 consumers

def v2_post(url: str, body=None, auth=None, ct=V2):
    return requests.post(url, data=None if body is None else json.dumps(body), auth=auth,
                         headers={"Content-Type": ct}, timeout=TIMEOUT)


def poll_records(inst: str, n: int, accept: str, auth=None) -> list[dict]:
    out, deadline = [], time.monotonic() + TIMEOUT
    while len(out) < n and time.monotonic() < deadline:
        r = requests.get(f"{inst}/records", params={"timeout": 1000, "max_bytes": 1_000_000},
                         headers={"Accept": accept}, auth=auth, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith(accept)
        out += r.json()
    assert len(out) == n, f"polled {len(out)} of {n}: {out}"
    return out


def test_v2_consumer_subscribes_polls_commits_and_kafka_sees_the_offsets(strom_broker):
    b = strom_broker
    t, g = uid("proxy-consume"), uid("proxy-group")
    create(b, t, 2)
    recs = [{"partition_id": i % 2, "key": {"type": "JSON", "data": f"k{i}"},
             "value": {"type": "JSON", "data": {"i": i}}} for i in range(6)]
    status, answers = produce(b, t, *recs)
    assert status == 200 and all(a["error_code"] == 200 for a in answers)
    r = v2_post(f"{base(b)}/consumers/{g}", {"name": "c1", "format": "json", "auto.offset.reset": "earliest",
                                              "auto.commit.enable": "false"})
    assert r.status_code == 200, r.text
    inst = r.json()["base_uri"]
    assert inst.endswith(f"/consumers/{g}/instances/c1")
    assert error_of(v2_post(f"{base(b)}/consumers/{g}", {"name": "c1", "format": "json"})) == (409, 40902)
    assert v2_post(f"{inst}/subscription", {"topics": [t]}).status_code == 204
    assert requests.get(f"{inst}/subscription", timeout=TIMEOUT).json() == {"topics": [t]}
    got = poll_records(inst, 6, JSON_V2)
    assert sorted(r["value"]["i"] for r in got) == list(range(6))
    assert all(r["topic"] == t and r["key"] == f"k{r['value']['i']}" for r in got), got
    # The instance is a member of a real group: the group's members include it.
    r = requests.get(f"{inst}/assignments", timeout=TIMEOUT)
    assert sorted(p["partition"] for p in r.json()["partitions"]) == [0, 1]
    # A wrong Accept for a json instance: Confluent's 40601.
    r = requests.get(f"{inst}/records", headers={"Accept": BINARY_V2}, timeout=TIMEOUT)
    assert error_of(r) == (406, 40601)
    # Commit the last record of partition 0 (offset 2): the group's offset is 3.
    r = v2_post(f"{inst}/offsets", {"offsets": [{"topic": t, "partition": 0, "offset": 2}]})
    assert r.status_code == 200, r.text
    r = requests.get(f"{inst}/offsets", data=json.dumps({"partitions": [{"topic": t, "partition": 0}]}),
                     headers={"Content-Type": V2}, timeout=TIMEOUT)
    assert r.json()["offsets"][0]["offset"] == 3, r.text
    # Commit the positions (no body): partition 1 is committed at 3 too.
    assert v2_post(f"{inst}/offsets").status_code == 200
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g, [TopicPartition(t, 0), TopicPartition(t, 1)])])
    offsets = {tp.partition: tp.offset for tp in fut[g].result(TIMEOUT).topic_partitions}
    assert offsets == {0: 3, 1: 3}, offsets
    desc = admin.describe_consumer_groups([g])[g].result(TIMEOUT)
    assert len(desc.members) == 1, desc
    # Deleting the instance leaves the group; it is gone for the proxy.
    assert requests.delete(inst, timeout=TIMEOUT).status_code == 204
    assert error_of(requests.get(f"{inst}/subscription", timeout=TIMEOUT)) == (404, 40403)
    deadline = time.monotonic() + TIMEOUT
    while admin.describe_consumer_groups([g])[g].result(TIMEOUT).members and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not admin.describe_consumer_groups([g])[g].result(TIMEOUT).members
    # A Kafka consumer of the group carries on from the committed offsets: nothing left.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": g, "auto.offset.reset": "earliest"})
    committed = c.committed([TopicPartition(t, 0), TopicPartition(t, 1)], timeout=TIMEOUT)
    assert [tp.offset for tp in committed] == [3, 3]
    c.close()


def test_v2_binary_consumer_with_assign_and_seek(strom_broker):
    b = strom_broker
    t, g = uid("proxy-binary"), uid("proxy-bgroup")
    create(b, t, 1)
    status, _ = produce(b, t, *[{"value": {"type": "BINARY", "data": base64.b64encode(bytes([i])).decode()}} for i in range(4)])
    assert status == 200
    r = v2_post(f"{base(b)}/consumers/{g}", {"format": "binary", "auto.offset.reset": "earliest"})
    inst = r.json()["base_uri"]
    assert v2_post(f"{inst}/assignments", {"partitions": [{"topic": t, "partition": 0}]}).status_code == 204
    # Subscribing an assigned instance is refused as Kafka's consumer refuses it.
    assert error_of(v2_post(f"{inst}/subscription", {"topics": [t]})) == (409, 40903)
    assert v2_post(f"{inst}/positions", {"offsets": [{"topic": t, "partition": 0, "offset": 2}]}).status_code == 204
    got = poll_records(inst, 2, BINARY_V2)
    assert [base64.b64decode(r["value"]) for r in got] == [b"\x02", b"\x03"] and got[0]["offset"] == 2
    assert v2_post(f"{inst}/positions/beginning", {"partitions": [{"topic": t, "partition": 0}]}).status_code == 204
    assert len(poll_records(inst, 4, BINARY_V2)) == 4
    assert requests.delete(inst, timeout=TIMEOUT).status_code == 204


def test_v2_avro_and_jsonschema_consumers_decode_through_the_registry(strom_broker):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    b = strom_broker
    t, g = uid("proxy-schemas"), uid("proxy-sgroup")
    create(b, t, 1)
    sr = SchemaRegistryClient({"url": f"http://127.0.0.1:{b.extra['schema_registry_port']}"})
    avro = sr.register_schema(f"{t}-value", Schema(json.dumps(
        {"type": "record", "name": "V", "fields": [{"name": "n", "type": "int"}]}), "AVRO"))
    js = sr.register_schema(f"{t}-key", Schema(json.dumps(
        {"type": "object", "properties": {"id": {"type": "string"}}}), "JSON"))
    status, answers = produce(b, t, *[{"key": {"type": "JSONSCHEMA", "schema_id": js, "data": {"id": f"i{n}"}},
                                       "value": {"type": "AVRO", "data": {"n": n}}} for n in range(3)])
    assert status == 200 and [a["key"]["schema_id"] for a in answers] == [js] * 3, answers
    raw = kafka_read(b, t, 1)[0]
    assert raw.key()[:5] == b"\x00" + js.to_bytes(4, "big") and json.loads(raw.key()[5:]) == {"id": "i0"}
    # An avro consumer decodes both (each record names its schema); values as Confluent's.
    inst = v2_post(f"{base(b)}/consumers/{g}", {"format": "avro", "auto.offset.reset": "earliest"}).json()["base_uri"]
    assert v2_post(f"{inst}/subscription", {"topics": [t]}).status_code == 204
    # The key is JSON Schema, not Avro: an avro consumer cannot read this topic's keys.
    r = requests.get(f"{inst}/records", headers={"Accept": AVRO_V2}, timeout=TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while r.status_code == 200 and not r.json() and time.monotonic() < deadline:
        r = requests.get(f"{inst}/records", headers={"Accept": AVRO_V2}, timeout=TIMEOUT)
    assert r.status_code == 500 and r.json()["error_code"] == 50002, r.text
    requests.delete(inst, timeout=TIMEOUT)
    # Keys only as JSON Schema: a jsonschema consumer of a topic whose keys and values are.
    t2 = uid("proxy-js")
    create(b, t2, 1)
    sid = sr.register_schema(f"{t2}-value", Schema(json.dumps({"type": "object"}), "JSON"))
    status, _ = produce(b, t2, {"value": {"type": "JSONSCHEMA", "data": {"a": [1, 2]}}})
    assert status == 200
    inst = v2_post(f"{base(b)}/consumers/{g}-js", {"format": "jsonschema", "auto.offset.reset": "earliest"}).json()["base_uri"]
    assert v2_post(f"{inst}/subscription", {"topics": [t2]}).status_code == 204
    got = poll_records(inst, 1, "application/vnd.kafka.jsonschema.v2+json")
    assert got[0]["value"] == {"a": [1, 2]} and got[0]["key"] is None
    requests.delete(inst, timeout=TIMEOUT)
    # And avro values under an avro consumer.
    t3 = uid("proxy-av")
    create(b, t3, 1)
    sr.register_schema(f"{t3}-value", Schema(json.dumps(
        {"type": "record", "name": "W", "fields": [{"name": "s", "type": "string"}]}), "AVRO"))
    assert produce(b, t3, {"value": {"data": {"s": "hello"}}})[0] == 200
    inst = v2_post(f"{base(b)}/consumers/{g}-av", {"format": "avro", "auto.offset.reset": "earliest"}).json()["base_uri"]
    assert v2_post(f"{inst}/subscription", {"topics": [t3]}).status_code == 204
    assert poll_records(inst, 1, AVRO_V2)[0]["value"] == {"s": "hello"}
    requests.delete(inst, timeout=TIMEOUT)
    assert avro and sid


def test_v2_two_instances_of_a_group_split_its_partitions(strom_broker):
    b = strom_broker
    t, g = uid("proxy-split"), uid("proxy-split-g")
    create(b, t, 2)
    insts = []
    for n in ("a", "b"):
        r = v2_post(f"{base(b)}/consumers/{g}", {"name": n, "format": "binary", "auto.offset.reset": "earliest"})
        insts.append(r.json()["base_uri"])
        assert v2_post(f"{insts[-1]}/subscription", {"topics": [t]}).status_code == 204
    # The second join rebalances the first (its heartbeat task rejoins): one partition each.
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for inst in insts:
            requests.get(f"{inst}/records", params={"timeout": 200}, headers={"Accept": BINARY_V2}, timeout=TIMEOUT)
        parts = [sorted(p["partition"] for p in requests.get(f"{i}/assignments", timeout=TIMEOUT).json()["partitions"])
                 for i in insts]
        if sorted(parts) == [[0], [1]]:
            break
        time.sleep(0.5)
    assert sorted(parts) == [[0], [1]], parts
    # Both are members of the Kafka group, as `kafka-consumer-groups --describe` shows them.
    desc = js(b, "group", "describe", g)[0]
    assert desc["state"] == "Stable" and len(desc["members"]) == 2, desc
    for inst in insts:
        assert requests.delete(inst, timeout=TIMEOUT).status_code == 204


def test_v2_errors_have_confluents_codes(strom_broker):
    b = strom_broker
    g = uid("proxy-egroup")
    missing = f"{base(b)}/consumers/{g}/instances/nobody"
    assert error_of(requests.get(f"{missing}/records", timeout=TIMEOUT)) == (404, 40403)
    assert error_of(requests.delete(missing, timeout=TIMEOUT)) == (404, 40403)
    assert error_of(v2_post(f"{base(b)}/consumers/{g}", {"format": "xml"})) == (422, 42204)
    assert error_of(v2_post(f"{base(b)}/consumers/{g}", {"format": "json"}, ct="text/plain")) == (415, 415)
    r = requests.post(f"{base(b)}/consumers/{g}", data="{not json", headers={"Content-Type": V2}, timeout=TIMEOUT)
    assert error_of(r) == (400, 400)
    r = requests.post(f"{base(b)}/consumers/{g}", data="[" * (2 * 1024 * 1024), headers={"Content-Type": V2}, timeout=TIMEOUT)
    assert error_of(r) == (413, 413)


# ---------------------------------------------------------------- auth

USERS = {"admin": "admin-secret", "writer": "writer-secret", "reader": "reader-secret"}


@pytest.fixture(scope="module")
def secured():
    """SCRAM users, Kafka's StandardAuthorizer, and the admin port behind HTTP basic auth
    checked against the SCRAM credentials: proxy requests run as the signed-in user."""
    from conftest import _ready_check

    b = brokers.start_strom(security={
        "listeners": ["SASL_PLAINTEXT"],
        "settings": {
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        },
        "strom_settings": {"admin_authentication": "basic"},
        "users": [(u, p, "SCRAM-SHA-512") for u, p in USERS.items()],
    })
    try:
        _ready_check(b)
        yield b
    finally:
        b.cleanup()


def test_with_auth_a_user_without_write_acl_is_refused(secured):
    b = secured
    admin = ["--brokers", f"127.0.0.1:{b.extra['ports']['SASL_PLAINTEXT']}", "--sasl-mechanism", "PLAIN",
             "--user", "admin", "--password", USERS["admin"]]
    t = uid("proxy-acl")
    strom(b, "topic", "create", t, "-p", "1", "-r", "1", *admin)
    for user, op in [("writer", "write"), ("writer", "describe"), ("reader", "describe"), ("reader", "read")]:
        strom(b, "acl", "create", "--allow-principal", user, "--operation", op, "--topic", t, *admin)
    assert requests.get(f"{base(b)}/v3/clusters", timeout=TIMEOUT).status_code == 401
    writer, reader = ("writer", USERS["writer"]), ("reader", USERS["reader"])
    rec = {"value": {"type": "STRING", "data": "x"}}
    status, answers = produce(b, t, rec, auth=reader)
    assert (status, answers[0]["error_code"]) == (403, 40301), answers
    status, answers = produce(b, t, rec, auth=writer)
    assert (status, answers[0]["error_code"]) == (200, 200), answers
