#!/usr/bin/env bash
# Strom's one test command: installs what it needs on a fresh Debian machine (as root),
# then runs every check CI runs, in order, failing at the first broken phase:
#
#   setup     apt packages (kcat, maven, Java 17, python venv, clang, chromium + chromedriver),
#             the pinned Python clients (and selenium)
#             in compat-tests/.venv, the Apache Kafka jars (broker and tools) in compat-tests/.cache
#   fmt       cargo fmt --all -- --check
#   clippy    cargo clippy --all-targets -- -D warnings
#   test      cargo test --workspace
#   storage-sync  the storage crate's test binaries again on the pwrite+fdatasync backend
#             (`test` runs them on io_uring when the kernel allows; both backends must pass;
#             scripts/storage-sync-tests.sh)
#   build     cargo build --release -p strom (the binary every compat test runs)
#   weaviate  builds the Weaviate server (Go module, pinned version) into compat-tests/.cache
#             (scripts/build-weaviate.sh; skipped when the binary is there)
#   connectors  (run beside compat; the phase is the wait left after it)
#             the sink connectors end to end (connectors/tests/e2e*.rs): real
#             `strom serve` and `strom connect` into real PostgreSQL+pgvector, Chroma and
#             milvus-lite servers from the pinned wheels in compat-tests/.venv-vector
#             (compat-tests/requirements-vector.txt) and the real Weaviate server
#   compat    pytest compat-tests/python against `strom serve` and Apache Kafka
#   clients   the Java, Go (franz-go, Sarama), Node (kafkajs) and Rust (rdkafka) client
#             suites against both brokers (compat-tests/run-clients.sh); fetches their
#             pinned dependencies first (mvn go-offline, go mod download, npm ci)
#
# Environment:
#   STROM_SKIP_CARGO=1      skip fmt, clippy, test and build (compat only; for working on
#                           compat-tests/ with an existing target/release/strom)
#   STROM_SKIP_SETUP=1      skip the apt/pip/mvn installs (everything already there)
#   STROM_COMPAT_RECORDS=N  records per produce/consume test (default 10000)
#   STROM_COMPAT_BROKERS    brokers for the compat suite (default "strom,kafka")
#   STROM_COMPAT_SERIAL=1   one pytest process for both brokers (by default three concurrent
#                           ones: the Kafka-side tests and two shares of the rest)
#   STROM_COMPAT_CLIENTS_SERIAL=1  the client suites against one broker after the other (by
#                           default the Kafka side runs beside Strom's)
#   PYTEST_ARGS             extra arguments for pytest (e.g. "-k kafka-confluent -x")
#   STROM_COMPAT_KAFKA_TOOLS_ALL=1  also run Kafka's everyday tools against both brokers
#                           (compat-tests/python/test_kafka_tools_data.py, ~110 s)
#   CARGO_JOBS              parallel cargo jobs (default 2)
#   STROM_COMPAT_CLIENTS    languages for the clients phase (default "java,go,franz-go,node,rust";
#                           "none" skips the phase)
#   STROM_COMPAT_CLIENT_RECORDS  records per client produce/consume test (default 2000)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

jobs="${CARGO_JOBS:-2}"
venv="compat-tests/.venv"
reqs="compat-tests/requirements.txt"
vector_venv="compat-tests/.venv-vector"
vector_reqs="compat-tests/requirements-vector.txt"
moto_venv="compat-tests/.venv-moto"
moto_reqs="compat-tests/requirements-moto.txt"
summary=()
script_start=$SECONDS

log() { printf '\n==> %s\n' "$*"; }
die() { printf '\nFAILED: %s\n' "$*" >&2; print_summary >&2; exit 1; }
print_summary() {
    local line
    printf '\n==> phase timings\n'
    for line in "${summary[@]}"; do printf '    %s\n' "$line"; done
    printf '    %-12s %5ds\n' total $((SECONDS - script_start))
}

# phase NAME CMD...: runs CMD, records its wall time, stops the script on failure.
phase() {
    local name="$1"
    shift
    log "$name: $*"
    local start=$SECONDS rc=0
    "$@" || rc=$?
    local took=$((SECONDS - start))
    if [[ $rc -ne 0 ]]; then
        summary+=("$(printf '%-12s %5ds  FAILED (exit %d)' "$name" "$took" "$rc")")
        die "phase '$name' failed (exit $rc): $*"
    fi
    summary+=("$(printf '%-12s %5ds' "$name" "$took")")
}

# bg_start NAME LABEL CMD...: runs CMD in the background with its output in a temp file, and
# sets ${NAME}_pid and ${NAME}_log. bg_wait NAME waits for it, prints its output whole (and
# LABEL with its exit code and time) and returns its exit code.
bg_start() {
    local name="$1" label="$2" log start=$SECONDS
    shift 2
    log="$(mktemp -t "strom-$name.XXXXXX")"
    ("$@" >"$log" 2>&1; rc=$?; echo "($label: exit $rc after $((SECONDS - start))s)" >>"$log"; exit $rc) &
    printf -v "${name}_pid" '%s' "$!"
    printf -v "${name}_log" '%s' "$log"
}

bg_wait() {
    local name="$1" rc=0 pid log
    pid="${name}_pid"
    log="${name}_log"
    wait "${!pid}" || rc=$?
    cat "${!log}"
    rm -f "${!log}"
    printf -v "${name}_pid" '%s' ""
    return "$rc"
}

# ---------------------------------------------------------------- setup

apt_install_missing() {
    # Debian package per command; apt-get update runs once, only if something is missing.
    local -A want=([java]=openjdk-17-jre-headless [mvn]=maven [kcat]=kcat [python3]=python3
        [cmake]=cmake [g++]=g++ [node]=nodejs [npm]=npm
        [clang]=clang # clang: ebpf/build.rs compiles the steering program (else it falls back)
        # the console's browser test (compat-tests/python/test_console.py)
        [chromium]=chromium [chromedriver]=chromium-driver
        # the fault tests' namespaces, partitions and loss (compat-tests/python/netns.py)
        [ip]=iproute2 [tc]=iproute2 [nft]=nftables)
    local pkgs=() cmd
    for cmd in "${!want[@]}"; do
        command -v "$cmd" >/dev/null 2>&1 || pkgs+=("${want[$cmd]}")
    done
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || pkgs+=(python3-venv)
    # OpenSSL headers: the rdkafka crate's compat suite builds librdkafka with SSL and SCRAM
    # (compat-tests/rust/tests/rdkafka_security.rs).
    command -v pkg-config >/dev/null 2>&1 || pkgs+=(pkg-config)
    [[ -f /usr/include/openssl/ssl.h ]] || pkgs+=(libssl-dev)
    [[ ${#pkgs[@]} -eq 0 ]] && return 0
    if [[ $(id -u) -ne 0 ]]; then
        echo "missing packages (${pkgs[*]}) and not root: install them first" >&2
        return 1
    fi
    echo "installing: ${pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
}

# pinned_venv DIR REQS BIN...: a Python venv in DIR with REQS installed, rebuilt only when
# REQS changed (its hash is kept in the venv) or one of the venv's BINs is missing.
pinned_venv() {
    local dir="$1" reqs_file="$2" want have="" bin ok=1
    shift 2
    want="$(sha256sum "$reqs_file" | cut -d' ' -f1)"
    [[ -f "$dir/.requirements.sha256" ]] && have="$(cat "$dir/.requirements.sha256")"
    for bin in "$@"; do [[ -x "$dir/bin/$bin" ]] || ok=0; done
    if [[ "$want" == "$have" && $ok -eq 1 ]]; then
        echo "venv up to date ($dir)"
        return 0
    fi
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/pip" install -q --disable-pip-version-check -r "$reqs_file"
    echo "$want" >"$dir/.requirements.sha256"
}

python_venv() {
    pinned_venv "$venv" "$reqs" pytest
}

# The vector-database servers the connectors' end-to-end tests start, in their own venv.
vector_venv() {
    pinned_venv "$vector_venv" "$vector_reqs" chroma milvus-lite
    # PostgreSQL refuses to run as root: the tests run it as `postgres`.
    if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    fi
}

# The S3-protocol server of the tiered-storage tests (moto's server mode), in its own venv.
moto_venv() {
    pinned_venv "$moto_venv" "$moto_reqs" moto_server
}

setup() {
    apt_install_missing
    python_venv
    vector_venv
    moto_venv
    bash compat-tests/kafka/kafka.sh fetch
    bash compat-tests/tools/tools.sh fetch
    java -version 2>&1 | head -1
    command -v cargo >/dev/null || { echo "cargo not found: install Rust (rustup)" >&2; return 1; }
    if command -v rustup >/dev/null; then
        cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
        cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
    fi
}

# ---------------------------------------------------------------- compat

compat() {
    local rc=0 brokers="${STROM_COMPAT_BROKERS:-strom,kafka}"
    # As root the fault tests (test_faults.py, network namespaces) must run, not skip.
    [[ $(id -u) -eq 0 ]] && export STROM_FAULTS_REQUIRED="${STROM_FAULTS_REQUIRED:-1}"
    [[ "$brokers" != *strom* || -x target/release/strom ]] \
        || { echo "target/release/strom missing: the build phase must run first" >&2; return 1; }
    # The whole suite is bounded too, beyond each test's own timeout (pytest.ini): 45 minutes
    # means something hangs (it takes about 10 minutes on an idle 2-core machine, over 25
    # while other builds load it).
    # Against both brokers the suite runs as three pytest processes side by side
    # (STROM_COMPAT_PART, conftest.py): the Kafka-side tests and two shares of the rest. Most
    # of each test's time is spent waiting on a broker, a client's timer or a JVM, not on the
    # two cores, and the suite was the longest phase of CI. The first share's output shows
    # as it runs, the other parts' after it, whole.
    if [[ "$brokers" == *strom* && "$brokers" == *kafka* && "${STROM_COMPAT_SERIAL:-}" != 1 ]]; then
        # Strom's side is split in two shares of whole modules (conftest.py `_share`): alone
        # it took half again as long as the Kafka side (1571 s against 1068 s).
        local parts=(kafka strom:2/2) logs=() pids=() codes=() i
        for i in "${!parts[@]}"; do
            logs[i]="$(mktemp -t strom-compat-part.XXXXXX)"
            # shellcheck disable=SC2086
            (cd compat-tests/python && STROM_COMPAT_PART="${parts[i]}" timeout --kill-after=30 2700 \
                "../.venv/bin/pytest" ${PYTEST_ARGS:-} >"${logs[i]}" 2>&1) &
            pids[i]=$!
        done
        # shellcheck disable=SC2086
        (cd compat-tests/python && STROM_COMPAT_PART=strom:1/2 timeout --kill-after=30 2700 \
            "../.venv/bin/pytest" ${PYTEST_ARGS:-}) || rc=$?
        for i in "${!parts[@]}"; do
            codes[i]=0
            wait "${pids[i]}" || codes[i]=$?
            printf '\n==> compat, the %s part (run beside the part above)\n' "${parts[i]}"
            cat "${logs[i]}"
            rm -f "${logs[i]}"
        done
        # PYTEST_ARGS may select tests of some parts only (-k ...): the others collect none,
        # which fails only when no part collected anything.
        local all=("$rc" "${codes[@]}") ran=0 code
        for code in "${all[@]}"; do [[ $code -ne 5 ]] && ran=1; done
        compat_status "$( [[ $ran -eq 1 && $rc -eq 5 ]] && echo 0 || echo "$rc")" "strom:1/2 part" || return $?
        for i in "${!parts[@]}"; do
            code="${codes[i]}"
            [[ $ran -eq 1 && $code -eq 5 ]] && code=0
            compat_status "$code" "${parts[i]} part" || return $?
        done
        return 0
    fi
    # shellcheck disable=SC2086
    (cd compat-tests/python && timeout --kill-after=30 2700 "../.venv/bin/pytest" ${PYTEST_ARGS:-}) || rc=$?
    compat_status "$rc" "suite"
}

# compat_status RC WHAT: pytest's exit code, explained.
compat_status() {
    case $1 in
        0) return 0 ;;
        5) echo "pytest collected no tests ($2): that is a failure here" >&2; return 5 ;;
        124) echo "compat $2 exceeded its 45 minute bound" >&2; return 124 ;;
        *) echo "compat $2 failed (pytest exit $1)" >&2; return "$1" ;;
    esac
}

# ---------------------------------------------------------------- clients

# The client suites' pinned dependencies (network) and builds (CPU: Maven, Go test
# binaries, librdkafka for the rdkafka crate): clients_build runs in the background from the
# connector and compat tests on, whose tests and the compat suite's mostly wait on servers, so the
# clients phase finds them done. Its output is printed when the clients phase starts.
clients_deps() {
    command -v go >/dev/null || { echo "go not found: install Go >= 1.24 (go.dev/dl)" >&2; return 1; }
    [[ "${STROM_SKIP_SETUP:-}" == 1 ]] && return 0
    (cd compat-tests/go && timeout 600 go mod download)
    # npm ci only when package-lock.json changed since the last install.
    local want have=""
    want="$(sha256sum compat-tests/node/package-lock.json | cut -d' ' -f1)"
    [[ -f compat-tests/node/node_modules/.lock.sha256 ]] && have="$(cat compat-tests/node/node_modules/.lock.sha256)"
    if [[ "$want" != "$have" ]]; then
        (cd compat-tests/node && timeout 600 npm ci --no-audit --no-fund)
        echo "$want" >compat-tests/node/node_modules/.lock.sha256
    fi
    (cd compat-tests/java && timeout 900 mvn -q -B dependency:go-offline >/dev/null)
}

clients_build() {
    clients_deps && STROM_COMPAT_CLIENTS_BUILD_ONLY=1 timeout 2400 bash compat-tests/run-clients.sh
}

clients_build_start() {
    [[ "${STROM_COMPAT_CLIENTS:-}" == none ]] && return 0
    bg_start clients "background client builds" clients_build
}

clients() {
    local rc=0
    if [[ -n "${clients_pid:-}" ]]; then
        printf '==> the client builds, run in the background beside the connector and compat tests:\n'
        bg_wait clients || rc=$?
        # A failed background build is built again below, where its error shows in place.
        [[ $rc -eq 0 ]] || echo "(background client builds failed (exit $rc): building again)"
        [[ $rc -eq 0 ]] || clients_deps
    else
        clients_deps
    fi
    timeout --kill-after=30 2400 bash compat-tests/run-clients.sh
}

# ---------------------------------------------------------------- connectors

# Real strom serve + strom connect (release binary) into real pgvector, Chroma, milvus-lite and
# Weaviate servers. Bounded beyond the tests' own waits (about 6 minutes on a loaded 2-core
# machine). --workspace, not -p: the same feature set as the `test` phase, so nothing rebuilds.
connectors_tests() {
    env STROM_CONNECTOR_E2E=1 timeout --kill-after=30 2400 \
        cargo test -j"$jobs" --workspace --test e2e --test e2e_weaviate --test e2e_mapping \
        --test e2e_registry -- --test-threads=1
}

# The connector tests wait on their database servers as the compat suite waits on brokers,
# so they run beside it (they were 8 of CI's 55 minutes run alone); their output is printed
# after the compat phase, whole, and the `connectors` phase is the wait that is left.
connectors_start() {
    bg_start connectors "connector tests, beside the compat phase" connectors_tests
}

# ---------------------------------------------------------------- run

# A phase that fails stops the script; background work still running goes with it.
trap '[[ -n "${clients_pid:-}" ]] && kill "$clients_pid" 2>/dev/null; [[ -n "${connectors_pid:-}" ]] && kill "$connectors_pid" 2>/dev/null; true' EXIT

if [[ "${STROM_SKIP_SETUP:-}" != 1 ]]; then
    phase setup setup
fi
if [[ "${STROM_SKIP_CARGO:-}" != 1 ]]; then
    phase fmt cargo fmt --all -- --check
    phase clippy cargo clippy --all-targets -j"$jobs" -- -D warnings
    phase test cargo test --workspace -j"$jobs"
    phase storage-sync bash scripts/storage-sync-tests.sh
    phase build cargo build --release -j"$jobs" -p strom
fi
# The Weaviate build: ~8 minutes the first time on 2 cores (Go's module and build caches then
# make a fresh clone's rebuild mostly a link), nothing when the binary is cached.
[[ "${STROM_SKIP_CARGO:-}" == 1 ]] || phase weaviate bash scripts/build-weaviate.sh
# After the Weaviate build (CPU-bound as they are), beside the connector and compat tests
# (which wait).
clients_build_start
[[ "${STROM_SKIP_CARGO:-}" == 1 ]] || connectors_start
phase compat compat
[[ -z "${connectors_pid:-}" ]] || phase connectors bg_wait connectors
[[ "${STROM_COMPAT_CLIENTS:-}" == none ]] || phase clients clients
print_summary
echo "all phases passed"
