#!/usr/bin/env bash
# The storage crate's tests again, on the pwrite+fdatasync backend (STROM_IO_BACKEND=sync),
# from the test binaries `cargo test --workspace` built: `cargo test -p storage` would resolve
# the crate's features alone and rebuild tokio, ring and some 50 other crates first (113 s of
# CI's 2 cores for nothing).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${CARGO_JOBS:-2}"
# The executables of package `storage` in the workspace build (already built: nothing compiles).
mapfile -t bins < <(cargo test --workspace -j"$jobs" --no-run --message-format=json 2>/dev/null \
    | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and "/storage#" in m["package_id"] and m["target"]["kind"] != ["bin"]:
        print(m["executable"])
')
[[ ${#bins[@]} -gt 0 ]] || { echo "no storage test binaries found" >&2; exit 1; }
for bin in "${bins[@]}"; do
    echo "running $(basename "$bin") on the sync backend"
    (cd storage && STROM_IO_BACKEND=sync CARGO_MANIFEST_DIR="$PWD" "$bin" -q)
done
