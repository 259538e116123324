#!/usr/bin/env bash
# Apache Kafka's command-line tools from Maven Central (org.apache.kafka:kafka-tools, see
# pom.xml), for running them against Strom and Kafka as a user would.
#
#   tools.sh fetch              copy the tools' jars into compat-tests/.cache/kafka-tools-VERSION
#                               (idempotent: skipped when pom.xml is unchanged)
#   tools.sh run CLASS ARGS...  run one tool's main class (e.g. org.apache.kafka.tools.
#                               FeatureCommand for kafka-features.sh) in the foreground
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="$here/../.cache"
version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")"
jars="$cache/kafka-tools-$version"
stamp="$jars/.fetched"

die() { echo "tools.sh: $*" >&2; exit 1; }

fetch() {
    command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
    local want
    want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        return 0
    fi
    rm -rf "$jars" "$jars.tmp"
    mkdir -p "$cache"
    mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$jars.tmp" >"$cache/mvn-kafka-tools.log" 2>&1 \
        || { cat "$cache/mvn-kafka-tools.log" >&2; die "mvn could not resolve kafka-tools:$version"; }
    ls "$jars.tmp"/kafka-tools-"$version".jar >/dev/null || die "kafka-tools-$version.jar missing"
    mv "$jars.tmp" "$jars"
    echo "$want" >"$stamp"
}

run() {
    [[ $# -ge 1 ]] || die "usage: tools.sh run CLASS ARGS..."
    [[ -f "$stamp" ]] || fetch
    local class="$1"
    shift
    # Kafka's bin/kafka-run-class.sh runs the tools with a small heap and logging at WARN.
    exec java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        -Dlog4j2.level=WARN -cp "$jars/*" "$class" "$@"
}

case "${1:-}" in
    fetch) fetch ;;
    run) shift; run "$@" ;;
    *) die "usage: tools.sh fetch | run CLASS ARGS..." ;;
esac
