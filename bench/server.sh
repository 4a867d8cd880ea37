#!/usr/bin/env bash
# Server-side load bench of the module (issue 6, item 1).
#
# Starts its own redis-server with target/release/librustbloom.so on a free port in a temporary
# directory (always stopped on exit), pins it to core 1 and redis-benchmark to core 0 when there
# are 2+ cores and taskset exists, and measures in interleaved rounds:
#
#   baselines  PFADD of 1 element (-P 1, -P 64), PFADD of 100 elements (-P 64), SET (-P 1, -P 64)
#   module     BF.ADD, BF.EXISTS (-P 1, -P 64); BF.MADD, BF.MEXISTS of 100 items (-P 64)
#              on a filter reserved for 10M items at 1% and one reserved for 100M at 1%
#
# For every case: requests/s, items/s and the server's CPU µs per call = (utime+stime of the
# server from /proc/PID/stat, after − before) / requests. /proc/PID/stat counts in clock ticks
# (10 ms), so the same figure from the scheduler's nanosecond counters (/proc/PID/task/*/schedstat)
# is shown next to it. Each figure is the median over the rounds, and each ratio is the median of
# the per-round ratios to the matching PFADD baseline of the same round:
#   BF.ADD / BF.EXISTS / SET at -P p  ->  PFADD 1 element at -P p
#   BF.MADD / BF.MEXISTS (100 items)  ->  PFADD 100 elements
#
# Workload: items are redis-benchmark's __rand_int__ (12 digits) drawn from [0, 2·capacity).
# Each filter (BF.RESERVE key 0.01 capacity: scaling, expansion 2) is prefilled so that during its
# lookups it is ~80-85% full and ~43% of looked-up items are members; about 60% of the adds are new
# items. Filters are recreated between rounds when needed so they never grow (see "rounds" below;
# checked after every round via BF.INFO).
#
# Usage: bash bench/server.sh            (ROUNDS=3 by default; ~3 minutes, 35 s of it prefilling the 100M filter)
#   env: ROUNDS=n  SCALE=f (multiplies request counts)  RUSTBLOOM_MODULE=path
#        CAPS="10000000 100000000" (the capacities; smaller ones for a quick try of the script)
# Output: a markdown table on stdout; raw per-round figures in target/bench/server-raw.tsv.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE="${RUSTBLOOM_MODULE:-$ROOT/target/release/librustbloom.so}"
ROUNDS="${ROUNDS:-3}"
SCALE="${SCALE:-1}"
CLIENTS=50
OUT_DIR="$ROOT/target/bench"
RAW="$OUT_DIR/server-raw.tsv"

for tool in redis-server redis-benchmark redis-cli awk; do
    command -v "$tool" >/dev/null || { echo "server.sh: $tool not found (apt-get install redis-server redis-tools)" >&2; exit 1; }
done
[[ -f "$MODULE" ]] || { echo "server.sh: module not found at $MODULE (cargo build --release)" >&2; exit 1; }
mkdir -p "$OUT_DIR"

# ---- pinning ------------------------------------------------------------------------------------
SERVER_PIN=()
CLIENT_PIN=()
CORES="$(nproc 2>/dev/null || echo 1)"
if [[ "$CORES" -ge 2 ]] && command -v taskset >/dev/null; then
    SERVER_PIN=(taskset -c 1)
    CLIENT_PIN=(taskset -c 0)
    PINNING="server on core 1, redis-benchmark on core 0"
else
    PINNING="not pinned (${CORES} core(s) or no taskset)"
fi

# ---- server ---------------------------------------------------------------------------------------
TMP="$(mktemp -d -t rustbloom-bench.XXXXXX)"
SERVER_PID=""
cleanup() {
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT=""
for _ in $(seq 20); do
    candidate=$(( 20000 + RANDOM % 30000 ))
    redis-cli -p "$candidate" ping >/dev/null 2>&1 && continue   # somebody is there
    "${SERVER_PIN[@]}" redis-server --port "$candidate" --bind 127.0.0.1 --save "" --appendonly no \
        --protected-mode no --dir "$TMP" --logfile "$TMP/redis.log" \
        --loadmodule "$MODULE" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        if redis-cli -p "$candidate" ping >/dev/null 2>&1; then PORT="$candidate"; break; fi
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.05
    done
    [[ -n "$PORT" ]] && break
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
done
if [[ -z "$PORT" ]]; then
    echo "server.sh: could not start redis-server with the module; log:" >&2
    cat "$TMP/redis.log" >&2 || true
    exit 1
fi
cli() { redis-cli -p "$PORT" "$@"; }

# ---- measurement ----------------------------------------------------------------------------------
CLK_TCK="$(getconf CLK_TCK)"

# utime+stime of the server in clock ticks (fields 14 and 15, counted after the ")" of comm).
stat_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$SERVER_PID/stat"; }
# Nanoseconds on CPU, summed over the server's threads.
sched_ns() { cat /proc/"$SERVER_PID"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }

# Items per call of a command line: the number of __rand_int__ placeholders.
RAND100=()
for _ in $(seq 100); do RAND100+=(__rand_int__); done

# run ROUND CASE FILTER PIPELINE ITEMS REQUESTS KEYSPACE COMMAND...
run() {
    local round=$1 case=$2 filter=$3 pipeline=$4 items=$5 requests=$6 keyspace=$7
    shift 7
    local t0 s0 t1 s1 out rps
    t0=$(stat_ticks); s0=$(sched_ns)
    out=$("${CLIENT_PIN[@]}" redis-benchmark -p "$PORT" -c "$CLIENTS" -n "$requests" -P "$pipeline" \
        -r "$keyspace" --csv "$@" 2>/dev/null | tail -n 1)
    t1=$(stat_ticks); s1=$(sched_ns)
    rps=$(echo "$out" | awk -F'","' '{ print $2 }')
    [[ -n "$rps" ]] || { echo "server.sh: redis-benchmark failed for $case: $out" >&2; exit 1; }
    awk -v r="$round" -v c="$case" -v f="$filter" -v p="$pipeline" -v i="$items" -v n="$requests" \
        -v rps="$rps" -v dt=$((t1 - t0)) -v ds=$((s1 - s0)) -v hz="$CLK_TCK" 'BEGIN {
        printf "%s\t%s\t%s\t%s\t%s\t%d\t%.2f\t%.2f\t%.4f\t%.4f\n", r, c, f, p, i, n, rps, rps * i,
            dt * 1e6 / hz / n, ds / 1e3 / n
    }' >>"$RAW"
    printf '  round %s  %-10s %-5s -P %-3s %9.0f req/s\n' "$round" "$case" "$filter" "$pipeline" "$rps" >&2
}

read -r -a CAPS <<<"${CAPS:-10000000 100000000}"   # filter capacities (override for a quick try)
label() { case $1 in 10000000) echo 10M ;; 100000000) echo 100M ;; *) echo "$1" ;; esac; }

echo "rustbloom server bench: redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on port $PORT, $PINNING, $ROUNDS rounds" >&2
printf 'round\tcase\tfilter\tpipeline\titems_per_call\trequests\trps\titems_per_s\tcpu_us_stat\tcpu_us_sched\n' >"$RAW"

# ---- rounds ---------------------------------------------------------------------------------------
# Filter state: every item is a draw from [0, 2·C) (C = capacity), so after D draws the filter holds
# about 2C·(1 − e^(−D/2C)) distinct items. A round adds A = 0.01C + 0.2C + 0.4C draws (BF.ADD -P 1,
# BF.ADD -P 64, BF.MADD; each capped at its 10M-filter count: 0.1M, 2M, 4M). Before a round, a
# filter that cannot take the coming rounds' draws is recreated and prefilled (untimed) with
# 1.11C − k·A draws, k = the rounds it must then last (≥ 0.5C prefill), so by its lookups it has
# seen ~1.11C draws (~85% of its capacity full, ~43% of looked-up items are members) and it never
# grows. 10M: recreated every round (5M draws). 100M: prefilled once (~93M draws), ~78-85% full.
reset_filter() {
    local cap=$1 key=$2 draws=$3 started
    started=$(date +%s.%N)
    cli DEL "$key" >/dev/null
    cli BF.RESERVE "$key" 0.01 "$cap" >/dev/null
    "${CLIENT_PIN[@]}" redis-benchmark -p "$PORT" -c "$CLIENTS" -n $((draws / 100)) -P 64 -r $((2 * cap)) \
        -q BF.MADD "$key" "${RAND100[@]}" >/dev/null 2>&1
    echo "  prefilled $key with $draws draws in $(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s" >&2
}
min() { if (( $1 < $2 )); then echo "$1"; else echo "$2"; fi; }

# Baselines and lookups: counts sized for ≥ ~0.5 s of server CPU each (the stat clock ticks
# every 10 ms). SCALE multiplies these, not the adds.
scaled() { awk -v n="$1" -v s="$SCALE" 'BEGIN { printf "%d", n * s }'; }
N_P1=$(scaled 100000)
N_P64=$(scaled 2000000)
N_MULTI=$(scaled 100000)

declare -A DRAWS_LEFT=()
for round in $(seq "$ROUNDS"); do
    run "$round" PFADD-1   -    1  1   "$N_P1"    200000000 PFADD hll:1 __rand_int__
    run "$round" PFADD-1   -    64 1   "$N_P64"   200000000 PFADD hll:1 __rand_int__
    run "$round" PFADD-100 -    64 100 "$N_MULTI" 200000000 PFADD hll:100 "${RAND100[@]}"
    run "$round" SET       -    1  1   "$N_P1"    100000    SET key:__rand_int__ xxx
    run "$round" SET       -    64 1   "$N_P64"   100000    SET key:__rand_int__ xxx
    for cap in "${CAPS[@]}"; do
        f=$(label "$cap"); key="bf:$f"; ks=$((2 * cap))
        add1=$(min $((cap / 100)) 100000)
        add64=$(min $((cap / 5)) 2000000)
        madd=$(min $((cap / 250)) 40000)
        per_round=$((add1 + add64 + madd * 100))
        if (( ${DRAWS_LEFT[$key]:-0} < per_round )); then
            total=$((cap * 111 / 100))
            k=$(( (total - cap / 2) / per_round ))
            (( k < 1 )) && k=1
            left=$((ROUNDS - round + 1))
            (( k > left )) && k=$left
            reset_filter "$cap" "$key" $((total - k * per_round))
            DRAWS_LEFT[$key]=$((k * per_round))
        fi
        DRAWS_LEFT[$key]=$(( ${DRAWS_LEFT[$key]} - per_round ))
        run "$round" BF.ADD     "$f" 1  1   "$add1"    "$ks" BF.ADD "$key" __rand_int__
        run "$round" BF.ADD     "$f" 64 1   "$add64"   "$ks" BF.ADD "$key" __rand_int__
        run "$round" BF.MADD    "$f" 64 100 "$madd"    "$ks" BF.MADD "$key" "${RAND100[@]}"
        run "$round" BF.EXISTS  "$f" 1  1   "$N_P1"    "$ks" BF.EXISTS "$key" __rand_int__
        run "$round" BF.EXISTS  "$f" 64 1   "$N_P64"   "$ks" BF.EXISTS "$key" __rand_int__
        run "$round" BF.MEXISTS "$f" 64 100 "$N_MULTI" "$ks" BF.MEXISTS "$key" "${RAND100[@]}"
        layers=$(cli BF.INFO "$key" | awk 'prev == "Number of filters" { print } { prev = $0 }')
        [[ "$layers" == 1 ]] || echo "WARNING: $key grew to $layers layers during round $round; its figures are off" >&2
    done
done

# ---- state at the end -----------------------------------------------------------------------------
for cap in "${CAPS[@]}"; do
    key="bf:$(label "$cap")"
    echo "after the last round: $key: $(cli BF.INFO "$key" | paste -sd' ')" >&2
done
echo "server memory: $(cli INFO memory | awk -F: '/^used_memory_human/ { print $2 }' | tr -d '\r')" >&2

# ---- report ---------------------------------------------------------------------------------------
echo
echo "Server-side costs, median of $ROUNDS rounds ($PINNING; $CLIENTS clients; $(nproc) cores)."
echo "CPU µs/call = server utime+stime (/proc/PID/stat) / requests; 'sched' = same from schedstat (ns)."
echo
awk -F'\t' -v rounds="$ROUNDS" '
function median(arr, n,    i, j, t) {
    for (i = 2; i <= n; i++) { t = arr[i]; for (j = i - 1; j >= 1 && arr[j] > t; j--) arr[j + 1] = arr[j]; arr[j + 1] = t }
    return (n % 2) ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}
NR == 1 { next }
{
    id = $2 SUBSEP $3 SUBSEP $4
    if (!(id in seen)) { seen[id] = 1; order[++count] = id; items[id] = $5 }
    rps[id, $1] = $7; ips[id, $1] = $8; cpu[id, $1] = $9; sch[id, $1] = $10
}
END {
    print "| command | filter | -P | items/call | req/s | items/s | CPU µs/call | sched µs/call | baseline | req/s ÷ base | CPU ÷ base | sched ÷ base | target (CPU) |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    for (k = 1; k <= count; k++) {
        id = order[k]; split(id, part, SUBSEP); c = part[1]; f = part[2]; p = part[3]
        if (c == "PFADD-1" || c == "PFADD-100") base = ""
        else if (items[id] == 100) base = "PFADD-100" SUBSEP "-" SUBSEP p
        else base = "PFADD-1" SUBSEP "-" SUBSEP p
        delete a; delete b; delete d; delete e; delete g; delete h; delete q
        for (r = 1; r <= rounds; r++) {
            a[r] = rps[id, r]; b[r] = ips[id, r]; d[r] = cpu[id, r]; e[r] = sch[id, r]
            if (base != "") { g[r] = rps[id, r] / rps[base, r]; h[r] = cpu[id, r] / cpu[base, r]; q[r] = sch[id, r] / sch[base, r] }
        }
        line = sprintf("| %s | %s | %s | %d | %.0f | %.0f | %.3f | %.3f", c, f, p, items[id], median(a, rounds), median(b, rounds), median(d, rounds), median(e, rounds))
        if (base == "") { line = line " | — | — | — | — | baseline |" }
        else {
            split(base, bp, SUBSEP)
            cr = median(h, rounds); sr = median(q, rounds)
            target = ""
            if (c == "BF.ADD" || c == "BF.EXISTS") limit = 1.6
            else if (c == "BF.MADD" || c == "BF.MEXISTS") limit = (f == "10M") ? 1.3 : 1.6
            else limit = 0
            if (limit > 0) target = sprintf("≤ %.1f×: %s", limit, (cr <= limit) ? "met" : "NOT met")
            line = line sprintf(" | %s -P %s | %.2f | %.2f | %.2f | %s |", bp[1], bp[3], median(g, rounds), cr, sr, target)
        }
        print line
    }
}' "$RAW"
echo
echo "Raw per-round figures: $RAW"
