"""`strom migrate import`: a real Kafka 4.4 is filled (keys, headers, null values, every
codec, an idempotent producer, committed and aborted transactions, a group committed
mid-topic), stopped cleanly, and its log dir imported into a fresh Strom data dir. Strom
must then serve the same batches byte for byte, the same records to read_committed and
read_uncommitted consumers, the same group offsets, and accept the idempotent producer's
next sequence (and refuse a gap) as Kafka would. A corrupt segment is refused by name.
"""

from __future__ import annotations

import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import admin
import brokers
import clients
from test_migrate import (
    assert_same_partition,
    by_topic,
    commit_group,
    group_offsets,
    kafka_dir,
    migrate,
    produce_transactions,
    pytestmark,  # noqa: F401  (the same skip when Kafka is not among the brokers)
    read_batches,
    scrape,
    scrape_until,
    serve,
)

NONE, OUT_OF_ORDER_SEQUENCE_NUMBER = 0, 45


def read_uncommitted(bootstrap: str, topic: str, partitions: int, total: int) -> list[clients.Rec]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ru-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    got = []
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        progress = clients.Progress(total)
        while progress.more(len(got)):
            for m in c.consume(num_messages=1000, timeout=0.5):
                assert not m.error(), m.error()
                ts_type, ts = m.timestamp()
                got.append(clients.Rec(m.partition(), m.offset(), m.key(), m.value(),
                                       clients._norm_headers(m.headers()), ts, str(ts_type)))
    finally:
        c.close()
    return sorted(got, key=lambda r: (r.partition, r.offset))


def last_idempotent_batch(partition_dir: Path) -> tuple[int, int, int, int]:
    """(producer id, epoch, next sequence, next offset) after the partition's last batch of
    a non-transactional producer with a producer id (bytes from the magic byte on: producer
    id at 27, epoch at 35, base sequence at 37)."""
    for base, last, _, _, b in reversed(read_batches(partition_dir)):
        attrs = struct.unpack_from(">h", b, 5)[0]
        pid, epoch, seq = struct.unpack_from(">qhi", b, 27)
        if pid >= 0 and not attrs & 0x10:
            return pid, epoch, seq + (last - base) + 1, last + 1
    raise AssertionError(f"no idempotent batch in {partition_dir}")


def raw_produce(bootstrap: str, topic: str, partition: int, pid: int, epoch: int, seq: int) -> tuple[int, int]:
    """One Produce v3 (acks=all) of one record with the given producer id, epoch and base
    sequence, as the idempotent producer would send its next batch. Returns (error, offset)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    b.append(0, timestamp=int(time.time() * 1000), key=b"after-import", value=b"v", headers=[])
    batch = bytes(b.build())
    name = topic.encode()
    body = struct.pack(">hhi", -1, -1, 30000)  # no transactional id, acks=all, timeout
    body += struct.pack(">ih", 1, len(name)) + name + struct.pack(">iii", 1, partition, len(batch)) + batch
    client = b"import-test"
    header = struct.pack(">hhih", 0, 3, 7, len(client)) + client
    req = header + body
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(struct.pack(">i", len(req)) + req)
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        resp = recv_exact(s, size)
    corr, n_topics, name_len = struct.unpack_from(">iih", resp, 0)
    assert (corr, n_topics) == (7, 1)
    pos = 10 + name_len
    _n_parts, _idx, err, offset = struct.unpack_from(">iihq", resp, pos)
    return err, offset


def recv_exact(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


class HeldProxy:
    """A TCP proxy to `target` that holds every connection until `release()`: a source that
    answers slowly. The importer asks `--configs-from` after verifying every segment and before
    appending, so while it waits for the answer its verification figures are complete."""

    def __init__(self, target: str):
        self.target = target
        self.accepted = threading.Event()
        self.released = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.set()
            threading.Thread(target=self._pipe, args=(conn,), daemon=True).start()

    def _pipe(self, conn: socket.socket) -> None:
        self.released.wait(120)
        host, port = self.target.rsplit(":", 1)
        up = socket.create_connection((host, int(port)), timeout=30)
        for a, b in ((conn, up), (up, conn)):
            threading.Thread(target=_copy, args=(a, b), daemon=True).start()

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.released.set()
        self.sock.close()


def _copy(a: socket.socket, b: socket.socket) -> None:
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def test_import_of_a_stopped_kafka_log_dir_serves_the_same_data_offsets_and_producer_state(kafka_broker):
    kafka = brokers.start_kafka()
    work = Path(tempfile.mkdtemp(prefix="strom-import-"))
    strom = mirror = None
    try:
        bs = kafka.bootstrap
        prefix = f"imp{uuid.uuid4().hex[:6]}"
        codecs_topic, txn_topic = f"{prefix}-codecs", f"{prefix}-txn"
        configs = {codecs_topic: {"retention.ms": "604800001"}, txn_topic: {"max.message.bytes": "2000000"}}
        assert admin.create_topic("confluent", bs, codecs_topic, 3, configs[codecs_topic]) == admin.NONE
        assert admin.create_topic("confluent", bs, txn_topic, 2, configs[txn_topic]) == admin.NONE
        # `--configs-from` reads a running broker of the source cluster; the session's other
        # Kafka stands in for it, holding the same topics with the same configs.
        for t, n in ((codecs_topic, 3), (txn_topic, 2)):
            assert admin.create_topic("confluent", kafka_broker.bootstrap, t, n, configs[t]) == admin.NONE
        recs = clients.make_records(1500, 3, null_header_values=True)
        for i, codec in enumerate(clients.CODECS):
            # acks=all, idempotent: every batch carries a producer id and sequences.
            clients.confluent_produce(bs, codecs_topic, recs[i * 300 : (i + 1) * 300], codec, "all", True)
        produce_transactions(bs, txn_topic)
        group = f"{prefix}-g"
        commit_group(bs, group, codecs_topic, {0: 201, 1: 150, 2: 333})
        topics = {codecs_topic: 3, txn_topic: 2}
        before_ru = {t: read_uncommitted(bs, t, n, 1500 if t == codecs_topic else 30) for t, n in topics.items()}
        before_rc = clients.confluent_consume(bs, txn_topic, 2, 20)
        assert len(before_rc) == 20 and all(r.value.startswith(b"commit") for r in before_rc)
        before_groups = group_offsets(bs, group)
        assert before_groups
        # While Kafka runs, its log dir is locked: refused.
        r = migrate("import", "--from", str(kafka_dir(kafka)), "--data-dir", str(work / "early"))
        assert r.returncode != 0 and "stop the Kafka broker first" in r.stderr, r.stderr[-2000:]
        assert not (work / "early").exists()
        # A continuous mirror of this Kafka outlives its stop: the failed requests are counted
        # and retried (the migrator gives up after 2 minutes), /health still answers.
        mirror_port = brokers.free_port()
        mirror = subprocess.Popen(
            [str(brokers.STROM_BIN), "migrate", "mirror", "--source", bs, "--data-dir", str(work / "mirrored"),
             "--topics", f"{prefix}.*", "--admin-listen", f"127.0.0.1:{mirror_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        scrape_until(mirror_port, mirror, "the mirror caught up", lambda s: s.get("strom_migrate_caught_up") == [({}, 1.0)])
        assert kafka.stop() in (0, 143), kafka.log_tail()
        src = kafka_dir(kafka)

        def retried(s) -> bool:
            errors = [v for lb, v in s.get("strom_migrate_source_errors_total", []) if lb["error"] == "request"]
            return errors and errors[0] >= 2 and s["strom_migrate_source_retries_total"][0][1] >= 2

        scrape_until(mirror_port, mirror, "failed source requests retried", retried, timeout_s=60)
        mirror.kill()
        mirror.wait(timeout=30)

        # A corrupt segment: refused by file name, nothing created on the target.
        bad_src = work / "bad-src"
        shutil.copytree(src, bad_src, ignore=shutil.ignore_patterns(".lock"))
        seg = bad_src / f"{codecs_topic}-1" / f"{0:020}.log"
        data = bytearray(seg.read_bytes())
        data[70] ^= 0xFF  # inside the first batch's records (CRC-covered)
        seg.write_bytes(bytes(data))
        bad_target = work / "bad-target"
        r = migrate("import", "--from", str(bad_src), "--data-dir", str(bad_target), "--topics", f"{prefix}.*")
        assert r.returncode != 0
        assert "corrupt segment" in r.stderr and str(seg) in r.stderr, r.stderr[-2000:]
        assert not bad_target.exists()

        # Not a Kafka log dir.
        r = migrate("import", "--from", str(work), "--data-dir", str(bad_target))
        assert r.returncode != 0 and "not a Kafka log dir" in r.stderr, r.stderr[-2000:]

        # The import, scraped on --admin-listen while it waits for a held `--configs-from`:
        # every partition, batch and byte of Kafka's segments verified, nothing appended yet.
        target = work / "strom"
        port = brokers.free_port()
        proxy = HeldProxy(kafka_broker.bootstrap)
        proc = subprocess.Popen(
            [str(brokers.STROM_BIN), "migrate", "import", "--from", str(src), "--data-dir", str(target),
             "--topics", f"{prefix}.*", "--configs-from", proxy.address, "--admin-listen", f"127.0.0.1:{port}",
             "--timeout-secs", "120"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proxy.accepted.wait(120), "the import never asked --configs-from"
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            s = scrape(port)
            assert s["strom_migrate_import_partitions"] == [({}, 5.0)]
            for t, n in topics.items():
                batches = [b for p in range(n) for b in read_batches(src / f"{t}-{p}")]
                assert by_topic(s, "strom_migrate_import_partitions_verified_total", t) == n
                assert by_topic(s, "strom_migrate_import_batches_verified_total", t) == len(batches)
                assert by_topic(s, "strom_migrate_import_bytes_verified_total", t) == sum(len(b[4]) + 16 for b in batches)
                assert by_topic(s, "strom_migrate_import_bytes_appended_total", t) is None
            proxy.release()
            out, err = proc.communicate(timeout=120)
        finally:
            proxy.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        r = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        assert r.returncode == 0, r.stderr[-3000:]
        assert f"{codecs_topic}: 3 partitions" in r.stdout, r.stdout
        assert "configs from the source" in r.stdout, r.stdout
        assert "committed offsets of 1 groups" in r.stdout, r.stdout
        # Kafka's clean shutdown wrote producer snapshots; they were carried over.
        snapshots = int(re.search(r"(\d+) producer snapshots", r.stdout).group(1))
        assert snapshots >= 1, r.stdout
        assert list((target / f"{codecs_topic}-0").glob("*.snapshot")), r.stdout
        for t, n in topics.items():
            for p in range(n):
                assert_same_partition(kafka, target, t, p)

        # A second import onto the same data: refused, Strom's copy left as it was.
        kept = read_batches(target / f"{codecs_topic}-0")
        r = migrate("import", "--from", str(src), "--data-dir", str(target), "--topics", f"{prefix}.*")
        assert r.returncode != 0 and "exists on Strom with data" in r.stderr, r.stderr[-2000:]
        assert read_batches(target / f"{codecs_topic}-0") == kept

        pid, epoch, seq, next_offset = last_idempotent_batch(src / f"{codecs_topic}-0")
        strom = serve(target)
        for t, n in topics.items():
            got = read_uncommitted(strom.bootstrap, t, n, len(before_ru[t]))
            assert got == before_ru[t], f"{t}: records differ after the import"
        assert clients.confluent_consume(strom.bootstrap, txn_topic, 2, 20) == before_rc
        assert group_offsets(strom.bootstrap, group) == before_groups
        for t, want in configs.items():
            got = admin.describe_topic_configs(strom.bootstrap, t)
            for k, v in want.items():
                assert got[k][0] == v, f"{t} {k}: {got[k]} on Strom, {v} on Kafka"

        # The idempotent producer from before continues: a gap is refused as on Kafka, the
        # next sequence is appended at the next offset.
        err, _ = raw_produce(strom.bootstrap, codecs_topic, 0, pid, epoch, seq + 5)
        assert err == OUT_OF_ORDER_SEQUENCE_NUMBER, err
        err, offset = raw_produce(strom.bootstrap, codecs_topic, 0, pid, epoch, seq)
        assert (err, offset) == (NONE, next_offset)
    finally:
        if mirror is not None and mirror.poll() is None:
            mirror.kill()
            mirror.wait(timeout=30)
        if strom is not None:
            strom.stop()
            strom.cleanup()
        kafka.cleanup()
        shutil.rmtree(work, ignore_errors=True)
