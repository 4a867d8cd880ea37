#!/usr/bin/env bash
# Big-filter persistence bench (issue 3, item 3; not run in CI).
#
# Builds one filter of >= 1 GiB in its own redis-server (free port, temporary directory, always
# stopped on exit), adds ITEMS random items to it, SAVEs, restarts the server on the same
# directory, and reports:
#   - the filter's size (BF.INFO Size) and the RDB size, SAVE time;
#   - load time (from spawning redis-server until it answers PING instead of LOADING, and Redis'
#     own "DB loaded from disk" figure);
#   - peak RSS during load: VmHWM of the restarted process (its peak resident set since exec,
#     so the peak of the load, as nothing else runs), sampled from /proc/PID/status every 20 ms
#     alongside VmRSS; shown relative to the filter's size (goal <= 1.3x) and with the RSS of an
#     empty server subtracted (the process' own baseline);
#   - that DEBUG DIGEST-VALUE is the same before and after.
#
# RDB compression is off by default: a filter in use is about half ones and does not compress,
# while this one (a few million items in a billion-item filter) is mostly zeros and would. Set
# RDBCOMPRESSION=yes to see the compressed case.
#
# Usage: bash bench/bigfilter.sh
#   env: CAPACITY (800000000) ERROR (0.01; scaling, so layer 0 is sized for ERROR/2: ~1.10 GB)
#        ITEMS (2000000) RDBCOMPRESSION (no) RUSTBLOOM_MODULE (target/release/librustbloom.so)
#        KEEP_DIR=1 keeps the temporary directory.
# Needs ~2.5 GB of RAM and of free disk for the RDB. Takes about a minute.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE="${RUSTBLOOM_MODULE:-$ROOT/target/release/librustbloom.so}"
CAPACITY="${CAPACITY:-800000000}"
ERROR="${ERROR:-0.01}"
ITEMS="${ITEMS:-2000000}"
RDBCOMPRESSION="${RDBCOMPRESSION:-no}"

[ -f "$MODULE" ] || { echo "module not found at $MODULE: run make build" >&2; exit 1; }
command -v redis-server >/dev/null && command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null \
  || { echo "needs redis-server, redis-cli and redis-benchmark (apt-get install redis-server redis-tools)" >&2; exit 1; }

DIR="$(mktemp -d /tmp/rustbloom-bigfilter.XXXXXX)"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
PID=""

cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
    for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$PID" 2>/dev/null || true
  fi
  if [ "${KEEP_DIR:-0}" = 1 ]; then echo "kept $DIR" >&2; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

cli() { redis-cli -p "$PORT" "$@"; }

now_ms() { date +%s%3N; }

status_kb() { # status_kb PID FIELD -> value in kB (0 when gone)
  awk -v f="$2:" '$1 == f { print $2; found=1 } END { if (!found) print 0 }' "/proc/$1/status" 2>/dev/null || echo 0
}

start_server() {
  redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DIR" --logfile redis.log --save '' \
    --appendonly no --rdbcompression "$RDBCOMPRESSION" --enable-debug-command yes \
    --loadmodule "$MODULE" &
  PID=$!
}

# Polls until PING answers PONG; meanwhile samples VmRSS. Prints "ready_ms max_sampled_rss_kb".
wait_ready() {
  local t0="$1" max_rss=0 rss reply
  for _ in $(seq 1 30000); do
    rss=$(status_kb "$PID" VmRSS); [ "$rss" -gt "$max_rss" ] && max_rss=$rss
    reply=$(cli ping 2>/dev/null || true)
    if [ "$reply" = PONG ]; then echo "$(( $(now_ms) - t0 )) $max_rss"; return 0; fi
    kill -0 "$PID" 2>/dev/null || { echo "redis-server exited; log:" >&2; tail -20 "$DIR/redis.log" >&2; exit 1; }
    sleep 0.02
  done
  echo "redis-server did not become ready" >&2; exit 1
}

human() { awk -v b="$1" 'BEGIN { printf "%.2f GiB", b / 1073741824 }'; }

echo "# bigfilter: BF.RESERVE big $ERROR $CAPACITY, $ITEMS items, rdbcompression $RDBCOMPRESSION" >&2
T0=$(now_ms); start_server; read -r _ _ < <(wait_ready "$T0")
BASE_HWM_KB=$(status_kb "$PID" VmHWM)
cli config set bf.max-filter-bytes 8589934592 >/dev/null
cli bf.reserve big "$ERROR" "$CAPACITY" | grep -q OK
redis-benchmark -p "$PORT" -n "$ITEMS" -P 64 -c 8 -r 2000000000 -q BF.ADD big __rand_int__ >/dev/null
SIZE=$(cli bf.info big size | tail -1)
CARD=$(cli bf.card big)
DIGEST=$(cli debug digest-value big)
[ "$SIZE" -ge 1073741824 ] || { echo "filter is only $SIZE bytes: raise CAPACITY" >&2; exit 1; }
RSS_BEFORE_KB=$(status_kb "$PID" VmRSS)

T=$(now_ms); cli save >/dev/null; SAVE_MS=$(( $(now_ms) - T ))
RDB_BYTES=$(stat -c %s "$DIR/dump.rdb")
cli shutdown nosave >/dev/null 2>&1 || true
wait "$PID" 2>/dev/null || true

T0=$(now_ms); start_server; read -r LOAD_MS MAX_RSS_KB < <(wait_ready "$T0")
HWM_KB=$(status_kb "$PID" VmHWM)
RSS_AFTER_KB=$(status_kb "$PID" VmRSS)
REDIS_LOAD=$(grep -o 'DB loaded from disk: [0-9.]* seconds' "$DIR/redis.log" | tail -1 | grep -o '[0-9.]* seconds' || echo '?')
DIGEST_AFTER=$(cli debug digest-value big)
CARD_AFTER=$(cli bf.card big)
[ "$DIGEST" = "$DIGEST_AFTER" ] && [ "$CARD" = "$CARD_AFTER" ] || { echo "MISMATCH after load: $DIGEST/$CARD vs $DIGEST_AFTER/$CARD_AFTER" >&2; exit 1; }

awk -v size="$SIZE" -v hwm="$HWM_KB" -v base="$BASE_HWM_KB" -v maxrss="$MAX_RSS_KB" \
    -v before="$RSS_BEFORE_KB" -v after="$RSS_AFTER_KB" -v rdb="$RDB_BYTES" -v save="$SAVE_MS" \
    -v load="$LOAD_MS" -v rload="$REDIS_LOAD" -v card="$CARD" -v cap="$CAPACITY" -v err="$ERROR" '
BEGIN {
  gib = 1073741824
  printf "| figure | value |\n|---|---|\n"
  printf "| filter | BF.RESERVE big %s %s, %d items in it |\n", err, cap, card
  printf "| filter size (BF.INFO Size) | %d bytes (%.3f GiB) |\n", size, size / gib
  printf "| RDB file | %d bytes (%.3f GiB) |\n", rdb, rdb / gib
  printf "| SAVE time | %.2f s |\n", save / 1000
  printf "| load time (spawn to PING) | %.2f s |\n", load / 1000
  printf "| load time (Redis log) | %s |\n", rload
  printf "| RSS before SAVE | %.3f GiB (%.3fx filter) |\n", before * 1024 / gib, before * 1024 / size
  printf "| peak RSS during load (VmHWM) | %.3f GiB |\n", hwm * 1024 / gib
  printf "| peak RSS / filter size | **%.3fx** (goal <= 1.3x) |\n", hwm * 1024 / size
  printf "| (peak RSS - empty server %.1f MiB) / filter size | %.3fx |\n", base / 1024, (hwm - base) * 1024 / size
  printf "| highest sampled VmRSS during load | %.3f GiB |\n", maxrss * 1024 / gib
  printf "| RSS after load | %.3f GiB |\n", after * 1024 / gib
  printf "| digest / BF.CARD after load | unchanged |\n"
}'
