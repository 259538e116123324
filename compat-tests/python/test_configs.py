"""Dynamic configs through real admin clients: confluent-kafka's AdminClient
(incremental_alter_configs, alter_configs, describe_configs) and kafka-python's
KafkaAdminClient (alter_configs, describe_configs), against Strom and Kafka 4.4 alike.

Broker-level changes are undone in `finally` blocks: both brokers live for the whole session.

Every effect of a change is checked with `admin.applied`: at once on Strom, which applies a
change before it answers; polled (bounded) on Kafka, whose broker applies it when its
metadata log reaches it (FINDINGS.md #10).
"""

from __future__ import annotations

import pytest

import admin
from clients import unique_topic

INVALID_CONFIG = 40
INVALID_REQUEST = 42
MESSAGE_TOO_LARGE = 10

T = admin.ADMIN_TIMEOUT_S


def _admin(bootstrap):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def incremental(bootstrap, rtype: str, name: str, ops: list[tuple[str, str, str | None]], validate_only=False) -> int:
    """IncrementalAlterConfigs of (config, op, value) on one resource; the Kafka error code."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entries = [
        ConfigEntry(k, v, incremental_operation=getattr(AlterConfigOpType, op)) for k, op, v in ops
    ]
    res = ConfigResource(getattr(ResourceType, rtype), name, incremental_configs=entries)
    a = _admin(bootstrap)  # kept alive until the answer: destroying it fails the future
    fut = a.incremental_alter_configs([res], validate_only=validate_only, request_timeout=T)[res]
    try:
        fut.result(timeout=T)
        return admin.NONE
    except KafkaException as e:
        return e.args[0].code()


def describe(bootstrap, rtype: str, name: str) -> dict[str, tuple[str | None, str]]:
    """{config: (value, source)} through confluent-kafka's DescribeConfigs."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    res = ConfigResource(getattr(ResourceType, rtype), name)
    a = _admin(bootstrap)
    entries = a.describe_configs([res], request_timeout=T)[res].result(timeout=T)
    return {k: (e.value, ConfigSource(e.source).name) for k, e in entries.items()}


def new_topic(broker, prefix: str, configs: dict | None = None) -> str:
    name = unique_topic(prefix)
    assert admin.create_topic("confluent", broker.bootstrap, name, 1, configs) == admin.NONE
    admin.wait_for(lambda: admin.topic_partitions("confluent", broker.bootstrap, name), f"{name} to exist")
    # Produced to without retries below: the partition must take writes already.
    admin.wait_partitions_ready(broker.bootstrap, name, 1)
    return name


def topic_config(broker, name: str, key: str, want: tuple[str | None, str], what: str):
    """DescribeConfigs of topic `name` shows `key` = `want` (value, source) once the change
    took effect (admin.applied)."""
    admin.applied(broker, what, lambda: describe(broker.bootstrap, "TOPIC", name)[key], want)


def test_incremental_set_append_subtract_delete_on_a_topic_then_describe_follows(broker):
    b = broker.bootstrap
    name = new_topic(broker, "cfg-ops")
    assert incremental(b, "TOPIC", name, [("retention.ms", "SET", "3600000")]) == admin.NONE
    topic_config(broker, name, "retention.ms", ("3600000", "DYNAMIC_TOPIC_CONFIG"), "the SET")
    assert incremental(b, "TOPIC", name, [("cleanup.policy", "APPEND", "compact")]) == admin.NONE
    topic_config(broker, name, "cleanup.policy", ("delete,compact", "DYNAMIC_TOPIC_CONFIG"), "the APPEND")
    assert incremental(b, "TOPIC", name, [("cleanup.policy", "SUBTRACT", "delete")]) == admin.NONE
    topic_config(broker, name, "cleanup.policy", ("compact", "DYNAMIC_TOPIC_CONFIG"), "the SUBTRACT")
    ops = [("retention.ms", "DELETE", None), ("cleanup.policy", "DELETE", None)]
    assert incremental(b, "TOPIC", name, ops) == admin.NONE
    admin.applied(
        broker,
        "both DELETEs",
        lambda: {k: v for k, v in describe(b, "TOPIC", name).items() if k in ("retention.ms", "cleanup.policy")},
        {"retention.ms": ("604800000", "DEFAULT_CONFIG"), "cleanup.policy": ("delete", "DEFAULT_CONFIG")},
    )


def test_validate_only_checks_without_changing_anything(broker):
    b = broker.bootstrap
    name = new_topic(broker, "cfg-validate")
    assert incremental(b, "TOPIC", name, [("retention.ms", "SET", "1000")], validate_only=True) == admin.NONE
    assert incremental(b, "TOPIC", name, [("retention.ms", "SET", "x")], validate_only=True) == INVALID_CONFIG
    assert describe(b, "TOPIC", name)["retention.ms"] == ("604800000", "DEFAULT_CONFIG")


@pytest.mark.parametrize(
    "rtype,name,ops,code",
    [
        ("TOPIC", None, [("no.such.config", "SET", "1")], INVALID_CONFIG),
        ("TOPIC", None, [("retention.ms", "SET", "not-a-number")], INVALID_CONFIG),
        ("TOPIC", None, [("segment.bytes", "SET", "13")], INVALID_CONFIG),
        ("TOPIC", None, [("cleanup.policy", "SET", "shred")], INVALID_CONFIG),
        ("TOPIC", None, [("retention.ms", "APPEND", "5")], INVALID_CONFIG),
        ("TOPIC", "cfg-missing-topic", [("retention.ms", "SET", "5")], admin.UNKNOWN_TOPIC_OR_PARTITION),
        ("BROKER", "0", [("log.dirs", "SET", "/tmp/elsewhere")], INVALID_REQUEST),
        ("BROKER", "0", [("node.id", "SET", "3")], INVALID_REQUEST),
        ("BROKER", "0", [("message.max.bytes", "SET", "lots")], INVALID_REQUEST),
        ("BROKER", "0", [("log.segment.bytes", "SET", "13")], INVALID_REQUEST),
        ("BROKER", "0", [("message.max.bytes", "APPEND", "5")], INVALID_CONFIG),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_invalid_changes_get_kafkas_error_codes(broker, rtype, name, ops, code):
    if rtype == "TOPIC" and name is None:
        name = new_topic(broker, "cfg-bad")
    elif name == "cfg-missing-topic":
        name = unique_topic(name)
    assert incremental(broker.bootstrap, rtype, name, ops) == code


def _error(fut) -> tuple[int, str]:
    """(code, message) of an admin future's outcome: (0, "") on success."""
    from confluent_kafka import KafkaException

    try:
        fut.result(timeout=T)
        return admin.NONE, ""
    except KafkaException as e:
        return e.args[0].code(), e.args[0].str()


LAG_CONFLICT = "conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms (1000)"


def test_min_compaction_lag_above_max_refused_with_kafkas_message(broker):
    """Kafka's `LogConfig.validate` checks the two lags together, over the topic's whole new
    config set: at CreateTopics, and at an alter that makes an existing override conflict."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

    b = broker.bootstrap
    a = _admin(b)
    name = unique_topic("cfg-lag")
    lags = {"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"}
    fut = a.create_topics([NewTopic(name, 1, 1, config=lags)], request_timeout=T)[name]
    code, message = _error(fut)
    assert (code, LAG_CONFLICT in message) == (INVALID_CONFIG, True), message
    assert not admin.topic_partitions("confluent", b, name), "a refused topic is not created"

    name = new_topic(broker, "cfg-lag", {"max.compaction.lag.ms": "1000"})

    def alter(value: str, validate_only=False) -> tuple[int, str]:
        entry = ConfigEntry("min.compaction.lag.ms", value, incremental_operation=AlterConfigOpType.SET)
        res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[entry])
        return _error(a.incremental_alter_configs([res], validate_only=validate_only, request_timeout=T)[res])

    for validate_only in (True, False):
        code, message = alter("5000", validate_only)
        assert (code, LAG_CONFLICT in message) == (INVALID_CONFIG, True), message
    assert describe(b, "TOPIC", name)["min.compaction.lag.ms"] == ("0", "DEFAULT_CONFIG")
    assert alter("1000") == (admin.NONE, "")
    topic_config(broker, name, "min.compaction.lag.ms", ("1000", "DYNAMIC_TOPIC_CONFIG"), "the equal lag")


def _produce_error(bootstrap: str, topic: str, size: int):
    """Produces one `size`-byte record; the delivery error code (0 when stored)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000, "retries": 0})
    results = []
    p.produce(topic, b"x" * size, on_delivery=lambda err, _msg: results.append(err))
    assert p.flush(timeout=T) == 0
    return results[0].code() if results[0] is not None else 0


def test_altered_max_message_bytes_refuses_a_larger_record_at_once(broker):
    b = broker.bootstrap
    name = new_topic(broker, "cfg-size")
    assert _produce_error(b, name, 5000) == 0
    assert incremental(b, "TOPIC", name, [("max.message.bytes", "SET", "2000")]) == admin.NONE
    admin.applied(broker, "a 5000-byte record refused", lambda: _produce_error(b, name, 5000), MESSAGE_TOO_LARGE)
    assert _produce_error(b, name, 500) == 0
    assert incremental(b, "TOPIC", name, [("max.message.bytes", "DELETE", None)]) == admin.NONE
    admin.applied(broker, "a 5000-byte record stored again", lambda: _produce_error(b, name, 5000), 0)


# Neither Python client can address the cluster-wide default resource (BROKER ""):
# confluent-kafka refuses the empty name, kafka-python wants an integer. The in-process tests
# (broker/src/handlers/incremental_alter_configs.rs) cover it; here it is this broker's value.


def test_dynamic_broker_default_reaches_topics_without_an_override(broker):
    b = broker.bootstrap
    plain = new_topic(broker, "cfg-follow")
    pinned = new_topic(broker, "cfg-pinned", {"retention.ms": "7200000"})
    try:
        assert incremental(b, "BROKER", "0", [("log.retention.ms", "SET", "1800000")]) == admin.NONE
        topic_config(broker, plain, "retention.ms", ("1800000", "DYNAMIC_BROKER_CONFIG"),
                     "the topic to follow the broker value")
        assert describe(b, "TOPIC", pinned)["retention.ms"] == ("7200000", "DYNAMIC_TOPIC_CONFIG")
        assert describe(b, "BROKER", "0")["log.retention.ms"] == ("1800000", "DYNAMIC_BROKER_CONFIG")
    finally:
        assert incremental(b, "BROKER", "0", [("log.retention.ms", "DELETE", None)]) == admin.NONE
    topic_config(broker, plain, "retention.ms", ("604800000", "DEFAULT_CONFIG"), "the topic to fall back to the default")


def test_dynamic_broker_message_max_bytes_applies_to_produce_at_once(broker):
    b = broker.bootstrap
    name = new_topic(broker, "cfg-broker-size")
    try:
        assert incremental(b, "BROKER", "0", [("message.max.bytes", "SET", "3000")]) == admin.NONE
        topic_config(broker, name, "max.message.bytes", ("3000", "DYNAMIC_BROKER_CONFIG"),
                     "the topic to follow the broker value")
        # Kafka updates the describe view and the logs' config one after the other: the
        # produce path gets its own wait there.
        admin.applied(broker, "a 6000-byte record refused", lambda: _produce_error(b, name, 6000), MESSAGE_TOO_LARGE)
    finally:
        assert incremental(b, "BROKER", "0", [("message.max.bytes", "DELETE", None)]) == admin.NONE
    # Strom applies the DELETE before it answers; Kafka once its metadata log reaches the
    # broker (it answered MESSAGE_TOO_LARGE right after the DELETE on a fresh machine).
    admin.applied(broker, "a 6000-byte record stored again", lambda: _produce_error(b, name, 6000), 0)


def test_confluent_legacy_alter_configs_replaces_the_topics_overrides(broker):
    from confluent_kafka.admin import ConfigResource, ResourceType

    b = broker.bootstrap
    name = new_topic(broker, "cfg-legacy", {"segment.bytes": "1048576"})
    res = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "5000000"})
    a = _admin(b)
    a.alter_configs([res], request_timeout=T)[res].result(timeout=T)
    cfg = admin.applied(broker, "the legacy AlterConfigs", lambda: describe(b, "TOPIC", name),
                        lambda c: c["retention.ms"] == ("5000000", "DYNAMIC_TOPIC_CONFIG"))
    # AlterConfigs sets the whole set: the override given at create time is gone.
    assert cfg["segment.bytes"] == ("1073741824", "DEFAULT_CONFIG")


def _kp_admin(bootstrap):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(T * 1000))


def test_kafka_python_alter_and_describe_configs(broker):
    from kafka.admin import ConfigResource, ConfigResourceType

    b = broker.bootstrap
    name = new_topic(broker, "cfg-kp")
    a = _kp_admin(b)
    try:
        res = ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "4000000"})
        out = a.alter_configs([res], incremental=False, raise_on_unknown=False)
        assert out == {"topic": {name: "OK"}}

        def retention():
            got = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all")
            entry = got["topic"][name]["retention.ms"]
            return entry["value"], entry["config_source"]

        admin.applied(broker, "kafka-python's AlterConfigs", retention, ("4000000", "DYNAMIC_TOPIC_CONFIG"))
        bad = ConfigResource(ConfigResourceType.TOPIC, name, configs={"no.such.config": "1"})
        out = a.alter_configs([bad], incremental=False, raise_on_unknown=False)
        assert "InvalidConfigurationError" in out["topic"][name], out
        # The incremental path of the same client, and validate_only.
        res = ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "5000000"})
        assert a.alter_configs([res], incremental=True, validate_only=True) == {"topic": {name: "OK"}}
        got = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": None})])
        assert got["topic"][name]["retention.ms"]["value"] == "4000000"
        broker_res = ConfigResource(ConfigResourceType.BROKER, "0")
        got = a.describe_configs([broker_res], config_filter="dynamic")["broker"]["0"]
        assert "message.max.bytes" in got and "log.retention.bytes" in got
        assert "log.dirs" not in got, "read-only configs are not dynamic"
    finally:
        a.close()
