"""Disk full: Strom's data dir on a small tmpfs, filled through the broker with a real client.
Produce must answer KAFKA_STORAGE_ERROR for the partition that hit ENOSPC, the broker must stay
up and keep serving other partitions, every record acknowledged before must survive, and after
space is freed a restart serves the partition again (recovery documented in docs/operations.md).

Strom only: Apache Kafka takes its only log dir offline and shuts the broker down on the
first I/O error (`LogDirFailureChannel`), so there is no Kafka behaviour to compare with
beyond the error code. Needs root to mount tmpfs; skips with the reason otherwise."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import admin
import brokers
from clients import unique_topic

KAFKA_STORAGE_ERROR = 56
FS_SIZE = 8 * 1024 * 1024
FILLER = 1024 * 1024
VALUE = 64 * 1024


@pytest.fixture
def small_fs():
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a size-limited tmpfs")
    mnt = Path(tempfile.mkdtemp(prefix="strom-diskfull-"))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_SIZE}", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        mnt.rmdir()
        pytest.skip(f"cannot mount tmpfs: {r.stderr.strip() or r.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        try:
            mnt.rmdir()
        except OSError:
            pass


def _producer(bootstrap: str):
    from confluent_kafka import Producer

    # No retries: the broker's answer reaches the delivery report as it is.
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                     "enable.idempotence": False, "linger.ms": 0, "message.timeout.ms": 30000})


def _produce_one(p, topic: str, value: bytes):
    """(error code or 0, offset)."""
    out = {}

    def done(err, msg):
        out["r"] = (err.code() if err else 0, msg.offset())

    p.produce(topic, value=value, partition=0, on_delivery=done)
    p.flush(60)
    return out["r"]


def _read_all(bootstrap: str, topic: str, until: int) -> dict[int, bytes]:
    """Offsets to values, read with CRC checks on: a torn or corrupt batch served fails."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "diskfull-reader",
                  "enable.auto.commit": False, "fetch.message.max.bytes": 1 << 20,
                  "check.crcs": True})
    c.assign([TopicPartition(topic, 0, 0)])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    corrupt = (KafkaError._BAD_MSG, KafkaError._BAD_COMPRESSION, 2)  # 2: CORRUPT_MESSAGE
    try:
        while time.monotonic() < deadline and len(got) < until:
            m = c.poll(0.5)
            if m is None:
                continue
            assert not (m.error() and m.error().code() in corrupt), f"corrupt data served: {m.error()}"
            if not m.error():
                got[m.offset()] = m.value()
    finally:
        c.close()
    return got


def test_disk_full_answers_storage_error_keeps_serving_and_recovers_after_restart(small_fs):
    data = small_fs / "data"
    filler = small_fs / "filler"
    filler.write_bytes(b"\0" * FILLER)
    b = brokers.start_strom(shards=1, data_dir=data)
    try:
        admin.wait_for(lambda: admin.create_topic("confluent", b.bootstrap, "probe", 1) in (0, 36),
                       "strom to create a topic")
        full, other = unique_topic("full"), unique_topic("other")
        assert admin.create_topic("confluent", b.bootstrap, full, 1) == admin.NONE
        assert admin.create_topic("confluent", b.bootstrap, other, 1) == admin.NONE
        p = _producer(b.bootstrap)
        assert _produce_one(p, other, b"kept") == (0, 0)
        acked: dict[int, bytes] = {}
        code = 0
        for i in range(2 * FS_SIZE // VALUE):
            value = bytes([i % 251]) * VALUE
            code, offset = _produce_one(p, full, value)
            if code:
                break
            acked[offset] = value
        assert code == KAFKA_STORAGE_ERROR, f"expected KAFKA_STORAGE_ERROR, got {code} after {len(acked)} records"
        assert acked, "the filesystem filled before anything was acknowledged"
        # Up, and serving the partition that did not fail.
        assert b.alive()
        assert _read_all(b.bootstrap, other, 1) == {0: b"kept"}
        # The failed partition keeps refusing writes (no silent half-state).
        assert _produce_one(p, full, b"x")[0] == KAFKA_STORAGE_ERROR
    finally:
        b.cleanup()  # its data dir is on the tmpfs, kept for the restart
    # Recovery: free space, restart on the same data dir.
    filler.unlink()
    b2 = brokers.start_strom(shards=1, data_dir=data)
    try:
        admin.wait_for(lambda: admin.topic_partitions("confluent", b2.bootstrap, full) is not None,
                       "strom to serve its topics again")
        got = _read_all(b2.bootstrap, full, len(acked))
        missing = [o for o in acked if got.get(o) != acked[o]]
        assert not missing, f"acknowledged records lost or changed after recovery: {missing[:10]}"
        p = _producer(b2.bootstrap)
        code, offset = _produce_one(p, full, b"after")
        assert code == 0 and offset >= max(acked) + 1
    finally:
        b2.stop()
        b2.cleanup()
