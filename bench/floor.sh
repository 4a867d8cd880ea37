#!/usr/bin/env bash
# Where a single BF.* command's time goes: the module's floor (BF.CARD: open the key, reply) and
# BF.EXISTS on a cache-resident filter vs a big one, next to PFADD, as server CPU µs per call at
# -P 64 (utime+stime from /proc/PID/stat). The gap between the two BF.EXISTS figures is one cache
# miss per command, which no layout avoids for a lone random lookup.
#
# Usage: bash bench/floor.sh            (RUSTBLOOM_MODULE=path to test another build; ~30 s)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE="${RUSTBLOOM_MODULE:-$ROOT/target/release/librustbloom.so}"
DIR="$(mktemp -d)"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
PIN_SERVER=(); PIN_CLIENT=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then PIN_SERVER=(taskset -c 1); PIN_CLIENT=(taskset -c 0); fi
"${PIN_SERVER[@]}" redis-server --port "$PORT" --dir "$DIR" --save "" --loadmodule "$MODULE" \
    --daemonize yes --logfile "$DIR/log"
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
PID="$(redis-cli -p "$PORT" info server | awk -F: '/^process_id/{print $2}' | tr -d '\r')"
redis-cli -p "$PORT" BF.RESERVE small 0.01 1000 >/dev/null
redis-cli -p "$PORT" BF.RESERVE big 0.01 10000000 >/dev/null
"${PIN_CLIENT[@]}" redis-benchmark -p "$PORT" -n 3000000 -P 64 -r 20000000 -q BF.ADD big __rand_int__ >/dev/null
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
TICK="$(getconf CLK_TCK)"
N=3000000
printf '| command | filter | CPU µs/call |\n|---|---|---|\n'
for args in "PFADD h __rand_int__" "BF.CARD big" "BF.EXISTS small __rand_int__" "BF.EXISTS big __rand_int__" "BF.ADD big __rand_int__"; do
    before="$(cpu)"
    # shellcheck disable=SC2086
    "${PIN_CLIENT[@]}" redis-benchmark -p "$PORT" -n "$N" -P 64 -c 50 -r 20000000 -q $args >/dev/null
    after="$(cpu)"
    filter="$(awk '{print $2}' <<<"$args")"
    awk -v a="$before" -v b="$after" -v n="$N" -v t="$TICK" -v c="${args%% *}" -v f="$filter" \
        'BEGIN { printf "| %s | %s | %.3f |\n", c, f, (b - a) / t * 1e6 / n }'
done
