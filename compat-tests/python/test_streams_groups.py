"""Strom only: a KIP-1071 streams group survives the broker's kill -9. Two Kafka Streams 4.4
instances (java/.../StreamsApp.java, group.protocol=streams, exactly_once_v2) count words;
the broker is killed -9 mid-stream and restarted on the same data dir and port. The group
comes back from `__consumer_offsets` as it was (Kafka's streams group records): the same
members at the same group epoch, so no rebalance; and every word is counted exactly once.
Kafka's own `kafka-streams-groups.sh` reads the group before and after.
The Java suite (java/.../StreamsGroupsCompatTest.java) covers the protocol against Strom and
Apache Kafka 4.4 alike, an application instance killed -9 among it; this module covers the
broker's crash.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

import admin
import kafka_tools as kt
from clients import unique_topic
from test_durability import Restartable
from test_share_groups import _classpath

pytestmark = pytest.mark.timeout(420)

JAVA_DIR = Path(__file__).resolve().parent.parent / "java"
APP = JAVA_DIR / "src" / "test" / "java" / "dev" / "strom" / "compat" / "StreamsApp.java"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]


class App:
    """One StreamsApp instance, its output lines collected."""

    def __init__(self, cp: str, *args: str):
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", cp, str(APP), *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def wait_running(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "RUNNING" in self.lines:
                return
            assert self.proc.poll() is None, "\n".join(self.lines[-30:])
            time.sleep(0.2)
        raise AssertionError("not RUNNING:\n" + "\n".join(self.lines[-30:]))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _send(bootstrap: str, topic: str, start: int, n: int, expected: dict[str, int]) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(start, start + n):
        a, b = WORDS[i % len(WORDS)], WORDS[(i * 3 + 1) % len(WORDS)]
        expected[a] = expected.get(a, 0) + 1
        expected[b] = expected.get(b, 0) + 1
        p.produce(topic, key=f"line-{i}".encode(), value=f"{a} {b}".encode())
    assert p.flush(60) == 0


def _counts(bootstrap: str, topic: str, expected: dict[str, int]) -> dict[str, int]:
    """The latest committed count of each word, read until they are the expected ones (or 2
    minutes), then 2 s more: a count past the expected one would show."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("wc-reader"),
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe([topic])
    got: dict[str, int] = {}
    quiet_until = None
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                got[m.key().decode()] = int.from_bytes(m.value(), "big", signed=True)
            if quiet_until is None and got == expected:
                quiet_until = time.monotonic() + 2
            if quiet_until is not None and time.monotonic() > quiet_until:
                break
    finally:
        c.close()
    return got


def _group_epoch(bootstrap: str, group: str) -> tuple[str, int]:
    """(state, group epoch) of `group`, as kafka-streams-groups.sh --describe --state
    --verbose shows."""
    r = kt.ok(kt.run("kafka-streams-groups", bootstrap, "--describe", "--group", group, "--state", "--verbose"))
    header, *rows = [ln.split() for ln in r.lines() if ln.strip()]
    row = next(r for r in rows if r and r[0] == group)
    cols = dict(zip(header, row))
    return cols["STATE"], int(cols["GROUP-EPOCH"])


def _members(bootstrap: str, group: str) -> set[str]:
    r = kt.ok(kt.run("kafka-streams-groups", bootstrap, "--describe", "--group", group, "--members"))
    header, *rows = [ln.split() for ln in r.lines() if ln.strip()]
    i = header.index("MEMBER")
    return {row[i] for row in rows if len(row) > i and row[0] == group}


def test_broker_kill9_mid_stream_keeps_the_group_and_counts_exactly(tmp_path):
    if "strom" not in [b.strip() for b in os.environ.get("STROM_COMPAT_BROKERS", "strom,kafka").split(",")]:
        pytest.skip("Strom not selected")
    kt.fetch()
    cp = _classpath(tmp_path)
    b = Restartable()
    apps: list[App] = []
    try:
        b.start()
        app, src, out = unique_topic("wc-app"), unique_topic("wc-in"), unique_topic("wc-out")
        for t in (src, out):
            admin.create_topic("confluent", b.bootstrap, t, 3)
        expected: dict[str, int] = {}
        for _ in range(2):
            apps.append(App(cp, b.bootstrap, app, "wordcount", src, out))
            apps[-1].wait_running()
        _send(b.bootstrap, src, 0, 300, expected)
        assert _counts(b.bootstrap, out, expected) == expected
        # Settled: every member at the target (no revocation in flight) before the kill.
        deadline = time.monotonic() + 60
        while _group_epoch(b.bootstrap, app)[0] != "Stable" and time.monotonic() < deadline:
            time.sleep(1)
        state, epoch = _group_epoch(b.bootstrap, app)
        members = _members(b.bootstrap, app)
        assert (state, len(members)) == ("Stable", 2), (state, members)
        assert epoch >= 3, "two joins moved the epoch past a fresh group's"
        _send(b.bootstrap, src, 300, 200, expected)
        b.kill9()
        b.start()
        _send(b.bootstrap, src, 500, 300, expected)
        assert _counts(b.bootstrap, out, expected) == expected, "every word counted exactly once"
        # The same group, not a new one: the members and the epoch from before the kill.
        assert _members(b.bootstrap, app) == members
        assert _group_epoch(b.bootstrap, app)[1] == epoch
        for a in apps:
            assert not [ln for ln in a.lines if ln.startswith("ERROR")], "\n".join(a.lines[-30:])
    finally:
        for a in apps:
            a.stop()
        b.cleanup()
