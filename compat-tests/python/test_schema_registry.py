"""Strom's built-in Schema Registry (docs/schema-registry.md) through confluent-kafka-python's
`SchemaRegistryClient` and its Avro, Protobuf and JSON Schema serializers, against a real
`strom serve` — Strom only: Apache Kafka has no registry (Confluent's is a separate product).

What Confluent's registry answers for the edge cases is recorded in
`schema_registry_answers.json` (status, `error_code`, message from Confluent's `Errors` and
resources); `test_recorded_confluent_answers` replays each request against Strom.
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

import brokers

ANSWERS = Path(__file__).with_name("schema_registry_answers.json")
CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def registry(strom_broker) -> str:
    return f"http://127.0.0.1:{strom_broker.extra['schema_registry_port']}"


@pytest.fixture()
def client(registry) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "strom.test",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}
USER_V2 = {**USER_V1, "fields": USER_V1["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}]}
USER_NO_DEFAULT = {**USER_V1, "fields": USER_V1["fields"] + [{"name": "age", "type": "int"}]}


def produce_consume(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(TIMEOUT_S) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    out: list[bytes] = []
    try:
        import time

        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < len(values) and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and not m.error():
                out.append(m.value())
    finally:
        c.close()
    return out


def test_avro_serializer_round_trip_through_strom(strom_broker, client):
    topic = unique("avro")
    ser = AvroSerializer(client, json.dumps(USER_V1))
    de = AvroDeserializer(client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    users = [{"id": i, "name": f"user {i}"} for i in range(20)]
    framed = [ser(u, ctx) for u in users]
    # Confluent's wire format: magic byte 0, then the id the registry gave.
    schema_id = client.get_latest_version(f"{topic}-value").schema_id
    assert all(f[0] == 0 and int.from_bytes(f[1:5], "big") == schema_id for f in framed)
    got = produce_consume(strom_broker.bootstrap, topic, framed)
    assert [de(v, ctx) for v in got] == users
    # Registering the same schema again answers the same id and version.
    again = client.register_schema(f"{topic}-value", Schema(json.dumps(USER_V1), "AVRO"))
    assert again == schema_id
    assert client.get_versions(f"{topic}-value") == [1]
    assert f"{topic}-value" in client.get_subjects()


def test_avro_evolution_follows_each_compatibility_level(client, registry):
    subject = unique("evolve")
    v1 = client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    # BACKWARD (the default): a field with a default may be added, one without may not.
    assert client.test_compatibility(subject, Schema(json.dumps(USER_V2), "AVRO")) is True
    assert client.test_compatibility(subject, Schema(json.dumps(USER_NO_DEFAULT), "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema(subject, Schema(json.dumps(USER_NO_DEFAULT), "AVRO"))
    assert e.value.http_status_code == 409 and e.value.error_code == 409
    assert "incompatible" in e.value.error_message
    v2 = client.register_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))
    assert v2 != v1
    # FORWARD: old readers must read new data; a new field without default is fine there.
    assert client.set_compatibility(subject, "FORWARD") == {"compatibility": "FORWARD"}
    assert client.get_compatibility(subject) == "FORWARD"
    assert client.test_compatibility(subject, Schema(json.dumps(USER_NO_DEFAULT | {"fields": USER_V2["fields"] + [{"name": "age", "type": "int"}]}), "AVRO"))
    # Removing a field without default breaks FORWARD.
    dropped = {**USER_V1, "fields": [USER_V1["fields"][0]]}
    assert client.test_compatibility(subject, Schema(json.dumps(dropped), "AVRO")) is False
    # FULL_TRANSITIVE checks every version.
    client.set_compatibility(subject, "FULL_TRANSITIVE")
    assert client.test_compatibility(subject, Schema(json.dumps(USER_NO_DEFAULT), "AVRO")) is False
    # NONE allows anything.
    client.set_compatibility(subject, "NONE")
    assert client.register_schema(subject, Schema(json.dumps(USER_NO_DEFAULT), "AVRO")) > v2
    assert client.get_versions(subject) == [1, 2, 3]
    # The verbose answer says why.
    client.set_compatibility(subject, "BACKWARD")
    r = requests.post(
        f"{registry}/compatibility/subjects/{subject}/versions/latest?verbose=true",
        data=json.dumps({"schema": json.dumps({**USER_V1, "fields": [{"name": "id", "type": "string"}]})}),
        headers=CT,
        timeout=TIMEOUT_S,
    )
    body = r.json()
    assert r.status_code == 200 and body["is_compatible"] is False and body["messages"], body


def test_avro_references_resolve_across_subjects(client):
    address_subject = unique("address")
    address = {"type": "record", "name": "Address", "namespace": "strom.test", "fields": [{"name": "city", "type": "string"}]}
    client.register_schema(address_subject, Schema(json.dumps(address), "AVRO"))
    person = {"type": "record", "name": "Person", "namespace": "strom.test", "fields": [{"name": "home", "type": "strom.test.Address"}]}
    refs = [SchemaReference("strom.test.Address", address_subject, 1)]
    subject = unique("person")
    pid = client.register_schema(subject, Schema(json.dumps(person), "AVRO", refs))
    got = client.get_schema(pid)
    assert [(r.name, r.subject, r.version) for r in got.references] == [("strom.test.Address", address_subject, 1)]
    # A referenced version cannot be deleted (42206), the referring one can.
    with pytest.raises(SchemaRegistryError) as e:
        client.delete_version(address_subject, 1)
    assert e.value.error_code == 42206
    # Unknown reference: invalid schema.
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema(unique("p"), Schema(json.dumps(person), "AVRO", [SchemaReference("strom.test.Address", "no-such-subject", 1)]))
    assert e.value.error_code == 42201


def build_protobuf_classes():
    """Two .proto files made at run time (shop/money.proto imported by shop/order.proto),
    so the Protobuf serializer registers the import as a reference."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    money = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop", syntax="proto3")
    m = money.message_type.add(name="Money")
    m.field.add(name="units", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64, label=1)
    m.field.add(name="currency", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    order = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3", dependency=["shop/money.proto"])
    o = order.message_type.add(name="Order")
    o.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    o.field.add(name="price", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE, type_name=".shop.Money", label=1)
    o.field.add(name="tags", number=3, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=3)
    pool.Add(money)
    pool.Add(order)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_serializer_round_trip_with_reference(strom_broker, client):
    Order = build_protobuf_classes()
    topic = unique("proto")
    ser = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
    de = ProtobufDeserializer(Order, {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    orders = [Order(id=f"o{i}", price={"units": i, "currency": "EUR"}, tags=["a", "b"]) for i in range(10)]
    framed = [ser(o, ctx) for o in orders]
    got = produce_consume(strom_broker.bootstrap, topic, framed)
    assert [de(v, ctx) for v in got] == orders
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject) for r in latest.schema.references] == [("shop/money.proto", "shop/money.proto")]
    # Stored as .proto text; format=serialized gives the descriptor back.
    assert "message Order {" in latest.schema.schema_str
    serialized = client.get_schema(latest.schema_id, fmt="serialized")
    from google.protobuf import descriptor_pb2

    fd = descriptor_pb2.FileDescriptorProto()
    fd.ParseFromString(base64.b64decode(serialized.schema_str))
    assert [m.name for m in fd.message_type] == ["Order"]


def test_protobuf_compatibility_rules(client):
    subject = unique("proto-compat")
    v1 = 'syntax = "proto3";\npackage t;\nmessage M {\n  string a = 1;\n  int64 n = 2;\n}\n'
    client.register_schema(subject, Schema(v1, "PROTOBUF"))
    added = v1.replace("int64 n = 2;", "int64 n = 2;\n  bool extra = 3;")
    assert client.test_compatibility(subject, Schema(added, "PROTOBUF")) is True
    retyped = v1.replace("int64 n = 2;", "string n = 2;")
    assert client.test_compatibility(subject, Schema(retyped, "PROTOBUF")) is False
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema(subject, Schema(retyped, "PROTOBUF"))
    assert e.value.error_code == 409


JSON_V1 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Reading",
    "type": "object",
    "properties": {"sensor": {"type": "string"}, "value": {"type": "number"}},
    "required": ["sensor"],
    "additionalProperties": False,
}


def test_json_schema_serializer_round_trip_and_evolution(strom_broker, client):
    topic = unique("json")
    ser = JSONSerializer(json.dumps(JSON_V1), client)
    de = JSONDeserializer(json.dumps(JSON_V1), schema_registry_client=client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    readings = [{"sensor": f"s{i}", "value": i / 2} for i in range(10)]
    got = produce_consume(strom_broker.bootstrap, topic, [ser(r, ctx) for r in readings])
    assert [de(v, ctx) for v in got] == readings
    subject = f"{topic}-value"
    # Closed content model: adding an optional property is backward compatible ...
    added = {**JSON_V1, "properties": {**JSON_V1["properties"], "unit": {"type": "string"}}}
    assert client.test_compatibility(subject, Schema(json.dumps(added), "JSON")) is True
    # ... changing a property's type is not.
    retyped = {**JSON_V1, "properties": {**JSON_V1["properties"], "value": {"type": "string"}}}
    assert client.test_compatibility(subject, Schema(json.dumps(retyped), "JSON")) is False


def test_soft_and_hard_delete(client):
    subject = unique("delete")
    client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    sid = client.register_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    # The id still decodes data (soft delete), and lists as deleted.
    assert client.get_schema(sid).schema_str
    with pytest.raises(SchemaRegistryError) as e:
        client.delete_version(subject, 2, permanent=False)
    assert e.value.error_code == 40406
    assert client.delete_subject(subject) == [1]
    assert subject not in client.get_subjects()
    with pytest.raises(SchemaRegistryError) as e:
        client.get_versions(subject)
    assert e.value.error_code == 40401
    assert client.delete_subject(subject, permanent=True) == [1, 2]
    with pytest.raises(SchemaRegistryError) as e:
        client.delete_subject(subject, permanent=True)
    assert e.value.error_code == 40401


def test_modes(client, registry):
    subject = unique("mode")
    client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    assert client.update_mode(subject, "READONLY") == "READONLY"
    assert client.get_mode(subject) == "READONLY"
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))
    assert e.value.error_code == 42205
    assert client.delete_mode(subject) == "READONLY"
    with pytest.raises(SchemaRegistryError) as e:
        client.get_mode(subject)
    assert e.value.error_code == 40409
    assert client.get_global_mode() == "READWRITE"
    # IMPORT on a registry with subjects needs force.
    with pytest.raises(SchemaRegistryError) as e:
        client.update_global_mode("IMPORT")
    assert e.value.error_code == 42205
    # A subject in IMPORT mode keeps the id and version it is given.
    imported = unique("import")
    r = requests.put(f"{registry}/mode/{imported}", data=json.dumps({"mode": "IMPORT"}), headers=CT, timeout=TIMEOUT_S)
    assert r.status_code == 200, r.text
    body = {"schema": json.dumps({**USER_V1, "name": "Imported"}), "id": 500000, "version": 7}
    r = requests.post(f"{registry}/subjects/{imported}/versions", data=json.dumps(body), headers=CT, timeout=TIMEOUT_S)
    assert r.status_code == 200 and r.json()["id"] == 500000, r.text
    assert client.get_version(imported, 7).schema_id == 500000


def test_recorded_confluent_answers(registry):
    """Each recorded request, against Strom: the status and error_code Confluent answers."""
    cases = json.loads(ANSWERS.read_text())
    subject = unique("answers")
    # Fixtures the cases refer to: a subject with one Avro version.
    r = requests.post(f"{registry}/subjects/{subject}/versions", data=json.dumps({"schema": json.dumps(USER_V1)}), headers=CT, timeout=TIMEOUT_S)
    assert r.status_code == 200, r.text
    failures = []
    for case in cases["cases"]:
        path = case["path"].replace("{subject}", subject)
        body = case.get("body")
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        headers = {**CT, **case.get("headers", {})}
        r = requests.request(case["method"], f"{registry}{path}", data=body, headers=headers, timeout=TIMEOUT_S)
        want = json.loads(json.dumps(case["confluent"]).replace("{subject}", subject))
        got = {"status": r.status_code}
        try:
            doc = r.json()
        except ValueError:
            doc = None
        if "error_code" in want:
            got["error_code"] = doc.get("error_code") if isinstance(doc, dict) else None
        if "message" in want:
            got["message"] = doc.get("message") if isinstance(doc, dict) else None
        if "body" in want:
            got["body"] = doc
        if any(got.get(k) != v for k, v in want.items()):
            failures.append(f"{case['name']}: {case['method']} {path}: Confluent {want}, Strom {got} ({r.text[:200]})")
        assert r.headers.get("content-type", "").startswith("application/vnd.schemaregistry.v1+json"), case["name"]
    assert not failures, "\n".join(failures)


def test_bad_input_gets_4xx_and_the_registry_stays_up(registry):
    subject = unique("bad")
    post = lambda data, headers=CT: requests.post(f"{registry}/subjects/{subject}/versions", data=data, headers=headers, timeout=TIMEOUT_S)  # noqa: E731
    for data, status, code in [
        (b"{not json", 400, 400),
        (b"[]", 422, 422),
        (json.dumps({"schema": "{\"type\": \"record\""}), 422, 42201),
        (json.dumps({"schema": "\"int\"", "schemaType": "XML"}), 422, 42201),
        (json.dumps({"schema": "message {", "schemaType": "PROTOBUF"}), 422, 42201),
        (json.dumps({"schema": "{\"type\": 12}", "schemaType": "JSON"}), 422, 42201),
        (b"\xff\xfe", 400, 400),
    ]:
        r = post(data)
        assert (r.status_code, r.json().get("error_code")) == (status, code), (data, r.text)
    # A schema larger than a _schemas record may be (message.max.bytes): 42209.
    huge = {"type": "record", "name": "Huge", "fields": [{"name": f"f{i}_" + "x" * 40, "type": "string"} for i in range(30000)]}
    r = post(json.dumps({"schema": json.dumps(huge)}))
    assert (r.status_code, r.json()["error_code"]) == (422, 42209), r.text[:300]
    # Deeply nested JSON (beyond the parser's recursion limit) is a 400, not a crash.
    r = post(b"[" * 100000 + b"]" * 100000)
    assert r.status_code == 400
    # Form-encoded bodies (curl -d without -H) are refused as Confluent does.
    r = post(b"schema=x", {"Content-Type": "application/x-www-form-urlencoded"})
    assert (r.status_code, r.json()["error_code"]) == (415, 415)
    assert requests.get(f"{registry}/subjects", timeout=TIMEOUT_S).status_code == 200


# ---------------------------------------------------------------- broker-side validation

def deliveries(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]], one_batch: bool) -> list:
    """Produces (key, value) records; each record's delivery error (None when delivered).
    Apart (`one_batch` False) every record is a batch of its own: flushed before the next."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000 if one_batch else 0,
                  "enable.idempotence": False, "retries": 0})
    out: list = [None] * len(records)

    def report(i):
        return lambda err, _msg: out.__setitem__(i, err)

    for i, (k, v) in enumerate(records):
        p.produce(topic, key=k, value=v, partition=0, on_delivery=report(i))
        if not one_batch:
            p.flush(TIMEOUT_S)
    assert p.flush(TIMEOUT_S) == 0
    return out


def test_broker_side_validation_refuses_records_without_a_valid_schema_id(strom_broker, client):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    b = strom_broker
    topic, other = unique("validated"), unique("other")
    # Confluent Server's names for the value, Redpanda's for the key (both accepted), keys by
    # RecordNameStrategy: the subject is the record's full name.
    configs = {"confluent.value.schema.validation": "true", "redpanda.key.schema.id.validation": "true",
               "redpanda.key.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy"}
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic(topic, 1, config=configs), NewTopic(other, 1)])[topic].result(timeout=TIMEOUT_S)
    described = a.describe_configs([ConfigResource("topic", topic)])
    got = {k: v.value for k, v in next(iter(described.values())).result(timeout=TIMEOUT_S).items()}
    assert {k: got.get(k) for k in configs} == configs

    ser = AvroSerializer(client, json.dumps(USER_V1))
    key_ser = AvroSerializer(client, json.dumps(USER_V1), conf={
        "subject.name.strategy": lambda ctx, record_name: record_name})
    key = key_ser({"id": 0, "name": "k"}, SerializationContext(topic, MessageField.KEY))
    good = [ser({"id": i, "name": f"u{i}"}, SerializationContext(topic, MessageField.VALUE)) for i in range(3)]
    # An id registered only under another subject (`{other}-value`).
    foreign_schema = {**USER_V1, "name": "Other"}
    foreign = AvroSerializer(client, json.dumps(foreign_schema))({"id": 9, "name": "x"},
                                                               SerializationContext(other, MessageField.VALUE))
    assert foreign[1:5] != good[0][1:5]
    unknown = b"\x00" + (2**31 - 7).to_bytes(4, "big") + good[0][5:]
    records = [(key, good[0]), (key, b'{"id": 1}'), (key, good[1]), (key, unknown), (key, foreign), (key, good[2]),
               (b"plain key", good[0])]

    # One record per batch: the valid ones are delivered, each bad one refused with
    # INVALID_RECORD (KIP-467), named in the broker's record error.
    errs = deliveries(b.bootstrap, topic, records, one_batch=False)
    codes = [e.code() if e else None for e in errs]
    assert codes == [None, KafkaError.INVALID_RECORD, None, KafkaError.INVALID_RECORD, KafkaError.INVALID_RECORD,
                     None, KafkaError.INVALID_RECORD], errs
    de = AvroDeserializer(client)
    got_values = produce_consume_existing(b.bootstrap, topic, 3)
    assert [de(v, SerializationContext(topic, MessageField.VALUE))["id"] for v in got_values] == [0, 1, 2]

    # In one batch, as in Kafka: one bad record refuses the batch (librdkafka reports
    # INVALID_RECORD for each; the record_errors naming it are checked in
    # handlers/produce/settings_tests.rs, librdkafka does not surface them).
    errs = deliveries(b.bootstrap, topic, [(key, good[0]), (key, b"no magic byte"), (key, good[1])], one_batch=True)
    assert [e.code() if e else None for e in errs] == [KafkaError.INVALID_RECORD] * 3, errs
    # Nothing of that batch was appended: the log still ends after the first three.
    from confluent_kafka import TopicPartition

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("w")})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S) == (0, 3)
    finally:
        c.close()


def test_deep_validation_refuses_payloads_their_schema_cannot_read(strom_broker, client):
    """`strom.schema.validation.deep`: a registered id is not enough; the payload must decode
    with that schema (Avro), and a JSON document must satisfy its JSON Schema. Without the
    flag the same records are accepted (only the id is checked)."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    b = strom_broker
    deep, shallow, docs = unique("deep"), unique("shallow"), unique("deep-json")
    on = {"confluent.value.schema.validation": "true"}
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    futures = a.create_topics([NewTopic(deep, 1, config={**on, "strom.schema.validation.deep": "true"}),
                               NewTopic(shallow, 1, config=on),
                               NewTopic(docs, 1, config={**on, "strom.schema.validation.deep": "true"})])
    for f in futures.values():
        f.result(timeout=TIMEOUT_S)

    def avro_records(topic):
        ser = AvroSerializer(client, json.dumps(USER_V1))
        good = ser({"id": 1, "name": "ok"}, SerializationContext(topic, MessageField.VALUE))
        # The right id, a payload cut inside the name's bytes.
        return [(None, good), (None, good[:-2]), (None, good + b"\x00")]

    codes = [e.code() if e else None for e in deliveries(b.bootstrap, deep, avro_records(deep), one_batch=False)]
    assert codes == [None, KafkaError.INVALID_RECORD, KafkaError.INVALID_RECORD], codes
    codes = [e.code() if e else None for e in deliveries(b.bootstrap, shallow, avro_records(shallow), one_batch=False)]
    assert codes == [None, None, None], codes

    doc_schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}
    jser = JSONSerializer(json.dumps(doc_schema), client)
    good = jser({"n": 1}, SerializationContext(docs, MessageField.VALUE))
    frame = good[:5]
    records = [(None, good), (None, frame + b'{"n": -1}'), (None, frame + b'{"m": 1}'), (None, frame + b"not json")]
    codes = [e.code() if e else None for e in deliveries(b.bootstrap, docs, records, one_batch=False)]
    assert codes == [None] + [KafkaError.INVALID_RECORD] * 3, codes


def produce_consume_existing(bootstrap: str, topic: str, want: int, wait_s: float = TIMEOUT_S) -> list[bytes]:
    """The first `want` values of `topic` (fewer if `wait_s` passes first)."""
    import time

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    out: list[bytes] = []
    try:
        deadline = time.monotonic() + wait_s
        while len(out) < want and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m.value())
    finally:
        c.close()
    return out


def confluent_key(**fields) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode()


def test_existing_schemas_topic_is_replayed_with_its_ids():
    """A `_schemas` topic written by Confluent's registry (as `strom migrate mirror` copies
    it): records in Confluent's format, produced before and while the registry runs, give
    the same ids and subjects — and survive a restart."""
    b = brokers.start_strom(shards=2)
    try:
        registry = f"http://127.0.0.1:{b.extra['schema_registry_port']}"
        p = Producer({"bootstrap.servers": b.bootstrap})
        schema = json.dumps(USER_V1, separators=(",", ":"))
        p.produce(
            "_schemas",
            key=confluent_key(keytype="SCHEMA", subject="mirrored-value", version=1, magic=1),
            value=json.dumps({"subject": "mirrored-value", "version": 1, "id": 42, "schema": schema, "deleted": False}).encode(),
        )
        p.produce("_schemas", key=confluent_key(keytype="CONFIG", subject=None, magic=0), value=b'{"compatibilityLevel":"FULL"}')
        p.produce("_schemas", key=confluent_key(keytype="NOOP", magic=0), value=None)
        assert p.flush(TIMEOUT_S) == 0
        import time

        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            r = requests.get(f"{registry}/schemas/ids/42", timeout=TIMEOUT_S)
            if r.status_code == 200:
                break
            time.sleep(0.2)
        assert r.status_code == 200, r.text
        assert requests.get(f"{registry}/config", timeout=TIMEOUT_S).json() == {"compatibilityLevel": "FULL"}
        # A new registration continues after the mirrored ids.
        r = requests.post(f"{registry}/subjects/new-value/versions", data=json.dumps({"schema": "\"string\""}), headers=CT, timeout=TIMEOUT_S)
        assert r.json()["id"] == 43, r.text
        data_dir = b.workdir / "data"
        b.stop()
        b2 = brokers.start_strom(shards=1, data_dir=data_dir)
        try:
            registry2 = f"http://127.0.0.1:{b2.extra['schema_registry_port']}"
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:
                r = requests.get(f"{registry2}/subjects", timeout=TIMEOUT_S)
                if r.status_code == 200 and r.json():
                    break
                time.sleep(0.2)
            assert r.json() == ["mirrored-value", "new-value"]
            assert requests.get(f"{registry2}/subjects/new-value/versions/1", timeout=TIMEOUT_S).json()["id"] == 43
        finally:
            b2.cleanup()
    finally:
        b.cleanup()


def test_registry_honours_the_admin_ports_authentication():
    """With `admin_authentication=basic`, the registry's port asks what the admin port asks:
    HTTP Basic against the SCRAM users, `admin_principals` deciding who may come in. Refusals
    carry Confluent's error body, which SchemaRegistryClient reads (401, 403)."""
    from conftest import _ready_check

    users = {"alice": "alice-secret", "bob": "bob-secret"}
    b = brokers.start_strom(security={
        "listeners": ["SASL_PLAINTEXT"],
        "settings": {"sasl.enabled.mechanisms": "SCRAM-SHA-512", "admin_authentication": "basic",
                     "admin_principals": "User:alice"},
        "users": [(u, p, "SCRAM-SHA-512") for u, p in users.items()],
    })
    try:
        _ready_check(b)
        url = f"http://127.0.0.1:{b.extra['schema_registry_port']}"

        def as_user(info: str | None) -> SchemaRegistryClient:
            conf = {"url": url}
            if info is not None:
                conf["basic.auth.user.info"] = info
            return SchemaRegistryClient(conf)

        subject = unique("secured")
        alice = as_user("alice:alice-secret")
        sid = alice.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
        assert alice.get_schema(sid).schema_str and subject in alice.get_subjects()
        for who, status in [(None, 401), ("alice:wrong", 401), ("bob:bob-secret", 403)]:
            with pytest.raises(SchemaRegistryError) as e:
                as_user(who).get_subjects()
            assert (e.value.http_status_code, e.value.error_code) == (status, status), (who, e.value)
        r = requests.get(f"{url}/subjects", timeout=10)
        assert r.status_code == 401 and r.json() == {"error_code": 401, "message": "Unauthorized"}
        assert r.headers["WWW-Authenticate"].startswith("Basic")
    finally:
        b.cleanup()
