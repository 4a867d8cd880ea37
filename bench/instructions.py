#!/usr/bin/env python3
"""Instructions per call of BF.* commands, counted by callgrind on a whole redis-server, beside
PFADD of the same items in the same server (the method of docs: zero, send pipelined, dump).

Usage: python3 bench/instructions.py [--quick] MODULE.so[=LABEL] ...
APPENDONLY=yes: the servers write an AOF (every write then replicated to it, as to a replica).
PHASES=window,0.000000001: only the phases whose names contain one of these (and the PFADDs they are
compared with).
Prints a markdown table: instructions per call and the ratio to PFADD of the same items.

What is counted is the server's work for the commands, held still so that a ratio repeats from run
to run:
- only the client's read handler (parsing, running and replying: `readQueryFromClient`) and
  `beforeSleep` (replies written, the AOF fed and flushed) are counted, not the timer's
  `serverCron` nor background threads: they run by the clock, and under callgrind a second covers
  ~50x less work than natively, so a phase takes in a cron run (its memory statistics alone are
  ~200,000 instructions) or not by chance;
- every key lives alone in its own database, so each command's key lookup walks a chain of one
  (with all keys in one small table, Redis' random hash seed puts some in a shared chain in some
  runs and not in others: up to ~100 instructions a call);
- single-call phases are measured in SERVERS servers (5 unless set) and the cheapest is shown:
  the seed also decides how long a chain a command's name walks in the command table. A module's
  commands, registered last, sit first in their chains; PFADD's name sits deeper in some servers
  (~80 instructions a call, in about half of them), so the cheapest of a few servers is
  PFADD's own cost, and the one figure that does not flatter the module.
Batches still move by ~1-2% with jemalloc's state (when its thread cache refills or flushes), for
PFADD as for BF.*."""
import os, random, shutil, subprocess, sys, tempfile, time

from redis_wire import Conn, free_port, resp

QUICK = "--quick" in sys.argv
ARGS = [a for a in sys.argv[1:] if a != "--quick"]
SINGLE = 2000 if QUICK else 20000
BATCHES = 20 if QUICK else 100
PRELOAD = 100_000
RATES = ["0.01", "0.0001", "0.0000001", "0.000000001"]
SERVER = os.environ.get("REDIS_SERVER", shutil.which("redis-server") or "redis-server")


rng = random.Random(7)
def words(n):
    return [b"w%016x" % rng.getrandbits(64) for _ in range(n)]


def phases():
    """(name, key, measured commands, calls, pfadd key of the same items)."""
    out = []
    singles = words(SINGLE)
    out.append(("PFADD", "hll", [resp("PFADD", "hll", w) for w in singles], SINGLE, None))
    out.append(("BF.ADD 1e-2", "f0.01", [resp("BF.ADD", "f0.01", w) for w in singles], SINGLE, "PFADD"))
    out.append(("BF.EXISTS 1e-2", "f0.01", [resp("BF.EXISTS", "f0.01", w) for w in words(SINGLE)], SINGLE, "PFADD"))
    for n in (1, 100, 1000):
        count = SINGLE if n == 1 else BATCHES
        items = [words(n) for _ in range(count)]
        fresh = [words(n) for _ in range(count)]
        out.append((f"PFADD-{n}", "hll", [resp("PFADD", "hll", *b) for b in items], count, None))
        for rate in RATES:
            out.append((f"BF.MADD-{n} {rate}", f"f{rate}", [resp("BF.MADD", f"f{rate}", *b) for b in items], count, f"PFADD-{n}"))
            out.append((f"BF.MEXISTS-{n} {rate}", f"f{rate}", [resp("BF.MEXISTS", f"f{rate}", *b) for b in fresh], count, f"PFADD-{n}"))
        out.append((f"BF.MADD-{n} window 1e-3", "win", [resp("BF.MADD", "win", *b) for b in items], count, f"PFADD-{n}"))
    # A window filter written through the three generations before this one: its older slots
    # hold bits, as a filter older than its window's do, and an add tests them.
    out.append(("BF.MADD-1000 window 1e-3 aged", "win-aged", [resp("BF.MADD", "win-aged", *b) for b in items], count, "PFADD-1000"))
    wanted = [w for w in os.environ.get("PHASES", "").split(",") if w]
    if not wanted:
        return out
    kept = [p for p in out if any(w in p[0] for w in wanted)]
    bases = {p[4] for p in kept}
    return [p for p in out if p in kept or p[0] in bases]


SERVERS = int(os.environ.get("SERVERS", "5"))

# Each key's own database (see the module docstring).
KEY_DB = {key: db for db, key in enumerate(
    ["hll", "probe-window", "win", "win-aged"] + [f"f{rate}" for rate in RATES])}


def select(key):
    return resp("SELECT", KEY_DB[key])


PRELOAD_WORDS = None


def preload_words():
    """The items every filter and the HyperLogLog hold before the phases: the same in every server."""
    global PRELOAD_WORDS
    if PRELOAD_WORDS is None:
        PRELOAD_WORDS = words(PRELOAD)
    return PRELOAD_WORDS


def setup_commands(window, keys):
    """Creates and fills the keys the phases use (all filters when `keys` has them all)."""
    cmds = []
    rates = [rate for rate in RATES if f"f{rate}" in keys]
    window = window and bool(keys & {"win", "win-aged"})
    for rate in rates:
        cmds.append(select(f"f{rate}"))
        cmds.append(resp("BF.RESERVE", f"f{rate}", rate, 10_000_000))
    if window:
        cmds.append(select("win"))
        cmds.append(resp("BF.RESERVE", "win", "0.001", 10_000_000, "WINDOW", 3_600_000))
    pre = preload_words()
    # PFADD's baseline on a dense HyperLogLog, as a key that took many items holds it.
    cmds.append(select("hll"))
    for i in range(0, PRELOAD, 1000):
        cmds.append(resp("PFADD", "hll", *pre[i:i + 1000]))
    for rate in rates:
        cmds.append(select(f"f{rate}"))
        for i in range(0, PRELOAD, 1000):
            cmds.append(resp("BF.MADD", f"f{rate}", *pre[i:i + 1000]))
    if window:
        cmds.append(select("win"))
        for i in range(0, PRELOAD, 1000):
            cmds.append(resp("BF.MADD", "win", *pre[i:i + 1000]))
        cmds.append(select("win-aged"))
        cmds.append(resp("BF.RESERVE", "win-aged", "0.001", 10_000_000, "WINDOW", 3_600_000))
        now_ms = int(time.time() * 1000)
        for i in range(0, PRELOAD, 1000):
            # A third of the items in each of the three generations (of 20 minutes) before now.
            at = now_ms - (3 - 3 * i // PRELOAD) * 1_200_000
            cmds.append(resp("BF.ADDAT", "win-aged", at, *pre[i:i + 1000]))
    return cmds


def summary(path):
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError(f"no summary in {path}")


def measure(module, plan):
    port = free_port()
    tmp = tempfile.mkdtemp()
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.%p",
         "--toggle-collect=readQueryFromClient", "--toggle-collect=beforeSleep", SERVER,
         "--port", str(port), "--save", "", "--hz", "1", "--appendonly", os.environ.get("APPENDONLY", "no"), "--dir", tmp,
         "--loadmodule", os.path.abspath(module)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                c = Conn(port)
                c.call("PING")
                break
            except (OSError, EOFError):
                time.sleep(0.2)
        else:
            raise RuntimeError("server did not start")
        # Window filters where the module has them (RedisBloom may take WINDOW for something else).
        try:
            c.call("SELECT", KEY_DB["probe-window"])
            c.call("BF.RESERVE", "probe-window", "0.01", 100, "WINDOW", 1000)
            window = b"Window (ms)" in c.call("BF.INFO", "probe-window")
        except RuntimeError:
            window = False
        c.pipeline(setup_commands(window, {p[1] for p in plan}))
        results = {}
        for name, key, cmds, calls, _ in plan:
            if "window" in name and not window:
                continue
            c.call("SELECT", KEY_DB[key])
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if calls == len(cmds) and calls <= BATCHES:
                # Batches one at a time: each arrives whole before the server reads it, so the
                # protocol's work does not depend on how the socket split a pipeline.
                for cmd in cmds:
                    c.pipeline([cmd])
            else:
                c.pipeline(cmds)
            before = set(os.listdir(tmp))
            subprocess.run(["callgrind_control", "-d", name.replace(" ", "_"), str(proc.pid)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            new = [f for f in os.listdir(tmp) if f not in before and f.startswith("cg.")]
            path = os.path.join(tmp, sorted(new)[-1])
            results[name] = summary(path) / calls
            if os.environ.get("KEEP_DUMPS"):
                shutil.copy(path, os.path.join(os.environ["KEEP_DUMPS"], f"{os.path.basename(module)}.{name.replace(' ', '_')}"))
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def main():
    modules = []
    for arg in ARGS:
        path, _, label = arg.partition("=")
        modules.append((path, label or os.path.basename(path)))
    plan = phases()
    singles = [p for p in plan if p[3] == SINGLE]
    columns = []
    for path, label in modules:
        results = measure(path, plan)
        more = [measure(path, singles) for _ in range(SERVERS - 1)] if singles else []
        for name, *_ in singles:
            if name in results:
                results[name] = min([results[name]] + [r[name] for r in more])
        columns.append((label, results))
    head = "| command | " + " | ".join(f"{l} instr/call | {l} ÷PFADD" for l, _ in columns) + " |"
    print(head)
    print("|" + "---|" * (1 + 2 * len(columns)))
    for name, _, _, _, base in plan:
        cells = []
        for _, res in columns:
            if name not in res:
                cells += ["—", "—"]
                continue
            ratio = f"{res[name] / res[base]:.2f}" if base and base in res else "1"
            cells += [f"{res[name]:,.0f}", ratio]
        print(f"| {name} | " + " | ".join(cells) + " |")


main()
