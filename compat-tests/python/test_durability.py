"""Durability of acknowledged writes across a clean restart (SIGTERM) and across kill -9,
with librdkafka's idempotent producer at acks=all — Strom only (an Apache Kafka restart
takes a JVM start per cycle; the Kafka side of these guarantees is Kafka's own test suite).

The kill -9 test keeps ONE producer alive across every broker crash: librdkafka reconnects to
the restarted broker and retries unacknowledged batches with their original producer id and
sequence numbers. The broker must then answer a retry of a batch that did reach its log with
the original offset (producer state rebuilt from the log at restart) and append the rest, so
every record ends up in the log exactly once and at the offset its ack named.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import tempfile
import time
from pathlib import Path

import admin
import brokers

KILL_CYCLES = int(os.environ.get("STROM_KILL_CYCLES", "20"))


class Restartable:
    """A strom process on a fixed port and data dir that can be stopped and started again."""

    def __init__(self, shards: int = 2):
        self.shards = shards
        self.workdir = Path(tempfile.mkdtemp(prefix="strom-durability-"))
        self.port = brokers.free_port()
        self.metrics_port = brokers.free_port()
        self.proc: brokers.BrokerProcess | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *extra: str) -> None:
        """Starts strom; `extra` are more `serve` flags (e.g. "--set", "steering=ebpf")."""
        self.starts += 1
        argv = [
            str(brokers.STROM_BIN), "serve",
            "--listen", self.bootstrap,
            "--data-dir", str(self.workdir / "data"),
            "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
            "--shards", str(self.shards),
            *extra,
        ]
        run_dir = self.workdir / f"run{self.starts}"
        run_dir.mkdir()
        self.proc = brokers._spawn("strom", argv, run_dir, self.port)
        self.proc.wait_ready()

    def kill9(self) -> None:
        assert self.proc is not None and self.proc.proc is not None
        self.proc.proc.send_signal(signal.SIGKILL)
        self.proc.proc.wait(timeout=20)

    def stop(self) -> int | None:
        return self.proc.stop() if self.proc else None

    def cleanup(self) -> None:
        self.stop()
        if os.environ.get("STROM_COMPAT_KEEP_DIRS") != "1":
            shutil.rmtree(self.workdir, ignore_errors=True)


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple[int, int, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "durability-check",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out, eof, deadline = [], set(), time.monotonic() + 60
        while time.monotonic() < deadline and (len(out) < expected or len(eof) < partitions):
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                    continue
                raise AssertionError(f"consume error: {m.error()}")
            eof.discard(m.partition())
            out.append((m.partition(), m.offset(), m.value()))
        return out
    finally:
        c.close()


def test_sigterm_restart_keeps_every_record_at_its_offset():
    from confluent_kafka import Producer

    b = Restartable()
    try:
        b.start()
        assert admin.create_topic("confluent", b.bootstrap, "restart", 3) == admin.NONE
        acked = {}
        p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        for i in range(3000):
            v = f"r{i}".encode()
            p.produce("restart", value=v, key=str(i).encode(),
                      on_delivery=lambda e, m: acked.__setitem__(m.value(), (e, m.partition(), m.offset())))
        assert p.flush(30) == 0
        assert all(e is None for e, _, _ in acked.values()), "every record acked"
        before = sorted(consume_all(b.bootstrap, "restart", 3, 3000))
        assert b.stop() == 0, "clean shutdown exits 0"
        b.start()
        after = sorted(consume_all(b.bootstrap, "restart", 3, 3000))
        assert after == before
        assert {v: (part, off) for part, off, v in after} == {v: (part, off) for v, (_, part, off) in acked.items()}
    finally:
        b.cleanup()


def test_kill9_during_idempotent_acks_all_produce_loses_and_duplicates_nothing():
    from confluent_kafka import Producer

    rng = random.Random(int(os.environ.get("STROM_KILL_SEED", str(time.time_ns()))))
    b = Restartable()
    try:
        b.start()
        assert admin.create_topic("confluent", b.bootstrap, "durable", 3) == admin.NONE
        acked: dict[bytes, tuple[int, int]] = {}
        failed: list[str] = []

        def on_delivery(err, msg):
            if err is None:
                acked[msg.value()] = (msg.partition(), msg.offset())
            else:
                failed.append(f"{msg.value()!r}: {err}")

        p = Producer({
            "bootstrap.servers": b.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 120000,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
            "retry.backoff.ms": 20,
        })
        sent = 0
        for cycle in range(KILL_CYCLES):
            until = time.monotonic() + rng.uniform(0.2, 1.0)
            while time.monotonic() < until:
                for _ in range(50):
                    p.produce("durable", value=f"c{cycle}-{sent}".encode(), key=str(sent).encode(),
                              on_delivery=on_delivery)
                    sent += 1
                p.poll(0)
                # Keep the local queue bounded (librdkafka refuses past its limit).
                while len(p) > 20000 and time.monotonic() < until:
                    p.poll(0.05)
                time.sleep(0.002)
            b.kill9()
            time.sleep(rng.uniform(0.0, 0.3))
            b.start()
        assert p.flush(120) == 0, "producer drained after the last restart"
        assert not failed, f"{len(failed)} records failed, e.g. {failed[:3]}"
        assert len(acked) == sent

        got = consume_all(b.bootstrap, "durable", 3, sent)
        by_value: dict[bytes, list[tuple[int, int]]] = {}
        for part, off, v in got:
            by_value.setdefault(v, []).append((part, off))
        dups = {v: locs for v, locs in by_value.items() if len(locs) > 1}
        assert not dups, f"{len(dups)} records stored more than once, e.g. {list(dups.items())[:3]}"
        missing = [v for v in acked if v not in by_value]
        assert not missing, f"{len(missing)} acked records lost, e.g. {missing[:3]}"
        moved = [(v, acked[v], by_value[v][0]) for v in acked if by_value[v][0] != acked[v]]
        assert not moved, f"records not at their acked offset, e.g. {moved[:3]}"
        # Offsets in each partition are contiguous from 0.
        for part in range(3):
            offs = sorted(off for p_, off, _ in got if p_ == part)
            assert offs == list(range(len(offs))), f"partition {part} has gaps"
        print(f"kill -9 cycles={KILL_CYCLES} records={sent} broker starts={b.starts}")
    finally:
        b.cleanup()
