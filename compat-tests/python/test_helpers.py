"""The suite's own waiting helpers, without a broker: a wait that cannot fail would let a
broker that never applies a change pass."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import admin


def _counter(values):
    it = iter(values)
    return lambda: next(it)


def test_applied_on_strom_takes_the_first_answer_only():
    strom = SimpleNamespace(name="strom")
    assert admin.applied(strom, "x", _counter([3]), 3) == 3
    with pytest.raises(AssertionError, match="strom: the change not visible right after"):
        admin.applied(strom, "the change", _counter([1, 3]), 3)


def test_applied_on_kafka_polls_until_the_value_then_gives_up_at_its_bound():
    kafka = SimpleNamespace(name="kafka")
    assert admin.applied(kafka, "x", _counter([1, 2, 3]), 3) == 3
    assert admin.applied(kafka, "x", _counter([{"a": 1}]), lambda v: v["a"] == 1) == {"a": 1}
    with pytest.raises(AssertionError, match=r"kafka: timed out after 0s waiting for never \(last: 1\)"):
        admin.applied(kafka, "never", lambda: 1, 2, timeout_s=0.3)
