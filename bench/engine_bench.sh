#!/usr/bin/env bash
# engine_bench.sh KILN_BIN [PEERS_DIR] -- the offline benchmark of issue 11 on one
# GPU: kiln bench on a Llama-3-8B-shaped model (--load-format dummy) at
# -b 1 (128 in / 512 out), -b 32, -b 64 and -b 256 (128 in / 256 out), beside the
# PyTorch + CUDA-graph peer (../shared/peers/torch_cudagraph_llama.py, run from
# where it is) and Hugging Face generate (bench/hf_generate.py) in the same call,
# with ratios and the bandwidth roofline. Writes JSON lines to $OUT/engine_bench.jsonl.
set -uo pipefail
kiln="${1:?kiln binary}"; peers="${2:-}"
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/out}"; mkdir -p "$out"; log="$out/engine_bench.jsonl"; : > "$log"
export NCCL_NVLS_ENABLE=0
run_kiln() { # b s o
  "$kiln" bench --model llama3-8b --load-format dummy -b "$1" -s "$2" -o "$3" --iters 2 --json 2>>"$out/kiln_bench.err" | tail -1 | tee -a "$log"
}
K1=$(run_kiln 1 128 512); K32=$(run_kiln 32 128 256); K64=$(run_kiln 64 128 256); K256=$(run_kiln 256 128 256)
P=""
if [ -n "$peers" ] && [ -f "$peers/torch_cudagraph_llama.py" ]; then
  python3 "$peers/torch_cudagraph_llama.py" -b 1 -b 32 -b 64 -b 256 -s 128 -o 256 --json 2>>"$out/peer.err" \
    | grep '^[[{]' >> "$log"
fi
timeout 300 python3 "$here/hf_generate.py" -b 32 -s 128 -o 256 --json 2>>"$out/hf.err" | grep '^[[{]' >> "$log"
python3 - "$log" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
kiln = {r["batch"]: r for r in rows if isinstance(r, dict) and "output_tok_s" in r and "peer" not in r}
peer, hf = {}, {}
for r in rows:
    for x in (r if isinstance(r, list) else [r]):
        if isinstance(x, dict) and x.get("peer") == "hf_generate": hf[x["batch"]] = x
        elif isinstance(x, dict) and "peer" in x: peer[x["batch"]] = x
# roofline (H200: 4.3 TB/s copy, 790 TFLOP/s bf16): the prefill is compute
# (2 x 7.5e9 FLOP per token for the non-embedding weights); each decode step
# reads the 15.0 GB of non-embedding weights plus the KV cache so far.
W, N = 15.0e9, 7.5e9
def roof(b, s, o):
    kv = 2 * 32 * 8 * 128 * 2  # bytes of K and V per token, all layers
    t = 2 * N * b * s / 790e12
    t += sum((W + b * (s + i) * kv) / 4.3e12 for i in range(o - 1))
    return b * o / t
print(f"{'config':<22}{'kiln tok/s':>12}{'peer':>10}{'x peer':>8}{'HF':>8}{'x HF':>8}{'roofline':>10}{'% roof':>8}{'step ms':>9}{'TTFT ms':>9}")
for b, s, o in [(1, 128, 512), (32, 128, 256), (64, 128, 256), (256, 128, 256)]:
    k = kiln.get(b)
    if not k: print(f"-b {b}: kiln run missing"); continue
    p = peer.get(b, {}).get("output_tok_s"); h = hf.get(b, {}).get("output_tok_s")
    rf = roof(b, s, o)
    print(f"-b {b:<3} -s {s} -o {o:<6}{k['output_tok_s']:>12.0f}{(p or 0):>10.0f}{(k['output_tok_s']/p if p else 0):>8.2f}"
          f"{(h or 0):>8.0f}{(k['output_tok_s']/h if h else 0):>8.1f}{rf:>10.0f}{100*k['output_tok_s']/rf:>7.0f}%"
          f"{k['decode_step_ms']:>9.2f}{k['ttft_ms']:>9.1f}")
PY
