#!/usr/bin/env bash
# Apache Kafka (KRaft, each node a combined broker+controller) for differential testing,
# assembled from Maven Central's org.apache.kafka:kafka_2.13 (see pom.xml).
#
#   kafka.sh fetch                       copy the broker's jars into compat-tests/.cache
#                                        (idempotent: skipped when pom.xml is unchanged)
#   kafka.sh run PORT CONTROLLER_PORT DIR
#                                        a single node: write DIR/server.properties, format
#                                        DIR/data and exec the broker in the foreground (so
#                                        the caller's PID is the JVM's; stop it with SIGTERM)
#   kafka.sh node ID PORT CONTROLLER_PORT DIR VOTERS CLUSTER_ID
#                                        one node of a cluster (python/brokers.py
#                                        `start_cluster`), in the foreground likewise:
#                                        node.id ID, the static quorum VOTERS
#                                        (ID@127.0.0.1:CONTROLLER_PORT,..., every node a
#                                        voter), DIR formatted with CLUSTER_ID unless it
#                                        holds a formatted node already, so that the same
#                                        command restarts a killed node on its data. Kafka's
#                                        defaults otherwise (internal topics: 50 partitions,
#                                        3 replicas, transaction log min ISR 2), as Strom's
#
# KAFKA_VERSION overrides the version pinned in pom.xml; KAFKA_HEAP_OPTS the JVM heap;
# KAFKA_EXTRA_LISTENERS adds listeners, KAFKA_EXTRA_PROPERTIES settings (one per line),
# KAFKA_FORMAT_ARGS arguments of the storage format (one per line), KAFKA_JVM_EXTRA JVM
# options (one per line).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="$here/../.cache"
version="${KAFKA_VERSION:-$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")}"
jars="$cache/kafka-$version"
stamp="$jars/.fetched"

die() { echo "kafka.sh: $*" >&2; exit 1; }

fetch() {
    command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
    command -v java >/dev/null || die "java not found (Java 17 needed)"
    local want
    want="$(cat "$here/pom.xml" <(echo "$version") | sha256sum | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        return 0
    fi
    rm -rf "$jars" "$jars.tmp"
    mkdir -p "$cache"
    mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies \
        -Dkafka.version="$version" -DincludeScope=runtime -DoutputDirectory="$jars.tmp" \
        >"$cache/mvn-kafka.log" 2>&1 || { cat "$cache/mvn-kafka.log" >&2; die "mvn could not resolve kafka_2.13:$version"; }
    ls "$jars.tmp"/kafka_2.13-"$version".jar >/dev/null || die "kafka_2.13-$version.jar missing"
    mv "$jars.tmp" "$jars"
    echo "$want" >"$stamp"
}

classpath() {
    local cp="" j
    for j in "$jars"/*.jar; do cp="${cp:+$cp:}$j"; done
    echo "$cp"
}

# write_properties FILE NODE_ID PORT CONTROLLER_PORT DIR: the settings both shapes share.
write_properties() {
    local file="$1" id="$2" port="$3" cport="$4" dir="$5"
    # More listeners, NAME://HOST:PORT comma-separated, named after their protocol
    # (python/brokers.py: SSL, SASL_SSL, ...); their settings come in KAFKA_EXTRA_PROPERTIES.
    local extra="${KAFKA_EXTRA_LISTENERS:-}"
    cat >"$file" <<EOF
process.roles=broker,controller
node.id=$id
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport${extra:+,$extra}
advertised.listeners=PLAINTEXT://127.0.0.1:$port${extra:+,$extra}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
log.dirs=$dir/data
EOF
}

# append_extra_properties FILE: extra broker settings, one per line (benches/run.sh:
# log.flush.interval.messages=1; python/brokers.py's cluster: the broker session timeout).
append_extra_properties() {
    if [[ -n "${KAFKA_EXTRA_PROPERTIES:-}" ]]; then
        printf '%s\n' "$KAFKA_EXTRA_PROPERTIES" >>"$1"
    fi
}

# jvm_command DIR: sets the caller's array `jvm` (java, heap, logging, class path).
jvm_command() {
    local dir="$1" cp
    cp="$(classpath)"
    # KAFKA_JVM_EXTRA: more JVM options, one per line (python/test_oauthbearer.py: Kafka 4's
    # org.apache.kafka.sasl.oauthbearer.allowed.urls system property).
    local jvm_extra=()
    if [[ -n "${KAFKA_JVM_EXTRA:-}" ]]; then
        mapfile -t jvm_extra <<<"$KAFKA_JVM_EXTRA"
    fi
    jvm=(java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx1g} -XX:+UseG1GC -Djava.awt.headless=true
        -Dlog4j2.configurationFile="$here/log4j2.properties" -Dkafka.logs.dir="$dir/logs"
        "${jvm_extra[@]}" -cp "$cp")
}

# format_args: sets the caller's array `fmt_args`, KAFKA_FORMAT_ARGS one per line
# (python/brokers.py: --add-scram for SASL users).
format_args() {
    fmt_args=()
    if [[ -n "${KAFKA_FORMAT_ARGS:-}" ]]; then
        mapfile -t fmt_args <<<"$KAFKA_FORMAT_ARGS"
    fi
}

run() {
    [[ $# -eq 3 ]] || die "usage: kafka.sh run PORT CONTROLLER_PORT DIR"
    local port="$1" cport="$2" dir="$3"
    [[ -f "$stamp" ]] || fetch
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    # node.id 0 like Strom's default, so Metadata answers can be compared as they are.
    write_properties "$dir/server.properties" 0 "$port" "$cport" "$dir"
    cat >>"$dir/server.properties" <<EOF
controller.quorum.bootstrap.servers=127.0.0.1:$cport
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.check.interval.ms=1000
log.initial.task.delay.ms=0
log.cleaner.backoff.ms=1000
EOF
    append_extra_properties "$dir/server.properties"
    local cluster_id jvm fmt_args
    # 16 random bytes, URL-safe base64 without padding: the shape Kafka's cluster ids have.
    # Not starting with '-' (Kafka's Uuid.randomUuid() draws again too): StorageTool's
    # argument parser takes "-t -x..." for a missing value and the broker never starts
    # (1 start in 64 failed so: "argument --cluster-id/-t: expected one argument").
    cluster_id=-
    while [[ $cluster_id == -* ]]; do
        cluster_id="$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    done
    jvm_command "$dir"
    format_args
    "${jvm[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/server.properties" \
        --standalone "${fmt_args[@]}" || die "StorageTool format failed"
    exec "${jvm[@]}" kafka.Kafka "$dir/server.properties"
}

node() {
    [[ $# -eq 6 ]] || die "usage: kafka.sh node ID PORT CONTROLLER_PORT DIR VOTERS CLUSTER_ID"
    local id="$1" port="$2" cport="$3" dir="$4" voters="$5" cluster_id="$6"
    [[ $cluster_id != -* ]] || die "a cluster id starting with '-' is taken for an option by StorageTool"
    [[ -f "$stamp" ]] || fetch
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    write_properties "$dir/server.properties" "$id" "$port" "$cport" "$dir"
    # The static quorum (KIP-595; Strom's `controller.quorum.voters` too): every node knows
    # every voter from its config, so all format alike, without --standalone or
    # --initial-controllers, and the quorum forms once a majority runs.
    echo "controller.quorum.voters=$voters" >>"$dir/server.properties"
    append_extra_properties "$dir/server.properties"
    local jvm fmt_args
    jvm_command "$dir"
    format_args
    # Formatted already: this is a restart (after a kill -9), on the node's own data.
    if [[ ! -f "$dir/data/meta.properties" ]]; then
        "${jvm[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/server.properties" \
            "${fmt_args[@]}" || die "StorageTool format failed"
    fi
    exec "${jvm[@]}" kafka.Kafka "$dir/server.properties"
}

case "${1:-}" in
    fetch) fetch; echo "$jars" ;;
    run) shift; run "$@" ;;
    node) shift; node "$@" ;;
    *) die "usage: kafka.sh fetch | run PORT CONTROLLER_PORT DIR | node ID PORT CONTROLLER_PORT DIR VOTERS CLUSTER_ID" ;;
esac
