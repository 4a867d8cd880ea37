#!/usr/bin/env bash
# The seeds' day through the offline path (not run in CI): N distinct click ids at 1e-9 into the
# 16 partitions of a 3-master + 3-replica cluster on loopback, built on the client, against the
# online load of the same ids on the same cluster.
#
#  1. 6 nodes, `redis-cli --cluster create … --cluster-replicas 1` (as bench/seed_day.sh, no
#     failover here); the ids (bfctl/examples/clicks.rs) written once to a file (--offline reads
#     a partitioned filter's input once per partition) unless only step 2 reads them from stdin.
#  2. `bfctl build FILE OUT --capacity N --error 1e-9 --partitions 16 --nonscaling`, then
#     `bfctl restore clicks-built OUT`: a new filter from a file, the pair of commands. With
#     OFFLINE_STDIN=yes the build reads the generator's output on stdin (`clicks N | bfctl build -
#     OUT …`, timed as one step, generator included) instead of the file.
#  3. When the servers know BF.MERGE: `bfctl reserve clicks-merged 1e-9 N --partitions 16
#     --nonscaling`, then `bfctl load clicks-merged FILE --offline` (build, restore to a temporary
#     key, BF.MERGE, DEL, one partition at a time).
#  4. `bfctl reserve clicks-online …` and `bfctl load clicks-online FILE --wait 1`: the online
#     load the day used (from a file here, no failover).
#  5. For each filter: every OFFLINE_STRIDE-th id answers 1, and the false positives over
#     OFFLINE_FP never-added ids. Each step's seconds and bfctl's peak RSS (/usr/bin/time).
#
# Usage: bash bench/offline_day.sh    env: OFFLINE_ITEMS (100000000) OFFLINE_PORT (7811: 6 ports
#   and each +10000) OFFLINE_OUT (target/bench/offline) OFFLINE_STRIDE (100) OFFLINE_FP (N/10)
#   OFFLINE_SERVER (redis-server on PATH) OFFLINE_MERGED (yes: also run step 3) OFFLINE_ONLINE
#   (yes: also run step 4) OFFLINE_STDIN (no: step 2 reads the file); at 10^9 only steps 1-2 fit this machine (OFFLINE_MERGED=no
#   OFFLINE_ONLINE=no: ~17 GB of memory, ~43 GB of disk)
# Room: ~5.7 bytes per item per copy; the cluster holds each filter twice (masters, replicas),
# bfctl build the whole filter once, and steps 2-4 keep their filters: at 10^8, ~0.55 GB per copy,
# ~4 GB of memory in all, and ~3.4 GB of disk for the ids and the build's output.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOD="${RUSTBLOOM_MODULE:-$ROOT/target/release/librustbloom.so}"
BF="$ROOT/target/release/bfctl"
GEN="$ROOT/target/release/examples/clicks"
N=${OFFLINE_ITEMS:-100000000}
PORT0=${OFFLINE_PORT:-7811}
OUT=${OFFLINE_OUT:-$ROOT/target/bench/offline}
STRIDE=${OFFLINE_STRIDE:-100}
FP=${OFFLINE_FP:-$((N / 10))}
SERVER=${OFFLINE_SERVER:-$(command -v redis-server)}
ONLINE=${OFFLINE_ONLINE:-yes}
MERGED=${OFFLINE_MERGED:-yes}
STDIN=${OFFLINE_STDIN:-no}
PORTS=($(seq $PORT0 $((PORT0 + 5))))
[ -x "$BF" ] && [ -x "$GEN" ] && [ -f "$MOD" ] || { echo "build first: make build and cargo build --release -p bfctl --example clicks" >&2; exit 1; }
mkdir -p "$OUT"
DIR="$(mktemp -d "$OUT/data.XXXXXX")"
LOG="$OUT/offline-day-$N.log"
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }
cleanup() {
  for p in "${PORTS[@]}"; do redis-cli -p $p shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT

for p in "${PORTS[@]}"; do
  mkdir -p "$DIR/$p"
  "$SERVER" --port $p --bind 127.0.0.1 --dir "$DIR/$p" --daemonize yes --pidfile "$DIR/$p/pid" \
    --logfile "$DIR/$p/log" --cluster-enabled yes --cluster-config-file nodes.conf \
    --cluster-node-timeout 2000 --save '' --appendonly no --loadmodule "$MOD" >/dev/null
done
for p in "${PORTS[@]}"; do
  for _ in $(seq 200); do redis-cli -p $p ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
done
redis-cli --cluster create $(printf '127.0.0.1:%s ' "${PORTS[@]}") --cluster-replicas 1 --cluster-yes >/dev/null
for _ in $(seq 300); do
  ok=1
  for p in "${PORTS[@]}"; do redis-cli -p $p cluster info | grep -q cluster_state:ok || ok=0; done
  [ $ok = 1 ] && break; sleep 0.2
done
sleep 2
URL=redis://127.0.0.1:$PORT0
bfctl() { "$BF" --url $URL -q "$@"; }
timed() { # label cmd...: runs it, says its seconds and peak RSS
  local label=$1 t0 t1 rss
  shift
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$OUT/time.txt" "$@" 2>&1 | tee -a "$LOG"
  t1=$(date +%s.%N)
  rss=$(tail -n 1 "$OUT/time.txt")
  say "$label: $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.1f", b - a}') s, bfctl peak RSS $((rss / 1024)) MiB"
}
check() { # filter
  local sample fps
  sample=$("$GEN" $N --stride $STRIDE | "$BF" --url $URL exists $1 - | awk '{s+=$1; n++} END{print s+0 " / " n+0}')
  fps=$("$GEN" $N --from $N --to $((N + FP)) | "$BF" --url $URL exists $1 - | awk '{s+=$1} END{print s+0}')
  say "$1: every ${STRIDE}th id present: $sample; false positives over $FP never-added ids: $fps"
}

say "offline day: N=$N at 1e-9, 16 partitions, $("$SERVER" --version | cut -d' ' -f1-3), commit $(git -C "$ROOT" rev-parse --short HEAD), $(date -u '+%F %T') UTC, nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$MERGED" = yes ] || [ "$ONLINE" = yes ] || [ "$STDIN" != yes ]; then
  t0=$(date +%s.%N)
  "$GEN" $N > "$OUT/clicks.txt"
  say "ids written to a file: $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.1f", b - a}') s, $(stat -c %s "$OUT/clicks.txt") bytes"
fi

BUILD=(build --capacity $N --error 1e-9 --partitions 16 --nonscaling)
if [ "$STDIN" = yes ]; then
  timed "clicks | bfctl build -" bash -c '"$1" "$2" | "${@:3}"' _ "$GEN" $N "$BF" "${BUILD[0]}" - "$OUT/clicks.bfd" "${BUILD[@]:1}"
else
  timed "bfctl build" "$BF" "${BUILD[0]}" "$OUT/clicks.txt" "$OUT/clicks.bfd" "${BUILD[@]:1}"
fi
timed "bfctl restore" "$BF" --url $URL restore clicks-built "$OUT/clicks.bfd"
rm -f "$OUT/clicks.bfd"
check clicks-built

if [ "$MERGED" != yes ]; then
  say "load --offline not run (OFFLINE_MERGED=$MERGED)"
elif redis-cli -p $PORT0 command info bf.merge | grep -qi merge; then
  bfctl reserve clicks-merged 1e-9 $N --partitions 16 --nonscaling >/dev/null
  timed "bfctl load --offline" "$BF" --url $URL load clicks-merged "$OUT/clicks.txt" --offline
  check clicks-merged
else
  say "no BF.MERGE on these servers: load --offline not run"
fi

if [ "$ONLINE" = yes ]; then
  bfctl reserve clicks-online 1e-9 $N --partitions 16 --nonscaling >/dev/null
  timed "bfctl load --wait 1" "$BF" --url $URL load clicks-online "$OUT/clicks.txt" --wait 1
  check clicks-online
fi
rm -f "$OUT/clicks.txt"
say "done $(date -u '+%F %T') UTC"
