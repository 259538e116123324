"""fault_client.TxnProducer's watchdog on a stand-in producer (no broker, no root): a
transactional call that librdkafka never returns from (librdkafka#5511) is detected after
its timeout plus the margin, recorded, and its producer kept, not destroyed; calls that
return or raise in time pass through unchanged."""

from __future__ import annotations

import argparse
import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

import fault_client
import history


class StandIn:
    """A Producer whose send_offsets_to_transaction never returns, as librdkafka's did."""

    def __init__(self, conf):
        self.conf = conf

    def commit_transaction(self, timeout):
        return None

    def abort_transaction(self, timeout):
        raise KafkaException(KafkaError(KafkaError._STATE))

    def send_offsets_to_transaction(self, offsets, metadata, timeout):
        threading.Event().wait()


@pytest.fixture
def tx(monkeypatch, tmp_path):
    monkeypatch.setattr(fault_client, "Producer", StandIn)
    monkeypatch.setattr(fault_client, "abandoned", [])
    monkeypatch.setattr(fault_client.TxnProducer, "MARGIN_S", 0.2)
    rec = history.Recorder(tmp_path / "x1.jsonl", "x1")
    yield fault_client.TxnProducer(argparse.Namespace(bootstrap="127.0.0.1:1", name="x1", group="g"), rec)
    rec.close()


def test_given_a_call_that_returns_in_time_when_bounded_then_it_passes_through(tx):
    assert tx.bounded("commit_transaction", timeout_s=0.1) is None
    with pytest.raises(KafkaException):
        tx.bounded("abort_transaction", timeout_s=0.1)
    assert fault_client.abandoned == []


def test_given_a_call_that_never_returns_when_bounded_then_it_is_hung_and_the_producer_kept(tx, tmp_path):
    started = time.monotonic()
    with pytest.raises(fault_client.Hung, match="librdkafka#5511"):
        tx.bounded("send_offsets_to_transaction", [], None, timeout_s=0.1)
    assert time.monotonic() - started < 5
    assert [p for p, _ in fault_client.abandoned] == [tx.producer]
    errors = [e for e in history.load([tmp_path / "x1.jsonl"]) if e["type"] == "client_error"]
    assert [e["hung"] for e in errors] == ["send_offsets_to_transaction"]
