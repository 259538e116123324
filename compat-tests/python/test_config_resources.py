"""The BROKER_LOGGER (KIP-412) and GROUP (KIP-848) config resources through kafka-python's
KafkaAdminClient (DescribeConfigs, IncrementalAlterConfigs) and Kafka 4.4's kafka-configs
tool, against Strom and Kafka alike.

Logger names differ (Strom's are tracing targets, Kafka's log4j names): each broker's own
second-level logger is used, and `root`, which both have. Levels changed here are put back
in `finally`: both brokers live for the session. Group configs are set on a fresh group
name per test.
"""

from __future__ import annotations

import re

import pytest

import admin
import kafka_tools as kt
from clients import unique_topic

INVALID_CONFIG = 40
INVALID_REQUEST = 42

# A logger each broker has, with the level its test config starts it at.
LOGGER = {"strom": ("strom.handlers", "INFO"), "kafka": ("kafka.request.logger", "WARN")}

# Kafka 4.4's group configs (GroupConfig): Strom lists them all, applying the consumer.*
# session timeout and heartbeat interval and keeping the rest read-only.
GROUP_CONFIGS = {
    "consumer.assignment.interval.ms", "consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
    "errors.deadletterqueue.copy.record.enable", "errors.deadletterqueue.topic.name",
    "share.assignment.interval.ms", "share.auto.offset.reset", "share.delivery.count.limit",
    "share.heartbeat.interval.ms", "share.isolation.level", "share.partition.max.record.locks",
    "share.record.lock.duration.ms", "share.renew.acknowledge.enable", "share.session.timeout.ms",
    "streams.assignment.interval.ms", "streams.assignor.name", "streams.heartbeat.interval.ms",
    "streams.initial.rebalance.delay.ms", "streams.num.standby.replicas",
    "streams.rack.aware.assignment.tags", "streams.session.timeout.ms",
}


def _admin(bootstrap):
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(admin.ADMIN_TIMEOUT_S * 1000))


def describe(bootstrap, rtype: str, name: str) -> dict[str, dict]:
    from kafka.admin import ConfigResource, ConfigResourceType

    a = _admin(bootstrap)
    try:
        r = a.describe_configs([ConfigResource(getattr(ConfigResourceType, rtype), name)],
                               include_synonyms=True, config_filter="all")
    finally:
        a.close()
    return next(iter(next(iter(r.values())).values()))


def alter(bootstrap, rtype: str, name: str, ops: dict[str, tuple[str, str | None]]) -> int:
    """IncrementalAlterConfigs of {config: (op, value)} on one resource: the Kafka error code."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    configs = {k: (getattr(AlterConfigOp, op), v) for k, (op, v) in ops.items()}
    a = _admin(bootstrap)
    try:
        r = a.alter_configs([ConfigResource(getattr(ConfigResourceType, rtype), name, configs)],
                            raise_on_unknown=False, incremental=True)
    finally:
        a.close()
    outcome = str(next(iter(next(iter(r.values())).values())))
    if outcome == "OK":
        return 0
    m = re.match(r"\[Error (\d+)\]", outcome)
    assert m, outcome
    return int(m[1])


def level(broker, logger: str) -> str:
    return describe(broker.bootstrap, "BROKER_LOGGER", "0")[logger]["value"]


def test_broker_loggers_listed_with_levels_then_set_and_delete(broker):
    b = broker.bootstrap
    logger, start = LOGGER[broker.name]
    listed = describe(b, "BROKER_LOGGER", "0")
    assert listed["root"]["value"] == "INFO"
    assert listed[logger]["value"] == start
    assert {c["config_source"] for c in listed.values()} == {"DYNAMIC_BROKER_LOGGER_CONFIG"}
    assert not any(c["read_only"] for c in listed.values())
    try:
        assert alter(b, "BROKER_LOGGER", "0", {logger: ("SET", "DEBUG")}) == 0
        assert level(broker, logger) == "DEBUG"
        assert alter(b, "BROKER_LOGGER", "0", {logger: ("SET", "FATAL")}) == 0
        assert level(broker, logger) == "FATAL"
    finally:
        assert alter(b, "BROKER_LOGGER", "0", {logger: ("SET", start)}) == 0
    assert level(broker, logger) == start


def test_broker_logger_refusals_have_kafkas_codes(broker):
    b = broker.bootstrap
    logger, start = LOGGER[broker.name]
    cases = [
        ({"no.such.logger": ("SET", "DEBUG")}, INVALID_CONFIG),
        ({logger: ("SET", "LOUD")}, INVALID_CONFIG),
        ({logger: ("SET", "debug")}, INVALID_CONFIG),
        ({"root": ("DELETE", None)}, INVALID_REQUEST),
        ({logger: ("APPEND", "DEBUG")}, INVALID_REQUEST),
        ({logger: ("SUBTRACT", "DEBUG")}, INVALID_REQUEST),
    ]
    for ops, want in cases:
        assert alter(b, "BROKER_LOGGER", "0", ops) == want, ops
    assert level(broker, logger) == start


def test_kafka_configs_tool_alters_and_describes_broker_loggers(broker):
    kt.fetch()
    logger, start = LOGGER[broker.name]
    args = ["--entity-type", "broker-loggers", "--entity-name", "0"]
    try:
        r = kt.run("kafka-configs", broker.bootstrap, "--alter", *args, "--add-config", f"{logger}=TRACE")
        assert (r.rc, r.lines()) == (0, ["Completed updating config for broker-logger 0."]), r.err
        r = kt.run("kafka-configs", broker.bootstrap, "--describe", *args)
        assert r.rc == 0, r.err
        assert r.lines()[0] == "Dynamic configs for broker-logger 0 are:", r.lines()[:5]
        assert f"  {logger}=TRACE sensitive=false synonyms={{}}" in r.lines()
        assert "  root=INFO sensitive=false synonyms={}" in r.lines()
    finally:
        assert alter(broker.bootstrap, "BROKER_LOGGER", "0", {logger: ("SET", start)}) == 0


def test_group_configs_described_with_defaults_then_altered(broker):
    b = broker.bootstrap
    group = unique_topic("cfg-group")
    listed = describe(b, "GROUP", group)
    assert set(listed) == GROUP_CONFIGS
    session = listed["consumer.session.timeout.ms"]
    assert (session["value"], session["config_source"], session["read_only"]) == ("45000", "DEFAULT_CONFIG", False)
    assert [(s["name"], s["value"]) for s in session["synonyms"]] == [("group.consumer.session.timeout.ms", "45000")]
    assert alter(b, "GROUP", group, {"consumer.session.timeout.ms": ("SET", "50000"),
                                     "consumer.heartbeat.interval.ms": ("SET", "6000")}) == 0

    def shown():
        c = describe(b, "GROUP", group)["consumer.session.timeout.ms"]
        return c["value"], c["config_source"]

    admin.applied(broker, "the group SET", shown, ("50000", "DYNAMIC_GROUP_CONFIG"))
    assert alter(b, "GROUP", group, {"consumer.session.timeout.ms": ("DELETE", None)}) == 0
    admin.applied(broker, "the group DELETE", shown, ("45000", "DEFAULT_CONFIG"))
    assert describe(b, "GROUP", group)["consumer.heartbeat.interval.ms"]["value"] == "6000"


@pytest.mark.parametrize("ops,want", [
    ({"no.such.config": ("SET", "1")}, INVALID_CONFIG),
    ({"consumer.session.timeout.ms": ("SET", "soon")}, INVALID_CONFIG),
    ({"consumer.session.timeout.ms": ("SET", "0")}, INVALID_CONFIG),
    ({"consumer.session.timeout.ms": ("SET", "70000")}, INVALID_CONFIG),
    ({"consumer.heartbeat.interval.ms": ("SET", "1000")}, INVALID_CONFIG),
    ({"consumer.session.timeout.ms": ("APPEND", "1")}, INVALID_CONFIG),
])
def test_group_config_refusals_have_kafkas_codes(broker, ops, want):
    assert alter(broker.bootstrap, "GROUP", unique_topic("cfg-group-bad"), ops) == want


def test_group_configs_strom_does_not_apply_are_read_only_there(broker):
    """Kafka stores every group setting; Strom refuses the ones it does not apply rather than
    keep a value that does nothing (FINDINGS.md #9): the rack-aware standby tags of streams
    groups (no rack-aware assignment yet). The share and streams settings its groups use,
    `share.isolation.level` and `streams.heartbeat.interval.ms` among them, are stored and
    listed on both."""
    group = unique_topic("cfg-group-share")
    listed = describe(broker.bootstrap, "GROUP", group)
    tags = "streams.rack.aware.assignment.tags"
    code = alter(broker.bootstrap, "GROUP", group, {tags: ("SET", "zone")})
    if broker.name == "strom":
        assert listed[tags]["read_only"] is True
        assert code == INVALID_CONFIG
    else:
        assert listed[tags]["read_only"] is False
        assert code == 0
    assert listed["streams.heartbeat.interval.ms"]["read_only"] is False
    assert alter(broker.bootstrap, "GROUP", group, {"streams.heartbeat.interval.ms": ("SET", "6000")}) == 0
    assert describe(broker.bootstrap, "GROUP", group)["streams.heartbeat.interval.ms"]["value"] == "6000"
    assert listed["share.isolation.level"]["read_only"] is False
    assert alter(broker.bootstrap, "GROUP", group, {"share.isolation.level": ("SET", "read_committed")}) == 0
    assert describe(broker.bootstrap, "GROUP", group)["share.isolation.level"]["value"] == "read_committed"
    assert listed["share.session.timeout.ms"]["read_only"] is False
    assert alter(broker.bootstrap, "GROUP", group, {"share.session.timeout.ms": ("SET", "50000")}) == 0
    assert describe(broker.bootstrap, "GROUP", group)["share.session.timeout.ms"]["value"] == "50000"
