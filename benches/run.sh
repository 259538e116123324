#!/usr/bin/env bash
# Runs strom-bench against Strom, Apache Kafka (compat-tests/kafka/kafka.sh) with its default
# page-cache acks, Kafka with log.flush.interval.messages=1 (durable, as Redpanda's published
# comparisons run it) and, when a tansu binary is found, tansu — one after the other on
# 127.0.0.1, each alone on the machine — plus the machine's limits, and writes the results
# table into benches/README.md (between the RESULTS markers), the raw JSON and SVG charts
# (throughput.svg, latency.svg) into benches/results/.
#
#   benches/run.sh [quick|full]
#
#   quick (default)  2 s per workload, latency at 1k and 5k msg/s, embeddings at 2k msg/s
#   full             10 s per workload, latency at 1k, 10k, 50k msg/s, embeddings at 10k msg/s
#
# Environment: STROM_BIN (default target/release/strom, built if missing), STROM_SHARDS
# (default: cores), BENCH_BROKERS (default "strom kafka kafka-durable tansu"), TANSU_BIN
# (default: `tansu` on PATH; built once outside CI with
# `cargo install tansu --locked --features libsql,dynostore`), TANSU_STORAGE (default: a
# libSQL file in the run's temp dir).
# Every broker is started here and stopped by its PID; every step is bounded by `timeout`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
mode="${1:-quick}"
case "$mode" in
    quick) args=(--seconds 2 --rates 1000,5000 --embedding-rate 2000) ;;
    full) args=(--seconds 10 --rates 1000,10000,50000 --embedding-rate 10000) ;;
    *) echo "usage: run.sh [quick|full]" >&2; exit 2 ;;
esac
brokers="${BENCH_BROKERS:-strom kafka kafka-durable tansu}"
results="$here/results"
work="$(mktemp -d -t strom-bench-XXXXXX)"
mkdir -p "$results"
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_trap

stop() { # PID: SIGTERM, then SIGKILL after 30 s
    local pid="$1" i
    kill "$pid" 2>/dev/null || return 0
    for i in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

echo "==> building strom-bench"
(cd "$here/strom-bench" && cargo build --release -q)
bench="$root/target/compat-rust/release/strom-bench"
strom_bin="${STROM_BIN:-$root/target/release/strom}"

bench_one() { # NAME PORT PID
    echo "==> $1"
    timeout --kill-after=30 1800 "$bench" run --bootstrap "127.0.0.1:$2" --name "$1" --pid "$3" \
        "${args[@]}" --out "$results/$1.json"
}

files=("$results/limits.json")
for b in $brokers; do
    case "$b" in
    strom)
        if [[ ! -x "$strom_bin" ]]; then (cd "$root" && cargo build --release -q -p strom); fi
        port=$(free_port) mport=$(free_port)
        "$strom_bin" serve --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$mport" \
            --data-dir "$work/strom" ${STROM_SHARDS:+--shards "$STROM_SHARDS"} >"$work/strom.log" 2>&1 &
        pid=$!; pids+=("$pid")
        wait_port "$port" "$pid" 60
        bench_one strom "$port" "$pid"
        curl -sf "127.0.0.1:$mport/metrics" >"$results/strom-metrics.txt" 2>/dev/null || true
        stop "$pid"
        files+=("$results/strom.json")
        ;;
    kafka | kafka-durable)
        bash "$root/compat-tests/kafka/kafka.sh" fetch
        port=$(free_port) cport=$(free_port)
        # kafka-durable: fsync after every message batch appended, so acks=all means on disk.
        extra=""
        [[ "$b" == kafka-durable ]] && extra="log.flush.interval.messages=1"
        KAFKA_EXTRA_PROPERTIES="$extra" \
            bash "$root/compat-tests/kafka/kafka.sh" run "$port" "$cport" "$work/$b" >"$work/$b.log" 2>&1 &
        pid=$!; pids+=("$pid")
        wait_port "$port" "$pid" 180
        bench_one "$b" "$port" "$pid"
        stop "$pid"
        files+=("$results/$b.json")
        ;;
    tansu)
        tansu_bin="${TANSU_BIN:-$(command -v tansu || true)}"
        if [[ ! -x "$tansu_bin" ]]; then echo "==> no tansu binary (TANSU_BIN or PATH): skipped"; continue; fi
        port=$(free_port)
        mkdir -p "$work/tansu"
        # Single node, libSQL (SQLite) storage: tansu resolves sqlite://NAME against its working
        # directory, so it runs in the work dir (TANSU_STORAGE overrides, e.g. memory://tansu/).
        (cd "$work/tansu" && exec "$tansu_bin" broker \
            --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
            --storage-engine "${TANSU_STORAGE:-sqlite://tansu.db}") >"$work/tansu.log" 2>&1 &
        pid=$!; pids+=("$pid")
        wait_port "$port" "$pid" 60
        bench_one tansu "$port" "$pid"
        stop "$pid"
        files+=("$results/tansu.json")
        ;;
    *) echo "unknown broker $b" >&2; exit 2 ;;
    esac
done

echo "==> machine limits"
timeout 120 "$bench" limits --dir "$work" --out "$results/limits.json"

table="$("$bench" report "${files[@]}")"
"$bench" plot --dir "$results" "${files[@]}"
printf '%s\n' "$table" >"$work/table.md"
readme_block RESULTS "$work/table.md"
echo "==> results in benches/README.md and $results (JSON, throughput.svg, latency.svg)"
