#!/usr/bin/env python3
"""BF.MERGE's bandwidth: the union of two ~1 GiB filters against a plain memcpy of the same bytes.

Usage: python3 bench/merge.py MODULE.so
REDIS_SERVER: the server (default redis-server on PATH); CAPACITY (890000000): the filters'
capacity at 1% NONSCALING, ~1 GiB of bits each; RUNS (5): timed runs of each, the median shown.
Needs ~4.5 GiB of free memory (two filters in the server, two buffers here).

Two alike filters (the same parameters and SEED) get a few items each, then are copied by
BF.MERGE into fresh keys, so that both the destination and the source are memory the kernel has
really handed out (a reservation's untouched pages would read as the shared zero page). Then
`BF.MERGE dest source` runs RUNS times (each the same work: every word of both read, the
destination's written and its ones counted), timed from the client; the server's own time per
call (INFO commandstats) is shown beside it. The baseline is glibc's memcpy (ctypes.memmove) of
the same number of bytes between two buffers of this process, written to first. Both figures are
bytes of the destination per second."""
import ctypes, os, shutil, statistics, subprocess, sys, tempfile, time

from redis_wire import Conn, free_port

CAPACITY = int(os.environ.get("CAPACITY", "890000000"))
RUNS = int(os.environ.get("RUNS", "5"))
SERVER = os.environ.get("REDIS_SERVER", shutil.which("redis-server") or "redis-server")


def start(module):
    port = free_port()
    d = tempfile.mkdtemp(prefix="merge-bench-")
    proc = subprocess.Popen(
        [SERVER, "--port", str(port), "--dir", d, "--save", "", "--appendonly", "no",
         "--loadmodule", os.path.abspath(module)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            c = Conn(port)
            c.call("PING")
            c.call("CONFIG", "SET", "bf.max-filter-bytes", str(4 << 30))
            return proc, d, c
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("the server did not start")


def merge_seconds(c):
    """Median wall time of BF.MERGE dest source, and the server's median µs per call."""
    walls, server = [], []
    for _ in range(RUNS):
        c.call("CONFIG", "RESETSTAT")
        began = time.perf_counter()
        assert c.call("BF.MERGE", "dest", "source") == b"OK"
        walls.append(time.perf_counter() - began)
        stats = c.info("commandstats")["cmdstat_bf.merge"]
        server.append(float(dict(f.split("=") for f in stats.split(","))["usec"]) / 1e6)
    return statistics.median(walls), statistics.median(server)


def memcpy_seconds(size):
    """Median time of glibc's memcpy of `size` bytes between two buffers already written to."""
    src, dst = ctypes.create_string_buffer(size), ctypes.create_string_buffer(size)
    ctypes.memset(src, 0x5A, size)
    ctypes.memset(dst, 0xA5, size)
    times = []
    for _ in range(RUNS):
        began = time.perf_counter()
        ctypes.memmove(dst, src, size)
        times.append(time.perf_counter() - began)
    assert dst.raw[size - 1] == 0x5A
    return statistics.median(times)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    proc, d, c = start(sys.argv[1])
    try:
        for key, prefix in (("a", "a-"), ("b", "b-")):
            c.call("BF.RESERVE", key, "0.01", CAPACITY, "NONSCALING", "SEED", "1")
            c.call("BF.MADD", key, *[f"{prefix}{i}" for i in range(1000)])
        c.call("BF.MERGE", "dest", "a")
        c.call("BF.MERGE", "source", "b")
        c.call("DEL", "a", "b")
        # BF.INFO key SIZE answers one integer, in an array as RedisBloom does.
        reply = c.call("BF.INFO", "dest", "SIZE")
        size = int(reply[0] if isinstance(reply, list) else reply)
        wall, server = merge_seconds(c)
        answers = c.call("BF.MEXISTS", "dest", "a-0", "b-999")
        assert answers == [b"1", b"1"], answers
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)
    copy = memcpy_seconds(size)
    version = subprocess.run([SERVER, "--version"], capture_output=True, text=True).stdout.strip()
    gib = lambda seconds: f"{size / seconds / 2**30:.2f} GiB/s"
    print(f"{version}; two filters of {size / 2**30:.3f} GiB (BF.RESERVE 0.01 {CAPACITY} "
          f"NONSCALING SEED 1), median of {RUNS}\n")
    print("| operation | time | bytes/s | vs memcpy |")
    print("|---|---|---|---|")
    print(f"| BF.MERGE dest source (client) | {wall:.3f} s | {gib(wall)} | {copy / wall:.2f} |")
    print(f"| BF.MERGE (server, commandstats) | {server:.3f} s | {gib(server)} | "
          f"{copy / server:.2f} |")
    print(f"| memcpy of the same bytes | {copy:.3f} s | {gib(copy)} | 1.00 |")


if __name__ == "__main__":
    main()
