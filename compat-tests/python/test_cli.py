"""The `strom` CLI (docs/cli.md) against a real `strom serve` and a real Apache Kafka 4.4:
every subcommand, its table and JSON output, its exit codes and error messages.

The CLI is the release binary (`target/release/strom`, or STROM_BIN); it talks to the broker
under test over TCP like any client. Each test uses topics and groups of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import brokers
import kafka_tools as kt
from conftest import BROKERS, _ready_check

CLI_TIMEOUT_S = 60


def strom(b, *args, input: str | bytes | None = None, code: int = 0, timeout: float = CLI_TIMEOUT_S):
    """Runs `strom ARGS --brokers B`; asserts the exit code; returns the CompletedProcess
    (stdout/stderr as text)."""
    argv = [str(brokers.STROM_BIN), *args]
    env = dict(os.environ, STROM_BROKERS=b.bootstrap if b else "127.0.0.1:1")
    data = input.encode() if isinstance(input, str) else input
    r = subprocess.run(argv, input=data, capture_output=True, timeout=timeout, env=env)
    out = subprocess.CompletedProcess(argv, r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace"))
    assert out.returncode == code, f"{' '.join(args)}: exit {out.returncode}, want {code}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    return out


def js(b, *args, **kw):
    return json.loads(strom(b, *args, "--format", "json", **kw).stdout)


def name(prefix: str) -> str:
    return f"cli-{prefix}-{uuid.uuid4().hex[:8]}"


def wait_offsets(b, topic: str, partitions: int) -> None:
    """Kafka answers CreateTopics before its partitions serve (FINDINGS.md): wait until
    describe reports every high watermark."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        p = subprocess.run([str(brokers.STROM_BIN), "topic", "describe", topic, "--format", "json", "--brokers", b.bootstrap],
                           capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
        if p.returncode == 0:
            d = json.loads(p.stdout)
            if len(d["partitions"]) == partitions and all(x["high_watermark"] is not None for x in d["partitions"]):
                return
        time.sleep(0.3)
    raise AssertionError(f"{topic}: partitions not serving within 30 s")


def create(b, topic: str, partitions: int = 3, *extra) -> None:
    strom(b, "topic", "create", topic, "-p", str(partitions), "-r", "1", *extra)
    wait_offsets(b, topic, partitions)


# ---------------------------------------------------------------- topic

def test_topic_create_list_describe_alter_add_delete(broker):
    t = name("topic")
    out = strom(broker, "topic", "create", t, "-p", "3", "-r", "1", "-c", "retention.ms=3600000").stdout
    assert out.splitlines()[0].split() == ["TOPIC", "STATUS"]
    assert out.splitlines()[1].split() == [t, "OK"]
    wait_offsets(broker, t, 3)

    # Again: the broker's error code, named, with what to do; exit 1.
    r = strom(broker, "topic", "create", t, "-p", "3", "-r", "1", code=1)
    assert "TOPIC_ALREADY_EXISTS" in r.stdout, r.stdout
    assert "1 of 1 failed" in r.stderr
    created = js(broker, "topic", "create", t, "-p", "3", "-r", "1", code=1)
    assert created[0]["error"]["code"] == 36 and created[0]["error"]["name"] == "TOPIC_ALREADY_EXISTS"

    listed = {x["name"]: x for x in js(broker, "topic", "list")}
    assert listed[t]["partitions"] == 3 and listed[t]["replication_factor"] == 1 and listed[t]["internal"] is False
    table = strom(broker, "topic", "list").stdout.splitlines()
    assert table[0].split() == ["NAME", "PARTITIONS", "REPLICAS"]
    assert [t, "3", "1"] in [line.split() for line in table]

    d = js(broker, "topic", "describe", t)
    assert d["name"] == t and len(d["topic_id"]) == 36
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2]
    assert all(p["leader"] >= 0 and p["replicas"] == [p["leader"]] and p["isr"] == [p["leader"]] for p in d["partitions"])
    assert all(p["log_start_offset"] == 0 and p["high_watermark"] == 0 for p in d["partitions"])
    configs = {c["name"]: c for c in d["configs"]}
    assert configs["retention.ms"]["value"] == "3600000" and configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "delete" and configs["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    text = strom(broker, "topic", "describe", t).stdout
    assert "PARTITION  LEADER" in text and "HIGH-WATERMARK" in text and "retention.ms" in text

    strom(broker, "topic", "alter-config", t, "--set", "segment.ms=600000", "--delete", "retention.ms")
    configs = {c["name"]: c for c in js(broker, "topic", "describe", t)["configs"]}
    assert configs["segment.ms"]["value"] == "600000" and configs["segment.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["retention.ms"]["source"] == "DEFAULT_CONFIG"
    bad = js(broker, "topic", "alter-config", t, "--set", "no.such.config=1", code=1)
    assert bad[0]["error"]["code"] == 40, bad  # INVALID_CONFIG

    added = js(broker, "topic", "add-partitions", t, "-n", "2")
    assert added[0]["partitions"] == 5 and added[0]["error"] is None
    wait_offsets(broker, t, 5)

    deleted = js(broker, "topic", "delete", t)
    assert deleted == [{"topic": t, "error": None}]
    deadline = time.monotonic() + 30
    while t in {x["name"] for x in js(broker, "topic", "list")}:
        assert time.monotonic() < deadline, "topic still listed"
        time.sleep(0.3)
    r = strom(broker, "topic", "describe", t, code=1)
    assert "UNKNOWN_TOPIC_OR_PARTITION (3)" in r.stderr and "hint: check the name" in r.stderr


def test_topic_trim_prefix(broker):
    t = name("trim")
    create(broker, t, 1)
    strom(broker, "produce", t, "-o", "none", input="".join(f"r{i}\n" for i in range(10)))
    r = strom(broker, "topic", "trim-prefix", t, "-o", "4", code=2)
    assert "not confirmed" in r.stderr  # no terminal to ask, no --yes
    trimmed = js(broker, "topic", "trim-prefix", t, "-o", "4", "--yes")
    assert trimmed == [{"topic": t, "partition": 0, "low_watermark": 4, "error": None}]
    d = js(broker, "topic", "describe", t)
    assert (d["partitions"][0]["log_start_offset"], d["partitions"][0]["high_watermark"]) == (4, 10)
    out = strom(broker, "consume", t, "-f", "%o %v\\n").stdout
    assert out.splitlines() == [f"{i} r{i}" for i in range(4, 10)]
    past = js(broker, "topic", "trim-prefix", t, "-o", "50", "--yes", code=1)
    assert past[0]["error"]["name"] == "OFFSET_OUT_OF_RANGE"


# ---------------------------------------------------------------- produce / consume

@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_produce_and_consume_formats(broker, compression):
    t = name("pc")
    create(broker, t, 2)
    lines = "".join(f"k{i}:value {i}\n" for i in range(6))
    r = strom(broker, "produce", t, "-f", "%k:%v\\n", "-H", "source=cli", "-z", compression, "-o", "json", input=lines)
    acks = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(acks) == 6 and all(a["topic"] == t and a["offset"] >= 0 for a in acks)
    # Java's murmur2 partitioner: the same key always lands on the same partition.
    again = strom(broker, "produce", t, "-k", "k1", "-o", "json", input="once more\n").stdout
    assert json.loads(again)["partition"] == acks[1]["partition"]

    records = [json.loads(line) for line in strom(broker, "consume", t, "-f", "json").stdout.splitlines()]
    assert len(records) == 7
    by_key = {}
    for rec in records:
        by_key.setdefault(rec["key"], []).append(rec)
    assert by_key["k3"][0]["value"] == "value 3"
    assert by_key["k3"][0]["headers"] == [{"key": "source", "value": "cli"}]
    assert [x["value"] for x in by_key["k1"]] == ["value 1", "once more"]
    assert all(rec["timestamp"] > 0 and rec["topic"] == t for rec in records)

    # Templates, -n, and offsets start|end|N|@timestamp on one partition.
    p = acks[0]["partition"]
    on_p = sorted((a["offset"], i) for i, a in enumerate(acks) if a["partition"] == p)
    out = strom(broker, "consume", t, "-p", str(p), "-f", "%p|%o|%k|%v|%h\\n").stdout.splitlines()
    assert out[0] == f"{p}|0|k{on_p[0][1]}|value {on_p[0][1]}|source=cli"
    assert len(strom(broker, "consume", t, "-p", str(p), "-n", "1").stdout.splitlines()) == 1
    assert strom(broker, "consume", t, "-o", "end").stdout == ""
    from_1 = strom(broker, "consume", t, "-p", str(p), "-o", "1", "-f", "%o\\n").stdout.split()
    assert from_1[0] == "1"
    ts = records[-1]["timestamp"]
    at = [json.loads(x) for x in strom(broker, "consume", t, "-o", f"@{ts + 1}", "-f", "json").stdout.splitlines()]
    assert all(x["timestamp"] > ts for x in at)

    # JSON lines round-trip: what consume prints, produce reads.
    t2 = name("pc-json")
    create(broker, t2, 1)
    # The TOPIC argument wins over each line's "topic"; t2 has one partition, so drop theirs.
    lines = [json.dumps({k: v for k, v in r.items() if k != "partition"}) for r in records]
    strom(broker, "produce", t2, "-f", "json", "-o", "none", input="\n".join(lines) + "\n")
    copied = [json.loads(x) for x in strom(broker, "consume", t2, "-f", "json").stdout.splitlines()]
    assert [(c["key"], c["value"], c["headers"]) for c in copied] == [(r["key"], r["value"], r["headers"]) for r in records]


def test_produce_and_consume_errors(broker):
    r = strom(broker, "consume", name("missing"), code=1)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr
    r = strom(broker, "produce", "t", "--acks", "2", code=2)
    assert "--acks" in r.stderr
    r = strom(broker, "consume", "t", "-o", "yesterday", code=2)
    assert "expected start, end" in r.stderr
    r = strom(broker, "consume", "t", "-f", "%q", code=2)
    assert "unknown field" in r.stderr


def test_unreachable_broker_exits_3():
    port = brokers.free_port()
    b = type("B", (), {"bootstrap": f"127.0.0.1:{port}"})()
    r = strom(b, "topic", "list", "--timeout-ms", "2000", code=3)
    assert f"cannot reach 127.0.0.1:{port}" in r.stderr and "hint:" in r.stderr


# ---------------------------------------------------------------- groups

def group_lag(b, group: str) -> dict[tuple[str, int], int | None]:
    d = js(b, "group", "describe", group)[0]
    return {(p["topic"], p["partition"]): p["lag"] for p in d["partitions"]}


def test_group_list_describe_seek_delete(broker, tmp_path):
    t, g = name("grp"), name("g")
    create(broker, t, 2)
    strom(broker, "produce", t, "-p", "0", "-o", "none", input="".join(f"a{i}\n" for i in range(6)))
    strom(broker, "produce", t, "-p", "1", "-o", "none", input="".join(f"b{i}\n" for i in range(4)))

    # A group member reads 7 of the 10 records and commits them.
    out = strom(broker, "consume", t, "-g", g, "-n", "7", timeout=90).stdout
    assert len(out.splitlines()) == 7
    assert any(x["group"] == g and x["state"] == "Empty" for x in js(broker, "group", "list"))
    d = js(broker, "group", "describe", g)[0]
    assert d["state"] == "Empty" and d["members"] == [] and d["error"] is None
    assert d["total_lag"] == 3
    assert {(p["partition"], p["log_end_offset"]) for p in d["partitions"]} == {(0, 6), (1, 4)}
    table = strom(broker, "group", "describe", g).stdout
    assert ["TOTAL-LAG", "3"] in [line.split() for line in table.splitlines()], table
    assert "CURRENT-OFFSET" in table and "LOG-END-OFFSET" in table

    # The rest of the group's records, then nothing more: the group resumes where it was.
    assert len(strom(broker, "consume", t, "-g", g, timeout=90).stdout.splitlines()) == 3
    assert group_lag(broker, g) == {(t, 0): 0, (t, 1): 0}

    seek = js(broker, "group", "seek", g, "--to", "start")
    assert {(p["partition"], p["previous_offset"], p["new_offset"]) for p in seek["partitions"]} == {(0, 6, 0), (1, 4, 0)}
    assert group_lag(broker, g) == {(t, 0): 6, (t, 1): 4}
    dry = js(broker, "group", "seek", g, "--to", "end", "--dry-run")
    assert dry["dry_run"] and group_lag(broker, g) == {(t, 0): 6, (t, 1): 4}
    assert "DRY-RUN" in strom(broker, "group", "seek", g, "--to", "end", "--dry-run").stdout
    js(broker, "group", "seek", g, "--to", "2", "--topic", t)
    assert group_lag(broker, g) == {(t, 0): 4, (t, 1): 2}
    f = tmp_path / "offsets.csv"
    f.write_text(f"# topic,partition,offset\n{t},0,5\n{t},1,1\n")
    js(broker, "group", "seek", g, "--to-file", str(f))
    assert group_lag(broker, g) == {(t, 0): 1, (t, 1): 3}
    js(broker, "group", "seek", g, "--to", f"@{int(time.time() * 1000) + 60_000}")
    assert group_lag(broker, g) == {(t, 0): 0, (t, 1): 0}

    deleted = js(broker, "group", "delete", g)
    assert deleted == [{"group": g, "error": None}]
    assert g not in {x["group"] for x in js(broker, "group", "list")}
    r = strom(broker, "group", "delete", g, code=1)
    assert "GROUP_ID_NOT_FOUND" in r.stdout


def test_group_seek_refused_while_members_are_active(broker):
    from confluent_kafka import Consumer

    t, g = name("active"), name("g")
    create(broker, t, 1)
    strom(broker, "produce", t, "-o", "none", input="x\ny\n")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": g, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([t])
        deadline = time.monotonic() + 60
        while not c.assignment():
            assert time.monotonic() < deadline, "no assignment"
            c.poll(0.5)
        d = js(broker, "group", "describe", g)[0]
        assert d["state"] == "Stable" and len(d["members"]) == 1
        assert d["members"][0]["assignments"] == [{"topic": t, "partitions": [0]}]
        assert all(p["member_id"] == d["members"][0]["member_id"] for p in d["partitions"])
        r = strom(broker, "group", "seek", g, "--to", "start", "--topic", t, code=1)
        assert "NON_EMPTY_GROUP" in r.stderr and "stop its consumers first" in r.stderr
    finally:
        c.close()


# ---------------------------------------------------------------- cluster

def test_cluster_info_health_config(broker):
    info = js(broker, "cluster", "info")
    assert len(info["brokers"]) == 1 and info["brokers"][0]["port"] == broker.port
    assert info["cluster_id"] and info["controller"] >= 0
    assert "CLUSTER" in strom(broker, "cluster", "info").stdout

    h = js(broker, "cluster", "health")
    assert h["healthy"] is True and h["brokers_down"] == [] and h["leaderless_partitions"] == []
    assert strom(broker, "cluster", "health").stdout.split()[:2] == ["HEALTHY", "true"]

    node = info["brokers"][0]["node_id"]
    got = js(broker, "cluster", "config", "get", "log.retention.ms", "num.partitions")
    assert got["broker"] == node
    assert {c["name"] for c in got["configs"]} == {"log.retention.ms", "num.partitions"}
    # The cluster-wide default, set to the value it has.
    strom(broker, "cluster", "config", "set", "log.retention.ms=604800000")
    try:
        # Kafka applies a cluster-wide default once its metadata log delivers it: poll.
        deadline = time.monotonic() + 60
        while True:
            got = {c["name"]: c for c in js(broker, "cluster", "config", "get", "log.retention.ms")["configs"]}
            if got["log.retention.ms"]["value"] == "604800000" or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert got["log.retention.ms"]["value"] == "604800000", got
        assert got["log.retention.ms"]["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    finally:
        # Unset it again: later modules share this broker and check config sources
        # (test_configs.py wants DEFAULT_CONFIG, not DYNAMIC_DEFAULT_BROKER_CONFIG). The CLI has
        # no delete yet and neither Python client can address the cluster default (BROKER ""),
        # so Kafka's own kafka-configs does it.
        kt.fetch()
        r = kt.run("kafka-configs", broker.bootstrap, "--alter", "--entity-type", "brokers",
                   "--entity-default", "--delete-config", "log.retention.ms")
        assert r.rc == 0, r.err
    r = js(broker, "cluster", "config", "set", "broker.id=7", code=1)
    assert r["error"] is not None


# ---------------------------------------------------------------- schema registry

def sr(b, *args, code: int = 0):
    """`strom schema ARGS` against the broker's built-in registry (Confluent's REST API)."""
    argv = [str(brokers.STROM_BIN), "schema", *args]
    env = dict(os.environ, STROM_REGISTRY_URL=f"http://127.0.0.1:{b.extra['schema_registry_port']}")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env=env)
    assert r.returncode == code, f"schema {' '.join(args)}: exit {r.returncode}, want {code}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def srj(b, *args, code: int = 0):
    return json.loads(sr(b, *args, "--format", "json", code=code).stdout)


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def avro_user(*extra_fields: dict) -> dict:
    return {"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}, *extra_fields]}


# Registry only: Kafka has none (docs/schema-registry.md); the same calls work against
# Confluent's, which CI does not run.
def test_schema_create_get_list_check_level_mode_delete(strom_broker, tmp_path):
    b = strom_broker
    subj = name("sr") + "-value"
    v1, v2, bad = tmp_path / "v1.avsc", tmp_path / "v2.avsc", tmp_path / "bad.avsc"
    v1.write_text(json.dumps(avro_user()))
    v2.write_text(json.dumps(avro_user({"name": "name", "type": "string", "default": ""})))
    bad.write_text(json.dumps(avro_user({"name": "email", "type": "string"})))  # no default

    out = sr(b, "create", subj, "--schema", str(v1)).stdout
    assert rows(out)[0] == ["SUBJECT", "VERSION", "ID", "TYPE"]
    assert rows(out)[1][:2] == [subj, "1"] and rows(out)[1][3] == "AVRO"
    id1 = int(rows(out)[1][2])
    # The same schema again: the same id and version, nothing new.
    again = srj(b, "create", subj, "--schema", str(v1), "--type", "avro")
    assert (again["subject"], again["version"], again["id"], again["type"]) == (subj, 1, id1, "AVRO")

    # A field with a default keeps BACKWARD compatibility; one without breaks it.
    assert sr(b, "check-compatibility", subj, "--schema", str(v2)).stdout == "COMPATIBLE\ntrue\n"
    assert srj(b, "check-compatibility", subj, "--schema", str(v2)) == {"compatible": True, "messages": []}
    r = sr(b, "check-compatibility", subj, "--schema", str(bad), code=4)
    assert r.stdout.splitlines()[:4] == ["COMPATIBLE", "false", "", "REASON"], r.stdout
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in r.stdout and "email" in r.stdout, r.stdout
    assert r.stderr == f"strom: error: the schema is not compatible with {subj} (latest)\n"
    no = srj(b, "check-compatibility", subj, "--schema", str(bad), code=4)
    assert no["compatible"] is False and any("{compatibility: 'BACKWARD'}" in m for m in no["messages"]), no
    r = sr(b, "create", subj, "--schema", str(bad), code=1)
    assert "(error_code 409, HTTP 409)" in r.stderr and "hint: the schema breaks" in r.stderr, r.stderr

    created = srj(b, "create", subj, "--schema", str(v2))
    assert created["version"] == 2 and created["id"] != id1
    id2 = created["id"]

    assert rows(sr(b, "get", subj).stdout) == [["SUBJECT", "VERSION", "ID", "TYPE"], [subj, "2", str(id2), "AVRO"]]
    got = srj(b, "get", subj, "--schema-version", "1")
    assert [(g["subject"], g["version"], g["id"], g["type"], g["references"]) for g in got] == [(subj, 1, id1, "AVRO", [])]
    assert json.loads(got[0]["schema"]) == avro_user()
    assert rows(sr(b, "get", "--id", str(id1)).stdout)[1:] == [[subj, "1", str(id1), "AVRO"]]
    assert json.loads(sr(b, "get", "--id", str(id2), "--print-schema").stdout) == json.loads(v2.read_text())
    r = sr(b, "get", subj + "-nope", code=1)
    assert r.stderr.splitlines() == [
        f"strom: error: getting {subj}-nope version latest: Subject '{subj}-nope' not found. (error_code 40401, HTTP 404)",
        "hint: no such subject: `strom schema subject list` shows the subjects",
    ]
    r = sr(b, "get", subj, "--schema-version", "9", code=1)
    assert "(error_code 40402, HTTP 404)" in r.stderr

    assert rows(sr(b, "list", subj).stdout) == [
        ["SUBJECT", "VERSION", "ID", "TYPE"], [subj, "1", str(id1), "AVRO"], [subj, "2", str(id2), "AVRO"]]
    assert subj in srj(b, "subject", "list")
    assert [subj] in rows(sr(b, "subject", "list").stdout)

    # Levels: the subject falls back to the global BACKWARD until it has its own.
    assert rows(sr(b, "compatibility-level", "get", subj).stdout) == [["SUBJECT", "VALUE", "ERROR"], [subj, "BACKWARD", "-"]]
    assert srj(b, "compatibility-level", "set", subj, "--level", "none") == [{"subject": subj, "value": "NONE", "error": None}]
    assert srj(b, "compatibility-level", "get", subj) == [{"subject": subj, "value": "NONE", "error": None}]
    assert sr(b, "check-compatibility", subj, "--schema", str(bad)).stdout == "COMPATIBLE\ntrue\n"
    wrong = srj(b, "compatibility-level", "set", subj, "--level", "SIDEWAYS", code=1)
    assert wrong[0]["value"] is None and wrong[0]["error"]["code"] == 42203 and wrong[0]["error"]["http_status"] == 422
    r = sr(b, "compatibility-level", "set", subj, "--level", "SIDEWAYS", code=1)
    assert r.stderr == "strom: error: 1 of 1 failed\n" and "(42203)" in r.stdout

    # Mode: READONLY refuses writes with Confluent's 42205.
    assert rows(sr(b, "mode", "get", subj).stdout)[1] == [subj, "READWRITE", "-"]
    assert srj(b, "mode", "set", subj, "--mode", "READONLY") == [{"subject": subj, "value": "READONLY", "error": None}]
    r = sr(b, "create", subj, "--schema", str(bad), code=1)
    assert "(error_code 42205, HTTP 422)" in r.stderr, r.stderr
    assert srj(b, "mode", "set", subj, "--mode", "READWRITE")[0]["value"] == "READWRITE"

    # Deletes: soft first, then permanent; permanent first is Confluent's 40407.
    r = sr(b, "delete", subj, "--schema-version", "1", "--permanent", code=1)
    assert "(error_code 40407, HTTP 404)" in r.stderr and "hint: delete it without --permanent first" in r.stderr
    assert rows(sr(b, "delete", subj, "--schema-version", "1").stdout) == [["SUBJECT", "VERSION", "DELETED"], [subj, "1", "soft"]]
    assert [x["version"] for x in srj(b, "list", subj)] == [2]
    assert [x["version"] for x in srj(b, "list", subj, "--deleted")] == [1, 2]
    assert srj(b, "delete", subj, "--schema-version", "1", "--permanent") == {"subject": subj, "version": 1, "permanent": True}
    assert rows(sr(b, "subject", "delete", subj).stdout) == [["SUBJECT", "VERSIONS", "DELETED", "ERROR"], [subj, "2", "soft", "-"]]
    assert subj not in srj(b, "subject", "list") and subj in srj(b, "subject", "list", "--deleted")
    assert srj(b, "subject", "delete", subj, "--permanent") == [{"subject": subj, "versions": [2], "permanent": True, "error": None}]
    gone = srj(b, "subject", "delete", subj, code=1)
    assert gone[0]["error"]["code"] == 40401 and gone[0]["versions"] == []


def test_schema_protobuf_with_reference_and_usage_errors(strom_broker, tmp_path):
    b = strom_broker
    common, order = name("common"), name("order") + "-value"
    (tmp_path / "common.proto").write_text('syntax = "proto3";\npackage shop;\nmessage Money { int64 cents = 1; }\n')
    (tmp_path / "order.txt").write_text(
        'syntax = "proto3";\npackage shop;\nimport "shop/common.proto";\nmessage Order { shop.Money total = 1; }\n')
    assert srj(b, "create", common, "--schema", str(tmp_path / "common.proto"))["type"] == "PROTOBUF"
    # No extension to go by: --type is needed (a usage error, exit 2, before any request).
    r = sr(b, "create", order, "--schema", str(tmp_path / "order.txt"), code=2)
    assert "give --type avro|protobuf|json" in r.stderr
    # Without the reference the import cannot resolve: Confluent's 42201.
    r = sr(b, "create", order, "--schema", str(tmp_path / "order.txt"), "--type", "protobuf", code=1)
    assert "(error_code 42201, HTTP 422)" in r.stderr, r.stderr
    o = srj(b, "create", order, "--schema", str(tmp_path / "order.txt"), "--type", "protobuf",
            "--references", f"shop/common.proto:{common}:1")
    got = srj(b, "get", order)[0]
    assert got["id"] == o["id"] and got["references"] == [{"name": "shop/common.proto", "subject": common, "version": 1}]
    assert "message Order" in got["schema"]
    r = sr(b, "create", order, "--schema", str(tmp_path / "order.txt"), "--type", "protobuf", "--references", "nocolons", code=2)
    assert "NAME:SUBJECT:VERSION" in r.stderr
    r = sr(b, "get", "--registry-url", "http://127.0.0.1:1", order, code=3)
    assert "cannot reach the schema registry at http://127.0.0.1:1" in r.stderr and "--registry-url" in r.stderr


# ---------------------------------------------------------------- acl, user, secured brokers

# As test_acls.py configures them: SCRAM-SHA-512 (and PLAIN on SASL_PLAINTEXT) users, Kafka's
# StandardAuthorizer, admin a super user, PLAINTEXT's ANONYMOUS too (the fixtures' readiness
# check and wait_offsets use it); SASL_SSL with the test CA's broker certificate.
SEC_USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def cli_certs():
    import pki

    d = Path(tempfile.mkdtemp(prefix="strom-compat-cli-pki-"))
    yield pki.make(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module", params=BROKERS)
def secured(request, cli_certs):
    scram_jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    plain_jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                  + " ".join(f'user_{u}="{p}"' for u, p in SEC_USERS.items()) + ";")
    security = {
        "listeners": ["SASL_PLAINTEXT", "SASL_SSL"],
        "settings": {
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin;User:ANONYMOUS",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": cli_certs.keystore("broker"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": cli_certs.ca,
        },
        "kafka_settings": {
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": scram_jaas,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas,
        },
        "users": [(u, p, "SCRAM-SHA-512") for u, p in SEC_USERS.items()],
    }
    start = brokers.start_strom if request.param == "strom" else brokers.start_kafka
    b = start(security=security)
    try:
        _ready_check(b)
        b.extra["ca"] = cli_certs.ca
        yield b
    finally:
        b.cleanup()


def as_user(b, user: str, password: str | None = None, listener: str = "SASL_PLAINTEXT",
            mechanism: str = "SCRAM-SHA-512") -> list[str]:
    tls = ["--tls-ca", b.extra["ca"]] if listener == "SASL_SSL" else []
    return ["--brokers", f"127.0.0.1:{b.extra['ports'][listener]}", "--sasl-mechanism", mechanism,
            "--user", user, "--password", password or SEC_USERS[user], *tls]


def eventually(check, what: str, timeout_s: float = 15) -> None:
    """Kafka applies credential and ACL changes once its metadata log delivers them."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def logs_in(b, user: str, password: str) -> bool:
    r = subprocess.run([str(brokers.STROM_BIN), "topic", "list", *as_user(b, user, password)],
                       capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    return r.returncode == 0


def test_user_create_list_update_delete(secured):
    b, admin = secured, as_user(secured, "admin")
    carol = f"carol-{uuid.uuid4().hex[:8]}"
    out = strom(b, "user", "create", carol, "--new-password", "pw-1", *admin).stdout
    assert rows(out) == [["USER", "MECHANISM", "STATUS"], [carol, "SCRAM-SHA-512", "OK"]]
    eventually(lambda: carol in {u["user"] for u in js(b, "user", "list", *admin)}, "carol not listed")
    listed = {u["user"]: u for u in js(b, "user", "list", *admin)}
    assert listed[carol] == {"user": carol, "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}], "error": None}
    assert "admin" in listed and "alice" in listed
    assert rows(strom(b, "user", "list", carol, *admin).stdout) == [["USER", "MECHANISM", "ITERATIONS"], [carol, "SCRAM-SHA-512", "4096"]]
    eventually(lambda: logs_in(b, carol, "pw-1"), "carol cannot log in after create")

    r = strom(b, "user", "create", carol, "--new-password", "x", *admin, code=1)
    assert "already has a SCRAM-SHA-512 credential" in r.stderr and "strom user update" in r.stderr
    strom(b, "user", "update", carol, "--new-password", "pw-2", "--iterations", "8192", *admin)
    eventually(lambda: logs_in(b, carol, "pw-2"), "carol cannot log in with the new password")
    r = strom(b, "topic", "list", *as_user(b, carol, "pw-1"), code=1)
    assert "SASL_AUTHENTICATION_FAILED (58)" in r.stderr and "--password" in r.stderr, r.stderr
    assert js(b, "user", "list", carol, *admin)[0]["credentials"][0]["iterations"] == 8192
    r = strom(b, "user", "update", f"{carol}-nobody", "--new-password", "x", *admin, code=1)
    assert "RESOURCE_NOT_FOUND (91)" in r.stderr

    # Not a super user: no ALTER on the cluster. Kafka's error, named.
    r = strom(b, "user", "create", f"{carol}-2", "--new-password", "x", *as_user(b, "alice"), code=1)
    assert "CLUSTER_AUTHORIZATION_FAILED (31)" in r.stdout + r.stderr, (r.stdout, r.stderr)

    assert js(b, "user", "delete", carol, *admin) == [{"user": carol, "mechanism": "SCRAM-SHA-512", "error": None}]
    eventually(lambda: not logs_in(b, carol, "pw-2"), "carol still logs in after delete")
    gone = js(b, "user", "list", carol, *admin, code=1)
    assert gone[0]["error"]["name"] == "RESOURCE_NOT_FOUND" and gone[0]["credentials"] == []
    again = js(b, "user", "delete", carol, *admin, code=1)
    assert again[0]["error"]["name"] == "RESOURCE_NOT_FOUND"


def acl_rows(entries: list[dict], run: str) -> list[tuple]:
    return [(a["resource_type"], a["resource_name"], a["pattern_type"], a["principal"], a["operation"], a["permission"])
            for a in entries if run in a["resource_name"]]


def test_acl_create_list_delete(secured):
    b, admin, alice = secured, as_user(secured, "admin"), as_user(secured, "alice")
    run = uuid.uuid4().hex[:8]
    prefix, frozen, group = f"cliacl-{run}-", f"cliacl-{run}-frozen", f"cliacl-{run}-g"
    orders = prefix + "orders"
    for t in (orders, frozen):
        strom(b, "topic", "create", t, "-p", "1", "-r", "1", *admin)
        wait_offsets(b, t, 1)

    created = js(b, "acl", "create", "--allow-principal", "User:alice", "--operation", "read", "--operation", "write",
                 "--topic", prefix, "--resource-pattern-type", "prefixed", *admin)
    assert [(a["principal"], a["host"], a["resource_type"], a["resource_name"], a["pattern_type"], a["operation"],
             a["permission"], a["error"]) for a in created] == [
        ("User:alice", "*", "TOPIC", prefix, "PREFIXED", "READ", "ALLOW", None),
        ("User:alice", "*", "TOPIC", prefix, "PREFIXED", "WRITE", "ALLOW", None),
    ]
    out = strom(b, "acl", "create", "--deny-principal", "alice", "--operation", "write", "--topic", frozen, *admin).stdout
    assert rows(out) == [["PRINCIPAL", "HOST", "RESOURCE-TYPE", "RESOURCE-NAME", "PATTERN-TYPE", "OPERATION", "PERMISSION", "ERROR"],
                         ["User:alice", "*", "TOPIC", frozen, "LITERAL", "WRITE", "DENY", "OK"]]
    strom(b, "acl", "create", "--allow-principal", "alice", "--operation", "read", "--group", group, *admin)

    # MATCH: every ACL that applies to the topic (the prefixed ones and its literal one).
    want = [("TOPIC", prefix, "PREFIXED", "User:alice", "READ", "ALLOW"),
            ("TOPIC", prefix, "PREFIXED", "User:alice", "WRITE", "ALLOW"),
            ("TOPIC", frozen, "LITERAL", "User:alice", "WRITE", "DENY")]
    eventually(lambda: acl_rows(js(b, "acl", "list", "--topic", frozen, "--resource-pattern-type", "match", *admin), run) == want,
               "the ACLs are not listed")
    # Without flags: every ACL, the group's too; the table has no ERROR column.
    assert acl_rows(js(b, "acl", "list", *admin), run) == [("GROUP", group, "LITERAL", "User:alice", "READ", "ALLOW"), *want]
    table = rows(strom(b, "acl", "list", "--deny-principal", "User:alice", *admin).stdout)
    assert table[0][-1] == "PERMISSION" and ["User:alice", "*", "TOPIC", frozen, "LITERAL", "WRITE", "DENY"] in table

    # The ACLs decide: alice writes under the prefix, not to the denied topic; produce names
    # the refusal.
    strom(b, "produce", orders, "-o", "none", *alice, input="a\nb\n")
    assert js(b, "topic", "describe", orders)["partitions"][0]["high_watermark"] == 2
    r = strom(b, "produce", frozen, *alice, input="x\n", code=1)
    assert "TOPIC_AUTHORIZATION_FAILED" in r.stderr, r.stderr
    # alice may not manage ACLs: each refused ACL is named, exit 1; listing is refused whole.
    r = strom(b, "acl", "create", "--allow-principal", "alice", "--operation", "all", "--cluster", *alice, code=1)
    assert "CLUSTER_AUTHORIZATION_FAILED" in r.stdout and "1 of 1 failed" in r.stderr, (r.stdout, r.stderr)
    r = strom(b, "acl", "list", *alice, code=1)
    assert "CLUSTER_AUTHORIZATION_FAILED (31)" in r.stderr, r.stderr

    r = strom(b, "acl", "delete", *admin, code=2)
    assert "would delete every ACL" in r.stderr
    deleted = js(b, "acl", "delete", "--deny-principal", "alice", "--topic", frozen, *admin)
    assert acl_rows(deleted, run) == [("TOPIC", frozen, "LITERAL", "User:alice", "WRITE", "DENY")]
    assert deleted[0]["error"] is None
    # Without the DENY, the prefixed ALLOW lets alice write the topic.
    eventually(lambda: subprocess.run([str(brokers.STROM_BIN), "produce", frozen, "-o", "none", *alice],
                                      input="y\n", capture_output=True, text=True, timeout=CLI_TIMEOUT_S).returncode == 0,
               "alice still cannot write after the DENY was deleted")
    # ANY: the ACLs named so, of every pattern type (the prefixed topic ones, the group's).
    deleted = js(b, "acl", "delete", "--topic", prefix, "--group", group, "--resource-pattern-type", "any", *admin)
    assert len(acl_rows(deleted, run)) == 3 and all(a["error"] is None for a in deleted)
    eventually(lambda: acl_rows(js(b, "acl", "list", *admin), run) == [], "ACLs left after delete")


def test_tls_and_sasl_connection_flags(secured, tmp_path):
    b = secured
    over_tls = as_user(b, "admin", listener="SASL_SSL")
    info = js(b, "cluster", "info", *over_tls)
    assert [x["port"] for x in info["brokers"]] == [b.extra["ports"]["SASL_SSL"]]
    t = name("tls")
    strom(b, "topic", "create", t, "-p", "1", "-r", "1", *over_tls)
    wait_offsets(b, t, 1)
    # produce and consume (librdkafka on OpenSSL) over TLS with SCRAM, and SCRAM without TLS;
    # the records come back in order, with their keys.
    strom(b, "produce", t, "-o", "none", "-k", "k1", *over_tls, input="x\ny\n")
    assert strom(b, "consume", t, "-n", "2", "-f", "%k=%v\n", *over_tls).stdout.splitlines() == ["k1=x", "k1=y"]
    strom(b, "produce", t, "-o", "none", *as_user(b, "admin"), input="z\n")
    assert strom(b, "consume", t, "-o", "2", "-n", "1", *as_user(b, "admin")).stdout.splitlines() == ["z"]
    # A wrong password is SASL's refusal, named, not a hang until librdkafka's timeout.
    r = strom(b, "produce", t, *as_user(b, "admin", "wrong"), input="x\n", code=1)
    assert "SASL_AUTHENTICATION_FAILED" in r.stderr or "Authentication failed" in r.stderr, r.stderr
    # PLAIN, with the flags from the environment.
    env_user = ["--brokers", f"127.0.0.1:{b.extra['ports']['SASL_PLAINTEXT']}"]
    os.environ.update(STROM_SASL_MECHANISM="PLAIN", STROM_USER="admin", STROM_PASSWORD=SEC_USERS["admin"])
    try:
        strom(b, "produce", t, "-o", "none", *env_user, input="one\ntwo\n")
        assert strom(b, "consume", t, "-o", "3", "-n", "2", *env_user).stdout.splitlines() == ["one", "two"]
        assert t in {x["name"] for x in js(b, "topic", "list", *env_user)}
    finally:
        for k in ("STROM_SASL_MECHANISM", "STROM_USER", "STROM_PASSWORD"):
            os.environ.pop(k)

    # The ways that fail, each with its exit code: a certificate nobody vouches for (the
    # system roots), a wrong password, half the SASL flags, a CA file that is not one.
    r = strom(b, "cluster", "info", *over_tls[:-2], "--tls", code=3)
    assert "TLS handshake failed" in r.stderr and "certificate" in r.stderr.lower(), r.stderr
    r = strom(b, "cluster", "info", *as_user(b, "admin", "wrong"), code=1)
    assert "SASL_AUTHENTICATION_FAILED (58)" in r.stderr
    r = strom(b, "topic", "list", "--user", "admin", code=2)
    assert "--sasl-mechanism, --user and --password" in r.stderr
    bad = tmp_path / "not-a-ca.pem"
    bad.write_text("hello\n")
    r = strom(b, "topic", "list", "--tls-ca", str(bad), code=2)
    assert "no CERTIFICATE" in r.stderr


# ---------------------------------------------------------------- completions, man pages

def test_completion_and_man_pages(tmp_path):
    for shell, marker in [("bash", "_strom()"), ("zsh", "#compdef strom"), ("fish", "complete -c strom")]:
        out = subprocess.run([str(brokers.STROM_BIN), "completion", shell], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0 and marker in out.stdout, (shell, out.stderr)
        assert "trim-prefix" in out.stdout
    subprocess.run([str(brokers.STROM_BIN), "man", "--dir", str(tmp_path)], check=True, timeout=30)
    pages = {p.name for p in tmp_path.iterdir()}
    assert {"strom.1", "strom-topic.1", "strom-topic-create.1", "strom-group-seek.1", "strom-consume.1",
            "strom-schema-create.1", "strom-schema-compatibility-level-set.1"} <= pages
    assert ".TH strom-topic-create 1" in (tmp_path / "strom-topic-create.1").read_text()
