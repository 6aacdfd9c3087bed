#!/usr/bin/env python3
"""trace_boundary.py TRACE.csv [--launches N] [--tail K] [--head H] -- the GPU timeline
around decode step boundaries, from bench/cupti_trace.c's kernel records.

For N consecutive launches (after the first 4) of the graph replayed most often:
the last K kernels of the launch, every kernel outside graphs that starts before
the next launch's first kernel, then the next launch's first H kernels, each
with its start / end in us relative to the end of the launch's last kernel
and its gap to the previous kernel's end. Then the mean time from the last
kernel of a launch to the first kernel of the next, and how much of it
kernels outside graphs cover."""
import csv, sys
from collections import defaultdict


def arg(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def main():
    n_show, tail, head = arg("--launches", 3), arg("--tail", 4), arg("--head", 6)
    recs = []
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(f):
            recs.append(dict(start=int(r["start_ns"]), end=int(r["end_ns"]), graph=int(r["graph_id"]),
                             corr=int(r["correlation"]), dev=int(r["device"]),
                             grid="%sx%sx%s" % (r["grid_x"], r["grid_y"], r["grid_z"]),
                             name=r["name"].replace("void ", "")[:60]))
    dev0 = min(r["dev"] for r in recs)
    recs = sorted((r for r in recs if r["dev"] == dev0), key=lambda r: r["start"])
    launches = defaultdict(list)
    for r in recs:
        if r["graph"]:
            launches[(r["graph"], r["corr"])].append(r)
    by_graph = defaultdict(list)
    for (g, c), rs in launches.items():
        by_graph[g].append(sorted(rs, key=lambda r: r["start"]))
    g, ls = max(by_graph.items(), key=lambda kv: len(kv[1]))
    ls.sort(key=lambda rs: rs[0]["start"])
    ls = ls[4:] if len(ls) > 8 else ls
    eager = [r for r in recs if not r["graph"]]
    gaps, covered = [], []
    for i, (a, b) in enumerate(zip(ls, ls[1:])):
        t0 = max(r["end"] for r in a)
        t1 = b[0]["start"]
        mid = [r for r in eager if t0 - 1e3 <= r["start"] < t1]
        gaps.append(t1 - t0)
        iv = sorted((max(r["start"], t0), min(r["end"], t1)) for r in mid if r["end"] > t0)
        cov, ce = 0, t0
        for s, e in iv:
            if e > ce:
                cov += e - max(s, ce)
                ce = e
        covered.append(cov)
        if i >= n_show:
            continue
        print("== launch %d -> %d (graph %d, %d kernels a launch)" % (i, i + 1, g, len(a)))
        last_end = None
        for r in a[-tail:] + mid + b[:head]:
            where = "graph" if r["graph"] else "outside"
            gap = "" if last_end is None else "%+7.2f" % ((r["start"] - last_end) / 1e3)
            print("  %-8s %9.2f %9.2f %8.2f %7s  %-60s %s" % (where, (r["start"] - t0) / 1e3, (r["end"] - t0) / 1e3,
                                                         (r["end"] - r["start"]) / 1e3, gap, r["name"], r["grid"]))
            last_end = r["end"] if last_end is None else max(last_end, r["end"])
    if gaps:
        print("graph %d: %d boundaries, last kernel -> next launch's first kernel: mean %.2f us, median %.2f us; "
              "kernels outside graphs cover %.2f us of it" % (g, len(gaps), sum(gaps) / len(gaps) / 1e3,
                                                              sorted(gaps)[len(gaps) // 2] / 1e3,
                                                              sum(covered) / len(covered) / 1e3))


if __name__ == "__main__":
    main()
