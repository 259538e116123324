# Sourced by the migration benches (migrate.sh, migrate-import.sh): a single-node Apache
# Kafka 4.4 on 127.0.0.1 in a temp work dir, stopped by its PID when the bench exits, and
# the release strom binary. The caller sets `root` (the repository) before sourcing.
#
#   bench_setup PREFIX   work dir in $work, EXIT trap (stops Kafka, removes $work), $strom
#   start_kafka          Kafka in $work/kafka (log $work/kafka.log): $kafka_pid, $bs
#   stop_kafka           SIGTERM (a clean shutdown, producer snapshots written), then wait

# free_port (and the rest of lib.sh, which these benches do not use otherwise).
# shellcheck source=benches/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
now() { date +%s.%N; }

kafka_pid=""
bench_cleanup() {
    if [[ -n "$kafka_pid" ]]; then
        kill "$kafka_pid" 2>/dev/null || true
        wait "$kafka_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}

bench_setup() {
    work="$(mktemp -d -t "$1-XXXXXX")"
    trap bench_cleanup EXIT
    strom="${STROM_BIN:-$root/target/release/strom}"
    [[ -x "$strom" ]] || (cd "$root" && cargo build --release -q -p strom)
}

start_kafka() {
    bash "$root/compat-tests/kafka/kafka.sh" fetch >/dev/null
    local port cport
    port=$(free_port) cport=$(free_port)
    bash "$root/compat-tests/kafka/kafka.sh" run "$port" "$cport" "$work/kafka" >"$work/kafka.log" 2>&1 &
    kafka_pid=$!
    bs="127.0.0.1:$port"
    for _ in $(seq 180); do
        kcat -b "$bs" -L -m 2 >/dev/null 2>&1 && return 0
        kill -0 "$kafka_pid" || { echo "kafka exited; see $work/kafka.log" >&2; exit 1; }
        sleep 1
    done
    echo "kafka did not answer in 180 s; see $work/kafka.log" >&2
    exit 1
}

stop_kafka() {
    kill -TERM "$kafka_pid"
    wait "$kafka_pid" || true
    kafka_pid=""
}
