#!/usr/bin/env bash
# Scale-out of a partitioned filter (not run in CI): `bfctl load` of N random items into
# `bfctl reserve f 1e-7 N --partitions 16`, ROUNDS times, on one redis-server and on a cluster of
# two masters (slots 0-8191 and 8192-16383, no replicas), each in a fresh server. Prints, per
# round, each server's CPU (utime+stime from /proc/PID/stat, 10 ms ticks) and the items it holds
# (BF.CARD of its partitions), and bfctl's own CPU (user+sys). CPU per item of a master of the
# cluster against the one server's is the scale-out figure.
#
# Usage: bash bench/scale_out.sh   env: N (3000000) ROUNDS (3) PORT (7501: uses PORT..PORT+2)
# Needs target/release/librustbloom.so and bfctl (make build), redis-server/redis-cli, /usr/bin/time.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOD="${RUSTBLOOM_MODULE:-$ROOT/target/release/librustbloom.so}"
BF="$ROOT/target/release/bfctl"
N=${N:-3000000}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-7501}
DIR="$(mktemp -d /tmp/rustbloom-scale.XXXXXX)"
S1=$PORT; S2=$((PORT + 1)); S3=$((PORT + 2))
python3 -c "
import random
r=random.Random(20261124)
with open('$DIR/items.txt', 'w') as f:
    for i in range($N): f.write('%016x\n' % r.getrandbits(64))
"
cpu() { awk '{print $14+$15}' /proc/$1/stat; }   # ticks
start() { # port cluster
  rm -rf "$DIR/$1"; mkdir -p "$DIR/$1"
  redis-server --port $1 --bind 127.0.0.1 --dir "$DIR/$1" --save '' --appendonly no --daemonize yes \
    --cluster-enabled $2 --cluster-config-file nodes.conf --loadmodule $MOD --pidfile "$DIR/$1/pid" >/dev/null
  for i in $(seq 100); do redis-cli -p $1 ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
  cat "$DIR/$1/pid"
}
stop() { redis-cli -p $1 shutdown nosave >/dev/null 2>&1 || true; }
trap 'stop $S1; stop $S2; stop $S3; rm -rf "$DIR"' EXIT
for round in $(seq "$ROUNDS"); do
  # one server
  P=$(start $S1 no)
  $BF --url redis://127.0.0.1:$S1 -q reserve f 0.0000001 $N --partitions 16 >/dev/null
  c0=$(cpu $P); /usr/bin/time -f "%U %S" -o $DIR/bft $BF --url redis://127.0.0.1:$S1 -q load f $DIR/items.txt >/dev/null 2>&1; c1=$(cpu $P)
  read u s < $DIR/bft
  echo "round $round single: server $(( (c1-c0)*10 )) ms, bfctl $(awk -v u=$u -v s=$s 'BEGIN{print (u+s)*1000}') ms"
  stop $S1; sleep 0.3
  # two masters
  A=$(start $S2 yes); B=$(start $S3 yes)
  redis-cli -p $S2 cluster addslotsrange 0 8191 >/dev/null; redis-cli -p $S3 cluster addslotsrange 8192 16383 >/dev/null
  redis-cli -p $S2 cluster meet 127.0.0.1 $S3 >/dev/null
  for i in $(seq 200); do
    [ "$(redis-cli -p $S2 cluster info | grep -c 'cluster_state:ok')" = 1 ] && [ "$(redis-cli -p $S3 cluster info | grep -c 'cluster_state:ok')" = 1 ] && [ "$(redis-cli -p $S2 cluster nodes | wc -l)" = 2 ] && break; sleep 0.1; done
  sleep 1
  $BF --url redis://127.0.0.1:$S2 -q reserve f 0.0000001 $N --partitions 16 >/dev/null
  a0=$(cpu $A); b0=$(cpu $B)
  /usr/bin/time -f "%U %S" -o $DIR/bft $BF --url redis://127.0.0.1:$S2 -q load f $DIR/items.txt >/dev/null 2>&1
  a1=$(cpu $A); b1=$(cpu $B); read u s < $DIR/bft
  ia=0; ib=0
  for k in $(redis-cli -p $S2 bf.info f | sed -n '/Partition keys/,$p' | tail -n +2); do
    n=$(redis-cli -c -p $S2 bf.card "$k"); slot=$(redis-cli -p $S2 cluster keyslot "$k")
    if [ $slot -le 8191 ]; then ia=$((ia+n)); else ib=$((ib+n)); fi
  done
  echo "round $round two: A $(( (a1-a0)*10 )) ms for $ia items, B $(( (b1-b0)*10 )) ms for $ib items, bfctl $(awk -v u=$u -v s=$s 'BEGIN{print (u+s)*1000}') ms"
  stop $S2; stop $S3; sleep 0.3
done
