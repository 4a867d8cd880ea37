#!/usr/bin/env python3
"""Click ids for the seeds' day (bench/seed_day.sh), written to stdout, never to a file.

    clicks.py N [--from A] [--to B] [--stride S] [--progress FILE]

Line n (0 <= n) is `click:<user>:<ts>:<n>`: a user among ~10 million, a Unix-ms time spread over
one day in order, and n itself, so every line is distinct and line n is the same in every run.
Lines [A, B) are written, every S-th; N sets the day's spread (the time of line n). Ids with
n >= N were never added by a load of lines [0, N): the false-positive probes. With --progress,
the number of lines written so far is rewritten into FILE every 2^18 lines and at the end.
"""
import argparse
import os
import sys

DAY_MS = 86_400_000
DAY_START_MS = 1_795_000_000_000
USERS = 10_000_019


def main():
    p = argparse.ArgumentParser()
    p.add_argument("n", type=int)
    p.add_argument("--from", dest="start", type=int, default=0)
    p.add_argument("--to", dest="end", type=int)
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--progress")
    a = p.parse_args()
    end = a.n if a.end is None else a.end
    out = sys.stdout.buffer
    step = 1 << 18
    written = 0
    per_ms = DAY_MS / a.n
    for lo in range(a.start, end, step * a.stride):
        hi = min(end, lo + step * a.stride)
        chunk = [
            b"click:%d:%d:%d\n" % ((n * 2654435761) % USERS, DAY_START_MS + int(n * per_ms), n)
            for n in range(lo, hi, a.stride)
        ]
        out.write(b"".join(chunk))
        written += len(chunk)
        if a.progress:
            tmp = a.progress + ".tmp"
            with open(tmp, "w") as f:
                f.write(str(written))
            os.replace(tmp, a.progress)
    out.flush()


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        sys.exit(1)
