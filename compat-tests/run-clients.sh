#!/usr/bin/env bash
# The Java, Go, Node and Rust client suites against `strom serve` (target/release/strom)
# and against Apache Kafka (kafka/kafka.sh), one broker at a time: see run_clients.py.
#
#   bash compat-tests/run-clients.sh [java|go|node|rust ...]
#
# Needs: target/release/strom, Java 17 + Maven, Go, Node + npm, cargo (+ cmake, a C
# compiler) and `npm ci` done in compat-tests/node. scripts/test-all.sh installs these.
# Environment: STROM_COMPAT_BROKERS (default strom,kafka), STROM_COMPAT_CLIENTS,
# STROM_COMPAT_CLIENT_RECORDS (default 2000), STROM_COMPAT_CLIENT_TIMEOUT (default 900 s).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Only the standard library is needed; prefer the suite's venv when it exists.
py=python3
[[ -x "$here/.venv/bin/python" ]] && py="$here/.venv/bin/python"
exec "$py" -u "$here/run_clients.py" "$@"
