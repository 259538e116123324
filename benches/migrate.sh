#!/usr/bin/env bash
# Issue 10's benchmark: how fast `strom migrate mirror` copies a Kafka topic, next to how fast
# a plain client (kcat, librdkafka) consumes the same topic from the same broker.
#
#   benches/migrate.sh [MB]        (default 1024: a 1 GiB topic of 1 KiB records, 4 partitions)
#
# Its first run (2026-11-30) found the io_uring completion-queue overflow hang (the mirror's
# final flush waited forever; fixed in storage/src/io/uring.rs). Figures: benches/README.md.
#
# Starts Apache Kafka 4.4 (compat-tests/kafka/kafka.sh) on 127.0.0.1, fills the topic with
# kcat, then times (1) kcat consuming it to the end, (2) `strom migrate mirror
# --until-caught-up` from an empty data dir (the time to catch up the whole topic), and (3) a
# second `--until-caught-up` with nothing new (the cost of a final sync). Needs
# target/release/strom (built if missing), kcat, Java 17, and compat-tests/.venv (confluent-kafka). Kafka is stopped by its PID;
# everything is bounded by `timeout`. Figures: benches/README.md, "Migration".
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
mb="${1:-1024}"
# shellcheck source=benches/kafka-lib.sh
source "$here/kafka-lib.sh"
bench_setup strom-migrate-bench
rate() { python3 -c "import sys; b,t=float(sys.argv[1]),float(sys.argv[2]); print(f'{t:.1f} s, {b/1e6/t:.0f} MB/s')" "$1" "$2"; }
start_kafka

topic=mig-bench
records=$((mb * 1024))
echo "==> filling $topic: $records records of 1 KiB (${mb} MiB), 4 partitions"
# kcat cannot create topics (Kafka's auto-create would make one partition): confluent-kafka
# from the compat suite's venv (scripts/test-all.sh makes it) creates it.
py="$root/compat-tests/.venv/bin/python"
[[ -x "$py" ]] || py=python3
timeout 120 "$py" - "$bs" "$topic" <<'PY'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1]})
for f in a.create_topics([NewTopic(sys.argv[2], 4, 1)]).values():
    f.result(60)
PY
t0=$(now)
# Incompressible 1 KiB lines (base64 of random bytes), sent uncompressed: the topic's bytes on
# disk are the MB the figures speak of.
python3 -c '
import base64, os, sys
out = sys.stdout.buffer
for _ in range(int(sys.argv[1])):
    out.write(base64.b64encode(os.urandom(767))[:1023] + b"\n")
' "$records" | timeout 900 kcat -P -b "$bs" -t "$topic" -X linger.ms=20 -X batch.size=1048576 -z none
t1=$(now)
bytes=$(du -sb "$work"/kafka/data/"$topic"-* | awk '{s+=$1} END {print s}')
echo "    produced in $(rate "$bytes" "$(echo "$t1 - $t0" | bc)") (${bytes} bytes on disk)"

echo "==> plain consumer (kcat, librdkafka) to the end"
t0=$(now)
n=$(timeout 900 kcat -C -b "$bs" -t "$topic" -o beginning -e -q -f '.' | wc -c)
t1=$(now)
echo "    $n records in $(rate "$bytes" "$(echo "$t1 - $t0" | bc)")"

echo "==> strom migrate mirror --until-caught-up, from empty"
t0=$(now)
timeout 1800 "$strom" migrate mirror --source "$bs" --data-dir "$work/strom" --topics "$topic" \
    --until-caught-up >"$work/mirror.log" 2>&1
t1=$(now)
echo "    caught up in $(rate "$bytes" "$(echo "$t1 - $t0" | bc)")"

echo "==> final sync with nothing new"
t0=$(now)
timeout 600 "$strom" migrate mirror --source "$bs" --data-dir "$work/strom" --topics "$topic" \
    --until-caught-up >>"$work/mirror.log" 2>&1
t1=$(now)
echo "    $(echo "$t1 - $t0" | bc) s"
timeout 120 "$strom" migrate status --source "$bs" --data-dir "$work/strom" | tail -3 || true
