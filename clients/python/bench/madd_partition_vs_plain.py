"""Server CPU of BF.MADD into a partition key against the same BF.MADD into a plain filter of the
same shape (same ε, capacity, growth), on one server: what the module's routing check costs.

Both keys get the same items, 1000 per call, each item new (all routed to the partition, so the
partition accepts them). Rounds alternate A B B A ..., each timed from INFO commandstats after a
CONFIG RESETSTAT (server CPU only, no network); the ratio is taken per round pair, since the
machine may be shared and its speed drift between rounds.

    python madd_partition_vs_plain.py --port 6379 [--rounds 12 --calls 100]

With --only partition (or plain) it loads that key alone, for a profiler attached to the server
(`perf stat -e cycles,instructions -p PID -- python madd_partition_vs_plain.py --only plain`).
The server must have the rustbloom module loaded; the keys used are deleted first.
"""

import argparse
import itertools
import statistics

import redis

from rustbloom import partition_of

PARTITIONS = 2
ROUTING_SEED = 0x9E3779B97F4A7C15
PARTITION_KEY = b"{bench}madd/0"
PLAIN_KEY = b"{bench}madd-plain"
ITEMS_PER_CALL = 1000


def routed_items(count: int):
    """`count` items that all route to partition 0."""
    out = []
    for n in itertools.count():
        item = b"item:%d" % n
        if partition_of(item, ROUTING_SEED, PARTITIONS) == 0:
            out.append(item)
            if len(out) == count:
                return out


def madd_usec_per_call(client, key, batches) -> float:
    client.config_resetstat()
    for batch in batches:
        client.execute_command("BF.MADD", key, *batch)
    stats = client.info("commandstats")["cmdstat_bf.madd"]
    assert stats["calls"] == len(batches), stats
    return stats["usec"] / stats["calls"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=6379)
    ap.add_argument("--rounds", type=int, default=12, help="rounds per key (even)")
    ap.add_argument("--calls", type=int, default=100, help="BF.MADD calls per round")
    ap.add_argument("--error", type=float, default=0.01)
    ap.add_argument("--only", choices=["partition", "plain"])
    args = ap.parse_args()

    client = redis.Redis(port=args.port, socket_timeout=120)
    per_key = args.rounds * args.calls * ITEMS_PER_CALL
    capacity = per_key + 1
    client.delete(PARTITION_KEY, PLAIN_KEY)
    # The same filter seed for both, so both set the same bits.
    client.execute_command("BF.RESERVE", PARTITION_KEY, args.error, capacity, "SEED", 7,
                           "PARTITION", 0, PARTITIONS, ROUTING_SEED)
    client.execute_command("BF.RESERVE", PLAIN_KEY, args.error, capacity, "SEED", 7)

    items = routed_items(per_key)
    batches = [items[i : i + ITEMS_PER_CALL] for i in range(0, per_key, ITEMS_PER_CALL)]
    rounds = [batches[r * args.calls : (r + 1) * args.calls] for r in range(args.rounds)]
    if args.only:
        key = PARTITION_KEY if args.only == "partition" else PLAIN_KEY
        usec = [madd_usec_per_call(client, key, round_batches) for round_batches in rounds]
        print(f"{args.only}: median {statistics.median(usec):.1f} us/call over "
              f"{len(batches)} calls")
        client.delete(PARTITION_KEY, PLAIN_KEY)
        return

    partition_us, plain_us, ratios = [], [], []
    for r, round_batches in enumerate(rounds):
        # A B, then B A: neither key always runs first.
        order = [(PARTITION_KEY, partition_us), (PLAIN_KEY, plain_us)]
        if r % 2:
            order.reverse()
        for key, out in order:
            out.append(madd_usec_per_call(client, key, round_batches))
        ratios.append(partition_us[-1] / plain_us[-1])
        print(f"round {r:2}: partition {partition_us[-1]:8.1f} us/call   "
              f"plain {plain_us[-1]:8.1f} us/call   ratio {ratios[-1]:.3f}")

    for label, xs in (("partition", partition_us), ("plain", plain_us), ("ratio", ratios)):
        print(f"{label:9}: median {statistics.median(xs):8.3f}  min {min(xs):8.3f}  "
              f"max {max(xs):8.3f}")
    print(f"ratio of the means: {statistics.mean(partition_us) / statistics.mean(plain_us):.3f}")
    card = [client.execute_command("BF.CARD", k) for k in (PARTITION_KEY, PLAIN_KEY)]
    print(f"items counted: partition {card[0]}, plain {card[1]}")
    client.delete(PARTITION_KEY, PLAIN_KEY)


if __name__ == "__main__":
    main()
