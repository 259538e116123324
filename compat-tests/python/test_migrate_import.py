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


def file_id(p: Path) -> tuple[int, int]:
    st = p.stat()
    return st.st_dev, st.st_ino


def test_import_of_split_log_dirs_takes_configs_from_the_metadata_log_and_hard_links_segments():
    """A stopped Kafka's partitions split over two log dirs (its metadata log moved to a
    third) imported with `--link` and no `--configs-from`: configs come from the KRaft
    metadata log (one altered after creation, one deleted), closed segments share Kafka's
    inodes, Strom serves the same records and group offsets, and appending on Strom leaves
    Kafka's files as they were."""
    from test_configs import incremental

    kafka = brokers.start_kafka()
    work = Path(tempfile.mkdtemp(prefix="strom-import-split-"))
    strom = None
    try:
        bs = kafka.bootstrap
        prefix = f"spl{uuid.uuid4().hex[:6]}"
        conf_topic, data_topic = f"{prefix}-conf", f"{prefix}-data"
        created = {"cleanup.policy": "compact", "retention.ms": "604800001", "delete.retention.ms": "1000"}
        assert admin.create_topic("confluent", bs, conf_topic, 2, created) == admin.NONE
        # 1 MiB segments (Kafka's minimum): the data topic gets several closed segments.
        assert admin.create_topic("confluent", bs, data_topic, 3, {"segment.bytes": "1048576"}) == admin.NONE
        ops = [("retention.ms", "SET", "700000000"), ("max.message.bytes", "SET", "2000000"),
               ("delete.retention.ms", "DELETE", None)]
        assert incremental(bs, "TOPIC", conf_topic, ops) == admin.NONE
        # A dynamic config of this broker that Strom applies dynamically too (neither Python
        # client can address the cluster-wide default; the unit test covers that level).
        assert incremental(bs, "BROKER", "0", [("log.retention.bytes", "SET", "10737418240")]) == admin.NONE
        want_configs = {"cleanup.policy": "compact", "retention.ms": "700000000", "max.message.bytes": "2000000"}
        now = int(time.time() * 1000)
        keyed = [clients.Out(i % 2, f"k{i % 50}".encode(), f"v{i}".encode(), (), now) for i in range(200)]
        clients.confluent_produce(bs, conf_topic, keyed, "lz4", "all", True)
        recs = clients.make_records(2000, 3, null_header_values=True)
        clients.confluent_produce(bs, data_topic, recs, "zstd", "all", True)
        big = [clients.Out(i % 3, f"big-{i}".encode(), random_bytes(100_000, i), (), now) for i in range(90)]
        clients.confluent_produce(bs, data_topic, big, "none", "all", True)
        group = f"{prefix}-g"
        commit_group(bs, group, data_topic, {0: 100, 1: 50, 2: 7})
        before = read_uncommitted(bs, data_topic, 3, len(recs) + len(big))
        before_groups = group_offsets(bs, group)
        assert kafka.stop() in (0, 143), kafka.log_tail()
        src = kafka_dir(kafka)

        # Two log dirs, each with the cluster's meta.properties; the metadata log elsewhere.
        d1, d2, meta = work / "d1", work / "d2", work / "meta"
        shutil.copytree(src, d1, ignore=shutil.ignore_patterns(".lock"))
        d2.mkdir()
        meta.mkdir()
        shutil.copy(d1 / "meta.properties", d2 / "meta.properties")
        shutil.move(d1 / "__cluster_metadata-0", meta / "__cluster_metadata-0")
        moved = [f"{data_topic}-1", f"{data_topic}-2", f"{conf_topic}-1", "__consumer_offsets-1", "__consumer_offsets-3"]
        for name in moved:
            shutil.move(d1 / name, d2 / name)
        (d2 / f"{data_topic}-0.0123456789abcdef-future").mkdir()
        (d2 / f"{conf_topic}-0.0123456789abcdef-delete").mkdir()
        (d2 / "notes.txt").write_text("left by an operator\n")
        kafka_files = {p: p.read_bytes() for d in (d1, d2) for p in d.glob(f"{prefix}-*/*.log")}
        segments = [p for p in kafka_files if p.parent.name.startswith(data_topic)]
        assert len(segments) >= 6, sorted(segments)

        # The same partition in both dirs: refused naming both.
        shutil.copytree(d1 / f"{data_topic}-0", d2 / f"{data_topic}-0")
        r = migrate("import", "--from", str(d1), "--from", str(d2), "--metadata-dir", str(meta),
                    "--data-dir", str(work / "dup"), "--topics", f"{prefix}.*")
        assert r.returncode != 0 and f"{data_topic}-0 is in two log dirs" in r.stderr, r.stderr[-2000:]
        assert str(d1 / f"{data_topic}-0") in r.stderr and str(d2 / f"{data_topic}-0") in r.stderr
        assert not (work / "dup").exists()
        shutil.rmtree(d2 / f"{data_topic}-0")

        target = work / "strom"
        r = migrate("import", "--from", str(d1), "--from", str(d2), "--metadata-dir", str(meta), "--link",
                    "--data-dir", str(target), "--topics", f"{prefix}.*")
        assert r.returncode == 0, r.stderr[-3000:]
        out = r.stdout
        assert f"{conf_topic}: 2 partitions" in out and "configs from Kafka's metadata log (3 set)" in out, out
        assert "committed offsets of 1 groups" in out, out
        assert re.search(r"configs read from Kafka's metadata log: .*[1-9]\d* records of .*__cluster_metadata-0", out), out
        assert "broker config carried: log.retention.bytes=10737418240 (this broker)" in out, out
        assert f"{data_topic}-0.0123456789abcdef-future: a replica move in progress" in out, out
        assert f"{conf_topic}-0.0123456789abcdef-delete: a partition Kafka was deleting" in out, out
        assert "notes.txt: stray file" in out, out
        linked = int(re.search(r"hard-linked: (\d+) segments", out).group(1))
        # Every data topic segment but each partition's last one is linked.
        assert linked >= len(segments) - 3, out
        shared = 0
        for p in segments:
            ours = target / p.parent.name / p.name
            last = max(int(q.stem) for q in p.parent.glob("*.log"))
            if int(p.stem) == last:
                assert not ours.exists() or file_id(ours) != file_id(p), f"{p}: the active segment is linked"
            else:
                assert file_id(ours) == file_id(p), f"{p} not linked"
                assert p.stat().st_nlink == 2
                shared += 1
        # The configs topic has one (active) segment per partition: nothing else is linked.
        assert shared == linked, out

        strom = serve(target)
        assert read_uncommitted(strom.bootstrap, data_topic, 3, len(before)) == before
        assert group_offsets(strom.bootstrap, group) == before_groups
        got = admin.describe_topic_configs(strom.bootstrap, conf_topic)
        for k, v in want_configs.items():
            assert got[k][0] == v, f"{k}: {got[k]} on Strom, {v} on Kafka"
        assert got["delete.retention.ms"][1] != "DYNAMIC_TOPIC_CONFIG", got["delete.retention.ms"]
        # Appending on Strom (into its own last segments, rolling new ones) leaves every file
        # Kafka names byte for byte as it was.
        more = [clients.Out(i % 3, b"after", random_bytes(100_000, 1000 + i), (), now) for i in range(60)]
        clients.confluent_produce(strom.bootstrap, data_topic, more, "none", "all", True)
        strom.stop()
        strom.cleanup()
        strom = None
        for p, data in kafka_files.items():
            assert p.read_bytes() == data, f"{p} changed after the import"
    finally:
        if strom is not None:
            strom.stop()
            strom.cleanup()
        kafka.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def random_bytes(n: int, seed: int) -> bytes:
    import random

    return random.Random(seed).randbytes(n)
