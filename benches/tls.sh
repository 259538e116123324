#!/usr/bin/env bash
# TLS against plaintext (issue 18): each broker is started once with a PLAINTEXT and an SSL
# listener (certificates made per run by compat-tests/python/pki.py), and strom-bench runs the
# same workloads on each listener of that one process — produce, consume, end-to-end latency —
# reading the broker's CPU from /proc around each. Strom (rustls in the broker) and Apache
# Kafka 4.4 (the JDK's TLS) one after the other on 127.0.0.1. Writes benches/results/tls-*.json
# and the table (`strom-bench report --tls`: TLS / plaintext throughput, and the CPU seconds
# per GB that TLS adds to each broker) into benches/README.md between the TLS-RESULTS markers,
# with the negotiated cipher suite and what that cipher alone costs one core per GB here
# (`openssl speed`), the floor under any TLS implementation, kTLS included.
#
#   benches/tls.sh [quick|full]
#
#   quick (default)  2 s per workload, 1 KiB and 16 KiB, latency at 1k msg/s: a smoke test
#   full             10 s per workload, 100 B, 1 KiB and 16 KiB, latency at 1k and 10k msg/s
#
# Environment: STROM_BIN (default target/release/strom, built if missing), STROM_SHARDS
# (default: the cores available), BENCH_BROKERS (default "strom kafka"; "kafka-durable" is
# Kafka with log.flush.interval.messages=1), TLS_CLIENT_AUTH (the SSL listener's
# ssl.client.auth, default none; "required" makes every client present a certificate).
# Every broker is started here and stopped by its PID; every step is bounded by `timeout`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
mode="${1:-quick}"
case "$mode" in
    quick) args=(--seconds 2 --sizes 1024,16384 --rates 1000) ;;
    full) args=(--seconds 10 --sizes 100,1024,16384 --rates 1000,10000) ;;
    *) echo "usage: tls.sh [quick|full]" >&2; exit 2 ;;
esac
# Both acks, 1 and N partitions, the consume row; no embeddings (their cost is the same bytes).
args+=(--acks 1,all --embedding-rate 0)
brokers="${BENCH_BROKERS:-strom kafka}"
client_auth="${TLS_CLIENT_AUTH:-none}"
results="$here/results"
work="$(mktemp -d -t strom-tls-bench-XXXXXX)"
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
read -r load_start _ </proc/loadavg

echo "==> certificates"
pki="$work/pki"
PYTHONPATH="$root/compat-tests/python" timeout 120 python3 -c \
    'import sys, pathlib, pki; pki.make(pathlib.Path(sys.argv[1]))' "$pki"
# Kafka's names; Strom takes them as they are (`--set`), Kafka as server.properties lines.
ssl_settings=(
    "ssl.keystore.type=PEM" "ssl.keystore.location=$pki/broker.keystore.pem"
    "ssl.truststore.type=PEM" "ssl.truststore.location=$pki/ca.pem"
    "ssl.client.auth=$client_auth"
)
tls_client=(--client-config security.protocol=ssl --client-config "ssl.ca.location=$pki/ca.pem")
if [[ "$client_auth" != none ]]; then
    tls_client+=(--client-config "ssl.certificate.location=$pki/alice.pem"
        --client-config "ssl.key.location=$pki/alice.key")
fi

# The cipher suite a client gets from the broker's SSL listener at PORT (OpenSSL's client,
# as librdkafka's): "TLS_AES_256_GCM_SHA384" or the like.
negotiated() {
    local cert=()
    [[ "$client_auth" != none ]] && cert=(-cert "$pki/alice.pem" -key "$pki/alice.key")
    timeout 20 openssl s_client -connect "127.0.0.1:$1" -CAfile "$pki/ca.pem" "${cert[@]}" \
        -brief </dev/null 2>&1 | sed -n 's/^Ciphersuite: *//p' | head -1
}

# The plaintext run `NAME` and the TLS run `NAME+tls` against one broker process.
bench_pair() { # NAME PLAIN_PORT SSL_PORT PID
    echo "==> $1 over PLAINTEXT"
    timeout --kill-after=30 1800 "$bench" run --bootstrap "127.0.0.1:$2" --name "$1" --pid "$4" \
        "${args[@]}" --out "$results/tls-$1.json"
    echo "==> $1 over SSL"
    timeout --kill-after=30 1800 "$bench" run --bootstrap "127.0.0.1:$3" --name "$1+tls" --pid "$4" \
        "${args[@]}" "${tls_client[@]}" --out "$results/tls-$1+tls.json"
    files+=("$results/tls-$1.json" "$results/tls-$1+tls.json")
}

files=()
ciphers=()
for b in $brokers; do
    port=$(free_port) sport=$(free_port)
    case "$b" in
    strom)
        if [[ ! -x "$strom_bin" ]]; then (cd "$root" && cargo build --release -q -p strom); fi
        sets=()
        for s in "${ssl_settings[@]}"; do sets+=(--set "$s"); done
        "$strom_bin" serve --set "listeners=PLAINTEXT://127.0.0.1:$port,SSL://127.0.0.1:$sport" \
            "${sets[@]}" --metrics-listen "127.0.0.1:$(free_port)" --data-dir "$work/strom" \
            --set schema_registry_enable=false ${STROM_SHARDS:+--shards "$STROM_SHARDS"} \
            >"$work/strom.log" 2>&1 &
        pid=$!; pids+=("$pid")
        wait_port "$port" "$pid" 60 && wait_port "$sport" "$pid" 60 || { tail -20 "$work/strom.log" >&2; exit 1; }
        ;;
    kafka | kafka-durable)
        bash "$root/compat-tests/kafka/kafka.sh" fetch >/dev/null
        extra="$(printf '%s\n' "${ssl_settings[@]}")"
        # kafka-durable: fsync after every batch appended, so acks=all means on disk.
        [[ "$b" == kafka-durable ]] && extra+=$'\nlog.flush.interval.messages=1'
        KAFKA_EXTRA_LISTENERS="SSL://127.0.0.1:$sport" KAFKA_EXTRA_PROPERTIES="$extra" \
            bash "$root/compat-tests/kafka/kafka.sh" run "$port" "$(free_port)" "$work/$b" >"$work/$b.log" 2>&1 &
        pid=$!; pids+=("$pid")
        wait_port "$port" "$pid" 180 && wait_port "$sport" "$pid" 180 || { tail -20 "$work/$b.log" >&2; exit 1; }
        ;;
    *) echo "unknown broker $b" >&2; exit 2 ;;
    esac
    ciphers+=("$b: $(negotiated "$sport")")
    bench_pair "$b" "$port" "$sport" "$pid"
    stop "$pid"
    pids=()
done

# What the cipher alone costs: one core encrypting 16 KiB records (TLS's largest) with
# OpenSSL's AES-GCM, the AES-NI/CLMUL code path rustls's ring and the JDK's intrinsics use
# too. A broker decrypts every produced byte once and encrypts every fetched byte once.
cipher_floor() { # OPENSSL_NAME
    local kbps
    kbps="$(timeout 60 openssl speed -evp "$1" -bytes 16384 -seconds 2 2>/dev/null | tail -1 | awk '{print $NF}' | tr -d k)"
    [[ -n "$kbps" ]] && awk -v k="$kbps" -v c="$1" \
        'BEGIN { printf "%s: %.0f MB/s on one core, %.2f CPU s/GB", c, k / 1000, 1e6 / k }'
}
floors=()
for c in $(printf '%s\n' "${ciphers[@]}" | sed -n 's/.*TLS_\(AES_[0-9]*_GCM\).*/\1/p;s/.*TLS_\(CHACHA20_POLY1305\).*/\1/p' | sort -u); do
    case "$c" in
    AES_128_GCM) floors+=("$(cipher_floor aes-128-gcm)") ;;
    AES_256_GCM) floors+=("$(cipher_floor aes-256-gcm)") ;;
    CHACHA20_POLY1305) floors+=("$(cipher_floor chacha20-poly1305)") ;;
    esac
done

read -r load_end _ </proc/loadavg
{
    echo "Mode \`$mode\` (${args[1]} s per workload), Strom with ${STROM_SHARDS:-$(nproc)} shards,"
    echo "ssl.client.auth=$client_auth; load average (1 min) $load_start at the start, $load_end at the end.$([[ $mode == quick ]] && echo " A quick run checks the setup: its figures are no result.")"
    echo "Negotiated: $(IFS=';'; echo "${ciphers[*]}" | sed 's/;/; /g'). Cipher alone (\`openssl speed\`, 16 KiB): $(IFS=';'; echo "${floors[*]:-not measured}" | sed 's/;/; /g')."
    echo
    "$bench" report --tls "${files[@]}"
} >"$work/table.md"
cp "$work/table.md" "$results/tls.md"
readme_block TLS-RESULTS "$work/table.md"
cat "$work/table.md"
echo "==> results in benches/README.md (TLS section), $results/tls.md and $results/tls-*.json"
