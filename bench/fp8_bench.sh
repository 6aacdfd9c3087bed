#!/usr/bin/env bash
# fp8_bench.sh KILN_BIN -- the FP8 KV cache targets of issue 7 on one H200,
# Llama-3-8B shape with random weights (--load-format dummy), bf16 KV against
# FP8 E4M3 (calibrated at start-up) in the same call:
#   1. decode at batch 256 with 2048 tokens of context: the full-batch decode
#      step (kiln bench's full_batch_step_ms: every prompt prefilled first,
#      --prefill-ratio 0, then steps over 2048..2112 tokens) with FP8 at most
#      0.70 of bf16;
#   2. concurrency at 4096 context: 240 requests of 4000 + 256 tokens at
#      --gpu-memory-utilization 0.5 (more than either pool holds at once: ~107
#      in bf16, ~214 in FP8); the peak number of running sequences (before the
#      pool forces preemption) with FP8 at least 1.9x bf16 (the pool's capacity
#      in tokens is printed too). Half the memory halves the prompt tokens to
#      prefill (the ratio of the pools is the same). The outputs must outlast
#      the admission of the last request: with 16 or 128 output tokens the
#      first sequences finished before the FP8 pool filled (third session: 162
#      and 194 running against a pool for 208). --prefill-ratio 0: with the
#      default 0.25 a prefill runs only while waiting >= 0.25 x running, which
#      stopped admission at 194 of 240 (fourth session) with the pool not full.
# The decode-attention kernel target (>= 85% of copy bandwidth on FP8 bytes
# at batch 64, context 4096) is bench_kernels' "attn decode fp8" rows.
# Writes JSON lines to $OUT/fp8_bench.jsonl.
set -uo pipefail
kiln="${1:?kiln binary}"
out="${OUT:-/tmp/out}"; mkdir -p "$out"; log="$out/fp8_bench.jsonl"; : > "$log"
run() { # tag kv args...
  local tag="$1" kv="$2"; shift 2
  timeout 280 "$kiln" bench --model llama3-8b --load-format dummy --kv-cache-dtype "$kv" --json "$@" \
    2>>"$out/fp8_bench.err" | tail -1 | sed "s/^{/{\"case\":\"$tag\",/" | tee -a "$log"
}
want() { [ -z "${FP8_BENCH_ONLY:-}" ] || [ "$FP8_BENCH_ONLY" = "$1" ]; } # FP8_BENCH_ONLY=decode|concurrency
want decode && run decode bf16 -b 256 -s 2048 -o 64 --prefill-ratio 0 --warmup 0 --iters 1
want decode && run decode fp8_e4m3 -b 256 -s 2048 -o 64 --prefill-ratio 0 --warmup 0 --iters 1
want concurrency && run concurrency bf16 -b 240 -s 4000 -o 256 --max-num-seqs 240 --gpu-memory-utilization 0.5 --prefill-ratio 0 --warmup 0 --iters 1
want concurrency && run concurrency fp8_e4m3 -b 240 -s 4000 -o 256 --max-num-seqs 240 --gpu-memory-utilization 0.5 --prefill-ratio 0 --warmup 0 --iters 1
grep -h "KV cache" "$out/fp8_bench.err" | tail -4
python3 - "$log" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
by = {(r["case"], r["kv_cache_dtype"]): r for r in rows}
def get(c, kv): return by.get((c, kv))
b, f = get("decode", "bf16"), get("decode", "fp8_e4m3")
if b and f and b["full_batch_step_ms"] > 0:
    r = f["full_batch_step_ms"] / b["full_batch_step_ms"]
    print(f"decode b256 ctx2048 full-batch step: bf16 {b['full_batch_step_ms']:.2f} ms, fp8 {f['full_batch_step_ms']:.2f} ms,"
          f" ratio {r:.3f} (target <= 0.70) {'ok' if r <= 0.70 else 'MISS'}")
else:
    print("decode b256 ctx2048: a run is missing (see fp8_bench.err)")
b, f = get("concurrency", "bf16"), get("concurrency", "fp8_e4m3")
if b and f and b["running_peak"] > 0:
    r = f["running_peak"] / b["running_peak"]
    print(f"concurrency at 4096 ctx: bf16 {b['running_peak']} seqs (pool {b['kv_tokens']} tokens, {b['preemptions']} preemptions),"
          f" fp8 {f['running_peak']} (pool {f['kv_tokens']}, {f['preemptions']}), ratio {r:.2f} (target >= 1.9)"
          f" {'ok' if r >= 1.9 else 'MISS'}")
else:
    print("concurrency: a run is missing (see fp8_bench.err)")
PY
