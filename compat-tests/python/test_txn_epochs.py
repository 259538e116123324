"""The end of a transactional producer id's epochs (KIP-890 transactions v2), against Strom and
Apache Kafka 4.4 side by side, over the raw protocol: no client lets a test choose its epoch.

A transactional id's epoch reaches `Short.MAX_VALUE - 1` after 32,767 InitProducerIds; the
EndTxn v5 of its next transaction then bumps past the last epoch, and Kafka's coordinator
answers with a new producer id at epoch 0 (`nextProducerId`), closes the old id's transaction
with markers at `Short.MAX_VALUE`, answers a retry from the old id with the new one
(`retryOnOverflow`), and the new id carries on from epoch 0.

Slow on purpose: 32,767 round trips per broker, each a durable `__transaction_state` write.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest

import admin
from raw_protocol import Reader, recv_exact, string

MAX = 32767
NONE, INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS = 0, 49, 48, 51
RETRIABLE = {14, 15, 16, CONCURRENT_TRANSACTIONS}  # loading, not available, not coordinator


def uvarint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def cstring(s: str) -> bytes:
    b = s.encode()
    return uvarint(len(b) + 1) + b


class Conn:
    """One connection for many requests (a connection per request would dominate 32k calls)."""

    def __init__(self, bootstrap: str):
        host, port = bootstrap.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=30)
        self.correlation = 0

    def call(self, api_key: int, version: int, body: bytes, flexible: bool = True) -> Reader:
        self.correlation += 1
        client = b"strom-compat"
        header = struct.pack(">hhih", api_key, version, self.correlation, len(client)) + client
        if flexible:
            header += b"\x00"
        frame = header + body
        self.s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", recv_exact(self.s, 4))[0]
        r = Reader(recv_exact(self.s, size))
        assert r.take("i") == self.correlation
        if flexible:
            assert r.uvarint() == 0, "response header tags"
        return r

    def close(self):
        self.s.close()

    def find_coordinator(self, tid: str):
        """FindCoordinator v1 for a transactional id: creates `__transaction_state` on Kafka."""
        self.call(10, 1, string(tid) + struct.pack(">b", 1), flexible=False)

    def init(self, tid: str) -> tuple[int, int, int]:
        """InitProducerId v4: (error, producer id, epoch)."""
        r = self.call(22, 4, cstring(tid) + struct.pack(">iqh", 60000, -1, -1) + b"\x00")
        r.take("i")
        return r.take("h"), r.take("q"), r.take("h")

    def add(self, tid: str, ids: tuple[int, int], topic: str) -> int:
        """AddPartitionsToTxn v3 of partition 0: its error."""
        topics = uvarint(2) + cstring(topic) + uvarint(2) + struct.pack(">i", 0) + b"\x00"
        r = self.call(24, 3, cstring(tid) + struct.pack(">qh", *ids) + topics + b"\x00")
        r.take("i")
        assert r.uvarint() == 2 and r.compact_string() == topic
        assert r.uvarint() == 2 and r.take("i") == 0
        return r.take("h")

    def end(self, tid: str, ids: tuple[int, int], commit: bool) -> tuple[int, int, int]:
        """EndTxn v5: (error, producer id, epoch) — KIP-890's answer."""
        r = self.call(26, 5, cstring(tid) + struct.pack(">qhb", *ids, commit) + b"\x00")
        r.take("i")
        return r.take("h"), r.take("q"), r.take("h")

    def describe(self, tid: str) -> tuple[str, int, int]:
        """DescribeTransactions v0: (state, producer id, epoch)."""
        r = self.call(65, 0, uvarint(2) + cstring(tid) + b"\x00")
        r.take("i")
        assert r.uvarint() == 2
        assert r.take("h") == NONE
        r.compact_string()
        state = r.compact_string()
        r.take("i"), r.take("q")
        return state, r.take("q"), r.take("h")


def until_settled(f, what: str, timeout_s: float = 30):
    """`f()` until its first element (an error code) is not retriable."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = f()
        if out[0] not in RETRIABLE:
            return out
        assert time.monotonic() < deadline, f"{what}: still {out}"
        time.sleep(0.05)


@pytest.mark.timeout(900)
def test_epoch_exhausted_by_end_txn_rotates_the_producer_id(broker):
    b = broker.bootstrap
    topic = f"txn-epochs-{uuid.uuid4().hex[:8]}"
    assert admin.create_topic("confluent", b, topic, 1) == admin.NONE
    admin.wait_partitions_ready(b, topic, 1)
    tid = f"epochs-{uuid.uuid4().hex[:8]}"
    c = Conn(b)
    try:
        c.find_coordinator(tid)
        err, pid, epoch = until_settled(lambda: c.init(tid), "the first InitProducerId")
        assert (err, epoch) == (NONE, 0)
        # Each InitProducerId of an idle id bumps its epoch: up to the last one a client holds.
        while epoch < MAX - 1:
            err, p, epoch = until_settled(lambda: c.init(tid), f"InitProducerId at {epoch}")
            assert (err, p) == (NONE, pid), (err, p, epoch)
        old = (pid, MAX - 1)
        assert c.add(tid, old, topic) == NONE
        err, new_pid, new_epoch = c.end(tid, old, True)
        assert err == NONE
        assert (new_pid != pid, new_epoch) == (True, 0), (pid, new_pid, new_epoch)
        # The old id's retry, once the commit completed: answered with the new id.
        err, p, e = until_settled(lambda: c.end(tid, old, True), "the retried commit")
        assert (err, p, e) == (NONE, new_pid, 0)
        assert c.end(tid, old, False)[0] == INVALID_TXN_STATE
        assert c.describe(tid) == ("CompleteCommit", new_pid, 0)
        # The new id carries on from epoch 0; the old one is no longer this id's.
        new = (new_pid, 0)
        assert until_settled(lambda: (c.add(tid, new, topic),), "the next transaction")[0] == NONE
        assert c.end(tid, new, False) == (NONE, new_pid, 1)
        # Once that abort is complete (while a transition is written both answer
        # CONCURRENT_TRANSACTIONS before looking at the id).
        deadline = time.monotonic() + 30
        while c.describe(tid)[0] != "CompleteAbort":
            assert time.monotonic() < deadline, c.describe(tid)
            time.sleep(0.05)
        assert c.add(tid, old, topic) == INVALID_PRODUCER_ID_MAPPING
    finally:
        c.close()
