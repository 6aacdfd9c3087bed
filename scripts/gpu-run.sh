#!/usr/bin/env bash
# gpu-run.sh [MAIN_CHECKOUT] -- prepare the GPU bundle for one device call.
# Builds the GPU test, the kernel benchmark and the CLI (Release) in this
# checkout, copies them with the shared libraries the device image lacks
# (found with ldd; glibc itself stays) into MAIN_CHECKOUT/.carry/gpu/ (the
# checkout the device tool sends; .carry/ is git-ignored there), and writes
# the remote script. Then call the device tool with
#   carry: [".carry/gpu"]   command: bash .carry/gpu/remote.sh [tests|bench|all] [bench filter]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
main="${1:-/work/main}"
build="$root/build-gpu"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON >/dev/null
ninja -C "$build" test_gpu_ops test_gpu_engine test_gpu_tp test_jit bench_kernels fp8_accuracy kiln | grep -E "error|FAILED" -A5 || true
ninja -C "$build" test_gpu_ops test_gpu_engine test_gpu_tp test_jit bench_kernels fp8_accuracy kiln >/dev/null
out="$main/.carry/gpu"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for b in "$build/tests/test_gpu_ops" "$build/tests/test_gpu_engine" "$build/tests/test_gpu_tp" "$build/tests/test_jit" "$build/bench/bench_kernels" "$build/bench/fp8_accuracy" "$build/kiln"; do
  cp "$b" "$out/bin/"
  ldd "$b" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*) ;;
      *) cp -L "$lib" "$out/lib/" ;;
    esac
  done
done
# the kernel tracer (bench/cupti_trace.c, LD_PRELOAD) and CUPTI itself
cc -O2 -Wall -shared -fPIC -I/usr/local/cuda/include "$root/bench/cupti_trace.c" -o "$out/lib/libkiln_cupti_trace.so" \
  -L/usr/local/cuda/lib64 -lcupti
cp -L /usr/local/cuda/lib64/libcupti.so.13 "$out/lib/"
# stand-alone kernel probes (cudart linked statically)
[ -f "$root/bench/kv_write_micro.cu" ] && /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90 -o "$out/bin/kv_write_micro" "$root/bench/kv_write_micro.cu"
[ -f "$root/bench/read_micro.cu" ] && /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90 -o "$out/bin/read_micro" "$root/bench/read_micro.cu"
[ -f "$root/bench/gemm_micro.cu" ] && /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90 -o "$out/bin/gemm_micro" "$root/bench/gemm_micro.cu"
[ -f "$root/bench/gemv_micro.cu" ] && /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90 -o "$out/bin/gemv_micro" "$root/bench/gemv_micro.cu"
[ -f "$root/bench/stride_micro.cu" ] && /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90 -o "$out/bin/stride_micro" "$root/bench/stride_micro.cu"
[ -f "$root/bench/skring_micro.cu" ] && /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90 -o "$out/bin/skring_micro" "$root/bench/skring_micro.cu"
[ -f "$root/bench/skx_micro.cu" ] && /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90 -o "$out/bin/skx_micro" "$root/bench/skx_micro.cu"
mkdir -p "$out/bench" "$out/peers"
cp "$root/bench/trace_summary.py" "$root/bench/sk_prof_summary.py" "$root/bench/trace_boundary.py" "$out/bench/"
sed -n '/^KT_MAIN(/,/))/p' "$root/tests/test_gpu_ops.c" > "$out/test_gpu_ops.cases" # ops_split's case list
cp "$root/bench/engine_bench.sh" "$root/bench/hf_generate.py" "$root/bench/fp8_bench.sh" "$root/bench/serve_load.py" "$out/bench/"
[ -f "$root/bench/spec_bench.sh" ] && cp "$root/bench/spec_bench.sh" "$root/scripts/make_copy_model.py" "$out/bench/"
# the shared peer travels only for the run (it is not part of the repository)
[ -f "$root/../shared/peers/torch_cudagraph_llama.py" ] && cp "$root/../shared/peers/torch_cudagraph_llama.py" "$out/peers/"
echo "$root" > "$out/build_root"
# main's kernel sources (KILN_KERNEL_DIR A/B against this build's embedded ones) and,
# when $KILN_MAIN_BUILD names a build of main (scripts/gpu-run.sh in a worktree of main
# leaves one in its build-gpu), main's kiln as bin/kiln_main
# (next9: this checkout's kernels with the PDL prefetches undone -- main's attention and
# RMSNorm files, rope_kv.cu with commit da0d32d reversed -- since main lacks the new kernels)
rm -rf "$out/ksrc_old"; cp -r "$root/kernel_src" "$out/ksrc_old"
for f in attn_decode.cu rmsnorm_row.cuh rmsnorm.cu rmsnorm_wide.cu; do
  git -C "$root" show "main:kernel_src/$f" > "$out/ksrc_old/$f"
done
git -C "$root" show da0d32d -- kernel_src/rope_kv.cu | patch -s -R "$out/ksrc_old/rope_kv.cu"
if [ -n "${KILN_MAIN_BUILD:-}" ] && [ -x "$KILN_MAIN_BUILD/kiln" ]; then cp "$KILN_MAIN_BUILD/kiln" "$out/bin/kiln_main"; fi
# programmatic-dependent-launch trigger variants (twelfth session, remote.sh s40; KILN_KERNEL_DIR):
# early_small: the elementwise kernels, decode attention and its reduction signal launch_dependents
# before griddepcontrol.wait instead of after (the next kernel, e.g. a GEMV, starts issuing its first
# weight loads under them); early_all: every kernel does (pdl_wait itself signals first)
rm -rf "$out/kv"; mkdir -p "$out/kv"
cp -r "$root/kernel_src" "$out/kv/early_small"; cp -r "$root/kernel_src" "$out/kv/early_all"
for f in rmsnorm_row.cuh rmsnorm_wide.cu act.cu attn_decode.cu rope_kv.cu embed.cu; do
  perl -0pi -e 's/pdl_wait\(\);(\s*)pdl_launch\(\);/pdl_launch();$1pdl_wait();/g' "$out/kv/early_small/$f"
done
perl -0pi -e 's/asm volatile\("griddepcontrol\.wait;"/asm volatile("griddepcontrol.launch_dependents;\\n\\tgriddepcontrol.wait;"/' \
  "$out/kv/early_all/kiln_common.cuh"
# kernel sources of given revisions for KILN_KERNEL_DIR A/B: kv/NAME for each "NAME=REV" of $KILN_AB_REVS
# (none by default; remote.sh s52 / s53 ran with KILN_AB_REVS="base=62cedc1 cont=2165f52 epi=3db41f0")
for nr in ${KILN_AB_REVS:-}; do
  n="${nr%%=*}" r="${nr#*=}"
  mkdir -p "$out/kv/$n"; git -C "$root" archive "$r" kernel_src | tar -x -C "$out/kv/$n" --strip-components=1
done
# upper bounds of two fusions (fourteenth session, remote.sh s54; wrong results, timing only): norope,
# the decode rope + KV write a no-op (as if folded into decode attention); nonorm, the residual add +
# RMSNorm a no-op (as if folded into the next GEMM's prologue); both keep the launches and the waits
cp -r "$root/kernel_src" "$out/kv/norope"; cp -r "$root/kernel_src" "$out/kv/nonorm"
perl -0pi -e 's/(kiln_rope_kv_write_dec\([^{]*\{)/$1\n    pdl_wait(); pdl_launch(); if (threadIdx.x < (1u << 30)) return;/s' "$out/kv/norope/rope_kv.cu"
perl -0pi -e 's/(kiln_add_rmsnorm\([^{]*\{)/$1\n    pdl_wait(); pdl_launch(); if (threadIdx.x < (1u << 30)) return;/s' "$out/kv/nonorm/rmsnorm.cu"
cp -r "$root/kernel_src" "$out/kv/noreduce" # the split decode attention's reduction a no-op (remote.sh s55)
perl -0pi -e 's/(kiln_attn_reduce\([^{]*\{)/$1\n    pdl_wait(); pdl_launch(); if (threadIdx.x < (1u << 30)) return;/s' "$out/kv/noreduce/attn_decode.cu"
grep -q "if (threadIdx.x < (1u << 30)) return;" "$out/kv/norope/rope_kv.cu" "$out/kv/nonorm/rmsnorm.cu" "$out/kv/noreduce/attn_decode.cu" || echo "WARNING: the norope / nonorm / noreduce patches did not apply"
# fifteenth session (remote.sh s62): l2pf, decode attention's L2 prefetch of its later tiles before the wait
# (DEC_L2_PREFETCH 4, in kernel_src/attn_decode.cu of commit c566ce7 only: removed after it measured no gain;
# these variants are that commit's kernels); ropeearly, the decode rope + KV write signals launch_dependents before its wait, so
# decode attention launches (and streams its KV) under the qkv GEMM; both
for v in l2pf ropeearly both; do mkdir -p "$out/kv/$v"; git -C "$root" archive c566ce7 kernel_src | tar -x -C "$out/kv/$v" --strip-components=1; done
for v in l2pf both; do sed -i 's/^#define DEC_L2_PREFETCH 0$/#define DEC_L2_PREFETCH 4/' "$out/kv/$v/attn_decode.cu"; done
for v in ropeearly both; do
  perl -0pi -e 's/(\n    pdl_wait\(\);\n    pdl_launch\(\);\n)(    const int b = slot \/ block_size)/\n    pdl_launch();\n    pdl_wait();\n$2/' "$out/kv/$v/rope_kv.cu"
done
grep -q "^#define DEC_L2_PREFETCH 4" "$out/kv/both/attn_decode.cu" && grep -Pzq "pdl_launch\(\);\n    pdl_wait\(\);\n    const int b = slot" "$out/kv/both/rope_kv.cu" || echo "WARNING: the l2pf / ropeearly patches did not apply"
# the GPU machine's JIT cache, compiled here ahead (NVRTC for sm_90 needs no GPU) from the
# specializations a device run recorded ($KILN_JIT_RECORD: remote.sh returns them as
# jit_specs.txt; `sort -u` them into scripts/gpu_jit_specs.txt): the tests then load their
# kernels from the cache instead of compiling each on first use. A persistent cache in
# build-gpu/jit-cache: only changed kernels recompile; a cache hit refreshes the entry's mtime
# (runtime/cuda/jit.c), so the entries this list uses are those newer than a stamp taken before the
# run: they go into the bundle (~31 MB of the carry's 64 MiB) and the older, stale ones are deleted.
# KILN_JIT_PREFILL=0 skips it.
specs="$root/scripts/gpu_jit_specs.txt"
if [ -f "$specs" ] && [ "${KILN_JIT_PREFILL:-1}" = 1 ]; then
  jc="$build/jit-cache" stamp="$build/jit-stamp"
  mkdir -p "$jc"; touch "$stamp"
  if "$build/kiln" kernels --arch sm_90 --specs "$specs" --cache-dir "$jc" > "$build/jit-prefill.log" 2>&1; then
    mkdir -p "$out/jit"
    find "$jc" -name '*.kjit' -newer "$stamp" -exec cp {} "$out/jit/" \;
    find "$jc" -name '*.kjit' ! -newer "$stamp" -delete
    echo "JIT cache for the device: $(tail -1 "$build/jit-prefill.log"); $(ls "$out/jit" | wc -l) entries bundled"
  else
    echo "JIT prefill failed (the device compiles on first use): $(tail -2 "$build/jit-prefill.log")"
  fi
fi
cat > "$out/remote.sh" <<'REMOTE'
#!/usr/bin/env bash
# remote.sh MODE[,MODE...] [bench filter] -- runs on the device
# machine, from the root of the checkout the device tool sent.
#   tests:  test_gpu_ops and test_gpu_engine (every CUDA op and the GPU engine
#           against the CPU references and the transformers goldens)
#   opsplit: test_gpu_ops split over parallel processes, a case each (ops_split: the suite runs past 500 s in
#           one process), test_every_kernel_tested over the kernels they launched, then test_gpu_engine
#   engine: kiln bench beside the PyTorch CUDA-graph peer and HF generate
#   bench:  the kernel benchmark
#   fp8:    the FP8 KV cache's GPU tests, kernel rows (bench_kernels fp8) and
#           the Llama-3-8B-shaped accuracy over 256 steps (fp8_accuracy)
#   fp8engine: the FP8 engine targets (bench/fp8_bench.sh; ~5 min, a call of its own)
#   spec:   bench/spec_bench.sh (verification cost, self-draft, n-gram)
#   speccopy: spec_bench's copy-model cases only (writes the 16 GB copy model first; ~5 min)
#   serve:  kiln serve + bench/serve_load.py at 256 and 32 streams beside kiln bench
#   tp:     test_gpu_tp and the TP benches (on the multi-GPU kinds)
#   gemvab: kiln bench at -b 1 / 8 with the small-M GEMV off and on (tilings)
#   final1: test_gpu_ops, test_gpu_engine, bench_kernels decode and elementwise (+ gemm with
#           FINAL_GEMM=1), condensed
#   final2: kiln bench -b 1 (GEMV 1x4 and 4x2), -b 32 (and with KILN_TCGEMM_MAX_M=32), -b 256;
#           spec_bench b1-plain / b1-self4
#   eng3:   kiln bench at -b 1 (-o 512), -b 32 and -b 256 (-o 256), defaults, one line each
#   pdlab:  kiln bench at -b 1 / 32 / 256 with programmatic dependent launch on and off
#   nsys:   per-kernel GPU time inside the decode graphs (nsys, if the image has it) at -b 1 and -b 32
#   startup: kiln generate start to first token on a warm JIT cache (dummy weights: no reading)
#   arab:   (2+ GPUs) kiln bench --tp 2 at -b 1 / 32 with the one-shot all-reduce on and off
#           (KILN_CUSTOM_ALLREDUCE=1 / 0), TP 1 beside
#   s4:     fourth session: test_gpu_ops by case in parallel, test_gpu_engine, kernel rows (decode,
#           elementwise, gemm), engine b1, b32, b256, fp8_bench
#   s5:     fourth session, last call: op tests by case, FP8 decode rows at KILN_DECODE_STAGES 4 / 6 /
#           auto, decode and elementwise rows, fp8_bench's step ratio, kiln bench -b 1
#   profile: kiln bench --profile at -b 1 and -b 32 (per-op time of decode steps)
#   tp5:    fifth session (nvidia-h200-x2): test_gpu_tp, TP 1 / 2 at -b 1 / 32 with pipelined decode on / off, a TP 2 profile
#   s7:     fifth session: pipelined decode on / off (KILN_OVERLAP) at -b 1 / 32 / 256, test_gpu_engine, FP8 step ratio
#   s6:     fifth session: prefill op tests and rows, --profile of the b256 ctx2048 step in bf16 and FP8 E4M3, the step ratio
#   elem3:  the elementwise kernels by size (branch elem3): test_gpu_ops test_rmsnorm / test_rope / kv_write by
#           case (each case on both kernel sets) and test_gpu_engine (ELEM3_OPS=0 skips them), then
#           the whole test_gpu_ops (test_every_kernel_tested; ELEM3_FULL=0 skips it); bench_kernels
#           elementwise and decode-shape (rows of rmsnorm.cu / rope_kv.cu and "wide" rows of
#           rmsnorm_wide.cu / rope_kv_wide.cu, condensed; ELEM3_BENCH=0 skips them); kiln bench -b 1 /
#           32 / 256 and a prefill of 8 x 2048 tokens at the default KILN_ELEM_WIDE_MIN (256) and at 0
#           (never wide) (ELEM3_KB=0 skips them)
#   s8:     sixth session (nvidia-h200-x2): op tests (gemv, elementwise) by case, test_gpu_engine, test_gpu_tp; the
#           gate_up GEMV + SiLU rows and the elementwise rows; kiln bench TP 1 / 2 -b 1 with KILN_GEMV_SILU 0 / 1
#           alternating, -b 256 and an 8 x 2048 prefill at KILN_ELEM_WIDE_MIN default / 0 (S8_OPS=0, S8_ROWS=0,
#           S8_KB=0 skip parts)
#   s9:     sixth session (nvidia-h200-x2): test_gpu_tp (pull and push exchange), test_gpu_ops all_reduce / gemv,
#           kiln bench --tp 2 -b 1 / -b 32 with KILN_AR_PUSH 0 / 1 alternating, TP 1 beside
#   s10:    sixth session (nvidia-h200-x2): test_gemv, test_all_reduce_one_rank, test_gpu_tp; the gate_up rows
#           (GEMV + SiLU, both shapes, K split x unroll); kiln bench TP 1 / 2 -b 1 with the GLU GEMV off and in
#           several tilings
#   s11:    sixth session, last call (nvidia-h200-x2): the whole test_gpu_ops (one process, beside test_gpu_tp),
#           then test_gpu_engine alone; gemm and elementwise rows; kiln bench TP 1 / 2 -b 1 with KILN_GEMV_KSPLIT
#           1 / 2 alternating, -b 32 both, -b 256 (S11_TESTS=0 / S11_ROWS=0 / S11_KB=0 skip parts)
#   s12:    sixth session (nvidia-h200-x2): test_gemv; kiln bench TP 1 / 2 -b 1 under each KILN_GEMV_RULE (0-4),
#           0 and 3 twice; test_gpu_engine and test_gpu_tp with KILN_GEMV_RULE=3
#   s13:    sixth session (nvidia-h200-x2): kiln bench --profile at -b 1, TP 1 and TP 2 (per-op time of decode steps)
#   s14:    sixth session (nvidia-h200-x2): test_gpu_ops test_attention_decode (split-K forced to 64 too); kiln bench
#           -b 1 at TP 1 with KILN_DECODE_PARTITION 0 / 128 / 64, at TP 2 with 0 / 64
#   s16:    (branch rope-gemv, nvidia-h200-x2) test_gpu_ops test_gemv_rope, test_gpu_engine and test_gpu_tp with
#           KILN_GEMV_ROPE=1; kiln bench TP 1 / 2 -b 1 with KILN_GEMV_ROPE 0 / 1 alternating
#   s17:    (branch gemv-ar, nvidia-h200-x2) test_gpu_ops test_all_reduce_one_rank / test_gemv_rope, test_gpu_tp with
#           KILN_GEMV_AR=1 (and ROPE), kiln bench --tp 2 -b 1 with KILN_GEMV_AR 0 / 1 (and KILN_GEMV_ROPE=1), TP 1 beside
#   s15:    (branch ag, nvidia-h200-x2) test_gpu_tp, test_gpu_ops test_all_reduce_one_rank, kiln bench --tp 2 -b 1 / 4
#           with the push all-gather on / off (KILN_P2P_GATHER), TP 1 -b 1 beside
#   s18:    (branch next = ag + rope-gemv + gemv-ar, nvidia-h200-x2) the whole test_gpu_ops beside test_gpu_tp with
#           KILN_GEMV_AR=1 KILN_GEMV_ROPE=1, then test_gpu_engine with KILN_GEMV_ROPE=1; kiln bench -b 1 at TP 1 with
#           KILN_GEMV_ROPE 0 / 1 and at TP 2 with nothing / AR / AR + ROPE / AR + ROPE + NCCL gather, twice;
#           the first round also with KILN_DECODE_PARTITION=64 (both sizes, everything on)
#   s19:    seventh session (nvidia-h200-x2): the whole test_gpu_ops beside test_gpu_tp, then test_gpu_engine (defaults:
#           the rope epilogue, the push logits gather, the adaptive decode split); kiln bench -b 1 at TP 1 / 2 with
#           KILN_DECODE_ADAPTIVE 1 / 0 twice, KILN_GEMV_ROPE=0 once; -b 32 at TP 1 / 2
#   s21:    (branch fp8cvt, nvidia-h200) test_gpu_ops fp8_cast / kv_write / attention_fp8, then
#           test_gpu_engine; bench_kernels elementwise (FP8 rope + KV write) and gemm (gemm_tc at M 8..32 beside
#           cuBLASLt); kiln bench -b 32 / -b 256 with a bf16 and an FP8 E4M3 KV cache
#   s24:    (branch sk) the cluster split-K GEMM: test_gpu_ops gemm_sk, test_gpu_engine with it on for M <= 64,
#           bench_kernels gemm_sk as a table (% of copy on the weight bytes, cuBLASLt beside), kiln bench -b 8 / 16 /
#           32 / 64 with KILN_SKGEMM_MAX_M 0 / 64 (-b 32 twice)
#   s23:    (branch kvw, nvidia-h200) the tile KV write ($KILN_KV_TILE): test_gpu_ops kv_write / test_rope and the
#           whole test_gpu_ops (test_every_kernel_tested) in parallel; bench_kernels kv_write (rope_kv.cu, "wide" =
#           the KV blocks, "tile" rows); kiln bench -b 256 and an 8 x 2048 prefill with KILN_KV_TILE 1 / 0;
#           S23_ENGINE=1 adds test_gpu_engine with KILN_ELEM_WIDE_MIN=1 (every prefill and decode step through
#           the wide kernels and the tiles; up to 200 s more)
#   s25:    eighth session, last call (branch next3 = gemm_sk on for M <= 16 + the tile KV write; nvidia-h200-x2):
#           test_gpu_ops gemm_sk / kv_write / test_rope and the whole test_gpu_ops, test_gpu_tp, in parallel;
#           test_gpu_engine (defaults, and KILN_ELEM_WIDE_MIN=1); bench_kernels kv_write; kiln bench -b 8 / 16 with
#           KILN_SKGEMM_MAX_M 16 / 0, an 8 x 2048 prefill and -b 256 with KILN_KV_TILE 1 / 0, -b 1, -b 32, TP 2 -b 8
#   s26:    eighth session: gemm_sk's split checked against the occupancy calculator: test_gpu_engine, bench_kernels
#           gemm_sk_quick (qkv / o / down at M = 16 / 32, four tilings, cuBLASLt beside), kiln bench -b 32 with
#           KILN_SKGEMM_MAX_M 32 / 16, -b 16 with 16 / 0
#   s38:    (twelfth session, nvidia-h200-x2, branch next11) GPU 0: the whole test_gpu_ops, beside it
#           test_attention_decode_fused; GPU 1: test_gpu_engine with KILN_DECODE_FUSED_REDUCE=1, kiln bench -b 1
#           (x3) and -b 32 at --max-model-len 8192 with and without it beside main's binary, bench_kernels
#           decode both ways; -b 32 with the qkv + rope through gemm_sk at 32 rows (KILN_SKGEMM_ROPE=32) at
#           stages 3 / 4 and split 4, bench_kernels gemm_sk_quick; test_gpu_tp after both
#   s37:    (eleventh session, last call) the new defaults: GPU 0 test_gemm_sk_rope, test_attention_decode, then
#           test_gpu_engine; GPU 1 bench_kernels decode, decode-short at 2 / 4 warps, kiln bench -b 64 (-s 128 and
#           1024) default against KILN_DECODE_WARPS=2, -b 8 / 16 default against KILN_SKGEMM_ROPE=0, -b 1;
#           test_gpu_tp after both
#   s36:    (eleventh session, nvidia-h200-x2, last call) GPU 0: the whole test_gpu_ops, and beside it the cases
#           the s35 run did not reach (test_gemm_sk, test_silu_gemm_sk, test_graph_replay, test_all_reduce) and
#           the decode cases again; GPU 1: test_gpu_engine (default, KILN_DECODE_FUSED_REDUCE=1), bench_kernels
#           decode, kiln bench -b 1 / 8 / 32 / 64 (and 32 at --max-model-len 8192) with each knob beside main's
#           binary; test_gpu_tp after both
#   s35:    (eleventh session, nvidia-h200-x2) the whole test_gpu_ops on GPU 0; test_gpu_engine, then bench_kernels
#           decode at each decode-attention source in $here/kv/* (KILN_KERNEL_DIR; a bisection of the
#           b64 slowdown) and with KILN_DECODE_WARPS 4 / 2 on GPU 1; test_gpu_tp after both
#   s34:    (eleventh session, nvidia-h200-x2, branch next10) test_attention_decode_fused, test_gemv_rope,
#           test_gemm_sk_rope on GPU 0 (the whole suite: `S31_BENCH=0 remote.sh s31`, a call of its own); test_gpu_engine with KILN_DECODE_FUSED_REDUCE=1 and with KILN_SKGEMM_ROPE=1, kiln
#           bench -b 8 / 32 with and without KILN_SKGEMM_ROPE=1, -b 1 and -b 16 / 32 with
#           --max-model-len 8192 with and without it, bench_kernels decode both ways on GPU 1
#   s33:    (tenth session, nvidia-h200-x2) the batch-1 qkv GEMV + rope at each UNROLL x KSPLIT: test_gemv_rope, kiln bench -b 1
#   s32:    (tenth session, last call, nvidia-h200-x2; KILN_MAIN_BUILD for bin/kiln_main) next9 with the measured
#           defaults: test_gpu_ops (GPU 0) beside test_gpu_engine and kiln bench -b 1 / 32 / 64 / 256 against main's
#           binary, A/B rows, the 8 x 2048 prefill, the peer and bench_kernels prefill (GPU 1); then test_gpu_tp
#   s31:    (tenth session, nvidia-h200-x2; build with KILN_MAIN_BUILD=<a build of main> for bin/kiln_main) branch
#           next9 against main: bench_kernels sample / decode-short (2 and 4 warps, main's kernels) / prefill; kiln
#           bench -b 1 / 32 / 64 main and next9 alternating, next9 with main's kernels, with KILN_SAMPLE_CLUSTER=0,
#           with KILN_DECODE_WARPS=2, with KILN_ROPE_DEC_MAX=256 (and decode-shape rows), -b 32 with gemm_sk on the o projection only; a CUPTI trace at -b 32; test_gpu_ops and test_gpu_engine on GPU 1, then
#           test_gpu_tp
#   s30:    (ninth session, last call) test_gpu_ops attention_prefill_wg / test_sampling, bench_kernels prefill and
#           sample (old kernel sources through KILN_KERNEL_DIR beside), kiln bench -b 1 new / old twice, -b 32, an
#           8 x 2048 prefill with KILN_PREFILL_KERNEL=wg / default; the whole test_gpu_ops on the second GPU
#   s29:    (ninth session) kiln bench -b 32 / 64 with KILN_ELEM_WIDE_MIN=16 and KILN_DECODE_PARTITION 64 / 128 beside the
#           defaults (twice), -b 1; the whole test_gpu_ops on the second GPU meanwhile
#   s28:    (ninth session) kernel times inside the decode graphs: kiln bench -b 1 / 32 / 64 under the CUPTI
#           tracer (bench/cupti_trace.c + bench/trace_summary.py), then the whole test_gpu_ops beside
#           test_gpu_engine (second GPU when there is one; S28_TESTS=0 skips them)
#   s27:    (prepared in the eighth session, not yet run; nvidia-h200-x2) where gemm_sk's time goes: test_gpu_ops
#           test_gemm_sk (incl. the timing records) / test_silu_gemm_sk / test_gemm_tc by case, test_gpu_engine,
#           test_gpu_tp (2 GPUs), bench_kernels gemm_sk_prof (qkv / o / down at M = 8 / 16 / 32: span, start spread,
#           per block wait / first stage / cycles a K chunk / reduction, blocks a busiest SM); kiln bench --profile
#           at -b 32 and -b 256 (-s 128 -o 32: where a decode step goes), bench_kernels gemm_mid (cuBLASLt at
#           M = 64..512); gemm_sk's SiLU epilogue (test_silu_gemm_sk,
#           bench_kernels gemm_sk_silu, kiln bench -b 8 / 16 / 32 with KILN_SKGEMM_SILU 0 / 1 at KILN_SKGEMM_MAX_M=32)
#   all = tests,engine,bench
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
export KILN_CACHE_DIR=/tmp/kiln-jit NCCL_NVLS_ENABLE=0
# the cache compiled ahead on the build machine (gpu-run.sh), and this run's specializations
# recorded for the next one (jit_specs.txt comes back with the other *.txt)
mkdir -p /tmp/kiln-jit; if [ -d "$here/jit" ]; then cp -n "$here/jit/"*.kjit /tmp/kiln-jit/ 2>/dev/null || true; fi
export KILN_JIT_RECORD="${OUT:-/tmp/out}/jit_specs.txt"
# the test binaries name tests/data by the absolute path they were built at
built="$(cat "$here/build_root")"
if [ ! -e "$built/tests/data" ]; then mkdir -p "$(dirname "$built")"; ln -sfn "$repo" "$built"; fi
what="${1:-all}"; filter="${2:-}"
[ "$what" = all ] && what=tests,engine,bench
has() { case ",$what," in *",$1,"*) return 0;; esac; return 1; }
out="${OUT:-/tmp/out}"; mkdir -p "$out"
# gt LOG TIMEOUT PATTERN [VAR=VALUE...] -- BIN [ARGS]: a test binary of the
# bundle (KT_VERBOSE=1 and the environment given) under a timeout, its output
# in $out/LOG.log; prints "LOG rc=N (S s)" and up to 16 lines matching PATTERN
gt() {
  local log="$1" to="$2" pat="$3"; shift 3; local envs=(KT_VERBOSE=1); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  local bin="$1"; shift; local t0; t0=$(date +%s)
  env "${envs[@]}" timeout "$to" "$here/bin/$bin" "$@" > "$out/$log.log" 2>&1; local r=$?
  echo "$log rc=$r ($(( $(date +%s) - t0 )) s)"; grep -E "$pat" "$out/$log.log" | head -16
}
# kb TAG [VAR=VALUE...] -- ARGS: kiln bench on the Llama-3-8B shape (dummy
# weights) with ARGS and the environment given, its JSON in $out/kb_TAG.json
# (stderr appended to $out/kb.err), one line printed
kb() {
  local tag="$1"; shift; local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 150 "$here/bin/${KB_BIN:-kiln}" bench --model llama3-8b --load-format dummy --json "$@" \
    2>>"$out/kb.err" | tail -1 > "$out/kb_$tag.json"
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%-22s %8.1f tok/s, step %.3f ms, full-batch step %.3f ms, ttft %.1f ms, kv tokens %s, ctx %s" % (sys.argv[2], j["output_tok_s"], j["decode_step_ms"], j["full_batch_step_ms"], j["ttft_ms"], j["kv_tokens"], j.get("max_model_len", "?")))' \
    "$out/kb_$tag.json" "$tag" || { echo "$tag failed"; tail -3 "$out/kb.err"; }
}
# skp OP [VAR=VALUE...] -- ARGS: kiln bench (kb, tag "profOP", its line not printed) with gemm_sk's timing records
# of GEMM op OP of every forward (KILN_SKGEMM_PROF_OP), then bench/sk_prof_summary.py's report of them
skp() {
  local op="$1"; shift
  kb "prof$op" KILN_SKGEMM_PROF_OP=$op KILN_SKGEMM_PROF_OUT=/tmp/skp_$op.bin "$@" > /dev/null
  python3 "$here/bench/sk_prof_summary.py" /tmp/skp_$op.bin
}
# skp_b32 OP [VAR=VALUE...]: skp of GEMM op OP in a -b 32 -s 128 -o 64 run under those variables, its block
# placement, start / end, wait and first-stage lines under a header naming them
skp_b32() {
  local op="$1"; shift
  echo "== -b 32 GEMM op $op [$*]"
  skp "$op" "$@" -- -b 32 -s 128 -o 64 --iters 1 | grep -E "blocks on|starts|ends|wait|first"
}
# bk_skq / bk_rows SHAPE LOG [VAR=VALUE...] -- [ARGS]: bench_kernels gemm_sk_quick_SHAPE (the M = 16 / 32 rows of
# cuBLASLt and gemm_sk's tilings) / gemm_rows_SHAPE (kiln's default path by M) with ARGS under the variables, the log in
# $out/LOG.log, its rows under a header naming the run
bk_run() {
  local what="$1" pat="$2" sh="$3" log="$4"; shift 4; local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  echo "== ${what}_$sh ${envs[*]} $*"
  env "${envs[@]}" timeout 100 "$here/bin/bench_kernels" "${what}_$sh" "$@" > "$out/$log.log" 2>&1; echo "rc=$?"
  grep -E "$pat" "$out/$log.log" | sed 's/(weights)//; s/(weight bytes)//; s/  */ /g; s/ N=[0-9]* K=[0-9]*//; s/ target.*//' | cut -c1-110
}
bk_skq() { bk_run gemm_sk_quick " M=(16|32) |^ceil" "$@" | grep -E "^==|^rc=|^ceil|^gemm (qkv|o|down|gate_up) |^gemm_sk (default|tma)"; }
bk_rows() { bk_run gemm_rows "^kiln" "$@"; }
# tb TAG [VAR=VALUE...] -- ARGS: kiln bench (llama3-8b, dummy weights) under the CUPTI trace, the CSV gzipped
# into $out/trace_TAG.csv.gz, one line with its tok/s and step time
tb() {
  local tag="$1"; shift; local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" KILN_TRACE_OUT=/tmp/trace_$tag.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 200 \
    "$here/bin/kiln" bench --model llama3-8b --load-format dummy "$@" > /tmp/trace_$tag.log 2>&1
  echo "== trace $tag rc=$? ($(grep -E 'output tokens/s|mean decode step' /tmp/trace_$tag.log | tr -s ' ' | tr '\n' ';'))"
  gzip -c /tmp/trace_$tag.csv > "$out/trace_$tag.csv.gz"
}
# ab TAG VAR=VALUE -- ARGS: kb with the defaults (TAG-def) then with VAR=VALUE (TAG-alt), back to back
ab() { local tag="$1" env="$2"; shift 3; kb "$tag-def" -- "$@"; kb "$tag-alt" "$env" -- "$@"; }
# alt ROUNDS TAG NAME=VAR=VALUE... -- ARGS: ROUNDS rounds of kb with the defaults (TAG-def-R), then each variant
# (TAG-NAME-R with VAR=VALUE), back to back: the A/B of the thirty-first session's modes
# (a variant's VAR=VALUE pairs separated by commas: NAME=A=1,B=2)
alt() {
  local rounds="$1" tag="$2"; shift 2; local vs=(); while [ "$1" != -- ]; do vs+=("$1"); shift; done; shift
  local r v
  for r in $(seq "$rounds"); do
    kb "$tag-def-$r" -- "$@"
    for v in "${vs[@]}"; do local ev; IFS=, read -ra ev <<< "${v#*=}"; kb "$tag-${v%%=*}-$r" "${ev[@]}" -- "$@"; done
  done
}
# b1_fold_report: the folded batch-1 norm (KILN_GEMV_NORM) -- a CUPTI trace of -b 1 with its top kernels, then
# three -b 1 pairs against KILN_GEMV_NORM=0
b1_fold_report() {
  tb b1n1 -- -b 1 -s 128 -o 64 --iters 1
  python3 "$here/bench/trace_summary.py" /tmp/trace_b1n1.csv --top 8 2>&1 | cut -c1-150 | head -14
  for r in 1 2 3; do ab "b1-n0-$r" KILN_GEMV_NORM=0 -- -b 1 -s 128 -o 512 --iters 1; done
}
# ops_bg GPU SECONDS: the whole test_gpu_ops in the background on that GPU (/tmp/tgo.log, "rc=N" last);
# ops_report LABEL, after `wait`: its passed line, failures and last cases, the log copied to $out
ops_bg() { ( CUDA_VISIBLE_DEVICES=$1 timeout "$2" "$here/bin/test_gpu_ops" > /tmp/tgo.log 2>&1; echo "rc=$?" >> /tmp/tgo.log ) & }
ops_report() {
  echo "$1: $(grep -E 'passed' /tmp/tgo.log | tail -1) $(tail -1 /tmp/tgo.log)"; grep -E "FAIL" /tmp/tgo.log | head
  grep -E "^\[ (RUN |FAIL| OK )" /tmp/tgo.log | tail -2; cp /tmp/tgo.log "$out/test_gpu_ops.log"
}
# ops_by_case CASE... -- test_gpu_ops, one process per case filter in parallel
# (each JIT-compiles its own kernels on a cold cache), then test_gpu_engine
# alone; a line per case and the engine test's failures and errors
# ops_cases CASE... -- test_gpu_ops, one process per case filter in parallel (=NAME: that case alone), a line per
# case and its failures
ops_cases() {
  local t0=$(date +%s) f
  for f in "$@"; do
    ( KT_VERBOSE=1 timeout 300 "$here/bin/test_gpu_ops" "$f" > "$out/ops_${f#=}.log" 2>&1; echo "rc=$?" >> "$out/ops_${f#=}.log" ) &
  done
  wait
  echo "test_gpu_ops (parallel by case) $(( $(date +%s) - t0 )) s:"
  for f in "$@"; do
    printf "  %-28s %s %s\n" "$f" "$(grep -E 'passed' "$out/ops_${f#=}.log" | tail -1)" "$(tail -1 "$out/ops_${f#=}.log")"
    grep -E "FAIL" "$out/ops_${f#=}.log" | head -3
  done
  cat "$out"/ops_*.log > "$out/test_gpu_ops.log"
}
# ops_split [CASE...] -- the whole test_gpu_ops split over processes: each case (default: every one) alone, all
# in parallel, then test_every_kernel_tested over the kernels they launched (each process lists them in
# $KT_KERNELS_USED.<pid> as it exits; tests/test_gpu_ops.c dump_used)
ops_split() {
  local ku; ku="$(mktemp -d)/used"
  local cases=("$@")
  [ ${#cases[@]} -gt 0 ] || cases=($(grep -o 'KT_CASE(test_[a-z0-9_]*)' "$here/test_gpu_ops.cases" | sed 's/KT_CASE(/=/; s/)//' | grep -v every_kernel_tested))
  export KT_KERNELS_USED="$ku"
  ops_cases "${cases[@]}"
  gt ops_every_kernel 120 "FAIL|passed" -- test_gpu_ops =test_every_kernel_tested
  unset KT_KERNELS_USED
}
ops_by_case() {
  ops_cases "$@"
  # alone: its KV-pool capacity check sizes pools from the GPU's free memory
  timeout 200 "$here/bin/test_gpu_engine" > "$out/test_gpu_engine.log" 2>&1; echo "test_gpu_engine rc=$?"
  grep -E "FAIL|passed|logits rel err" "$out/test_gpu_engine.log" | head -24
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$out/gpu.txt"
rc=0
if has tests; then
  for t in test_gpu_ops test_gpu_engine; do
    t0=$(date +%s)
    KT_VERBOSE=1 timeout "${KILN_TEST_TIMEOUT:-240}" "$here/bin/$t" > "$out/$t.log" 2>&1; r=$?
    [ $r -eq 124 ] && { echo "$t TIMED OUT; last lines:"; tail -4 "$out/$t.log"; }
    [ $r -ne 0 ] && rc=$r
    echo "$t rc=$r ($(( $(date +%s) - t0 )) s)"
    grep -E "FAIL|passed|rel err" "$out/$t.log" | head -40
  done
fi
if has engine; then
  peers="$repo/../shared/peers"; [ -f "$peers/torch_cudagraph_llama.py" ] || peers="$here/peers"
  bash "$here/bench/engine_bench.sh" "$here/bin/kiln" "$peers"
fi
if has tp; then   # on nvidia-h200-x2 / -x4 / -x8: TP 1, 2 and as many GPUs as there are
  t0=$(date +%s)
  "$here/bin/test_gpu_tp" > "$out/test_gpu_tp.log" 2>&1; r=$?
  [ $r -ne 0 ] && rc=$r
  echo "test_gpu_tp rc=$r ($(( $(date +%s) - t0 )) s)"
  grep -E "FAIL|passed|identical" "$out/test_gpu_tp.log" | head -30
  ngpu=$(nvidia-smi -L | wc -l); tps="1 2"; [ "$ngpu" -ge 4 ] && tps="$tps 4"; [ "$ngpu" -ge 8 ] && tps="$tps 8"
  for tp in $tps; do for cfg in "-b 1 -s 128 -o 512" "-b 32 -s 128 -o 256"; do
    "$here/bin/kiln" bench --model llama3-8b --load-format dummy --tp $tp $cfg --iters 2 --json 2>>"$out/tp_bench.err" \
      | tail -1 | tee -a "$out/tp_bench.jsonl"
  done; done
  if [ "$ngpu" -ge 4 ]; then for tp in 4 $([ "$ngpu" -ge 8 ] && echo 8); do for cfg in "-b 1 -s 128 -o 128" "-b 32 -s 128 -o 256"; do
    "$here/bin/kiln" bench --model llama3-70b --load-format dummy --tp $tp $cfg --iters 1 --json 2>>"$out/tp_bench.err" \
      | tail -1 | tee -a "$out/tp_bench.jsonl"
  done; done; fi
fi
if has fp8; then
  for t in "test_gpu_ops fp8" "test_gpu_ops attention" "test_gpu_ops kv_write" "test_gpu_engine fp8"; do
    set -- $t; t0=$(date +%s)
    "$here/bin/$1" "$2" > "$out/$1_$2.log" 2>&1; r=$?
    [ $r -ne 0 ] && rc=$r
    echo "$t rc=$r ($(( $(date +%s) - t0 )) s)"
    grep -E "FAIL|passed|rel err|KV pool|vs bf16|vs CPU" "$out/$1_$2.log" | head -40
  done
  "$here/bin/bench_kernels" fp8 2>&1 | tee "$out/bench_fp8.log"
  timeout 240 "$here/bin/fp8_accuracy" --model llama3-8b --load-format dummy --device cuda --prompt 128 --steps 256 \
    2>"$out/fp8_accuracy.err" | tee "$out/fp8_accuracy.log"
fi
if has fp8engine; then
  bash "$here/bench/fp8_bench.sh" "$here/bin/kiln"
fi
if has bench; then
  timeout "${KILN_BENCH_TIMEOUT:-400}" "$here/bin/bench_kernels" $filter 2>&1 | tee "$out/bench.log"
fi
if has gemvab; then # the engine at small batches with the GEMV off / on in several tilings
  for cfg in "0 2 4" "8 2 4" "8 1 8" "8 2 8"; do set -- $cfg
    for b in 1 8; do
      kb "gemv-max$1-rows$2-unroll$3-b$b" KILN_GEMV_MAX_M=$1 KILN_GEMV_ROWS=$2 KILN_GEMV_UNROLL=$3 -- -b $b -s 128 -o 256 --iters 1
    done
  done
fi
if has final1; then
  for t in test_gpu_ops test_gpu_engine; do
    t0=$(date +%s)
    timeout 300 "$here/bin/$t" > "$out/$t.log" 2>&1; r=$?
    echo "$t rc=$r ($(( $(date +%s) - t0 )) s)"; [ $r -ne 0 ] && rc=$r
    grep -E "FAIL|passed" "$out/$t.log" | head -12
  done
  # first-step logits with the first prefill kernel, to tell its rounding from the rest's
  KILN_PREFILL_KERNEL=v1 timeout 120 "$here/bin/test_gpu_engine" > "$out/test_gpu_engine_v1.log" 2>&1
  echo "test_gpu_engine (KILN_PREFILL_KERNEL=v1) rc=$?"; grep -E "logits rel err" "$out/test_gpu_engine_v1.log" | head -12
  timeout 150 "$here/bin/bench_kernels" decode > "$out/bench_decode.log" 2>&1
  timeout 100 "$here/bin/bench_kernels" elementwise >> "$out/bench_decode.log" 2>&1
  grep -E "ceilings|attn|rmsnorm|rope|kv write|silu" "$out/bench_decode.log" | sed -E 's/ +/ /g' | cut -c1-105
  if [ "${FINAL_GEMM:-0}" = 1 ]; then
    timeout 200 "$here/bin/bench_kernels" gemm > "$out/bench_gemm.log" 2>&1
    grep -E "^gemm \(weight|gemm_tc" "$out/bench_gemm.log" | grep -E "M=(8|16|32) " | sed -E 's/ +/ /g; s/\(weight bytes\) //' | cut -c1-90
  fi
fi
if has final2; then
  kb b1 -- -b 1 -s 128 -o 512 --iters 2
  kb b1-gemv4x2 KILN_GEMV_ROWS=4 KILN_GEMV_UNROLL=2 -- -b 1 -s 128 -o 512 --iters 2
  kb b32 -- -b 32 -s 128 -o 256 --iters 2
  kb b256 -- -b 256 -s 128 -o 256 --iters 2
  SPEC_BENCH_ONLY="b1-plain b1-self4" bash "$here/bench/spec_bench.sh" "$here/bin/kiln" 2>&1 | grep -vE "failed or missing" | tail -6
  for kv in bf16 fp8_e4m3; do # issue 7: full-batch decode step at b256, 2K context
    kb "kv-$kv-b256-ctx2048" -- --kv-cache-dtype $kv -b 256 -s 2048 -o 64 --prefill-ratio 0 --warmup 0 --iters 1
  done
fi
if has eng3; then
  kb b1 -- -b 1 -s 128 -o 512 --iters 2
  for b in 32 256; do kb b$b -- -b $b -s 128 -o 256 --iters 2; done
fi
if has pdlab; then # programmatic dependent launch on / off, same call
  for b in 1 32 256; do for pdl in 1 0; do
    o=256; [ $b = 1 ] && o=512
    kb "pdl$pdl-b$b" KILN_PDL=$pdl -- -b $b -s 128 -o $o --iters 2
  done; done
fi
if has nsys; then # kernel time inside the CUDA graphs, from Nsight Systems
  ns=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  if [ -z "$ns" ]; then echo "nsys: not on this image"; else
    for b in 1 32; do
      timeout 200 "$ns" profile --cuda-graph-trace=node -t cuda -o "/tmp/nsys_b$b" -f true \
        "$here/bin/kiln" bench --model llama3-8b --load-format dummy -b $b -s 128 -o 128 --iters 1 > /tmp/nsys_b$b.log 2>&1
      echo "== nsys -b $b (decode graphs + prefill; kernel, total %, instances, avg ns)"
      "$ns" stats -q --report cuda_gpu_kern_sum --format csv "/tmp/nsys_b$b.nsys-rep" 2>/dev/null \
        | python3 -c 'import csv,sys; r=list(csv.DictReader(l for l in sys.stdin if l.count(",")>3)); [print("%5.1f%% %7s %9.0f  %s" % (float(x["Time (%)"]), x["Instances"], float(x["Avg (ns)"]), x["Name"][:70])) for x in r[:22]]' \
        || tail -5 /tmp/nsys_b$b.log
    done
  fi
fi
if has startup; then # issue 11: start to first token, warm JIT cache, graphs captured, no weight reading
  ids=$(seq -s, 1000 1127)
  for i in 0 1 2; do  # run 0 fills the JIT cache
    t0=$(date +%s.%N)
    "$here/bin/kiln" generate --model llama3-8b --load-format dummy --prompt-ids "$ids" --max-tokens 1 > /dev/null 2> "$out/startup$i.err"
    t1=$(date +%s.%N)
    echo "startup run $i: process $(python3 -c "print('%.2f' % ($t1 - $t0))") s; $(grep -h 'first token' "$out/startup$i.err")"
  done
  grep -hE "kernels ready|captured|KV cache|weights" "$out/startup2.err" | sed 's/^kiln: info: //' | head -6
fi
if has s4; then # fourth session: op tests, kernel rows, engine, FP8 targets in one call
  ops_by_case ${S4_OPS:-embed rmsnorm glu rope kv_write fp8_cast attention_decode attention_prefill attention_fp8 sampling gemv gemm_tc test_gemm graph_replay all_reduce every_kernel}
  timeout 150 "$here/bin/bench_kernels" decode > "$out/bench_s4.log" 2>&1
  timeout 100 "$here/bin/bench_kernels" elementwise >> "$out/bench_s4.log" 2>&1
  timeout 200 "$here/bin/bench_kernels" gemm >> "$out/bench_s4.log" 2>&1
  grep -E "ceilings|attn decode|rmsnorm 4096|add_rmsnorm 4096|rope 4096|rope_kv_write 4096|silu_mul 4096" "$out/bench_s4.log" | sed -E 's/ +/ /g' | cut -c1-100
  grep -E "^gemm \(weight" "$out/bench_s4.log" | grep -E "M=(1|8|16|32|64) " | sed -E 's/ +/ /g; s/\(weight bytes\) //' | cut -c1-90
  kb b1 -- -b 1 -s 128 -o 512 --iters 2
  kb b32 -- -b 32 -s 128 -o 256 --iters 2
  kb b256 -- -b 256 -s 128 -o 256 --iters 2
  [ "${S4_FP8:-1}" = 1 ] && bash "$here/bench/fp8_bench.sh" "$here/bin/kiln" 2>&1 | grep -E "ratio|KV cache" | tail -6
fi
if has s5; then # fourth session, last call: FP8 decode kernel depths, elementwise, op tests
  ops_by_case ${S5_OPS:-attention_decode attention_fp8 attention_prefill rope kv_write rmsnorm fp8_cast}
  for st in 4 6 auto; do
    envs=(); [ $st = auto ] || envs=(KILN_DECODE_STAGES=$st)
    env "${envs[@]}" timeout 100 "$here/bin/bench_kernels" "decode fp8" > "$out/bench_fp8_$st.log" 2>&1
    echo "stages $st:"; grep -E "attn decode fp8" "$out/bench_fp8_$st.log" | sed -E 's/ +/ /g; s/32q\/8kv hd128 //' | cut -c1-90
  done
  timeout 150 "$here/bin/bench_kernels" decode > "$out/bench_s5.log" 2>&1
  timeout 100 "$here/bin/bench_kernels" elementwise >> "$out/bench_s5.log" 2>&1
  grep -E "ceilings|attn decode b|rmsnorm 4096|add_rmsnorm 4096|rope 4096|rope_kv_write 4096|silu_mul 4096|(rmsnorm|rope_kv_write) 1x|(rmsnorm|rope_kv_write) 1 tok" "$out/bench_s5.log" | sed -E 's/ +/ /g' | cut -c1-100
  FP8_BENCH_ONLY=decode bash "$here/bench/fp8_bench.sh" "$here/bin/kiln" 2>&1 | grep -E "ratio" | tail -2
  kb b1 -- -b 1 -s 128 -o 512 --iters 2
fi
if has s6; then # fifth session, first call: prefill grid order, per-op profile of the b256 ctx2048 step (bf16 / FP8)
  ops_by_case ${S6_OPS:-attention_prefill attention_decode attention_fp8}
  timeout 150 "$here/bin/bench_kernels" prefill > "$out/bench_s6.log" 2>&1
  grep -E "ceilings|prefill" "$out/bench_s6.log" | sed -E 's/ +/ /g' | cut -c1-110
  for kv in auto fp8_e4m3; do
    timeout 200 "$here/bin/kiln" bench --model llama3-8b --load-format dummy -b 256 -s 2048 -o 12 --prefill-ratio 0 \
      --warmup 0 --iters 1 --profile --kv-cache-dtype $kv > "$out/profile_256_$kv.log" 2>&1
    echo "== profile -b 256 -s 2048 kv $kv"; grep -E "profile|  [a-z_0-9]+ .*per step|decode step" "$out/profile_256_$kv.log" | sed 's/kiln: info: //' | head -44
  done
  FP8_BENCH_ONLY=decode bash "$here/bench/fp8_bench.sh" "$here/bin/kiln" 2>&1 | grep -E "ratio" | tail -2
fi
if has s7; then # fifth session: pipelined decode (KILN_OVERLAP) A/B, engine tests, FP8 step ratio
  timeout 240 "$here/bin/test_gpu_engine" > "$out/test_gpu_engine.log" 2>&1; echo "test_gpu_engine rc=$?"
  grep -E "FAIL|passed|logits rel err" "$out/test_gpu_engine.log" | head -24
  for ov in 1 0; do
    kb "b1-ov$ov" KILN_OVERLAP=$ov -- -b 1 -s 128 -o 512 --iters 2
    kb "b32-ov$ov" KILN_OVERLAP=$ov -- -b 32 -s 128 -o 256 --iters 2
    kb "b256-ov$ov" KILN_OVERLAP=$ov -- -b 256 -s 128 -o 256 --iters 2
  done
  for f in "$out"/kb_b*-ov*.json; do python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[1].split("/")[-1], "pipelined", j.get("decode_pipelined_steps"), "of", j["decode_steps"], "decode fwd ms", j["decode_forward_ms"])' "$f"; done
  FP8_BENCH_ONLY=decode bash "$here/bench/fp8_bench.sh" "$here/bin/kiln" 2>&1 | grep -E "ratio" | tail -2
  [ "${S7_FP8_OFF:-0}" = 1 ] && KILN_OVERLAP=0 FP8_BENCH_ONLY=decode bash "$here/bench/fp8_bench.sh" "$here/bin/kiln" 2>&1 | grep -E "ratio" | sed 's/^/overlap off: /' | tail -2
fi
if has tp5; then # fifth session, nvidia-h200-x2: TP tests, TP 1 / 2 at -b 1 / 32 (pipelined decode on and off), a TP 2 profile
  t0=$(date +%s)
  timeout 200 "$here/bin/test_gpu_tp" > "$out/test_gpu_tp.log" 2>&1; echo "test_gpu_tp rc=$? ($(( $(date +%s) - t0 )) s)"
  grep -E "FAIL|passed" "$out/test_gpu_tp.log" | head -12
  for cfg in "b1:-b 1 -s 128 -o 512" "b32:-b 32 -s 128 -o 256"; do
    tag=${cfg%%:*}; args=${cfg#*:}
    [ "${TP5_TP1:-1}" = 1 ] && kb "tp1-$tag" -- --tp 1 $args --iters 2
    kb "tp2-$tag" -- --tp 2 $args --iters 2
    [ "${TP5_OV0:-1}" = 1 ] && kb "tp2-$tag-ov0" KILN_OVERLAP=0 -- --tp 2 $args --iters 2
    kb "tp2-$tag-nofuse" KILN_FUSE_AR_NORM=0 -- --tp 2 $args --iters 2
  done
  [ "${TP5_PROFILE:-1}" = 1 ] && timeout 150 "$here/bin/kiln" bench --model llama3-8b --load-format dummy --tp 2 -b 1 -s 128 -o 64 --iters 1 --profile \
    > "$out/profile_tp2_b1.log" 2>&1
  echo "== profile --tp 2 -b 1"; grep -E "profile|  [a-z_0-9]+ .*per step" "$out/profile_tp2_b1.log" | sed 's/kiln: info: //' | head -32
fi
if has fin5; then # fifth session, last call (nvidia-h200-x2): op tests by case, engine and TP tests, elementwise rows, TP 1 / 2
  ops_by_case ${FIN5_OPS:-embed rmsnorm glu rope kv_write fp8_cast attention_decode attention_prefill attention_fp8 sampling gemv gemm_tc test_gemm graph_replay all_reduce}
  timeout 100 "$here/bin/test_gpu_tp" > "$out/test_gpu_tp.log" 2>&1; echo "test_gpu_tp rc=$?"; grep -E "FAIL|passed" "$out/test_gpu_tp.log" | head -6
  timeout 60 "$here/bin/bench_kernels" elementwise > "$out/bench_fin5.log" 2>&1
  grep -E "ceilings|4096" "$out/bench_fin5.log" | grep -v tiling | sed -E 's/ +/ /g' | cut -c1-100
  for cfg in "b1:-b 1 -s 128 -o 512" "b32:-b 32 -s 128 -o 256"; do
    tag=${cfg%%:*}; args=${cfg#*:}
    kb "tp1-$tag" -- --tp 1 $args --iters 2
    kb "tp2-$tag" -- --tp 2 $args --iters 2
  done
fi
if has s18; then # branch next: the three epilogue / exchange changes in one call
  if [ "${S18_TESTS:-1}" = 1 ]; then
    t0=$(date +%s)
    ( KT_VERBOSE=1 CUDA_VISIBLE_DEVICES=0 timeout 400 "$here/bin/test_gpu_ops" > "$out/test_gpu_ops.log" 2>&1; echo "rc=$?" >> "$out/test_gpu_ops.log" ) &
    KILN_GEMV_AR=1 KILN_GEMV_ROPE=1 KT_VERBOSE=1 timeout 240 "$here/bin/test_gpu_tp" > "$out/test_gpu_tp.log" 2>&1
    echo "test_gpu_tp (AR + ROPE) rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed|ranks, rank" "$out/test_gpu_tp.log" | head -12
    wait; echo "test_gpu_ops $(tail -1 "$out/test_gpu_ops.log") ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" "$out/test_gpu_ops.log" | head -12
    t0=$(date +%s); KILN_GEMV_ROPE=1 timeout 200 "$here/bin/test_gpu_engine" > "$out/test_gpu_engine.log" 2>&1
    echo "test_gpu_engine (ROPE) rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed|logits rel err" "$out/test_gpu_engine.log" | head -16
  fi
  for r in a b; do
    for rp in 0 1; do kb "tp1-b1-rope$rp-$r" KILN_GEMV_ROPE=$rp -- --tp 1 -b 1 -s 128 -o 512 --iters 2; done
    for c in "0:0:1" "1:0:1" "1:1:1" "1:1:0"; do
      IFS=: read -r ar rp ga <<< "$c"
      kb "tp2-b1-ar$ar-rope$rp-ga$ga-$r" KILN_GEMV_AR=$ar KILN_GEMV_ROPE=$rp KILN_P2P_GATHER=$ga -- --tp 2 -b 1 -s 128 -o 512 --iters 2
    done
    if [ "$r" = a ]; then # decode attention's split-K partition of 64 tokens with everything else on (s14's question)
      kb "tp1-b1-rope1-P64" KILN_GEMV_ROPE=1 KILN_DECODE_PARTITION=64 -- --tp 1 -b 1 -s 128 -o 512 --iters 2
      kb "tp2-b1-ar1-rope1-ga1-P64" KILN_GEMV_AR=1 KILN_GEMV_ROPE=1 KILN_DECODE_PARTITION=64 -- --tp 2 -b 1 -s 128 -o 512 --iters 2
    fi
  done
fi
if has s17; then # the row-parallel GEMV with the push all-reduce + add + RMSNorm as its epilogue (branch gemv-ar)
  for f in test_all_reduce_one_rank test_gemv_rope; do
    t0=$(date +%s); KT_VERBOSE=1 timeout 120 "$here/bin/test_gpu_ops" $f > "$out/ops_$f.log" 2>&1
    echo "test_gpu_ops $f rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" "$out/ops_$f.log" | head -6
  done
  t0=$(date +%s); KILN_GEMV_AR=1 KILN_GEMV_ROPE=1 KT_VERBOSE=1 timeout 240 "$here/bin/test_gpu_tp" > "$out/test_gpu_tp.log" 2>&1
  echo "test_gpu_tp (AR + ROPE epilogues) rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed|ranks, rank" "$out/test_gpu_tp.log" | head -12
  kb "tp1-b1" -- --tp 1 -b 1 -s 128 -o 512 --iters 2
  kb "tp1-b1-rope" KILN_GEMV_ROPE=1 -- --tp 1 -b 1 -s 128 -o 512 --iters 2
  for r in a b; do for c in "0:0" "1:0" "1:1"; do
    ar=${c%%:*}; rp=${c#*:}
    kb "tp2-b1-ar$ar-rope$rp-$r" KILN_GEMV_AR=$ar KILN_GEMV_ROPE=$rp -- --tp 2 -b 1 -s 128 -o 512 --iters 2
  done; done
fi
if has s16; then # the qkv GEMV with rope + KV write as its epilogue (branch rope-gemv)
  t0=$(date +%s); KT_VERBOSE=1 timeout 120 "$here/bin/test_gpu_ops" test_gemv_rope > "$out/ops_gemv_rope.log" 2>&1
  echo "test_gpu_ops test_gemv_rope rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" "$out/ops_gemv_rope.log" | head -6
  t0=$(date +%s); KILN_GEMV_ROPE=1 timeout 200 "$here/bin/test_gpu_engine" > "$out/test_gpu_engine.log" 2>&1
  echo "test_gpu_engine (rope epilogue) rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed|logits rel err" "$out/test_gpu_engine.log" | head -14
  t0=$(date +%s); KILN_GEMV_ROPE=1 timeout 200 "$here/bin/test_gpu_tp" > "$out/test_gpu_tp.log" 2>&1
  echo "test_gpu_tp (rope epilogue) rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" "$out/test_gpu_tp.log" | head -6
  for r in a b; do for rp in 0 1; do for tp in 1 2; do
    kb "tp$tp-b1-rope$rp-$r" KILN_GEMV_ROPE=$rp -- --tp $tp -b 1 -s 128 -o 512 --iters 2
  done; done; done
fi
if has s19; then # seventh session: next's defaults (rope epilogue, push gather, adaptive decode split) tested and timed
  if [ "${S19_TESTS:-1}" = 1 ]; then
    t0=$(date +%s)
    ( KT_VERBOSE=1 CUDA_VISIBLE_DEVICES=0 timeout 400 "$here/bin/test_gpu_ops" > "$out/test_gpu_ops.log" 2>&1; echo "rc=$?" >> "$out/test_gpu_ops.log" ) &
    KT_VERBOSE=1 timeout 240 "$here/bin/test_gpu_tp" > "$out/test_gpu_tp.log" 2>&1
    echo "test_gpu_tp rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" "$out/test_gpu_tp.log" | head -8
    wait; echo "test_gpu_ops $(tail -1 "$out/test_gpu_ops.log") ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" "$out/test_gpu_ops.log" | head -12
    gt test_gpu_engine 200 "FAIL|passed|logits rel err" -- test_gpu_engine
  fi
  for r in a b; do
    for ad in 1 0; do for tp in 1 2; do
      kb "tp$tp-b1-adaptive$ad-$r" KILN_DECODE_ADAPTIVE=$ad -- --tp $tp -b 1 -s 128 -o 512 --iters 2
    done; done
  done
  kb "tp1-b1-rope0" KILN_GEMV_ROPE=0 -- --tp 1 -b 1 -s 128 -o 512 --iters 2
  kb "tp2-b1-rope0" KILN_GEMV_ROPE=0 -- --tp 2 -b 1 -s 128 -o 512 --iters 2
  for tp in 1 2; do kb "tp$tp-b32" -- --tp $tp -b 32 -s 128 -o 256 --iters 2; done
fi
if has s38; then # twelfth session: the fused decode split with the warp-parallel combination (branch next11)
  ops_bg 0 400
  ( CUDA_VISIBLE_DEVICES=0 KT_VERBOSE=1 timeout 300 "$here/bin/test_gpu_ops" test_attention_decode_fused > "$out/ops_fused.log" 2>&1
    echo "rc=$?" >> "$out/ops_fused.log" ) &
  export CUDA_VISIBLE_DEVICES=1
  gt test_gpu_engine_fused 150 "FAIL|passed" KILN_DECODE_FUSED_REDUCE=1 -- test_gpu_engine
  for r in 1 2 3; do
    [ -x "$here/bin/kiln_main" ] && KB_BIN=kiln_main kb "b1-main$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-def$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-fused$r" KILN_DECODE_FUSED_REDUCE=1 -- -b 1 -s 128 -o 512 --iters 2
  done
  for r in 1 2; do
    kb "b32-long-def$r" -- -b 32 -s 128 -o 256 --iters 2 --max-model-len 8192
    kb "b32-long-fused$r" KILN_DECODE_FUSED_REDUCE=1 -- -b 32 -s 128 -o 256 --iters 2 --max-model-len 8192
  done
  kb "b8-def" -- -b 8 -s 128 -o 256 --iters 2
  kb "b8-fused" KILN_DECODE_FUSED_REDUCE=1 -- -b 8 -s 128 -o 256 --iters 2
  # -b 32: the qkv GEMM + rope through gemm_sk at 32 rows in other launch shapes (at the default 3 stages and
  # split 5 it only matched cuBLASLt + the rope kernel; 240 blocks in clusters of 5 land up to 3 on an SM)
  for r in 1 2; do
    kb "b32-def$r" -- -b 32 -s 128 -o 256 --iters 2
    kb "b32-rope32-$r" KILN_SKGEMM_ROPE=32 -- -b 32 -s 128 -o 256 --iters 2
    kb "b32-rope32-st4-$r" KILN_SKGEMM_ROPE=32 KILN_SKGEMM_STAGES=4 -- -b 32 -s 128 -o 256 --iters 2
    kb "b32-rope32-st4-sp4-$r" KILN_SKGEMM_ROPE=32 KILN_SKGEMM_STAGES=4 KILN_SKGEMM_SPLIT=4 -- -b 32 -s 128 -o 256 --iters 2
    kb "b32-st4-$r" KILN_SKGEMM_STAGES=4 -- -b 32 -s 128 -o 256 --iters 2
    kb "b32-rope32-rst4-$r" KILN_SKGEMM_ROPE=32 KILN_SKGEMM_ROPE_STAGES=4 -- -b 32 -s 128 -o 256 --iters 2
  done
  timeout 120 "$here/bin/bench_kernels" gemm_sk_quick > /tmp/bsk.log 2>&1
  grep -E "M=32" /tmp/bsk.log | sed -E "s/ +/ /g" | cut -c1-110
  for f in 0 1; do KILN_DECODE_FUSED_REDUCE=$f timeout 60 "$here/bin/bench_kernels" decode > /tmp/bd.log 2>&1
    grep -E "attn decode" /tmp/bd.log | grep -E "b1 |b8 " | sed -E "s/ +/ /g; s/32q.8kv hd128 //; s/ of copy target.*//; s/^/fused=$f: /" | cut -c1-100; done
  unset CUDA_VISIBLE_DEVICES; wait
  echo "ops fused: $(grep -E 'passed' "$out/ops_fused.log" | tail -1) $(tail -1 "$out/ops_fused.log")"; grep -E "FAIL" "$out/ops_fused.log" | head -4
  ops_report "test_gpu_ops (whole)"
  gt test_gpu_tp 100 "FAIL|passed" -- test_gpu_tp
  # tensor parallelism 2 with the qkv + rope through gemm_sk (default up to 16 rows since the eleventh session,
  # not yet measured on the TP shards)
  for b in 8 16; do kb "tp2-b$b-def" -- --tp 2 -b $b -s 128 -o 256 --iters 2
    kb "tp2-b$b-rope0" KILN_SKGEMM_ROPE=0 -- --tp 2 -b $b -s 128 -o 256 --iters 2; done
fi
if has s39; then # twelfth session: the rope GEMV a row a warp (RR 1), GEMV K split 4, fused reduce from 2 sequences
  ops_bg 0 420
  export CUDA_VISIBLE_DEVICES=1
  b1() { kb "$1" "${@:2}" -- -b 1 -s 128 -o 512 --iters 2; }
  for r in 1 2; do
    [ -x "$here/bin/kiln_main" ] && KB_BIN=kiln_main kb "b1-main$r" -- -b 1 -s 128 -o 512 --iters 2
    b1 "b1-def$r"
    b1 "b1-rr1-u2k1-$r" KILN_GEMV_ROPE_ROWS=1 KILN_GEMV_ROPE_KSPLIT=1
    b1 "b1-rr1-u2k2-$r" KILN_GEMV_ROPE_ROWS=1 KILN_GEMV_ROPE_KSPLIT=2
    b1 "b1-rule5-$r" KILN_GEMV_RULE=5
  done
  b1 b1-rr1-u4k1 KILN_GEMV_ROPE_ROWS=1 KILN_GEMV_ROPE_KSPLIT=1 KILN_GEMV_ROPE_UNROLL=4
  b1 b1-rr1-u4k2 KILN_GEMV_ROPE_ROWS=1 KILN_GEMV_ROPE_KSPLIT=2 KILN_GEMV_ROPE_UNROLL=4
  b1 b1-rr1-u2k4 KILN_GEMV_ROPE_ROWS=1 KILN_GEMV_ROPE_KSPLIT=4
  b1 b1-rr2-u2k4 KILN_GEMV_ROPE_KSPLIT=4
  b1 b1-rule6 KILN_GEMV_RULE=6
  b1 b1-def3
  # the fused decode split from 2 sequences (-b 1 loses with it: 243.8 against 245.9, s38)
  for b in 8 16 32 64; do for r in 1 2; do
    kb "b$b-def$r" -- -b $b -s 128 -o 256 --iters 2
    kb "b$b-fused2-$r" KILN_DECODE_FUSED_REDUCE=2 -- -b $b -s 128 -o 256 --iters 2
  done; done
  unset CUDA_VISIBLE_DEVICES; wait
  ops_report "test_gpu_ops (whole)"
  gt test_gpu_tp 100 "FAIL|passed" -- test_gpu_tp
  kb tp2-b1-def -- --tp 2 -b 1 -s 128 -o 512 --iters 2
  kb tp2-b1-rr1 KILN_GEMV_ROPE_ROWS=1 -- --tp 2 -b 1 -s 128 -o 512 --iters 2
fi
if has s40; then # twelfth session: the rope GEMV's rows 1 default; PDL trigger variants (kv/early_small, kv/early_all)
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
  ( CUDA_VISIBLE_DEVICES=0 KT_VERBOSE=1 timeout 200 "$here/bin/test_gpu_engine" > "$out/tge.log" 2>&1; echo "rc=$?" >> "$out/tge.log"
    CUDA_VISIBLE_DEVICES=0 KT_VERBOSE=1 KILN_KERNEL_DIR="$here/kv/early_all" timeout 200 "$here/bin/test_gpu_engine" > "$out/tge_ea.log" 2>&1
    echo "rc=$?" >> "$out/tge_ea.log"
    CUDA_VISIBLE_DEVICES=0 KT_VERBOSE=1 KILN_KERNEL_DIR="$here/kv/early_small" timeout 200 "$here/bin/test_gpu_engine" > "$out/tge_es.log" 2>&1
    echo "rc=$?" >> "$out/tge_es.log" ) &
  # one GPU: the tests first, alone
  if [ "$ngpu" -ge 2 ]; then export CUDA_VISIBLE_DEVICES=1; else wait; export CUDA_VISIBLE_DEVICES=0; fi
  [ -x "$here/bin/kiln_main" ] && KB_BIN=kiln_main kb "b1-main" -- -b 1 -s 128 -o 512 --iters 2
  for r in 1 2; do
    for b in 1 8 32 64; do
      o=$([ $b = 1 ] && echo 512 || echo 256)
      kb "b$b-def$r" -- -b $b -s 128 -o $o --iters 2
      kb "b$b-early_small$r" KILN_KERNEL_DIR="$here/kv/early_small" -- -b $b -s 128 -o $o --iters 2
      kb "b$b-early_all$r" KILN_KERNEL_DIR="$here/kv/early_all" -- -b $b -s 128 -o $o --iters 2
    done
  done
  unset CUDA_VISIBLE_DEVICES; wait
  for f in tge tge_ea tge_es; do echo "$f: $(grep -E 'passed' "$out/$f.log" | tail -1) $(tail -1 "$out/$f.log")"; grep -E "FAIL" "$out/$f.log" | head -6; done
  if [ "$ngpu" -ge 2 ]; then
    gt test_gpu_tp 100 "FAIL|passed" -- test_gpu_tp
    kb tp2-b1 -- --tp 2 -b 1 -s 128 -o 512 --iters 2
    kb tp2-b1-early_small KILN_KERNEL_DIR="$here/kv/early_small" -- --tp 2 -b 1 -s 128 -o 512 --iters 2
  fi
fi
if has s41; then # twelfth session: the early PDL trigger for decode steps of <= 8 sequences (default), against off
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
  export CUDA_VISIBLE_DEVICES=0
  gt test_gpu_engine 300 "FAIL|passed" -- test_gpu_engine
  for r in 1 2; do
    kb "b1-def$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-early0-$r" KILN_PDL_EARLY_MAX_SEQS=0 -- -b 1 -s 128 -o 512 --iters 2
    kb "b8-def$r" -- -b 8 -s 128 -o 256 --iters 2
    kb "b8-early0-$r" KILN_PDL_EARLY_MAX_SEQS=0 -- -b 8 -s 128 -o 256 --iters 2
  done
  kb b16-def -- -b 16 -s 128 -o 256 --iters 2
  kb b16-early16 KILN_PDL_EARLY_MAX_SEQS=16 -- -b 16 -s 128 -o 256 --iters 2
  kb b32-def -- -b 32 -s 128 -o 256 --iters 2
  kb b64-def -- -b 64 -s 128 -o 256 --iters 2
  unset CUDA_VISIBLE_DEVICES
  if [ "$ngpu" -ge 2 ]; then
    gt test_gpu_tp 100 "FAIL|passed" -- test_gpu_tp
    kb tp2-b1 -- --tp 2 -b 1 -s 128 -o 512 --iters 2
    kb tp2-b1-early0 KILN_PDL_EARLY_MAX_SEQS=0 -- --tp 2 -b 1 -s 128 -o 512 --iters 2
  fi
fi
if has s42; then # twelfth session: the early trigger in run_ops (default) against every kernel early (kv/early_all)
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do
    kb "b1-def$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-early_all$r" KILN_KERNEL_DIR="$here/kv/early_all" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-early0-$r" KILN_PDL_EARLY_MAX_SEQS=0 -- -b 1 -s 128 -o 512 --iters 2
  done
  kb b8-def -- -b 8 -s 128 -o 256 --iters 2
  kb b8-early_all KILN_KERNEL_DIR="$here/kv/early_all" -- -b 8 -s 128 -o 256 --iters 2
  unset CUDA_VISIBLE_DEVICES
fi
if has s43; then # twelfth session: tensor parallelism with the rope GEMV's rows 1; the early trigger under TP 2
  gt test_gpu_tp 100 "FAIL|passed" -- test_gpu_tp
  gt test_gpu_tp_early 100 "FAIL|passed" KILN_PDL_EARLY_MAX_SEQS=8 -- test_gpu_tp
  for r in 1 2; do
    kb "tp2-b1-def$r" -- --tp 2 -b 1 -s 128 -o 512 --iters 2
    kb "tp2-b1-early8-$r" KILN_PDL_EARLY_MAX_SEQS=8 -- --tp 2 -b 1 -s 128 -o 512 --iters 2
  done
fi
if has s181; then # thirty-third session: the o projection (the plain N == K GEMM) at 9..64 rows in 128-row tiles x 2 K halves (KILN_SKGEMM_TMA_SQ_RT=2: 64 blocks, half the SMs, where the plan has 128 of 64 rows) -- layer 16's o in the -b 32 graph, engine -b 32 / 16 / 64 alternating, bench_kernels gemm_rows_o --graph both ways
  export CUDA_VISIBLE_DEVICES=0
  for cfg in "" "KILN_SKGEMM_TMA_SQ_RT=2"; do skp_b32 62 $cfg; done
  alt 2 b32 sq2=KILN_SKGEMM_TMA_SQ_RT=2 -- -b 32 -s 128 -o 256 --iters 1
  alt 2 b16 sq2=KILN_SKGEMM_TMA_SQ_RT=2 -- -b 16 -s 128 -o 256 --iters 1
  alt 1 b64 sq2=KILN_SKGEMM_TMA_SQ_RT=2 -- -b 64 -s 128 -o 256 --iters 1
  for e in "" 2; do bk_rows o rows_o_sq$e KILN_SKGEMM_TMA_SQ_RT=$e -- --graph; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s180; then # thirty-third session: gemm_sk_quick_o / _qkv under --graph (the 20 calls of a batch in a CUDA graph, so each launch's successor is queued when its early trigger fires), default trigger and early (KILN_BENCH_PDL_EARLY=1): do rings that leave room for the next launch's blocks gain there?
  export CUDA_VISIBLE_DEVICES=0
  for sh in o qkv; do for e in 0 1; do bk_skq $sh skqg_${sh}_$e KILN_BENCH_PDL_EARLY=$e -- --graph; done; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s179; then # thirty-third session: kiln's small-M rows (gemm_rows_o / _qkv) with the 20 calls of a batch in a CUDA graph (--graph: the host's launch cost out, as in the engine's decode graphs), default trigger and early; skx_micro (the probe of gemm_skx's design) in the same call
  export CUDA_VISIBLE_DEVICES=0
  for sh in o qkv; do for e in 0 1; do for gr in "" --graph; do bk_rows $sh rows_${sh}_$e$gr KILN_BENCH_PDL_EARLY=$e -- $gr; done; done; done
  timeout 200 "$here/bin/skx_micro" 2>&1 | tee "$out/skx_micro.log" | grep -E "ceiling|mode 8|M  1" | sed 's/  */ /g'
  unset CUDA_VISIBLE_DEVICES
fi
if has s178; then # thirty-third session: skring_micro mode 10 -- the split-K sum through global memory at a software barrier of the tile's blocks (no cluster, every block sums a slice), 2 blocks an SM, against the MMAs alone (mode 5), M = 32 and 16 (o, qkv)
  export CUDA_VISIBLE_DEVICES=0
  for m in 32 16; do timeout 120 "$here/bin/skring_micro" $m sync 2>&1 | tee "$out/skring_sync_$m.log" | grep -E "ceiling|mode|skipped" | sed 's/  */ /g'; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s177; then # thirty-third session: back-to-back small-M GEMMs with the early PDL trigger (KILN_BENCH_PDL_EARLY=1: each launch's successor placed once its blocks all run, loading W under it where an SM has room) against the default trigger, gemm_sk_tma in rings that leave room for a second block -- bench_kernels gemm_sk_quick_o / _qkv and gemm_rows_o / _qkv both ways
  export CUDA_VISIBLE_DEVICES=0
  for sh in o qkv; do for e in 0 1; do bk_skq $sh skq_${sh}_$e KILN_BENCH_PDL_EARLY=$e --; done; done
  for sh in o qkv; do for e in 0 1; do bk_rows $sh rows_${sh}_$e KILN_BENCH_PDL_EARLY=$e --; done; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s176; then # thirty-second session (the knobs were removed after this call): the o projection's blocks beside the decode attention -- the attention in 2 warps (KILN_DECODE_WARPS=2: 2 x ~49 KB an SM), the o in 10 stages (KILN_SKGEMM_TMA_O_STAGES), the attention's early PDL trigger (KILN_DECODE_PDL_EARLY=1: the o's blocks launch at its start and load W under it), or 4 warps of 2 tile slots (KILN_DECODE_STAGES=2: 2 x ~65 KB) beside an o of 7 stages -- layer 16's o in the -b 32 graph, engine -b 32 / 64 alternating
  export CUDA_VISIBLE_DEVICES=0
  for cfg in "" "KILN_DECODE_WARPS=2 KILN_SKGEMM_TMA_O_STAGES=10 KILN_DECODE_PDL_EARLY=1"; do skp_b32 62 $cfg; done
  alt 2 b32 w2o10=KILN_DECODE_WARPS=2,KILN_SKGEMM_TMA_O_STAGES=10 w2o10e=KILN_DECODE_WARPS=2,KILN_SKGEMM_TMA_O_STAGES=10,KILN_DECODE_PDL_EARLY=1 s2o7e=KILN_DECODE_STAGES=2,KILN_SKGEMM_TMA_O_STAGES=7,KILN_DECODE_PDL_EARLY=1 -- -b 32 -s 128 -o 256 --iters 1
  alt 1 b64 w2o10e=KILN_DECODE_WARPS=2,KILN_SKGEMM_TMA_O_STAGES=10,KILN_DECODE_PDL_EARLY=1 -- -b 64 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s175; then # thirty-first session (the knob was removed after this call): the o projection's late blocks reading W from L2 (KILN_SKGEMM_TMA_PFP=1: each block of gemm_sk_tma's first half, before its wait, asks L2 for its partner's W) -- test_gemm_sk with it on, layer 16's o in the -b 32 graph, engine -b 32 / 64 alternating
  export CUDA_VISIBLE_DEVICES=0
  KILN_SKGEMM_TMA_PFP=1 KT_VERBOSE=1 timeout 300 "$here/bin/test_gpu_ops" =test_gemm_sk > "$out/ops_pfp.log" 2>&1; echo "test_gemm_sk with PFP rc=$? $(grep -E 'passed' "$out/ops_pfp.log" | tail -1)"; grep FAIL "$out/ops_pfp.log" | head -3
  for cfg in "" "KILN_SKGEMM_TMA_PFP=1"; do skp_b32 62 $cfg; done
  alt 3 b32 pfp=KILN_SKGEMM_TMA_PFP=1 -- -b 32 -s 128 -o 256 --iters 1
  alt 2 b64 pfp=KILN_SKGEMM_TMA_PFP=1 -- -b 64 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s174; then # thirty-first session: programmatic dependent launch's early trigger (KILN_PDL_EARLY_MAX_SEQS, default 8) at -b 32 / 64 on today's kernels, alternating
  export CUDA_VISIBLE_DEVICES=0
  alt 2 b32 early=KILN_PDL_EARLY_MAX_SEQS=64 -- -b 32 -s 128 -o 256 --iters 1
  alt 1 b64 early=KILN_PDL_EARLY_MAX_SEQS=64 -- -b 64 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s173; then # thirty-first session (the fold and the hacks were reverted after this call: it needs that code): the add + RMSNorm folded into gemm_sk_tma's GEMMs at 17..64 rows (KILN_SKGEMM_NORM=1: o / down add into the residual, write h * w and row partials; gate/up and qkv scale by 1 / rms) -- test_gemm_sk_norm, test_gemv_norm, test_gpu_engine with it on; engine -b 32 / 64 alternating default / fold / the nonorm bound (KILN_HACK_NONORM: the norm ops skipped, wrong results)
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemm_sk_norm =test_gemv_norm
  gt engine_fold 300 "passed|FAIL|rel err" KILN_SKGEMM_NORM=1 -- test_gpu_engine
  alt 3 b32 fold=KILN_SKGEMM_NORM=1 nonorm=KILN_HACK_NONORM=1 -- -b 32 -s 128 -o 256 --iters 1
  alt 2 b64 fold=KILN_SKGEMM_NORM=1 -- -b 64 -s 128 -o 256 --iters 1
  kb "b64-nonorm" KILN_HACK_NONORM=1 -- -b 64 -s 128 -o 256 --iters 1
  kb "b32-noattn" KILN_HACK_NOATTN=1 -- -b 32 -s 128 -o 256 --iters 1
  for op in 62 63; do skp_b32 $op KILN_SKGEMM_NORM=1; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s172; then # thirty-first session: upper bounds at -b 32 / 64 (a hack build, reverted: wrong results, timing only): the residual add + RMSNorm ops skipped at 2..64 rows (KILN_HACK_NONORM: as if folded into the GEMMs), the decode attention skipped (KILN_HACK_NOATTN)
  export CUDA_VISIBLE_DEVICES=0
  alt 3 b32 nonorm=KILN_HACK_NONORM=1 -- -b 32 -s 128 -o 256 --iters 1
  kb "b32-noattn" KILN_HACK_NOATTN=1 -- -b 32 -s 128 -o 256 --iters 1
  alt 2 b64 nonorm=KILN_HACK_NONORM=1 -- -b 64 -s 128 -o 256 --iters 1
  kb "b64-noattn" KILN_HACK_NOATTN=1 -- -b 64 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s171; then # thirtieth session, review: kiln_embed's row copy and kiln_gather_rows / _gather_last through one copy_row (16-byte pieces, 4 a thread loaded before any store; zeros for an empty sequence or an id outside the shard) -- test_embed, test_glu_add_gather_cast, engine -b 1 / -b 32
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_embed =test_glu_add_gather_cast
  kb "b32" -- -b 32 -s 128 -o 256 --iters 1
  kb "b1" -- -b 1 -s 128 -o 512 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s170; then # (the PREW / STAGES_SQ knobs were removed after this call) thirtieth session: gemm_sk_tma's plain GEMMs issuing only PREW stages of W before the wait (x of those ahead of the rest: KILN_SKGEMM_TMA_PREW) and the o projection (N == K) in a ring that fits beside one decode-attention block (KILN_SKGEMM_TMA_STAGES_SQ=10) -- test_gemm_sk at PREW 4, gemm_tma_prof, layer 16's o / down in the -b 32 graph, engine -b 32 / 64 alternating
  export CUDA_VISIBLE_DEVICES=0
  KILN_SKGEMM_TMA_PREW=4 KT_VERBOSE=1 timeout 300 "$here/bin/test_gpu_ops" =test_gemm_sk > "$out/ops_prew4.log" 2>&1; echo "test_gemm_sk at PREW 4 rc=$? $(grep -E 'passed' "$out/ops_prew4.log" | tail -1)"; grep FAIL "$out/ops_prew4.log" | head -3
  for cfg in "" "KILN_SKGEMM_TMA_PREW=8" "KILN_SKGEMM_TMA_PREW=4"; do
    echo "bench_kernels gemm_tma_prof [$cfg]"; env $cfg timeout 100 "$here/bin/bench_kernels" gemm_tma_prof 2>&1 | grep -E "down|qkv|o " | grep "after" | cut -c1-300
  done
  for cfg in "" "KILN_SKGEMM_TMA_PREW=8" "KILN_SKGEMM_TMA_STAGES_SQ=10"; do
    for op in 62 64; do
      skp_b32 $op $cfg
    done
  done
  for r in 1 2; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-prew8-$r" KILN_SKGEMM_TMA_PREW=8 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-prew4-$r" KILN_SKGEMM_TMA_PREW=4 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-sq10-$r" KILN_SKGEMM_TMA_STAGES_SQ=10 -- -b 32 -s 128 -o 256 --iters 1
  done
  kb "b64-def" -- -b 64 -s 128 -o 256 --iters 1
  kb "b64-prew8" KILN_SKGEMM_TMA_PREW=8 -- -b 64 -s 128 -o 256 --iters 1
  kb "b64-sq10" KILN_SKGEMM_TMA_STAGES_SQ=10 -- -b 64 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s169; then # (build with KILN_AB_REVS="base=b43eaba"; the SPT / MINB knobs were removed after this call) thirtieth session: kiln_embed copying rows in 16-byte pieces (kv/base: the element loop) and the greedy split sampler in one wave (KILN_SAMPLE_MINB=8: 32 registers; KILN_SAMPLE_SPT=8: 8192-logit chunks) -- test_embed, test_sampling_greedy, bench_kernels sample, engine -b 32 / 64 / 1 alternating, the -b 32 step boundary
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_embed =test_sampling_greedy
  echo "bench_kernels sample"; timeout 90 "$here/bin/bench_kernels" sample 2>&1 | grep -E "^sample" | cut -c1-100
  for r in 1 2; do
    kb "b32-new-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-base-$r" KILN_KERNEL_DIR="$here/kv/base" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-minb8-$r" KILN_SAMPLE_MINB=8 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-spt8-$r" KILN_SAMPLE_SPT=8 -- -b 32 -s 128 -o 256 --iters 1
  done
  kb "b64-new" -- -b 64 -s 128 -o 256 --iters 1
  kb "b64-base" KILN_KERNEL_DIR="$here/kv/base" -- -b 64 -s 128 -o 256 --iters 1
  kb "b64-minb8" KILN_SAMPLE_MINB=8 -- -b 64 -s 128 -o 256 --iters 1
  kb "b64-spt8" KILN_SAMPLE_SPT=8 -- -b 64 -s 128 -o 256 --iters 1
  kb "b1-new" -- -b 1 -s 128 -o 512 --iters 1
  kb "b1-base" KILN_KERNEL_DIR="$here/kv/base" -- -b 1 -s 128 -o 512 --iters 1
  tb "bnd32n" KILN_SAMPLE_MINB=8 -- -b 32 -s 128 -o 64 --iters 1
  python3 "$here/bench/trace_boundary.py" /tmp/trace_bnd32n.csv --launches 1 --tail 2 --head 4 | cut -c1-150
  unset CUDA_VISIBLE_DEVICES
fi
if has s168; then # thirtieth session: the GPU timeline at decode step boundaries (bench/trace_boundary.py: the graph's last kernels, the sampling and metadata kernels outside it, the next launch's first kernels) at -b 32, -b 1 and -b 64
  export CUDA_VISIBLE_DEVICES=0
  for b in 32 1 64; do
    tb "bnd$b" -- -b $b -s 128 -o 64 --iters 1
    python3 "$here/bench/trace_boundary.py" /tmp/trace_bnd$b.csv --launches 2 --tail 4 --head 6 | cut -c1-150
  done
  echo "bench_kernels sample"; timeout 60 "$here/bin/bench_kernels" sample 2>&1 | tail -12
  unset CUDA_VISIBLE_DEVICES
fi
if has s167; then # (for the next session) gemm_sk_tma's plain GEMMs in tiles of ~N / SMs rows, one K slice (KILN_SKGEMM_TMA_FIT=1: qkv 128 tiles of 48 rows instead of 48 x 2 on 96 SMs, o / down 128 of 32 instead of 64 x 2; =48: qkv only) -- test_gemm_sk (its fit pass), bench_kernels gemm_tma_prof both ways, engine -b 32 / -b 64 / -b 24 alternating
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemm_sk
  for cfg in "" "KILN_SKGEMM_TMA_FIT=1"; do
    echo "bench_kernels gemm_tma_prof [$cfg]"; env $cfg timeout 100 "$here/bin/bench_kernels" gemm_tma_prof 2>&1 | grep -E "down|qkv|o " | cut -c1-330
  done
  for r in 1 2 3; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-fit-$r" KILN_SKGEMM_TMA_FIT=1 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-fit48-$r" KILN_SKGEMM_TMA_FIT=48 -- -b 32 -s 128 -o 256 --iters 1
  done
  for r in 1 2; do
    kb "b64-def-$r" -- -b 64 -s 128 -o 256 --iters 1
    kb "b64-fit-$r" KILN_SKGEMM_TMA_FIT=1 -- -b 64 -s 128 -o 256 --iters 1
  done
  kb "b24-def" -- -b 24 -s 128 -o 256 --iters 1
  kb "b24-fit" KILN_SKGEMM_TMA_FIT=1 -- -b 24 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s166; then # (for the next session) what layer 16's projections do inside the -b 32 / -b 64 decode graphs: gemm_sk's timing records of GEMM op 61..64 (qkv, o, gate/up + SiLU, down; KILN_SKGEMM_PROF_OP, engine/cuda/exec_gpu.c) -- block starts / ends, SMs by load; then the plain projections (o, qkv, down) at 12 / 10 ring stages (KILN_SKGEMM_TMA_STAGES) against 16, alternating
  export CUDA_VISIBLE_DEVICES=0
  for b in 32 64; do
    for op in 61 62 63 64; do
      echo "== -b $b GEMM op $op (layer 16: 61 qkv, 62 o, 63 gate/up + SiLU, 64 down)"; skp $op -- -b $b -s 128 -o 64 --iters 1
    done
  done
  for r in 1 2; do
    kb "b32-s16-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-s12-$r" KILN_SKGEMM_TMA_STAGES=12 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-s10-$r" KILN_SKGEMM_TMA_STAGES=10 -- -b 32 -s 128 -o 256 --iters 1
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s165; then # (needs branch glu-pt's build with main's gemm_tma_prof) twenty-ninth session: the gate/up + SiLU right after a 32 / 64-row add + RMSNorm as in the engine -- block ends at 56 and 64 row pairs a tile (gemm_tma_prof)
  export CUDA_VISIBLE_DEVICES=0
  for cfg in "" "KILN_SKGEMM_GLU_PT=64" ""; do
    echo "bench_kernels gemm_tma_prof [$cfg]"; env $cfg timeout 100 "$here/bin/bench_kernels" gemm_tma_prof 2>&1 | grep -E "gate_up|qkv" | cut -c1-330
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s164; then # (needs branch glu-pt's build) twenty-ninth session: gemm_sk_tma's gate/up + SiLU in 256 tiles of 56 row pairs (GLU_PT, kiln_skgemm_glu_pt: two blocks on 124 SMs) instead of 224 of 64 -- test_silu_gemm_sk (forced 8 / 48 / 56 pairs, the engine plan), bench_kernels gemm_tma_prof at 56 / 64 / 48, engine -b 32 / -b 64 / -b 24 against KILN_SKGEMM_GLU_PT=64, alternating; test_gpu_engine
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_silu_gemm_sk
  for cfg in "" "KILN_SKGEMM_GLU_PT=64" "KILN_SKGEMM_GLU_PT=48"; do
    echo "bench_kernels gemm_tma_prof [$cfg]"; env $cfg timeout 100 "$here/bin/bench_kernels" gemm_tma_prof 2>&1 | grep -E "gate_up" | cut -c1-330
  done
  for r in 1 2 3; do
    kb "b32-pt56-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-pt64-$r" KILN_SKGEMM_GLU_PT=64 -- -b 32 -s 128 -o 256 --iters 1
  done
  for r in 1 2; do
    kb "b64-pt56-$r" -- -b 64 -s 128 -o 256 --iters 1
    kb "b64-pt64-$r" KILN_SKGEMM_GLU_PT=64 -- -b 64 -s 128 -o 256 --iters 1
  done
  kb "b24-pt56" -- -b 24 -s 128 -o 256 --iters 1
  kb "b24-pt64" KILN_SKGEMM_GLU_PT=64 -- -b 24 -s 128 -o 256 --iters 1
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s163; then # (needs branch stream-k's build) twenty-ninth session: gemm_stk's gate/up + SiLU (KILN_SKGEMM_STREAM=1) at 1 or 2 blocks an SM (KILN_SKGEMM_STREAM_BPS) and 3..6 stages, against gemm_sk_tma -- bench_kernels gemm_tma_prof's gate/up rows, engine -b 32 / -b 64 alternating
  export CUDA_VISIBLE_DEVICES=0
  for cfg in "" "KILN_SKGEMM_STREAM=1 KILN_SKGEMM_STREAM_STAGES=4" "KILN_SKGEMM_STREAM=1 KILN_SKGEMM_STREAM_STAGES=5" "KILN_SKGEMM_STREAM=1 KILN_SKGEMM_STREAM_STAGES=6" "KILN_SKGEMM_STREAM=1 KILN_SKGEMM_STREAM_BPS=2 KILN_SKGEMM_STREAM_STAGES=3" "KILN_SKGEMM_STREAM=1 KILN_SKGEMM_STREAM_BPS=2 KILN_SKGEMM_STREAM_STAGES=4" ""; do
    echo "bench_kernels gemm_tma_prof [$cfg]"; env $cfg timeout 100 "$here/bin/bench_kernels" gemm_tma_prof 2>&1 | grep -E "gate_up" | cut -c1-100
  done
  for r in 1 2; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-b2s4-$r" KILN_SKGEMM_STREAM=1 KILN_SKGEMM_STREAM_BPS=2 KILN_SKGEMM_STREAM_STAGES=4 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-b1s6-$r" KILN_SKGEMM_STREAM=1 KILN_SKGEMM_STREAM_STAGES=6 -- -b 32 -s 128 -o 256 --iters 1
    kb "b64-def-$r" -- -b 64 -s 128 -o 256 --iters 1
    kb "b64-b2s4-$r" KILN_SKGEMM_STREAM=1 KILN_SKGEMM_STREAM_BPS=2 KILN_SKGEMM_STREAM_STAGES=4 -- -b 64 -s 128 -o 256 --iters 1
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s162; then # (needs branch stream-k's build) twenty-ninth session: gemm_stk, gemm_sk_tma's GEMM as a persistent stream-K kernel (KILN_SKGEMM_STREAM: 1 the gate/up + SiLU, 2 all) -- test_gemm_stk; bench_kernels gemm_tma_prof's launch times with it (8, 6, 10 stages) against gemm_sk_tma; engine -b 32 / -b 64 alternating; test_gpu_engine with it
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemm_stk
  for cfg in "" "KILN_SKGEMM_STREAM=2" "KILN_SKGEMM_STREAM=2 KILN_SKGEMM_STREAM_STAGES=6" "KILN_SKGEMM_STREAM=2 KILN_SKGEMM_STREAM_STAGES=10"; do
    echo "bench_kernels gemm_tma_prof [$cfg]"; env $cfg timeout 100 "$here/bin/bench_kernels" gemm_tma_prof 2>&1 | grep -E "prof" | cut -c1-100
  done
  for r in 1 2; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-st1-$r" KILN_SKGEMM_STREAM=1 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-st2-$r" KILN_SKGEMM_STREAM=2 -- -b 32 -s 128 -o 256 --iters 1
    kb "b64-def-$r" -- -b 64 -s 128 -o 256 --iters 1
    kb "b64-st1-$r" KILN_SKGEMM_STREAM=1 -- -b 64 -s 128 -o 256 --iters 1
    kb "b64-st2-$r" KILN_SKGEMM_STREAM=2 -- -b 64 -s 128 -o 256 --iters 1
  done
  gt test_gpu_engine_st2 280 "FAIL|passed" KILN_SKGEMM_STREAM=2 -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s161; then # twenty-ninth session: where gemm_sk_tma's time goes at the decode steps' rows (bench_kernels gemm_tma_prof: the gate/up + SiLU at 59.8 us a -b 32 layer against 54.6 at the copy rate and ~53.6 for the batch-1 GEMV on the same weights) at its default 4 stages, 6 and 3; the -b 32 decode graph (CUPTI trace)
  export CUDA_VISIBLE_DEVICES=0
  for cfg in "" "KILN_SKGEMM_TMA_GLU_STAGES=6" "KILN_SKGEMM_TMA_GLU_STAGES=3"; do
    echo "bench_kernels gemm_tma_prof [$cfg]"; env $cfg timeout 100 "$here/bin/bench_kernels" gemm_tma_prof 2>&1 | grep -E "prof|copy " | cut -c1-420
  done
  tb b32 -- -b 32 -s 128 -o 64 --iters 1
  python3 "$here/bench/trace_summary.py" /tmp/trace_b32.csv --top 24 2>&1 | cut -c1-160
  for r in 1 2; do kb "b32-$r" -- -b 32 -s 128 -o 256 --iters 1; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s160; then # (KILN_DECODE_PARTS since removed: measured slower) twenty-ninth session: -b 32's decode attention (256 blocks of 4 warps, one pass, 11.8 us a layer against ~7.8 at the copy rate) split in parts of each sequence's context (KILN_DECODE_PARTS, 2 warps, the fused combine) or the persistent-warp kernel -- bench_kernels decode-short and kiln bench -b 32 / -b 64, alternating
  export CUDA_VISIBLE_DEVICES=0
  for cfg in "" "KILN_DECODE_PARTS=2" "KILN_DECODE_PARTS=2 KILN_DECODE_FUSED_REDUCE=1" "KILN_DECODE_PARTS=2 KILN_DECODE_WARPS=2 KILN_DECODE_FUSED_REDUCE=1" "KILN_DECODE_PARTS=3 KILN_DECODE_WARPS=2 KILN_DECODE_FUSED_REDUCE=1" "KILN_DECODE_PW=2"; do
    echo "bench_kernels decode-short [$cfg]"; env $cfg timeout 60 "$here/bin/bench_kernels" decode-short 2>&1 | grep -E "ctx" | head -6
  done
  for r in 1 2; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-p2f1-$r" KILN_DECODE_PARTS=2 KILN_DECODE_FUSED_REDUCE=1 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-p2w2f1-$r" KILN_DECODE_PARTS=2 KILN_DECODE_WARPS=2 KILN_DECODE_FUSED_REDUCE=1 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-pw2-$r" KILN_DECODE_PW=2 -- -b 32 -s 128 -o 256 --iters 1
  done
  kb "b64-def" -- -b 64 -s 128 -o 256 --iters 1
  kb "b64-w2" KILN_DECODE_WARPS=2 -- -b 64 -s 128 -o 256 --iters 1
  kb "b64-p2w2f1" KILN_DECODE_PARTS=2 KILN_DECODE_WARPS=2 KILN_DECODE_FUSED_REDUCE=1 -- -b 64 -s 128 -o 256 --iters 1
  for r in 1 2; do
    kb "b256-p1-$r" -- -b 256 -s 128 -o 256 --iters 1
    kb "b256-p2-$r" KILN_GEMM_AUTOTUNE_PASSES=2 -- -b 256 -s 128 -o 256 --iters 1
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s159; then # (for the next session, first) the twenty-eighth session's commits after its last device call: every rope rotation through rope_rot (rope_kv / rope_kv_wide / gemm_sk ROPE / the rope GEMV), kiln_gather_last's empty sequences, o / qkv at 33..64 rows through gemm_sk_tma, the per-GPU limits, the warm set's overflow -- the rope / gather / GEMM cases, test_gpu_engine, engine -b 1 / 16 / 32 / 64 (then `engine`)
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_rope =test_kv_write_and_fused_rope =test_gemv_rope =test_gemm_sk_rope =test_attention_decode_rope =test_glu_add_gather_cast =test_gemm_sk =test_silu_gemm_sk
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  kb "b1" -- -b 1 -s 128 -o 512 --iters 1
  kb "b16" -- -b 16 -s 128 -o 256 --iters 1
  for r in 1 2; do kb "b32-$r" -- -b 32 -s 128 -o 256 --iters 1; kb "b64-$r" -- -b 64 -s 128 -o 256 --iters 1; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s158; then # (for the next session) the cuBLASLt autotune in two passes (KILN_GEMM_AUTOTUNE_PASSES=2, each candidate its best pass) against one, alternating: -b 256 (its M = 256 GEMMs and LM head), -b 128, TTFT of -b 32 (the 4096-row prefill GEMMs)
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do
    kb "b256-p1-$r" -- -b 256 -s 128 -o 256 --iters 1
    kb "b256-p2-$r" KILN_GEMM_AUTOTUNE_PASSES=2 -- -b 256 -s 128 -o 256 --iters 1
    kb "b128-p1-$r" -- -b 128 -s 128 -o 256 --iters 1
    kb "b128-p2-$r" KILN_GEMM_AUTOTUNE_PASSES=2 -- -b 128 -s 128 -o 256 --iters 1
    kb "b32-p1-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-p2-$r" KILN_GEMM_AUTOTUNE_PASSES=2 -- -b 32 -s 128 -o 256 --iters 1
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s157; then # twenty-eighth session, final build (o / qkv at 33..64 rows through gemm_sk_tma too): -b 64 / -b 48 / -b 32
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do kb "b64-$r" -- -b 64 -s 128 -o 256 --iters 1; kb "b32-$r" -- -b 32 -s 128 -o 256 --iters 1; done
  kb "b48" -- -b 48 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s156; then # (KILN_SKGEMM_MIN_WEIGHT_MB_M64 since removed: its =0 setting measured faster, now the default) (its first run: "too many kernel specializations" at every kiln start -- the model's list had reached 128 with the MAXM-64 specs; test_gemm_sk / test_silu_gemm_sk to 64 rows passed there) twenty-eighth session, final: 33..64 rows through gemm_sk_tma by default for down and the gate/up + SiLU (KILN_SKGEMM_MAX_M 64, o / qkv left to cuBLASLt by KILN_SKGEMM_MIN_WEIGHT_MB_M64 64) -- engine -b 64 / -b 48 against everything through it (=0) and the session's start (KILN_SKGEMM_MAX_M=32), alternating; test_gemm_sk / test_silu_gemm_sk (M to 64), test_gpu_engine; then `engine`
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do
    kb "b64-def-$r" -- -b 64 -s 128 -o 256 --iters 1
    kb "b64-all-$r" KILN_SKGEMM_MIN_WEIGHT_MB_M64=0 -- -b 64 -s 128 -o 256 --iters 1
    kb "b64-m32-$r" KILN_SKGEMM_MAX_M=32 -- -b 64 -s 128 -o 256 --iters 1
  done
  kb "b48-def" -- -b 48 -s 128 -o 256 --iters 1
  kb "b48-all" KILN_SKGEMM_MIN_WEIGHT_MB_M64=0 -- -b 48 -s 128 -o 256 --iters 1
  kb "b48-m32" KILN_SKGEMM_MAX_M=32 -- -b 48 -s 128 -o 256 --iters 1
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s155; then # twenty-eighth session: 33..64 rows through gemm_sk_tma too (KILN_SKGEMM_MAX_M=64: o / qkv / down in the 17..32-row plans at MAXM 64, the gate/up + SiLU) -- bench_kernels gemm_rows at M = 64 both ways, test_gemm_sk with it, engine -b 64 / -b 48 / -b 40 against the default, alternating
  export CUDA_VISIBLE_DEVICES=0
  timeout 120 "$here/bin/bench_kernels" gemm_rows 2>&1 | grep -E "M=(32|64) " | grep -E "^gemm |kiln default" | sed 's/(weight bytes)//; s/(weights)//; s/  */ /g' | cut -c1-110
  KILN_SKGEMM_MAX_M=64 timeout 120 "$here/bin/bench_kernels" gemm_rows 2>&1 | grep -E "M=64 " | grep -E "kiln default" | sed 's/(weights)//; s/kiln default/kiln MAX_M=64/; s/  */ /g' | cut -c1-110
  for r in 1 2; do
    kb "b64-def-$r" -- -b 64 -s 128 -o 256 --iters 1
    kb "b64-m64-$r" KILN_SKGEMM_MAX_M=64 -- -b 64 -s 128 -o 256 --iters 1
  done
  kb "b48-def" -- -b 48 -s 128 -o 256 --iters 1
  kb "b48-m64" KILN_SKGEMM_MAX_M=64 -- -b 48 -s 128 -o 256 --iters 1
  kb "b40-def" -- -b 40 -s 128 -o 256 --iters 1
  kb "b40-m64" KILN_SKGEMM_MAX_M=64 -- -b 40 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s154; then # twenty-eighth session: where a prefill step goes (the CUPTI trace's last prefill step: -b 32 -s 128, 4096 tokens; -b 256, 8192-token steps) and the -b 32 decode graph on the new default
  export CUDA_VISIBLE_DEVICES=0
  tb b32p -- -b 32 -s 128 -o 32 --iters 1
  python3 "$here/bench/trace_summary.py" /tmp/trace_b32p.csv --top 22 2>&1 | cut -c1-150
  tb b256p -- -b 256 -s 128 -o 8 --iters 1
  python3 "$here/bench/trace_summary.py" /tmp/trace_b256p.csv --top 22 2>&1 | sed -n '/last prefill/,$p' | cut -c1-150
  for r in 1 2; do kb "b32-$r" -- -b 32 -s 128 -o 256 --iters 1; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s153; then # twenty-eighth session: down at 17..32 rows through gemm_sk_tma by default (KILN_SKGEMM_MAX_WEIGHT_MB_M32 120) -- test_gemm_sk (the Llama shapes in the engine's plan), test_gpu_engine, bench_kernels gemm_rows, qkv M=32 tilings, engine -b 32 / -b 24 with the gate/up + SiLU in 5 / 3 stages against 4, alternating
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemm_sk
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  timeout 120 "$here/bin/bench_kernels" gemm_rows 2>&1 | grep -E "kiln default|^copy|ceiling" | sed 's/(weight bytes)//; s/  */ /g' | cut -c1-120
  timeout 200 "$here/bin/bench_kernels" gemm_sk_quick 2>&1 | grep -E " qkv M=32 " | grep -E "^gemm |gemm_sk (default|tma) " | sed 's/(weight bytes)//; s/  */ /g' | cut -c1-110
  for r in 1 2; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-glu5-$r" KILN_SKGEMM_TMA_GLU_STAGES=5 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-glu3-$r" KILN_SKGEMM_TMA_GLU_STAGES=3 -- -b 32 -s 128 -o 256 --iters 1
  done
  kb "b24-def" -- -b 24 -s 128 -o 256 --iters 1
  kb "b24-glu5" KILN_SKGEMM_TMA_GLU_STAGES=5 -- -b 24 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s152; then # (for the twenty-eighth session) the down projection at 17..32 rows through gemm_sk_tma too (its plan: 64-row tiles, 2 K halves of 7168, 16 stages; no cuBLASLt split-K reduce kernel) -- bench rows, engine -b 32 / -b 24 with KILN_SKGEMM_MAX_WEIGHT_MB=120 KILN_SKGEMM_MAX_WEIGHT_MB_M32=120 against the default, alternating
  export CUDA_VISIBLE_DEVICES=0
  timeout 200 "$here/bin/bench_kernels" gemm_sk_quick 2>&1 | grep -E " down M=(16|32) " | grep -E "^gemm |gemm_sk (default|tma) " | sed 's/(weight bytes)//; s/  */ /g' | cut -c1-110
  for r in 1 2 3; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-down-$r" KILN_SKGEMM_MAX_WEIGHT_MB=120 KILN_SKGEMM_MAX_WEIGHT_MB_M32=120 -- -b 32 -s 128 -o 256 --iters 1
  done
  kb "b24-def" -- -b 24 -s 128 -o 256 --iters 1
  kb "b24-down" KILN_SKGEMM_MAX_WEIGHT_MB=120 KILN_SKGEMM_MAX_WEIGHT_MB_M32=120 -- -b 24 -s 128 -o 256 --iters 1
  tb b32def -- -b 32 -s 128 -o 64 --iters 1
  python3 "$here/bench/trace_summary.py" /tmp/trace_b32def.csv --top 12 2>&1 | cut -c1-150 | head -18
  tb b32down KILN_SKGEMM_MAX_WEIGHT_MB=120 KILN_SKGEMM_MAX_WEIGHT_MB_M32=120 -- -b 32 -s 128 -o 64 --iters 1
  python3 "$here/bench/trace_summary.py" /tmp/trace_b32down.csv --top 12 2>&1 | cut -c1-150 | head -18
  unset CUDA_VISIBLE_DEVICES
fi
if has s151; then # twenty-seventh session: why -b 32 with qkv through gemm_sk_tma lands at ~6,250 or ~6,370 -- four runs with the cuBLASLt autotune's choices (KILN_LOG_LEVEL=debug)
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2 3 4; do
    KILN_LOG_LEVEL=debug timeout 100 "$here/bin/kiln" bench --model llama3-8b --load-format dummy --json -b 32 -s 128 -o 256 --iters 1 2> "$out/dbg_$r.err" | tail -1 | python3 -c 'import json,sys; j=json.load(sys.stdin); print("run", sys.argv[1], "%.1f tok/s" % j["output_tok_s"])' "$r"
    grep -E "autotune took|gemm_sk" "$out/dbg_$r.err" | sed 's/.*GEMM //; s/.*debug: //' | cut -c1-130
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s150; then # twenty-seventh session, final: qkv at 17..32 rows through gemm_sk_tma by default (KILN_SKGEMM_MAX_WEIGHT_MB_M32 60) against it on cuBLASLt (=40), alternating; then `engine` (the table beside the peers)
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2 3; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-lt-$r" KILN_SKGEMM_MAX_WEIGHT_MB_M32=40 -- -b 32 -s 128 -o 256 --iters 1
  done
  kb "b24-def" -- -b 24 -s 128 -o 256 --iters 1
  kb "b24-lt" KILN_SKGEMM_MAX_WEIGHT_MB_M32=40 -- -b 24 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s149; then # twenty-seventh session: gemm_sk_tma's new plain tiling (64-row tiles where 2 x tiles fit the SMs, else 128; 16 stages or what fits; clusters <= 2) -- test_gemm_sk, test_gpu_engine, bench rows, engine against the session's start (bin/kiln_main = a590da9) and with qkv through it too (KILN_SKGEMM_MAX_WEIGHT_MB_M32=60), alternating
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemm_sk =test_silu_gemm_sk
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  timeout 200 "$here/bin/bench_kernels" gemm_sk_quick 2>&1 | grep -E " (qkv|o) M=32 " | grep -E "^gemm |gemm_sk (default|tma) " | sed 's/(weight bytes)//; s/  */ /g' | cut -c1-110
  for r in 1 2; do
    [ -x "$here/bin/kiln_main" ] && KB_BIN=kiln_main kb "b32-main-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-new-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-qkv-$r" KILN_SKGEMM_MAX_WEIGHT_MB_M32=60 -- -b 32 -s 128 -o 256 --iters 1
  done
  [ -x "$here/bin/kiln_main" ] && KB_BIN=kiln_main kb "b24-main" -- -b 24 -s 128 -o 256 --iters 1
  kb "b24-new" -- -b 24 -s 128 -o 256 --iters 1
  kb "b24-qkv" KILN_SKGEMM_MAX_WEIGHT_MB_M32=60 -- -b 24 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s148; then # (the KILN_SKGEMM_PLAIN_SPLIT knob removed: its measured setting, o16, is now the default) twenty-seventh session: gemm_sk_tma in 64-row tiles, split 2 (clusters of 2), up to 16 stages for the o projection at 17..32 rows -- test_gemm_sk (16-stage tilings), bench_kernels gemm_sk_quick, engine -b 32 / -b 24 with KILN_SKGEMM_TILES=1 KILN_SKGEMM_PLAIN_SPLIT=2 KILN_SKGEMM_TMA_STAGES=8/12/16 against the default, alternating
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemm_sk
  timeout 200 "$here/bin/bench_kernels" gemm_sk_quick 2>&1 | grep -E " (qkv|o|down|gate_up) M=(16|32) " | grep -v wgmma | sed 's/(weight bytes)//; s/  */ /g' | cut -c1-110 | head -90
  for r in 1 2; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-o16-$r" KILN_SKGEMM_TILES=1 KILN_SKGEMM_PLAIN_SPLIT=2 KILN_SKGEMM_TMA_STAGES=16 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-o12-$r" KILN_SKGEMM_TILES=1 KILN_SKGEMM_PLAIN_SPLIT=2 KILN_SKGEMM_TMA_STAGES=12 -- -b 32 -s 128 -o 256 --iters 1
  done
  kb "b32-o8" KILN_SKGEMM_TILES=1 KILN_SKGEMM_PLAIN_SPLIT=2 KILN_SKGEMM_TMA_STAGES=8 -- -b 32 -s 128 -o 256 --iters 1
  kb "b24-def" -- -b 24 -s 128 -o 256 --iters 1
  kb "b24-o16" KILN_SKGEMM_TILES=1 KILN_SKGEMM_PLAIN_SPLIT=2 KILN_SKGEMM_TMA_STAGES=16 -- -b 24 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s147; then # twenty-seventh session: the whole test_gpu_ops by case (attn_prefill's asm moved to kiln_common helpers, Philox to kiln_philox.cuh, check_kv's block-size rule -- CUBINs byte-identical) and test_gpu_engine (test_gpu_bad_block_size new)
  export CUDA_VISIBLE_DEVICES=0
  ops_split
  gt test_gpu_engine 280 "FAIL|passed|refused" -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s146; then # twenty-sixth session, final: the attention kernels after their asm moved into kiln_common.cuh helpers (CUBINs byte-identical under nvcc; this runs them through NVRTC on the GPU)
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_attention_decode =test_attention_decode_2warps =test_attention_decode_fused =test_attention_decode_pw =test_attention_decode_rope =test_attention_fp8 =test_attention_prefill =test_attention_prefill_wg
  unset CUDA_VISIBLE_DEVICES
fi
if has s145; then # twenty-sixth session, final build: the changed kernels' tests (gemm_skx, the norm fold, sampling, RMSNorm, SiLU) and test_gpu_engine
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemm_skx =test_gemv_norm =test_sampling_greedy =test_rmsnorm =test_glu_add_gather_cast =test_gemv
  gt test_gpu_engine 200 "FAIL|passed" -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s144; then # (knob removed after measuring: not kept) twenty-sixth session: the batch-1 qkv projection through gemm_skx (NIN, its rope + KV write in the decode attention: KILN_SKX_QKV1) -- test_gemv_norm / test_gemm_skx, test_gpu_engine with it, engine -b 1 against the default, alternating
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemv_norm =test_gemm_skx
  gt test_gpu_engine_qkv1 200 "FAIL|passed" KILN_SKX_QKV1=1 -- test_gpu_engine
  for r in 1 2; do ab "b1-qkv1-$r" KILN_SKX_QKV1=1 -- -b 1 -s 128 -o 512 --iters 1; done
  ab "b1-qkv1-ctx" KILN_SKX_QKV1=1 -- -b 1 -s 2048 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s143; then # (knob removed after measuring: not kept) twenty-sixth session: a lean gemm_skx at 1..8 rows (registers for 2 blocks an SM, KILN_SKX_LEAN KiB of shared memory) so its neighbours' blocks fit beside it -- test_gemm_skx / test_gemv_norm with it, bench rows at M = 1 / 8, engine -b 1 and -b 8 against the default, alternating
  export CUDA_VISIBLE_DEVICES=0
  KILN_SKX_LEAN=100 ops_cases =test_gemm_skx =test_gemv_norm
  for v in "0 64" "100 64" "116 128" "80 64"; do set -- $v
    echo "lean $1 KiB, $2-column slots:"
    for s in o qkv; do KILN_SKX_LEAN=$1 KILN_SKX_LEAN_SK=$2 timeout 100 "$here/bin/bench_kernels" gemm_rows_$s 2>&1 | grep -E "kiln default" | grep -E "M=(1|8) " | cut -c1-100; done
  done
  for r in 1 2; do
    kb "b1-def-$r" -- -b 1 -s 128 -o 512 --iters 1
    kb "b1-lean100-$r" KILN_SKX_LEAN=100 -- -b 1 -s 128 -o 512 --iters 1
    kb "b1-lean116-$r" KILN_SKX_LEAN=116 KILN_SKX_LEAN_SK=128 -- -b 1 -s 128 -o 512 --iters 1
  done
  ab "b8-lean100" KILN_SKX_LEAN=100 -- -b 8 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s142; then # twenty-sixth session: gemm_skx's one-row form on by default (KILN_SKX_M1) -- the whole test_gpu_ops by case, test_gpu_engine, bench_kernels gemm_m1, engine -b 1 against KILN_SKX_M1=0
  export CUDA_VISIBLE_DEVICES=0
  ops_split
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  timeout 150 "$here/bin/bench_kernels" gemm_m1 2>&1 | grep -E "kiln (default|gemm_skx)" | cut -c1-130
  for r in 1 2; do ab "b1-m1off-$r" KILN_SKX_M1=0 -- -b 1 -s 128 -o 512 --iters 1; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s141; then # twenty-sixth session: gemm_skx's one-row form in place of the batch-1 GEMV for the o / down projections adding into the residual (NOUT) -- test_gemv_norm, test_gemm_skx, engine -b 1 with KILN_SKX_M1=1 against the default, alternating
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemv_norm =test_gemm_skx
  for r in 1 2 3; do ab "b1-skxm1-$r" KILN_SKX_M1=1 -- -b 1 -s 128 -o 512 --iters 1; done
  ab "b1-skxm1-ctx" KILN_SKX_M1=1 -- -b 1 -s 2048 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s140; then # (the halves knob removed after measuring: not kept) twenty-sixth session: gemm_skx's row halves (17..32 rows as two 16-row blocks, no cluster) and one-row form -- test_gemm_skx, bench_kernels rows, engine -b 32 / -b 24 with KILN_SKX_MAX_M=32 KILN_SKX_HALVES=1 against the default, alternating
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemm_skx
  for s in o qkv down gate_up; do timeout 100 "$here/bin/bench_kernels" gemm_rows_$s 2>&1 | grep -E "kiln (default|gemm_skx)" | cut -c1-130; done
  for r in 1 2; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-halves-$r" KILN_SKX_MAX_M=32 KILN_SKX_HALVES=1 -- -b 32 -s 128 -o 256 --iters 1
  done
  kb "b24-def" -- -b 24 -s 128 -o 256 --iters 1
  kb "b24-halves" KILN_SKX_MAX_M=32 KILN_SKX_HALVES=1 -- -b 24 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s139; then # twenty-fifth session: gemm_skx on by default up to 16 rows -- test_gpu_engine, test_gemm_skx, test_gemm, test_gemm_sk
  export CUDA_VISIBLE_DEVICES=0
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  ops_cases =test_gemm_skx =test_gemm =test_gemm_sk
  unset CUDA_VISIBLE_DEVICES
fi
if has s138; then # twenty-fifth session: gemm_skx at <= 16 rows only (clusters of at most 2), engine -b 16 / 8 / 4 with KILN_SKX_MAX_M=16 against the default, alternating
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do ab "b16-skx16-$r" KILN_SKX_MAX_M=16 -- -b 16 -s 128 -o 256 --iters 1; done
  ab "b8-skx16" KILN_SKX_MAX_M=16 -- -b 8 -s 128 -o 256 --iters 1
  ab "b4-skx16" KILN_SKX_MAX_M=16 -- -b 4 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s137; then # twenty-fifth session: gemm_skx in kiln -- its test (and test_gemm), bench_kernels gemm_rows (kiln default beside gemm_skx where it serves), engine -b 32 / -b 16 with KILN_SKX_MAX_M=32 against the default, alternating
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemm_skx =test_gemm
  for s in o qkv down; do timeout 100 "$here/bin/bench_kernels" gemm_rows_$s 2>&1 | grep -E "kiln (default|gemm_skx)" | grep -v "M=1 " | cut -c1-120; done
  for r in 1 2; do ab "b32-skx-$r" KILN_SKX_MAX_M=32 -- -b 32 -s 128 -o 256 --iters 1; done
  ab "b16-skx" KILN_SKX_MAX_M=32 -- -b 16 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s136; then # twenty-fifth session: bench/skx_micro.cu -- x stationary in registers, W through warp-private rings, one sum of the warps at the end, clusters of 1-2 (4); beside skring_micro's gemm_sk shape and kiln's own rows (gemm_rows_o / _qkv) in the same call
  export CUDA_VISIBLE_DEVICES=0
  timeout 240 "$here/bin/skx_micro" 2>&1
  timeout 150 "$here/bin/skring_micro" 32 2>&1 | grep -E "ceiling|mode [35] "
  for s in o qkv; do timeout 100 "$here/bin/bench_kernels" gemm_rows_$s 2>&1 | grep -E "kiln default" | cut -c1-110; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s135; then # twenty-fourth session: skring_micro mode 8 / 9 -- the K split inside the block (warp groups on alternate chunks of one ring, summed in shared memory) with a 2-block cluster, against gemm_sk's shape (modes 5, 3)
  export CUDA_VISIBLE_DEVICES=0
  timeout 200 "$here/bin/skring_micro" 32 2>&1
  unset CUDA_VISIBLE_DEVICES
fi
if has s133; then # twenty-fourth session, final: the changed tests (test_gemv in its own tilings, the KV-write and FP8 attention cases' head-count checks)
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemv =test_kv_write_and_fused_rope =test_attention_fp8
  unset CUDA_VISIBLE_DEVICES
fi
if has s130; then # twenty-fourth session: gemv_micro with deeper warp-private rings (6-10 stages), cp.async's zero-filling form and (its second run) the block-wide ring gemv_block, PDL rows, beside kiln's GEMV (gemm_m1)
  export CUDA_VISIBLE_DEVICES=0
  timeout 200 "$here/bin/gemv_micro" 2>&1 | grep -E "PDL|ceiling"
  timeout 60 "$here/bin/bench_kernels" gemm_m1 2>&1 | grep -E "kiln default" | cut -c1-110
  unset CUDA_VISIBLE_DEVICES
fi
if has s128; then # twenty-fourth session: skring_micro -- the split-K reduction pushed to the cluster's rank 0 with st.async (mode 6) against DSMEM reads between cluster barriers (3), the MMAs alone (5) and with a cluster launch (7)
  export CUDA_VISIBLE_DEVICES=0
  timeout 200 "$here/bin/skring_micro" 32 2>&1
  timeout 200 "$here/bin/skring_micro" 16 2>&1
  unset CUDA_VISIBLE_DEVICES
fi
if has s127; then # twenty-fourth session: skring_micro -- the x chunk order rotated a block (ROT) against lockstep, and the MMAs without the partials' stores (mode 5)
  export CUDA_VISIBLE_DEVICES=0
  timeout 200 "$here/bin/skring_micro" 32 2>&1
  unset CUDA_VISIBLE_DEVICES
fi
if has s126; then # twenty-fourth session: skring_micro with deeper rings, 256-row blocks, no split, and the split-K reduction through fp32 partials summed by the tile's last block (mode 4)
  export CUDA_VISIBLE_DEVICES=0
  timeout 200 "$here/bin/skring_micro" 32 2>&1
  timeout 150 "$here/bin/skring_micro" 16 2>&1 | grep -v "mode 1"
  unset CUDA_VISIBLE_DEVICES
fi
if has s125; then # twenty-fourth session: bench/skring_micro.cu -- the small-M GEMM built up from the W stream (stream, + x, + MMAs, + cluster split-K), M = 32 and 16; stride_micro again; kiln's own rows (bench_kernels gemm_rows_o / _qkv)
  export CUDA_VISIBLE_DEVICES=0
  timeout 150 "$here/bin/skring_micro" 32 2>&1
  timeout 150 "$here/bin/skring_micro" 16 2>&1 | grep -v "mode [01]"
  timeout 100 "$here/bin/stride_micro" 2>&1 | grep -E "PDL|ceiling"
  for s in o qkv; do timeout 100 "$here/bin/bench_kernels" gemm_rows_$s 2>&1 | grep -E "kiln default" | cut -c1-110; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s124; then # twenty-fourth session: bench/stride_micro.cu -- W streamed through a cp.async ring in stages of BN rows x C columns (runs of 2C bytes) or pre-tiled contiguous stages, read-only, plain and PDL
  export CUDA_VISIBLE_DEVICES=0
  timeout 200 "$here/bin/stride_micro" 2>&1
  timeout 100 "$here/bin/read_micro" 2>&1 | grep -E "ceiling|U8 PDL +grid +264|U4 +grid +528"
  unset CUDA_VISIBLE_DEVICES
fi
if has s123; then # twenty-third session, review: the probes' shared ceiling / error helpers and bench_kernels' single timing loop (kv_write rows plain and --graph, the KV write probe, the GEMV probe), test_kv_write_and_fused_rope
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_kv_write_and_fused_rope
  timeout 100 "$here/bin/bench_kernels" kv_write 2>&1 | grep -E "kv_write (wide|tile|pipe) .*32 kv|ceiling"
  timeout 100 "$here/bin/bench_kernels" kv_write --graph 2>&1 | grep -E "kv_write (wide|tile|pipe) .*32 kv|ceiling" | sed "s/^/graph /"
  timeout 100 "$here/bin/kv_write_micro" 4096 32 2>&1 | head -6
  timeout 100 "$here/bin/gemv_micro" 2>&1 | head -5
  unset CUDA_VISIBLE_DEVICES
fi
if has s122; then # twenty-third session: bench/gemv_micro.cu -- the batch-1 GEMV with W through a warp-private cp.async ring (plain and PDL), beside read_micro's bound and kiln's GEMV (bench_kernels gemm_m1)
  export CUDA_VISIBLE_DEVICES=0
  timeout 150 "$here/bin/gemv_micro" 2>&1
  timeout 60 "$here/bin/bench_kernels" gemm_m1 2>&1 | grep -E "kiln default" | cut -c1-110
  timeout 100 "$here/bin/read_micro" 2>&1 | grep -E "ceiling|U8 PDL +grid +264|U4 +grid +528"
  unset CUDA_VISIBLE_DEVICES
fi
if has s121; then # twenty-third session: the o projection at M = 32 through gemm_sk_tma in other tilings (ncu, s120: the default's 32 tiles x split 3 = 96 blocks of 165 KiB leave 36 SMs idle): bench_kernels gemm_rows_o under KILN_SKGEMM_TILES / _SPLIT / _TMA_STAGES
  export CUDA_VISIBLE_DEVICES=0
  for cfg in "0 0 8" "1 0 8" "1 0 6" "1 4 4" "1 2 8" "2 4 4" "1 0 4" "0 0 8"; do
    set -- $cfg
    KILN_SKGEMM_TILES=$1 KILN_SKGEMM_SPLIT=$2 KILN_SKGEMM_TMA_STAGES=$3 timeout 60 "$here/bin/bench_kernels" gemm_rows_o 2>&1 | grep -E "kiln default.*M=(16|32) " | sed "s/^kiln default (weights) */rt$1 sp$2 st$3 /" | cut -c1-100
  done
  for cfg in "0 0 8" "1 0 8"; do
    set -- $cfg
    KILN_SKGEMM_TILES=$1 KILN_SKGEMM_SPLIT=$2 KILN_SKGEMM_TMA_STAGES=$3 timeout 60 "$here/bin/bench_kernels" gemm_rows_o --graph 2>&1 | grep -E "kiln default.*M=32 " | sed "s/^kiln default (weights) */graph rt$1 sp$2 st$3 /" | cut -c1-100
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s120; then # (the gemm_sk_tma kernel's entry is kiln_gemm_sk: the 1,615 launches skipped are qkv's and o's at M = 8 and 16, 403 each) twenty-third session: Nsight Compute (ncu, --clock-control none) on the o projection's kernels at M = 32 (gemm_sk_tma) and M = 1 (the GEMV), from bench_kernels gemm_rows: speed of light, memory, occupancy, warp stalls, launch
  export CUDA_VISIBLE_DEVICES=0
  nc=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || echo /usr/local/cuda/bin/ncu)
  secs=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats)
  timeout 200 "$nc" --clock-control none "${secs[@]}" -k regex:kiln_gemm_sk --launch-skip 1615 --launch-count 1 "$here/bin/bench_kernels" gemm_rows > "$out/ncu_sktma.txt" 2>&1
  echo "ncu gemm_sk_tma rc=$?"; grep -vE "^==PROF==|^ +-+ " "$out/ncu_sktma.txt" | grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Hit|Achieved Occupancy|Theoretical Occupancy|Stall|Registers Per|Shared Memory Config|Block Size|Grid Size|Waves Per SM|Warp Cycles Per Issued|Issued Warp|Eligible|One or More|No Eligible|Compute \\(SM\\)|Mem Busy|Max Bandwidth|L1/TEX Hit|kiln_" | head -40
  timeout 200 "$nc" --clock-control none "${secs[@]}" -k regex:kiln_gemv --launch-skip 410 --launch-count 1 "$here/bin/bench_kernels" gemm_m1 > "$out/ncu_gemv.txt" 2>&1
  echo "ncu gemv rc=$?"; grep -vE "^==PROF==|^ +-+ " "$out/ncu_gemv.txt" | grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Hit|Achieved Occupancy|Theoretical Occupancy|Stall|Registers Per|Block Size|Grid Size|Waves Per SM|Warp Cycles Per Issued|Issued Warp|Eligible|One or More|No Eligible|Mem Busy|Max Bandwidth|kiln_" | head -40
  unset CUDA_VISIBLE_DEVICES
fi
if has s119; then # twenty-third session: bench/gemm_micro.cu -- a tensor-core GEMM for M <= 32 with W straight from global memory into mma.sync fragments (no ring), plain and PDL, against read_micro's bound
  export CUDA_VISIBLE_DEVICES=0
  timeout 200 "$here/bin/gemm_micro" 2>&1
  unset CUDA_VISIBLE_DEVICES
fi
if has s118; then # (kv/gemv_db is no longer built: GEMV_DB, measured slower in s118, was not kept) twenty-third session: kiln's default small-M path (GEMV at M = 1, gemm_sk / gemm_sk_tma at 8..32) beside cuBLASLt, plain launches and CUDA-graph replay (--graph); the GEMV double-buffered (kv/gemv_db) in several tilings at M = 1 under --graph; kv_write rows under --graph
  export CUDA_VISIBLE_DEVICES=0
  timeout 150 "$here/bin/bench_kernels" gemm_rows 2>&1 | grep -E "M=(1|8|16|32) |ceiling" | sed "s/^/plain /" | cut -c1-125
  timeout 150 "$here/bin/bench_kernels" gemm_rows --graph 2>&1 | grep -E "M=(1|8|16|32) |ceiling" | sed "s/^/graph /" | cut -c1-125
  for cfg in "2 4 2" "1 2 2" "1 4 1" "1 8 1" "2 4 1" "4 2 1"; do
    set -- $cfg
    for db in 0 1; do
      kd=(); [ $db = 1 ] && kd=(KILN_KERNEL_DIR="$here/kv/gemv_db")
      env "${kd[@]}" KILN_GEMV_RULE=0 KILN_GEMV_ROWS=$1 KILN_GEMV_UNROLL=$2 KILN_GEMV_KSPLIT=$3 timeout 100 "$here/bin/bench_kernels" gemm_m1 --graph 2>&1 \
        | grep -E "kiln default.*M=1 " | sed "s/^kiln default (weights) */r$1u$2k$3 db$db /" | cut -c1-110
    done
  done
  timeout 100 "$here/bin/bench_kernels" kv_write --graph 2>&1 | grep -E "kv_write (wide|tile|pipe) " | sed "s/^/graph /"
  unset CUDA_VISIBLE_DEVICES
fi
if has s117; then # twenty-third session: meant as the batch-1 GEMV double-buffered (kv/gemv_db: GEMV_DB=1) in several tilings, but bench_kernels' "gemm" rows were cuBLASLt's (its main kiln_gpu has the GEMV off): the knobs changed nothing; s118 redoes it on kiln's default path
  export CUDA_VISIBLE_DEVICES=0
  for cfg in "2 4 2" "1 2 2" "1 4 1" "1 8 1" "2 4 1" "1 4 2" "2 2 2"; do
    set -- $cfg
    for db in 0 1; do
      kd=(); [ $db = 1 ] && kd=(KILN_KERNEL_DIR="$here/kv/gemv_db")
      env "${kd[@]}" KILN_GEMV_RULE=0 KILN_GEMV_ROWS=$1 KILN_GEMV_UNROLL=$2 KILN_GEMV_KSPLIT=$3 timeout 100 "$here/bin/bench_kernels" gemm_m1 2>&1 \
        | grep -E "M=1 " | sed "s/^gemm (weight bytes) */r$1u$2k$3 db$db /" | cut -c1-110
    done
  done
  for db in 0 1; do
    kd=(); [ $db = 1 ] && kd=(KILN_KERNEL_DIR="$here/kv/gemv_db")
    env "${kd[@]}" timeout 100 "$here/bin/bench_kernels" gemm_m1 2>&1 | grep -E "M=1 " | sed "s/^gemm (weight bytes) */default db$db /" | cut -c1-110
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s116; then # twenty-third session: test_kv_write_and_fused_rope with the pipeline's multi-unit cases; the kv_write rows (8 and 32 KV heads, the pipeline's fast path); bench/read_micro.cu (how fast one launch reads a small projection's weights, back to back, plain and PDL)
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_kv_write_and_fused_rope
  timeout 100 "$here/bin/bench_kernels" kv_write 2>&1 | grep -E "kv_write (wide|tile|pipe) |ceiling"
  timeout 200 "$here/bin/read_micro" 2>&1
  unset CUDA_VISIBLE_DEVICES
fi
if has s115; then # twenty-third session: kiln_kv_write_pipe with a per-unit fast path (addresses from the first slot when the 16 tokens fill one aligned run), its tests; bench/kv_write_micro.cu (now with a PDL-launched pipe); kv_write rows with and without PDL (KILN_PDL=0)
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_kv_write_and_fused_rope
  timeout 120 "$here/bin/kv_write_micro" 4096 32 2>&1 | sed "s/^/micro32 /"
  for r in 1 2; do
    timeout 100 "$here/bin/bench_kernels" kv_write 2>&1 | grep -E "kv_write (wide|tile|pipe) .*32 kv|ceiling" | sed "s/^/pdl-$r /"
    KILN_PDL=0 timeout 100 "$here/bin/bench_kernels" kv_write 2>&1 | grep -E "kv_write (wide|tile|pipe) .*32 kv|ceiling" | sed "s/^/nopdl-$r /"
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s114; then # twenty-third session: the plain KV write's cp.async pipeline (then KILN_KV_TILE=3, now the default 2: kiln_kv_write_pipe): its test passes, kv_write rows twice; then, when bundled (bin/kiln_skn, bin/test_gpu_ops_skn: branch sk-norm-fold's 146673f), the -b 32 fold's test and -b 32 pairs against this build
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_kv_write_and_fused_rope
  for r in 1 2; do timeout 100 "$here/bin/bench_kernels" kv_write 2>&1 | grep -E "kv_write (wide|tile|pipe)|ceiling" | sed "s/^/r$r /"; done
  timeout 150 "$here/bin/bench_kernels" gemm_rows 2>&1 | grep -E "gemm|ceiling" | cut -c1-140
  if [ -x "$here/bin/kiln_skn" ]; then
    gt skn_test 200 "FAIL|passed" -- test_gpu_ops_skn =test_gemm_sk_norm
    for r in 1 2 3; do kb "b32-main-$r" -- -b 32 -s 128 -o 256 --iters 1; KB_BIN=kiln_skn kb "b32-skn-$r" KILN_SKGEMM_NORM=1 -- -b 32 -s 128 -o 256 --iters 1; done
  fi
  unset CUDA_VISIBLE_DEVICES
fi
if has s113; then # twenty-third session: KV-write designs at 4096 x 4096 in bench/kv_write_micro.cu (cp.async / bulk-copy pipelines, a copy kernel, cudaMemcpy of the same bytes) beside bench_kernels' kv_write rows
  export CUDA_VISIBLE_DEVICES=0
  timeout 120 "$here/bin/kv_write_micro" 4096 32 2>&1 | sed "s/^/micro32 /"
  timeout 100 "$here/bin/bench_kernels" kv_write 2>&1 | grep -E "kv_write|ceiling" | sed "s/^/kiln /"
  timeout 60 "$here/bin/kv_write_micro" 4096 8 2>&1 | sed "s/^/micro8 /"
  unset CUDA_VISIBLE_DEVICES
fi
if has opsplit; then # the whole test_gpu_ops split over parallel processes (ops_split; test_every_kernel_tested over their kernels), then test_gpu_engine
  export CUDA_VISIBLE_DEVICES=0
  ops_split
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s112; then # twenty-second session, for branch sk-norm-fold (KILN_SKGEMM_NORM and test_gemm_sk_norm are not on main): the fold at gemm_sk_tma's rows (KILN_SKGEMM_NORM=1: the o GEMM split over a cluster adds into the residual and writes h * w and per-row partials, the gate/up + SiLU scales by 1 / rms): tests, -b 32 pairs, test_gpu_engine with it on
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemm_sk_norm =test_silu_gemm_sk =test_gemv_norm
  for r in 1 2 3; do ab "b32-skn-$r" KILN_SKGEMM_NORM=1 -- -b 32 -s 128 -o 256 --iters 1; done
  gt test_gpu_engine_skn 200 "FAIL|passed" KILN_SKGEMM_NORM=1 -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s111; then # twenty-second session: s110 with the producer GEMV (NOUT) held to 4 blocks an SM (its 66 registers had made the 512 blocks two waves)
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemv_norm =test_gemv
  b1_fold_report
  kb "b1-n2" KILN_GEMV_NORM=2 -- -b 1 -s 128 -o 512 --iters 1
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s110; then # twenty-second session: the folded norm as r * ((h * w) . W): the o / down GEMV writes h * w into the norm's output, the SiLU / rope GEMVs scale their dot products by 1 / rms; tests, a trace of -b 1, -b 1 pairs against KILN_GEMV_NORM=0
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemv_norm =test_gemv =test_gemv_rope
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  b1_fold_report
  kb "b1-n2" KILN_GEMV_NORM=2 -- -b 1 -s 128 -o 512 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s109; then # twenty-second session: NIN forms the block's normalised row in shared memory once (one barrier), x from shared memory in the products; tests, a trace of -b 1, -b 1 pairs against KILN_GEMV_NORM=0
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemv_norm =test_gemv =test_gemv_rope
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  b1_fold_report
  unset CUDA_VISIBLE_DEVICES
fi
if has s108; then # twenty-second session: the folded norm (KILN_GEMV_NORM: 1 before the SiLU / rope GEMVs, 2 also the LM head, 0 off) with its partials as 16-byte loads and the SiLU GEMV at 5 blocks an SM; CUPTI traces of -b 1 with and without, -b 1 pairs
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemv_norm
  tb b1n1 KILN_GEMV_NORM=1 -- -b 1 -s 128 -o 64 --iters 1
  tb b1n0 KILN_GEMV_NORM=0 -- -b 1 -s 128 -o 64 --iters 1
  for t in b1n1 b1n0; do python3 "$here/bench/trace_summary.py" /tmp/trace_$t.csv --top 14 2>&1 | cut -c1-150 | head -22; done
  for r in 1 2; do ab "b1-n0-$r" KILN_GEMV_NORM=0 -- -b 1 -s 128 -o 512 --iters 1; done
  kb "b1-n2" KILN_GEMV_NORM=2 -- -b 1 -s 128 -o 512 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s107; then # twenty-second session: the batch-1 residual add + RMSNorm folded into the GEMVs around it (gemv.cu NOUT: the o / down GEMV adds into the residual and writes its blocks' sums of squares; NIN: the gate/up, qkv and LM-head GEMVs normalise x as they load it; KILN_GEMV_NORM=0 off): tests, -b 1 pairs
  export CUDA_VISIBLE_DEVICES=0
  ops_cases =test_gemv_norm =test_gemv =test_gemv_rope =test_graph_replay
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  for r in 1 2 3; do ab "b1-norm-$r" KILN_GEMV_NORM=0 -- -b 1 -s 128 -o 512 --iters 1; done
  kb "b32" -- -b 32 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s106; then # twenty-first session, final build: the whole test_gpu_ops in one process (test_every_kernel_tested last)
  export CUDA_VISIBLE_DEVICES=0
  t0=$(date +%s)
  timeout 500 "$here/bin/test_gpu_ops" > /tmp/tgo.log 2>&1; echo "rc=$?" >> /tmp/tgo.log
  echo "test_gpu_ops $(( $(date +%s) - t0 )) s"; ops_report test_gpu_ops
  unset CUDA_VISIBLE_DEVICES
fi
if has s105; then # twenty-first session: the batch-1 o and down GEMVs with the residual add + RMSNorm as their epilogue without tensor parallelism (kiln_gpu_gemm_add_norm: gemv_ar_norm on one rank; KILN_GEMV_NORM=0 turns it off): tests, -b 1 pairs
  export CUDA_VISIBLE_DEVICES=0
  ops_cases gemv_add_norm gemv
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  for r in 1 2 3; do ab "b1-norm-$r" KILN_GEMV_NORM=0 -- -b 1 -s 128 -o 512 --iters 1; done
  kb "b32" -- -b 32 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s104; then # twenty-first session: the upper bound of fusing the decode layer's two add + RMSNorm launches into their neighbours -- bin/kiln_nonorm (built by hand from this tree with exec_gpu.c skipping KILN_OP_ADD_RMSNORM at <= 64 rows; wrong results, timing only) against kiln, alternating
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2 3; do kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1; KB_BIN=kiln_nonorm kb "b32-nonorm-$r" -- -b 32 -s 128 -o 256 --iters 1; done
  KB_BIN=kiln_nonorm kb "b1-nonorm" -- -b 1 -s 128 -o 512 --iters 1; kb "b1-def" -- -b 1 -s 128 -o 512 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s103; then # twenty-first session: the KV-write rows alternating new / old kernels (the st16_g stores; order effects at 8 KV heads), and the upper bound of fusing away a decode layer's two add + RMSNorm launches (kv/nonorm: kiln_add_rmsnorm a no-op; wrong results, timing only)
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do
    timeout 100 "$here/bin/bench_kernels" kv_write 2>&1 | grep -E "kv_write (wide|tile)" | sed "s/^/new-$r /"
    KILN_KERNEL_DIR="$here/kv/old" timeout 100 "$here/bin/bench_kernels" kv_write 2>&1 | grep -E "kv_write (wide|tile)" | sed "s/^/old-$r /"
  done
  for r in 1 2; do ab "b32-nonorm-$r" KILN_KERNEL_DIR="$here/kv/nonorm" -- -b 32 -s 128 -o 256 --iters 1; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s102; then # twenty-first session, final: one-instruction 16-byte stores in the KV blocks' and tiles' value runs and key cells (st16_g) and rope_kv.cu's value runs; the sampler's shared block reduction; tests, kv_write / rope_kv_write rows, -b 32 pairs against the session's starting kernels (kv/old)
  export CUDA_VISIBLE_DEVICES=0
  ops_cases kv_write sampling
  gt test_gpu_engine 280 "FAIL|passed" -- test_gpu_engine
  timeout 100 "$here/bin/bench_kernels" kv_write 2>&1 | tee "$out/bench_kv.log" | grep -E "copy|kv_write"
  KILN_KERNEL_DIR="$here/kv/old" timeout 100 "$here/bin/bench_kernels" kv_write 2>&1 | grep -E "kv_write" | sed "s/^/old /"
  timeout 60 "$here/bin/bench_kernels" sample 2>&1 | grep -E "sample" | head -12
  for r in 1 2; do ab "b32-old-$r" KILN_KERNEL_DIR="$here/kv/old" -- -b 32 -s 128 -o 256 --iters 1; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s101; then # twenty-first session: cuBLASLt autotune timing each candidate after a 256 MiB write (KILN_GEMM_TUNE_FLUSH_MB, a knob since removed: weights from memory, as in a step), the algorithms it picks; the KV tiles with 12 (3 blocks an SM) / 4 loads a lane in flight (kv/tv12, kv/tv4)
  export CUDA_VISIBLE_DEVICES=0
  for v in tv12 tv4; do KILN_KERNEL_DIR="$here/kv/$v" timeout 100 "$here/bin/bench_kernels" kv_write 2>&1 | grep -E "tile" | sed "s/^/$v /"; done
  timeout 100 "$here/bin/bench_kernels" kv_write 2>&1 | grep -E "tile|wide" | sed "s/^/def /"
  KILN_LOG_LEVEL=debug timeout 150 "$here/bin/kiln" bench --model llama3-8b --load-format dummy -b 32 -s 128 -o 64 --iters 1 2>&1 | grep -E "autotune took" | head -8
  KILN_GEMM_TUNE_FLUSH_MB=256 KILN_LOG_LEVEL=debug timeout 150 "$here/bin/kiln" bench --model llama3-8b --load-format dummy -b 32 -s 128 -o 64 --iters 1 2>&1 | grep -E "autotune took" | head -8
  for r in 1 2 3; do ab "b32-flush-$r" KILN_GEMM_TUNE_FLUSH_MB=256 -- -b 32 -s 128 -o 256 --iters 1; done
  ab "b64-flush" KILN_GEMM_TUNE_FLUSH_MB=256 -- -b 64 -s 128 -o 256 --iters 1
  ab "b256-flush" KILN_GEMM_TUNE_FLUSH_MB=256 -- -b 256 -s 128 -o 256 --iters 1
  ab "b1-flush" KILN_GEMM_TUNE_FLUSH_MB=256 -- -b 1 -s 128 -o 512 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s100; then # twenty-first session (kiln_kv_write_vec since removed): kiln_kv_write_vec with one-instruction 16-byte stores (st16_g), the tile kernels' stores likewise; -b 32 with the attention small enough (2 warps) for the o projection's blocks to start beside it
  export CUDA_VISIBLE_DEVICES=0
  t0=$(date +%s)
  gt ops_kv_write 300 "FAIL|passed" -- test_gpu_ops kv_write
  timeout 120 "$here/bin/bench_kernels" kv_write 2>&1 | tee "$out/bench_kv.log" | grep -E "copy|kv_write"
  for r in 1 2; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-w2-$r" KILN_DECODE_WARPS=2 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-w2s4-$r" KILN_DECODE_WARPS=2 KILN_SKGEMM_TMA_STAGES=4 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-w2s6-$r" KILN_DECODE_WARPS=2 KILN_SKGEMM_TMA_STAGES=6 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-s4-$r" KILN_SKGEMM_TMA_STAGES=4 -- -b 32 -s 128 -o 256 --iters 1
  done
  tb b32w2s4 KILN_DECODE_WARPS=2 KILN_SKGEMM_TMA_STAGES=4 -- -b 32 -s 128 -o 64 --iters 1
  python3 "$here/bench/trace_summary.py" /tmp/trace_b32w2s4.csv --top 12 2>&1 | cut -c1-150 | head -18
  unset CUDA_VISIBLE_DEVICES
fi
if has s99; then # twenty-first session: the plain KV write in vectors (kiln_kv_write_vec, KILN_KV_TILE=3; since removed), the greedy sampler's block reduction shared (sa_block), down through gemm_sk_tma at 32 rows (KILN_SKGEMM_MIN_WEIGHT_MB_M32=100, a knob since removed)
  export CUDA_VISIBLE_DEVICES=0
  ops_cases kv_write sampling
  timeout 120 "$here/bin/bench_kernels" kv_write 2>&1 | tee "$out/bench_kv.log" | grep -E "copy|kv_write"
  timeout 60 "$here/bin/bench_kernels" copy 2>&1 | grep -E "copy" | head -12
  timeout 60 "$here/bin/bench_kernels" sample 2>&1 | grep -E "sample" | head -12
  for r in 1 2 3; do ab "b32-down-$r" KILN_SKGEMM_MIN_WEIGHT_MB_M32=100 -- -b 32 -s 128 -o 256 --iters 1; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s98; then # twentieth session, review: shared helpers in the fused decode kernels (step_at, put_step_key, rope_frag), the greedy sampler (sa_none / sa_max4 / sa_expsum4 / sa_put) and gemm_sk's wgmma stage (skw_stage); kiln_attn_decode_rope, the opt-in cluster sampler and gemm_sk_rope_wg rescheduled (kv/old: the kernels before, copied in by hand)
  export CUDA_VISIBLE_DEVICES=0
  ops_cases decode_rope sampling gemm_sk_rope
  for r in 1 2; do ab "b32-old-$r" KILN_KERNEL_DIR="$here/kv/old" -- -b 32 -s 128 -o 256 --iters 1; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s97; then # twentieth session: gemm_sk_tma at 33..64 rows too (KILN_SKGEMM_MAX_M=64: o and gate/up + SiLU), qkv / down through it at 32 rows, a trace of -b 32
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do ab "b64-m64-$r" KILN_SKGEMM_MAX_M=64 -- -b 64 -s 128 -o 256 --iters 1; done
  for r in 1 2; do ab "b32-mb120-$r" KILN_SKGEMM_MAX_WEIGHT_MB_M32=120 -- -b 32 -s 128 -o 256 --iters 1; done
  tb b32 -- -b 32 -s 128 -o 64 --iters 1
  python3 "$here/bench/trace_summary.py" /tmp/trace_b32.csv --top 12 2>&1 | cut -c1-150 | head -18
  unset CUDA_VISIBLE_DEVICES
fi
if has s96; then # twentieth session, final build: gemm_sk_tma on by default from 17 rows (run after `engine`): the graphs test, pairs against KILN_SKGEMM_TMA=0
  export CUDA_VISIBLE_DEVICES=0
  gt test_gpu_batching_graphs 200 "FAIL|passed" -- test_gpu_engine batching_graphs
  ab "b32-notma" KILN_SKGEMM_TMA=0 -- -b 32 -s 128 -o 256 --iters 1
  ab "b24-notma" KILN_SKGEMM_TMA=0 -- -b 24 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s95; then # twentieth session: KILN_SKGEMM_TMA=1 now takes the gate/up + SiLU too (sk_silu_ok): alternating pairs, the same with qkv / down through it, the engine tests with it
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2 3; do ab "b32-tma-$r" KILN_SKGEMM_TMA=1 -- -b 32 -s 128 -o 256 --iters 1; done
  kb b32-tma-all KILN_SKGEMM_TMA=1 KILN_SKGEMM_MAX_WEIGHT_MB_M32=120 -- -b 32 -s 128 -o 256 --iters 1
  kb b32-tma-all-s4 KILN_SKGEMM_TMA=1 KILN_SKGEMM_MAX_WEIGHT_MB_M32=120 KILN_SKGEMM_TMA_STAGES=4 -- -b 32 -s 128 -o 256 --iters 1
  kb b32-tma-qkv KILN_SKGEMM_TMA=1 KILN_SKGEMM_MAX_WEIGHT_MB_M32=60 -- -b 32 -s 128 -o 256 --iters 1
  ab "b24-tma" KILN_SKGEMM_TMA=1 -- -b 24 -s 128 -o 256 --iters 1
  ab "b20-tma" KILN_SKGEMM_TMA=1 -- -b 20 -s 128 -o 256 --iters 1
  gt test_gpu_engine_tma 240 "FAIL|passed" KILN_SKGEMM_TMA=1 -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s94; then # twentieth session: the o projection (and the gate/up + SiLU) at M 17..32 through gemm_sk_tma (KILN_SKGEMM_TMA=1), engine pairs and a trace
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2 3; do ab "b32-tma-$r" KILN_SKGEMM_TMA=1 -- -b 32 -s 128 -o 256 --iters 1; done
  kb b32-tma-silu KILN_SKGEMM_TMA=1 KILN_SKGEMM_SILU=1 -- -b 32 -s 128 -o 256 --iters 1
  kb b32-tma-s6 KILN_SKGEMM_TMA=1 KILN_SKGEMM_TMA_STAGES=6 -- -b 32 -s 128 -o 256 --iters 1
  kb b32-tma-silu8 KILN_SKGEMM_TMA=1 KILN_SKGEMM_SILU=1 KILN_SKGEMM_TMA_GLU_STAGES=8 -- -b 32 -s 128 -o 256 --iters 1
  ab "b24-tma" KILN_SKGEMM_TMA=1 -- -b 24 -s 128 -o 256 --iters 1
  kb b64-def -- -b 64 -s 128 -o 256 --iters 1
  kb b64-tma64 KILN_SKGEMM_TMA=1 KILN_SKGEMM_MAX_M=64 -- -b 64 -s 128 -o 256 --iters 1
  tb b32def -- -b 32 -s 128 -o 64 --iters 1
  tb b32tmasilu KILN_SKGEMM_TMA=1 KILN_SKGEMM_SILU=1 -- -b 32 -s 128 -o 64 --iters 1
  for t in b32def b32tmasilu; do python3 "$here/bench/trace_summary.py" /tmp/trace_$t.csv --top 16 2>&1 | cut -c1-150 | head -24; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s93; then # twentieth session: gemm_sk fed by TMA (kernel_src/gemm_sk_tma.cu, KILN_SKGEMM_WG=2): its tests, bench rows, the engine with every small-M projection through it
  export CUDA_VISIBLE_DEVICES=0
  gt ops_gemm_sk 300 "FAIL|passed|gemm_sk_tma.*(rel|err)" -- test_gpu_ops gemm_sk
  timeout 200 "$here/bin/bench_kernels" gemm_sk_quick 2>&1 | grep -E "^gemm|^ceil|copy" | tee "$out/bench_gemm_sk_quick.txt"
  timeout 100 "$here/bin/bench_kernels" gemm_sk_silu 2>&1 | grep -E "^gemm|^cuBLAS|silu" | tee "$out/bench_gemm_sk_silu.txt"
  T=(KILN_SKGEMM_WG=2 KILN_SKGEMM_MAX_WEIGHT_MB=300 KILN_SKGEMM_MAX_WEIGHT_MB_M32=300)
  kb b32-def -- -b 32 -s 128 -o 256 --iters 1
  kb b32-tma-o KILN_SKGEMM_WG=2 -- -b 32 -s 128 -o 256 --iters 1
  kb b32-tma-all "${T[@]}" -- -b 32 -s 128 -o 256 --iters 1
  kb b32-tma-all-silu "${T[@]}" KILN_SKGEMM_SILU=1 -- -b 32 -s 128 -o 256 --iters 1
  kb b32-tma-all-s4 "${T[@]}" KILN_SKGEMM_STAGES=4 -- -b 32 -s 128 -o 256 --iters 1
  kb b32-def2 -- -b 32 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s92; then # nineteenth session: kiln_attn_decode_pw (the shared body) against the kernels before it (kv/pwold, copied in by hand), bench and engine without the rope fusion
  export CUDA_VISIBLE_DEVICES=0
  for v in new old new old; do
    kd=(); [ $v = old ] && kd=(KILN_KERNEL_DIR="$here/kv/pwold")
    env "${kd[@]}" timeout 120 "$here/bin/bench_kernels" decode-large 2>&1 | grep -E "^attn decode|^ceil" | sed "s/^/$v /" | tee -a "$out/bench_decode_large.txt"
  done
  kb "b256-r0-new" KILN_DECODE_ROPE=0 -- -b 256 -s 128 -o 256 --iters 1
  kb "b256-r0-old" KILN_DECODE_ROPE=0 KILN_KERNEL_DIR="$here/kv/pwold" -- -b 256 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s91; then # nineteenth session: the rope inside the persistent-warp decode kernel (kiln_attn_decode_pw_rope); kiln_attn_decode_pw's code moved into a shared body (kv/pwold: the kernels before, copied in by hand); qkv through gemm_sk at -b 32 now that attention takes the rope
  export CUDA_VISIBLE_DEVICES=0
  gt ops_decode_rope 300 "FAIL|passed" -- test_gpu_ops decode_rope
  gt ops_decode_pw 200 "FAIL|passed" -- test_gpu_ops decode_pw
  for v in new old; do
    kd=(); [ $v = old ] && kd=(KILN_KERNEL_DIR="$here/kv/pwold")
    env "${kd[@]}" timeout 120 "$here/bin/bench_kernels" decode-large 2>&1 | grep -E "^decode" | sed "s/^/$v /" | tee -a "$out/bench_decode_large.txt"
  done
  for b in 256 128; do ab "b$b-rope" KILN_DECODE_ROPE=0 -- -b $b -s 128 -o 256 --iters 1; done
  ab "b32-skqkv" KILN_SKGEMM_MAX_WEIGHT_MB_M32=-1 -- -b 32 -s 128 -o 256 --iters 1
  ab "b256-rope2" KILN_DECODE_ROPE=0 -- -b 256 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s90; then # nineteenth session: the rotation's products as explicit round-to-nearest operations in both rope paths (rope_rot; s89's bit differences), the greedy sampler's shared load (sa_load4)
  export CUDA_VISIBLE_DEVICES=0
  gt ops_rope 300 "FAIL|passed" -- test_gpu_ops rope
  gt ops_sampling 200 "FAIL|passed" -- test_gpu_ops sampling
  gt test_gpu_batching_graphs 200 "FAIL|passed" -- test_gpu_engine batching_graphs
  timeout 120 "$here/bin/bench_kernels" sample 2>&1 | grep -E "^sample" | tee "$out/bench_sample.txt"
  for r in 1 2; do ab "b32-rope-$r" KILN_DECODE_ROPE=0 -- -b 32 -s 128 -o 256 --iters 1; done
  ab "b64-rope" KILN_DECODE_ROPE=0 -- -b 64 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s89; then # nineteenth session, last call: the fused decode rope with its stores fenced (s88's whole test_gpu_ops failed 5 draws without), the engine tests, -b 32 / 64 fused against the rope kernel
  export CUDA_VISIBLE_DEVICES=0
  gt ops_decode_rope 240 "FAIL|passed" -- test_gpu_ops decode_rope
  gt test_gpu_engine 200 "FAIL|passed" -- test_gpu_engine
  for r in 1 2; do ab "b32-rope-$r" KILN_DECODE_ROPE=0 -- -b 32 -s 128 -o 256 --iters 1; done
  ab "b64-rope" KILN_DECODE_ROPE=0 -- -b 64 -s 128 -o 256 --iters 1
  kb "b1" -- -b 1 -s 128 -o 512 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s88; then # nineteenth session: the stream-K GEMM with its unit cursors stepped (no 64-bit division a unit); then the whole test_gpu_ops alone
  export CUDA_VISIBLE_DEVICES=0
  gt ops_gemm_stream 300 "FAIL|passed" -- test_gpu_ops gemm_stream
  timeout 200 "$here/bin/bench_kernels" gemm_stream 2>&1 | grep -E "^gemm|copy" | tee "$out/bench_gemm_stream.txt"
  t0=$(date +%s)
  ops_bg 0 420
  wait
  ops_report "test_gpu_ops (whole, alone)"
  echo "test_gpu_ops took $(( $(date +%s) - t0 )) s"
  unset CUDA_VISIBLE_DEVICES
fi
if has s87; then # nineteenth session: the stream-K GEMM (kernel_src/gemm_stream.cu, KILN_GEMM_STREAM_MAX_M)
  export CUDA_VISIBLE_DEVICES=0
  gt ops_gemm_stream 300 "FAIL|passed" -- test_gpu_ops gemm_stream
  timeout 200 "$here/bin/bench_kernels" gemm_stream 2>&1 | grep -E "^gemm|copy" | tee "$out/bench_gemm_stream.txt"
  gt batching_graphs_st 200 "FAIL|passed" KILN_GEMM_STREAM_MAX_M=64 -- test_gpu_engine batching_graphs
  for r in 1 2; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-st-$r" KILN_GEMM_STREAM_MAX_M=32 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-st128-$r" KILN_GEMM_STREAM_MAX_M=32 KILN_GEMM_STREAM_MAX_MB=128 -- -b 32 -s 128 -o 256 --iters 1
  done
  kb "b32-st64" KILN_GEMM_STREAM_MAX_M=32 KILN_GEMM_STREAM_MAX_MB=64 -- -b 32 -s 128 -o 256 --iters 1
  kb "b64-def" -- -b 64 -s 128 -o 256 --iters 1
  kb "b64-st" KILN_GEMM_STREAM_MAX_M=64 -- -b 64 -s 128 -o 256 --iters 1
  kb "b64-st128" KILN_GEMM_STREAM_MAX_M=64 KILN_GEMM_STREAM_MAX_MB=128 -- -b 64 -s 128 -o 256 --iters 1
  kb "b16-def" -- -b 16 -s 128 -o 256 --iters 1
  kb "b16-st" KILN_GEMM_STREAM_MAX_M=32 -- -b 16 -s 128 -o 256 --iters 1
  tb 87 KILN_GEMM_STREAM_MAX_M=32 KILN_GEMM_STREAM_MAX_MB=128 -- -b 32 -s 128 -o 64 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s86; then # nineteenth session: the decode step's rope + KV write inside the decode attention (KILN_DECODE_ROPE)
  export CUDA_VISIBLE_DEVICES=0
  gt ops_decode_rope 240 "FAIL|passed" -- test_gpu_ops decode_rope
  gt test_gpu_batching_graphs 200 "FAIL|passed" -- test_gpu_engine batching_graphs
  for b in 32 32 64 24; do ab "b$b-rope" KILN_DECODE_ROPE=0 -- -b $b -s 128 -o 256 --iters 1; done
  for v in 0 1; do tb "86_$v" KILN_DECODE_ROPE=$v -- -b 32 -s 128 -o 64 --iters 1; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s85; then # eighteenth session: step_feed without the early signal (the self-draft test of s84), short
  export CUDA_VISIBLE_DEVICES=0
  gt test_gpu_engine 150 "FAIL|passed" -- test_gpu_engine
  for f in step_feed graph_replay sampling_greedy; do gt "ops_$f" 60 "FAIL|passed" -- test_gpu_ops $f; done
  kb "b1-new" -- -b 1 -s 128 -o 512 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s84; then # eighteenth session, last call: the whole test_gpu_ops beside test_gpu_engine on the new defaults (copy stream, step feed, split sampler); the engine against the old settings
  export CUDA_VISIBLE_DEVICES=0
  t0=$(date +%s)
  ops_bg 0 400
  gt test_gpu_engine 300 "FAIL|passed" -- test_gpu_engine
  wait
  ops_report "test_gpu_ops (whole)"
  echo "tests took $(( $(date +%s) - t0 )) s"
  old=(KILN_COPY_STREAM=0 KILN_STEP_FEED=0)
  kb "b1-new" -- -b 1 -s 128 -o 512 --iters 1
  kb "b1-old" "${old[@]}" KILN_SAMPLE_CLUSTER=8 -- -b 1 -s 128 -o 512 --iters 1
  kb "b32-new" -- -b 32 -s 128 -o 256 --iters 1
  kb "b32-old" "${old[@]}" KILN_SAMPLE_CLUSTER=4 -- -b 32 -s 128 -o 256 --iters 1
  kb "b64-new" -- -b 64 -s 128 -o 256 --iters 1
  kb "b64-old" "${old[@]}" KILN_SAMPLE_CLUSTER=-1 -- -b 64 -s 128 -o 256 --iters 1
  kb "b256-new" -- -b 256 -s 128 -o 256 --iters 1
  kb "b256-old" "${old[@]}" KILN_SAMPLE_CLUSTER=-1 -- -b 256 -s 128 -o 256 --iters 1
  kb "b1-new2" -- -b 1 -s 128 -o 512 --iters 1
  kb "b1-old2" "${old[@]}" KILN_SAMPLE_CLUSTER=8 -- -b 1 -s 128 -o 512 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s83; then # eighteenth session: the step's metadata read by a kernel (KILN_STEP_FEED) with the copy stream, and the split greedy sampling
  export CUDA_VISIBLE_DEVICES=0
  gt test_step_feed 200 "FAIL|passed" -- test_gpu_ops step_feed
  gt test_gpu_batching_graphs 200 "FAIL|passed" -- test_gpu_engine batching_graphs
  timeout 120 "$here/bin/bench_kernels" sample 2>&1 | grep -E "^sample" | tee "$out/bench_sample.txt"
  for r in 1 2; do
    kb "b1-def-$r" -- -b 1 -s 128 -o 512 --iters 1
    kb "b1-csf-$r" KILN_COPY_STREAM=1 KILN_STEP_FEED=1 -- -b 1 -s 128 -o 512 --iters 1
    kb "b1-csf-split-$r" KILN_COPY_STREAM=1 KILN_STEP_FEED=1 KILN_SAMPLE_CLUSTER=32 -- -b 1 -s 128 -o 512 --iters 1
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-csf-$r" KILN_COPY_STREAM=1 KILN_STEP_FEED=1 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-csf-split-$r" KILN_COPY_STREAM=1 KILN_STEP_FEED=1 KILN_SAMPLE_CLUSTER=32 -- -b 32 -s 128 -o 256 --iters 1
  done
  for b in 64 256; do
    kb "b$b-def" -- -b $b -s 128 -o 256 --iters 1
    kb "b$b-csf" KILN_COPY_STREAM=1 KILN_STEP_FEED=1 -- -b $b -s 128 -o 256 --iters 1
    kb "b$b-csf-split" KILN_COPY_STREAM=1 KILN_STEP_FEED=1 KILN_SAMPLE_CLUSTER=32 -- -b $b -s 128 -o 256 --iters 1
  done
  for b in 1 32; do
    KILN_COPY_STREAM=1 KILN_STEP_FEED=1 KILN_SAMPLE_CLUSTER=32 KILN_TRACE_MEMCPY=1 KILN_TRACE_OUT=/tmp/trace83_$b.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 200 "$here/bin/kiln" bench \
      --model llama3-8b --load-format dummy -b $b -s 128 -o 64 --iters 1 > /tmp/trace83_$b.log 2>&1
    echo "== trace -b $b rc=$? ($(grep -E 'output tokens/s|mean decode step' /tmp/trace83_$b.log | tr -s ' ' | tr '\n' ';'))"
    gzip -c /tmp/trace83_$b.csv > "$out/trace83_$b.csv.gz"
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s82; then # eighteenth session: greedy sampling split into 4096-logit chunks (KILN_SAMPLE_CLUSTER=32) and the tokens' copy stream (KILN_COPY_STREAM)
  export CUDA_VISIBLE_DEVICES=0
  gt test_sampling_greedy 200 "FAIL|passed" -- test_gpu_ops sampling_greedy
  timeout 120 "$here/bin/bench_kernels" sample 2>&1 | grep -E "^sample" | tee "$out/bench_sample.txt"
  for r in 1 2; do
    kb "b32-def-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-cs-$r" KILN_COPY_STREAM=1 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-cs-split-$r" KILN_COPY_STREAM=1 KILN_SAMPLE_CLUSTER=32 -- -b 32 -s 128 -o 256 --iters 1
    kb "b1-def-$r" -- -b 1 -s 128 -o 512 --iters 1
    kb "b1-cs-$r" KILN_COPY_STREAM=1 -- -b 1 -s 128 -o 512 --iters 1
    kb "b1-cs-split-$r" KILN_COPY_STREAM=1 KILN_SAMPLE_CLUSTER=32 -- -b 1 -s 128 -o 512 --iters 1
  done
  for b in 64 256; do
    kb "b$b-def" -- -b $b -s 128 -o 256 --iters 1
    kb "b$b-cs" KILN_COPY_STREAM=1 -- -b $b -s 128 -o 256 --iters 1
    kb "b$b-cs-split" KILN_COPY_STREAM=1 KILN_SAMPLE_CLUSTER=32 -- -b $b -s 128 -o 256 --iters 1
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s81; then # eighteenth session: the sampled tokens' copy back on a stream of its own (KILN_COPY_STREAM), copies traced
  export CUDA_VISIBLE_DEVICES=0
  gt test_gpu_batching_graphs 200 "FAIL|passed" -- test_gpu_engine batching_graphs
  for r in 1 2; do
    for c in 0 1; do kb "b32-cp$c-$r" KILN_COPY_STREAM=$c -- -b 32 -s 128 -o 256 --iters 1; done
    for c in 0 1; do kb "b1-cp$c-$r" KILN_COPY_STREAM=$c -- -b 1 -s 128 -o 512 --iters 1; done
  done
  for c in 0 1; do kb "b64-cp$c" KILN_COPY_STREAM=$c -- -b 64 -s 128 -o 256 --iters 1; done
  for c in 0 1; do kb "b256-cp$c" KILN_COPY_STREAM=$c -- -b 256 -s 128 -o 256 --iters 1; done
  for c in 0 1; do
    for b in 32 1; do
      KILN_COPY_STREAM=$c KILN_TRACE_MEMCPY=1 KILN_TRACE_OUT=/tmp/trace81_${b}_$c.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 200 "$here/bin/kiln" bench \
        --model llama3-8b --load-format dummy -b $b -s 128 -o 64 --iters 1 > /tmp/trace81_${b}_$c.log 2>&1
      echo "== trace -b $b copy stream $c rc=$? ($(grep -E 'output tokens/s|mean decode step' /tmp/trace81_${b}_$c.log | tr -s ' ' | tr '\n' ';'))"
      gzip -c /tmp/trace81_${b}_$c.csv > "$out/trace81_${b}_$c.csv.gz"
    done
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s80; then # eighteenth session: the o projection's weights prefetched into L2 on a side stream under rope + attention (KILN_O_PREFETCH_MB)
  export CUDA_VISIBLE_DEVICES=0
  gt test_l2_prefetch 150 "FAIL|passed" -- test_gpu_ops test_l2_prefetch
  for r in 1 2; do
    kb "b32-off-$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-o16-$r" KILN_O_PREFETCH_MB=16 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-o32-$r" KILN_O_PREFETCH_MB=32 -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-o64-$r" KILN_O_PREFETCH_MB=64 -- -b 32 -s 128 -o 256 --iters 1
  done
  for r in 1 2; do ab "b1-o64-$r" KILN_O_PREFETCH_MB=64 -- -b 1 -s 128 -o 512 --iters 1; done
  for b in 64 16; do ab "b$b-o64" KILN_O_PREFETCH_MB=64 -- -b $b -s 128 -o 256 --iters 1; done
  for v in 64; do
    KILN_O_PREFETCH_MB=$v KILN_TRACE_OUT=/tmp/trace80_$v.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 200 "$here/bin/kiln" bench \
      --model llama3-8b --load-format dummy -b 32 -s 128 -o 64 --iters 1 > /tmp/trace80_$v.log 2>&1
    echo "== trace -b 32 MB=$v rc=$? ($(grep -E 'output tokens/s|mean decode step' /tmp/trace80_$v.log | tr -s ' ' | tr '\n' ';'))"
    gzip -c /tmp/trace80_$v.csv > "$out/trace80_$v.csv.gz"
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s78; then # seventeenth session: the split-K reduction penalty (M <= 64 only) again, -b 32 in four pairs, the qkv and down picks of each run
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2 3 4; do
    for p in 0 3; do
      kb "b32-p$p-$r" KILN_GEMM_REDUCE_PENALTY_US=$p KILN_LOG_LEVEL=debug -- -b 32 -s 128 -o 256 --iters 1
      grep -h "autotune took" "$out/kb.err" | grep -E "GEMM 32x(6144x4096|4096x14336) " | tail -2 | sed 's/.*GEMM/  GEMM/; s/, [0-9.]* us (the.*//'
    done
  done
  for p in 0 3; do kb "b64-p$p" KILN_GEMM_REDUCE_PENALTY_US=$p -- -b 64 -s 128 -o 256 --iters 1; done
  for p in 0 3; do kb "b256-p$p" KILN_GEMM_REDUCE_PENALTY_US=$p -- -b 256 -s 128 -o 256 --iters 1; done
  unset CUDA_VISIBLE_DEVICES
fi
if has s77; then # seventeenth session: cuBLASLt candidates with a separate split-K reduction kernel penalised in the tuning (KILN_GEMM_REDUCE_PENALTY_US)
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do
    for b in 32 64 256; do
      kb "b$b-p0-$r" KILN_LOG_LEVEL=debug -- -b $b -s 128 -o 256 --iters 1
      kb "b$b-p3-$r" KILN_GEMM_REDUCE_PENALTY_US=3 KILN_LOG_LEVEL=debug -- -b $b -s 128 -o 256 --iters 1
    done
  done
  grep -h "autotune took" "$out/kb.err" | sed 's/.*GEMM/GEMM/' | grep -E "^GEMM (32|64|256)x" | sed 's/, [0-9.]* us (the.*//' | sort | uniq -c | sort -k2 | cut -c1-150 > "$out/autotune_choices.txt"; head -40 "$out/autotune_choices.txt"
  grep -h "candidate [0-9]*: " "$out/kb.err" | sed 's/.*GEMM/GEMM/' | grep -E "^GEMM (32|64)x" | sort -u | head -80 > "$out/candidates.txt"
  unset CUDA_VISIBLE_DEVICES
fi
if has s76; then # seventeenth session: -b 32's o projection through cuBLASLt (tuned at M = 32 now) instead of gemm_sk
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2 3; do
    kb "b32-def$r" -- -b 32 -s 128 -o 256 --iters 1
    kb "b32-lto$r" KILN_SKGEMM_MAX_WEIGHT_MB_M32=1 -- -b 32 -s 128 -o 256 --iters 1
  done
  kb "b24-def" -- -b 24 -s 128 -o 256 --iters 1
  kb "b24-lto" KILN_SKGEMM_MAX_WEIGHT_MB_M32=1 -- -b 24 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s75; then # seventeenth session, last call: the whole test_gpu_ops beside test_gpu_engine; the engine against the session's start (bin/kiln_main = cbaaea8)
  export CUDA_VISIBLE_DEVICES=0
  ops_bg 0 420
  gt test_gpu_engine 250 "FAIL|passed" -- test_gpu_engine
  wait
  ops_report "test_gpu_ops (whole)"
  for b in 128 256 64 32; do
    KB_BIN=kiln_main kb "b$b-main" -- -b $b -s 128 -o 256 --iters 1
    kb "b$b-new" -- -b $b -s 128 -o 256 --iters 1
  done
  KB_BIN=kiln_main kb "b1-main" -- -b 1 -s 128 -o 512 --iters 1
  kb "b1-new" -- -b 1 -s 128 -o 512 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s74; then # seventeenth session: cuBLASLt algorithms tuned at each decode graph's M (KILN_GEMM_BUCKETS=1), timed cold (AUTOTUNE=2) or searched over K splits and tiles (3)
  export CUDA_VISIBLE_DEVICES=0
  for t in 1 3; do
    KILN_GEMM_BUCKETS=1 KILN_GEMM_AUTOTUNE=$t KILN_LOG_LEVEL=debug timeout 200 "$here/bin/bench_kernels" gemm_lt > "$out/gemm_lt_$t.log" 2>&1
    echo "== bench_kernels gemm_lt, buckets 1, tune $t, rc=$?"; grep -E "^gemm " "$out/gemm_lt_$t.log" | grep -v TFLOP | cut -c24-100
  done
  grep -h "autotune took" "$out/gemm_lt_3.log" | sed 's/.*GEMM/GEMM/' | head -24
  for r in 1 2; do
    for b in 64 32 256 128; do
      [ $r = 2 ] && [ $b = 128 ] && continue
      kb "b$b-pow2warm-$r" KILN_GEMM_BUCKETS=0 KILN_GEMM_AUTOTUNE=1 -- -b $b -s 128 -o 256 --iters 1
      kb "b$b-finewarm-$r" KILN_GEMM_BUCKETS=1 KILN_GEMM_AUTOTUNE=1 -- -b $b -s 128 -o 256 --iters 1
      kb "b$b-finecold-$r" KILN_GEMM_BUCKETS=1 KILN_GEMM_AUTOTUNE=2 -- -b $b -s 128 -o 256 --iters 1
      kb "b$b-finesearch-$r" KILN_GEMM_BUCKETS=1 KILN_GEMM_AUTOTUNE=3 KILN_LOG_LEVEL=debug -- -b $b -s 128 -o 256 --iters 1
    done
  done
  grep -h "captured" "$out/kb.err" | sed 's/.*captured/captured/' | sort | uniq -c | head
  grep -h "autotune took" "$out/kb.err" | sed 's/.*GEMM/GEMM/' | grep -E "^GEMM (32|64|128|256)x" | sort | uniq -c | sort -k2 | cut -c1-150 > "$out/autotune_choices.txt"; head -50 "$out/autotune_choices.txt"
  unset CUDA_VISIBLE_DEVICES
fi
if has s73; then # seventeenth session: cuBLASLt autotuning timed from HBM (cold, KILN_GEMM_AUTOTUNE=2) against back to back (warm), 8 / 16 / 32 candidates
  export CUDA_VISIBLE_DEVICES=0
  for t in 1 2; do
    KILN_GEMM_AUTOTUNE=$t KILN_GEMM_TUNE_CANDS=16 KILN_LOG_LEVEL=debug timeout 150 "$here/bin/bench_kernels" gemm_lt > "$out/gemm_lt_$t.log" 2>&1
    echo "== bench_kernels gemm_lt, tune $t, rc=$?"; grep -E "^gemm " "$out/gemm_lt_$t.log" | cut -c1-110
  done
  for r in 1 2; do
    for b in 64 32 256; do
      kb "b$b-warm8-$r" KILN_GEMM_AUTOTUNE=1 KILN_LOG_LEVEL=debug -- -b $b -s 128 -o 256 --iters 1
      kb "b$b-cold16-$r" KILN_GEMM_AUTOTUNE=2 KILN_GEMM_TUNE_CANDS=16 KILN_LOG_LEVEL=debug -- -b $b -s 128 -o 256 --iters 1
    done
  done
  kb "b256-cold32" KILN_GEMM_AUTOTUNE=2 KILN_GEMM_TUNE_CANDS=32 -- -b 256 -s 128 -o 256 --iters 1
  kb "b64-cold8" KILN_GEMM_AUTOTUNE=2 KILN_GEMM_TUNE_CANDS=8 -- -b 64 -s 128 -o 256 --iters 1
  grep -h "autotune took" "$out/kb.err" | sed 's/.*GEMM/GEMM/' | sort | uniq -c | sort -k2 | head -60 > "$out/autotune_choices.txt"; head -40 "$out/autotune_choices.txt"
  unset CUDA_VISIBLE_DEVICES
fi
if has s72; then # sixteenth session, last call: the whole test_gpu_ops beside test_gpu_engine; the session's engine against its start (bin/kiln_main = baa0542)
  export CUDA_VISIBLE_DEVICES=0
  ops_bg 0 420
  gt test_gpu_engine 250 "FAIL|passed" -- test_gpu_engine
  wait
  ops_report "test_gpu_ops (whole)"
  for b in 256 128; do
    KB_BIN=kiln_main kb "b$b-main" -- -b $b -s 128 -o 256 --iters 1
    kb "b$b-new" -- -b $b -s 128 -o 256 --iters 1
  done
  KB_BIN=kiln_main kb "b256L-main" -- -b 256 -s 128 -o 256 --iters 1 --max-model-len 8192
  kb "b256L-new" -- -b 256 -s 128 -o 256 --iters 1 --max-model-len 8192
  kb "b64-new" -- -b 64 -s 128 -o 256 --iters 2
  kb "b32-new" -- -b 32 -s 128 -o 256 --iters 2
  kb "b1-new" -- -b 1 -s 128 -o 512 --iters 2
  unset CUDA_VISIBLE_DEVICES
fi
if has s71; then # sixteenth session: -b 64's o projection through gemm_sk (M 33..64), -b 256's rope through the decode kernel; a -b 256 trace
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do
    kb "b64-def$r" -- -b 64 -s 128 -o 256 --iters 2
    kb "b64-sk64wg$r" KILN_SKGEMM_MAX_M=64 KILN_SKGEMM_WG=1 -- -b 64 -s 128 -o 256 --iters 2
  done
  kb "b64-sk64" KILN_SKGEMM_MAX_M=64 -- -b 64 -s 128 -o 256 --iters 2
  kb "b64-sk64wg4" KILN_SKGEMM_MAX_M=64 KILN_SKGEMM_WG=1 KILN_SKGEMM_STAGES=4 -- -b 64 -s 128 -o 256 --iters 2
  kb "b256-def" -- -b 256 -s 128 -o 256 --iters 1
  kb "b256-ropedec" KILN_ROPE_DEC_MAX=256 -- -b 256 -s 128 -o 256 --iters 1
  KILN_TRACE_OUT=/tmp/trace71.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 200 "$here/bin/kiln" bench \
    --model llama3-8b --load-format dummy -b 256 -s 128 -o 128 --iters 1 > /tmp/trace71.log 2>&1
  echo "== trace -b 256 rc=$? ($(grep -E 'output tokens/s|mean decode step|full-batch' /tmp/trace71.log | tr -s ' ' | tr '\n' ';'))"
  python3 "$here/bench/trace_summary.py" /tmp/trace71.csv --top 14 | cut -c1-150 > "$out/trace71_b256.txt"; head -20 "$out/trace71_b256.txt"
  unset CUDA_VISIBLE_DEVICES
fi
if has s70; then # sixteenth session: whole-tile loads in kiln_attn_decode or only in kiln_attn_decode_pw (kv/mix), -b 64 / -b 8 long
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2 3; do
    for v in new mix; do
      kd=(); [ $v != new ] && kd=(KILN_KERNEL_DIR="$here/kv/$v")
      kb "b64-$v$r" "${kd[@]}" -- -b 64 -s 128 -o 256 --iters 2
    done
  done
  for v in new mix; do
    kd=(); [ $v != new ] && kd=(KILN_KERNEL_DIR="$here/kv/$v")
    kb "b8long-$v" "${kd[@]}" -- -b 8 -s 4096 -o 128 --iters 1
    kb "b1long-$v" "${kd[@]}" -- -b 1 -s 16384 -o 128 --iters 1
    env "${kd[@]}" KILN_TRACE_OUT=/tmp/trace70_$v.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 200 "$here/bin/kiln" bench \
      --model llama3-8b --load-format dummy -b 64 -s 128 -o 128 --iters 1 > /tmp/trace70_$v.log 2>&1
    echo "== trace -b 64 $v rc=$? ($(grep -E 'output tokens/s|mean decode step' /tmp/trace70_$v.log | tr -s ' ' | tr '\n' ';'))"
    python3 "$here/bench/trace_summary.py" /tmp/trace70_$v.csv --top 12 | cut -c1-150 | grep -E "kiln_attn|rope|span" | head -5
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s69; then # sixteenth session: decode attention's whole-tile loads (load_tile_dec) against s68's kernels (kv/pw, KILN_AB_REVS="pw=32f31cd")
  export CUDA_VISIBLE_DEVICES=0
  ( KT_VERBOSE=1 timeout 400 "$here/bin/test_gpu_ops" attention_decode > "$out/ops_dec.log" 2>&1; echo "rc=$?" >> "$out/ops_dec.log" ) &
  gt test_gpu_engine 250 "FAIL|passed" -- test_gpu_engine
  wait
  echo "ops attention_decode: $(grep -E 'passed' "$out/ops_dec.log" | tail -1) $(tail -1 "$out/ops_dec.log")"; grep -E "FAIL" "$out/ops_dec.log" | head
  for v in new pw; do
    kd=(); [ $v != new ] && kd=(env KILN_KERNEL_DIR="$here/kv/$v")
    for f in decode-large decode-short decode; do
      "${kd[@]}" timeout 100 "$here/bin/bench_kernels" $f > /tmp/bd.log 2>&1
      grep -E "attn decode" /tmp/bd.log | sed -E "s/ +/ /g; s/32q.8kv hd128 //; s/ target.*//; s/^/$v: /" | cut -c1-100
    done
  done
  for r in 1 2; do
    for v in new pw; do
      kd=(); [ $v != new ] && kd=(KILN_KERNEL_DIR="$here/kv/$v")
      kb "b64-$v$r" "${kd[@]}" -- -b 64 -s 128 -o 256 --iters 2
    done
  done
  for v in new pw; do
    kd=(); [ $v != new ] && kd=(KILN_KERNEL_DIR="$here/kv/$v")
    kb "b32-$v" "${kd[@]}" -- -b 32 -s 128 -o 256 --iters 2
    kb "b256-$v" "${kd[@]}" -- -b 256 -s 128 -o 256 --iters 1
    kb "b128-$v" "${kd[@]}" -- -b 128 -s 128 -o 256 --iters 1
    kb "b1-$v" "${kd[@]}" -- -b 1 -s 128 -o 512 --iters 2
  done
  kb "b256-w2" KILN_DECODE_PW_WARPS=2 -- -b 256 -s 128 -o 256 --iters 1
  kb "b256-off" KILN_DECODE_PW=0 -- -b 256 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES
fi
if has s68; then # sixteenth session: the persistent-warp decode attention (kiln_attn_decode_pw): tests, rows, engine
  export CUDA_VISIBLE_DEVICES=0
  gt ops_pw 300 "FAIL|passed" -- test_gpu_ops test_attention_decode_pw
  for v in def pw pw_st4 pw_st2 pw_w2; do
    e=()
    case $v in pw) e=(KILN_DECODE_PW=2);; pw_st4) e=(KILN_DECODE_PW=2 KILN_DECODE_PW_STAGES=4);;
      pw_st2) e=(KILN_DECODE_PW=2 KILN_DECODE_PW_STAGES=2);; pw_w2) e=(KILN_DECODE_PW=2 KILN_DECODE_PW_WARPS=2);; esac
    env "${e[@]}" timeout 100 "$here/bin/bench_kernels" decode-large > /tmp/bdl.log 2>&1
    grep -E "attn decode" /tmp/bdl.log | sed -E "s/ +/ /g; s/32q.8kv hd128 //; s/ target.*//; s/^/$v: /" | cut -c1-100
  done
  for r in 1 2; do
    kb "b256-def$r" -- -b 256 -s 128 -o 256 --iters 1
    kb "b256-pw$r" KILN_DECODE_PW=1 -- -b 256 -s 128 -o 256 --iters 1
  done
  kb "b256L-def" -- -b 256 -s 128 -o 256 --iters 1 --max-model-len 8192
  kb "b256L-pw" KILN_DECODE_PW=1 -- -b 256 -s 128 -o 256 --iters 1 --max-model-len 8192
  for v in def pw; do
    e=(); [ $v = pw ] && e=(KILN_DECODE_PW=2)
    kb "b128-$v" "${e[@]}" -- -b 128 -s 128 -o 256 --iters 1
    kb "b64-$v" "${e[@]}" -- -b 64 -s 128 -o 256 --iters 2
    kb "b32-$v" "${e[@]}" -- -b 32 -s 128 -o 256 --iters 2
  done
  gt test_gpu_engine 250 "FAIL|passed" KILN_DECODE_PW=2 -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s67; then # sixteenth session: decode attention at large batches and short contexts, alone and in the -b 256 / -b 64 graphs
  export CUDA_VISIBLE_DEVICES=0
  for w in def 4 2; do
    e=(); [ $w != def ] && e=(KILN_DECODE_WARPS=$w)
    env "${e[@]}" timeout 100 "$here/bin/bench_kernels" decode-large > /tmp/bdl.log 2>&1
    grep -E "attn decode|copy " /tmp/bdl.log | sed -E "s/ +/ /g; s/32q.8kv hd128 //; s/ target.*//; s/^/w$w: /" | cut -c1-100
  done
  for b in 256 64; do
    KILN_TRACE_OUT=/tmp/trace67_$b.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 200 "$here/bin/kiln" bench \
      --model llama3-8b --load-format dummy -b $b -s 128 -o 128 --iters 1 > /tmp/trace67_$b.log 2>&1
    echo "== trace -b $b rc=$? ($(grep -E 'output tokens/s|mean decode step|full-batch' /tmp/trace67_$b.log | tr -s ' ' | tr '\n' ';'))"
    python3 "$here/bench/trace_summary.py" /tmp/trace67_$b.csv --top 16 | cut -c1-150 > "$out/trace67_b$b.txt"; head -26 "$out/trace67_b$b.txt"
    gzip -c /tmp/trace67_$b.csv > "$out/trace67_$b.csv.gz"
  done
  unset CUDA_VISIBLE_DEVICES
fi
if has s66; then # fifteenth session, after review: the split's combination with its row loop inside again (an FP8 decode kernel spilled)
  export CUDA_VISIBLE_DEVICES=0
  gt ops_attn 200 "FAIL|passed" -- test_gpu_ops attention_decode
  unset CUDA_VISIBLE_DEVICES
fi
if has s65; then # fifteenth session, last call: the whole test_gpu_ops and test_gpu_engine on the final build; the fused split for the fixed partition only
  export CUDA_VISIBLE_DEVICES=0
  timeout 400 "$here/bin/test_gpu_ops" > /tmp/tgo.log 2>&1; echo "rc=$?" >> /tmp/tgo.log
  ops_report "test_gpu_ops (whole)"
  gt test_gpu_engine 120 "FAIL|passed" -- test_gpu_engine
  kb "b12L" -- -b 12 -s 128 -o 256 --iters 2 --max-model-len 8192
  kb "b4L" -- -b 4 -s 128 -o 256 --iters 2 --max-model-len 8192
  kb "b1" -- -b 1 -s 128 -o 512 --iters 2
  unset CUDA_VISIBLE_DEVICES
fi
if has s64; then # fifteenth session: the fused split from 2 sequences (default now) against the reduce launch; decode attention tests
  export CUDA_VISIBLE_DEVICES=0
  gt ops_attn 300 "FAIL|passed" -- test_gpu_ops attention_decode
  for r in 1 2; do
    for v in fused reduce; do
      e=(); [ $v = reduce ] && e=(KILN_DECODE_FUSED_REDUCE=0)
      kb "b12L-$v$r" "${e[@]}" -- -b 12 -s 128 -o 256 --iters 2 --max-model-len 8192
      kb "b8-$v$r" "${e[@]}" -- -b 8 -s 128 -o 256 --iters 2
    done
  done
  for v in fused reduce; do
    e=(); [ $v = reduce ] && e=(KILN_DECODE_FUSED_REDUCE=0)
    kb "b12long-$v" "${e[@]}" -- -b 12 -s 2048 -o 128 --iters 1 --max-model-len 8192
    kb "b16long-$v" "${e[@]}" -- -b 16 -s 4096 -o 128 --iters 1 --max-model-len 8192
    kb "b4-$v" "${e[@]}" -- -b 4 -s 128 -o 256 --iters 2 --max-model-len 8192
  done
  kb "b1" -- -b 1 -s 128 -o 512 --iters 2
  gt test_gpu_engine 250 "FAIL|passed" -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s63; then # fifteenth session: the decode split at 11-16 sequences (want 3) short and long; a -b 32 trace kept whole; engine defaults
  export CUDA_VISIBLE_DEVICES=0
  for v in def nosplit; do
    e=(); [ $v = nosplit ] && e=(KILN_DECODE_PARTITION=-1)
    kb "b16long-$v" "${e[@]}" -- -b 16 -s 4096 -o 128 --iters 1 --max-model-len 8192
    kb "b12L-$v" "${e[@]}" -- -b 12 -s 128 -o 256 --iters 2 --max-model-len 8192
    kb "b12long-$v" "${e[@]}" -- -b 12 -s 2048 -o 128 --iters 1 --max-model-len 8192
  done
  KILN_TRACE_OUT=/tmp/trace63.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 200 "$here/bin/kiln" bench \
    --model llama3-8b --load-format dummy -b 32 -s 128 -o 64 --iters 1 > /tmp/trace63.log 2>&1
  echo "== trace -b 32 rc=$? ($(grep -E 'output tokens/s|mean decode step' /tmp/trace63.log | tr -s ' ' | tr '\n' ';'))"
  gzip -c /tmp/trace63.csv > "$out/trace63.csv.gz"
  for r in 1 2; do
    kb "b1-$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b32-$r" -- -b 32 -s 128 -o 256 --iters 2
    kb "b32L-$r" -- -b 32 -s 128 -o 256 --iters 2 --max-model-len 8192
    kb "b64-$r" -- -b 64 -s 128 -o 256 --iters 2
  done
  kb "b256" -- -b 256 -s 128 -o 256 --iters 1
  gt test_gpu_engine 250 "FAIL|passed" -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s62; then # fifteenth session: decode attention's L2 prefetch, the rope's early trigger; the split rule at long contexts
  export CUDA_VISIBLE_DEVICES=0
  for v in def l2pf; do
    kd=(); [ $v != def ] && kd=(env KILN_KERNEL_DIR="$here/kv/$v")
    "${kd[@]}" timeout 100 "$here/bin/bench_kernels" decode-short > /tmp/bds.log 2>&1
    grep -E "attn decode" /tmp/bds.log | sed -E "s/ +/ /g; s/32q.8kv hd128 //; s/ of copy target.*//; s/^/$v: /" | cut -c1-100
  done
  for r in 1 2; do
    for v in def l2pf ropeearly both; do
      kd=(); [ $v != def ] && kd=(KILN_KERNEL_DIR="$here/kv/$v")
      kb "b32-$v$r" "${kd[@]}" -- -b 32 -s 128 -o 256 --iters 2
    done
  done
  for v in def l2pf both; do kd=(); [ $v != def ] && kd=(KILN_KERNEL_DIR="$here/kv/$v"); kb "b64-$v" "${kd[@]}" -- -b 64 -s 128 -o 256 --iters 2; done
  for v in def both; do kd=(); [ $v != def ] && kd=(KILN_KERNEL_DIR="$here/kv/$v"); kb "b16-$v" "${kd[@]}" -- -b 16 -s 128 -o 256 --iters 2; done
  for v in def both; do kd=(); [ $v != def ] && kd=(KILN_KERNEL_DIR="$here/kv/$v"); kb "b256-$v" "${kd[@]}" -- -b 256 -s 128 -o 256 --iters 1; done
  for v in def both; do kd=(); [ $v != def ] && kd=(KILN_KERNEL_DIR="$here/kv/$v"); kb "b1-$v" "${kd[@]}" -- -b 1 -s 128 -o 512 --iters 2; done
  [ -x "$here/bin/kiln_main" ] && KB_BIN=kiln_main kb "b32long-main" -- -b 32 -s 4096 -o 128 --iters 1 --max-model-len 8192
  kb "b32long-new" -- -b 32 -s 4096 -o 128 --iters 1 --max-model-len 8192
  kb "b16L-new" -- -b 16 -s 128 -o 256 --iters 2 --max-model-len 8192
  kb "b16L-nosplit" KILN_DECODE_PARTITION=-1 -- -b 16 -s 128 -o 256 --iters 2 --max-model-len 8192
  unset CUDA_VISIBLE_DEVICES
fi
if has s61; then # fifteenth session: a decode split's single live partition writes its output; the reduction a warp a head; KV write at 32 heads; copies by size
  export CUDA_VISIBLE_DEVICES=0
  gt ops_attn 400 "FAIL|passed" -- test_gpu_ops attention_decode
  for f in decode kv_write copy; do
    timeout 150 "$here/bin/bench_kernels" $f > /tmp/bk_$f.log 2>&1; cp /tmp/bk_$f.log "$out/"
    grep -E "ceilings|attn decode |kv_write|copy \(" /tmp/bk_$f.log | sed -E "s/ +/ /g; s/ of copy target/ target/" | cut -c1-120
  done
  for r in 1 2; do
    [ -x "$here/bin/kiln_main" ] && KB_BIN=kiln_main kb "b1-main$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-new$r" -- -b 1 -s 128 -o 512 --iters 2
  done
  for r in 1 2; do
    [ -x "$here/bin/kiln_main" ] && KB_BIN=kiln_main kb "b32L-main$r" -- -b 32 -s 128 -o 256 --iters 2 --max-model-len 8192
    kb "b32L-new$r" -- -b 32 -s 128 -o 256 --iters 2 --max-model-len 8192
    kb "b32L-nosplit$r" KILN_DECODE_PARTITION=-1 -- -b 32 -s 128 -o 256 --iters 2 --max-model-len 8192
  done
  [ -x "$here/bin/kiln_main" ] && KB_BIN=kiln_main kb "b8L-main" -- -b 8 -s 128 -o 256 --iters 2 --max-model-len 8192
  kb "b8L-new" -- -b 8 -s 128 -o 256 --iters 2 --max-model-len 8192
  kb "b32-new" -- -b 32 -s 128 -o 256 --iters 2
  KILN_TRACE_OUT=/tmp/trace61.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 200 "$here/bin/kiln" bench \
    --model llama3-8b --load-format dummy -b 32 -s 128 -o 128 --iters 1 > /tmp/trace61.log 2>&1
  echo "== trace -b 32 rc=$? ($(grep -E 'output tokens/s|mean decode step' /tmp/trace61.log | tr -s ' ' | tr '\n' ';'))"
  python3 "$here/bench/trace_summary.py" /tmp/trace61.csv --top 24 | cut -c1-150 > "$out/trace61_b32.txt"; head -34 "$out/trace61_b32.txt"
  gzip -c /tmp/trace61.csv > "$out/trace61.csv.gz"
  gt test_gpu_engine 250 "FAIL|passed" -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s60; then # fourteenth session: test_rmsnorm after the launcher merge
  export CUDA_VISIBLE_DEVICES=0
  gt ops_rms 120 "FAIL|passed" -- test_gpu_ops test_rmsnorm
  unset CUDA_VISIBLE_DEVICES
fi
if has s59; then # fourteenth session: where a -b 256 decode step goes (CUPTI trace)
  export CUDA_VISIBLE_DEVICES=0
  KILN_TRACE_OUT=/tmp/trace59.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 200 "$here/bin/kiln" bench \
    --model llama3-8b --load-format dummy -b 256 -s 128 -o 128 --iters 1 > /tmp/trace59.log 2>&1
  echo "== trace -b 256 rc=$? ($(grep -E 'output tokens/s|mean decode step|full-batch' /tmp/trace59.log | tr -s ' ' | tr '\n' ';'))"
  python3 "$here/bench/trace_summary.py" /tmp/trace59.csv --top 24 | cut -c1-150 > "$out/trace59_b256.txt"; head -34 "$out/trace59_b256.txt"
  unset CUDA_VISIBLE_DEVICES
fi
if has s58; then # fourteenth session, last call: the whole test_gpu_ops on the final build
  export CUDA_VISIBLE_DEVICES=0
  timeout 540 "$here/bin/test_gpu_ops" > /tmp/tgo.log 2>&1; echo "rc=$?" >> /tmp/tgo.log
  ops_report "test_gpu_ops (whole)"
  unset CUDA_VISIBLE_DEVICES
fi
if has s57; then # fourteenth session: the add + RMSNorm as the batch-1 GEMVs' prologue (tried at 1e17fd5, reverted by 63b1758: -b 1 196 against 249 tok/s)
  export CUDA_VISIBLE_DEVICES=0
  gt ops_norm 200 "FAIL|passed|cases ran" -- test_gpu_ops test_gemv_norm
  for r in 1 2 3; do
    kb "b1-norm1-$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-norm0-$r" KILN_GEMV_NORM=0 -- -b 1 -s 128 -o 512 --iters 2
  done
  gt test_gpu_engine 250 "FAIL|passed" -- test_gpu_engine
  gt tge_norm0 250 "FAIL|passed" KILN_GEMV_NORM=0 -- test_gpu_engine test_gpu_batching_graphs
  unset CUDA_VISIBLE_DEVICES
fi
if has s56; then # fourteenth session: the batch-1 decode split again (no split / fixed partitions / adaptive)
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do
    kb "b1-def$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-nosplit$r" KILN_DECODE_PARTITION=-1 -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-p256-$r" KILN_DECODE_PARTITION=256 -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-p128-$r" KILN_DECODE_PARTITION=128 -- -b 1 -s 128 -o 512 --iters 2
  done
  kb "b1-fixed" KILN_DECODE_ADAPTIVE=0 -- -b 1 -s 128 -o 512 --iters 2
  kb "b1-s1024-def" -- -b 1 -s 1024 -o 512 --iters 1
  kb "b1-s1024-nosplit" KILN_DECODE_PARTITION=-1 -- -b 1 -s 1024 -o 512 --iters 1
  kb "b8-def" -- -b 8 -s 128 -o 256 --iters 2
  kb "b8-nosplit" KILN_DECODE_PARTITION=-1 -- -b 8 -s 128 -o 256 --iters 2
  unset CUDA_VISIBLE_DEVICES
fi
if has s55; then # fourteenth session: where -b 1 goes (CUPTI trace) and the split reduction's upper bound
  export CUDA_VISIBLE_DEVICES=0
  KILN_TRACE_OUT=/tmp/trace55.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 150 "$here/bin/kiln" bench \
    --model llama3-8b --load-format dummy -b 1 -s 128 -o 256 --iters 1 > /tmp/trace55.log 2>&1
  echo "== trace -b 1 rc=$? ($(grep -E 'output tokens/s|mean decode step' /tmp/trace55.log | tr -s ' ' | tr '\n' ';'))"
  python3 "$here/bench/trace_summary.py" /tmp/trace55.csv --top 24 | cut -c1-150 > "$out/trace55_b1.txt"; head -34 "$out/trace55_b1.txt"
  gzip -c /tmp/trace55.csv > "$out/trace55.csv.gz"
  for r in 1 2; do
    kb "b1-def$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-noreduce$r" KILN_KERNEL_DIR="$here/kv/noreduce" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-nonorm$r" KILN_KERNEL_DIR="$here/kv/nonorm" -- -b 1 -s 128 -o 512 --iters 2
  done
  kb "b8-def" -- -b 8 -s 128 -o 256 --iters 2
  kb "b8-noreduce" KILN_KERNEL_DIR="$here/kv/noreduce" -- -b 8 -s 128 -o 256 --iters 2
  unset CUDA_VISIBLE_DEVICES
fi
if has s54; then # fourteenth session: the 16-byte prefill stores on a second node; engine numbers; two fusions' upper bounds
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do
    timeout 150 "$here/bin/bench_kernels" prefill > /tmp/bp.log 2>&1
    grep -E "ceilings|attn prefill (causal|wg2)" /tmp/bp.log | sed -E "s/ +/ /g; s/^/r$r: /" | cut -c1-120
  done
  cp /tmp/bp.log "$out/bench_prefill.log"
  for r in 1 2; do kb "p8x2048-def$r" -- -b 8 -s 2048 -o 8 --iters 2; done
  kb p1x8192-def -- -b 1 -s 8192 -o 8 --iters 2
  for r in 1 2; do
    kb "b1-def$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-nonorm$r" KILN_KERNEL_DIR="$here/kv/nonorm" -- -b 1 -s 128 -o 512 --iters 2
    kb "b32-def$r" -- -b 32 -s 128 -o 256 --iters 2
    kb "b32-norope$r" KILN_KERNEL_DIR="$here/kv/norope" -- -b 32 -s 128 -o 256 --iters 2
    kb "b32-nonorm$r" KILN_KERNEL_DIR="$here/kv/nonorm" -- -b 32 -s 128 -o 256 --iters 2
  done
  kb b64-def -- -b 64 -s 128 -o 256 --iters 2
  kb b64-norope KILN_KERNEL_DIR="$here/kv/norope" -- -b 64 -s 128 -o 256 --iters 2
  kb b256-def -- -b 256 -s 128 -o 256 --iters 1
  gt test_gpu_engine 250 "FAIL|passed" -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s53; then # fourteenth session: cuBLASLt kernels as programmatic graph dependents (tried at 81c3193, reverted: they read before waiting); the 16-byte prefill stores
  export CUDA_VISIBLE_DEVICES=0
  gt ops_blaspdl 120 "FAIL|passed|GEMM graphs|rel err|control" -- test_gpu_ops test_blas_graph_pdl
  gt ops_prefill 300 "FAIL|passed" -- test_gpu_ops attention_prefill_wg
  for r in 1 2; do
    for v in epi def; do
      if [ $v = def ]; then kd=""; else kd="$here/kv/$v"; fi
      KILN_KERNEL_DIR="$kd" timeout 150 "$here/bin/bench_kernels" prefill > /tmp/bp_$v.log 2>&1
      grep -E "attn prefill (causal|wg2)" /tmp/bp_$v.log | sed -E "s/ +/ /g; s/^/$v$r: /" | cut -c1-120
    done
  done
  cp /tmp/bp_def.log "$out/bench_prefill.log"
  kb p8x2048-def -- -b 8 -s 2048 -o 8 --iters 2
  for r in 1 2; do
    for b in 32 64; do
      kb "b$b-pdl0-$r" KILN_GRAPH_BLAS_PDL=0 -- -b $b -s 128 -o 256 --iters 2
      kb "b$b-pdl1-$r" KILN_GRAPH_BLAS_PDL=1 -- -b $b -s 128 -o 256 --iters 2
    done
  done
  grep -h "programmatic" "$out/kb.err" | sort | uniq -c | head -5
  kb "b256-pdl0" KILN_GRAPH_BLAS_PDL=0 -- -b 256 -s 128 -o 256 --iters 1
  kb "b256-pdl1" KILN_GRAPH_BLAS_PDL=1 -- -b 256 -s 128 -o 256 --iters 1
  kb "b16-pdl0" KILN_GRAPH_BLAS_PDL=0 -- -b 16 -s 128 -o 256 --iters 2
  kb "b16-pdl1" KILN_GRAPH_BLAS_PDL=1 -- -b 16 -s 128 -o 256 --iters 2
  gt tge_pdl 250 "FAIL|passed" KILN_GRAPH_BLAS_PDL=1 -- test_gpu_engine
  unset CUDA_VISIBLE_DEVICES
fi
if has s52; then # fourteenth session: wg2p's turns across items, 8-byte output stores, the next Q in L2; a -b 32 trace
  export CUDA_VISIBLE_DEVICES=0
  gt ops_prefill 300 "FAIL|passed" -- test_gpu_ops attention_prefill_wg
  for r in 1 2; do
    for v in base cont epi def; do
      if [ $v = def ]; then kd=""; else kd="$here/kv/$v"; fi
      KILN_KERNEL_DIR="$kd" timeout 150 "$here/bin/bench_kernels" prefill > /tmp/bp_$v.log 2>&1
      grep -E "attn prefill (causal|wg2)" /tmp/bp_$v.log | sed -E "s/ +/ /g; s/^/$v$r: /" | cut -c1-120
    done
  done
  grep -E "ceilings" /tmp/bp_def.log | head -2
  cp /tmp/bp_def.log "$out/bench_prefill.log"
  for r in 1 2; do
    kb "p8x2048-base$r" KILN_KERNEL_DIR="$here/kv/base" -- -b 8 -s 2048 -o 8 --iters 2
    kb "p8x2048-def$r" -- -b 8 -s 2048 -o 8 --iters 2
  done
  KILN_TRACE_OUT=/tmp/trace52.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 150 "$here/bin/kiln" bench \
    --model llama3-8b --load-format dummy -b 32 -s 128 -o 128 --iters 1 > /tmp/trace52.log 2>&1
  echo "== trace -b 32 rc=$? ($(grep -E 'output tokens/s|mean decode step' /tmp/trace52.log | tr -s ' ' | tr '\n' ';'))"
  cp /tmp/trace52.csv "$out/" 2>/dev/null
  python3 "$here/bench/trace_summary.py" /tmp/trace52.csv --top 22 | cut -c1-150 > "$out/trace52_b32.txt"; head -30 "$out/trace52_b32.txt"
  unset CUDA_VISIBLE_DEVICES
fi
if has s51; then # thirteenth session, after review: gemm_sk (wgmma too) and the wg2 / wg2p prefill tests
  export CUDA_VISIBLE_DEVICES=0
  gt ops_sk 240 "FAIL|passed" -- test_gpu_ops gemm_sk
  gt ops_prefill 200 "FAIL|passed" -- test_gpu_ops attention_prefill_wg
  unset CUDA_VISIBLE_DEVICES
fi
if has s50; then # thirteenth session: the JIT targets with the 70-unit Llama-3-8B set (cold, warm) on the device's CPUs
  export CUDA_VISIBLE_DEVICES=0
  timeout 200 "$here/bin/bench_kernels" jit > /tmp/bj.log 2>&1
  grep -iE "jit|ceilings" /tmp/bj.log | sed -E "s/ +/ /g" | cut -c1-140
  cp /tmp/bj.log "$out/bench_jit.log"
  unset CUDA_VISIBLE_DEVICES
fi
if has s49; then # thirteenth session: wg2 / wg2p with the causal half tile (the last KV tile's first 64 keys)
  export CUDA_VISIBLE_DEVICES=0
  gt ops_prefill 300 "FAIL|passed" -- test_gpu_ops attention_prefill
  for r in 1 2; do
    timeout 100 "$here/bin/bench_kernels" prefill > /tmp/bp.log 2>&1
    grep -E "ceilings|attn prefill (causal|wg2)" /tmp/bp.log | sed -E "s/ +/ /g" | cut -c1-110
  done
  cp /tmp/bp.log "$out/bench_prefill.log"
  kb p8x2048-def -- -b 8 -s 2048 -o 8 --iters 2
  kb p1x8192-def -- -b 1 -s 8192 -o 8 --iters 2
  unset CUDA_VISIBLE_DEVICES
fi
if has s48; then # thirteenth session: the defaults with wg2p; the whole test_gpu_ops and test_gpu_engine
  ngpu=$(nvidia-smi -L | wc -l)
  if [ "$ngpu" -ge 2 ]; then ops_bg 0 420; export CUDA_VISIBLE_DEVICES=1; else export CUDA_VISIBLE_DEVICES=0; fi
  timeout 100 "$here/bin/bench_kernels" prefill > /tmp/bp.log 2>&1
  grep -E "ceilings|attn prefill (causal|wg2)" /tmp/bp.log | sed -E "s/ +/ /g" | cut -c1-110
  cp /tmp/bp.log "$out/bench_prefill.log"
  kb p8x2048-def -- -b 8 -s 2048 -o 8 --iters 2
  kb p8x2048-grid KILN_PREFILL_PERSIST=0 -- -b 8 -s 2048 -o 8 --iters 2
  kb p1x8192-def -- -b 1 -s 8192 -o 8 --iters 2
  kb p1x8192-grid KILN_PREFILL_PERSIST=0 -- -b 1 -s 8192 -o 8 --iters 2
  kb b1-def -- -b 1 -s 128 -o 512 --iters 2
  kb b32-def -- -b 32 -s 128 -o 256 --iters 2
  if [ "$ngpu" -lt 2 ]; then ops_bg 0 420; fi
  unset CUDA_VISIBLE_DEVICES; wait
  ops_report "test_gpu_ops (whole)"
  [ "$ngpu" -ge 2 ] && gt test_gpu_engine 200 "FAIL|passed" -- test_gpu_engine
fi
if has s47; then # thirteenth session: wg2's persistent form (wg2p); gemm_sk_wg tuned per row count
  export CUDA_VISIBLE_DEVICES=0
  gt ops_pwg 300 "FAIL|passed" -- test_gpu_ops attention_prefill_wg
  timeout 120 "$here/bin/bench_kernels" prefill > /tmp/bp.log 2>&1
  grep -E "ceilings|attn prefill" /tmp/bp.log | sed -E "s/ +/ /g" | cut -c1-110
  cp /tmp/bp.log "$out/bench_prefill.log"
  for r in 1 2; do
    kb "p8x2048-def$r" -- -b 8 -s 2048 -o 8 --iters 2
    kb "p8x2048-wg2p$r" KILN_PREFILL_PERSIST=1 -- -b 8 -s 2048 -o 8 --iters 2
  done
  w32="KILN_SKGEMM_WG=1 KILN_SKGEMM_ROPE=32 KILN_SKGEMM_ROPE_STAGES=4 KILN_SKGEMM_STAGES=4"
  w16="KILN_SKGEMM_WG=1 KILN_SKGEMM_TILES=4 KILN_SKGEMM_ROPE_STAGES=6"
  for r in 1 2; do
    kb "b32-def$r" -- -b 32 -s 128 -o 256 --iters 2
    kb "b32-wgt$r" $w32 -- -b 32 -s 128 -o 256 --iters 2
    kb "b16-def$r" -- -b 16 -s 128 -o 256 --iters 2
    kb "b16-wgt$r" $w16 -- -b 16 -s 128 -o 256 --iters 2
  done
  kb b16-wgt-down $w16 KILN_SKGEMM_MAX_WEIGHT_MB=120 -- -b 16 -s 128 -o 256 --iters 2
  kb b32-wgt-early $w32 KILN_PDL_EARLY_MAX_SEQS=32 -- -b 32 -s 128 -o 256 --iters 2
  unset CUDA_VISIBLE_DEVICES
fi
if has s46; then # thirteenth session: gemm_sk on Hopper's warpgroup MMA (gemm_sk_wg, $KILN_SKGEMM_WG)
  export CUDA_VISIBLE_DEVICES=0
  gt ops_wg 240 "FAIL|passed" -- test_gpu_ops gemm_sk
  timeout 150 "$here/bin/bench_kernels" gemm_sk_quick > /tmp/bq.log 2>&1
  grep -E "ceilings|gemm" /tmp/bq.log | sed -E "s/ +/ /g; s/ \(weight bytes\)//; s/ of copy target.*//" | cut -c1-100
  cp /tmp/bq.log "$out/bench_gemm_sk_quick.log"
  wga="KILN_SKGEMM_MAX_WEIGHT_MB=-1 KILN_SKGEMM_MAX_WEIGHT_MB_M32=-1 KILN_SKGEMM_ROPE=32"
  for r in 1 2; do
    kb "b32-def$r" -- -b 32 -s 128 -o 256 --iters 2
    kb "b32-wg$r" KILN_SKGEMM_WG=1 -- -b 32 -s 128 -o 256 --iters 2
  done
  kb b32-wg-qkv KILN_SKGEMM_WG=1 KILN_SKGEMM_MAX_WEIGHT_MB_M32=-1 -- -b 32 -s 128 -o 256 --iters 2
  kb b32-wg-rope KILN_SKGEMM_WG=1 KILN_SKGEMM_ROPE=32 -- -b 32 -s 128 -o 256 --iters 2
  kb b32-wg-all KILN_SKGEMM_WG=1 $wga -- -b 32 -s 128 -o 256 --iters 2
  kb b32-wg-all-silu KILN_SKGEMM_WG=1 $wga KILN_SKGEMM_SILU=1 -- -b 32 -s 128 -o 256 --iters 2
  kb b16-def -- -b 16 -s 128 -o 256 --iters 2
  kb b16-wg KILN_SKGEMM_WG=1 -- -b 16 -s 128 -o 256 --iters 2
  kb b16-wg-all KILN_SKGEMM_WG=1 $wga -- -b 16 -s 128 -o 256 --iters 2
  kb b8-def -- -b 8 -s 128 -o 256 --iters 2
  kb b8-wg KILN_SKGEMM_WG=1 -- -b 8 -s 128 -o 256 --iters 2
  unset CUDA_VISIBLE_DEVICES
fi
if has s44; then # twelfth session: the fused decode split with the early trigger (-b 1, -b 8)
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do
    kb "b1-def$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-fused$r" KILN_DECODE_FUSED_REDUCE=1 -- -b 1 -s 128 -o 512 --iters 2
  done
  kb b8-def -- -b 8 -s 128 -o 256 --iters 2
  kb b8-fused KILN_DECODE_FUSED_REDUCE=1 -- -b 8 -s 128 -o 256 --iters 2
  unset CUDA_VISIBLE_DEVICES
fi
if has s37; then # eleventh session, last call: gemm_sk + rope up to 16 rows and 4-warp decode attention past 512 tokens
  ( export CUDA_VISIBLE_DEVICES=0
    gt ops_skrope 150 "FAIL|passed" -- test_gpu_ops test_gemm_sk_rope
    gt ops_decode 200 "FAIL|passed" -- test_gpu_ops test_attention_decode
    gt test_gpu_engine 150 "FAIL|passed" -- test_gpu_engine ) > /tmp/s37t.log 2>&1 &
  export CUDA_VISIBLE_DEVICES=1
  timeout 90 "$here/bin/bench_kernels" decode > /tmp/bd.log 2>&1
  grep -E "ceilings|attn decode" /tmp/bd.log | sed -E "s/ +/ /g; s/32q.8kv hd128 //; s/ of copy target/ target/" | cut -c1-110
  for w in 2 4; do KILN_DECODE_WARPS=$w timeout 60 "$here/bin/bench_kernels" decode-short > /tmp/bds.log 2>&1
    grep -E "attn decode" /tmp/bds.log | sed -E "s/ +/ /g; s/32q.8kv hd128 //; s/ of copy target.*//; s/^/w$w: /" | cut -c1-100; done
  for r in 1 2; do
    kb "b64-def$r" -- -b 64 -s 128 -o 256 --iters 2
    kb "b64-w2-$r" KILN_DECODE_WARPS=2 -- -b 64 -s 128 -o 256 --iters 2
  done
  kb "b64-s1024-def" -- -b 64 -s 1024 -o 256 --iters 1
  kb "b64-s1024-w2" KILN_DECODE_WARPS=2 -- -b 64 -s 1024 -o 256 --iters 1
  for b in 8 16; do kb "b$b-def" -- -b $b -s 128 -o 256 --iters 2; kb "b$b-rope0" KILN_SKGEMM_ROPE=0 -- -b $b -s 128 -o 256 --iters 2; done
  kb "b1-def" -- -b 1 -s 128 -o 512 --iters 2
  kb "b32-def" -- -b 32 -s 128 -o 256 --iters 2
  unset CUDA_VISIBLE_DEVICES; wait; cat /tmp/s37t.log
  gt test_gpu_tp 100 "FAIL|passed" -- test_gpu_tp
fi
if has s36; then # eleventh session, last call: next10 with the decode kernel's static shared flag removed
  ops_bg 0 500
  for c in test_attention_decode test_attention_fp8 test_gemm_sk test_silu_gemm_sk test_graph_replay test_all_reduce; do
    ( CUDA_VISIBLE_DEVICES=0 KT_VERBOSE=1 timeout 400 "$here/bin/test_gpu_ops" $c > "$out/ops_$c.log" 2>&1; echo "rc=$?" >> "$out/ops_$c.log" ) &
  done
  export CUDA_VISIBLE_DEVICES=1
  gt test_gpu_engine 150 "FAIL|passed" -- test_gpu_engine
  gt test_gpu_engine_fused 150 "FAIL|passed" KILN_DECODE_FUSED_REDUCE=1 -- test_gpu_engine
  timeout 90 "$here/bin/bench_kernels" decode > /tmp/bd.log 2>&1
  grep -E "ceilings|attn decode" /tmp/bd.log | sed -E "s/ +/ /g; s/32q.8kv hd128 //; s/ of copy target/ target/" | cut -c1-110
  for r in 1 2; do
    KB_BIN=kiln_main kb "b1-main$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-def$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-fused$r" KILN_DECODE_FUSED_REDUCE=1 -- -b 1 -s 128 -o 512 --iters 2
  done
  for b in 8 32; do for r in 1 2; do
    KB_BIN=kiln_main kb "b$b-main$r" -- -b $b -s 128 -o 256 --iters 2
    kb "b$b-def$r" -- -b $b -s 128 -o 256 --iters 2
    kb "b$b-skrope$r" KILN_SKGEMM_ROPE=1 -- -b $b -s 128 -o 256 --iters 2
  done; done
  kb "b16-skrope" KILN_SKGEMM_ROPE=1 -- -b 16 -s 128 -o 256 --iters 2
  kb "b16-def" -- -b 16 -s 128 -o 256 --iters 2
  for r in 1 2; do KB_BIN=kiln_main kb "b64-main$r" -- -b 64 -s 128 -o 256 --iters 2; kb "b64-def$r" -- -b 64 -s 128 -o 256 --iters 2; done
  kb "b32-long-def" -- -b 32 -s 128 -o 256 --iters 2 --max-model-len 8192
  kb "b32-long-fused" KILN_DECODE_FUSED_REDUCE=1 -- -b 32 -s 128 -o 256 --iters 2 --max-model-len 8192
  KB_BIN=kiln_main kb "b256-main" -- -b 256 -s 128 -o 256 --iters 1
  kb "b256-def" -- -b 256 -s 128 -o 256 --iters 1
  unset CUDA_VISIBLE_DEVICES; wait
  for c in test_attention_decode test_attention_fp8 test_gemm_sk test_silu_gemm_sk test_graph_replay test_all_reduce; do
    echo "ops $c: $(grep -E 'passed' "$out/ops_$c.log" | tail -1) $(tail -1 "$out/ops_$c.log")"; grep -E "FAIL" "$out/ops_$c.log" | head -4; done
  ops_report "test_gpu_ops (whole)"
  gt test_gpu_tp 100 "FAIL|passed" -- test_gpu_tp
fi
if has s35; then # eleventh session: the suite, and where decode attention lost 15-20% since the fourth session
  ops_bg 0 500
  export CUDA_VISIBLE_DEVICES=1
  gt test_gpu_engine 150 "FAIL|passed" -- test_gpu_engine
  dec() { local tag="$1"; shift; env "$@" timeout 90 "$here/bin/bench_kernels" decode > /tmp/bd.log 2>&1
    grep -E "ceilings|attn decode" /tmp/bd.log | sed -E "s/ +/ /g; s/^/$tag: /; s/32q.8kv hd128 //; s/ of copy target.*//" | cut -c1-100; }
  dec head-w4 KILN_DECODE_WARPS=4
  dec head-w2 KILN_DECODE_WARPS=2
  for d in "$here"/kv/*; do dec "$(basename "$d")" KILN_DECODE_WARPS=4 KILN_KERNEL_DIR="$d" KILN_DECODE_ADAPTIVE=0; done
  dec head-w4-fixed KILN_DECODE_WARPS=4 KILN_DECODE_ADAPTIVE=0
  unset CUDA_VISIBLE_DEVICES; wait
  ops_report "test_gpu_ops"
  gt test_gpu_tp 240 "FAIL|passed" -- test_gpu_tp
fi
if has s34; then # eleventh session: the decode split combined in the attention kernel (branch next10) and the tests
  ( export CUDA_VISIBLE_DEVICES=0
    gt ops_fused 240 "FAIL|passed" -- test_gpu_ops test_attention_decode_fused
    gt ops_rope 90 "FAIL|passed" -- test_gpu_ops test_gemv_rope
    gt ops_skrope 150 "FAIL|passed" -- test_gpu_ops test_gemm_sk_rope ) > /tmp/s34t.log 2>&1 &
  export CUDA_VISIBLE_DEVICES=1
  gt test_gpu_engine 150 "FAIL|passed" KILN_DECODE_FUSED_REDUCE=1 -- test_gpu_engine
  for r in 1 2; do
    kb "b1-def$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-fused$r" KILN_DECODE_FUSED_REDUCE=1 -- -b 1 -s 128 -o 512 --iters 2
  done
  gt test_gpu_engine_skrope 150 "FAIL|passed" KILN_SKGEMM_ROPE=1 -- test_gpu_engine
  for b in 8 32; do for r in 1 2; do
    kb "b$b-def$r" -- -b $b -s 128 -o 256 --iters 2
    kb "b$b-skrope$r" KILN_SKGEMM_ROPE=1 -- -b $b -s 128 -o 256 --iters 2
  done; done
  for b in 16 32; do
    kb "b$b-long-def" -- -b $b -s 128 -o 256 --iters 2 --max-model-len 8192
    kb "b$b-long-fused" KILN_DECODE_FUSED_REDUCE=1 -- -b $b -s 128 -o 256 --iters 2 --max-model-len 8192
  done
  timeout 60 "$here/bin/bench_kernels" decode > /tmp/b_d.log 2>&1; grep -E "decode" /tmp/b_d.log | sed -E 's/ +/ /g' | cut -c1-110
  KILN_DECODE_FUSED_REDUCE=1 timeout 60 "$here/bin/bench_kernels" decode > /tmp/b_df.log 2>&1
  grep -E "decode" /tmp/b_df.log | sed -E 's/ +/ /g; s/^/fused: /' | cut -c1-118
  unset CUDA_VISIBLE_DEVICES; wait; cat /tmp/s34t.log
fi
if has s33; then # tenth session: the batch-1 qkv GEMV + rope's tiling (test_gemv_rope on GPU 0, kiln bench -b 1 on GPU 1)
  ( export CUDA_VISIBLE_DEVICES=0
    for c in "4 2" "8 2" "2 1" "4 1" "8 1"; do set -- $c
      gt "rope_u$1_k$2" 90 "FAIL|passed" KILN_GEMV_ROPE_UNROLL=$1 KILN_GEMV_ROPE_KSPLIT=$2 -- test_gpu_ops test_gemv_rope; done > /tmp/s33t.log 2>&1 ) &
  export CUDA_VISIBLE_DEVICES=1
  for c in "2 2" "4 2" "8 2" "2 1" "4 1" "8 1" "2 2"; do set -- $c
    kb "b1-u$1-k$2" KILN_GEMV_ROPE_UNROLL=$1 KILN_GEMV_ROPE_KSPLIT=$2 -- -b 1 -s 128 -o 512 --iters 2; done
  unset CUDA_VISIBLE_DEVICES; wait; cat /tmp/s33t.log
fi
if has s32; then # tenth session, last call: next9 merged with the measured defaults (decode warps by the grid,
  # the decode rope + KV write up to 64 tokens, sampling cluster by rows, gemm_sk on the o projection at M 17-32,
  # wg2 prefill from 1024 tokens; RMSNorm __launch_bounds__(1024)) against main's binary, the peer, the tests
  ( CUDA_VISIBLE_DEVICES=0 timeout 470 "$here/bin/test_gpu_ops" > /tmp/tgo.log 2>&1; echo "rc=$?" >> /tmp/tgo.log ) &
  export CUDA_VISIBLE_DEVICES=1
  gt test_gpu_engine 150 "FAIL|passed" -- test_gpu_engine
  for b in 1 32 64 256; do
    o=$([ $b = 1 ] && echo 512 || echo 256)
    for r in 1 2; do
      [ -x "$here/bin/kiln_main" ] && KB_BIN=kiln_main kb "b$b-main$r" -- -b $b -s 128 -o $o --iters 2
      kb "b$b-new$r" -- -b $b -s 128 -o $o --iters 2
    done
  done
  kb "b256-warps4" KILN_DECODE_WARPS=4 -- -b 256 -s 128 -o 256 --iters 2
  kb "b256-ropedec256" KILN_ROPE_DEC_MAX=256 -- -b 256 -s 128 -o 256 --iters 2
  kb "b64-sample-cl8" KILN_SAMPLE_CLUSTER=8 -- -b 64 -s 128 -o 256 --iters 2
  kb "p8x2048-default" -- -b 8 -s 2048 -o 4 --iters 2
  kb "p8x2048-v2" KILN_PREFILL_KERNEL=v2 -- -b 8 -s 2048 -o 4 --iters 2
  peers="$repo/../shared/peers"; [ -f "$peers/torch_cudagraph_llama.py" ] || peers="$here/peers"
  timeout 200 python3 "$peers/torch_cudagraph_llama.py" -b 1 -b 32 -b 64 -b 256 -s 128 -o 256 --json 2> /tmp/peer.err \
    | grep '^[[{]' > "$out/peer.jsonl"; echo "peer rc=$?"; cut -c1-300 "$out/peer.jsonl"; tail -2 /tmp/peer.err
  timeout 60 "$here/bin/bench_kernels" prefill > /tmp/b_p.log 2>&1; grep -E "prefill" /tmp/b_p.log | sed -E 's/ +/ /g' | cut -c1-110
  unset CUDA_VISIBLE_DEVICES
  wait
  echo "test_gpu_ops: $(grep -E 'passed' /tmp/tgo.log | tail -1) $(tail -1 /tmp/tgo.log)"; grep -E "FAIL" /tmp/tgo.log | head
  grep -E "^\[ (RUN |FAIL| OK )" /tmp/tgo.log | tail -2
  if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then gt test_gpu_tp 60 "FAIL|passed" -- test_gpu_tp; fi
fi
if has s31; then # tenth session: branch next9 (PDL prefetches, 2-warp decode attention, the decode rope + KV write,
  # greedy cluster sampling + one copy each way, wgmma prefill v2) against main, and the tests.
  # S31_TESTS=0 / S31_BENCH=0 skip a part (both: ~10 min; with S31_BENCH=0 the tests take both GPUs)
  if [ "${S31_TESTS:-1}" = 1 ]; then
    # the wgmma prefill kernels first, alone (a barrier mistake in wg2 would hang, not fail)
    gt ops_wg 150 "FAIL|passed|rc=" -- test_gpu_ops attention_prefill_wg
    if [ "${S31_BENCH:-1}" = 1 ]; then
      ( CUDA_VISIBLE_DEVICES=1 timeout 400 "$here/bin/test_gpu_ops" > /tmp/tgo.log 2>&1; echo "rc=$?" >> /tmp/tgo.log
        CUDA_VISIBLE_DEVICES=1 timeout 180 "$here/bin/test_gpu_engine" > /tmp/tge.log 2>&1; echo "rc=$?" >> /tmp/tge.log ) &
    else
      ( CUDA_VISIBLE_DEVICES=0 timeout 500 "$here/bin/test_gpu_ops" > /tmp/tgo.log 2>&1; echo "rc=$?" >> /tmp/tgo.log ) &
      ( CUDA_VISIBLE_DEVICES=1 timeout 300 "$here/bin/test_gpu_engine" > /tmp/tge.log 2>&1; echo "rc=$?" >> /tmp/tge.log ) &
    fi
  fi
  if [ "${S31_BENCH:-1}" = 1 ]; then
    timeout 60 "$here/bin/bench_kernels" sample > /tmp/b_s.log 2>&1; grep -E "^sample" /tmp/b_s.log | sed -E 's/ +/ /g'
    for w in 4 2; do KILN_DECODE_WARPS=$w timeout 60 "$here/bin/bench_kernels" decode-short > /tmp/b_d$w.log 2>&1
      grep -E "decode" /tmp/b_d$w.log | sed -E "s/ +/ /g; s/^/warps $w: /" | cut -c1-120; done
    for m in 0 256; do KILN_ROPE_DEC_MAX=$m timeout 90 "$here/bin/bench_kernels" decode-shape > /tmp/b_e$m.log 2>&1
      grep -E "rope_kv_write|add_rmsnorm" /tmp/b_e$m.log | grep -E " (1|32|64)( tok|x4096)" | sed -E "s/ +/ /g; s/^/rope_dec_max $m: /" | cut -c1-120; done
    KILN_KERNEL_DIR="$here/ksrc_old" timeout 60 "$here/bin/bench_kernels" decode-short > /tmp/b_d0.log 2>&1
    grep -E "decode" /tmp/b_d0.log | sed -E "s/ +/ /g; s/^/main kernels: /" | cut -c1-120
    timeout 120 "$here/bin/bench_kernels" prefill > /tmp/b_p.log 2>&1; grep -E "prefill" /tmp/b_p.log | sed -E 's/ +/ /g' | cut -c1-110
    timeout 90 "$here/bin/bench_kernels" "gemm_mid lm_head" > /tmp/b_lm.log 2>&1; grep -E "lm_head" /tmp/b_lm.log | sed -E 's/ +/ /g' | cut -c1-110
    for k in v2 wg wg2; do kb "p8x2048-$k" KILN_PREFILL_KERNEL=$k -- -b 8 -s 2048 -o 4 --iters 2; done
    for b in 1 32 64; do
      o=$([ $b = 1 ] && echo 512 || echo 256)
      for r in 1 2; do
        [ -x "$here/bin/kiln_main" ] && KB_BIN=kiln_main kb "b$b-main$r" -- -b $b -s 128 -o $o --iters 2
        kb "b$b-next$r" -- -b $b -s 128 -o $o --iters 2
      done
      kb "b$b-next-mainkernels" KILN_KERNEL_DIR="$here/ksrc_old" -- -b $b -s 128 -o $o --iters 2
      kb "b$b-next-sample0" KILN_SAMPLE_CLUSTER=0 -- -b $b -s 128 -o $o --iters 2
      [ $b != 1 ] && kb "b$b-next-warps2" KILN_DECODE_WARPS=2 -- -b $b -s 128 -o $o --iters 2
      [ $b != 1 ] && kb "b$b-next-ropedec" KILN_ROPE_DEC_MAX=256 -- -b $b -s 128 -o $o --iters 2
      [ $b = 32 ] && kb "b$b-next-sk-o" KILN_SKGEMM_MAX_M=32 KILN_SKGEMM_MAX_WEIGHT_MB=40 -- -b $b -s 128 -o $o --iters 2
    done
    KILN_TRACE_OUT=/tmp/trace31.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 150 "$here/bin/kiln" bench \
      --model llama3-8b --load-format dummy -b 32 -s 128 -o 128 --iters 1 > /tmp/trace31.log 2>&1
    python3 "$here/bench/trace_summary.py" /tmp/trace31.csv --top 16 | cut -c1-150 > "$out/trace31_b32.txt"; head -4 "$out/trace31_b32.txt"
  fi
  wait
  if [ "${S31_TESTS:-1}" = 1 ]; then
    echo "test_gpu_ops: $(grep -E 'passed' /tmp/tgo.log | tail -1) $(tail -1 /tmp/tgo.log)"; grep -E "FAIL" /tmp/tgo.log | head
    grep -E "^\[ (RUN |FAIL| OK )" /tmp/tgo.log | tail -2
    echo "test_gpu_engine: $(grep -E 'passed' /tmp/tge.log | tail -1) $(tail -1 /tmp/tge.log)"; grep -E "FAIL" /tmp/tge.log | head
    cp /tmp/tgo.log "$out/test_gpu_ops.log"; cp /tmp/tge.log "$out/test_gpu_engine.log"
    if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then gt test_gpu_tp 240 "FAIL|passed" -- test_gpu_tp; fi
  fi
fi
if has s30; then # ninth session, last call: the wgmma prefill kernel (helper), the one-pass sampling kernel
  ( CUDA_VISIBLE_DEVICES=1 timeout 420 "$here/bin/test_gpu_ops" > /tmp/tgo.log 2>&1; echo "rc=$?" >> /tmp/tgo.log ) &
  gt ops_wg 120 "FAIL|passed|rc=" -- test_gpu_ops attention_prefill_wg
  gt ops_sampling 60 "FAIL|passed" -- test_gpu_ops test_sampling
  timeout 120 "$here/bin/bench_kernels" prefill > /tmp/bp.log 2>&1; echo "bench_kernels prefill rc=$?"
  grep -E "ceilings|prefill" /tmp/bp.log | sed -E 's/ +/ /g' | cut -c1-150
  timeout 60 "$here/bin/bench_kernels" sample > /tmp/bs.log 2>&1; grep -E "^sample" /tmp/bs.log | sed 's/^/new /'
  KILN_KERNEL_DIR="$here/ksrc_old" timeout 60 "$here/bin/bench_kernels" sample > /tmp/bs0.log 2>&1; grep -E "^sample" /tmp/bs0.log | sed 's/^/old /'
  for r in 1 2; do
    kb "b1-new$r" -- -b 1 -s 128 -o 512 --iters 2
    kb "b1-old$r" KILN_KERNEL_DIR="$here/ksrc_old" -- -b 1 -s 128 -o 512 --iters 2
  done
  kb "b32-new" -- -b 32 -s 128 -o 256 --iters 2
  for k in wg default; do
    kb "p8x2048-$k" KILN_PREFILL_KERNEL=$([ $k = wg ] && echo wg || echo v2) -- -b 8 -s 2048 -o 4 --iters 2
  done
  wait
  echo "test_gpu_ops (whole, GPU 1): $(grep -E 'passed' /tmp/tgo.log | tail -1) $(tail -1 /tmp/tgo.log)"; grep -E "FAIL" /tmp/tgo.log | head
  grep -E "^\[ (RUN |FAIL| OK )" /tmp/tgo.log | tail -2
  cp /tmp/tgo.log "$out/test_gpu_ops.log"
fi
if has s29; then # ninth session: knobs at -b 32 / 64 (the wide elementwise kernels, the decode split), whole test_gpu_ops
  ( CUDA_VISIBLE_DEVICES=1 timeout 560 "$here/bin/test_gpu_ops" > "$out/test_gpu_ops.log" 2>&1; echo "rc=$?" >> "$out/test_gpu_ops.log" ) &
  for b in 32 64; do
    kb "b$b" -- -b $b -s 128 -o 256 --iters 2
    kb "b$b-wide16" KILN_ELEM_WIDE_MIN=16 -- -b $b -s 128 -o 256 --iters 2
    kb "b$b-part64" KILN_DECODE_PARTITION=64 -- -b $b -s 128 -o 256 --iters 2
    kb "b$b-part128" KILN_DECODE_PARTITION=128 -- -b $b -s 128 -o 256 --iters 2
    kb "b$b-again" -- -b $b -s 128 -o 256 --iters 2
  done
  kb b1 -- -b 1 -s 128 -o 512 --iters 2
  wait
  echo "test_gpu_ops: $(grep -E 'passed' "$out/test_gpu_ops.log" | tail -1) $(tail -1 "$out/test_gpu_ops.log")"; grep -E "FAIL" "$out/test_gpu_ops.log" | head
  grep -E "^\[ (RUN |FAIL| OK )" "$out/test_gpu_ops.log" | tail -3
fi
if has s28; then # ninth session: kernel times inside the decode graphs (CUPTI), tests of the merged skprof
  for b in 1 32 64; do
    o=$([ $b = 1 ] && echo 256 || echo 128)
    KILN_TRACE_OUT=/tmp/trace_b$b.csv LD_PRELOAD="$here/lib/libkiln_cupti_trace.so" timeout 150 "$here/bin/kiln" bench \
      --model llama3-8b --load-format dummy -b $b -s 128 -o $o --iters 1 > /tmp/trace_b$b.log 2>&1
    echo "== trace -b $b rc=$? ($(grep -E 'output tokens/s|mean decode step|full-batch' /tmp/trace_b$b.log | tr -s ' ' | tr '\n' ';'))"
    grep cupti_trace /tmp/trace_b$b.log
    python3 "$here/bench/trace_summary.py" /tmp/trace_b$b.csv --top 22 | cut -c1-150 | tee "$out/trace_b$b.txt"
  done
  if [ "${S28_TESTS:-1}" = 1 ]; then
    ( timeout 300 "$here/bin/test_gpu_ops" > /tmp/tgo.log 2>&1; echo "rc=$?" >> /tmp/tgo.log ) &
    if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
      ( CUDA_VISIBLE_DEVICES=1 timeout 300 "$here/bin/test_gpu_engine" > /tmp/tge.log 2>&1; echo "rc=$?" >> /tmp/tge.log ) &
    fi
    wait
    echo "test_gpu_ops: $(grep -E 'passed' /tmp/tgo.log | tail -1) $(tail -1 /tmp/tgo.log)"; grep FAIL /tmp/tgo.log | head
    [ -f /tmp/tge.log ] && { echo "test_gpu_engine: $(grep -E 'passed' /tmp/tge.log | tail -1) $(tail -1 /tmp/tge.log)"; grep -E "FAIL" /tmp/tge.log | head; }
    if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then gt test_gpu_tp 240 "FAIL|passed" -- test_gpu_tp; fi
  fi
  kb b32-untraced -- -b 32 -s 128 -o 128 --iters 1
fi
if has s27; then # gemm_sk's own timing records
  # the prepared tests and this branch's refactored ones, by case in parallel, then test_gpu_engine
  ops_by_case test_gemm_sk test_silu_gemm_sk test_gemm_tc
  if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then gt test_gpu_tp 240 "FAIL|passed" -- test_gpu_tp; fi
  timeout 100 "$here/bin/bench_kernels" gemm_sk_silu > "$out/bench_sk27_silu.log" 2>&1; echo "bench_kernels gemm_sk_silu rc=$?"
  grep -E "ceilings|gate_up" "$out/bench_sk27_silu.log" | sed -E 's/ +/ /g; s/ \(weight bytes\)//; s/ target 85%.*//'
  for m in 0 1; do for b in 8 16 32; do
    kb "b$b-silu$m" KILN_SKGEMM_SILU=$m KILN_SKGEMM_MAX_M=32 -- -b $b -s 128 -o 256 --iters 2
  done; done
  timeout 150 "$here/bin/bench_kernels" gemm_sk_prof > "$out/bench_sk27.log" 2>&1; echo "bench_kernels gemm_sk_prof rc=$?"
  grep -E "ceilings|gemm_sk prof" "$out/bench_sk27.log"
  timeout 90 "$here/bin/bench_kernels" gemm_mid > "$out/bench_gemm_mid.log" 2>&1; echo "bench_kernels gemm_mid rc=$?"
  grep -E "ceilings|^gemm " "$out/bench_gemm_mid.log" | sed -E 's/ +/ /g'
  # where a decode step goes at -b 32 and -b 256 (eager, an event per op)
  for b in 32 256; do
    timeout 120 "$here/bin/kiln" bench --model llama3-8b --load-format dummy -b $b -s 128 -o 32 --iters 1 --profile \
      > "$out/prof_b$b.log" 2>&1; echo "profile -b $b rc=$?"; tail -40 "$out/prof_b$b.log" | cut -c1-140
  done
fi
if has s26; then # eighth session: gemm_sk with the occupancy-checked split
  gt test_gpu_engine 200 "FAIL|passed" -- test_gpu_engine
  timeout 150 "$here/bin/bench_kernels" gemm_sk_quick > "$out/bench_sk26.log" 2>&1; echo "bench_kernels gemm_sk_quick rc=$?"
  grep -E "ceilings|M=(16|32) " "$out/bench_sk26.log" | sed -E 's/ +/ /g; s/ \(weight bytes\)//; s/ of copy target 85%//; s/ (ok|MISS)$//' | cut -c1-100
  for m in 32 16; do kb "b32-sk$m" KILN_SKGEMM_MAX_M=$m -- -b 32 -s 128 -o 256 --iters 2; done
  for m in 16 0; do kb "b16-sk$m" KILN_SKGEMM_MAX_M=$m -- -b 16 -s 128 -o 256 --iters 2; done
fi
if has s25; then # eighth session, last call
  t0=$(date +%s)
  for f in gemm_sk kv_write test_rope; do
    ( KT_VERBOSE=1 timeout 240 "$here/bin/test_gpu_ops" $f > "$out/ops_$f.log" 2>&1; echo "rc=$?" >> "$out/ops_$f.log" ) &
  done
  ( timeout 300 "$here/bin/test_gpu_ops" > "$out/test_gpu_ops_full.log" 2>&1; echo "rc=$?" >> "$out/test_gpu_ops_full.log" ) &
  ( KT_VERBOSE=1 timeout 240 "$here/bin/test_gpu_tp" > "$out/test_gpu_tp.log" 2>&1; echo "rc=$?" >> "$out/test_gpu_tp.log" ) &
  wait
  echo "tests in parallel: $(( $(date +%s) - t0 )) s"
  for f in ops_gemm_sk ops_kv_write ops_test_rope test_gpu_ops_full test_gpu_tp; do
    printf "  %-22s %s %s\n" "$f" "$(grep -E 'passed' "$out/$f.log" | tail -1)" "$(tail -1 "$out/$f.log")"
    grep -E "FAIL" "$out/$f.log" | head -4
  done
  gt test_gpu_engine 200 "FAIL|passed" -- test_gpu_engine
  gt test_gpu_engine_wide 200 "FAIL|passed" KILN_ELEM_WIDE_MIN=1 -- test_gpu_engine
  timeout 120 "$here/bin/bench_kernels" kv_write > "$out/bench_s25_kv.log" 2>&1
  grep -E "ceilings|4096" "$out/bench_s25_kv.log" | sed -E 's/ +/ /g' | cut -c1-110 | head -16
  for b in 8 16; do for m in 16 0; do kb "b$b-sk$m" KILN_SKGEMM_MAX_M=$m -- -b $b -s 128 -o 256 --iters 2; done; done
  for tile in 1 0; do kb "p8x2048-tile$tile" KILN_KV_TILE=$tile -- -b 8 -s 2048 -o 4 --iters 2; done
  for tile in 1 0; do kb "b256-tile$tile" KILN_KV_TILE=$tile -- -b 256 -s 128 -o 64 --iters 1; done
  kb "b1" -- -b 1 -s 128 -o 512 --iters 2
  kb "b32" -- -b 32 -s 128 -o 256 --iters 2
  for m in 16 0; do kb "tp2-b8-sk$m" KILN_SKGEMM_MAX_M=$m -- --tp 2 -b 8 -s 128 -o 256 --iters 2; done
fi
if has s24; then # branch sk: the cluster split-K GEMM
  ops_by_case gemm_sk
  gt test_gpu_engine_sk 200 "FAIL|passed|logits rel err" KILN_SKGEMM_MAX_M=64 -- test_gpu_engine
  timeout 240 "$here/bin/bench_kernels" gemm_sk > "$out/bench_sk.log" 2>&1; echo "bench_kernels gemm_sk rc=$?"
  grep -E "ceilings" "$out/bench_sk.log" | head -2
  python3 - "$out/bench_sk.log" <<'PY'
import re, sys
rows, cols = {}, []
for l in open(sys.argv[1]):
    m = re.match(r"(gemm_sk .*?|gemm) \(weight bytes\) +(\w+) M=(\d+) .*? ([\d.]+)% of copy", l)
    if not m: continue
    name = m.group(1).replace("gemm_sk ", "") if m.group(1) != "gemm" else "cublasLt"
    if name not in cols: cols.append(name)
    rows.setdefault((m.group(2), int(m.group(3))), {})[name] = m.group(4)
print("%-12s" % "shape M" + "".join("%9s" % c[:9] for c in cols))
for k, v in rows.items():
    print("%-12s" % ("%s %d" % k) + "".join("%9s" % v.get(c, "-") for c in cols))
PY
  for r in a b; do for m in 0 64; do kb "b32-sk$m-$r" KILN_SKGEMM_MAX_M=$m -- -b 32 -s 128 -o 256 --iters 2; done; done
  for b in 8 16 64; do for m in 0 64; do kb "b$b-sk$m" KILN_SKGEMM_MAX_M=$m -- -b $b -s 128 -o 256 --iters 2; done; done
fi
if has s21; then # branch fp8cvt (nvidia-h200): the hardware f32 -> FP8 conversion; the tensor-core GEMM's rows
  ops_by_case fp8_cast kv_write attention_fp8
  timeout 120 "$here/bin/bench_kernels" elementwise > "$out/bench_s21_elem.log" 2>&1
  grep -E "ceilings|4096" "$out/bench_s21_elem.log" | grep -v tiling | sed -E 's/ +/ /g' | cut -c1-110 | head -24
  timeout 150 "$here/bin/bench_kernels" gemm > "$out/bench_s21_gemm.log" 2>&1
  grep -E "ceilings|M=(8|16|32) " "$out/bench_s21_gemm.log" | sed -E 's/ +/ /g' | cut -c1-120 | head -60
  for kv in auto fp8_e4m3; do
    kb "b32-kv-$kv" -- -b 32 -s 128 -o 256 --iters 2 --kv-cache-dtype $kv
    kb "b256-kv-$kv" -- -b 256 -s 128 -o 256 --iters 2 --kv-cache-dtype $kv
  done
fi
if has s23; then # branch kvw (nvidia-h200): the KV-cache write in tiles of 16 tokens x one KV head, a warp each
  t0=$(date +%s)
  for f in kv_write test_rope; do
    ( KT_VERBOSE=1 timeout 200 "$here/bin/test_gpu_ops" $f > "$out/ops_$f.log" 2>&1; echo "rc=$?" >> "$out/ops_$f.log" ) &
  done
  ( timeout 230 "$here/bin/test_gpu_ops" > "$out/test_gpu_ops_full.log" 2>&1; echo "rc=$?" >> "$out/test_gpu_ops_full.log" ) &
  wait
  echo "test_gpu_ops (kv_write, test_rope, all cases in parallel) $(( $(date +%s) - t0 )) s:"
  for f in ops_kv_write ops_test_rope test_gpu_ops_full; do
    printf "  %-22s %s %s\n" "$f" "$(grep -E 'passed' "$out/$f.log" | tail -1)" "$(tail -1 "$out/$f.log")"
    grep -E "FAIL" "$out/$f.log" | head -4
  done
  timeout 120 "$here/bin/bench_kernels" kv_write > "$out/bench_s23_kv.log" 2>&1
  grep -E "ceilings|4096" "$out/bench_s23_kv.log" | sed -E 's/ +/ /g' | cut -c1-110 | head -16
  for tile in 1 0; do
    kb "b256-tile$tile" KILN_KV_TILE=$tile -- -b 256 -s 128 -o 64 --iters 1
    kb "p8x2048-tile$tile" KILN_KV_TILE=$tile -- -b 8 -s 2048 -o 4 --iters 2
  done
  if [ "${S23_ENGINE:-0}" = 1 ]; then
    gt test_gpu_engine_wide 200 "FAIL|passed|logits rel err" KILN_ELEM_WIDE_MIN=1 -- test_gpu_engine
  fi
fi
if has s15; then # the logits all-gather over the push exchange (branch ag)
  t0=$(date +%s); KT_VERBOSE=1 timeout 120 "$here/bin/test_gpu_ops" test_all_reduce_one_rank > "$out/ops_ar1.log" 2>&1
  echo "test_gpu_ops test_all_reduce_one_rank rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" "$out/ops_ar1.log" | head -4
  t0=$(date +%s); KT_VERBOSE=1 timeout 240 "$here/bin/test_gpu_tp" > "$out/test_gpu_tp.log" 2>&1
  echo "test_gpu_tp rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed|ranks, rank" "$out/test_gpu_tp.log" | head -12
  kb "tp1-b1" -- --tp 1 -b 1 -s 128 -o 512 --iters 2
  for r in a b; do for ag in 1 0; do
    kb "tp2-b1-gather$ag-$r" KILN_P2P_GATHER=$ag -- --tp 2 -b 1 -s 128 -o 512 --iters 2
  done; done
  for ag in 1 0; do kb "tp2-b4-gather$ag" KILN_P2P_GATHER=$ag -- --tp 2 -b 4 -s 128 -o 256 --iters 2; done
fi
if has s14; then # sixth session: decode attention's split-K partition at batch 1
  gt ops_test_attention_decode 120 "FAIL|passed" -- test_gpu_ops test_attention_decode
  for c in "1:0" "1:128" "1:64" "2:0" "2:64"; do
    tp=${c%%:*}; P=${c#*:}
    kb "tp$tp-b1-P$P" KILN_DECODE_PARTITION=$P -- --tp $tp -b 1 -s 128 -o 512 --iters 1
  done
fi
if has s13; then # sixth session: where the batch-1 step goes at TP 1 and TP 2 (eager, an event per op)
  for tp in 1 2; do
    timeout 150 "$here/bin/kiln" bench --model llama3-8b --load-format dummy --tp $tp -b 1 -s 128 -o 64 --iters 1 --profile \
      > "$out/profile_tp${tp}_b1.log" 2>&1
    echo "== profile --tp $tp -b 1"; grep -E "profile|  [a-z_0-9]+ .*per step|mean decode step" "$out/profile_tp${tp}_b1.log" | sed 's/kiln: info: //' | head -40
  done
fi
if has s12; then # sixth session (nvidia-h200-x2): GEMV tiling by weight shape
  gt ops_test_gemv 200 "FAIL|passed" -- test_gpu_ops test_gemv
  for rule in 0 3 4 1 2 0 3; do for tp in 1 2; do
    kb "tp$tp-b1-rule$rule" KILN_GEMV_RULE=$rule -- --tp $tp -b 1 -s 128 -o 512 --iters 2
  done; done
  gt test_gpu_engine 200 "FAIL|passed" KILN_GEMV_RULE=3 -- test_gpu_engine
  gt test_gpu_tp 200 "FAIL|passed" KILN_GEMV_RULE=3 -- test_gpu_tp
fi
if has s11; then # sixth session, last call (nvidia-h200-x2)
  if [ "${S11_TESTS:-1}" = 1 ]; then
    t0=$(date +%s)
    ( KT_VERBOSE=1 CUDA_VISIBLE_DEVICES=0 timeout 400 "$here/bin/test_gpu_ops" > "$out/test_gpu_ops.log" 2>&1; echo "rc=$?" >> "$out/test_gpu_ops.log" ) &
    KT_VERBOSE=1 timeout 240 "$here/bin/test_gpu_tp" > "$out/test_gpu_tp.log" 2>&1; echo "test_gpu_tp rc=$? ($(( $(date +%s) - t0 )) s)"
    grep -E "FAIL|passed|ranks, rank" "$out/test_gpu_tp.log" | head -12
    wait; echo "test_gpu_ops $(tail -1 "$out/test_gpu_ops.log") ($(( $(date +%s) - t0 )) s)"
    grep -E "FAIL|passed" "$out/test_gpu_ops.log" | head -12
    t0=$(date +%s); timeout 200 "$here/bin/test_gpu_engine" > "$out/test_gpu_engine.log" 2>&1; echo "test_gpu_engine rc=$? ($(( $(date +%s) - t0 )) s)"
    grep -E "FAIL|passed|logits rel err" "$out/test_gpu_engine.log" | head -24
  fi
  if [ "${S11_ROWS:-1}" = 1 ]; then
    timeout 150 "$here/bin/bench_kernels" gemm > "$out/bench_s11_gemm.log" 2>&1
    grep -E "ceilings|M=1 .*gemv rows 1 unroll 4|M=1 .*ksplit 2|silu" "$out/bench_s11_gemm.log" | grep -E "M=1 |ceilings" | sed -E 's/ +/ /g' | cut -c1-120 | head -40
    timeout 120 "$here/bin/bench_kernels" elementwise > "$out/bench_s11_elem.log" 2>&1
    grep -E "4096" "$out/bench_s11_elem.log" | grep -v tiling | sed -E 's/ +/ /g' | cut -c1-110 | head -24
  fi
  if [ "${S11_KB:-1}" = 1 ]; then
    for r in a b; do for ks in 1 2; do for tp in 1 2; do
      kb "tp$tp-b1-ks$ks-$r" KILN_GEMV_KSPLIT=$ks -- --tp $tp -b 1 -s 128 -o 512 --iters 2
    done; done; done
    for tp in 1 2; do kb "tp$tp-b32" -- --tp $tp -b 32 -s 128 -o 256 --iters 2; done
    kb "tp1-b256" -- --tp 1 -b 256 -s 128 -o 256 --iters 2
  fi
fi
if has s10; then # sixth session (nvidia-h200-x2): the GLU GEMV's K split at TP 2
  for f in test_gemv test_all_reduce_one_rank; do gt ops_$f 200 "FAIL|passed" -- test_gpu_ops $f; done
  gt test_gpu_tp 240 "FAIL|passed|ranks, rank" -- test_gpu_tp
  timeout 150 "$here/bin/bench_kernels" gemm > "$out/bench_s10_gemm.log" 2>&1
  grep -E "ceilings|silu" "$out/bench_s10_gemm.log" | sed -E 's/ +/ /g' | cut -c1-120
  for c in "silu0:KILN_GEMV_SILU=0" "k1u4:KILN_GEMV_SILU=1 KILN_GEMV_SILU_KSPLIT=1 KILN_GEMV_SILU_UNROLL=4" \
           "k2u4:KILN_GEMV_SILU=1 KILN_GEMV_SILU_KSPLIT=2 KILN_GEMV_SILU_UNROLL=4" \
           "k2u2:KILN_GEMV_SILU=1 KILN_GEMV_SILU_KSPLIT=2 KILN_GEMV_SILU_UNROLL=2" \
           "k1u2:KILN_GEMV_SILU=1 KILN_GEMV_SILU_KSPLIT=1 KILN_GEMV_SILU_UNROLL=2"; do
    tag=${c%%:*}; read -ra envs <<< "${c#*:}"
    kb "tp2-b1-$tag" "${envs[@]}" -- --tp 2 -b 1 -s 128 -o 512 --iters 2
    [ "${S10_TP1:-1}" = 1 ] && kb "tp1-b1-$tag" "${envs[@]}" -- --tp 1 -b 1 -s 128 -o 512 --iters 2
  done
fi
if has s9; then # sixth session (nvidia-h200-x2): the push all-reduce
  if [ "${S9_TESTS:-1}" = 1 ]; then
    for f in test_all_reduce_one_rank test_gemv; do gt ops_$f 200 "FAIL|passed" -- test_gpu_ops $f; done
    gt test_gpu_tp 240 "FAIL|passed|ranks, rank|vs NCCL" -- test_gpu_tp
  fi
  kb "tp1-b1" -- --tp 1 -b 1 -s 128 -o 512 --iters 2
  for r in a b; do for ps in 0 1; do
    kb "tp2-b1-push$ps-$r" KILN_AR_PUSH=$ps -- --tp 2 -b 1 -s 128 -o 512 --iters 2
  done; done
  for ps in 0 1; do kb "tp2-b32-push$ps" KILN_AR_PUSH=$ps -- --tp 2 -b 32 -s 128 -o 256 --iters 2; done
  kb "tp1-b32" -- --tp 1 -b 32 -s 128 -o 256 --iters 2
fi
if has s8; then # sixth session (nvidia-h200-x2): glu + elem3 on one tree
  if [ "${S8_OPS:-1}" = 1 ]; then
    ops_by_case ${S8_CASES:-test_gemv test_rmsnorm test_rope kv_write test_glu_add_gather_cast}
    t0=$(date +%s); timeout 150 "$here/bin/test_gpu_tp" > "$out/test_gpu_tp.log" 2>&1
    echo "test_gpu_tp rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" "$out/test_gpu_tp.log" | head -8
  fi
  if [ "${S8_ROWS:-1}" = 1 ]; then
    timeout 150 "$here/bin/bench_kernels" gemm > "$out/bench_s8_gemm.log" 2>&1
    grep -E "ceilings|silu" "$out/bench_s8_gemm.log" | sed -E 's/ +/ /g' | cut -c1-110
    timeout 120 "$here/bin/bench_kernels" elementwise > "$out/bench_s8_elem.log" 2>&1
    grep -E "4096|wide" "$out/bench_s8_elem.log" | grep -v tiling | sed -E 's/ +/ /g' | cut -c1-110 | head -24
  fi
  if [ "${S8_KB:-1}" = 1 ]; then
    for tp in 1 2; do for r in a b; do for sl in 0 1; do
      kb "tp$tp-b1-silu$sl-$r" KILN_GEMV_SILU=$sl -- --tp $tp -b 1 -s 128 -o 512 --iters 2
    done; done; done
    for w in def 0; do
      envs=(KILN_GEMV_SILU=0); [ $w = def ] || envs+=(KILN_ELEM_WIDE_MIN=$w)
      kb "b256-w$w" "${envs[@]}" -- -b 256 -s 128 -o 256 --iters 2
      kb "p8x2048-w$w" "${envs[@]}" -- -b 8 -s 2048 -o 8 --iters 2
    done
  fi
fi
if has elem3; then # the elementwise kernels of rmsnorm.cu / rope_kv.cu below KILN_ELEM_WIDE_MIN rows, the wide ones from it
  [ "${ELEM3_OPS:-1}" = 1 ] && ops_by_case test_rmsnorm test_rope kv_write
  if [ "${ELEM3_FULL:-1}" = 1 ]; then
    t0=$(date +%s)
    timeout 300 "$here/bin/test_gpu_ops" > "$out/test_gpu_ops_full.log" 2>&1
    echo "test_gpu_ops (all cases) rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" "$out/test_gpu_ops_full.log" | head -12
  fi
  if [ "${ELEM3_BENCH:-1}" = 1 ]; then
    timeout 120 "$here/bin/bench_kernels" elementwise > "$out/bench_elem3.log" 2>&1
    timeout 150 "$here/bin/bench_kernels" decode-shape >> "$out/bench_elem3.log" 2>&1
    grep -E "ceilings|copy|rmsnorm|rope|kv_write|silu" "$out/bench_elem3.log" | sed -E 's/ +/ /g' | cut -c1-110
  fi
  if [ "${ELEM3_KB:-1}" = 1 ]; then
    for w in def 0; do
      envs=(); [ $w = def ] || envs=(KILN_ELEM_WIDE_MIN=$w)
      kb "b1-w$w" "${envs[@]}" -- -b 1 -s 128 -o 512 --iters 2
      kb "b32-w$w" "${envs[@]}" -- -b 32 -s 128 -o 256 --iters 2
      kb "b256-w$w" "${envs[@]}" -- -b 256 -s 128 -o 256 --iters 2
      kb "p8x2048-w$w" "${envs[@]}" -- -b 8 -s 2048 -o 8 --iters 2
    done
  fi
fi
if has arab; then # the one-shot all-reduce over peer memory against NCCL's, same call
  for b in 1 32; do for ar in tp1 1 0; do
    o=256; [ $b = 1 ] && o=512
    tp=2; [ $ar = tp1 ] && tp=1
    KILN_CUSTOM_ALLREDUCE=${ar/tp1/1} timeout 180 "$here/bin/kiln" bench --model llama3-8b --load-format dummy --tp $tp \
      -b $b -s 128 -o $o --iters 2 --json 2>>"$out/arab.err" | tail -1 > "$out/arab_${b}_${ar}.json"
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("tp %s custom all-reduce %s -b %s: %.1f tok/s, step %.3f ms" % (sys.argv[2], sys.argv[3], sys.argv[4], j["output_tok_s"], j["decode_step_ms"]))' \
      "$out/arab_${b}_${ar}.json" $tp $ar $b || tail -3 "$out/arab.err"
  done; done
fi
if has profile; then # where a decode step's time goes (eager, an event per op)
  for b in 1 32; do
    timeout 120 "$here/bin/kiln" bench --model llama3-8b --load-format dummy -b $b -s 128 -o 64 --iters 1 --profile \
      > "$out/profile_b$b.log" 2>&1
    echo "== profile -b $b"; grep -E "profile|  [a-z_]+ .*per step|mean decode step" "$out/profile_b$b.log" | sed 's/kiln: info: //' | head -40
  done
fi
if has spec; then   # speculative decoding: verification cost, self-draft, n-gram on a copy-heavy workload
  bash "$here/bench/spec_bench.sh" "$here/bin/kiln" 2>&1 | tee "$out/spec_bench.log"
fi
if has speccopy; then # the n-gram and self-draft targets on the 8B-shaped model that copies
  SPEC_BENCH_ONLY="copy1-plain copy1-ngram4 copy1-self4 copy16-plain copy16-ngram4 copy16-self4" \
    bash "$here/bench/spec_bench.sh" "$here/bin/kiln" 2>&1 | grep -vE "failed or missing|^\{" | tail -12
fi
if has serve; then  # HTTP serving of -b 256 -s 128 -o 256 against the offline kiln bench of the same workload
  kiln="$here/bin/kiln"; m="--model llama3-8b --load-format dummy"
  "$kiln" bench $m -b 256 -s 128 -o 256 --iters 1 --json 2>"$out/serve_offline.err" | tail -1 | tee "$out/serve_offline.json"
  off=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["output_tok_s"])' "$out/serve_offline.json")
  "$kiln" serve $m --device cuda --port 8011 --max-num-seqs 256 >"$out/serve.log" 2>&1 &
  spid=$!
  for i in $(seq 180); do
    python3 -c 'import urllib.request,sys; urllib.request.urlopen("http://127.0.0.1:8011/health", timeout=1)' 2>/dev/null && break
    sleep 1
  done
  for b in 256 32; do
    python3 "$here/bench/serve_load.py" --url http://127.0.0.1:8011 -b $b -s 128 -o 256 \
      $([ $b = 256 ] && echo --offline-tok-s "$off") 2>&1 | tee -a "$out/serve_load.log"
  done
  kill -TERM $spid; wait $spid; echo "kiln serve exit $?"
  tail -5 "$out/serve.log"
fi
exit $rc
REMOTE
chmod +x "$out/remote.sh"
du -sh "$out"
