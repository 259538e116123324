"""A Jepsen-style history of Kafka client operations and the checker that judges it (pure
Python, no client library: test_history.py feeds it synthetic histories).

Clients (fault_client.py, and test_faults.py's final read) append one JSON object per line
to their own file (`Recorder`); `load` merges the files. Every event has `t` (the client's
`time.monotonic()`, one clock for every process of the machine), `proc` (the process) and
`type`:

  send        {topic, value, partition}            a non-transactional produce was called
  ack         {topic, value, partition, offset}    ... and acknowledged (offset None: unknown)
  fail        {topic, value, error}                ... and failed (the write may still exist)
  poll        {consumer, topic, partition, offset, value, isolation}   a record was read
  assign / revoke / seek  {consumer, partitions: [[topic, p], ...]}    the consumer's position
                                                    may legitimately move back after these
  commit_start {consumer, group}                    an offset commit was called
  commit      {consumer, group, ok, offsets: [[topic, p, offset], ...], error}
  txn_begin   {txn}
  txn_send    {txn, topic, partition, value, source, source_at}   produced inside `txn`
                                                    (`source`: the input value it was made from,
                                                    `source_at`: its [topic, partition, offset])
  txn_commit_start {txn}                            commit_transaction was called
  txn_end     {txn, outcome: committed | aborted | unknown, error}   unknown: the producer
                                                    failed or hung (fault_client.TxnProducer)
                                                    mid-transaction; the writes may be committed
                                                    (only if its commit was called) or aborted,
                                                    all or none of them
  final_end   {consumer, topic, partition, end, isolation}  a final read covered every
                                                    offset below `end` of the partition

`check(events)` returns the anomalies by kind; an empty dict is a clean history:

  lost             an acknowledged write (or a write of a committed transaction) that the
                   final read of its partition does not have; or a write of a transaction
                   of unknown outcome (its commit was called but never answered) that the
                   final read lacks while it has another write of the same transaction
  duplicate        one value at two offsets
  divergence       one offset with two values across reads and acknowledgements
  phantom          a value read that no client ever wrote
  nonmonotonic     a consumer read offset o after o' >= o in one partition without an
                   assign, revoke or seek in between
  aborted_read     a read_committed consumer saw a value of an aborted transaction
  uncommitted_read a read_committed consumer saw a transactional value before its producer
                   had asked to commit it (or of a transaction that never asked); or any
                   consumer read a non-transactional value that the final read does not have
                   (it was served from above the high watermark)
  eos_duplicate    one input record's output visible (committed) twice: exactly-once broken
  lost_commit      a consumer's first read after an assignment lies below the group's
                   committed offset, when that commit was acknowledged before the
                   assignment and no other commit of the partition raced with it
  incomplete_final a final read that did not reach the end it was given
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict
from pathlib import Path

KINDS = ("lost", "duplicate", "divergence", "phantom", "nonmonotonic", "aborted_read", "uncommitted_read",
         "eos_duplicate", "lost_commit", "incomplete_final")


class Recorder:
    """Appends events to a JSONL file, one line each, flushed at once (a killed client
    leaves every event it recorded). Thread-safe: delivery callbacks run on other threads."""

    def __init__(self, path: Path | str, proc: str):
        self.proc = proc
        self._f = open(path, "a", buffering=1)
        self._lock = threading.Lock()

    def __call__(self, type_: str, **fields) -> None:
        e = {"t": round(time.monotonic(), 6), "proc": self.proc, "type": type_, **fields}
        line = json.dumps(e, separators=(",", ":"))
        with self._lock:
            self._f.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._f.close()


def load(paths) -> list[dict]:
    """Every event of these JSONL files, in time order. A torn last line (a process killed
    mid-write) is skipped."""
    events = []
    for p in paths:
        if not os.path.exists(p):
            continue
        with open(p) as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    events.sort(key=lambda e: e["t"])
    return events


def check(events: list[dict]) -> dict[str, list]:
    """The anomalies of a history, by kind (only kinds that occurred)."""
    out: dict[str, list] = defaultdict(list)
    reads = [e for e in events if e["type"] == "poll"]
    txn_end = {e["txn"]: e for e in events if e["type"] == "txn_end"}
    txn_commit_start = {e["txn"]: e["t"] for e in events if e["type"] == "txn_commit_start"}
    txn_of = {e["value"]: e for e in events if e["type"] == "txn_send"}
    written = {e["value"] for e in events if e["type"] in ("send", "txn_send")}

    # One offset, one value; one value, one offset (over reads and acks).
    at: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    where: dict[str, set] = defaultdict(set)
    for e in reads:
        at[(e["topic"], e["partition"], e["offset"])][e["value"]].append(e["consumer"])
        where[e["value"]].add((e["topic"], e["partition"], e["offset"]))
    for e in events:
        if e["type"] == "ack" and e.get("offset") is not None:
            at[(e["topic"], e["partition"], e["offset"])][e["value"]].append(f"ack:{e['proc']}")
            where[e["value"]].add((e["topic"], e["partition"], e["offset"]))
    for pos, values in sorted(at.items()):
        if len(values) > 1:
            out["divergence"].append({"topic": pos[0], "partition": pos[1], "offset": pos[2],
                                      "values": {v: sorted(set(who)) for v, who in values.items()}})
    for v, positions in sorted(where.items()):
        if len(positions) > 1:
            out["duplicate"].append({"value": v, "at": sorted(positions)})

    for e in reads:
        if e["value"] not in written:
            out["phantom"].append(_brief(e))

    # Per consumer and partition, offsets only move forward between position changes.
    last: dict[tuple, int] = {}
    for e in events:
        if e["type"] in ("assign", "revoke", "seek"):
            for topic, p in e["partitions"]:
                last.pop((e["consumer"], topic, p), None)
        elif e["type"] == "poll":
            k = (e["consumer"], e["topic"], e["partition"])
            if k in last and e["offset"] <= last[k]:
                out["nonmonotonic"].append({**_brief(e), "after": last[k]})
            last[k] = e["offset"]

    # Transactions, as a read_committed consumer sees them.
    visible_sources: dict[str, set] = defaultdict(set)
    for e in reads:
        s = txn_of.get(e["value"])
        if s is None or e.get("isolation") != "read_committed":
            continue
        outcome = txn_end.get(s["txn"], {}).get("outcome")
        if outcome == "aborted":
            out["aborted_read"].append({**_brief(e), "txn": s["txn"]})
        elif s["txn"] not in txn_commit_start or e["t"] < txn_commit_start[s["txn"]]:
            out["uncommitted_read"].append({**_brief(e), "txn": s["txn"],
                                            "commit_called_at": txn_commit_start.get(s["txn"])})
        # The input record, by position when known: a value the input holds twice (itself a
        # `duplicate`) is two records, each to be processed once.
        visible_sources[json.dumps(s.get("source_at") or s["source"])].add(e["value"])
    for source, values in sorted(visible_sources.items()):
        if len(values) > 1:
            out["eos_duplicate"].append({"source": json.loads(source), "outputs": sorted(values)})

    # Lost writes: acknowledged (or committed) but not in a final read of their partition.
    final: dict[tuple, set] = defaultdict(set)
    final_parts = set()
    for e in events:
        if e["type"] == "final_end":
            final_parts.add((e["topic"], e["partition"]))
    final_consumers = {e["consumer"] for e in events if e["type"] == "final_end"}
    for e in reads:
        if e["consumer"] in final_consumers:
            final[(e["topic"], e["partition"])].add(e["value"])
    for e in events:
        if e["type"] == "final_end" and e.get("reached", e["end"]) < e["end"]:
            out["incomplete_final"].append(e)
    for e in events:
        if e["type"] == "ack":
            k = (e["topic"], e["partition"])
        elif e["type"] == "txn_send" and txn_end.get(e["txn"], {}).get("outcome") == "committed":
            k = (e["topic"], e["partition"])
        else:
            continue
        if k in final_parts and e["value"] not in final[k]:
            out["lost"].append({"value": e["value"], "topic": k[0], "partition": k[1],
                                "offset": e.get("offset"), "txn": e.get("txn"), "t": e["t"]})
    # A transaction whose outcome its producer never learnt (or that has no end: the process
    # died) is atomic all the same: either every write of it is in the final read or none.
    # (Seen at all without a commit call, its writes are uncommitted reads, above.)
    undecided: dict[str, list] = defaultdict(list)
    for e in events:
        if e["type"] == "txn_send" and txn_end.get(e["txn"], {}).get("outcome", "unknown") == "unknown" \
                and (e["topic"], e["partition"]) in final_parts:
            undecided[e["txn"]].append(e)
    for txn, sends in sorted(undecided.items()):
        there = [e for e in sends if e["value"] in final[(e["topic"], e["partition"])]]
        if there and len(there) < len(sends):
            for e in sends:
                if e not in there:
                    out["lost"].append({"value": e["value"], "topic": e["topic"], "partition": e["partition"],
                                        "offset": None, "txn": txn, "t": e["t"],
                                        "why": f"its transaction's outcome was unknown and {there[0]['value']} "
                                               "of it is in the final read"})

    # A non-transactional value a consumer read must survive: reading it and then not
    # finding it in the final read means it was served from above the high watermark.
    sent = {e["value"] for e in events if e["type"] == "send"}
    final_values = set().union(*final.values()) if final else set()
    seen = set()
    for e in reads:
        k = (e["topic"], e["partition"])
        if e["consumer"] in final_consumers or e["value"] not in sent or k not in final_parts:
            continue
        if e["value"] not in final_values and e["value"] not in seen:
            seen.add(e["value"])
            out["uncommitted_read"].append({**_brief(e), "why": "read, then not in the final read"})

    _check_commits(events, out)
    return {k: v for k, v in out.items() if v}


def _check_commits(events, out) -> None:
    """A group's committed offset is where its next owner of the partition starts."""
    commits: dict[tuple, list] = defaultdict(list)  # (group, topic, p) -> [(start, end, ok, offset)]
    unnamed: dict[str, list] = defaultdict(list)    # group -> failed commits naming no offsets
    starts: dict[str, float] = {}
    for e in events:
        if e["type"] == "commit_start":
            starts[e["consumer"]] = e["t"]
        elif e["type"] == "commit":
            s = starts.pop(e["consumer"], e["t"])
            for topic, p, off in e.get("offsets") or []:
                commits[(e["group"], topic, p)].append((s, e["t"], bool(e["ok"]), off))
            if not e["ok"] and not e.get("offsets"):
                unnamed[e["group"]].append((s, e["t"], False, None))
    expect: dict[tuple, tuple] = {}  # (consumer, topic, p) -> (committed offset, acked at)
    for e in events:
        if e["type"] == "assign" and e.get("group"):
            for topic, p in e["partitions"]:
                c = _committed_at(commits.get((e["group"], topic, p), []) + unnamed.get(e["group"], []), e["t"])
                if c is not None:
                    expect[(e["consumer"], topic, p)] = c
        elif e["type"] in ("revoke", "seek"):
            for topic, p in e["partitions"]:
                expect.pop((e["consumer"], topic, p), None)
        elif e["type"] == "poll":
            c = expect.pop((e["consumer"], e["topic"], e["partition"]), None)
            if c is not None and e["offset"] < c[0]:
                out["lost_commit"].append({**_brief(e), "committed": c[0], "commit_acked_at": c[1]})


def _committed_at(commits, t):
    """The offset stored at time `t` when that is certain: the last commit acknowledged
    before `t`, if no commit was in flight at `t`, none overlapped it and none failed after
    it (a failed commit may have been applied); else None."""
    if any(s < t <= end for s, end, _, _ in commits):
        return None
    ok = [c for c in commits if c[2] and c[1] < t]
    if not ok:
        return None
    last = max(ok, key=lambda c: c[1])
    for c in commits:
        if c is last or c[0] >= t:
            continue
        if c[0] <= last[1] and c[1] >= last[0]:
            return None
        if not c[2] and c[0] > last[1]:
            return None
    return (last[3], last[1])


def _brief(e: dict) -> dict:
    return {k: e[k] for k in ("t", "proc", "consumer", "topic", "partition", "offset", "value") if k in e}


def summary(events: list[dict]) -> dict:
    """Counts of a history, for the test's log line and its progress assertions."""
    c = defaultdict(int)
    for e in events:
        c[e["type"]] += 1
    c["txn_committed"] = sum(1 for e in events if e["type"] == "txn_end" and e["outcome"] == "committed")
    c["txn_aborted"] = sum(1 for e in events if e["type"] == "txn_end" and e["outcome"] == "aborted")
    return dict(c)


def excerpt(events: list[dict], anomalies: dict, around: int = 5) -> str:
    """The events touching the first anomaly of each kind (same value or same offset), for a
    failure message."""
    lines = []
    for kind, items in anomalies.items():
        first = items[0]
        keys = set()
        for k in ("value",):
            if k in first:
                keys.add(first[k])
        keys.update(first.get("values", {}) or [])
        pos = (first.get("topic"), first.get("partition"), first.get("offset"))
        hits = [e for e in events if e.get("value") in keys or
                (e.get("topic"), e.get("partition"), e.get("offset")) == pos and pos[2] is not None]
        if kind == "lost_commit":
            # The commits of that partition and its assignments, which the verdict rests on.
            tp = [first.get("topic"), first.get("partition")]
            hits += [e for e in events if e["type"] in ("commit", "assign", "revoke") and (
                tp in [list(x[:2]) for x in e.get("offsets") or []] or tp in e.get("partitions", []))]
            hits.sort(key=lambda e: e["t"])
            hits = hits[-4 * around:]
        lines.append(f"{kind} ({len(items)}): first {json.dumps(first)}")
        lines += [f"    {json.dumps(e)}" for e in hits[:4 * around]]
    return "\n".join(lines)
