"""docs/examples/*.py, the runnable examples of docs/ai-features.md, run as a reader would
run them (`python docs/examples/X.py BOOTSTRAP ADMIN_URL`) against one Strom broker that
exports spans to a real OTLP receiver; each test checks what the script printed, and for
the trace example that the spans it announces reached the receiver. A doc example that no
longer runs, or no longer shows what the docs say, fails here.

Strom only: the examples show Strom's issue 20 and 21 features, which Apache Kafka does not
have.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import brokers
from conftest import BROKERS, _ready_check
from otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.skipif("strom" not in BROKERS, reason="Strom-only features (issues 20, 21)")

EXAMPLES = brokers.REPO_ROOT / "docs" / "examples"


@pytest.fixture(scope="module")
def strom():
    rx = OtlpReceiver()
    try:
        b = brokers.start_strom(extra_args=["--set", f"otel_exporter_otlp_endpoint={rx.endpoint}"])
        try:
            _ready_check(b)
            yield b, rx
        finally:
            b.cleanup()
    finally:
        rx.close()


def run_example(name: str, b) -> str:
    """The script's stdout; fails with its stderr if it exits non-zero."""
    admin = f"http://127.0.0.1:{b.extra['metrics_port']}"
    r = subprocess.run([sys.executable, str(EXAMPLES / name), b.bootstrap, admin],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{name} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_given_redact_example_when_run_then_it_prints_the_record_stored_masked(strom):
    b, _ = strom
    out = run_example("redact.py", b)
    stored = re.search(r"^stored:   (.*)$", out, re.M).group(1)
    assert stored == "I am <REDACTED_EMAIL>, call *******5678, card ***************1111", out
    assert re.search(r"^header x-prompt: (.*)$", out, re.M).group(1) == stored, out


def test_given_trace_example_when_run_then_its_trace_gets_send_and_receive_spans(strom):
    b, rx = strom
    out = run_example("trace.py", b)
    m = re.search(r"^produced to (\S+) offset (\d+) in trace ([0-9a-f]{32}) under span ([0-9a-f]{16})$", out, re.M)
    assert m, out
    topic, offset, trace_id, parent = m.group(1), int(m.group(2)), m.group(3), m.group(4)
    spans = rx.wait_for(lambda s: {x.name for x in s if x.trace_id == trace_id} >= {f"send {topic}", f"receive {topic}"})
    for s in (s for s in spans if s.trace_id == trace_id):
        assert s.parent_span_id == parent, s
        assert s.attributes["messaging.kafka.offset"] == offset, s


def test_given_sse_example_when_run_then_it_prints_one_conversations_tokens(strom):
    b, _ = strom
    out = run_example("sse.py", b)
    assert out.splitlines()[-1] == "conv-1 says 'Hello, world' (event ids [0, 1, 2, 4, 5])", out


def test_given_key_reads_example_when_run_then_it_prints_the_sessions_last_turns(strom):
    b, _ = strom
    out = run_example("key_reads.py", b)
    assert out.splitlines()[-1] == "last 3 of s2: ['s2 turn 7', 's2 turn 8', 's2 turn 9']", out


def test_given_dedup_example_when_run_then_the_resent_job_gets_its_first_offset_and_is_stored_once(strom):
    b, _ = strom
    out = run_example("dedup.py", b)
    assert re.findall(r"^sent (job-\d): acknowledged at offset (\d+)$", out, re.M) == \
        [("job-1", "0"), ("job-2", "1"), ("job-1", "0")], out
    assert out.splitlines()[-1] == "stored: ['resize img-1', 'resize img-2']", out


def test_given_expiry_example_when_run_then_the_expired_prompt_is_an_offset_gap(strom):
    b, _ = strom
    out = run_example("expiry.py", b)
    assert re.findall(r"^offset \d+: .*$", out, re.M) == \
        ["offset 1: summarize doc-2", "offset 2: summarize doc-3"], out


def test_given_embedding_example_when_run_then_only_the_unit_vector_is_appended(strom):
    b, _ = strom
    out = run_example("embedding.py", b)
    lines = dict(line.split(": ", 1) for line in out.splitlines()[1:])
    assert lines["unit"] == "appended at offset 0", out
    for name in ("nan", "3-dim", "long"):
        assert lines[name] == "refused, INVALID_RECORD", out


def test_given_priority_example_when_run_then_requests_are_counted_per_lane_and_critical_never_throttled(strom):
    b, _ = strom
    out = run_example("priority.py", b)
    crit = re.search(r"^lane critical: (\d+) produce requests, (\d+) throttled$", out, re.M)
    low = re.search(r"^lane low: (\d+) produce requests, (\d+) throttled$", out, re.M)
    assert crit and low, out
    assert int(crit.group(1)) >= 5 and int(crit.group(2)) == 0, out
    assert int(low.group(1)) >= 5, out
