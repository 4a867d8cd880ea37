#!/usr/bin/env python3
"""Draws bench/seed_day.sh's CSVs (the day and the window day): items/s, memory per node, CPU per
node and bfctl's.

    plot_seed.py CSV PNG TITLE
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def number(text):
    try:
        return float(text)
    except ValueError:
        return None


def main():
    src, png, title = sys.argv[1:4]
    with open(src) as f:
        rows = list(csv.DictReader(f))
    t = [float(r["t_s"]) for r in rows]
    ports = sorted({k.split("_")[-1] for k in rows[0] if k.startswith("rss_")}) if rows else []
    fig, (ax_rate, ax_mem, ax_cpu) = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    ax_rate.plot(t, [number(r["items_per_s"]) for r in rows], color="black")
    ax_rate.set_ylabel("items/s")
    shade = {"failover": "red", "migration": "blue", "probe": "grey", "wait": "orange"}
    for r in rows:
        if r["phase"] in shade:
            for ax in (ax_rate, ax_mem, ax_cpu):
                ax.axvline(float(r["t_s"]), color=shade[r["phase"]], alpha=0.15, linewidth=6)
    for p in ports:
        rss = [number(r[f"rss_{p}"]) for r in rows]
        ax_mem.plot(t, [x / 2**20 if x is not None else None for x in rss], label=f"{p} RSS")
        used = [number(r[f"used_memory_{p}"]) for r in rows]
        ax_mem.plot(t, [x / 2**20 if x is not None else None for x in used], linestyle=":",
                    label=f"{p} used_memory")
    ax_mem.set_ylabel("MiB")
    ax_mem.legend(fontsize=6, ncol=3)

    def cpu_share(column):
        out = [None]
        for a, b, ta, tb in zip(rows, rows[1:], t, t[1:]):
            x, y = number(a[column]), number(b[column])
            out.append((y - x) / (tb - ta) * 100 if x is not None and y is not None and tb > ta
                       and y >= x else None)
        return out

    for p in ports:
        ax_cpu.plot(t, cpu_share(f"cpu_s_{p}"), label=f"{p}")
    ax_cpu.plot(t, cpu_share("bfctl_cpu_s"), color="black", label="bfctl")
    ax_cpu.set_ylabel("CPU %")
    ax_cpu.set_xlabel("seconds (red: a master killed; blue: slots migrating; grey: a probe; "
                      "orange: waiting for the clock)")
    ax_cpu.legend(fontsize=6, ncol=4)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=70)


if __name__ == "__main__":
    main()
