"""Strom only: kill -9 while the log cleaner is rewriting a compacted partition, restart, and
repeat. The log stays valid (a checking consumer reads it to the end), every record that
survives sits at the offset it was acknowledged at with the value acknowledged there, and
each key's latest acknowledged value is still there: cleaning never loses what must stay.

The kill is timed by the cleaner itself: the test watches the partition directory and sends
SIGKILL the moment a `.cleaned` file (a rewrite in progress) or a `.swap` file (a swap in
progress) appears, so every cycle that finds the cleaner at work interrupts it mid-pass.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

import admin
from clients import unique_topic
from test_compaction import _read_all
from test_durability import Restartable

KEYS = 400
VALUE_BYTES = 1024
CYCLES = 8
# At least this many cycles must catch the cleaner mid-pass, or the test proves nothing.
MIN_MID_CLEAN_KILLS = 3


def _produce_round(bootstrap: str, topic: str, r: int, acked: dict[int, tuple[bytes, bytes | None]]) -> None:
    """One value per key (every 9th key of odd rounds a tombstone), acks=all, idempotent."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})

    def report(err, msg):
        assert err is None, err
        acked[msg.offset()] = (msg.key(), msg.value())

    pad = b"x" * VALUE_BYTES
    for i in range(KEYS):
        key = f"k{i:04d}".encode()
        value = None if r % 2 == 1 and i % 9 == 0 else f"r{r}-".encode() + pad
        p.produce(topic, key=key, value=value, partition=0, on_delivery=report)
    assert p.flush(60) == 0


def _cleaner_at_work(part_dir: Path) -> str | None:
    for f in part_dir.iterdir():
        if f.name.endswith(".cleaned") or f.name.endswith(".swap"):
            return f.name
    return None


def test_kill9_during_compaction_keeps_log_valid_and_latest_values():
    if "strom" not in [b.strip() for b in os.environ.get("STROM_COMPAT_BROKERS", "strom,kafka").split(",")]:
        pytest.skip("Strom not selected")
    rng = random.Random(7)
    b = Restartable()
    extra = ("--set", "log_cleaner_backoff_ms=100")
    try:
        b.start(*extra)
        topic = unique_topic("compact-kill")
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(256 * 1024),
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "600000",
            "min.compaction.lag.ms": "0",
        }
        assert admin.create_topic("confluent", b.bootstrap, topic, 1, configs) == admin.NONE
        part_dir = b.workdir / "data" / f"{topic}-0"
        acked: dict[int, tuple[bytes, bytes | None]] = {}
        mid_clean: list[str] = []
        for r in range(CYCLES):
            _produce_round(b.bootstrap, topic, r, acked)
            # Kill the moment the cleaner is caught at work, else after a random while.
            deadline = time.monotonic() + rng.uniform(1.0, 3.0)
            seen = None
            while time.monotonic() < deadline and seen is None:
                seen = _cleaner_at_work(part_dir)
                if seen is None:
                    time.sleep(0.002)
            b.kill9()
            if seen is not None:
                mid_clean.append(seen)
            b.start(*extra)
        assert len(mid_clean) >= MIN_MID_CLEAN_KILLS, (
            f"only {len(mid_clean)} of {CYCLES} kills caught the cleaner mid-pass: {mid_clean}")

        latest: dict[bytes, tuple[int, bytes | None]] = {}
        for o, (k, v) in sorted(acked.items()):
            latest[k] = (o, v)
        got = _read_all(b.bootstrap, topic)
        assert got and got[-1][0] == max(acked), f"read up to {got[-1][0] if got else None}, last acknowledged {max(acked)}"
        last_seen: dict[bytes, tuple[int, bytes | None]] = {}
        for o, k, v in got:
            assert o in acked, f"offset {o} was never acknowledged"
            assert acked[o] == (k, v), f"offset {o}: read {(k, v[:8] if v else v)}, acknowledged another record"
            last_seen[k] = (o, v)
        for k, (o, v) in latest.items():
            if v is not None:
                assert last_seen.get(k) == (o, v), f"{k!r}: latest acknowledged value at {o} is gone"
            else:
                # A tombstone within delete.retention.ms is still there.
                assert last_seen.get(k) == (o, None), f"{k!r}: tombstone at {o} is gone early"
        print(f"kills mid-clean: {len(mid_clean)} of {CYCLES} ({mid_clean}); "
              f"{len(got)} records survive of {len(acked)} acknowledged")
    finally:
        b.cleanup()
