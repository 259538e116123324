"""Strom only: KIP-932 share state survives kill -9. A Java KafkaShareConsumer
(java/.../ShareWorker.java) accepts records one poll at a time; the broker is killed -9
mid-way and restarted on the same data dir and port, and the worker carries on. No record
whose acknowledgement commitSync confirmed is ever delivered again, every record is
delivered, and only the records of the poll in flight at the kill may come back.

The Java suite (java/.../ShareGroupsCompatTest.java, run by run_clients.py) covers the
share group semantics against both Strom and Apache Kafka 4.4; this module covers the crash.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

import admin
from clients import unique_topic
from test_durability import Restartable

# The class path may need maven to download kafka-clients on a fresh machine.
pytestmark = pytest.mark.timeout(360)

RECORDS = 400
JAVA_DIR = Path(__file__).resolve().parent.parent / "java"


WORKER = JAVA_DIR / "src" / "test" / "java" / "dev" / "strom" / "compat" / "ShareWorker.java"


def _classpath(tmp: Path) -> str:
    """kafka-clients 4.4 and its dependencies as the Java suite's pom pins them. Only the
    class path is asked of maven: the worker runs from source (`java File.java`), so this
    never writes the suite's target/ while the clients phase may be building it."""
    if shutil.which("mvn") is None or shutil.which("java") is None:
        pytest.skip("mvn/java not installed")
    cp_file = tmp / "share-worker.classpath"
    r = subprocess.run(
        ["mvn", "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={cp_file}", "-Dmdep.includeScope=test"],
        cwd=JAVA_DIR, capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return cp_file.read_text().strip()


def _produce(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(RECORDS):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    assert p.flush(60) == 0


def test_kill9_mid_consumption_loses_no_acknowledgement(tmp_path):
    if "strom" not in [b.strip() for b in os.environ.get("STROM_COMPAT_BROKERS", "strom,kafka").split(",")]:
        pytest.skip("Strom not selected")
    cp = _classpath(tmp_path)
    b = Restartable()
    worker = None
    try:
        b.start()
        topic = unique_topic("share-kill9")
        admin.create_topic("confluent", b.bootstrap, topic, 1)
        _produce(b.bootstrap, topic)
        worker = subprocess.Popen(
            ["java", "-cp", cp, str(WORKER), b.bootstrap, topic, "share-kill9", str(RECORDS), "150"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        lines: list[str] = []
        last_line = [time.monotonic()]

        def pump():
            assert worker.stdout is not None
            for line in worker.stdout:
                lines.append(line.strip())
                last_line[0] = time.monotonic()

        t = threading.Thread(target=pump, daemon=True)
        t.start()

        def acked() -> int:
            return sum(1 for ln in list(lines) if ln.startswith("ACKED "))

        deadline = time.monotonic() + 90
        while acked() < RECORDS // 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert acked() >= RECORDS // 3, f"the worker acknowledged too little: {lines[-5:]}"
        b.kill9()
        kill_at = len(lines)
        b.start()
        # Done when everything is confirmed, or the worker has been quiet for a while (an
        # acknowledgement whose answer the kill took is applied but never confirmed).
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and worker.poll() is None:
            got = {int(ln.split()[1]) for ln in list(lines) if ln.startswith("GOT ")}
            if acked() >= RECORDS or (len(got) == RECORDS and time.monotonic() - last_line[0] > 6):
                break
            time.sleep(0.2)
        worker.terminate()
        worker.wait(timeout=30)
        t.join(timeout=10)
    finally:
        if worker and worker.poll() is None:
            worker.kill()
        b.cleanup()
    confirmed: set[int] = set()
    got_all: set[int] = set()
    for i, ln in enumerate(lines):
        kind, *rest = ln.split()
        if kind == "GOT":
            o = int(rest[0])
            assert o not in confirmed, f"offset {o} delivered again after its acknowledgement was confirmed (line {i})"
            got_all.add(o)
        elif kind == "ACKED":
            confirmed.add(int(rest[0]))
    assert got_all == set(range(RECORDS)), f"never delivered: {sorted(set(range(RECORDS)) - got_all)[:20]}"
    # What is neither confirmed nor pending again was in the poll the kill interrupted.
    unconfirmed = set(range(RECORDS)) - confirmed
    before_kill = {int(ln.split()[1]) for ln in lines[:kill_at] if ln.startswith("GOT ")}
    assert unconfirmed <= before_kill, f"unconfirmed offsets the kill cannot explain: {sorted(unconfirmed - before_kill)[:20]}"
    assert len(unconfirmed) <= 20, f"{len(unconfirmed)} acknowledgements lost: {sorted(unconfirmed)[:20]}"


def test_kill9_keeps_share_group_membership_and_epochs():
    """Strom only: a share group's members and epochs are in `__consumer_offsets` (Kafka's
    records 10–15). Three librdkafka share consumers join, one leaves; the broker is killed
    -9 and restarted; the two left heartbeat on at their epochs, so the group epoch the tool
    shows is the one before the kill (had the group been lost, they would rejoin it from
    epoch 0 and the tool would show 2)."""
    if "strom" not in [b.strip() for b in os.environ.get("STROM_COMPAT_BROKERS", "strom,kafka").split(",")]:
        pytest.skip("Strom not selected")
    import kafka_tools as kt
    from confluent_kafka import ShareConsumer

    b = Restartable()
    consumers = []
    try:
        b.start()
        topic = unique_topic("share-members")
        admin.create_topic("confluent", b.bootstrap, topic, 2)
        group = unique_topic("sg-members")

        def state() -> dict[str, str]:
            r = kt.ok(kt.run("kafka-share-groups", b.bootstrap, "--describe", "--group", group, "--state", "--verbose"))
            return kt.table(r)[0]

        def members() -> set[str]:
            r = kt.ok(kt.run("kafka-share-groups", b.bootstrap, "--describe", "--group", group, "--members"))
            return {row["CONSUMER-ID"] for row in kt.table(r)}

        for _ in range(3):
            c = ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": group})
            c.subscribe([topic])
            consumers.append(c)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and state()["#MEMBERS"] != "3":
            for c in consumers:
                c.poll(0.2)
        consumers.pop().close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and state()["#MEMBERS"] != "2":
            time.sleep(0.5)
        before, ids = state(), members()
        print("STATE", before, "MEMBERS", ids)
        assert before["#MEMBERS"] == "2" and int(before["GROUP-EPOCH"]) >= 4, before
        b.kill9()
        b.start()
        # The group is known at once, before any member is back, with its members and epoch.
        after = state()
        assert (after["GROUP-EPOCH"], after["#MEMBERS"]) == (before["GROUP-EPOCH"], "2"), (before, after)
        assert members() == ids
        # The members' heartbeats go on at their epochs: nothing moves the group epoch.
        t_end = time.monotonic() + 8
        while time.monotonic() < t_end:
            for c in consumers:
                c.poll(0.2)
        after = state()
        assert (after["GROUP-EPOCH"], after["#MEMBERS"]) == (before["GROUP-EPOCH"], "2"), (before, after)
        assert members() == ids
    finally:
        for c in consumers:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - the broker may be gone at a failure
                pass
        b.cleanup()
