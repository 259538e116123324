"""CreateTopics, DeleteTopics, Metadata and DescribeConfigs through each client's admin API."""

from __future__ import annotations

import pytest

import admin
from clients import CLIENTS, unique_topic


@pytest.mark.parametrize("client", CLIENTS)
def test_create_topic_then_metadata_lists_partitions_led_by_the_broker(broker, client):
    name = unique_topic(f"create-{client}")
    assert admin.create_topic(client, broker.bootstrap, name, 3) == admin.NONE
    parts = admin.wait_for(
        lambda: admin.topic_partitions(client, broker.bootstrap, name), f"metadata for {name}"
    )
    # Single node, node id 0 on both brokers: every partition is led by broker 0.
    assert parts == {0: 0, 1: 0, 2: 0}


@pytest.mark.parametrize("client", CLIENTS)
def test_create_existing_topic_answers_topic_already_exists(broker, client):
    name = unique_topic(f"dup-{client}")
    assert admin.create_topic(client, broker.bootstrap, name, 1) == admin.NONE
    assert admin.create_topic(client, broker.bootstrap, name, 1) == admin.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    "bad_name",
    ["bad/name", "has space", "x" * 250, ".", ".."],
    ids=["slash", "space", "too-long-250", "dot", "dotdot"],
)
def test_create_topic_with_invalid_name_answers_invalid_topic_exception(broker, client, bad_name):
    assert admin.create_topic(client, broker.bootstrap, bad_name, 1) == admin.INVALID_TOPIC_EXCEPTION


def test_create_topic_with_zero_partitions_answers_invalid_partitions(broker):
    name = unique_topic("zero-parts")
    assert admin.create_topic("kafka-python", broker.bootstrap, name, 0) == admin.INVALID_PARTITIONS


def test_metadata_lists_the_broker_itself_at_its_address(broker):
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=admin.ADMIN_TIMEOUT_S)
    assert [(b.id, b.host, b.port) for b in md.brokers.values()] == [(0, "127.0.0.1", broker.port)]
    assert md.controller_id == 0


def test_producer_metadata_for_unknown_topic_auto_creates_it_with_one_partition(broker):
    """auto.create.topics.enable=true and num.partitions=1 are both brokers' defaults; a
    producer's Metadata request sets allow_auto_topic_creation (consumers' do not)."""
    from kafka import KafkaProducer

    name = unique_topic("auto")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, max_block_ms=30000)
    try:
        parts = p.partitions_for(name)
        p.send(name, b"v").get(timeout=30)
    finally:
        p.close(timeout=10)
    assert parts == {0}
    assert admin.topic_partitions("confluent", broker.bootstrap, name) == {0: 0}


def test_consumer_metadata_for_unknown_topic_answers_unknown_topic_and_does_not_create_it(broker):
    """librdkafka's consumer names the topic in Metadata with allow_auto_topic_creation=false
    (allow.auto.create.topics defaults to false for consumers)."""
    from clients import confluent_consumer

    name = unique_topic("no-auto")
    c = confluent_consumer(broker.bootstrap)
    try:
        md = c.list_topics(topic=name, timeout=admin.ADMIN_TIMEOUT_S)
    finally:
        c.close()
    t = md.topics[name]
    assert t.error is not None and t.error.code() == admin.UNKNOWN_TOPIC_OR_PARTITION, t.error
    assert admin.topic_partitions("confluent", broker.bootstrap, name) is None


@pytest.mark.parametrize("client", CLIENTS)
def test_delete_topic_removes_it_and_a_second_delete_answers_unknown_topic(broker, client):
    name = unique_topic(f"del-{client}")
    assert admin.create_topic(client, broker.bootstrap, name, 2) == admin.NONE
    admin.wait_for(lambda: admin.topic_partitions(client, broker.bootstrap, name), f"{name} to appear")
    assert admin.delete_topic(client, broker.bootstrap, name) == admin.NONE
    admin.wait_for(
        lambda: admin.topic_partitions(client, broker.bootstrap, name) is None, f"{name} to disappear"
    )
    assert admin.delete_topic(client, broker.bootstrap, name) == admin.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_configs_of_topic_lists_defaults_and_the_overrides_given_at_create(broker):
    name = unique_topic("configs")
    assert (
        admin.create_topic("confluent", broker.bootstrap, name, 1, {"retention.ms": "123456", "cleanup.policy": "delete"})
        == admin.NONE
    )
    # Kafka answers CreateTopics before its broker knows the topic (DescribeConfigs answers
    # UNKNOWN_TOPIC_OR_PARTITION meanwhile); Strom knows it when it answers.
    cfg = admin.applied(broker, f"DescribeConfigs of {name}", lambda: _configs_or_error(broker.bootstrap, name),
                        lambda c: isinstance(c, dict))
    # Kafka 4.x answers ~40 topic configs; the ones below matter to every client.
    assert len(cfg) >= 20, sorted(cfg)
    assert cfg["retention.ms"] == ("123456", "DYNAMIC_TOPIC_CONFIG")
    assert cfg["cleanup.policy"] == ("delete", "DYNAMIC_TOPIC_CONFIG")
    assert cfg["max.message.bytes"] == ("1048588", "DEFAULT_CONFIG")
    assert cfg["compression.type"] == ("producer", "DEFAULT_CONFIG")
    assert cfg["segment.bytes"] == ("1073741824", "DEFAULT_CONFIG")
    assert cfg["message.timestamp.type"] == ("CreateTime", "DEFAULT_CONFIG")
    assert cfg["retention.bytes"] == ("-1", "DEFAULT_CONFIG")
    assert cfg["min.insync.replicas"][0] == "1"


def _configs_or_error(bootstrap: str, name: str) -> dict | int:
    from confluent_kafka import KafkaException

    try:
        return admin.describe_topic_configs(bootstrap, name)
    except KafkaException as e:
        return e.args[0].code()


def test_describe_configs_of_unknown_topic_fails_with_unknown_topic(broker):
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as e:
        admin.describe_topic_configs(broker.bootstrap, unique_topic("no-such"))
    assert e.value.args[0].code() == admin.UNKNOWN_TOPIC_OR_PARTITION
