#!/usr/bin/env python3
"""Summarise gemm_sk's timing records written by the engine ($KILN_SKGEMM_PROF_OP=k, $KILN_SKGEMM_PROF_OUT=path:
the k-th GEMM op of every forward, captured graphs included; see engine/cuda/exec_gpu.c skprof_write).

    KILN_SKGEMM_PROF_OP=63 KILN_SKGEMM_PROF_OUT=/tmp/glu.bin kiln bench --model llama3-8b --load-format dummy -b 32 ...
    python3 bench/sk_prof_summary.py /tmp/glu.bin

The file: two little-endian u64 (blocks, u64 a record), then one record a block (kernel_src/gemm_sk.cu SK_PROF_N):
globaltimer at entry and exit (ns), clock64 at entry, after the wait on the previous kernel, once the first stage
landed, at the K loop's end and after the reduction / stores, the SM id, the K chunks, the cluster rank. The records
are those of the last launch that ran the op (every graph replay rewrites them). Prints what bench_kernels
gemm_tma_prof prints: the span, block starts and ends (us after the first start), blocks a busiest SM and SMs used,
and per block (cycles) the wait, the first stage and the loop per chunk, then the end times by blocks on the SM."""
import struct
import sys


def pct(v, q):
    return v[min(len(v) - 1, int(len(v) * q))]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    data = open(sys.argv[1], "rb").read()
    if len(data) < 16:
        sys.exit("%s: too short for the header" % sys.argv[1])
    nb, per = struct.unpack_from("<2Q", data, 0)
    if per < 10 or nb <= 0 or len(data) < 16 + 8 * nb * per:
        sys.exit("%s: %d blocks of %d u64 do not fit %d bytes" % (sys.argv[1], nb, per, len(data)))
    recs = [struct.unpack_from("<%dQ" % per, data, 16 + 8 * b * per) for b in range(nb)]
    recs = [r for r in recs if r[1] > r[0]]  # blocks that wrote a record
    if not recs:
        sys.exit("%s: no block wrote a record" % sys.argv[1])
    g0 = min(r[0] for r in recs)
    starts = sorted((r[0] - g0) / 1e3 for r in recs)
    ends = sorted((r[1] - g0) / 1e3 for r in recs)
    per_sm = {}
    for r in recs:
        per_sm.setdefault(r[7] & 1023, []).append(r)
    cyc = sum(r[6] - r[2] for r in recs)
    ns = sum(r[1] - r[0] for r in recs)
    clk = cyc / ns if ns else 0.0
    wait = [r[3] - r[2] for r in recs]
    first = [r[4] - r[3] for r in recs]
    chunk = [(r[5] - r[4]) / max(1, r[8] - 1) for r in recs]
    print("%d blocks on %d SMs (busiest %d), span %.1f us, SM clock %.2f GHz" %
          (len(recs), len(per_sm), max(len(v) for v in per_sm.values()), ends[-1], clk))
    print("starts (us) p50 / p90 / max: %.1f / %.1f / %.1f" % (pct(starts, 0.5), pct(starts, 0.9), starts[-1]))
    print("ends (us) min / p10 / p50 / p90 / max: %.1f / %.1f / %.1f / %.1f / %.1f" %
          (ends[0], pct(ends, 0.1), pct(ends, 0.5), pct(ends, 0.9), ends[-1]))
    for name, v in (("wait", wait), ("first stage", first), ("per chunk", chunk)):
        print("%-12s cycles mean / max: %.0f / %.0f" % (name, sum(v) / len(v), max(v)))
    by_load = {}
    for rs in per_sm.values():
        by_load.setdefault(len(rs), []).extend((r[1] - g0) / 1e3 for r in rs)
    for k in sorted(by_load):
        e = sorted(by_load[k])
        print("SMs with %d block(s): %d blocks, ends (us) min / p50 / max: %.1f / %.1f / %.1f" %
              (k, len(e), e[0], pct(e, 0.5), e[-1]))


if __name__ == "__main__":
    main()
