"""The history checker (history.py) on synthetic histories: a clean one passes, and each
anomaly it exists to find is found — so a green fault test means the checker looked, not
that it could not see. No broker, no client library."""

from __future__ import annotations

import json

import history


class H:
    """A history under construction, one tick per event."""

    def __init__(self):
        self.events = []

    def __call__(self, type_, **f):
        self.events.append({"t": float(len(self.events)), "proc": f.pop("proc", "p"), "type": type_, **f})
        return self

    def write(self, value, p, offset, topic="in"):
        self("send", topic=topic, value=value, partition=p)
        if offset is not None:
            self("ack", topic=topic, value=value, partition=p, offset=offset)
        return self

    def read(self, consumer, p, offset, value, topic="in", isolation="read_uncommitted"):
        return self("poll", consumer=consumer, topic=topic, partition=p, offset=offset, value=value,
                    isolation=isolation)

    def final(self, p, values, topic="in", isolation="read_uncommitted", end=None):
        for o, v in enumerate(values):
            self.read("final", p, o, v, topic, isolation)
        return self("final_end", consumer="final", topic=topic, partition=p,
                    end=len(values) if end is None else end, reached=len(values), isolation=isolation)

    def txn(self, name, outcome, values, topic="out", p=0, commit=True, sources=None):
        self("txn_begin", txn=name)
        for i, v in enumerate(values):
            self("txn_send", txn=name, topic=topic, partition=p, value=v,
                 source=(sources or values)[i])
        if commit:
            self("txn_commit_start", txn=name)
        return self("txn_end", txn=name, outcome=outcome, error=None)


def clean() -> H:
    h = H()
    h.write("a", 0, 0).write("b", 0, 1).write("c", 1, 0)
    h.write("d", 1, None)  # sent, never acknowledged: may or may not be there
    h("fail", topic="in", value="e", error="_MSG_TIMED_OUT")
    h("assign", consumer="g1", group="g", partitions=[["in", 0], ["in", 1]])
    h.read("g1", 0, 0, "a").read("g1", 0, 1, "b").read("g1", 1, 0, "c")
    h("commit_start", consumer="g1", group="g")
    h("commit", consumer="g1", group="g", ok=True, offsets=[["in", 0, 2], ["in", 1, 1]], error=None)
    h("revoke", consumer="g1", partitions=[["in", 0], ["in", 1]])
    h("assign", consumer="g2", group="g", partitions=[["in", 0]])
    h.read("g2", 0, 2, "f")
    h.write("f", 0, 2)
    h.txn("x1", "committed", ["x1:a", "x1:b"], sources=["a", "b"])
    h.txn("x2", "aborted", ["x2:c"], sources=["c"])
    h.txn("x3", "committed", ["x3:c"], sources=["c"])
    h.read("rc", 0, 0, "x1:a", "out", "read_committed").read("rc", 0, 1, "x1:b", "out", "read_committed")
    h.read("rc", 0, 4, "x3:c", "out", "read_committed")
    h.final(0, ["a", "b", "f"]).final(1, ["c"])
    return h


def kinds(h: H) -> set[str]:
    return set(history.check(h.events))


def test_clean_history_has_no_anomaly():
    assert history.check(clean().events) == {}


def test_acknowledged_write_missing_from_final_read_is_lost():
    h = H().write("a", 0, 0).write("b", 0, 1).final(0, ["a"])
    found = history.check(h.events)
    assert set(found) == {"lost"}
    assert found["lost"][0]["value"] == "b"


def test_unacknowledged_write_missing_is_not_lost():
    assert kinds(H().write("a", 0, 0).write("b", 0, None).final(0, ["a"])) == set()


def test_committed_transaction_value_missing_is_lost():
    h = H().txn("x", "committed", ["x:a"]).final(0, [], topic="out", isolation="read_committed")
    assert kinds(h) == {"lost"}


def _unknown_outcome(commit_called: bool) -> H:
    """A transaction of two writes whose producer hung (fault_client.TxnProducer): no outcome."""
    h = H()
    h("txn_begin", txn="x")
    h("txn_send", txn="x", topic="out", partition=0, value="x:a", source="a")
    h("txn_send", txn="x", topic="out", partition=1, value="x:b", source="b")
    if commit_called:
        h("txn_commit_start", txn="x")
    return h("txn_end", txn="x", outcome="unknown", error="commit_transaction: no return", commit_called=commit_called)


def test_transaction_of_unknown_outcome_wholly_committed_or_wholly_absent_is_fine():
    h = _unknown_outcome(True)
    h.final(0, ["x:a"], topic="out", isolation="read_committed").final(1, ["x:b"], topic="out",
                                                                        isolation="read_committed")
    assert kinds(h) == set()
    h = _unknown_outcome(True).final(0, [], topic="out", isolation="read_committed")
    assert kinds(h.final(1, [], topic="out", isolation="read_committed")) == set()


def test_transaction_of_unknown_outcome_half_in_the_final_read_is_lost():
    h = _unknown_outcome(True)
    h.final(0, ["x:a"], topic="out", isolation="read_committed").final(1, [], topic="out", isolation="read_committed")
    found = history.check(h.events)
    assert set(found) == {"lost"}
    assert [e["value"] for e in found["lost"]] == ["x:b"]


def test_transaction_of_unknown_outcome_never_asked_to_commit_read_at_all_is_an_uncommitted_read():
    h = _unknown_outcome(False)
    h.final(0, ["x:a"], topic="out", isolation="read_committed").final(1, ["x:b"], topic="out",
                                                                        isolation="read_committed")
    assert kinds(h) == {"uncommitted_read"}


def test_value_at_two_offsets_is_a_duplicate():
    h = H().write("a", 0, 0).write("b", 0, 1).final(0, ["a", "b", "a"])
    assert kinds(h) == {"duplicate"}


def test_offset_with_two_values_is_divergence():
    h = H().write("a", 0, 0).write("b", 0, 1)
    h.read("c1", 0, 1, "b")
    h("poll", consumer="c2", topic="in", partition=0, offset=1, value="c", isolation="read_uncommitted")
    h("send", topic="in", value="c", partition=0)
    h.final(0, ["a", "b"])
    found = history.check(h.events)
    assert "divergence" in found
    assert found["divergence"][0]["offset"] == 1


def test_acknowledged_offset_holding_another_value_is_divergence():
    h = H().write("a", 0, 0).write("b", 0, 1).write("c", 0, 1)  # two acks at one offset
    assert "divergence" in kinds(h)


def test_value_nobody_wrote_is_a_phantom():
    assert kinds(H().write("a", 0, 0).read("c1", 0, 0, "zz")) >= {"phantom"}


def test_consumer_going_back_without_a_seek_is_nonmonotonic():
    h = H().write("a", 0, 0).write("b", 0, 1)
    h("assign", consumer="c1", group="g", partitions=[["in", 0]])
    h.read("c1", 0, 0, "a").read("c1", 0, 1, "b").read("c1", 0, 0, "a")
    assert kinds(h) == {"nonmonotonic"}


def test_consumer_going_back_after_a_seek_or_reassignment_is_fine():
    h = H().write("a", 0, 0).write("b", 0, 1)
    h.read("c1", 0, 0, "a").read("c1", 0, 1, "b")
    h("seek", consumer="c1", partitions=[["in", 0]])
    h.read("c1", 0, 0, "a")
    h("revoke", consumer="c1", partitions=[["in", 0]])
    h("assign", consumer="c1", group="g", partitions=[["in", 0]])
    h.read("c1", 0, 0, "a")
    assert kinds(h) == set()


def test_read_committed_seeing_an_aborted_transaction_is_an_aborted_read():
    h = H().txn("x", "aborted", ["x:a"])
    h.read("rc", 0, 0, "x:a", "out", "read_committed")
    assert kinds(h) == {"aborted_read"}


def test_read_uncommitted_seeing_an_aborted_transaction_is_fine():
    h = H().txn("x", "aborted", ["x:a"])
    h.read("ru", 0, 0, "x:a", "out", "read_uncommitted")
    assert kinds(h) == set()


def test_read_committed_seeing_a_value_before_its_commit_was_asked_is_an_uncommitted_read():
    h = H()
    h("txn_begin", txn="x")("txn_send", txn="x", topic="out", partition=0, value="x:a", source="a")
    h.read("rc", 0, 0, "x:a", "out", "read_committed")
    h("txn_commit_start", txn="x")("txn_end", txn="x", outcome="committed", error=None)
    assert kinds(h) == {"uncommitted_read"}


def test_read_committed_seeing_a_transaction_that_never_asked_to_commit_is_an_uncommitted_read():
    h = H()
    h("txn_begin", txn="x")("txn_send", txn="x", topic="out", partition=0, value="x:a", source="a")
    h("txn_end", txn="x", outcome="unknown", error="fatal")
    h.read("rc", 0, 0, "x:a", "out", "read_committed")
    assert kinds(h) == {"uncommitted_read"}


def test_reading_a_value_the_final_read_does_not_have_is_an_uncommitted_read():
    h = H().write("a", 0, 0).write("b", 0, None)
    h.read("c1", 0, 0, "a").read("c1", 0, 1, "b")  # b was served, then truncated away
    h.final(0, ["a"])
    assert kinds(h) == {"uncommitted_read"}


def test_one_input_value_at_two_offsets_processed_once_each_is_not_an_exactly_once_violation():
    h = H()
    for name, at in (("x1", 0), ("x2", 1)):
        h("txn_begin", txn=name)
        h("txn_send", txn=name, topic="out", partition=0, value=f"{name}:a", source="a", source_at=["in", 0, at])
        h("txn_commit_start", txn=name)("txn_end", txn=name, outcome="committed", error=None)
    h.read("rc", 0, 0, "x1:a", "out", "read_committed").read("rc", 0, 1, "x2:a", "out", "read_committed")
    assert kinds(h) == set()


def test_one_input_committed_twice_is_an_exactly_once_violation():
    h = H().txn("x1", "committed", ["x1:a"], sources=["a"]).txn("x2", "committed", ["x2:a"], sources=["a"])
    h.read("rc", 0, 0, "x1:a", "out", "read_committed").read("rc", 0, 1, "x2:a", "out", "read_committed")
    assert kinds(h) == {"eos_duplicate"}


def _committed_then_assigned(first_offset):
    h = H().write("a", 0, 0).write("b", 0, 1).write("c", 0, 2)
    h("assign", consumer="g1", group="g", partitions=[["in", 0]])
    h.read("g1", 0, 0, "a").read("g1", 0, 1, "b")
    h("commit_start", consumer="g1", group="g")
    h("commit", consumer="g1", group="g", ok=True, offsets=[["in", 0, 2]], error=None)
    h("revoke", consumer="g1", partitions=[["in", 0]])
    h("assign", consumer="g2", group="g", partitions=[["in", 0]])
    h.read("g2", 0, first_offset, "abc"[first_offset])
    return h


def test_next_owner_starting_below_an_acknowledged_commit_is_a_lost_commit():
    assert kinds(_committed_then_assigned(0)) == {"lost_commit"}
    assert kinds(_committed_then_assigned(2)) == set()


def test_commit_racing_with_another_is_not_judged():
    h = H().write("a", 0, 0).write("b", 0, 1)
    h("commit_start", consumer="g1", group="g")
    h("commit_start", consumer="g0", group="g")
    h("commit", consumer="g1", group="g", ok=True, offsets=[["in", 0, 2]], error=None)
    h("commit", consumer="g0", group="g", ok=True, offsets=[["in", 0, 0]], error=None)
    h("assign", consumer="g2", group="g", partitions=[["in", 0]])
    h.read("g2", 0, 0, "a")
    assert kinds(h) == set()


def test_final_read_short_of_its_end_is_reported():
    h = H().write("a", 0, 0)
    h.read("final", 0, 0, "a")
    h("final_end", consumer="final", topic="in", partition=0, end=2, reached=1, isolation="read_uncommitted")
    assert kinds(h) == {"incomplete_final"}


def test_recorder_and_load_round_trip(tmp_path):
    r = history.Recorder(tmp_path / "a.jsonl", "p1")
    r("send", topic="in", value="a", partition=0)
    r("ack", topic="in", value="a", partition=0, offset=0)
    r.close()
    with open(tmp_path / "b.jsonl", "w") as f:
        f.write(json.dumps({"t": 0.0, "proc": "p2", "type": "send", "topic": "in", "value": "b",
                            "partition": 0}) + "\n")
        f.write('{"t": 1.0, "proc": "p2", "ty')  # torn by a kill -9
    events = history.load([tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "missing.jsonl"])
    assert [e["value"] for e in events] == ["b", "a", "a"]
    assert history.summary(events)["send"] == 2
