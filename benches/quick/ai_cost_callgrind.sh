#!/usr/bin/env bash
# Instructions per record of each AI feature's produce-path work (broker/benches/ai_cost.rs),
# counted by callgrind: repeatable on a loaded machine, where ai_cost.py's MB/s are not.
#
#   benches/quick/ai_cost_callgrind.sh [BATCHES [RECORDS_PER_BATCH]]   (default 20 × 100)
#
# Builds the driver (release profile, `cargo bench --no-run`), then runs each mode under
# valgrind --tool=callgrind counting only the driver's measured function. Prints
# instructions per record for each mode and the difference to the plain mode of the same
# values.
set -euo pipefail
cd "$(dirname "$0")/../.."
batches=${1:-20}
per_batch=${2:-100}
bin=$(cargo bench -p strom --bench ai_cost --no-run -j2 --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "ai_cost" and m.get("executable"):
        print(m["executable"])')
records=$((batches * per_batch))
declare -A ir
for mode in plain dedup ttl priority embed_f32 plain_json embed_json redact; do
  out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null \
      --toggle-collect='*ai_cost::measured*' "$bin" "$mode" "$batches" "$per_batch" 2>&1)
  total=$(grep -o 'Collected : [0-9]*' <<<"$out" | grep -o '[0-9]*$')
  ir[$mode]=$((total / records))
done
printf '%-11s %14s %14s\n' mode 'instr/record' 'vs plain'
for mode in plain dedup ttl priority embed_f32 plain_json embed_json redact; do
  case $mode in plain|dedup|ttl|priority|embed_f32) base=${ir[plain]} ;; *) base=${ir[plain_json]} ;; esac
  printf '%-11s %14d %+14d\n' "$mode" "${ir[$mode]}" "$((ir[$mode] - base))"
done
