"""ListOffsets: earliest, latest, by timestamp and max timestamp, through each client."""

from __future__ import annotations

import pytest

import admin
from clients import BASE_TS, CLIENTS, Out, bounded, confluent_produce, unique_topic

N = 100
SPIKE = 70  # the record with the largest timestamp sits mid-log, not at the end


def ts_of(i: int) -> int:
    return BASE_TS + 10_000 if i == SPIKE else BASE_TS + 10 * i


def _fill(bootstrap: str) -> str:
    topic = unique_topic("lo")
    assert admin.create_topic("confluent", bootstrap, topic, 1) == admin.NONE
    recs = [Out(0, f"k{i}".encode(), f"v{i}".encode(), (), ts_of(i)) for i in range(N)]
    confluent_produce(bootstrap, topic, recs, "none", "all", True)
    return topic


# (target timestamp, expected offset): the first offset whose timestamp >= target,
# -1 when there is none.
BY_TIMESTAMP = [
    (BASE_TS - 1, 0),
    (BASE_TS, 0),
    (BASE_TS + 555, 56),
    (BASE_TS + 5_000, SPIKE),
    (BASE_TS + 10_000, SPIKE),
    (BASE_TS + 10_001, -1),
]


def _confluent(bootstrap, topic):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    a = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)

    def one(spec):
        r = a.list_offsets({tp: spec}, request_timeout=admin.ADMIN_TIMEOUT_S)[tp].result(timeout=admin.ADMIN_TIMEOUT_S)
        return r.offset, r.timestamp

    return {
        "earliest": one(OffsetSpec.earliest())[0],
        "latest": one(OffsetSpec.latest())[0],
        "by_ts": [one(OffsetSpec.for_timestamp(t))[0] for t, _ in BY_TIMESTAMP],
        "max_ts": one(OffsetSpec.max_timestamp()),
    }


def _kafka_python(bootstrap, topic):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, request_timeout_ms=30000)
    tp = TopicPartition(topic, 0)
    try:
        by_ts = []
        for t, _ in BY_TIMESTAMP:
            r = c.offsets_for_times({tp: t})[tp]
            by_ts.append(-1 if r is None else r.offset)
        return {
            "earliest": c.beginning_offsets([tp])[tp],
            "latest": c.end_offsets([tp])[tp],
            "by_ts": by_ts,
        }
    finally:
        c.close()


def _aiokafka(bootstrap, topic):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        await c.start()
        tp = TopicPartition(topic, 0)
        try:
            by_ts = []
            for t, _ in BY_TIMESTAMP:
                r = (await c.offsets_for_times({tp: t}))[tp]
                by_ts.append(-1 if r is None else r.offset)
            return {
                "earliest": (await c.beginning_offsets([tp]))[tp],
                "latest": (await c.end_offsets([tp]))[tp],
                "by_ts": by_ts,
            }
        finally:
            await c.stop()

    return bounded(run())


LIST = {"confluent": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka}


@pytest.mark.parametrize("client", CLIENTS)
def test_list_offsets_earliest_latest_and_by_timestamp(broker, client):
    topic = _fill(broker.bootstrap)
    got = LIST[client](broker.bootstrap, topic)
    assert got["earliest"] == 0
    assert got["latest"] == N
    assert got["by_ts"] == [off for _, off in BY_TIMESTAMP]
    if "max_ts" in got:  # only confluent-kafka's admin API asks for MAX_TIMESTAMP (KIP-734)
        assert got["max_ts"] == (SPIKE, BASE_TS + 10_000)


def test_list_offsets_of_empty_partition_are_zero(broker):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    topic = unique_topic("lo-empty")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 1) == admin.NONE
    # Kafka lists a new topic in Metadata before ListOffsets can answer for it.
    admin.wait_partitions_ready(broker.bootstrap, topic, 1)
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic, 0)
    got = {}
    for name, spec in [("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest()), ("ts", OffsetSpec.for_timestamp(BASE_TS))]:
        got[name] = a.list_offsets({tp: spec}, request_timeout=admin.ADMIN_TIMEOUT_S)[tp].result(timeout=admin.ADMIN_TIMEOUT_S).offset
    assert got == {"earliest": 0, "latest": 0, "ts": -1}
