#!/usr/bin/env bash
# `strom migrate import` with and without `--link`: the time to adopt a stopped Kafka
# broker's log dir, and the disk space the import adds.
#
#   benches/migrate-import.sh [MB]   (default 400: a topic of 1 KiB records, 4 partitions;
#                                     SEGMENT_MB, default 16, is its segment.bytes: only
#                                     closed segments are linked, and with Kafka's default
#                                     1 GiB a partition below 1 GiB has none)
#
# Starts Apache Kafka 4.4 (compat-tests/kafka/kafka.sh) on 127.0.0.1, fills the topic with
# kcat (incompressible, uncompressed), stops Kafka with SIGTERM (a clean shutdown), then runs
# the import into fresh data dirs alternately without and with `--link`, ROUNDS times each
# (default 2; the page cache holds Kafka's files after the first read, so both see the same
# cache state from the second round on). Reports each run's wall time and what the import
# added on disk (allocated blocks, `du` of Kafka's dir and the target together minus Kafka's
# alone: hard links are counted once; Strom's preallocated index files are sparse). Needs
# target/release/strom (built if missing), kcat, Java 17 and compat-tests/.venv
# (confluent-kafka). Kafka is stopped by its PID (benches/kafka-lib.sh). Figures:
# docs/migration.md, "Offline import".
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
mb="${1:-400}"
rounds="${ROUNDS:-2}"
# shellcheck source=benches/kafka-lib.sh
source "$here/kafka-lib.sh"
bench_setup strom-import-bench
start_kafka

topic=import-bench
py="$root/compat-tests/.venv/bin/python"
[[ -x "$py" ]] || py=python3
timeout 120 "$py" - "$bs" "$topic" "${SEGMENT_MB:-16}" <<'PY'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1]})
t = NewTopic(sys.argv[2], 4, 1, config={"segment.bytes": str(int(sys.argv[3]) << 20)})
for f in a.create_topics([t]).values():
    f.result(60)
PY
echo "==> filling $topic: $((mb * 1024)) records of 1 KiB, 4 partitions"
python3 -c '
import base64, os, sys
out = sys.stdout.buffer
for _ in range(int(sys.argv[1])):
    out.write(base64.b64encode(os.urandom(767))[:1023] + b"\n")
' "$((mb * 1024))" | timeout 900 kcat -P -b "$bs" -t "$topic" -X linger.ms=20 -X batch.size=1048576 -z none
stop_kafka
src="$work/kafka/data"
kafka_bytes=$(du -sB1 "$src" | cut -f1)
echo "    Kafka's log dir: $kafka_bytes bytes, $(ls "$src"/"$topic"-*/*.log | wc -l) segments"

for round in $(seq "$rounds"); do
    for mode in copy link; do
        target="$work/strom-$mode-$round"
        flag=()
        [[ "$mode" == link ]] && flag=(--link)
        t0=$(now)
        timeout 1800 "$strom" migrate import --from "$src" --data-dir "$target" "${flag[@]}" \
            >"$work/import-$mode-$round.log" 2>&1 || { cat "$work/import-$mode-$round.log" >&2; exit 1; }
        t1=$(now)
        added=$(( $(du -sB1 "$src" "$target" | awk '{s+=$1} END {print s}') - kafka_bytes ))
        linked=$(grep -o 'hard-linked: [0-9]* segments' "$work/import-$mode-$round.log" || echo "hard-linked: 0 segments")
        python3 -c "import sys; t=float(sys.argv[1]); b=int(sys.argv[2]); k=int(sys.argv[3]); print(f'    round {sys.argv[4]} {sys.argv[5]:4}: {t:5.1f} s, {k/1e6/t:5.0f} MB/s, adds {b/1e6:6.1f} MB on disk ({sys.argv[6]})')" \
            "$(echo "$t1 - $t0" | bc)" "$added" "$kafka_bytes" "$round" "$mode" "$linked"
        rm -rf "$target"
    done
done
