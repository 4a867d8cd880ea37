#!/usr/bin/env bash
# Big-filter persistence bench: rustbloom against RedisBloom on the same redis-server, same
# filter, same items, alternated (not run in CI; `make bench-big`).
#
# For each round and each module (ours, then RedisBloom), in its own redis-server (free port,
# temporary directory, always stopped on exit):
#   BF.RESERVE big ERROR CAPACITY NONSCALING, ITEMS random items (redis-benchmark), then
#   - COPY big big2 (the time the client waits, which is the time the event loop is held), UNLINK
#     big2 and wait until the lazy free is done (RedisBloom 2.8 refuses COPY: NA);
#   - SAVE (time the client waits, and the server's CPU time: utime + stime), RDB size;
#   - restart on the same directory: spawn to PING answering PONG, and Redis' own "DB loaded from
#     disk" figure, and its CPU time from exec to then (after a sync of the file, so that the load
#     does not race the kernel's writeback of it); peak RSS of the restarted process (VmHWM: its
#     peak since exec, so the load's);
#   - DEBUG DIGEST-VALUE and BF.CARD unchanged by the reload;
#   - the RDB file is deleted at once.
# Then prints each run's figures, the medians per module, and ours / RedisBloom. The machine may
# be shared: the rounds alternate the modules so that a busy spell hits both, and the medians are
# what to quote. No figure is asserted.
#
# RDB compression is off: a filter in use is about half ones and does not compress, while this
# one (a few million items in a big filter) is mostly zeros and would.
#
# Usage: bash bench/bigfilter.sh       (or make bench-big)
#   env: CAPACITY (200000000) ERROR (0.000000001): ~1.1 GB of bits (a billion-item filter is
#        CAPACITY=1000000000: ~5.6 GB, needs ~12 GB of RAM and ~6 GB of disk)
#        ITEMS (2000000) ROUNDS (2) MODULES ("ours redisbloom")
#        RUSTBLOOM_MODULE (target/release/librustbloom.so)
#        RUSTBLOOM_REDISBLOOM_MODULE (target/redisbloom/redisbloom.so)
#        BASELINE_MODULE: another build of rustbloom (say the last commit's .so) to run as a
#        third module, "baseline", for a before/after in the same run
# Needs 2.5x the filter's size in RAM (the filter and its COPY) and 1x in free disk.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OURS="${RUSTBLOOM_MODULE:-$ROOT/target/release/librustbloom.so}"
REDISBLOOM="${RUSTBLOOM_REDISBLOOM_MODULE:-$ROOT/target/redisbloom/redisbloom.so}"
CAPACITY="${CAPACITY:-200000000}"
ERROR="${ERROR:-0.000000001}"
ITEMS="${ITEMS:-2000000}"
ROUNDS="${ROUNDS:-2}"
BASELINE_MODULE="${BASELINE_MODULE:-}"
MODULES="${MODULES:-${BASELINE_MODULE:+baseline }ours redisbloom}"

command -v redis-server >/dev/null && command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null \
  || { echo "needs redis-server, redis-cli and redis-benchmark (apt-get install redis-server redis-tools)" >&2; exit 1; }
for module in $MODULES; do
  case "$module" in
    ours) [ -f "$OURS" ] || { echo "module not found at $OURS: run make build" >&2; exit 1; } ;;
    redisbloom) [ -f "$REDISBLOOM" ] || { echo "RedisBloom not found at $REDISBLOOM: run make redisbloom" >&2; exit 1; } ;;
    baseline) [ -f "$BASELINE_MODULE" ] || { echo "BASELINE_MODULE not found: $BASELINE_MODULE" >&2; exit 1; } ;;
    *) echo "unknown module $module (ours, redisbloom, baseline)" >&2; exit 1 ;;
  esac
done

DIR="$(mktemp -d /tmp/rustbloom-bigfilter.XXXXXX)"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
PID=""
RESULTS="$DIR/results.tsv"

stop_server() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
    for _ in $(seq 1 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$PID" 2>/dev/null || true
  fi
  PID=""
}

cleanup() {
  stop_server
  rm -rf "$DIR"
}
trap cleanup EXIT
trap 'echo "bigfilter.sh: failed at line $LINENO" >&2' ERR

cli() { redis-cli -p "$PORT" "$@"; }

now_ms() { date +%s%3N; }

cpu_ms() { # cpu_ms PID -> utime + stime of the process so far, in ms
  awk -v tck="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print int(($12 + $13) * 1000 / tck) }' "/proc/$1/stat"
}

status_kb() { # status_kb PID FIELD -> value in kB (0 when gone)
  awk -v f="$2:" '$1 == f { print $2; found=1 } END { if (!found) print 0 }' "/proc/$1/status" 2>/dev/null || echo 0
}

start_server() { # start_server MODULE_PATH
  redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DIR" --logfile redis.log --save '' \
    --appendonly no --rdbcompression no --enable-debug-command yes \
    --loadmodule "$1" &
  PID=$!
}

# Polls until PING answers PONG. Prints the milliseconds since $1.
wait_ready() {
  local t0="$1" reply
  for _ in $(seq 1 60000); do
    reply=$(cli ping 2>/dev/null || true)
    if [ "$reply" = PONG ]; then echo "$(( $(now_ms) - t0 ))"; return 0; fi
    kill -0 "$PID" 2>/dev/null || { echo "redis-server exited; log:" >&2; tail -20 "$DIR/redis.log" >&2; exit 1; }
    sleep 0.01
  done
  echo "redis-server did not become ready" >&2; exit 1
}

wait_lazy_free() {
  for _ in $(seq 1 3000); do
    [ "$(cli info memory | tr -d '\r' | awk -F: '$1 == "lazyfree_pending_objects" { print $2 }')" = 0 ] && return 0
    sleep 0.02
  done
  echo "lazy free did not finish" >&2; exit 1
}

one_run() { # one_run ROUND MODULE
  local round="$1" module="$2" path size copy_ms save_ms save_cpu rdb load_ms load_cpu redis_load hwm digest card
  case "$module" in ours) path="$OURS" ;; redisbloom) path="$REDISBLOOM" ;; baseline) path="$BASELINE_MODULE" ;; esac
  : > "$DIR/redis.log"
  local t0; t0=$(now_ms); start_server "$path"; wait_ready "$t0" >/dev/null
  if [ "$module" != redisbloom ]; then cli config set bf.max-filter-bytes 17179869184 >/dev/null; fi
  cli bf.reserve big "$ERROR" "$CAPACITY" NONSCALING | grep -q OK
  redis-benchmark -p "$PORT" -n "$ITEMS" -P 64 -c 4 -r 2000000000 -q BF.ADD big __rand_int__ >/dev/null
  size=$(cli memory usage big)
  digest=$(cli debug digest-value big)
  card=$(cli bf.info big items | tail -1)

  # RedisBloom 2.8 has no COPY ("ERR not supported for this module key"): NA.
  local t reply; t=$(now_ms); reply=$(cli copy big big2 2>&1); copy_ms=$(( $(now_ms) - t ))
  if [ "$reply" = 1 ]; then
    [ "$(cli debug digest-value big2)" = "$digest" ] || { echo "$module: COPY differs" >&2; exit 1; }
    cli unlink big2 >/dev/null
    wait_lazy_free
  else
    copy_ms=NA
  fi

  local cpu; cpu=$(cpu_ms "$PID")
  t=$(now_ms); cli save | grep -q OK; save_ms=$(( $(now_ms) - t ))
  save_cpu=$(( $(cpu_ms "$PID") - cpu ))
  rdb=$(stat -c %s "$DIR/dump.rdb")
  stop_server
  # The load then reads a clean page cache, not one the kernel is still writing back.
  sync "$DIR/dump.rdb"

  : > "$DIR/redis.log"
  t0=$(now_ms); start_server "$path"; load_ms=$(wait_ready "$t0")
  hwm=$(status_kb "$PID" VmHWM)
  load_cpu=$(cpu_ms "$PID")
  redis_load=$(grep -o 'DB loaded from disk: [0-9.]* seconds' "$DIR/redis.log" | tail -1 | grep -o '[0-9.]*' | head -1 || echo 0)
  [ "$(cli debug digest-value big)" = "$digest" ] && [ "$(cli bf.info big items | tail -1)" = "$card" ] \
    || { echo "$module: the reloaded filter differs" >&2; exit 1; }
  stop_server
  rm -f "$DIR/dump.rdb"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$module" "$size" "$copy_ms" "$save_ms" "$rdb" \
    "$load_ms" "$redis_load" "$hwm" "$save_cpu" "$load_cpu" | tee -a "$RESULTS" >&2
}

echo "# bigfilter: BF.RESERVE big $ERROR $CAPACITY NONSCALING, $ITEMS items, $ROUNDS rounds of: $MODULES" >&2
echo "# round module memory_usage copy_ms save_ms rdb_bytes load_ms redis_load_s peak_rss_kb save_cpu_ms load_cpu_ms" >&2
for round in $(seq 1 "$ROUNDS"); do
  for module in $MODULES; do one_run "$round" "$module"; done
done

awk -F'\t' '
function median(module, field,    n, i, j, v, tmp) {
  n = 0
  for (i = 1; i <= rows; i++) if (mod[i] == module && val[i, field] != "NA") v[++n] = val[i, field]
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { tmp = v[i]; v[i] = v[j]; v[j] = tmp }
  if (n == 0) return -1
  return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{ rows++; mod[rows] = $2; for (f = 3; f <= 11; f++) val[rows, f] = $f; seen[$2] = 1 }
END {
  gib = 1073741824
  base = ("baseline" in seen)
  printf "| median of %d runs | ours | RedisBloom | ours / RedisBloom |%s\n|---|---|---|---|%s\n", rows / length(seen), (base ? " baseline | ours / baseline |" : ""), (base ? "---|---|" : "")
  split("3 6 4 5 10 7 8 11 9", fields, " ")
  names[3] = "MEMORY USAGE (GiB)"; names[4] = "COPY (s per GiB of MEMORY USAGE)"; names[5] = "SAVE (s)"
  names[7] = "load, spawn to PONG (s)"; names[8] = "load, Redis log (s)"; names[9] = "peak RSS of the load (GiB)"
  names[6] = "RDB file (GiB)"; names[10] = "SAVE, server CPU (s)"; names[11] = "load, server CPU from exec (s)"
  for (k = 1; k <= 9; k++) {
    f = fields[k]
    o = figure("ours", f); r = figure("redisbloom", f)
    printf "| %s | %s | %s | %s |", names[f], shown(o), shown(r), ratio(o, r)
    if (base) { b = figure("baseline", f); printf " %s | %s |", shown(b), ratio(o, b) }
    printf "\n"
  }
}
function figure(module, f) {
  return f == 4 ? per_gib(median(module, 4), median(module, 3)) : scale(median(module, f), f)
}
function ratio(a, b) { return (a >= 0 && b > 0) ? sprintf("%.2f", a / b) : "-" }
function shown(x) { return x < 0 ? "-" : sprintf("%.3f", x) }
function per_gib(ms, bytes) { return (ms < 0 || bytes <= 0) ? -1 : ms / 1000 / (bytes / 1073741824) }
function scale(x, f) {
  if (x < 0) return x
  if (f == 3 || f == 6) return x / 1073741824
  if (f == 5 || f == 7 || f == 10 || f == 11) return x / 1000
  if (f == 9) return x * 1024 / 1073741824
  return x
}' "$RESULTS"
