#!/usr/bin/env bash
# The seeds' day (not run in CI): N distinct click ids at 1e-9 through a 3-master + 3-replica
# cluster on loopback, measured end to end, once per server in SEED_SERVERS.
#
#  1. 6 nodes (--cluster-node-timeout 2000, no persistence during the load), `redis-cli --cluster
#     create … --cluster-replicas 1`; `bfctl reserve clicks 1e-9 N --partitions 16 --nonscaling`.
#  2. clicks N (bfctl/examples/clicks.rs) | bfctl load clicks - --wait 1 (a pipe, never a file); every
#     SEED_SAMPLE_SECS a CSV row: items/s (lines the generator handed the pipe), each node's
#     used_memory, RSS and CPU seconds (/proc/PID/stat), bfctl's CPU seconds.
#  3. On a server with CLUSTER MIGRATESLOTS (Valkey 9), once a quarter of the items are sent: move
#     slots 0-4095 (a quarter of them, 4 of the 16 partitions) from their master to another by
#     atomic slot migration, timed until CLUSTER GETSLOTMIGRATIONS says success; afterwards every
#     id sent from SEED_KILL_SPAN before its start to SEED_KILL_SPAN after its end answers 1.
#     Once half the items are sent (and the migration is over): kill -9 the master of partition
#     0's slot; its replica takes over and the load goes on by itself (bfctl resends what was not
#     acknowledged). With --wait 1
#     the promoted master has no replica until the killed node comes back, so after
#     SEED_RESTART_AFTER seconds the killed node is started again (a supervisor's restart; it
#     rejoins as a replica); SEED_RESTART_AFTER=never leaves it down.
#  4. After the load: every id of a strided sample of SEED_CHECK ids, and every id sent within
#     SEED_KILL_SPAN ids of the kill, answers 1; false positives over SEED_FP never-added ids;
#     BGSAVE on each master in turn (latest_fork_usec, peak RSS growth, rdb_last_cow_size, RDB
#     size, seconds); SHUTDOWN SAVE of all six nodes, start again, time until `bfctl info
#     clicks` reports all 16 partitions, then the sample check again.
#  5. A PNG of the CSV (matplotlib in a venv under target/, installed here), with date and commit.
#  6. The window day (SEED_MODE=window, see run_window): a fresh cluster, `bfctl reserve clicks
#     1e-9 C --window W --partitions 16` with C = 7 per 1000 clicks of the day (7 million at 10^9),
#     the same N clicks as `unix_ms<TAB>id` lines at their event times (144 windows, in order)
#     through `bfctl load clicks - --timestamped --wait 1` in SEED_PROBES segments, the fullest
#     window slot against its capacity after each; memory per node sampled as in 2 (its max/min
#     after the first window); at the end, every id inside the window answers 1, ids of an hour
#     earlier and never-added ids answer 0 but for false positives. CSV and chart seed-window-*.
#
# Usage: bash bench/seed_day.sh    env: SEED_ITEMS (1000000000) SEED_SERVERS ("redis valkey")
#   SEED_SAMPLE_SECS (10) SEED_CHECK (10000000) SEED_FP (10000000) SEED_KILL_SPAN (2000000)
#   SEED_RESTART_AFTER (20) SEED_PORT (7711: uses 6 ports and each +10000) SEED_OUT (target/bench/seed)
#   SEED_BFCTL, SEED_CLICKS, RUSTBLOOM_MODULE (the builds under target/release by default)
#   SEED_MODE ("day window": which of the two days, in that order) SEED_WINDOW_MS (600000)
#   SEED_WINDOW_CAPACITY (7·N/1000) SEED_PROBES (4) SEED_WINDOW_PACE (N/700000 s)
# Room: the filter takes ~5.7 bytes per item per copy (5.3 GiB per copy at 10^9): the run needs
# twice that plus a third in memory (replicas, a fork's copy-on-write during BGSAVE or a full sync)
# and on disk under SEED_OUT (each node's data dir, data.*, with its RDB after SHUTDOWN SAVE), 12.8
# GiB and 12.5 GiB at 10^9; it says so first and refuses to start when MemAvailable or the free disk
# falls short (check_room).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOD="${RUSTBLOOM_MODULE:-$ROOT/target/release/librustbloom.so}"
BF="${SEED_BFCTL:-$ROOT/target/release/bfctl}"
GEN="${SEED_CLICKS:-$ROOT/target/release/examples/clicks}"
N=${SEED_ITEMS:-1000000000}
SERVERS=${SEED_SERVERS:-redis valkey}
EVERY=${SEED_SAMPLE_SECS:-10}
CHECK=${SEED_CHECK:-10000000}
FP=${SEED_FP:-10000000}
KILL_SPAN=${SEED_KILL_SPAN:-2000000}
RESTART_AFTER=${SEED_RESTART_AFTER:-20}
PORT0=${SEED_PORT:-7711}
OUT=${SEED_OUT:-$ROOT/target/bench/seed}
MODES=${SEED_MODE:-day window}
for mode in $MODES; do
  case $mode in day | window) ;; *) echo "SEED_MODE lists day and/or window, not $mode" >&2; exit 2 ;; esac
done
WINDOW_MS=${SEED_WINDOW_MS:-600000}
# 7 million clicks per 10 minutes at 10^9 a day: the capacity scales with N, so each window is
# loaded as much as at full scale (N/144 clicks against capacity N·7/1000).
WINDOW_CAP=${SEED_WINDOW_CAPACITY:-$(( (N * 7 + 999) / 1000 ))}
PROBES=${SEED_PROBES:-4}
# The window day ends this many seconds (+ W) after it starts, about the load's duration, so that
# the end-of-day checks read a clock inside the day's last window (see run_window).
PACE=${SEED_WINDOW_PACE:-$(( N / 700000 ))}
VENV="$ROOT/target/bench-seed/venv"
PORTS=($(seq $PORT0 $((PORT0 + 5))))
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
mkdir -p "$OUT"

[ -x "$BF" ] && [ -x "$GEN" ] && [ -f "$MOD" ] || { echo "build first: make build and cargo build --release -p bfctl --example clicks" >&2; exit 1; }

# What a run holds at its peak, refused up front rather than killed half-way: in memory, every
# partition twice (masters and replicas) plus one master's share again (a BGSAVE's or a full
# sync's fork copying pages on write) and 512 MiB for six servers' own memory and buffers; on disk
# under OUT, every node's RDB after SHUTDOWN SAVE (the filter twice) plus one master's temporary
# RDB, and 256 MiB for logs and CSVs.
filter_bytes() { # mode: the filter's bytes at capacity, from bfctl plan (the module's sizing)
  case $1 in
    day) "$BF" plan --items $N --error 1e-9 --nonscaling --partitions 16 ;;
    window) "$BF" plan --items $WINDOW_CAP --error 1e-9 --window $WINDOW_MS --partitions 16 ;;
  esac | awk '$1 == "all" {print $3}'
}
check_room() {
  local need=0 mode bytes
  for mode in $MODES; do
    bytes=$(filter_bytes $mode)
    [ -n "$bytes" ] || { echo "bfctl plan gave no size for the $mode day" >&2; exit 1; }
    [ "$bytes" -le "$need" ] || need=$bytes
  done
  local mem=$(( need * 2 + need / 3 + (512 << 20) )) disk=$(( need * 2 + need / 3 + (256 << 20) ))
  local avail free
  # kB times 1024 in the shell: mawk's printf "%d" stops at 2^31 - 1.
  avail=$(( $(awk '$1 == "MemAvailable:" {print $2}' /proc/meminfo) * 1024 ))
  free=$(df -B1 --output=avail "$OUT" | tail -n 1 | tr -d ' ')
  gib() { awk -v b=$1 'BEGIN{printf "%.1f GiB", b / 2^30}'; }
  echo "N=$N ($MODES): the filter takes $(gib $need) per copy; needs $(gib $mem) of memory (MemAvailable $(gib $avail)) and $(gib $disk) of disk under $OUT (free $(gib $free))"
  local short=""
  [ "$avail" -ge $mem ] || short="memory: $(gib $mem) needed, $(gib $avail) available"
  [ "$free" -ge $disk ] || short="${short:+$short; }disk under $OUT: $(gib $disk) needed, $(gib $free) free"
  if [ -n "$short" ]; then
    echo "not starting, this machine lacks room for N=$N ($short): free some, lower SEED_ITEMS, or point SEED_OUT at a bigger disk" >&2
    exit 1
  fi
}
check_room
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
  python3 -m venv "$VENV" && "$VENV/bin/pip" install -q --disable-pip-version-check matplotlib
fi

server_bin() {
  case $1 in
    redis) command -v redis-server ;;
    valkey) find "$ROOT/target/test-servers" -name valkey-server -type f | head -n 1 ;;
  esac
}

DIR=""; LOADPID=""
cleanup() {
  [ -n "$LOADPID" ] && kill "$LOADPID" 2>/dev/null || true
  for p in "${PORTS[@]}"; do redis-cli -p $p shutdown nosave >/dev/null 2>&1 || true; done
  [ -z "$DIR" ] || rm -rf "$DIR"
}
trap cleanup EXIT

start_node() { # port
  mkdir -p "$DIR/$1"
  "$SERVER" --port $1 --bind 127.0.0.1 --dir "$DIR/$1" --daemonize yes --pidfile "$DIR/$1/pid" \
    --logfile "$DIR/$1/log" --cluster-enabled yes --cluster-config-file nodes.conf \
    --cluster-node-timeout 2000 --save '' --appendonly no --dbfilename dump.rdb \
    --loadmodule "$MOD" >/dev/null
  for _ in $(seq 200); do redis-cli -p $1 ping 2>/dev/null | grep -q PONG && return; sleep 0.05; done
  echo "node $1 did not start" >&2; tail "$DIR/$1/log" >&2; exit 1
}
pid_of() { cat "$DIR/$1/pid" 2>/dev/null || true; }
cpu_s() { [ -n "${1:-}" ] && [ -r /proc/$1/stat ] && awk -v t=$(getconf CLK_TCK) '{printf "%.2f", ($14+$15)/t}' /proc/$1/stat || echo ""; }
# RSS in bytes; the product is taken by the shell (mawk prints a number of 2^31 or more as 2.1e+09).
rss_b() { local kb; kb=$([ -n "${1:-}" ] && awk '/^VmRSS/{print $2}' /proc/$1/status 2>/dev/null); [ -n "$kb" ] && echo $((kb * 1024)) || echo ""; }
info_field() { { redis-cli -p $1 info $2 2>/dev/null || true; } | tr -d '\r' | awk -F: -v f=$3 '$1==f{print $2}'; }
role() { info_field $1 replication role; }
cluster_ok() {
  for p in "$@"; do
    redis-cli -p $p cluster info 2>/dev/null | grep -q 'cluster_state:ok' || return 1
  done
}
wait_until() { # seconds cmd...
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -lt $end ] || return 1; sleep 0.2; done
}
masters() { for p in "${PORTS[@]}"; do [ "$(role $p)" = master ] && echo $p; done; true; }
live_port() { for p in "${PORTS[@]}"; do redis-cli -p $p ping 2>/dev/null | grep -q PONG && { echo $p; return; }; done; }
present() { # generator args...: "ones total" of bfctl exists over those ids
  "$GEN" "$@" | "$BF" --url redis://127.0.0.1:$(live_port) exists clicks - \
    | awk '{s+=$1; n++} END{print s+0, n+0}'
}
all_replicas_synced() { # every master has a replica past its initial sync (state=online)
  for p in $(masters); do
    info_field $p replication slave0 | grep -q 'state=online' || return 1
  done
}

master_of_slot() { # slot: the port of the master serving it
  redis-cli -p $(live_port) cluster nodes | awk -v s=$1 '$3 ~ /master/ {
    for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1];
      if (s >= r[1] && s <= r[2]) { split($2, a, "[:@]"); print a[2] } } }'
}
has_migrateslots() { # Valkey 9's atomic slot migration (COMMAND INFO is empty for an unknown one)
  redis-cli -p $PORT0 command info 'cluster|migrateslots' | grep -qi migrateslots
}
export_state() { # port: the state of the newest export job of CLUSTER GETSLOTMIGRATIONS on it
  redis-cli -p $1 cluster getslotmigrations | awk '$0 == "operation" {getline; op = $0}
    $0 == "state" {getline; if (op == "EXPORT" && s == "") s = $0} END{print s}'
}
start_cluster() { # 3 masters + 3 replicas on PORTS, every replica in sync
  for p in "${PORTS[@]}"; do start_node $p; done
  redis-cli --cluster create $(printf '127.0.0.1:%s ' "${PORTS[@]}") --cluster-replicas 1 \
    --cluster-yes >/dev/null
  wait_until 60 cluster_ok "${PORTS[@]}" || { say "cluster not ok"; return 1; }
  wait_until 60 all_replicas_synced || { say "replicas not attached"; return 1; }
  sleep 1
}
csv_header() { # the CSV's first line
  local head="t_s,phase,items_sent,items_per_s,bfctl_cpu_s"
  for p in "${PORTS[@]}"; do head="$head,used_memory_$p,rss_$p,cpu_s_$p,role_$p,backlog_$p"; done
  echo "$head"
}
csv_row() { # t_s phase sent rate bfctl_pid: one CSV line of every node's memory, RSS, CPU and role
  local row="$1,$2,$3,$4,$(cpu_s $5)"
  for p in "${PORTS[@]}"; do
    local pid; pid=$(pid_of $p)
    kill -0 "$pid" 2>/dev/null || pid=""
    local mem; mem=$({ redis-cli -p $p info memory 2>/dev/null || true; } | tr -d '\r')
    row="$row,$(awk -F: '$1 == "used_memory" {print $2}' <<<"$mem"),$(rss_b $pid),$(cpu_s $pid),$(role $p)"
    row="$row,$(awk -F: '$1 == "mem_replication_backlog" {print $2}' <<<"$mem")"
  done
  echo "$row"
}

# A run's set-up: SERVER (server `name`'s binary), DIR (a fresh data dir under OUT), VERSION,
# the log `log` emptied, and say (echo and log).
prepare_run() { # name log
  SERVER=$(server_bin $1)
  [ -x "$SERVER" ] || { echo "no $1 server found" >&2; return 1; }
  DIR="$(mktemp -d "$OUT/data.XXXXXX")"
  VERSION=$("$SERVER" --version | cut -d' ' -f1-3)
  RUN_LOG=$2
  : > "$RUN_LOG"
  say() { echo "$*" | tee -a "$RUN_LOG"; }
}

run_one() { # server name
  local name=$1
  local tag="$name-$N" csv="$OUT/seed-$name.csv" log="$OUT/seed-$name.log"
  prepare_run $name "$log" || return 1
  say "== $VERSION, N=$N, commit $COMMIT, $(date -u +%FT%TZ)"
  start_cluster || return 1
  "$BF" --url redis://127.0.0.1:$PORT0 reserve clicks 1e-9 $N --partitions 16 --nonscaling >>"$log"

  # The master of partition 0 (when the kill comes: the migration may have moved it) is killed.
  local key0 slot0 victim
  key0=$(redis-cli -c -p $PORT0 bf.info clicks | sed -n '/Partition keys/{n;p}')
  slot0=$(redis-cli -p $PORT0 cluster keyslot "$key0")

  local progress="$DIR/progress"
  csv_header > "$csv"
  echo 0 > "$progress"
  local t0=$SECONDS start_ns; start_ns=$(date +%s%N)
  ( set +e; "$GEN" $N --progress "$progress" \
      | "$BF" --url redis://127.0.0.1:$PORT0 load clicks - --wait 1 >"$DIR/load.out" 2>"$DIR/load.err"
    echo "${PIPESTATUS[1]}" > "$DIR/load.rc" ) &
  LOADPID=$!
  sleep 0.5
  local bfpid; bfpid=$(pgrep -n -P $LOADPID -f "$BF" || true)
  [ -n "$bfpid" ] || bfpid=$(pgrep -n -f "$BF --url redis://127.0.0.1:$PORT0 load clicks" || true)
  local last_sent=0 last_t; last_t=$(date +%s%N) phase=load killed_at="" kill_sent="" restarted=""
  local mig=none mig_from="" mig_to="" mig_t0="" mig_sent0="" mig_sent1=""
  has_migrateslots && mig=pending
  local next=$(( $(date +%s) + EVERY ))
  while kill -0 $LOADPID 2>/dev/null; do
    sleep 0.5
    local sent; sent=$(cat "$progress" 2>/dev/null || echo $last_sent)
    if [ $mig = pending ] && [ "$sent" -ge $((N / 4)) ]; then
      mig_from=$(master_of_slot 0); mig_to=$(master_of_slot 16383)
      mig_t0=$(date +%s%N); mig_sent0=$sent; mig=running; phase=migration
      say "CLUSTER MIGRATESLOTS SLOTSRANGE 0 4095 from $mig_from to $mig_to at $((SECONDS - t0)) s, $sent items sent: $(redis-cli -p $mig_from cluster migrateslots slotsrange 0 4095 node "$(redis-cli -p $mig_to cluster myid)")"
    fi
    if [ $mig = running ]; then
      local state; state=$(export_state $mig_from)
      case $state in
        success | failed | cancelled)
          mig=$state; mig_sent1=$sent; phase=load
          say "migration $state after $(awk -v t=$(date +%s%N) -v s=$mig_t0 'BEGIN{printf "%.2f", (t-s)/1e9}') s (polled every 0.5 s), $sent items sent; slot 0 now on $(master_of_slot 0)" ;;
      esac
    fi
    if [ -z "$killed_at" ] && [ $mig != running ] && [ "$sent" -ge $((N / 2)) ]; then
      victim=$(master_of_slot $slot0)
      kill -9 "$(pid_of $victim)"; rm -f "$DIR/$victim/pid"; killed_at=$(date +%s); kill_sent=$sent; phase=failover
      say "kill -9 master $victim (partition 0's slot $slot0) at $((SECONDS - t0)) s, $sent items sent"
    fi
    if [ -n "$killed_at" ] && [ -z "$restarted" ] && [ "$RESTART_AFTER" != never ] \
       && [ $(( $(date +%s) - killed_at )) -ge "$RESTART_AFTER" ]; then
      start_node $victim; restarted=1; phase=rejoin
      say "killed node $victim started again at $((SECONDS - t0)) s"
    fi
    [ "$(date +%s)" -ge $next ] || continue
    next=$((next + EVERY))
    local now; now=$(date +%s%N)
    local rate; rate=$(awk -v a=$sent -v b=$last_sent -v t=$now -v u=$last_t 'BEGIN{printf "%.0f", (a-b)/((t-u)/1e9)}')
    csv_row "$(awk -v t=$now -v s=$start_ns 'BEGIN{printf "%.1f", (t-s)/1e9}')" $phase $sent $rate "$bfpid" >> "$csv"
    last_sent=$sent; last_t=$now
  done
  wait $LOADPID || true; LOADPID=""
  local secs; secs=$(awk -v t=$(date +%s%N) -v s=$start_ns 'BEGIN{printf "%.1f", (t-s)/1e9}')
  say "load exit $(cat "$DIR/load.rc"): $(cat "$DIR/load.out") $(tail -c 600 "$DIR/load.err")"
  say "load wall ${secs} s, $(awk -v n=$N -v s=$secs 'BEGIN{printf "%.0f", n/s}') items/s over the whole run"
  if [ -n "$killed_at" ] && [ -z "$restarted" ] && [ "$RESTART_AFTER" != never ]; then
    start_node $victim
  fi
  wait_until 120 cluster_ok $(for p in "${PORTS[@]}"; do kill -0 "$(pid_of $p)" 2>/dev/null && echo $p; done) || say "cluster not ok after the load"
  wait_until 120 all_replicas_synced || say "a master is without a replica after the load"
  say "masters after the load: $(masters | tr '\n' ' ')"
  for p in "${PORTS[@]}"; do
    say "node $p $(role $p): used_memory $(info_field $p memory used_memory) rss $(rss_b $(pid_of $p)) cpu_s $(cpu_s $(pid_of $p))"
  done

  # Acknowledged items: a strided sample, and every item sent around the kill.
  local stride=$(( N > CHECK ? N / CHECK : 1 ))
  say "sample (every ${stride}th id): $(present $N --stride $stride) (present total)"
  if [ -n "$kill_sent" ]; then
    local lo=$(( kill_sent > KILL_SPAN ? kill_sent - KILL_SPAN : 0 )) hi=$(( kill_sent + KILL_SPAN ))
    [ $hi -le $N ] || hi=$N
    say "around the kill (ids $lo..$hi): $(present $N --from $lo --to $hi) (present total)"
  fi
  if [ -n "$mig_sent1" ]; then
    local lo=$(( mig_sent0 > KILL_SPAN ? mig_sent0 - KILL_SPAN : 0 )) hi=$(( mig_sent1 + KILL_SPAN ))
    [ $hi -le $N ] || hi=$N
    say "around the migration (ids $lo..$hi): $(present $N --from $lo --to $hi) (present total)"
  fi
  say "false positives over $FP never-added ids: $(present $N --from $N --to $((N + FP)) | awk '{print $1}')"

  # BGSAVE on each master in turn.
  for p in $(masters); do
    local pid rss0 peak=0 t1 rdb
    pid=$(pid_of $p); rss0=$(rss_b $pid)
    t1=$(date +%s%N)
    redis-cli -p $p bgsave >/dev/null
    while [ "$(info_field $p persistence rdb_bgsave_in_progress)" != 0 ]; do
      local r; r=$(rss_b $pid); [ "${r:-0}" -gt $peak ] && peak=$r
      for c in $(pgrep -P $pid 2>/dev/null); do r=$(rss_b $c); [ "${r:-0}" -gt 0 ] && echo "$r" > "$DIR/child.$p"; done
      sleep 0.1
    done
    rdb=$(stat -c %s "$DIR/$p/dump.rdb" 2>/dev/null || echo 0)
    say "BGSAVE $p: $(awk -v t=$(date +%s%N) -v s=$t1 'BEGIN{printf "%.1f", (t-s)/1e9}') s, latest_fork_usec $(info_field $p stats latest_fork_usec), rss before $rss0, peak parent rss growth $(( peak > rss0 ? peak - rss0 : 0 )), child rss $(cat "$DIR/child.$p" 2>/dev/null || echo ?), rdb_last_cow_size $(info_field $p persistence rdb_last_cow_size), rdb $rdb bytes, status $(info_field $p persistence rdb_last_bgsave_status)"
  done

  # Whole-cluster restart.
  for p in "${PORTS[@]}"; do redis-cli -p $p shutdown save >/dev/null 2>&1 || true; done
  for p in "${PORTS[@]}"; do wait_until 60 bash -c "! kill -0 $(pid_of $p) 2>/dev/null" || true; done
  local r0; r0=$(date +%s%N)
  for p in "${PORTS[@]}"; do start_node $p; done
  until "$BF" --url redis://127.0.0.1:$(live_port) info clicks 2>/dev/null | grep -q "all 16 partitions exist"; do
    [ $(( ($(date +%s%N) - r0) / 1000000000 )) -lt 300 ] || { say "no full info after 300 s"; break; }
    sleep 0.2
  done
  say "restart: $(awk -v t=$(date +%s%N) -v s=$r0 'BEGIN{printf "%.1f", (t-s)/1e9}') s until bfctl info clicks reports all 16 partitions"
  say "after the restart, sample: $(present $N --stride $stride) (present total)"
  "$BF" --url redis://127.0.0.1:$(live_port) info clicks | tail -n 3 >> "$log"

  "$VENV/bin/python" "$ROOT/bench/plot_seed.py" "$csv" "$OUT/seed-$name.png" \
    "$VERSION, N=$N, 3+3 cluster, --wait 1 — $(date -u +%F) commit $COMMIT"
  say "csv $csv, chart $OUT/seed-$name.png"
  for p in "${PORTS[@]}"; do redis-cli -p $p shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$DIR"; DIR=""
}

# The window day (SEED_MODE=window): the same N clicks replayed at their event times into a
# partitioned window filter, one day of 144 windows of W ms ending SEED_WINDOW_PACE s + W - 5 s
# after the start. A window filter reads by the server's clock and refuses writes more than W ahead
# of it, so only a day that ends near the clock can be read at its end: with the pace close to the
# load's duration, the last window is still inside the window when the load ends.
day_line() { # unix_ms: the first line of the day at or after that time (clicks: ts = S + n·DAY/N)
  awk -v t=$1 -v s=$DAY_START -v n=$N 'BEGIN{x = (t - s) * n / 86400000; if (x < 0) x = 0;
    if (x > n) x = n; printf "%.0f", x}'
}
server_ms() { redis-cli -p $(live_port) time | awk 'NR==1{s=$1} NR==2{printf "%d%03d", s, $1/1000}'; }
slot_loads() { # "max slot items / slot capacity" over every partition's four slots (BF.DEBUG)
  local keys k port worst=0
  keys=$(redis-cli -c -p $PORT0 bf.info clicks | sed -n '/Partition keys/,$p' | tail -n +2)
  for k in $keys; do
    port=$(master_of_slot $(redis-cli -p $PORT0 cluster keyslot "$k"))
    worst=$(redis-cli -p $port bf.debug "$k" | awk -v w=$worst -F'[: ]' '/capacity:/{
      for (i = 1; i < NF; i++) { if ($i == "capacity") c = $(i+1); if ($i == "size") z = $(i+1) }
      if (c > 0 && z / c > w) w = z / c } END{printf "%.3f", w}')
  done
  echo "$worst"
}

run_window() { # server name
  local name=$1
  local csv="$OUT/seed-window-$name.csv" log="$OUT/seed-window-$name.log"
  prepare_run $name "$log" || return 1
  say "== window day: $VERSION, N=$N, $WINDOW_CAP clicks per ${WINDOW_MS} ms window at 1e-9, commit $COMMIT, $(date -u +%FT%TZ)"
  start_cluster || return 1
  "$BF" --url redis://127.0.0.1:$PORT0 reserve clicks 1e-9 $WINDOW_CAP --window $WINDOW_MS --partitions 16 >>"$log"
  DAY_START=$(( $(server_ms) + PACE * 1000 + WINDOW_MS - 5000 - 86400000 ))
  say "day: ts = $DAY_START + n * 86400000 / $N (ending ${PACE} s + W - 5 s from now), $PROBES segments with a slot-load probe after each"

  local progress="$DIR/progress" base="$DIR/base"
  csv_header > "$csv"
  echo 0 > "$progress"; echo 0 > "$base"; echo load > "$DIR/phase"
  local start_ns; start_ns=$(date +%s%N)
  ( set +e
    for i in $(seq 1 $PROBES); do
      local a=$(( N * (i - 1) / PROBES )) b=$(( N * i / PROBES ))
      # No write may be more than W ahead of the clock: a segment starts once its last click is
      # within W - 5 s of it (only the last waits, when the load runs ahead of SEED_WINDOW_PACE).
      echo wait > "$DIR/phase"
      local gate=$(( DAY_START + (b - 1) * 86400000 / N - WINDOW_MS + 5000 ))
      while [ "$(server_ms)" -lt $gate ]; do sleep 0.2; done
      echo 0 > "$progress"; echo $a > "$base"; echo load > "$DIR/phase"
      "$GEN" $N --from $a --to $b --timestamped --day-start $DAY_START --progress "$progress" \
        | "$BF" --url redis://127.0.0.1:$PORT0 load clicks - --timestamped --wait 1 >>"$DIR/load.out" 2>>"$DIR/load.err"
      local rc=${PIPESTATUS[1]}
      echo "$rc" > "$DIR/load.rc"
      [ "$rc" = 0 ] || exit
      echo probe > "$DIR/phase"
      echo "probe after line $b (hour $(awk -v b=$b -v n=$N 'BEGIN{printf "%.1f", 24 * b / n}') of the day): fullest slot holds $(slot_loads)x its capacity" >> "$DIR/probes"
    done ) &
  LOADPID=$!
  local last_sent=0 last_t; last_t=$(date +%s%N)
  local next=$(( $(date +%s) + EVERY ))
  while kill -0 $LOADPID 2>/dev/null; do
    sleep 0.5
    [ "$(date +%s)" -ge $next ] || continue
    next=$((next + EVERY))
    local sent now rate bfpid
    sent=$(( $(cat "$base" 2>/dev/null || echo 0) + $(cat "$progress" 2>/dev/null || echo 0) ))
    now=$(date +%s%N)
    rate=$(awk -v a=$sent -v b=$last_sent -v t=$now -v u=$last_t 'BEGIN{printf "%.0f", (a-b)/((t-u)/1e9)}')
    bfpid=$(pgrep -n -f "$BF --url redis://127.0.0.1:$PORT0 load clicks" || true)
    csv_row "$(awk -v t=$now -v s=$start_ns 'BEGIN{printf "%.1f", (t-s)/1e9}')" "$(cat "$DIR/phase")" $sent $rate "$bfpid" >> "$csv"
    last_sent=$sent; last_t=$now
  done
  wait $LOADPID || true; LOADPID=""
  local secs; secs=$(awk -v t=$(date +%s%N) -v s=$start_ns 'BEGIN{printf "%.1f", (t-s)/1e9}')
  say "load exit $(cat "$DIR/load.rc" 2>/dev/null): $(tr '\n' ' ' < "$DIR/load.out") $(tail -c 600 "$DIR/load.err")"
  say "load wall ${secs} s (with the probes), $(awk -v n=$N -v s=$secs 'BEGIN{printf "%.0f", n/s}') items/s"
  cat "$DIR/probes" 2>/dev/null | tee -a "$log"
  # Memory is fixed once the filter exists: the spread of each master's and replica's used_memory,
  # RSS, and used_memory less the replication backlog (which fills up to repl-backlog-size as the
  # writes stream by: 1 MB on Redis 7.0, 10 MB on Valkey 9) over the samples taken after the day's
  # first window was sent.
  say "$(awk -F, -v first=$((N / 144)) 'NR==1{for (i = 1; i <= NF; i++) h[i] = $i; next}
    $3 >= first { for (i = 6; i <= NF; i++) if (h[i] ~ /^(used_memory|rss)_/ && $i != "") {
        v[h[i]] = $i; if (h[i] ~ /^used/) v["less_backlog_" substr(h[i], 13)] = $i - $(i + 4) }
      for (k in v) { if (!(k in lo) || v[k] < lo[k]) lo[k] = v[k]; if (v[k] > hi[k]) hi[k] = v[k] }
      n++ }
    END{ printf "memory after the first window (%d samples), max/min and max:", n;
      for (i = 6; i <= NF; i++) if (h[i] ~ /^used_memory_/) { p = substr(h[i], 13);
        printf "\n  node %s: used_memory %.3f (%.1f MiB), less the backlog %.3f (%.1f MiB), rss %.3f (%.1f MiB)", p,
          hi[h[i]] / lo[h[i]], hi[h[i]] / 2^20, hi["less_backlog_" p] / lo["less_backlog_" p],
          hi["less_backlog_" p] / 2^20, hi["rss_" p] / lo["rss_" p], hi["rss_" p] / 2^20 } }' "$csv")"

  # At the end of the day: reads go by max(clock, the filter's last write).
  local t last_ts first_recent
  t=$(server_ms); last_ts=$(( DAY_START + 86400000 - 86400000 / N ))
  [ $t -ge $last_ts ] || t=$last_ts
  first_recent=$(day_line $(( t - WINDOW_MS + 10000 )))
  if [ $first_recent -lt $N ]; then
    say "inside the window (lines $first_recent..$N, added less than W - 10 s before the read): $(present $N --from $first_recent --day-start $DAY_START) (present total)"
  else
    say "inside the window: none (the load ended more than W after the day's last click)"
  fi
  local h0 h1
  h0=$(day_line $(( t - 3600000 - WINDOW_MS ))); h1=$(day_line $(( t - 3600000 )))
  say "an hour earlier (lines $h0..$h1, past the window's reach of 4 generations): $(present $N --from $h0 --to $h1 --day-start $DAY_START) (present total: false positives)"
  say "false positives over $FP never-added ids: $(present $N --from $N --to $((N + FP)) | awk '{print $1}')"
  for p in "${PORTS[@]}"; do
    say "node $p $(role $p): used_memory $(info_field $p memory used_memory) rss $(rss_b $(pid_of $p)) cpu_s $(cpu_s $(pid_of $p))"
  done

  "$VENV/bin/python" "$ROOT/bench/plot_seed.py" "$csv" "$OUT/seed-window-$name.png" \
    "$VERSION, window day, N=$N, $WINDOW_CAP per ${WINDOW_MS} ms at 1e-9, 3+3 cluster, --wait 1 — $(date -u +%F) commit $COMMIT"
  say "csv $csv, chart $OUT/seed-window-$name.png"
  for p in "${PORTS[@]}"; do redis-cli -p $p shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$DIR"; DIR=""
}

for mode in $MODES; do
  for s in $SERVERS; do
    case $mode in
      day) run_one $s ;;
      window) run_window $s ;;
    esac
  done
done
