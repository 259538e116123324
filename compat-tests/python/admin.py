"""Topic administration through each client's own admin API, answers reduced to Kafka
error codes (ints) so Strom's and Kafka's answers compare directly."""

from __future__ import annotations

import asyncio
import time

from clients import bounded

# Kafka protocol error codes the tests name.
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37

ADMIN_TIMEOUT_S = 30.0


def create_topic(client: str, bootstrap: str, name: str, partitions: int, configs: dict | None = None) -> int:
    """Create one topic; returns the error code the broker answered (0 on success)."""
    configs = configs or {}
    if client == "confluent":
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        a = AdminClient({"bootstrap.servers": bootstrap})
        fut = a.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs)],
            request_timeout=ADMIN_TIMEOUT_S,
        )[name]
        try:
            fut.result(timeout=ADMIN_TIMEOUT_S)
            return NONE
        except KafkaException as e:
            return e.args[0].code()
    if client == "kafka-python":
        from kafka import KafkaAdminClient

        a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
        try:
            r = a.create_topics(
                {name: {"num_partitions": partitions, "replication_factor": 1, "configs": configs}},
                raise_errors=False,
            )
            (t,) = r["topics"]
            return t["error_code"]
        finally:
            a.close()
    if client == "aiokafka":
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        async def run():
            a = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
            await a.start()
            try:
                r = await a.create_topics([NewTopic(name, partitions, 1, topic_configs=configs)])
                ((topic, code, *_),) = r.topic_errors
                assert topic == name
                return code
            finally:
                await a.close()

        return bounded(run())
    raise ValueError(client)


def delete_topic(client: str, bootstrap: str, name: str) -> int:
    if client == "confluent":
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        a = AdminClient({"bootstrap.servers": bootstrap})
        fut = a.delete_topics([name], request_timeout=ADMIN_TIMEOUT_S)[name]
        try:
            fut.result(timeout=ADMIN_TIMEOUT_S)
            return NONE
        except KafkaException as e:
            return e.args[0].code()
    if client == "kafka-python":
        from kafka import KafkaAdminClient

        a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
        try:
            (t,) = a.delete_topics([name], raise_errors=False)["topics"]
            return t["error_code"]
        finally:
            a.close()
    if client == "aiokafka":
        from aiokafka.admin import AIOKafkaAdminClient

        async def run():
            a = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
            await a.start()
            try:
                r = await a.delete_topics([name])
                ((topic, code, *_),) = r.topic_error_codes
                return code
            finally:
                await a.close()

        return bounded(run())
    raise ValueError(client)


def topic_partitions(client: str, bootstrap: str, name: str) -> dict[int, int] | None:
    """{partition: leader id} for a topic from Metadata, or None when the broker does not
    list it."""
    if client == "confluent":
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=ADMIN_TIMEOUT_S)
        t = md.topics.get(name)
        if t is None or t.error is not None:
            return None
        return {p.id: p.leader for p in t.partitions.values()}
    if client == "kafka-python":
        from kafka import KafkaAdminClient

        a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
        try:
            if name not in a.list_topics():
                return None
            (t,) = a.describe_topics([name])
            if t["error_code"] != 0:
                return None
            return {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
        finally:
            a.close()
    if client == "aiokafka":
        from aiokafka.admin import AIOKafkaAdminClient

        async def run():
            a = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
            await a.start()
            try:
                if name not in await a.list_topics():
                    return None
                (t,) = await a.describe_topics([name])
                if t["error_code"] != 0:
                    return None
                return {p["partition"]: p["leader"] for p in t["partitions"]}
            finally:
                await a.close()

        return bounded(run())
    raise ValueError(client)


def wait_for(pred, what: str, timeout_s: float = ADMIN_TIMEOUT_S, interval_s: float = 0.2):
    """Polls `pred` until it returns a truthy value; fails with `what` after the timeout."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what} (last: {last!r})")


def describe_topic_configs(bootstrap: str, name: str) -> dict[str, tuple[str | None, str]]:
    """{config name: (value, source name)} through confluent-kafka's DescribeConfigs."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, name)
    entries = a.describe_configs([res], request_timeout=ADMIN_TIMEOUT_S)[res].result(timeout=ADMIN_TIMEOUT_S)
    return {k: (e.value, ConfigSource(e.source).name) for k, e in entries.items()}
