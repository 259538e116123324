#!/usr/bin/env bash
# The 3-node benchmark of issue 16: a 3-node Strom cluster against a 3-node Apache Kafka 4.4
# (compat-tests/kafka/kafka.sh `node`, a static KRaft quorum, every node broker + voter) with
# its default page-cache acks, and against the same with log.flush.interval.messages=1
# (durable) — one cluster after the other on 127.0.0.1, each alone on the machine — with
# replication factor 3, min.insync.replicas 2 and acks=all (idempotent): produce throughput
# at 1 KiB and 16 KiB on 1 partition and on N, consume, end-to-end latency at fixed rates;
# then the failover time under kill -9 of a partition leader (benches/quick/failover.py) on
# Strom and on Kafka; the machine's limits. Writes benches/results/cluster-*.json and the
# table (with Strom/Kafka ratios) into benches/README.md between the CLUSTER-RESULTS markers.
#
#   benches/cluster.sh [quick|full]
#
#   quick (default)  3 s per workload, 3 failover cycles: a smoke test of the setup
#   full             10 s per workload, 10 failover cycles
#
# Environment: STROM_BIN (default target/release/strom, built if missing), STROM_SHARDS
# (shards of each Strom node, default: the cores available), BENCH_BROKERS (default
# "strom kafka kafka-durable"; the first is the one the ratio columns divide), BENCH_FAILOVER
# (default "strom kafka"; empty: no failover runs), FAILOVER_CYCLES, BENCH_ONLY (only the
# workloads whose name contains it, strom-bench's --only: e.g. "e2e" to look at one alone), BENCH_PARTITIONS (of the
# N-partition cases, default 6: two leaders per node), KAFKA_CLUSTER_HEAP (each Kafka node's
# JVM heap, default -Xms256m -Xmx512m).
# Every node is started here and stopped by its PID; every step is bounded by `timeout`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
mode="${1:-quick}"
case "$mode" in
    quick) args=(--seconds 3 --rates 1000,10000) cycles="${FAILOVER_CYCLES:-3}" ;;
    full) args=(--seconds 10 --rates 1000,10000) cycles="${FAILOVER_CYCLES:-10}" ;;
    *) echo "usage: cluster.sh [quick|full]" >&2; exit 2 ;;
esac
brokers="${BENCH_BROKERS:-strom kafka kafka-durable}"
failover="${BENCH_FAILOVER-strom kafka}"
# One shard per core on every node, each pinned to its core: every core carries one shard of
# every node. (A node with fewer shards than cores is not pinned at all, so three 1-shard
# nodes would share the cores as the kernel schedules them.)
shards="${STROM_SHARDS:-$(nproc)}"
partitions="${BENCH_PARTITIONS:-6}"
kafka_heap="${KAFKA_CLUSTER_HEAP:--Xms256m -Xmx512m}"
# The issue's workloads: replicated, acks=all only (acks=1 does not wait for the followers),
# no embeddings (a single-node concern), latency records of 100 B at 1k and 10k msg/s.
common=(--replication-factor 3 --sizes 1024,16384 --acks all --partitions "$partitions"
    --producers 2 --embedding-rate 0)
results="$here/results"
work="$(mktemp -d -t strom-cluster-bench-XXXXXX)"
mkdir -p "$results"
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_trap

# SIGTERM to every node first (one by one, the last Kafka nodes would wait in their
# controlled shutdown for a quorum already gone), then each waited for, SIGKILL after 60 s.
stop_nodes() {
    local pid i
    for pid in "${nodes[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${nodes[@]}"; do
        for i in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    # Only this cluster's nodes were in `pids`: none is left for the EXIT trap to signal (a
    # PID the kernel has handed out again since would not be ours).
    pids=()
}

echo "==> building strom-bench"
(cd "$here/strom-bench" && cargo build --release -q)
bench="$root/target/compat-rust/release/strom-bench"
strom_bin="${STROM_BIN:-$root/target/release/strom}"
read -r load_start _ </proc/loadavg

# Starts 3 nodes of broker $1 ("strom", "kafka" or "kafka-durable") in $work/$1: sets
# `nodes` (their PIDs, node id i at index i-1), `bootstrap` and `metrics` (Strom's ports).
start_cluster() {
    local b="$1" i port qport mport voters="" cluster_id
    local -a ports=() qports=()
    nodes=() bootstrap="" metrics=()
    for i in 1 2 3; do
        ports+=("$(free_port)") qports+=("$(free_port)")
        voters+="${voters:+,}$i@127.0.0.1:${qports[i - 1]}"
        bootstrap+="${bootstrap:+,}127.0.0.1:${ports[i - 1]}"
    done
    mkdir -p "$work/$b"
    if [[ "$b" == strom ]]; then
        if [[ ! -x "$strom_bin" ]]; then (cd "$root" && cargo build --release -q -p strom); fi
        for i in 1 2 3; do
            mport=$(free_port) metrics+=("$mport")
            "$strom_bin" serve --node-id "$i" --listen "127.0.0.1:${ports[i - 1]}" \
                --metrics-listen "127.0.0.1:$mport" --data-dir "$work/$b/node-$i" \
                --shards "$shards" --set "controller.quorum.voters=$voters" \
                --set schema_registry_enable=false >"$work/$b/node-$i.log" 2>&1 &
            nodes+=("$!") pids+=("$!")
        done
    else
        bash "$root/compat-tests/kafka/kafka.sh" fetch >/dev/null
        # kafka-durable: each node fsyncs every batch it appends, as leader or follower, so
        # acks=all means on the disk of every in-sync replica, as it does for Strom.
        local extra=""
        [[ "$b" == kafka-durable ]] && extra="log.flush.interval.messages=1"
        # 16 random bytes, URL-safe base64, not starting with '-' (kafka.sh `run` says why).
        cluster_id=-
        while [[ $cluster_id == -* ]]; do
            cluster_id="$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
        done
        for i in 1 2 3; do
            KAFKA_HEAP_OPTS="$kafka_heap" KAFKA_EXTRA_PROPERTIES="$extra" \
                bash "$root/compat-tests/kafka/kafka.sh" node "$i" "${ports[i - 1]}" "${qports[i - 1]}" \
                "$work/$b/node-$i" "$voters" "$cluster_id" >"$work/$b/node-$i.log" 2>&1 &
            nodes+=("$!") pids+=("$!")
        done
    fi
    for i in 1 2 3; do
        wait_port "${ports[i - 1]}" "${nodes[i - 1]}" 240 || { tail -20 "$work/$b/node-$i.log" >&2; return 1; }
    done
    # A node listens (and may serve Metadata) before every node registered; a CreateTopics
    # with 3 replicas needs all three.
    timeout 300 "$bench" wait --bootstrap "$bootstrap" --brokers 3 --timeout 240
}

files=("$results/cluster-limits.json")
for b in $brokers; do
    case "$b" in strom | kafka | kafka-durable) ;; *) echo "unknown broker $b" >&2; exit 2 ;; esac
    echo "==> $b: 3 nodes"
    start_cluster "$b"
    timeout --kill-after=30 1800 "$bench" run --bootstrap "$bootstrap" --name "$b" \
        --pid "$(IFS=,; echo "${nodes[*]}")" "${common[@]}" "${args[@]}" \
        ${BENCH_ONLY:+--only "$BENCH_ONLY"} --out "$results/cluster-$b.json"
    if [[ "$b" == strom ]]; then
        for i in 1 2 3; do
            echo "# node $i"
            curl -sf "127.0.0.1:${metrics[i - 1]}/metrics" || true
        done >"$results/cluster-strom-metrics.txt"
    fi
    stop_nodes
    files+=("$results/cluster-$b.json")
done

if [[ -n "$failover" ]]; then
    echo "==> failover: $cycles kill -9 cycles each on ${failover// /, }"
    # Absolute: brokers.py starts the nodes in their temp dirs.
    STROM_BIN="$(cd "$(dirname "$strom_bin")" && pwd)/$(basename "$strom_bin")" \
        timeout --kill-after=30 $((600 + 300 * cycles)) "$root/compat-tests/.venv/bin/python" \
        "$here/quick/failover.py" --brokers "${failover// /,}" --cycles "$cycles" \
        --strom-shards "$shards" --out "$results/cluster-failover.json"
    files+=("$results/cluster-failover.json")
fi

echo "==> machine limits"
timeout 120 "$bench" limits --dir "$work" --out "$results/cluster-limits.json"

read -r load_end _ </proc/loadavg
{
    echo "Mode \`$mode\` (${args[1]} s per workload, $cycles failover cycles), $partitions partitions in"
    echo "the N cases, Strom nodes with $shards shards each; load average (1 min) $load_start at the"
    echo "start, $load_end at the end.$([[ $mode == quick ]] && echo " A quick run checks the setup: its figures are no result.")"
    echo
    "$bench" report --ratios "${files[@]}"
} >"$work/table.md"
readme_block CLUSTER-RESULTS "$work/table.md"
cat "$work/table.md"
echo "==> results in benches/README.md (3-node section) and $results/cluster-*.json"
