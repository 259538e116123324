"""Apache Kafka's own command-line tools (`compat-tests/tools/tools.sh`: the kafka-tools jar
of the same version as the reference broker), run the way `bin/kafka-*.sh` runs them."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

TOOLS_SH = Path(__file__).resolve().parents[1] / "tools" / "tools.sh"
TOOL_TIMEOUT_S = 120

# The scripts in Kafka's bin/ and the classes they run.
CLASSES = {
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
}


@dataclass
class Run:
    rc: int
    out: str
    err: str

    def lines(self) -> list[str]:
        return [line for line in self.out.splitlines() if line.strip()]


def ok(r: Run) -> Run:
    """`r`, asserted to have exited 0 (its output in the message otherwise)."""
    assert r.rc == 0, f"rc {r.rc}\n--- out\n{r.out}\n--- err\n{r.err}"
    return r


def fetch() -> None:
    r = subprocess.run(["bash", str(TOOLS_SH), "fetch"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"tools.sh fetch failed:\n{r.stdout}\n{r.stderr}"


def run(tool: str, bootstrap: str | None, *args: str, stdin: str | None = None) -> Run:
    """One tool, one JVM (as bin/kafka-*.sh); `bootstrap` None for the tools that take the
    address in their own option (the perf tests' --producer-props)."""
    boot = ["--bootstrap-server", bootstrap] if bootstrap else []
    r = subprocess.run(
        ["bash", str(TOOLS_SH), "run", CLASSES[tool], *boot, *args],
        capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, input=stdin,
    )
    return Run(r.returncode, r.stdout, r.stderr)


def spawn(tool: str, bootstrap: str, *args: str) -> subprocess.Popen:
    """One tool in the background (a console consumer that runs until stopped); the
    caller terminates it and waits."""
    return subprocess.Popen(
        ["bash", str(TOOLS_SH), "run", CLASSES[tool], "--bootstrap-server", bootstrap, *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def table(r: Run) -> list[dict[str, str]]:
    """A tool's column output (a header line, then rows split on whitespace) as dicts."""
    head, *rows = r.lines()
    names = head.split()
    return [dict(zip(names, row.split())) for row in rows]


def features(bootstrap: str) -> dict[str, dict[str, str]]:
    """`kafka-features describe` as {feature: {SupportedMinVersion: .., ..., Epoch: ..}}."""
    r = run("kafka-features", bootstrap, "describe")
    assert r.rc == 0, f"describe failed ({r.rc}):\n{r.out}\n{r.err}"
    out = {}
    for line in r.lines():
        fields = dict(re.findall(r"(\w+): (\S*)", line))
        out[fields.pop("Feature")] = fields
    return out
