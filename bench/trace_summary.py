#!/usr/bin/env python3
"""trace_summary.py TRACE.csv [--top N] -- where a decode step's GPU time goes,
from bench/cupti_trace.c's kernel records (CUDA graphs replayed, PDL on).

For the graph replayed most often (the decode batch bucket of a kiln bench
run): launches, mean span of a launch (first kernel start to last kernel end),
busy time (union of kernel intervals), idle time inside the launch, the time
between launches (host turn-around), then per kernel (name + grid): calls per
launch, mean us a call, us per launch and share of the span. Kernels outside
graphs (prefill, eager steps) get one table too, and the last prefill step
(the last run of kernels outside graphs spanning over 10 ms) its own."""
import bisect, csv, sys
from collections import defaultdict


def short(name, n=64):
    name = name.replace("void ", "")
    return name if len(name) <= n else name[: n - 3] + "..."


def union(iv):
    iv.sort()
    tot, cs, ce = 0, None, None
    for s, e in iv:
        if ce is None or s > ce:
            if ce is not None:
                tot += ce - cs
            cs, ce = s, e
        else:
            ce = max(ce, e)
    if ce is not None:
        tot += ce - cs
    return tot


def exclusive(rs):
    """each kernel's share of the critical path: from the later of its start
    and the previous kernels' end to its own end (with programmatic dependent
    launch a kernel starts while its predecessor runs; its blocks wait)"""
    out, last = [], None
    for r in sorted(rs, key=lambda r: r["start"]):
        s = r["start"] if last is None else max(r["start"], last)
        out.append((r, max(0, r["end"] - s)))
        last = r["end"] if last is None else max(last, r["end"])
    return out


def table(groups, launches, span, top):
    """groups: lists of records (one a launch); rows by kernel name + grid"""
    agg = defaultdict(lambda: [0, 0, 0])
    for rs in groups:
        for r, ex in exclusive(rs):
            k = (short(r["name"]), r["grid"])
            agg[k][0] += 1
            agg[k][1] += r["end"] - r["start"]
            agg[k][2] += ex
    print("  %-64s %-14s %6s %8s %8s %9s %6s" % ("kernel", "grid", "calls", "us/call", "excl/call", "excl/launch",
                                                  "%span"))
    for (name, grid), (n, t, ex) in sorted(agg.items(), key=lambda kv: -kv[1][2])[:top]:
        per = ex / launches / 1e3
        print("  %-64s %-14s %6.1f %8.2f %8.2f %9.1f %5.1f%%" % (name, grid, n / launches, t / n / 1e3, ex / n / 1e3,
                                                                 per, 100 * per * 1e3 / span if span else 0))


def main():
    path = sys.argv[1]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 24
    recs = []
    with open(path) as f:
        for r in csv.DictReader(f):
            recs.append(dict(start=int(r["start_ns"]), end=int(r["end_ns"]), graph=int(r["graph_id"]),
                             corr=int(r["correlation"]), dev=int(r["device"]),
                             grid="%sx%sx%s" % (r["grid_x"], r["grid_y"], r["grid_z"]), name=r["name"]))
    if not recs:
        print("no kernel records")
        return
    dev0 = min(r["dev"] for r in recs)
    recs = [r for r in recs if r["dev"] == dev0]
    launches = defaultdict(list)  # (graph, correlation) -> records
    for r in recs:
        if r["graph"]:
            launches[(r["graph"], r["corr"])].append(r)
    by_graph = defaultdict(list)
    for (g, c), rs in launches.items():
        by_graph[g].append(rs)
    print("%d kernel records on device %d, %d graph launches of %d graphs" % (len(recs), dev0, len(launches),
                                                                          len(by_graph)))
    if by_graph:
        g, ls = max(by_graph.items(), key=lambda kv: len(kv[1]))
        ls.sort(key=lambda rs: min(r["start"] for r in rs))
        if len(ls) > 4:
            ls = ls[2:]  # the first replays warm up
        spans = [max(r["end"] for r in rs) - min(r["start"] for r in rs) for rs in ls]
        busy = [union([(r["start"], r["end"]) for r in rs]) for rs in ls]
        kern = [sum(r["end"] - r["start"] for r in rs) for rs in ls]
        between = [min(r["start"] for r in b) - max(r["end"] for r in a) for a, b in zip(ls, ls[1:])]
        n = len(ls)
        span = sum(spans) / n
        print("graph %d: %d launches (after 2 warm-up), %.1f kernels a launch" % (g, n, sum(len(rs) for rs in ls) / n))
        print("  span %.1f us, busy %.1f us (%.1f%%), idle inside %.1f us, kernel sum %.1f us (overlap %.1f us)" %
              (span / 1e3, sum(busy) / n / 1e3, 100 * sum(busy) / sum(spans), (sum(spans) - sum(busy)) / n / 1e3,
               sum(kern) / n / 1e3, (sum(kern) - sum(busy)) / n / 1e3))
        if between:
            b = sorted(between)
            print("  between launches: median %.1f us, mean %.1f us" % (b[len(b) // 2] / 1e3, sum(b) / len(b) / 1e3))
        table(ls, n, span, top)
    eager = [r for r in recs if not r["graph"]]
    if eager:
        t = sum(r["end"] - r["start"] for r in eager)
        print("outside graphs: %d kernels, %.2f ms of kernel time" % (len(eager), t / 1e6))
        table([eager], 1, t, min(top, 12))
        # the last prefill step: the last run of kernels outside graphs (no graph kernel between them) spanning > 10 ms
        starts = sorted(r["start"] for r in recs if r["graph"])
        runs, cur, key = [], [], None
        for r in sorted(eager, key=lambda r: r["start"]):
            k = bisect.bisect_left(starts, r["start"])  # graph kernels started before it
            if cur and k != key:
                runs.append(cur)
                cur = []
            cur.append(r)
            key = k
        if cur:
            runs.append(cur)
        big = [rs for rs in runs if max(r["end"] for r in rs) - min(r["start"] for r in rs) > 10e6]
        if big:
            rs = big[-1]
            span = max(r["end"] for r in rs) - min(r["start"] for r in rs)
            print("last prefill step (%d kernels outside graphs): span %.2f ms, busy %.2f ms" %
                  (len(rs), span / 1e6, union([(r["start"], r["end"]) for r in rs]) / 1e6))
            table([rs], 1, span, top)


if __name__ == "__main__":
    main()
