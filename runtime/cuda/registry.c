/*
 * registry.c -- the one table of CUDA kernels: registry name, source file
 * in kernel_src/, extern "C" entry point, argument signature and the
 * specialization defines each takes. Also define-string validation and
 * signature parsing. Has no CUDA dependency (nocuda builds include it too).
 *
 * Ownership: static data. Thread-safety: read-only.
 */
#include "kiln_rt.h"

#include <stdio.h>
#include <stdlib.h>

#define ACT3 "bf16|fp16|fp32"
#define ACT2 "bf16|fp16"
#define KVT "bf16|fp16|fp8_e5m2|fp8_e4m3"
#define CASTT "bf16|fp16|fp32|fp8_e5m2|fp8_e4m3"
/* KV: the cache's dtype, ACT or FP8 (kernel_src/attn_common.cuh) */
#define ATTN_PARAMS {{"ACT", ACT2}, {"HEAD_DIM", "*"}, {"BLOCK_SIZE", "*"}, {"GROUP", "1|2|4|8|16"}, {"KV", KVT}}
#define ATTN_EX                                                                                               \
    "ACT=bf16 HEAD_DIM=128 BLOCK_SIZE=16 GROUP=4 KV=bf16;ACT=fp16 HEAD_DIM=64 BLOCK_SIZE=16 GROUP=1 KV=fp16;"   \
    "ACT=bf16 HEAD_DIM=72 BLOCK_SIZE=32 GROUP=8 KV=bf16;ACT=bf16 HEAD_DIM=128 BLOCK_SIZE=16 GROUP=4 KV=fp8_e4m3;" \
    "ACT=bf16 HEAD_DIM=128 BLOCK_SIZE=16 GROUP=4 KV=fp8_e5m2;ACT=fp16 HEAD_DIM=64 BLOCK_SIZE=32 GROUP=1 KV=fp8_e4m3;" \
    "ACT=bf16 HEAD_DIM=16 BLOCK_SIZE=16 GROUP=2 KV=fp8_e5m2"

/* the wgmma prefill kernel: 16-bit caches, head dims 64 / 128 (the others compile a trapping body) */
#define ATTN_WG_EX                                                                                            \
    "ACT=bf16 HEAD_DIM=128 BLOCK_SIZE=16 GROUP=4 KV=bf16;ACT=fp16 HEAD_DIM=64 BLOCK_SIZE=16 GROUP=1 KV=fp16;"   \
    "ACT=bf16 HEAD_DIM=64 BLOCK_SIZE=32 GROUP=8 KV=bf16;ACT=fp16 HEAD_DIM=128 BLOCK_SIZE=8 GROUP=16 KV=fp16;"   \
    "ACT=bf16 HEAD_DIM=72 BLOCK_SIZE=32 GROUP=8 KV=bf16"

#define GEMM_TC_EX                                                                                              \
    "ACT=bf16 OUT=bf16 MAXM=32 WARPS=8 WK=4 RT=2 STAGES=2;ACT=bf16 OUT=fp32 MAXM=64 WARPS=8 WK=1 RT=1 STAGES=3;"  \
    "ACT=fp16 OUT=fp16 MAXM=8 WARPS=4 WK=1 RT=4 STAGES=1;ACT=fp16 OUT=fp32 MAXM=16 WARPS=8 WK=2 RT=2 STAGES=2;"   \
    "ACT=bf16 OUT=bf16 MAXM=64 WARPS=4 WK=2 RT=1 STAGES=1;ACT=bf16 OUT=bf16 MAXM=32 WARPS=4 WK=2 RT=2 STAGES=2;"   \
    "ACT=bf16 OUT=bf16 MAXM=16 WARPS=8 WK=1 RT=4 STAGES=1"

#define GEMM_SK_EX                                                                                              \
    "ACT=bf16 OUT=bf16 MAXM=32 WARPS=4 RT=2 STAGES=4 CL=1 GLU=0;ACT=bf16 OUT=fp32 MAXM=8 WARPS=8 RT=1 STAGES=6 CL=1 GLU=0;"      \
    "ACT=fp16 OUT=fp16 MAXM=16 WARPS=4 RT=4 STAGES=2 CL=1 GLU=0;ACT=bf16 OUT=bf16 MAXM=64 WARPS=4 RT=1 STAGES=3 CL=1 GLU=0;"     \
    "ACT=bf16 OUT=bf16 MAXM=32 WARPS=4 RT=2 STAGES=4 CL=4 GLU=0;ACT=fp16 OUT=fp32 MAXM=16 WARPS=8 RT=2 STAGES=3 CL=3 GLU=0;"     \
    "ACT=bf16 OUT=bf16 MAXM=16 WARPS=4 RT=2 STAGES=4 CL=1 GLU=1;ACT=fp16 OUT=fp16 MAXM=32 WARPS=4 RT=2 STAGES=3 CL=4 GLU=1"

#define GEMM_SK_WG_EX                                                                                           \
    "ACT=bf16 OUT=bf16 MAXM=32 WARPS=4 RT=2 STAGES=3 CL=4 GLU=0;ACT=bf16 OUT=fp32 MAXM=8 WARPS=4 RT=1 STAGES=6 CL=1 GLU=0;"      \
    "ACT=fp16 OUT=fp16 MAXM=16 WARPS=4 RT=4 STAGES=2 CL=1 GLU=0;ACT=bf16 OUT=bf16 MAXM=64 WARPS=4 RT=1 STAGES=3 CL=2 GLU=0;"     \
    "ACT=bf16 OUT=bf16 MAXM=32 WARPS=4 RT=2 STAGES=4 CL=4 GLU=1"

/* a parameter's third field (dflt) is left out where a spec must give it */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const kiln_jit_kernel_def registry[] = {
    {"embed", "kernel_src/embed.cu", "kiln_embed", "ptr,ptr,i32,ptr,i64,i32,i64",
     {{"ACT", ACT3}, {"W", ACT3}}, "ACT=bf16 W=bf16;ACT=fp16 W=fp16;ACT=fp32 W=bf16"},
    {"gather_rows", "kernel_src/embed.cu", "kiln_gather_rows", "ptr,ptr,ptr,i32,i32", {{"ACT", ACT3}},
     "ACT=bf16;ACT=fp32"},
    {"gather_last", "kernel_src/embed.cu", "kiln_gather_last", "ptr,ptr,ptr,i32,i32", {{"ACT", ACT3}},
     "ACT=bf16;ACT=fp32"},
    {"step_feed", "kernel_src/embed.cu", "kiln_step_feed", "ptr,ptr,i64,i64,i64,i32,ptr", {{NULL, NULL}}, ""},
    {"cast", "kernel_src/embed.cu", "kiln_cast", "ptr,ptr,i64", {{"SRC", CASTT}, {"DST", CASTT}},
     "SRC=bf16 DST=fp32;SRC=fp32 DST=bf16;SRC=fp32 DST=fp16;SRC=fp32 DST=fp8_e4m3;SRC=fp32 DST=fp8_e5m2;"
     "SRC=fp8_e4m3 DST=fp32;SRC=fp8_e5m2 DST=fp32"},
    {"rmsnorm", "kernel_src/rmsnorm.cu", "kiln_rmsnorm", "ptr,ptr,ptr,i32,i32,f32", {{"ACT", ACT3}, {"W", ACT3}},
     "ACT=bf16 W=bf16;ACT=fp16 W=fp16;ACT=fp32 W=fp32"},
    {"add_rmsnorm", "kernel_src/rmsnorm.cu", "kiln_add_rmsnorm", "ptr,ptr,ptr,ptr,i32,i32,f32",
     {{"ACT", ACT3}, {"W", ACT3}}, "ACT=bf16 W=bf16;ACT=fp16 W=fp16;ACT=fp32 W=fp32"},
    /* the variants from $KILN_ELEM_WIDE_MIN rows / tokens up (prefill; engine/cuda/ops_gpu.c):
     * rmsnorm and add_rmsnorm above, then rope, kv_write and rope_kv_write below, with extra
     * launch arguments (rope_kv_write_wide: blocks of rope rows, KV heads per KV block) */
    {"rmsnorm_wide", "kernel_src/rmsnorm_wide.cu", "kiln_rmsnorm_wide", "ptr,ptr,ptr,i32,i32,f32",
     {{"ACT", ACT3}, {"W", ACT3}}, "ACT=bf16 W=bf16;ACT=fp16 W=fp16;ACT=fp32 W=fp32"},
    {"add_rmsnorm_wide", "kernel_src/rmsnorm_wide.cu", "kiln_add_rmsnorm_wide", "ptr,ptr,ptr,ptr,i32,i32,f32",
     {{"ACT", ACT3}, {"W", ACT3}}, "ACT=bf16 W=bf16;ACT=fp16 W=fp16;ACT=fp32 W=fp32"},
    {"silu_mul", "kernel_src/act.cu", "kiln_silu_mul", "ptr,ptr,i32,i32", {{"ACT", ACT3}}, "ACT=bf16;ACT=fp16"},
    {"gelu_mul", "kernel_src/act.cu", "kiln_gelu_mul", "ptr,ptr,i32,i32", {{"ACT", ACT3}}, "ACT=bf16;ACT=fp16"},
    {"add", "kernel_src/act.cu", "kiln_add", "ptr,ptr,ptr,i64", {{"ACT", ACT3}}, "ACT=bf16;ACT=fp16"},
    {"rope", "kernel_src/rope_kv.cu", "kiln_rope", "ptr,i64,ptr,i32,i32,i32,i32,i32,ptr,f32,ptr,i32,f32,f32,i32",
     {{"ACT", ACT3}, {"INTERLEAVED", "0|1"}}, "ACT=bf16 INTERLEAVED=0;ACT=fp16 INTERLEAVED=1"},
    {"kv_write", "kernel_src/rope_kv.cu", "kiln_kv_write", "ptr,ptr,ptr,ptr,i64,ptr,i32,i32,i32,i32,f32,f32,i32,ptr",
     {{"ACT", ACT3}, {"KV", KVT}},
     "ACT=bf16 KV=bf16;ACT=fp16 KV=fp16;ACT=bf16 KV=fp8_e5m2;ACT=bf16 KV=fp8_e4m3;ACT=fp16 KV=fp8_e4m3"},
    {"rope_kv_write", "kernel_src/rope_kv.cu", "kiln_rope_kv_write",
     "ptr,i64,ptr,i32,i32,i32,i32,i32,ptr,f32,ptr,i32,f32,f32,ptr,ptr,ptr,i32,f32,f32,i32,ptr",
     {{"ACT", ACT3}, {"KV", KVT}, {"INTERLEAVED", "0|1"}},
     "ACT=bf16 INTERLEAVED=0 KV=bf16;ACT=fp16 INTERLEAVED=1 KV=fp16;ACT=bf16 INTERLEAVED=0 KV=fp8_e5m2;"
     "ACT=bf16 INTERLEAVED=0 KV=fp8_e4m3"},
    /* decode-sized steps: a thread per vector item, no barrier (same file and defines: one compile) */
    {"rope_kv_write_dec", "kernel_src/rope_kv.cu", "kiln_rope_kv_write_dec",
     "ptr,i64,ptr,i32,i32,i32,i32,i32,ptr,f32,ptr,i32,f32,f32,ptr,ptr,ptr,i32,f32,f32,ptr",
     {{"ACT", ACT3}, {"KV", KVT}, {"INTERLEAVED", "0|1"}},
     "ACT=bf16 INTERLEAVED=0 KV=bf16;ACT=fp16 INTERLEAVED=1 KV=fp16;ACT=bf16 INTERLEAVED=0 KV=fp8_e5m2;"
     "ACT=bf16 INTERLEAVED=0 KV=fp8_e4m3"},
    {"rope_wide", "kernel_src/rope_kv_wide.cu", "kiln_rope_wide",
     "ptr,i64,ptr,i32,i32,i32,i32,i32,ptr,f32,ptr,i32,f32,f32,i32", {{"ACT", ACT3}, {"INTERLEAVED", "0|1"}},
     "ACT=bf16 INTERLEAVED=0;ACT=fp16 INTERLEAVED=1"},
    {"kv_write_wide", "kernel_src/rope_kv_wide.cu", "kiln_kv_write_wide",
     "ptr,ptr,ptr,ptr,i64,ptr,i32,i32,i32,i32,f32,f32,i32,ptr", {{"ACT", ACT3}, {"KV", KVT}},
     "ACT=bf16 KV=bf16;ACT=fp16 KV=fp16;ACT=bf16 KV=fp8_e5m2;ACT=bf16 KV=fp8_e4m3;ACT=fp16 KV=fp8_e4m3"},
    {"rope_kv_write_wide", "kernel_src/rope_kv_wide.cu", "kiln_rope_kv_write_wide",
     "ptr,i64,ptr,i32,i32,i32,i32,i32,ptr,f32,ptr,i32,f32,f32,ptr,ptr,ptr,i32,f32,f32,i32,ptr,i32,i32",
     {{"ACT", ACT3}, {"KV", KVT}, {"INTERLEAVED", "0|1"}},
     "ACT=bf16 INTERLEAVED=0 KV=bf16;ACT=fp16 INTERLEAVED=1 KV=fp16;ACT=bf16 INTERLEAVED=0 KV=fp8_e5m2;"
     "ACT=bf16 INTERLEAVED=0 KV=fp8_e4m3"},
    /* the tile variants of the two above (same file and defines, one compile; $KILN_KV_TILE):
     * no heads-per-block argument; the fused one takes its blocks of rope rows last */
    {"kv_write_tile", "kernel_src/rope_kv_wide.cu", "kiln_kv_write_tile",
     "ptr,ptr,ptr,ptr,i64,ptr,i32,i32,i32,i32,f32,f32,ptr", {{"ACT", ACT3}, {"KV", KVT}},
     "ACT=bf16 KV=bf16;ACT=fp16 KV=fp16;ACT=bf16 KV=fp8_e5m2;ACT=bf16 KV=fp8_e4m3;ACT=fp16 KV=fp8_e4m3;"
     "ACT=fp32 KV=bf16;ACT=fp32 KV=fp8_e4m3"},
    /* the plain KV write as a cp.async pipeline ($KILN_KV_TILE=2, the default; 16-bit rows and cache only: the
     * file's other specs compile it to a trap the host never launches) */
    {"kv_write_pipe", "kernel_src/rope_kv_wide.cu", "kiln_kv_write_pipe", "ptr,ptr,ptr,ptr,i64,ptr,i32,i32,i32,i32",
     {{"ACT", ACT3}, {"KV", KVT}}, "ACT=bf16 KV=bf16;ACT=fp16 KV=fp16;ACT=bf16 KV=fp16"},
    {"rope_kv_write_tile", "kernel_src/rope_kv_wide.cu", "kiln_rope_kv_write_tile",
     "ptr,i64,ptr,i32,i32,i32,i32,i32,ptr,f32,ptr,i32,f32,f32,ptr,ptr,ptr,i32,f32,f32,i32,ptr,i32",
     {{"ACT", ACT3}, {"KV", KVT}, {"INTERLEAVED", "0|1"}},
     "ACT=bf16 INTERLEAVED=0 KV=bf16;ACT=fp16 INTERLEAVED=1 KV=fp16;ACT=bf16 INTERLEAVED=0 KV=fp8_e5m2;"
     "ACT=bf16 INTERLEAVED=0 KV=fp8_e4m3;ACT=fp32 INTERLEAVED=0 KV=fp8_e4m3"},
    {"attn_decode", "kernel_src/attn_decode.cu", "kiln_attn_decode",
     "ptr,ptr,i64,ptr,ptr,ptr,ptr,ptr,i32,i32,i32,i32,f32,i32,i32,i32,ptr,ptr,ptr,ptr", ATTN_PARAMS, ATTN_EX},
    /* the same with the step's rope + KV write in front (same file and defines, one compile; 16-bit caches,
     * head dims multiple of 32, an FP8 specialization traps) */
    {"attn_decode_rope", "kernel_src/attn_decode.cu", "kiln_attn_decode_rope",
     "ptr,ptr,i64,ptr,ptr,ptr,ptr,ptr,i32,i32,i32,i32,f32,i32,i32,i32,ptr,ptr,ptr,ptr,ptr,f32,ptr", ATTN_PARAMS,
     ATTN_EX},
    {"attn_reduce", "kernel_src/attn_decode.cu", "kiln_attn_reduce", "ptr,ptr,ptr,ptr,ptr,i32,i32,i32",
     ATTN_PARAMS, ATTN_EX},
    /* the persistent-warp decode kernel for many short sequences (same file and defines, one compile;
     * 16-bit caches, an FP8 specialization traps) */
    {"attn_decode_pw", "kernel_src/attn_decode.cu", "kiln_attn_decode_pw",
     "ptr,ptr,i64,ptr,ptr,ptr,ptr,ptr,i32,i32,i32,i32,f32,i32", ATTN_PARAMS, ATTN_EX},
    /* ... with the step's rope + KV write in front (same file and defines; 16-bit caches, head dims multiple
     * of 64, GROUP == nq / nkv; other specializations trap) */
    {"attn_decode_pw_rope", "kernel_src/attn_decode.cu", "kiln_attn_decode_pw_rope",
     "ptr,ptr,i64,ptr,ptr,ptr,ptr,ptr,i32,i32,i32,i32,f32,i32,ptr,ptr,f32,ptr", ATTN_PARAMS, ATTN_EX},
    {"attn_prefill", "kernel_src/attn_prefill.cu", "kiln_attn_prefill",
     "ptr,ptr,i64,ptr,ptr,ptr,ptr,ptr,i32,i32,i32,i32,f32,i32,ptr", ATTN_PARAMS, ATTN_EX},
    /* the first prefill kernel (same file, one compile): FP8 caches, head dims
     * above 128, and $KILN_PREFILL_KERNEL=v1 */
    {"attn_prefill_v1", "kernel_src/attn_prefill.cu", "kiln_attn_prefill_v1",
     "ptr,ptr,i64,ptr,ptr,ptr,ptr,ptr,i32,i32,i32,i32,f32,i32,ptr", ATTN_PARAMS, ATTN_EX},
    /* the Hopper (wgmma, warp-specialized) prefill kernel: on sm_90 with a 16-bit cache and head dim 64 or
     * 128, $KILN_PREFILL_KERNEL=wg2 or by default for long contexts; compiled for sm_90a there
     * (kiln_jit_unit_arch), a trapping body elsewhere */
    {"attn_prefill_wg2", "kernel_src/attn_prefill_wg.cu", "kiln_attn_prefill_wg2",
     "ptr,ptr,i64,ptr,ptr,ptr,ptr,ptr,i32,i32,i32,i32,f32,i32,ptr", ATTN_PARAMS, ATTN_WG_EX},
    /* its persistent form (one block an SM walking the work items, longest query tiles first): the same
     * arguments, then the query tiles of the longest sequence (ceil(max_q_len / (128 / GROUP))) */
    {"attn_prefill_wg2p", "kernel_src/attn_prefill_wg.cu", "kiln_attn_prefill_wg2p",
     "ptr,ptr,i64,ptr,ptr,ptr,ptr,ptr,i32,i32,i32,i32,f32,i32,ptr,i32", ATTN_PARAMS, ATTN_WG_EX},
    {"sample_penalties", "kernel_src/sample.cu", "kiln_sample_penalties", "ptr,i32,ptr,ptr,ptr,ptr,ptr,ptr,ptr,ptr",
     {{NULL, NULL}}, ""},
    {"sample", "kernel_src/sample.cu", "kiln_sample", "ptr,ptr,ptr,i32,ptr,ptr", {{NULL, NULL}}, ""},
    /* greedy rows split over a thread-block cluster of CL blocks (CL > 1 needs sm_90: the host
     * launches kiln_sample before it; a trapping body elsewhere) */
    {"sample_argmax", "kernel_src/sample_argmax.cu", "kiln_sample_argmax", "ptr,ptr,ptr,i32", {{"CL", "1|2|4|8"}},
     "CL=8;CL=4;CL=2;CL=1"},
    /* greedy rows split into chunks of 4096 logits, a block each, the last to arrive merging (any GPU) */
    {"sample_argmax_split", "kernel_src/sample_argmax.cu", "kiln_sample_argmax_split", "ptr,ptr,ptr,i32,ptr,ptr",
     {{NULL, NULL}}, ""},
    /* one-shot all-reduce over peer memory (runtime/cuda/p2p.c): io, n, the ranks' buffers b0..b7, rank,
     * n_ranks, bytes per data half, timeout in ns */
    {"all_reduce", "kernel_src/allreduce.cu", "kiln_all_reduce", "ptr,i64,ptr,ptr,ptr,ptr,ptr,ptr,ptr,ptr,i32,i32,i64,i64",
     {{"ACT", ACT3}}, "ACT=bf16;ACT=fp16;ACT=fp32"},
    {"all_reduce_norm", "kernel_src/allreduce.cu", "kiln_all_reduce_add_rmsnorm",
     "ptr,ptr,ptr,ptr,i32,i32,f32,ptr,ptr,ptr,ptr,ptr,ptr,ptr,ptr,i32,i32,i64,i64", {{"ACT", ACT3}},
     "ACT=bf16;ACT=fp16;ACT=fp32"},
    {"all_reduce_push", "kernel_src/allreduce.cu", "kiln_all_reduce_push",
     "ptr,i64,ptr,ptr,ptr,ptr,ptr,ptr,ptr,ptr,i32,i32,i64,i64", {{"ACT", ACT3}}, "ACT=bf16;ACT=fp16;ACT=fp32"},
    {"all_reduce_push_norm", "kernel_src/allreduce.cu", "kiln_all_reduce_push_add_rmsnorm",
     "ptr,ptr,ptr,ptr,i32,i32,f32,ptr,ptr,ptr,ptr,ptr,ptr,ptr,ptr,i32,i32,i64,i64", {{"ACT", ACT3}},
     "ACT=bf16;ACT=fp16;ACT=fp32"},
    /* the batch-1 qkv GEMV with rope and the KV-cache write as its epilogue (engine/cuda/ops_gpu.c
     * kiln_gpu_gemm_rope_kv): out, x, w, bias, N, K, nq, nkv, pos, inv_freq, mscale, kcache, vcache, slots,
     * block size, and NIN's partial sums of squares, their count, eps (kernel_src/gemv.cu) */
    {"gemv_rope", "kernel_src/gemv.cu", "kiln_gemv_rope",
     "ptr,ptr,ptr,ptr,i32,i32,i32,i32,ptr,ptr,f32,ptr,ptr,ptr,i32,ptr,i32,f32",
     {{"ACT", ACT2}, {"UNROLL", "2|4|8"}, {"KSPLIT", "1|2|4"}, {"ROPE", "1"}, {"RR", "1|2"}, {"HD", "64|96|128|256"},
      {"KV", ACT2}, {"NIN", "0|1", "0"}},
     "ACT=bf16 UNROLL=4 KSPLIT=1 ROPE=1 RR=2 HD=128 KV=bf16 NIN=1;ACT=bf16 UNROLL=2 KSPLIT=2 ROPE=1 RR=2 HD=128 KV=bf16;ACT=fp16 UNROLL=4 KSPLIT=1 ROPE=1 RR=2 HD=64 KV=fp16;"
     "ACT=bf16 UNROLL=2 KSPLIT=2 ROPE=1 RR=1 HD=128 KV=bf16;ACT=fp16 UNROLL=4 KSPLIT=1 ROPE=1 RR=1 HD=64 KV=fp16;"
     "ACT=bf16 UNROLL=2 KSPLIT=4 ROPE=1 RR=1 HD=128 KV=bf16"},
    /* the row-parallel batch-1 GEMV with the push all-reduce + add + RMSNorm as its epilogue
     * (engine/cuda/ops_gpu.c kiln_gpu_gemm_ar_norm): io, x, w, N, K, residual, norm weight, norm out, eps,
     * the ranks' buffers b0..b7, rank, n_ranks, bytes per slot, timeout */
    {"gemv_ar_norm", "kernel_src/gemv.cu", "kiln_gemv_ar_norm",
     "ptr,ptr,ptr,i32,i32,ptr,ptr,ptr,f32,ptr,ptr,ptr,ptr,ptr,ptr,ptr,ptr,i32,i32,i64,i64",
     {{"ACT", ACT2}, {"ROWS", "1|2|4"}, {"UNROLL", "2|4|8"}, {"KSPLIT", "1|2"}, {"AR", "1"}},
     "ACT=bf16 ROWS=2 UNROLL=4 KSPLIT=2 AR=1;ACT=fp16 ROWS=1 UNROLL=2 KSPLIT=1 AR=1"},
    /* the push all-gather: send, out, rows, width, the buffers b0..b7, rank, n_ranks, bytes per slot, timeout */
    {"all_gather_push", "kernel_src/allreduce.cu", "kiln_all_gather_push",
     "ptr,ptr,i64,i64,ptr,ptr,ptr,ptr,ptr,ptr,ptr,ptr,i32,i32,i64,i64", {{"ACT", ACT3}}, "ACT=bf16;ACT=fp16;ACT=fp32"},
    /* the small-M GEMV (engine/cuda/ops_gpu.c kiln_gpu_gemm, kiln_gpu_gemm_silu, kiln_gpu_gemv_add_ss): out,
     * ldo, x, w, bias, M, N, K, then NOUT's residual, sums of squares and norm weight and NIN's partial sums
     * of squares, their count and eps (kernel_src/gemv.cu; NIN / NOUT may be left out: 0) */
    {"gemv", "kernel_src/gemv.cu", "kiln_gemv", "ptr,i64,ptr,ptr,ptr,i32,i32,i32,ptr,ptr,ptr,ptr,i32,f32",
     {{"ACT", ACT2}, {"OUT", ACT3}, {"MAXM", "1|2|4|8"}, {"ROWS", "1|2|4"}, {"UNROLL", "2|4|8"}, {"GLU", "0|1"},
      {"KSPLIT", "1|2|4"}, {"NIN", "0|1", "0"}, {"NOUT", "0|1", "0"}},
     "ACT=bf16 OUT=bf16 MAXM=1 ROWS=2 UNROLL=4 GLU=0 KSPLIT=2 NOUT=1;ACT=fp16 OUT=fp16 MAXM=1 ROWS=1 UNROLL=4 GLU=0 KSPLIT=1 NOUT=1;"
     "ACT=bf16 OUT=bf16 MAXM=1 ROWS=2 UNROLL=4 GLU=1 KSPLIT=1 NIN=1;ACT=bf16 OUT=bf16 MAXM=1 ROWS=1 UNROLL=4 GLU=0 KSPLIT=2 NIN=1;"
     "ACT=bf16 OUT=bf16 MAXM=1 ROWS=2 UNROLL=4 GLU=0 KSPLIT=1;ACT=bf16 OUT=bf16 MAXM=1 ROWS=2 UNROLL=4 GLU=0 KSPLIT=4;ACT=bf16 OUT=fp32 MAXM=8 ROWS=2 UNROLL=4 GLU=0 KSPLIT=1;"
     "ACT=fp16 OUT=fp16 MAXM=4 ROWS=4 UNROLL=4 GLU=0 KSPLIT=1;ACT=bf16 OUT=bf16 MAXM=2 ROWS=1 UNROLL=2 GLU=0 KSPLIT=1;"
     "ACT=bf16 OUT=bf16 MAXM=1 ROWS=2 UNROLL=4 GLU=1 KSPLIT=1;ACT=fp16 OUT=fp16 MAXM=8 ROWS=2 UNROLL=4 GLU=1 KSPLIT=1;"
     "ACT=bf16 OUT=bf16 MAXM=1 ROWS=2 UNROLL=2 GLU=1 KSPLIT=1;ACT=bf16 OUT=bf16 MAXM=1 ROWS=2 UNROLL=8 GLU=1 KSPLIT=1;"
     "ACT=bf16 OUT=bf16 MAXM=1 ROWS=2 UNROLL=2 GLU=1 KSPLIT=2;ACT=bf16 OUT=bf16 MAXM=1 ROWS=2 UNROLL=4 GLU=1 KSPLIT=2;"
     "ACT=bf16 OUT=bf16 MAXM=1 ROWS=2 UNROLL=8 GLU=1 KSPLIT=2;ACT=fp16 OUT=fp16 MAXM=8 ROWS=2 UNROLL=2 GLU=1 KSPLIT=2;"
     "ACT=fp16 OUT=fp16 MAXM=8 ROWS=2 UNROLL=4 GLU=1 KSPLIT=2;ACT=fp16 OUT=fp16 MAXM=8 ROWS=2 UNROLL=8 GLU=1 KSPLIT=2;"
     "ACT=fp16 OUT=fp16 MAXM=8 ROWS=2 UNROLL=8 GLU=1 KSPLIT=1;ACT=bf16 OUT=bf16 MAXM=1 ROWS=1 UNROLL=4 GLU=0 KSPLIT=2;"
     "ACT=bf16 OUT=fp32 MAXM=8 ROWS=2 UNROLL=4 GLU=0 KSPLIT=2;ACT=fp16 OUT=fp16 MAXM=4 ROWS=4 UNROLL=4 GLU=0 KSPLIT=2;"
     "ACT=bf16 OUT=bf16 MAXM=1 ROWS=1 UNROLL=2 GLU=0 KSPLIT=2;ACT=bf16 OUT=bf16 MAXM=1 ROWS=2 UNROLL=4 GLU=0 KSPLIT=2"},
    /* the tensor-core small-M GEMM and its split-K reduction (one module);
     * MAXM x RT x STAGES combinations that spill are not launched (engine/cuda/ops_gpu.c) */
    {"gemm_tc", "kernel_src/gemm_tc.cu", "kiln_gemm_tc", "ptr,i64,ptr,ptr,ptr,ptr,i32,i32,i32,i32,i32",
     {{"ACT", ACT2}, {"OUT", ACT3}, {"MAXM", "8|16|32|64"}, {"WARPS", "4|8"}, {"WK", "1|2|4"}, {"RT", "1|2|4"},
      {"STAGES", "1|2|3|4"}},
     GEMM_TC_EX},
    {"gemm_tc_reduce", "kernel_src/gemm_tc.cu", "kiln_gemm_tc_reduce", "ptr,i64,ptr,ptr,i32,i32,i32",
     {{"ACT", ACT2}, {"OUT", ACT3}}, GEMM_TC_EX},
    /* the cluster split-K tensor-core GEMM (CL > 1 needs sm_90: the host launches CL = 1 before) */
    {"gemm_sk", "kernel_src/gemm_sk.cu", "kiln_gemm_sk", "ptr,i64,ptr,ptr,ptr,i32,i32,i32,i32,ptr",
     {{"ACT", ACT2}, {"OUT", ACT3}, {"MAXM", "8|16|32|64"}, {"WARPS", "4|8"}, {"RT", "1|2|4"},
      {"STAGES", "2|3|4|5|6|7|8"}, {"CL", "1|2|3|4|5|6|7|8"}, {"GLU", "0|1"}},
     GEMM_SK_EX},
    /* gemm_sk with the qkv epilogue of rope + KV write (ROPE=1; engine/cuda/ops_gpu.c kiln_gpu_gemm_rope_kv_m):
     * gemm_sk's arguments (out, ldo, x, w, bias, M, N, K, chunks a slice, prof), then nq, nkv, pos, inv_freq,
     * mscale, kcache, vcache, slots, block size; a block is one head (RT = HD / (16 WARPS)) */
    {"gemm_sk_rope", "kernel_src/gemm_sk.cu", "kiln_gemm_sk_rope",
     "ptr,i64,ptr,ptr,ptr,i32,i32,i32,i32,ptr,i32,i32,ptr,ptr,f32,ptr,ptr,ptr,i32",
     {{"ACT", ACT2}, {"MAXM", "8|16|32"}, {"WARPS", "4|8"}, {"STAGES", "2|3|4|5|6|7|8"},
      {"CL", "1|2|3|4|5|6|7|8"}, {"ROPE", "1"}, {"HD", "128"}, {"KV", ACT2}},
     "ACT=bf16 MAXM=32 WARPS=4 STAGES=3 CL=4 ROPE=1 HD=128 KV=bf16;"
     "ACT=fp16 MAXM=8 WARPS=4 STAGES=4 CL=1 ROPE=1 HD=128 KV=fp16;"
     "ACT=bf16 MAXM=16 WARPS=8 STAGES=4 CL=3 ROPE=1 HD=128 KV=bf16;"
     "ACT=fp16 MAXM=32 WARPS=4 STAGES=2 CL=1 ROPE=1 HD=128 KV=fp16"},
    /* gemm_sk and gemm_sk_rope on Hopper's warpgroup MMA (kernel_src/gemm_sk_wg.cu, one warpgroup a block:
     * WARPS 4; engine/cuda/ops_gpu.c sk_gemm with $KILN_SKGEMM_WG on sm_90): the same arguments; compiled for
     * sm_90a there (kiln_jit_unit_arch), a trapping body elsewhere */
    {"gemm_sk_wg", "kernel_src/gemm_sk_wg.cu", "kiln_gemm_sk", "ptr,i64,ptr,ptr,ptr,i32,i32,i32,i32,ptr",
     {{"ACT", ACT2}, {"OUT", ACT3}, {"MAXM", "8|16|32|64"}, {"WARPS", "4"}, {"RT", "1|2|4"},
      {"STAGES", "2|3|4|5|6|7|8"}, {"CL", "1|2|3|4|5|6|7|8"}, {"GLU", "0|1"}},
     GEMM_SK_WG_EX},
    {"gemm_sk_rope_wg", "kernel_src/gemm_sk_wg.cu", "kiln_gemm_sk_rope",
     "ptr,i64,ptr,ptr,ptr,i32,i32,i32,i32,ptr,i32,i32,ptr,ptr,f32,ptr,ptr,ptr,i32",
     {{"ACT", ACT2}, {"MAXM", "8|16|32"}, {"WARPS", "4"}, {"STAGES", "2|3|4|5|6|7|8"},
      {"CL", "1|2|3|4|5|6|7|8"}, {"ROPE", "1"}, {"HD", "128"}, {"KV", ACT2}},
     "ACT=bf16 MAXM=32 WARPS=4 STAGES=3 CL=4 ROPE=1 HD=128 KV=bf16;ACT=fp16 MAXM=8 WARPS=4 STAGES=4 CL=1 ROPE=1 HD=128 KV=fp16"},
    /* gemm_sk_wg fed by TMA (kernel_src/gemm_sk_tma.cu: a producer warp, mbarriers; sm_90a, a trapping body
     * elsewhere; $KILN_SKGEMM_WG=2): gemm_sk's arguments, then the tensor maps of W and x */
    {"gemm_sk_tma", "kernel_src/gemm_sk_tma.cu", "kiln_gemm_sk", "ptr,i64,ptr,ptr,ptr,i32,i32,i32,i32,ptr,tmap,tmap",
     {{"ACT", ACT2}, {"OUT", ACT3}, {"MAXM", "8|16|32|64"}, {"WARPS", "4"}, {"RT", "1|2|4"},
      {"STAGES", "2|3|4|5|6|7|8|9|10|11|12|13|14|15|16"}, {"CL", "1|2|3|4|5|6|7|8"}, {"GLU", "0|1"}},
     GEMM_SK_WG_EX},
    /* x stationary in registers, W through warp-private rings (kernel_src/gemm_skx.cu; engine/cuda/ops_gpu.c
     * skx_gemm with kiln_skx_plan's shape; CL > 1 needs sm_90: the host launches CL = 1 only before) */
    {"gemm_skx", "kernel_src/gemm_skx.cu", "kiln_gemm_skx", "ptr,i64,ptr,ptr,ptr,i32,i32,i32,ptr,ptr,ptr",
     {{"ACT", ACT2}, {"OUT", ACT3}, {"MAXM", "8|16|32"}, {"WARPS", "4|8"}, {"KW", "*"}, {"SK", "64|128"},
      {"SLOTS", "*"}, {"RT", "1|2|3|4|5|6|7|8"}, {"CL", "1|2|4"}, {"NOUT", "0|1", "0"}},
     "ACT=bf16 OUT=bf16 MAXM=32 WARPS=8 KW=256 SK=128 SLOTS=5 RT=4 CL=2;ACT=bf16 OUT=bf16 MAXM=32 WARPS=8 KW=256 SK=128 SLOTS=4 RT=6 CL=2;"
     "ACT=bf16 OUT=bf16 MAXM=16 WARPS=8 KW=512 SK=128 SLOTS=6 RT=2 CL=1;ACT=fp16 OUT=fp32 MAXM=8 WARPS=8 KW=512 SK=128 SLOTS=6 RT=2 CL=1;"
     "ACT=bf16 OUT=bf16 MAXM=16 WARPS=8 KW=448 SK=64 SLOTS=10 RT=8 CL=4;ACT=fp16 OUT=fp16 MAXM=32 WARPS=4 KW=64 SK=64 SLOTS=3 RT=1 CL=1;"
     "ACT=bf16 OUT=bf16 MAXM=8 WARPS=8 KW=512 SK=128 SLOTS=6 RT=2 CL=1 NOUT=1;ACT=bf16 OUT=bf16 MAXM=8 WARPS=8 KW=896 SK=128 SLOTS=6 RT=4 CL=2 NOUT=1"},
};
#pragma GCC diagnostic pop

const kiln_jit_kernel_def *kiln_jit_registry(int *n) {
    *n = (int)KILN_ARRAY_LEN(registry);
    return registry;
}

/* Files whose kernels use instructions of sm_90's arch-specific target
 * sm_90a (wgmma, setmaxnreg): compiled for sm_90a when sm_90 is asked for.
 * They guard that code with __CUDA_ARCH_FEAT_SM90_ALL and compile a body
 * that traps on every other target, where the host does not launch them. */
static const char *const sm90a_files[] = {"kernel_src/attn_prefill_wg.cu", "kernel_src/gemm_sk_wg.cu",
                                          "kernel_src/gemm_sk_tma.cu"};

const char *kiln_jit_unit_arch(const char *file, const char *arch) {
    if (!file || !arch || strcmp(arch, "sm_90")) return arch;
    for (size_t i = 0; i < KILN_ARRAY_LEN(sm90a_files); i++)
        if (!strcmp(file, sm90a_files[i])) return "sm_90a";
    return arch;
}

const kiln_jit_kernel_def *kiln_jit_find(const char *name) {
    for (size_t i = 0; i < KILN_ARRAY_LEN(registry); i++)
        if (!strcmp(registry[i].name, name)) return &registry[i];
    return NULL;
}

static bool value_allowed(const char *values, const char *v, size_t vlen) {
    if (!strcmp(values, "*")) {
        if (!vlen) return false;
        for (size_t i = 0; i < vlen; i++)
            if (v[i] < '0' || v[i] > '9') return false;
        return atoi(v) > 0;
    }
    const char *p = values;
    while (*p) {
        const char *e = strchr(p, '|');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == vlen && !strncmp(p, v, n)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

kiln_status kiln_jit_check_defines(const kiln_jit_kernel_def *def, const char *defines) {
    bool seen[KILN_JIT_MAX_PARAMS] = {false};
    const char *p = defines ? defines : "";
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *end = strchr(p, ' ');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (!eq)
            return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kernel %s: define \"%.*s\" is not NAME=VALUE", def->name,
                             (int)len, p);
        size_t nlen = (size_t)(eq - p);
        /* PDL_EARLY=0|1 (kernel_src/kiln_common.cuh: pdl_wait signals the next kernel first) applies to
         * every kernel */
        if (nlen == 9 && !strncmp(p, "PDL_EARLY", 9)) {
            if (len != 11 || (p[10] != '0' && p[10] != '1'))
                return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kernel %s: %.*s is not allowed (allowed: PDL_EARLY=0|1)",
                                 def->name, (int)len, p);
            p += len;
            continue;
        }
        int k = -1;
        for (int i = 0; i < KILN_JIT_MAX_PARAMS && def->params[i].name; i++)
            if (strlen(def->params[i].name) == nlen && !strncmp(def->params[i].name, p, nlen)) k = i;
        if (k < 0) {
            /* a parameter of another entry of the same file is allowed (one
             * compile serves every entry of a file) */
            bool other = false;
            for (size_t r = 0; r < KILN_ARRAY_LEN(registry) && !other; r++) {
                if (strcmp(registry[r].file, def->file)) continue;
                for (int i = 0; i < KILN_JIT_MAX_PARAMS && registry[r].params[i].name; i++)
                    if (strlen(registry[r].params[i].name) == nlen && !strncmp(registry[r].params[i].name, p, nlen))
                        other = true;
            }
            if (!other)
                return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kernel %s has no specialization parameter %.*s",
                                 def->name, (int)nlen, p);
            p += len;
            continue;
        }
        char val[64];
        size_t vlen = len - nlen - 1;
        snprintf(val, sizeof val, "%.*s", (int)KILN_MIN(vlen, sizeof val - 1), eq + 1);
        if (!value_allowed(def->params[k].values, val, vlen))
            return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kernel %s: %s=%s is not allowed (allowed: %s)", def->name,
                             def->params[k].name, val, def->params[k].values);
        seen[k] = true;
        p += len;
    }
    for (int i = 0; i < KILN_JIT_MAX_PARAMS && def->params[i].name; i++)
        if (!seen[i] && !def->params[i].dflt)
            return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kernel %s needs %s=<%s>", def->name, def->params[i].name,
                             def->params[i].values);
    return KILN_OK;
}

kiln_status kiln_jit_signature_parse(const char *sig, kiln_jit_arg *kinds, int max, int *n) {
    int k = 0;
    const char *p = sig;
    while (p && *p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        kiln_jit_arg a;
        if (len == 3 && !strncmp(p, "ptr", 3)) a = KILN_JIT_ARG_PTR;
        else if (len == 3 && !strncmp(p, "i32", 3)) a = KILN_JIT_ARG_I32;
        else if (len == 3 && !strncmp(p, "i64", 3)) a = KILN_JIT_ARG_I64;
        else if (len == 3 && !strncmp(p, "f32", 3)) a = KILN_JIT_ARG_F32;
        else if (len == 4 && !strncmp(p, "tmap", 4)) a = KILN_JIT_ARG_TMAP;
        else return KILN_FAIL(KILN_ERR_FORMAT, "bad argument kind \"%.*s\" in signature \"%s\"", (int)len, p, sig);
        if (k >= max) return KILN_FAIL(KILN_ERR_LIMIT, "signature \"%s\" has more than %d arguments", sig, max);
        kinds[k++] = a;
        p = e ? e + 1 : NULL;
    }
    *n = k;
    return KILN_OK;
}

int kiln_jit_attn_group(int n_heads, int n_kv_heads) {
    if (n_kv_heads <= 0 || n_heads % n_kv_heads) return 1;
    int ratio = n_heads / n_kv_heads;
    for (int gsz = 16; gsz > 1; gsz /= 2)
        if (ratio % gsz == 0) return gsz;
    return 1;
}

static kiln_status add_spec(kiln_jit_spec_list *l, const char *name, const char *fmt, ...) KILN_PRINTF(3, 4);
static kiln_status add_spec(kiln_jit_spec_list *l, const char *name, const char *fmt, ...) {
    char d[sizeof l->defines[0]];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d, sizeof d, fmt, ap);
    va_end(ap);
    for (int i = 0; i < l->n; i++) /* (two projections of one tiling: one spec) */
        if (!strcmp(l->specs[i].name, name) && !strcmp(l->defines[i], d)) return KILN_OK;
    if (l->n >= l->cap) { /* the warm set is full: the rest compile on first use (counted, and reported by the callers) */
        l->dropped++;
        return KILN_OK;
    }
    memcpy(l->defines[l->n], d, sizeof d);
    l->specs[l->n].name = name;
    l->specs[l->n].defines = l->defines[l->n];
    l->n++;
    return KILN_OK;
}

/* kiln_jit_model_specs lists the GEMV tilings of rule 0 (the knobs) or 3 (engine/cuda/ops_gpu.c) */
_Static_assert(KILN_GEMV_RULE_DEFAULT == 0 || KILN_GEMV_RULE_DEFAULT == 3, "kiln_jit_model_specs: GEMV tilings");

kiln_status kiln_jit_model_specs(const kiln_jit_model *m, kiln_jit_spec_list *l) {
    return kiln_jit_model_specs_cap(m, l, KILN_JIT_MAX_SPECS);
}

kiln_status kiln_jit_model_specs_cap(const kiln_jit_model *m, kiln_jit_spec_list *l, int cap) {
    kiln_status st = KILN_OK;
    l->n = l->dropped = 0;
    l->cap = cap >= 1 && cap <= KILN_JIT_MAX_SPECS ? cap : KILN_JIT_MAX_SPECS;
    KILN_CHECK(m->act == KILN_DTYPE_BF16 || m->act == KILN_DTYPE_F16, KILN_ERR_UNSUPPORTED,
               "GPU activations must be bf16 or fp16, not %s", kiln_dtype_name(m->act));
    KILN_CHECK(m->head_dim > 0 && m->head_dim % 8 == 0, KILN_ERR_UNSUPPORTED,
               "head_dim %d is not a multiple of 8", m->head_dim);
    KILN_CHECK(m->n_kv_heads > 0 && m->n_heads % m->n_kv_heads == 0, KILN_ERR_UNSUPPORTED,
               "%d query heads do not divide into %d KV heads", m->n_heads, m->n_kv_heads);
    const char *a = kiln_dtype_name(m->act);
    const char *kv = kiln_dtype_name(m->kv ? m->kv : m->act);
    KILN_CHECK(!m->kv || m->kv == m->act || m->kv == KILN_DTYPE_FP8_E4M3 || m->kv == KILN_DTYPE_FP8_E5M2,
               KILN_ERR_UNSUPPORTED, "a %s KV cache with %s activations (the cache is the activation dtype or FP8)",
               kv, a);
    int bs = m->block_size > 0 ? m->block_size : 16, grp = kiln_jit_attn_group(m->n_heads, m->n_kv_heads);
    KILN_CHECK(kiln_dtype_size(m->kv ? m->kv : m->act) != 1 || (m->head_dim % 16 == 0 && bs % 16 == 0),
               KILN_ERR_UNSUPPORTED, "an FP8 KV cache needs head_dim and block_size multiples of 16 (got %d, %d)",
               m->head_dim, bs);
    KILN_TRY(add_spec(l, "embed", "ACT=%s W=%s", a, a));
    /* the MAXM buckets (kernel_src/gemv.cu) the default KILN_GEMV_MAX_M uses;
     * a larger $KILN_GEMV_MAX_M compiles the others on first use */
    for (int mm = 1; mm <= KILN_GEMV_MAX_M_DEFAULT; mm *= 2)
        for (int o = 0; o < 2; o++)
            if (!KILN_GEMV_RULE_DEFAULT) {
                KILN_TRY(add_spec(l, "gemv", "ACT=%s OUT=%s MAXM=%d ROWS=%d UNROLL=%d GLU=0 KSPLIT=%d", a,
                                  o ? "fp32" : a, mm, KILN_GEMV_ROWS_DEFAULT, KILN_GEMV_UNROLL_DEFAULT,
                                  KILN_GEMV_KSPLIT_DEFAULT));
            } else { /* the tilings engine/cuda/ops_gpu.c gemv_tiling's rule 3 picks by shape */
                static const int rule3[3][3] = KILN_GEMV_RULE3_TILINGS;
                for (int t = 0; t < 3; t++)
                    KILN_TRY(add_spec(l, "gemv", "ACT=%s OUT=%s MAXM=%d ROWS=%d UNROLL=%d GLU=0 KSPLIT=%d", a,
                                      o ? "fp32" : a, mm, rule3[t][0], rule3[t][1], rule3[t][2]));
            }
    if (KILN_GEMV_NORM_DEFAULT && KILN_GEMV_RULE_DEFAULT && KILN_GEMV_MAX_M_DEFAULT >= 1) {
        /* the batch-1 add + RMSNorm folded into the GEMVs (ops_gpu.h kiln_gpu_gemv_add_ss): the GEMV
         * before it adding into the residual, in each tiling by shape, and the SiLU one after it (the
         * plain one after it only at KILN_GEMV_NORM=2: compiled on first use) */
        static const int rule3[3][3] = KILN_GEMV_RULE3_TILINGS;
        for (int t = 0; t < 3; t++)
            KILN_TRY(add_spec(l, "gemv", "ACT=%s OUT=%s MAXM=1 ROWS=%d UNROLL=%d GLU=0 KSPLIT=%d NOUT=1", a, a,
                              rule3[t][0], rule3[t][1], rule3[t][2]));
        if (KILN_GEMV_SILU_DEFAULT)
            KILN_TRY(add_spec(l, "gemv", "ACT=%s OUT=%s MAXM=1 ROWS=2 UNROLL=%d GLU=1 KSPLIT=%d NIN=1", a, a,
                              KILN_GEMV_SILU_UNROLL_DEFAULT, KILN_GEMV_SILU_KSPLIT_DEFAULT));
    }
    if (KILN_GEMV_SILU_DEFAULT) /* the gate/up GEMV with its SiLU-and-mul */
        for (int mm = 1; mm <= KILN_GEMV_MAX_M_DEFAULT; mm *= 2)
            KILN_TRY(add_spec(l, "gemv", "ACT=%s OUT=%s MAXM=%d ROWS=2 UNROLL=%d GLU=1 KSPLIT=%d", a, a, mm,
                              KILN_GEMV_SILU_UNROLL_DEFAULT, KILN_GEMV_SILU_KSPLIT_DEFAULT));
    /* the batch-1 qkv GEMV with rope + KV write (ops_gpu.c kiln_gpu_gemm_rope_kv_ok: a cache of the
     * activation dtype, rotate-half, head dims 64 / 96 / 128 / 256) */
    if (KILN_GEMV_ROPE_DEFAULT && KILN_GEMV_MAX_M_DEFAULT >= 1 && !m->interleaved && !strcmp(kv, a) &&
        (m->head_dim == 64 || m->head_dim == 96 || m->head_dim == 128 || m->head_dim == 256))
        for (int ks = 1; ks <= 2; ks++) /* KSPLIT by the grid (ops_gpu.c kiln_gpu_gemm_rope_kv) */
            for (int nin = 0; nin <= KILN_GEMV_NORM_DEFAULT; nin++) /* (and after a folded norm) */
                KILN_TRY(add_spec(l, "gemv_rope", "ACT=%s UNROLL=%d KSPLIT=%d ROPE=1 RR=%d HD=%d KV=%s%s", a,
                                  KILN_GEMV_ROPE_UNROLL, ks, KILN_GEMV_ROPE_ROWS, m->head_dim, a, nin ? " NIN=1" : ""));
    /* the tensor-core GEMM (kernel_src/gemm_tc.cu) for 2 <= M <= the default
     * KILN_TCGEMM_MAX_M, in its default tiling with each number of warps
     * along K (picked by N at launch), act and fp32 out (its split-K
     * reduction is in the same module) */
    for (int mm = 8; mm <= 64 && mm / 2 < KILN_TCGEMM_MAX_M_DEFAULT; mm *= 2)
        for (int wk = 1; wk <= 4; wk *= 2)
            for (int o = 0; o < 2; o++) {
                int ns = KILN_TCGEMM_STAGES_DEFAULT(mm);
                if ((ns + 1) * wk * mm * 128 > 48 * 1024) continue; /* lowered at launch */
                KILN_TRY(add_spec(l, "gemm_tc", "ACT=%s OUT=%s MAXM=%d WARPS=%d WK=%d RT=%d STAGES=%d", a,
                                  o ? "fp32" : a, mm, KILN_TCGEMM_WARPS_DEFAULT, wk, KILN_TCGEMM_TILES_DEFAULT(mm), ns));
            }
    /* gemm_skx (kernel_src/gemm_skx.cu; ops_gpu.c kiln_gpu_gemm, before gemm_sk) for 1 <= M <= the default
     * KILN_SKX_MAX_M on the o and down projections of one GPU (qkv takes gemm_sk's rope epilogue there), as
     * kiln_skx_plan shapes them on an H100 / H200 */
    {
        const int hid = m->n_heads * m->head_dim;
        const int nk[2][2] = {{hid, hid}, {m->hidden, m->intermediate}};
        for (int mm = 8; mm / 2 < KILN_SKX_MAX_M_DEFAULT && mm <= 32; mm *= 2)
            for (int i = 0; i < 2; i++) {
                const kiln_skx_shape p = kiln_skx_plan(132, 232448, 9, mm, nk[i][0], nk[i][1]);
                if (p.ok)
                    KILN_TRY(add_spec(l, "gemm_skx", "ACT=%s OUT=%s MAXM=%d WARPS=%d KW=%d SK=%d SLOTS=%d RT=%d CL=%d", a, a,
                                      p.maxm, p.warps, p.kw, p.sk, p.s, p.rt, p.cl));
            }
        /* ... and its one-row form adding into the residual (NOUT: the batch-1 o and down, KILN_SKX_M1_DEFAULT) */
        for (int i = 0; i < 2 && KILN_SKX_M1_DEFAULT; i++) {
            const kiln_skx_shape p = kiln_skx_plan(132, 232448, 9, 1, nk[i][0], nk[i][1]);
            if (p.ok)
                KILN_TRY(add_spec(l, "gemm_skx", "ACT=%s OUT=%s MAXM=%d WARPS=%d KW=%d SK=%d SLOTS=%d RT=%d CL=%d NOUT=1", a,
                                  a, p.maxm, p.warps, p.kw, p.sk, p.s, p.rt, p.cl));
        }
    }
    /* the cluster split-K GEMM (kernel_src/gemm_sk.cu) for 2 <= M <= the default
     * KILN_SKGEMM_MAX_M on the qkv and o projections of one GPU (their weights are
     * within KILN_SKGEMM_MAX_WEIGHT_MB), split as an H100 / H200 (132 SMs, 228 KiB
     * shared memory an SM) plans it; other GPUs and TP shards compile on first use */
    {
        const int hid = m->n_heads * m->head_dim, qkv = (m->n_heads + 2 * m->n_kv_heads) * m->head_dim;
        const int nk[2][2] = {{qkv, hid}, {hid, hid}};
        for (int mm = 8; mm / 2 < KILN_SKGEMM_MAX_M_DEFAULT && mm <= 64; mm *= 2)
            for (int i = 0; i < 2; i++) {
                if (!kiln_skgemm_weight_ok(mm, (int64_t)nk[i][0] * nk[i][1] * 2, KILN_SKGEMM_MAX_WEIGHT_MB_DEFAULT,
                                           KILN_SKGEMM_MAX_WEIGHT_MB_M32_DEFAULT))
                    continue;
                const int rt = KILN_SKGEMM_TILES_DEFAULT(mm);
                kiln_skgemm_shape p = kiln_skgemm_plan(132, 233472, 232448, 9, nk[i][0], nk[i][1], mm,
                                                       KILN_SKGEMM_WARPS_DEFAULT, rt, KILN_SKGEMM_STAGES_DEFAULT(mm), 0, 0);
                KILN_TRY(add_spec(l, "gemm_sk", "ACT=%s OUT=%s MAXM=%d WARPS=%d RT=%d STAGES=%d CL=%d GLU=0", a, a, mm,
                                  KILN_SKGEMM_WARPS_DEFAULT, rt, p.stages, p.split));
            }
    }
    /* ... through gemm_sk_tma (sm_90; ops_gpu.c sk_gemm) from MAXM KILN_SKGEMM_TMA_DEFAULT on: the o, qkv and down
     * projections within the weight limit (plain: their tiles, stages and capped split) and the gate/up with SiLU (GLU) at the split planned and one lower
     * (the occupancy check lowers a split whose clusters the GPCs cannot hold at once) */
    if (KILN_SKGEMM_TMA_DEFAULT > 0 && m->hidden > 0) {
        const int tmin = KILN_SKGEMM_TMA_DEFAULT == 1 ? 32 : KILN_SKGEMM_TMA_DEFAULT;
        for (int mm = tmin; mm / 2 < KILN_SKGEMM_MAX_M_DEFAULT && mm <= 64; mm *= 2)
            for (int kind = 0; kind < 4; kind++) { /* the o, qkv, gate/up (GLU) and down projections */
                const int glu = kind == 2, K = kind == 3 ? m->intermediate : m->hidden;
                const int N = glu ? 2 * m->intermediate : kind == 1 ? (m->n_heads + 2 * m->n_kv_heads) * m->head_dim : m->hidden;
                if (N <= 0 || K <= 0 ||
                    (!glu && !kiln_skgemm_weight_ok(mm, (int64_t)N * K * 2, KILN_SKGEMM_MAX_WEIGHT_MB_DEFAULT,
                                                    KILN_SKGEMM_MAX_WEIGHT_MB_M32_DEFAULT)))
                    continue;
                const int stages = glu ? KILN_SKGEMM_TMA_GLU_STAGES_DEFAULT : KILN_SKGEMM_TMA_STAGES_DEFAULT;
                const int rt = glu ? 2 : kiln_skgemm_tma_tiles(132, N);
                const kiln_skgemm_shape p = kiln_skgemm_plan_capped(132, 233472, 232448, 9, N, K, mm, 4, rt, stages, 0,
                                                                    KILN_SKGEMM_TMA_SLACK,
                                                                    glu ? 8 : KILN_SKGEMM_TMA_MAX_SPLIT);
                for (int sp = p.split; sp >= 1 && sp >= p.split - 1; sp--)
                    KILN_TRY(add_spec(l, "gemm_sk_tma", "ACT=%s OUT=%s MAXM=%d WARPS=4 RT=%d STAGES=%d CL=%d GLU=%d", a, a,
                                      mm, rt, p.stages, sp, glu));
            }
    }
    /* ... and with its rope + KV write epilogue on the qkv projection (ops_gpu.c sk_rope_ok: head dim 128,
     * a cache of the activation dtype, rotate-half; 2 <= M <= KILN_SKGEMM_ROPE_DEFAULT), where on by default */
    if (KILN_SKGEMM_ROPE_DEFAULT && m->head_dim == 128 && !m->interleaved && !strcmp(kv, a)) {
        const int hid = m->n_heads * m->head_dim, qkv = (m->n_heads + 2 * m->n_kv_heads) * m->head_dim;
        const int warps = KILN_SKGEMM_WARPS_DEFAULT;
        for (int mm = 8; mm / 2 < KILN_SKGEMM_ROPE_DEFAULT && mm <= 32; mm *= 2) { /* the MAXM buckets it takes */
            kiln_skgemm_shape p = kiln_skgemm_plan(132, 233472, 232448, 9, qkv, hid, mm, warps, 128 / (16 * warps),
                                                   KILN_SKGEMM_STAGES_DEFAULT(mm), 0, 0);
            KILN_TRY(add_spec(l, "gemm_sk_rope", "ACT=%s MAXM=%d WARPS=%d STAGES=%d CL=%d ROPE=1 HD=128 KV=%s", a, mm,
                              warps, p.stages, p.split, a));
        }
    }
    KILN_TRY(add_spec(l, "rmsnorm", "ACT=%s W=%s", a, a));
    KILN_TRY(add_spec(l, "add_rmsnorm", "ACT=%s W=%s", a, a));
    KILN_TRY(add_spec(l, "rmsnorm_wide", "ACT=%s W=%s", a, a));
    KILN_TRY(add_spec(l, "add_rmsnorm_wide", "ACT=%s W=%s", a, a));
    KILN_TRY(add_spec(l, m->gelu ? "gelu_mul" : "silu_mul", "ACT=%s", a));
    KILN_TRY(add_spec(l, "add", "ACT=%s", a));
    KILN_TRY(add_spec(l, "rope", "ACT=%s INTERLEAVED=%d", a, m->interleaved ? 1 : 0));
    KILN_TRY(add_spec(l, "kv_write", "ACT=%s KV=%s", a, kv));
    KILN_TRY(add_spec(l, "rope_kv_write", "ACT=%s INTERLEAVED=%d KV=%s", a, m->interleaved ? 1 : 0, kv));
    KILN_TRY(add_spec(l, "rope_kv_write_dec", "ACT=%s INTERLEAVED=%d KV=%s", a, m->interleaved ? 1 : 0, kv));
    KILN_TRY(add_spec(l, "rope_wide", "ACT=%s INTERLEAVED=%d", a, m->interleaved ? 1 : 0));
    KILN_TRY(add_spec(l, "kv_write_wide", "ACT=%s KV=%s", a, kv));
    KILN_TRY(add_spec(l, "rope_kv_write_wide", "ACT=%s INTERLEAVED=%d KV=%s", a, m->interleaved ? 1 : 0, kv));
    KILN_TRY(add_spec(l, "kv_write_tile", "ACT=%s KV=%s", a, kv));
    if (kiln_dtype_size(m->act) == 2 && kiln_dtype_size(m->kv ? m->kv : m->act) == 2) /* (ops_gpu.c kv_pipe_ok) */
        KILN_TRY(add_spec(l, "kv_write_pipe", "ACT=%s KV=%s", a, kv));
    KILN_TRY(add_spec(l, "rope_kv_write_tile", "ACT=%s INTERLEAVED=%d KV=%s", a, m->interleaved ? 1 : 0, kv));
    KILN_TRY(add_spec(l, "attn_decode", "ACT=%s BLOCK_SIZE=%d GROUP=%d HEAD_DIM=%d KV=%s", a, bs, grp, m->head_dim, kv));
    KILN_TRY(add_spec(l, "attn_reduce", "ACT=%s BLOCK_SIZE=%d GROUP=%d HEAD_DIM=%d KV=%s", a, bs, grp, m->head_dim, kv));
    KILN_TRY(add_spec(l, "attn_prefill", "ACT=%s BLOCK_SIZE=%d GROUP=%d HEAD_DIM=%d KV=%s", a, bs, grp, m->head_dim,
                      kv));
    /* the warp-specialized wgmma prefill the host takes on sm_90 from KILN_PREFILL_WG2_MIN_CTX tokens
     * (16-bit caches, head_dim 64 | 128; other GPUs compile a trap body they never launch) */
    const bool wg2 = (m->head_dim == 64 || m->head_dim == 128) && (!strcmp(a, "bf16") || !strcmp(a, "fp16"));
    /* (its persistent form, attn_prefill_wg2p, is the same unit: same file and defines) */
    if (wg2 && !strcmp(kv, a))
        KILN_TRY(add_spec(l, "attn_prefill_wg2", "ACT=%s BLOCK_SIZE=%d GROUP=%d HEAD_DIM=%d KV=%s", a, bs, grp,
                          m->head_dim, kv));
    if (m->kv_calib && strcmp(kv, a)) { /* calibration runs a prefill on an ACT cache */
        KILN_TRY(add_spec(l, "kv_write", "ACT=%s KV=%s", a, a));
        KILN_TRY(add_spec(l, "rope_kv_write", "ACT=%s INTERLEAVED=%d KV=%s", a, m->interleaved ? 1 : 0, a));
        KILN_TRY(add_spec(l, "kv_write_wide", "ACT=%s KV=%s", a, a));
        KILN_TRY(add_spec(l, "rope_kv_write_wide", "ACT=%s INTERLEAVED=%d KV=%s", a, m->interleaved ? 1 : 0, a));
        KILN_TRY(add_spec(l, "kv_write_tile", "ACT=%s KV=%s", a, a));
        KILN_TRY(add_spec(l, "rope_kv_write_tile", "ACT=%s INTERLEAVED=%d KV=%s", a, m->interleaved ? 1 : 0, a));
        KILN_TRY(add_spec(l, "attn_prefill", "ACT=%s BLOCK_SIZE=%d GROUP=%d HEAD_DIM=%d KV=%s", a, bs, grp,
                          m->head_dim, a));
        if (wg2)
            KILN_TRY(add_spec(l, "attn_prefill_wg2", "ACT=%s BLOCK_SIZE=%d GROUP=%d HEAD_DIM=%d KV=%s", a, bs, grp,
                              m->head_dim, a));
    }
    KILN_TRY(add_spec(l, "gather_last", "ACT=%s", a));
    KILN_TRY(add_spec(l, "gather_rows", "ACT=%s", a));
    if (strcmp(a, "fp32")) KILN_TRY(add_spec(l, "gather_rows", "ACT=fp32")); /* pipelined decode feeds token ids */
    KILN_TRY(add_spec(l, "cast", "DST=fp32 SRC=%s", a));
    KILN_TRY(add_spec(l, "step_feed", "%s", ""));
    KILN_TRY(add_spec(l, "sample_penalties", "%s", ""));
    KILN_TRY(add_spec(l, "sample", "%s", ""));
    /* KILN_SAMPLE_CLUSTER_AUTO: the split kernel (the cluster sizes compile on first use when asked for) */
    KILN_TRY(add_spec(l, "sample_argmax_split", "%s", ""));
    if (m->pdl_early)
        for (int i = 0, n = l->n; i < n; i++) {
            const int before = l->n;
            KILN_TRY(add_spec(l, l->specs[i].name, "%s PDL_EARLY=1", l->defines[i]));
            KILN_CHECK(l->n == before || strlen(l->defines[l->n - 1]) == strlen(l->defines[i]) + 12,
                       KILN_ERR_INTERNAL, "kernel %s: defines too long", l->specs[i].name);
        }
fail:
    return st;
}
