"""Connection steering under real clients (issue 8): one librdkafka producer (idempotent,
acks=all) and one group consumer keep working while Strom runs with the eBPF steering program
attached, is restarted with nothing attached (`steering=hash`: the program is detached when the
old process closes its listeners) and restarted again with it re-attached — on the same port
and data dir, without recreating the clients. Every acknowledged record must be consumed
exactly once, and each program the broker loaded must be gone from the kernel once that broker
has exited (no leaked BPF objects). Strom only: Kafka has no steering.

eBPF needs root (CAP_BPF); without it the test runs the same sequence with classic BPF, which
needs no capability (and loads no eBPF object to leak).
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import time
import urllib.request

import admin
from test_durability import Restartable

TOPIC = "steered"
PARTITIONS = 4
PER_PHASE = 2000

_BPF_SYSCALL = {"x86_64": 321, "aarch64": 280}.get(platform.machine())
_BPF_PROG_GET_FD_BY_ID = 13


def bpf_prog_exists(prog_id: int) -> bool:
    """Whether the kernel still holds a BPF program with this id (any process's)."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 16)()  # union bpf_attr: prog_id, next_id, open_flags, ...
    attr[0] = prog_id
    fd = libc.syscall(_BPF_SYSCALL, _BPF_PROG_GET_FD_BY_ID, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd >= 0:
        os.close(fd)
        return True
    err = ctypes.get_errno()
    assert err == 2, f"BPF_PROG_GET_FD_BY_ID({prog_id}): {os.strerror(err)}"  # ENOENT: gone
    return False


def steering_mode(b: Restartable) -> str:
    text = urllib.request.urlopen(f"http://127.0.0.1:{b.metrics_port}/metrics", timeout=10).read().decode()
    modes = re.findall(r'strom_steering_mode\{mode="(\w+)"\} 1', text)
    assert len(modes) == 1, text[-2000:]
    return modes[0]


def program_id(b: Restartable) -> int | None:
    """The id of the program this broker run attached, from its start-up log line."""
    log = re.sub(r"\x1b\[[0-9;]*m", "", b.proc.log_path.read_text())  # tracing's colours
    ids = re.findall(r"prog_id=(\d+)", log)
    return int(ids[-1]) if ids else None


def test_real_clients_keep_working_while_steering_is_attached_detached_and_reattached():
    from confluent_kafka import Consumer, Producer

    root = os.geteuid() == 0 and _BPF_SYSCALL is not None
    steer = "ebpf" if root else "cbpf"
    b = Restartable()
    p = c = None
    try:
        b.start("--set", f"steering={steer}")
        assert steering_mode(b) == steer, b.proc.log_tail()
        assert admin.create_topic("confluent", b.bootstrap, TOPIC, PARTITIONS) == admin.NONE
        acked: dict[bytes, tuple[int, int]] = {}
        failed: list[str] = []

        def on_delivery(err, msg):
            if err is None:
                acked[msg.value()] = (msg.partition(), msg.offset())
            else:
                failed.append(f"{msg.value()!r}: {err}")

        p = Producer({
            "bootstrap.servers": b.bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 2, "message.timeout.ms": 120000,
            "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
        })
        c = Consumer({
            "bootstrap.servers": b.bootstrap, "group.id": "steering-check",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
        })
        c.subscribe([TOPIC])
        consumed: dict[bytes, list[tuple[int, int]]] = {}

        def produce_and_consume(phase: str) -> None:
            """PER_PHASE records through the running broker, all acked and consumed back."""
            for i in range(PER_PHASE):
                p.produce(TOPIC, value=f"{phase}-{i}".encode(), key=str(i).encode(),
                          on_delivery=on_delivery)
                if i % 200 == 0:
                    p.poll(0)
            assert p.flush(60) == 0, f"{phase}: producer drained"
            assert not failed, f"{phase}: {failed[:3]}"
            deadline = time.monotonic() + 60
            while len(consumed) < len(acked) and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None or m.error():
                    continue
                consumed.setdefault(m.value(), []).append((m.partition(), m.offset()))
            c.commit(asynchronous=False)
            missing = [v for v in acked if v not in consumed]
            assert not missing, f"{phase}: {len(missing)} acked records not consumed, e.g. {missing[:3]}"

        programs: list[int] = []
        # 1. Program attached.
        produce_and_consume("attached")
        if steer == "ebpf":
            programs.append(program_id(b))
            assert programs[0] is not None and bpf_prog_exists(programs[0]), b.proc.log_tail()
        assert b.stop() == 0
        for prog in programs:
            assert not bpf_prog_exists(prog), f"program {prog} outlived its broker"

        # 2. Detached: the same port served by the kernel's reuseport hash.
        b.start("--set", "steering=hash")
        assert steering_mode(b) == "hash"
        assert program_id(b) is None, "hash mode loads no program"
        produce_and_consume("detached")
        assert b.stop() == 0

        # 3. Re-attached on restart.
        b.start("--set", f"steering={steer}")
        assert steering_mode(b) == steer
        produce_and_consume("reattached")
        if steer == "ebpf":
            programs.append(program_id(b))
            assert programs[1] is not None and programs[1] != programs[0]
            assert bpf_prog_exists(programs[1])
        c.close()
        c = None
        assert b.stop() == 0
        for prog in programs:
            assert not bpf_prog_exists(prog), f"program {prog} outlived its broker"

        assert len(acked) == 3 * PER_PHASE
        dups = {v: locs for v, locs in consumed.items() if len(set(locs)) > 1}
        assert not dups, f"records stored twice: {list(dups.items())[:3]}"
        moved = [v for v, loc in acked.items() if consumed[v][0] != loc]
        assert not moved, f"records not at their acked offset: {moved[:3]}"
    finally:
        if c is not None:
            c.close()
        b.cleanup()
