"""The Python clients configured for a secured listener: one `Creds` (what the client
presents) becomes each client's own settings, so a test states once what it connects with.
Produce and consume are minimal (records with distinct keys and values, one partition,
manual assignment); the full record-shape matrix is test_produce_consume.py's job.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

CLIENTS = ("confluent", "kafka-python", "aiokafka")
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Creds:
    """What a client presents: the protocol, the CA it trusts, its certificate."""

    protocol: str = "PLAINTEXT"  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    mechanism: str | None = None  # SCRAM-SHA-512, SCRAM-SHA-256, PLAIN
    user: str | None = None
    password: str | None = None


def confluent_conf(bootstrap: str, c: Creds) -> dict:
    conf = {"bootstrap.servers": bootstrap, "security.protocol": c.protocol}
    if c.ca:
        conf["ssl.ca.location"] = c.ca
    if c.cert:
        conf["ssl.certificate.location"] = c.cert
        conf["ssl.key.location"] = c.key
    if c.mechanism:
        conf.update({"sasl.mechanisms": c.mechanism, "sasl.username": c.user, "sasl.password": c.password})
    return conf


def kafka_python_conf(bootstrap: str, c: Creds) -> dict:
    conf = {"bootstrap_servers": bootstrap, "security_protocol": c.protocol}
    if c.ca:
        conf["ssl_cafile"] = c.ca
        conf["ssl_check_hostname"] = True
    if c.cert:
        conf["ssl_certfile"] = c.cert
        conf["ssl_keyfile"] = c.key
    if c.mechanism:
        conf.update({"sasl_mechanism": c.mechanism, "sasl_plain_username": c.user, "sasl_plain_password": c.password})
    return conf


def aiokafka_conf(bootstrap: str, c: Creds) -> dict:
    conf = {"bootstrap_servers": bootstrap, "security_protocol": c.protocol}
    if c.protocol in ("SSL", "SASL_SSL"):
        from aiokafka.helpers import create_ssl_context

        conf["ssl_context"] = create_ssl_context(cafile=c.ca, certfile=c.cert, keyfile=c.key)
    if c.mechanism:
        conf.update({"sasl_mechanism": c.mechanism, "sasl_plain_username": c.user, "sasl_plain_password": c.password})
    return conf


def records(n: int) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f"v{i}-{uuid.uuid4().hex}".encode()) for i in range(n)]


def create_topic(bootstrap: str, c: Creds, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient(confluent_conf(bootstrap, c))
    a.create_topics([NewTopic(topic, partitions)])[topic].result(timeout=TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        md = a.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} not in metadata after {TIMEOUT_S}s")


def metadata(bootstrap: str, c: Creds, timeout_s: float = 10.0):
    """confluent-kafka's Metadata answer; raises KafkaException when it cannot get one."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(confluent_conf(bootstrap, c)).list_topics(timeout=timeout_s)


def produce(
    client: str, bootstrap: str, c: Creds, topic: str, recs: list[tuple[bytes, bytes]], timeout_s: float = TIMEOUT_S
) -> None:
    """Produces `recs` to partition 0 with acks=all; raises unless every record is acked
    within `timeout_s` (short in tests that expect a refusal)."""
    if client == "confluent":
        from confluent_kafka import KafkaException, Producer

        errors = []
        p = Producer({**confluent_conf(bootstrap, c), "acks": "all", "message.timeout.ms": int(timeout_s * 1000)})
        for k, v in recs:
            p.produce(topic, key=k, value=v, partition=0, on_delivery=lambda e, m: e and errors.append(e))
        if p.flush(timeout_s + 5) or errors:
            raise KafkaException(errors[0] if errors else "undelivered records")
    elif client == "kafka-python":
        from kafka import KafkaProducer

        ms = int(timeout_s * 1000)
        p = KafkaProducer(
            **kafka_python_conf(bootstrap, c), acks="all", request_timeout_ms=ms, max_block_ms=ms, bootstrap_timeout_ms=ms
        )
        try:
            for f in [p.send(topic, key=k, value=v, partition=0) for k, v in recs]:
                f.get(timeout=timeout_s)
        finally:
            p.close(timeout=10)
    else:
        from aiokafka import AIOKafkaProducer

        async def run():
            p = AIOKafkaProducer(**aiokafka_conf(bootstrap, c), acks="all", request_timeout_ms=int(timeout_s * 1000))
            await p.start()
            try:
                for k, v in recs:
                    await p.send_and_wait(topic, key=k, value=v, partition=0)
            finally:
                await p.stop()

        asyncio.run(asyncio.wait_for(run(), 2 * timeout_s))


def consume(client: str, bootstrap: str, c: Creds, topic: str, n: int) -> list[tuple[bytes, bytes]]:
    got: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + TIMEOUT_S
    if client == "confluent":
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        cons = Consumer({**confluent_conf(bootstrap, c), "group.id": f"sec-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False})
        try:
            cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            while len(got) < n and time.monotonic() < deadline:
                for m in cons.consume(num_messages=500, timeout=0.5):
                    if m.error():
                        raise AssertionError(f"consume error: {m.error()}")
                    got.append((m.key(), m.value()))
        finally:
            cons.close()
    elif client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        cons = KafkaConsumer(**kafka_python_conf(bootstrap, c), group_id=None, enable_auto_commit=False)
        try:
            cons.assign([TopicPartition(topic, 0)])
            cons.seek_to_beginning()
            while len(got) < n and time.monotonic() < deadline:
                for msgs in cons.poll(timeout_ms=500).values():
                    got.extend((m.key, m.value) for m in msgs)
        finally:
            cons.close()
    else:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition

        async def run():
            cons = AIOKafkaConsumer(**aiokafka_conf(bootstrap, c), group_id=None, enable_auto_commit=False)
            await cons.start()
            try:
                cons.assign([TopicPartition(topic, 0)])
                await cons.seek_to_beginning()
                while len(got) < n and time.monotonic() < deadline:
                    for msgs in (await cons.getmany(timeout_ms=500)).values():
                        got.extend((m.key, m.value) for m in msgs)
            finally:
                await cons.stop()

        asyncio.run(asyncio.wait_for(run(), 2 * TIMEOUT_S))
    return got
