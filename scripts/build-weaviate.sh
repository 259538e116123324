#!/usr/bin/env bash
# Builds the Weaviate server the connectors' end-to-end tests start (connectors/tests/e2e_weaviate.rs)
# from its Go module through the Go module proxy, into compat-tests/.cache/weaviate-<version>/.
#
#   build-weaviate.sh          build unless the binary for this version is already there;
#                              prints the binary's path on the last line
#
# Cached like the Rust and C builds: the binary stays in compat-tests/.cache (skipped when
# present), and Go's own module and build caches (GOMODCACHE, GOCACHE: the user's, outside
# the checkout) make a rebuild in a fresh clone mostly a link. WEAVIATE_VERSION overrides the
# pinned version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="${WEAVIATE_VERSION:-v1.35.2}"
dir="$here/../compat-tests/.cache/weaviate-$version"
bin="$dir/weaviate-server"

if [[ -x "$bin" && -f "$dir/.built" ]]; then
    echo "weaviate-server $version cached"
    echo "$bin"
    exit 0
fi
command -v go >/dev/null || { echo "build-weaviate.sh: go not found (Go >= 1.24 needed)" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir"
start=$SECONDS
# -mod=mod: Weaviate's go.mod has replace directives that `go install pkg@version` refuses
# otherwise; -buildvcs=false: no VCS metadata outside a checkout.
GOBIN="$dir" GOFLAGS="-mod=mod -buildvcs=false" \
    timeout 2400 go install "github.com/weaviate/weaviate/cmd/weaviate-server@$version" \
    >"$dir/build.log" 2>&1 || { tail -50 "$dir/build.log" >&2; echo "build-weaviate.sh: go install failed" >&2; exit 1; }
[[ -x "$bin" ]] || { echo "build-weaviate.sh: $bin missing after go install" >&2; exit 1; }
date -u +%FT%TZ >"$dir/.built"
echo "weaviate-server $version built in $((SECONDS - start))s"
echo "$bin"
