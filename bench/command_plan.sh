#!/usr/bin/env bash
# Before/after figures of the command plan (one parse, one core operation under one budget, one
# reply and replication per command), measured on a live redis-server.
# Usage: bash bench/command_plan.sh [MODULE.so ...]   (default: target/release/librustbloom.so)
# Each module gets its own server (own socket and data dir), shut down at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
modules=("$@")
[ ${#modules[@]} -gt 0 ] || modules=(target/release/librustbloom.so)

run() { redis-cli -s "$sock" "$@"; }
field() { run INFO "$1" | tr -d '\r' | sed -n "s/^$2://p"; }
usec_per_reply() { # args: calls command... (times redis-cli -r: for commands that answer errors)
  local calls=$1; shift
  local t0 t1
  t0=$(date +%s%N); redis-cli -s "$sock" -r "$calls" "$@" >/dev/null; t1=$(date +%s%N)
  echo "$(( (t1 - t0) / 1000 / calls ))"
}
usec_per_call() { # args: calls command...
  local calls=$1; shift
  redis-benchmark -s "$sock" -c 1 -P 1 -n "$calls" -q "$@" 2>/dev/null \
    | tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { printf "%.1f", 1e6 / $i; exit } }'
}

for module in "${modules[@]}"; do
  dir=$(mktemp -d)
  sock="$dir/redis.sock"
  redis-server --port 0 --unixsocket "$sock" --dir "$dir" --save "" --daemonize no \
    --loadmodule "$(readlink -f "$module")" >"$dir/log" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
  for _ in $(seq 100); do run PING >/dev/null 2>&1 && break; sleep 0.1; done
  echo "== $module ($(sha256sum "$module" | cut -c1-12))"

  # 1. A filter whose growth a limit refuses: 7M items at 1% under a 20 MiB cap has a next
  #    layer of 14M items at 0.5%; here 100k items with EXPANSION 140 have the
  #    same next layer and fill in seconds.
  run CONFIG SET bf.max-filter-bytes 20mb >/dev/null
  run BF.RESERVE full 0.01 100000 EXPANSION 140 >/dev/null
  i=0
  while :; do
    errors=$(seq $i $((i + 9999)) | sed 's/^/u/' | xargs redis-cli -s "$sock" BF.MADD full | grep -c ERR || true)
    i=$((i + 10000))
    [ "$errors" = 0 ] || break
  done
  echo "1. refused growth (next layer 14M items at 0.5%, cap 20 MiB): BF.EXISTS $(usec_per_call 2000 BF.EXISTS full u1) us/call," \
       "BF.ADD present $(usec_per_call 200 BF.ADD full u1) us/call, BF.ADD refused $(usec_per_reply 200 BF.ADD full new-item) us/call (redis-cli -r)"
  run DEL full >/dev/null

  # 2. Forty 860 MB reservations with maxmemory 0 on this machine.
  run CONFIG SET bf.max-filter-bytes 2gb >/dev/null
  ok=0
  for n in $(seq 40); do
    [ "$(run BF.RESERVE "big$n" 0.01 700000000)" = OK ] && ok=$((ok + 1))
  done
  echo "2. BF.RESERVE bigN 0.01 700000000 x40: $ok accepted, used_memory $(field memory used_memory_human), MemAvailable $(awk '/MemAvailable/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  run FLUSHALL >/dev/null

  # 3. One MADD crossing two layer boundaries under maxmemory = used + 10 MB.
  used=$(field memory used_memory)
  run CONFIG SET maxmemory $((used + 10000000)) >/dev/null
  run BF.RESERVE a 0.01 1 EXPANSION 4096 >/dev/null
  last=$(seq 4300 | sed 's/^/i/' | xargs redis-cli -s "$sock" BF.MADD a | grep ERR || echo "no error")
  echo "3. MADD of 4,300 over layers of 1/4096/16.7M: last reply '$last', layers $(run BF.INFO a FILTERS | tail -1), used_memory $(field memory used_memory) vs maxmemory $(field memory maxmemory)"
  run CONFIG SET maxmemory 0 >/dev/null
  run FLUSHALL >/dev/null

  # 4. COPY of a 14 MB filter with bf.max-filter-bytes 1 MB.
  run BF.RESERVE src 0.01 10000000 >/dev/null
  run CONFIG SET bf.max-filter-bytes 1mb >/dev/null
  echo "4. COPY of a $(run MEMORY USAGE src) B filter with a 1 MB cap: $(run COPY src dst 2>&1)"
  run CONFIG SET bf.max-filter-bytes 2gb >/dev/null
  run FLUSHALL >/dev/null

  # 5. MEMORY USAGE against used_memory for a 100M-item filter.
  before=$(field memory used_memory)
  run BF.RESERVE k 0.01 100000000 >/dev/null
  echo "5. 100M at 1%: MEMORY USAGE $(run MEMORY USAGE k), used_memory grew $(( $(field memory used_memory) - before ))"
  run FLUSHALL >/dev/null

  # 8. UNLINK and COPY of an 863 MB filter filled with 20M items.
  run BF.RESERVE huge 0.01 600000000 >/dev/null
  seq 200000 | sed 's/^/h/' | xargs -n 10000 redis-cli -s "$sock" BF.MADD huge >/dev/null
  t0=$(date +%s%N); run COPY huge huge2 >/dev/null; t1=$(date +%s%N)
  lazy0=$(field memory lazyfreed_objects)
  t2=$(date +%s%N); run UNLINK huge >/dev/null; t3=$(date +%s%N)
  sleep 1
  echo "8. $(run MEMORY USAGE huge2) B filter: COPY $(( (t1 - t0) / 1000000 )) ms, UNLINK $(( (t3 - t2) / 1000000 )) ms, lazyfreed_objects $lazy0 -> $(field memory lazyfreed_objects)"

  run SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait $pid 2>/dev/null || true
  rm -rf "$dir"
  trap - EXIT
done
