"""Produce with each client, every codec, acks 0/1/all, idempotence off and on; consume
everything back from the beginning with manual assignment and compare byte for byte:
keys, values, headers, timestamps (type and value), contiguous offsets per partition, and
the offsets the broker reported in its produce acknowledgements."""

from __future__ import annotations

import pytest

import admin
from clients import (
    ACKS_MODES,
    CLIENTS,
    CODECS,
    CONSUME,
    PRODUCE,
    RECORD_SHAPES,
    describe_mismatch,
    expected,
    make_records,
    unique_topic,
)

PARTITIONS = 3


@pytest.mark.parametrize("acks,idempotence", ACKS_MODES, ids=[f"acks{a}{'-idem' if i else ''}" for a, i in ACKS_MODES])
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_produce_then_consume_from_beginning_returns_identical_records(broker, records, client, codec, acks, idempotence):
    round_trip(broker, records, client, codec, acks, idempotence)


# The volume: 100k records per client, once each (lz4, acks=all, idempotent), so the
# codec x acks matrix above can stay at a size CI affords.
@pytest.mark.parametrize("client", CLIENTS)
def test_hundred_thousand_records_round_trip_per_client(broker, client):
    round_trip(broker, 100_000, client, "lz4", "all", True)


def round_trip(broker, records, client, codec, acks, idempotence):
    topic = unique_topic(f"pc-{client}-{codec}-{acks}")
    assert admin.create_topic("confluent", broker.bootstrap, topic, PARTITIONS) == admin.NONE
    # acks=0 records sent before Kafka's broker has created the partitions are lost silently.
    admin.wait_partitions_ready(broker.bootstrap, topic, PARTITIONS)

    recs = make_records(records, PARTITIONS, **RECORD_SHAPES[client])
    reported = PRODUCE[client](broker.bootstrap, topic, recs, codec, acks, idempotence)
    exp = expected(recs)
    got = CONSUME[client](broker.bootstrap, topic, PARTITIONS, len(recs))

    assert got == exp, describe_mismatch(got, exp)

    # The acknowledgement names the offset the record landed at. With acks=0 the broker
    # sends no answer and each client makes up its own offset (confluent-kafka: None,
    # kafka-python: the record's index in its batch), so there is nothing to check.
    assert len(reported) == len(recs)
    if acks == "0":
        return
    next_off: dict[int, int] = {}
    want_reported = []
    for r in recs:
        off = next_off.get(r.partition, 0)
        next_off[r.partition] = off + 1
        want_reported.append((r.partition, off))
    bad = [(i, w, g) for i, (w, g) in enumerate(zip(want_reported, reported)) if tuple(g) != w]
    assert not bad, f"{len(bad)} acks name the wrong offset; first (index, expected, reported): {bad[0]}"
