"""Where Strom and Apache Kafka answer differently: runs go/probe_test.go (build tag
`probe`) against a fresh `strom serve` and a fresh Kafka (python/brokers.py) and prints
the differences in DescribeConfigs (a new topic, broker 0; with synonyms and
documentation) and ApiVersions. A tool for FINDINGS.md, not part of the test run:

    python3 compat-tests/probe-diff.py
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "python"))

import run_clients  # noqa: E402


def observe(name: str, out: Path) -> dict:
    b = run_clients.start(name)
    try:
        env = dict(os.environ, STROM_COMPAT_BOOTSTRAP=b.bootstrap, PROBE_OUT=str(out))
        r = subprocess.run(["go", "test", "-tags", "probe", "-count=1", "-run", "^TestProbe$", "./..."],
                           cwd=HERE / "go", env=env, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            sys.exit(f"probe against {name} failed:\n{r.stdout}\n{r.stderr}")
    finally:
        b.stop()
        b.cleanup()
    return json.loads(out.read_text())


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        s = observe("strom", Path(d) / "strom.json")
        k = observe("kafka", Path(d) / "kafka.json")
    for section in ("TOPIC", "BROKER", "apis"):
        a, b = s.get(section, {}), k.get(section, {})
        print(f"== {section}: Strom {len(a)} entries, Kafka {len(b)}")
        print("   only Strom:", sorted(set(a) - set(b)))
        print("   only Kafka:", sorted(set(b) - set(a)))
        for key in sorted(set(a) & set(b)):
            if a[key] != b[key]:
                print(f"   {key}\n      Strom {a[key]}\n      Kafka {b[key]}")


if __name__ == "__main__":
    main()
