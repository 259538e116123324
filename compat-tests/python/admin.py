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


def applied(broker, what: str, get, want, timeout_s: float = ADMIN_TIMEOUT_S):
    """The effect of a request that changed broker state (a config, a new topic), checked
    as each broker makes it visible: Strom applies the change before it answers the request
    (FINDINGS.md #10), so `get()` must equal `want` at once; Kafka's controller answers when
    the change is in its metadata log and the broker applies it when that log reaches it, so
    on Kafka `get()` is polled until it equals `want`, for at most `timeout_s`. Returns the
    last value; fails naming `what` and the last value otherwise. `want` may be a predicate."""
    ok = want if callable(want) else (lambda v: v == want)
    if broker.name == "strom":
        got = get()
        assert ok(got), f"strom: {what} not visible right after the request that made it (got {got!r})"
        return got
    state = {}

    def settled():
        state["got"] = get()
        return ok(state["got"])

    try:
        wait_for(settled, what, timeout_s)
    except AssertionError:
        raise AssertionError(f"{broker.name}: timed out after {timeout_s:.0f}s waiting for {what} (last: {state.get('got')!r})") from None
    return state["got"]


def wait_partitions_ready(bootstrap: str, name: str, partitions: int, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
    """Waits until every partition of a new topic answers ListOffsets. Kafka answers
    CreateTopics (and lists the topic in Metadata) before its broker has created the
    partitions' logs; a Produce in between fails with NOT_LEADER_OR_FOLLOWER, which a
    producer without retries reports and an acks=0 one loses silently (FINDINGS.md #3). The
    other languages' suites wait the same way."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    a = AdminClient({"bootstrap.servers": bootstrap})
    want = {TopicPartition(name, p): OffsetSpec.latest() for p in range(partitions)}

    last = {}

    def answered():
        try:
            futs = a.list_offsets(want, request_timeout=10)
            return all(f.result(timeout=10).offset >= 0 for f in futs.values())
        except Exception as e:  # noqa: BLE001 - any failure means "not yet"
            last["error"] = e
            return False

    try:
        wait_for(answered, f"every partition of {name} to answer ListOffsets", timeout_s)
    except AssertionError as e:
        raise AssertionError(f"{e}; last error: {last.get('error')!r}") from None


def describe_topic_configs(bootstrap: str, name: str) -> dict[str, tuple[str | None, str]]:
    """{config name: (value, source name)} through confluent-kafka's DescribeConfigs."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, name)
    entries = a.describe_configs([res], request_timeout=ADMIN_TIMEOUT_S)[res].result(timeout=ADMIN_TIMEOUT_S)
    return {k: (e.value, ConfigSource(e.source).name) for k, e in entries.items()}
