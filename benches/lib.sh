# Sourced by the benches that start brokers themselves (run.sh, cluster.sh, kafka-lib.sh's
# users): a temp work dir, the brokers' PIDs to stop on exit, free ports on 127.0.0.1 and a
# bounded wait for a port. The caller sets `work` (mktemp) before `bench_trap`.
#
#   pids+=("$pid")    stopped (SIGTERM, then reaped) when the bench exits, in bench_trap
#   bench_trap        the EXIT trap: stops every pid in `pids`, removes $work
#   free_port         a port the kernel just handed out on 127.0.0.1
#   wait_port PORT PID SECONDS   until PORT listens; fails when PID exits or time runs out
#   readme_block NAME FILE       FILE's text into benches/README.md, between the markers
#                                <!-- NAME:START --> and <!-- NAME:END -->

pids=()

bench_stop_all() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}

bench_trap() { trap bench_stop_all EXIT; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_port() { # PORT PID SECONDS
    local deadline=$((SECONDS + $3))
    while ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
        kill -0 "$2" 2>/dev/null || { echo "process $2 exited before listening on $1" >&2; return 1; }
        ((SECONDS < deadline)) || { echo "nothing listened on $1 within $3 s" >&2; return 1; }
        sleep 0.5
    done
}

readme_block() { # NAME FILE
    python3 - "$(dirname "${BASH_SOURCE[0]}")/README.md" "$1" "$2" <<'PY'
import sys
readme, name, table = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
text = open(readme).read()
start, end = f"<!-- {name}:START -->", f"<!-- {name}:END -->"
head, rest = text.split(start, 1)
_, tail = rest.split(end, 1)
open(readme, "w").write(f"{head}{start}\n{table}\n{end}{tail}")
PY
}
