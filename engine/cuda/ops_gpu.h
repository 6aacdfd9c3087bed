/*
 * ops_gpu.h -- the CUDA variant of every op kind: thin C wrappers that launch
 * the kernel_src/ kernels (through the JIT kernel set) or cuBLASLt, with the
 * semantics of the CPU variants in ops_cpu.h, on device pointers.
 *
 * Differences from ops_cpu.h: activations live in ACT = bf16 or fp16 (fp32
 * accepted by the elementwise ops) with fp32 math inside; the KV cache is in
 * ACT or FP8 (E4M3 / E5M2: the write casts, attention converts back as it
 * reads); layout.head_scales, when set, is a device address. Shapes are
 * outermost first; row strides are in elements.
 *
 * Ownership: kiln_gpu_create returns owned (kiln_gpu_destroy); it owns its
 * kernel set, cuBLASLt handle and workspace; callers own every buffer passed
 * to the ops. Thread-safety: one kiln_gpu per device, used by one thread at a
 * time and on one stream at a time (the workspace is shared by the ops).
 */
#ifndef KILN_OPS_GPU_H
#define KILN_OPS_GPU_H

#include "kiln_rt.h"
#include "ops_cpu.h"

typedef struct kiln_gpu kiln_gpu;

typedef struct kiln_gpu_params {
    size_t workspace_bytes;  /* scratch for attention partials (0: 64 MiB)          */
    size_t blas_workspace;   /* cuBLASLt workspace (0: 32 MiB)                      */
    int max_sample_rows;     /* rows kiln_gpu_sample may get (0: 256)               */
    int vocab;               /* vocabulary size for sampling scratch (0: 131072)    */
    const kiln_jit_options *jit; /* NULL: device arch, env dirs                      */
    int gemv_max_m;          /* GEMMs with M <= this use kernel_src/gemv.cu instead of
                                cuBLASLt (0: $KILN_GEMV_MAX_M, else
                                KILN_GEMV_MAX_M_DEFAULT = 1; negative: never)     */
    int gemv_silu;           /* the gate/up GEMV with the SiLU-and-mul as its epilogue
                                where the GEMV serves (1 on, negative off; 0:
                                $KILN_GEMV_SILU, else KILN_GEMV_SILU_DEFAULT)      */
    int gemv_silu_ksplit, gemv_silu_unroll; /* its warps per output splitting K (1|2)
                                and 16-byte loads per row in flight (2|4|8); 0:
                                $KILN_GEMV_SILU_KSPLIT / _UNROLL, else
                                KILN_GEMV_SILU_KSPLIT_DEFAULT /
                                KILN_GEMV_SILU_UNROLL_DEFAULT (runtime/kiln_rt.h) */
    int gemv_rows, gemv_unroll; /* its W rows per warp (1|2|4) and 16-byte loads per
                                row in flight (2|4|8); 0: $KILN_GEMV_ROWS /
                                $KILN_GEMV_UNROLL, else KILN_GEMV_ROWS_DEFAULT /
                                KILN_GEMV_UNROLL_DEFAULT (runtime/kiln_rt.h)     */
    int gemv_ksplit;         /* warps splitting K per row group (1|2; 0:
                                $KILN_GEMV_KSPLIT, else KILN_GEMV_KSPLIT_DEFAULT)  */
    int gemv_ar;             /* the row-parallel GEMV with the all-reduce + add + RMSNorm
                                as its epilogue (1 on, negative off; 0:
                                $KILN_GEMV_AR, else KILN_GEMV_AR_DEFAULT)          */
    int gemv_norm;           /* the batch-1 add + RMSNorm folded into the GEMVs around it
                                (kiln_gpu_gemv_add_ss): 1 before the SiLU and rope GEMVs,
                                2 also before a plain one (the LM head), negative off; 0:
                                $KILN_GEMV_NORM, else KILN_GEMV_NORM_DEFAULT          */
    int gemv_rope;           /* the qkv GEMV with rope + KV write as its epilogue (1 on,
                                negative off; 0: $KILN_GEMV_ROPE, else
                                KILN_GEMV_ROPE_DEFAULT)                            */
    int gemv_rule;           /* the tiling by weight shape (ops_gpu.c gemv_tiling;
                                0: $KILN_GEMV_RULE, else KILN_GEMV_RULE_DEFAULT;
                                rule 0 = the three knobs above for every shape)   */
    int tcgemm_max_m;        /* GEMMs with 2 <= M <= this (and M above gemv_max_m) use
                                kernel_src/gemm_tc.cu (0: $KILN_TCGEMM_MAX_M, else
                                KILN_TCGEMM_MAX_M_DEFAULT = 0; negative, or 0 in
                                the environment: never; at most 64)              */
    int tcgemm_warps;        /* warps of a block (4|8; 0: $KILN_TCGEMM_WARPS,
                                else KILN_TCGEMM_WARPS_DEFAULT)                   */
    int tcgemm_warps_k, tcgemm_tiles, tcgemm_stages; /* its tiling: warps of a block
                                splitting K (1|2|4; the default 0 picks by N), 16-row
                                W tiles per warp (1|2|4), K chunks in
                                flight per warp (1..4); 0: $KILN_TCGEMM_WARPS_K /
                                _TILES / _STAGES, else KILN_TCGEMM_*_DEFAULT (by M);
                                lowered where it would spill                     */
    int tcgemm_split;        /* its split-K over blocks (0: $KILN_TCGEMM_SPLIT, else
                                enough blocks for every SM)                      */
    int tcgemm_prefetch_mb;  /* its L2 prefetch before waiting on the previous kernel
                                (0: $KILN_TCGEMM_PREFETCH_MB, else
                                KILN_TCGEMM_PREFETCH_MB_DEFAULT; negative: none) */
    int skgemm_max_m;        /* GEMMs with 2 <= M <= this (and M above gemv_max_m) use
                                kernel_src/gemm_sk.cu before gemm_tc (0:
                                $KILN_SKGEMM_MAX_M, else kiln_skgemm_default_limits': 64
                                where gemm_sk_tma takes 17.. rows, else 32; negative, or 0
                                in the environment: never; <= 64) */
    int skx_max_m;           /* GEMMs with 2 <= M <= this (and M above gemv_max_m) use
                                kernel_src/gemm_skx.cu where kiln_skx_plan serves the
                                shape, before gemm_sk (0: $KILN_SKX_MAX_M, else
                                KILN_SKX_MAX_M_DEFAULT = 16; negative: never; <= 32) */
    int skx_m1;              /* ... and one-row GEMMs through it (MAXM 8) in place of the GEMV:
                                plain ones and those adding into the residual
                                (kiln_gpu_gemv_add_ss), where kiln_skx_plan serves the shape
                                and skx_max_m >= 1 (1 on, negative off; 0: $KILN_SKX_M1, else
                                KILN_SKX_M1_DEFAULT = 1) */
    int skgemm_silu;         /* the gate/up GEMM with SiLU (kiln_gpu_gemm_silu) through gemm_sk for
                                2 <= M <= skgemm_max_m, any weight size, where the GEMV does
                                not serve M (1 on, negative off; 0: $KILN_SKGEMM_SILU, else
                                KILN_SKGEMM_SILU_DEFAULT)                          */
    int skgemm_max_weight_mb; /* ... and only on weights of at most this many MiB (0:
                                $KILN_SKGEMM_MAX_WEIGHT_MB, else
                                KILN_SKGEMM_MAX_WEIGHT_MB_DEFAULT = 64; negative: any, at
                                every M); at 17..64 rows $KILN_SKGEMM_MAX_WEIGHT_MB_M32
                                instead (kiln_skgemm_default_limits: 120 where gemm_sk_tma
                                takes those rows, else 40) */
    int skgemm_warps, skgemm_tiles, skgemm_stages; /* its tiling: warps a block (4|8),
                                16-row W tiles a warp (1|2|4), K chunks in flight
                                (2..8); 0: $KILN_SKGEMM_WARPS / _TILES / _STAGES, else
                                KILN_SKGEMM_*_DEFAULT; stages lowered to fit shared
                                memory */
    int skgemm_split;        /* its split-K (blocks of a cluster, 1..8; 0:
                                $KILN_SKGEMM_SPLIT, else enough blocks for the SMs;
                                1 before sm_90)                                   */
    int skgemm_wg;           /* gemm_sk (and its rope epilogue) on Hopper's warpgroup
                                MMA (kernel_src/gemm_sk_wg.cu, one warpgroup a block)
                                on sm_90 (1 on, negative off; 0: $KILN_SKGEMM_WG,
                                else KILN_SKGEMM_WG_DEFAULT)                      */
    int elem_wide_min;       /* rmsnorm / add_rmsnorm of at least this many rows and
                                rope / kv_write / rope_kv_write of at least this many
                                tokens use kernel_src/rmsnorm_wide.cu and
                                rope_kv_wide.cu (prefill); fewer (decode) the
                                kernels of rmsnorm.cu and rope_kv.cu (0:
                                $KILN_ELEM_WIDE_MIN, else KILN_ELEM_WIDE_MIN_DEFAULT
                                = 1024; negative, or 0 in the environment: never) */
    int rope_dec_max;        /* rope + KV write steps of at most this many tokens take
                                kiln_rope_kv_write_dec (a thread per vector, no barrier;
                                0: $KILN_ROPE_DEC_MAX, else KILN_ROPE_DEC_MAX_DEFAULT;
                                negative, or 0 in the environment: never)          */
    int decode_warps;        /* warps of a decode-attention block over a 16-bit cache
                                (2|4; 0: $KILN_DECODE_WARPS, else 4 unless the blocks
                                exceed one wave of 2 an SM and no context exceeds
                                KILN_DECODE_W2_MAX_CTX): 2 halves its shared memory,
                                so twice the blocks are resident */
    int sample_cluster;      /* kiln_gpu_sample_greedy: blocks of the cluster each row is
                                split over (1|2|4|8, rounded down; KILN_SAMPLE_CLUSTER_SPLIT
                                (32): the split kernel; KILN_SAMPLE_CLUSTER_AUTO (16): the
                                split kernel too; 0: $KILN_SAMPLE_CLUSTER, else
                                KILN_SAMPLE_CLUSTER_DEFAULT = auto; negative, or 0 in the
                                environment: kiln_sample). Clusters above 1 only on sm_90+;
                                older GPUs run kiln_sample there                  */
} kiln_gpu_params;

/* The tile KV writes (kernel_src/rope_kv_wide.cu kv_tile) from elem_wide_min tokens:
 * 1 for kv_write and rope_kv_write, 2 for kv_write only, 0 never ($KILN_KV_TILE).
 * bench_kernels on the H200 (2026-11-30, 4096 tokens, % of copy): kv_write
 * tile 63.9 against the KV blocks 46.0 and rope_kv.cu 53.8; rope_kv_write tile
 * 66.4 against the blocks 72.5 (58.1 / 52.7 with slots off the block start). */
#define KILN_KV_TILE_DEFAULT 2
#define KILN_ELEM_WIDE_MIN_DEFAULT 1024 /* -b 256 decode steps were 2% slower with the wide kernels (H200, 2026-11-30) */
/* bench_kernels decode-shape (H200, 2026-11-30): the rope + KV write of 32 / 64 decode tokens 4.4 / 4.5 us
 * through kiln_rope_kv_write_dec against 6.3 / 5.9 (kiln bench -b 32: 5890 tok/s against 5823-5815) */
#define KILN_ROPE_DEC_MAX_DEFAULT 64
/* kiln_attn_prefill_wg2 by default from this longest context on (sm_90, 16-bit caches, head_dim 64 | 128) */
#define KILN_PREFILL_WG2_MIN_CTX 1024
/* wg2 in its persistent form (kiln_attn_prefill_wg2p; $KILN_PREFILL_PERSIST=0 for the grid form): H200,
 * 2026-12-01, bench_kernels prefill in one call: 8 x 2048 290.6 TFLOP/s against 286.1, 1 x 8192 364.7 against
 * 342.6; kiln bench -b 8 -s 2048 time to first token 288.6 / 287.2 ms against 289.6 / 290.0 */
#define KILN_PREFILL_PERSIST_DEFAULT 1
/* Split decode attention: the kernel's last partition block of each (sequence, KV group) combines the
 * partitions (arrival counters, KILN_ATTN_COUNTERS of them: n_seqs * nq / GROUP at most) instead of a
 * kiln_attn_reduce launch a layer ($KILN_DECODE_FUSED_REDUCE=1). Off: kiln bench on the H200 (2026-11-30,
 * same call) -b 1 236.6 tok/s against 245.4 (the last block's combination, a thread an element looping
 * over the partitions, outlasted the reduce launch), -b 32 at --max-model-len 8192 5887 against 5844
 * (+0.7%). With the combination warp-parallel (kernel_src/attn_decode.cu combine_group; 2026-11-30,
 * remote.sh s38 / s39 / s44): bench_kernels b1 ctx32768 41.1 against 44.8 us, but -b 1 243.8 against 245.9
 * (249.7 against 251.1 with the early PDL trigger), -b 32 -1.5 / -2.7% with =2 (from 2 sequences).
 * Default 3 since the fifteenth session (2026-12-01, remote.sh s63 / s64): fused for the fixed-partition
 * split of 16-bit caches (P > 0: with 8 KV heads, 11 to 16 sequences), the reduce launch for the adaptive
 * one (small batches) and for FP8 caches (not measured in the engine). A sequence whose context fits the first partition now writes its output from the attention
 * block and skips the counters, so the fused split costs nothing at short contexts, while a
 * kiln_attn_reduce launch -- a no-op for such sequences -- still delays the next kernel's launch until
 * attention completes: kiln bench at --max-model-len 8192, fused / reduce launch, ms a step: -b 12 -s 128
 * 4.617 / 4.625 against 4.763 / 4.760 (4.591 unsplit), -b 12 -s 2048 7.365 / 7.478, -b 16 -s 4096 10.791
 * / 10.894 (11.473 unsplit); the adaptive split: -b 8 4.573 / 4.605 against 4.580 / 4.578, -b 4 4.537
 * against 4.498 (fused from 2 sequences) */
#define KILN_DECODE_FUSED_REDUCE_DEFAULT 3
#define KILN_ATTN_COUNTERS 65536
/* decode attention over a 16-bit cache takes 2 warps a block (when the grid exceeds a wave of 4-warp
 * blocks) only while the longest context is at most this many tokens (engine/cuda/ops_gpu.c) */
#define KILN_DECODE_W2_MAX_CTX 512
#define KILN_DECODE_PW_DEFAULT 1
/* A decode step's rope + KV write done by the decode-attention kernel (kiln_attn_decode_rope) where the
 * executor hands them together (kiln_gpu_attn.rope) and the shape allows ($KILN_DECODE_ROPE: 1 on, 0 the
 * rope kernel in front). H200, kiln bench llama3-8b -s 128 -o 256 (remote.sh s86, 2026-12-01), tok/s
 * fused / rope kernel in front: -b 32 6,142 / 6,101 and 6,165 / 6,097, -b 64 10,693 / 10,579, -b 24 4,817 /
 * 4,761; a -b 32 layer's rope + attention 13.6 us (exclusive) against 6.8 + 8.4 */
#define KILN_DECODE_ROPE_DEFAULT 1

kiln_status kiln_gpu_create(kiln_rt_device *d, const kiln_gpu_params *p, kiln_gpu **out);
void kiln_gpu_destroy(kiln_gpu *g);
kiln_rt_kernels *kiln_gpu_kernels(kiln_gpu *g);
kiln_rt_blas *kiln_gpu_blas(kiln_gpu *g);
kiln_rt_device *kiln_gpu_device(kiln_gpu *g);
/* Compile and load, in parallel, every specialization a model needs. */
kiln_status kiln_gpu_prepare(kiln_gpu *g, const kiln_jit_model *m);
/* gemm_sk's timing records (for bench_kernels gemm_sk_prof): with buf set,
 * each gemm_sk launch of at most max_blocks blocks has thread 0 of every
 * block write KILN_SKGEMM_PROF_N u64 at buf[block * KILN_SKGEMM_PROF_N]
 * (block = blockIdx.y * gridDim.x + blockIdx.x): globaltimer ns at entry and
 * exit, clock64 at entry, after the wait on the previous kernel, once the
 * first stage landed, at the loop's end, after the split-K reduction (or
 * the stores), then the SM id, the block's K chunks and its slice. buf 0
 * turns it off. Returns the blocks of the last profiled launch since the
 * previous call (0: none). */
#define KILN_SKGEMM_PROF_N 10
int kiln_gpu_set_skgemm_profile(kiln_gpu *g, kiln_devptr buf, int max_blocks);
/* Sets the rows / tokens from which the elementwise ops take their wide
 * kernels (kiln_gpu_params.elem_wide_min; <= 0: never) and returns the
 * previous value (0: never). For tests and benchmarks, between launches. */
int kiln_gpu_set_elem_wide_min(kiln_gpu *g, int n);
/* Where kv_write / rope_kv_write of elem_wide_min tokens or more take the
 * tile kernels of kernel_src/rope_kv_wide.cu (a warp per 16 tokens and KV
 * head) instead of its KV blocks: mode 1 both, 2 kv_write only (16-bit
 * caches through its cp.async pipeline instead), 0 neither
 * (KILN_KV_TILE_DEFAULT); returns the previous mode. For tests and
 * benchmarks, between launches. */
int kiln_gpu_set_kv_tile(kiln_gpu *g, int mode);
/* Warps of a decode-attention block over a 16-bit cache (2 or 4; anything
 * else: by the grid); returns the previous setting (tests). */
int kiln_gpu_set_decode_warps(kiln_gpu *g, int n);
/* Tests: split decode attention combines its partitions in the kernel's last block of each (sequence, KV
 * group) instead of a kiln_attn_reduce launch (1), or not (0), or from 2 sequences (2), or for the
 * fixed-partition split only (3, the default); returns the previous setting. */
int kiln_gpu_set_decode_fused_reduce(kiln_gpu *g, int on);
/* Decode attention over a 16-bit cache through the persistent-warp kernel (kiln_attn_decode_pw): mode 0
 * never, 1 by the grid (the default: items, sequences x KV groups, for 90% of the resident warps or
 * more), 2 wherever no split is planned (tests and benchmarks: a small batch's decode graph may split
 * where its eager step does not, so the two need not give the same bits); items_per_warp 1..32 fixes
 * its items a warp (tests), else by the grid. Returns the previous mode. */
int kiln_gpu_set_decode_pw(kiln_gpu *g, int mode, int items_per_warp);
/* Tests: kiln_gpu_attention with a rope (kiln_gpu_attn.rope) fuses it into the decode kernel where it can (1)
 * or runs kiln_gpu_rope_kv_write in front (0); returns the previous setting. */
int kiln_gpu_set_decode_rope(kiln_gpu *g, int on);
/* Tests: the warps a row (pair) of the batch-1 qkv GEMV with rope (1|2|4; 0: by the grid); returns the previous value. */
int kiln_gpu_set_gemv_rope_ksplit(kiln_gpu *g, int ks);
/* the rope GEMV's rows a warp (1 or 2; else the default, KILN_GEMV_ROPE_ROWS); returns the previous */
int kiln_gpu_set_gemv_rope_rows(kiln_gpu *g, int rows);
/* Tests: the qkv GEMM with rope + KV write through gemm_sk for 2 <= M <= rows
 * (kiln_gpu_gemm_rope_kv_m; $KILN_SKGEMM_ROPE): rows 1 means 32 (all it serves), 2..32 that many, 0 never;
 * returns the previous row limit. */
int kiln_gpu_set_skgemm_rope(kiln_gpu *g, int on);
/* Steps of at most n tokens (0: none) take the decode rope + KV write kernel
 * (kernel_src/rope_kv.cu kiln_rope_kv_write_dec); returns the previous
 * setting (tests). */
int kiln_gpu_set_rope_dec_max(kiln_gpu *g, int n);

/* out[T, H] (act) = W[ids[t] - vocab_start] or 0 (kiln_cpu_embed). */
kiln_status kiln_gpu_embed(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_dtype act, kiln_devptr ids, int T,
                           kiln_devptr w, kiln_dtype wdt, int64_t V_local, int H, int64_t vocab_start);
/* out[rows, dim] = rmsnorm(x) * w; out may alias x. dim % (16 / size(act)) == 0. */
kiln_status kiln_gpu_rmsnorm(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_devptr w,
                             kiln_dtype act, kiln_dtype wdt, int rows, int dim, float eps);
/* residual += x; out = rmsnorm(residual) * w (over residual as stored in act). */
kiln_status kiln_gpu_add_rmsnorm(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr residual, kiln_devptr x,
                                 kiln_devptr w, kiln_dtype act, kiln_dtype wdt, int rows, int dim, float eps);
/* out[M, N] (out_dt, row stride ldo >= N, 0: N) = x[M, K] @ W[N, K]^T (+ bias[N]
 * in out_dt); x, W in in_dt. M <= gemv_max_m: kernel_src/gemv.cu; 2 <= M <=
 * skx_max_m where kiln_skx_plan serves N x K: kernel_src/gemm_skx.cu; 2 <= M <=
 * skgemm_max_m: kernel_src/gemm_sk.cu; 2 <= M <= tcgemm_max_m: kernel_src/gemm_tc.cu (its split-K partials use the workspace);
 * else, or where those do not apply (fp32, K % 8, unaligned x / W), cuBLASLt. */
kiln_status kiln_gpu_gemm(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, int64_t ldo, kiln_dtype out_dt,
                          kiln_devptr x, kiln_devptr w, kiln_dtype in_dt, kiln_devptr bias, int64_t M, int64_t N,
                          int64_t K);
/* out[M, I] (act, row stride ldo, 0: I) = silu(g) * u with [g | u] = x[M, K] @
 * W[2I, K]^T (+ bias[2I]): the gate/up GEMM and kiln_gpu_silu_mul in one
 * kernel, the same bits as the two (g and u rounded to act first). Only where
 * kiln_gpu_gemm_silu_ok (the small-M GEMV serves M and the knob is on, or
 * gemm_sk's SiLU epilogue does: skgemm_silu, 2 <= M <= skgemm_max_m). */
bool kiln_gpu_gemm_silu_ok(const kiln_gpu *g, kiln_dtype in_dt, int64_t M, int64_t N, int64_t K);
kiln_status kiln_gpu_gemm_silu(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, int64_t ldo, kiln_devptr x,
                               kiln_devptr w, kiln_dtype in_dt, kiln_devptr bias, int64_t M, int64_t N, int64_t K);
/* The batch-1 qkv GEMV with the rotary embedding and the KV-cache write as
 * its epilogue (kernel_src/gemv.cu ROPE=1): out [N = (nq + 2 nkv) * hd] =
 * x @ W^T (+ bias) with the q and k heads rotated at pos[0] and the rotated
 * k and the v heads written into the caches at slots[0], as kiln_gpu_gemm
 * followed by kiln_gpu_rope_kv_write leave them (within fp32 contraction
 * differences of the rotation). Only where kiln_gpu_gemm_rope_kv_ok: the
 * knob on, M = 1 on the GEMV, a 16-bit cache of act, rotate-half over the
 * whole head, no dynamic NTK, head dim 64 / 96 / 128 / 256. */
/* The row-parallel batch-1 GEMV with the push all-reduce of its output and
 * the residual add + RMSNorm after it as its epilogue (kernel_src/gemv.cu
 * AR=1): io [N] = sum over the ranks of x @ W^T (each rank's rounded to act
 * first); residual += io; nout = rmsnorm(residual) * nw. The same
 * collective as kiln_rt_p2p_all_reduce_add_rmsnorm. Only where
 * kiln_gpu_gemm_ar_norm_ok: the knob on, M = 1 on the GEMV, 16-bit act, the
 * push exchange set up, N of at most 1,024 vectors within its messages. */
bool kiln_gpu_gemm_ar_norm_ok(const kiln_gpu *g, const kiln_rt_p2p *p, kiln_dtype act, int64_t M, int64_t N,
                              int64_t K);
kiln_status kiln_gpu_gemm_ar_norm(kiln_gpu *g, kiln_rt_stream *s, kiln_rt_p2p *p, kiln_devptr io, kiln_devptr x,
                                  kiln_devptr w, kiln_dtype act, int64_t N, int64_t K, kiln_devptr residual,
                                  kiln_devptr nw, kiln_devptr nout, float eps);
typedef struct kiln_gpu_rope_params kiln_gpu_rope_params;
bool kiln_gpu_gemm_rope_kv_ok(const kiln_gpu *g, kiln_dtype act, int64_t M, int64_t N, int64_t K, int nq,
                              const kiln_gpu_rope_params *rp, const kiln_kv_layout *l);
kiln_status kiln_gpu_gemm_rope_kv(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_devptr w,
                                  kiln_dtype act, kiln_devptr bias, int64_t N, int64_t K, int nq, kiln_devptr pos,
                                  const kiln_gpu_rope_params *rp, kiln_devptr kcache, kiln_devptr vcache,
                                  const kiln_kv_layout *l, kiln_devptr slots);
/* The same for M rows (out [M, N], row m rotated at pos[m] and written at
 * slots[m]): M = 1 the GEMV above; 2 <= M <= the skgemm_rope row limit
 * (KILN_SKGEMM_ROPE_DEFAULT, at most 32) through kernel_src/gemm_sk.cu ROPE=1
 * (kiln_gpu_gemm_rope_kv_ok: head dim 128, the other conditions as above; x
 * and W 16-byte aligned). */
kiln_status kiln_gpu_gemm_rope_kv_m(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_devptr w,
                                    kiln_dtype act, kiln_devptr bias, int64_t M, int64_t N, int64_t K, int nq,
                                    kiln_devptr pos, const kiln_gpu_rope_params *rp, kiln_devptr kcache,
                                    kiln_devptr vcache, const kiln_kv_layout *l, kiln_devptr slots);
/* The batch-1 residual add + RMSNorm between two GEMVs without a kernel of its
 * own (kernel_src/gemv.cu NOUT / NIN; $KILN_GEMV_NORM, KILN_GEMV_NORM_DEFAULT),
 * as rmsnorm(h) * nw . W = r * ((h * nw) . W) with r = 1 / rms(h):
 * kiln_gpu_gemv_add_ss is the GEMV before it (M = 1): residual[N] += x @ W^T
 * (+ bias), the product rounded to act first (h, as kiln_gpu_gemm and
 * kiln_gpu_add_rmsnorm leave the residual); xw[N] = h * nw rounded to act
 * (nw: the norm's weight, act);
 * ss_out[b] = the sum of squares of block b's h, *n_part blocks
 * (kiln_gpu_gemv_add_ss_ok: at most KILN_GPU_NORM_MAX_PARTS). The GEMV after
 * it takes xw as x with a kiln_gpu_norm_in and multiplies each dot product by
 * r before its bias and epilogue -- one rounding of the normalised row as
 * the norm kernel has, in another place (not its bits) -- through
 * kiln_gpu_gemm_nin (plain), kiln_gpu_gemm_silu_nin or kiln_gpu_gemm_rope_kv_nin
 * where kiln_gpu_nin_ok (M = 1 on the GEMV, the knob on -- 2 for the plain
 * one; NULL: as without). */
#define KILN_GPU_NORM_MAX_PARTS 1024
typedef struct kiln_gpu_norm_in {
    kiln_devptr part; /* [n_part] f32: kiln_gpu_gemv_add_ss's ss_out, 16-byte aligned */
    int n_part;
    float eps;
} kiln_gpu_norm_in;
typedef enum kiln_gpu_nin_kind { KILN_GPU_NIN_PLAIN, KILN_GPU_NIN_SILU, KILN_GPU_NIN_ROPE } kiln_gpu_nin_kind;
bool kiln_gpu_gemv_add_ss_ok(const kiln_gpu *g, kiln_dtype act, int64_t M, int64_t N, int64_t K, int *n_part);
kiln_status kiln_gpu_gemv_add_ss(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr residual, kiln_devptr ss_out,
                                 kiln_devptr xw, kiln_devptr nw, kiln_devptr x, kiln_devptr w, kiln_dtype act,
                                 kiln_devptr bias, int64_t N, int64_t K);
bool kiln_gpu_nin_ok(const kiln_gpu *g, kiln_gpu_nin_kind kind, kiln_dtype act, int64_t M, int64_t N, int64_t K);
kiln_status kiln_gpu_gemm_nin(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, int64_t ldo, kiln_devptr x,
                              kiln_devptr w, kiln_dtype act, kiln_devptr bias, int64_t N, int64_t K,
                              const kiln_gpu_norm_in *ni);
kiln_status kiln_gpu_gemm_silu_nin(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, int64_t ldo, kiln_devptr x,
                                   kiln_devptr w, kiln_dtype in_dt, kiln_devptr bias, int64_t M, int64_t N, int64_t K,
                                   const kiln_gpu_norm_in *ni);
kiln_status kiln_gpu_gemm_rope_kv_nin(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_devptr w,
                                      kiln_dtype act, kiln_devptr bias, int64_t M, int64_t N, int64_t K, int nq,
                                      kiln_devptr pos, const kiln_gpu_rope_params *rp, kiln_devptr kcache,
                                      kiln_devptr vcache, const kiln_kv_layout *l, kiln_devptr slots,
                                      const kiln_gpu_norm_in *ni);
/* out[T, I] = silu(x[:, :I]) * x[:, I:]  (x [T, 2I]); gelu_tanh variant. */
kiln_status kiln_gpu_silu_mul(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_dtype act, int T,
                              int I);
kiln_status kiln_gpu_gelu_mul(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_dtype act, int T,
                              int I);
/* out[n] = a + b. */
kiln_status kiln_gpu_add(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr a, kiln_devptr b,
                         kiln_dtype act, int64_t n);
/* out[n, dim] = x[rows[i], :]; gather_last: out[n_seqs, dim] = x[qstart[s + 1] - 1, :]. */
/* A step's metadata block of n bytes from pinned host memory hmeta into dmeta
 * (kernel_src/embed.cu kiln_step_feed; n, the offsets and both addresses
 * 16-byte aligned), the first n_feed int32 words at tok_off being
 * res[feed[i]] instead, feed the n_feed words at feed_off of the host block. */
kiln_status kiln_gpu_step_feed(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr dmeta, const void *hmeta, size_t n,
                               size_t tok_off, size_t feed_off, int n_feed, kiln_devptr res);
kiln_status kiln_gpu_gather_rows(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_dtype dt,
                                 kiln_devptr rows, int n, int dim);
kiln_status kiln_gpu_gather_last(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_dtype dt,
                                 kiln_devptr qstart, int n_seqs, int dim);
/* dst[n] (dst_dt) = src[n] (src_dt). */
kiln_status kiln_gpu_cast(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr dst, kiln_dtype dst_dt, kiln_devptr src,
                          kiln_dtype src_dt, int64_t n);

/* Rotary parameters on the device (kiln_rope_params with device arrays). */
typedef struct kiln_gpu_rope_params {
    int head_dim, rot_dim;     /* rot_dim % 16 == 0 (rotate-half) / % 8 (interleaved) */
    bool interleaved;
    kiln_devptr inv_freq;      /* [rot_dim / 2] f32                                    */
    float mscale;
    kiln_devptr dyn_seq_len;   /* [T] int32 or 0 (dynamic NTK)                         */
    int dyn_max;
    float dyn_base, dyn_factor;
} kiln_gpu_rope_params;

/* Rotate q heads [0, nq) and k heads [nq, nq + nkv) of qkv [T, row_stride]
 * (act) in place; pos [T] int32. */
kiln_status kiln_gpu_rope(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr qkv, kiln_dtype act, int64_t row_stride,
                          kiln_devptr pos, int T, int nq, int nkv, const kiln_gpu_rope_params *rp);
/* Scatter k[t], v[t] (rows of row_stride, act) into the caches (l->dtype) at
 * slots[t] (int32, < 0 skipped). l->x must be 16 / size(l->dtype). FP8:
 * stored = fp8(value / scale) with l->head_scales (device [2, nkv] f32) or
 * l->k_scale / l->v_scale. */
kiln_status kiln_gpu_kv_write(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr kcache, kiln_devptr vcache,
                              const kiln_kv_layout *l, kiln_devptr k, kiln_devptr v, kiln_dtype act, int64_t row_stride,
                              kiln_devptr slots, int T);
/* rope then kv_write of the rotated k and of v = qkv[:, (nq + nkv) * hd:], one launch. */
kiln_status kiln_gpu_rope_kv_write(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr qkv, kiln_dtype act,
                                   int64_t row_stride, kiln_devptr pos, int T, int nq, const kiln_gpu_rope_params *rp,
                                   kiln_devptr kcache, kiln_devptr vcache, const kiln_kv_layout *l, kiln_devptr slots);

/* Paged attention (kiln_cpu_attention): out [T, nq * hd] (act),
 * q [T, q_stride] (act), caches in act or FP8 (head_dim and block_size
 * multiples of 16; scales from l->head_scales on the device, or none when
 * NULL and k_scale = v_scale = 1), qstart [n_seqs + 1], ctx_len
 * [n_seqs], block_tables [n_seqs, max_blocks] (all int32, on the device).
 * max_q_len / max_ctx_len bound the batch (host knowledge, sizes the grid).
 * max_q_len == 1 uses the decode kernel (split-K when the batch is too small
 * to fill the GPU), otherwise the prefill kernel. */
typedef struct kiln_gpu_attn {
    kiln_devptr out, q;
    int64_t q_stride;
    kiln_devptr kcache, vcache;
    const kiln_kv_layout *l;
    int nq;
    kiln_devptr qstart, ctx_len, block_tables;
    int n_seqs, max_blocks;
    float scale;
    int window;
    int max_q_len, max_ctx_len;
    int force_partition; /* tests/bench: >0 forces this split-K partition size (decode), -1 forbids splitting */
    int prefill_kernel;  /* tests/bench: 1 runs the first prefill kernel (as $KILN_PREFILL_KERNEL=v1 does), 3
                            the warp-specialized wgmma one (=wg2; on sm_90 with a 16-bit cache and head dim
                            64 or 128, the default kernel elsewhere), 4 attn_prefill (=v2; where it serves),
                            5 wg2 in its persistent form (=wg2p, kiln_attn_prefill_wg2p; where wg2 serves);
                            0: as $KILN_PREFILL_KERNEL says, else by the shape. 2 (=wg, the first wgmma
                            kernel) was removed: it counts as 0, and =wg as unset */
    /* A decode step (max_q_len <= 1, token t of sequence t) whose rope + KV write this call does first: q's
     * rows hold the nq query heads, then the KV heads' keys and values (as kiln_gpu_rope_kv_write reads them,
     * row stride q_stride), positions rope_pos [n_seqs] and cache slots rope_slots [n_seqs] (int32). Fused
     * into the decode kernel where decode_rope is on, for 16-bit caches of act with rotate-half over all of a
     * head dim that is a multiple of 32 and no dynamic NTK: kiln_attn_decode_rope, or kiln_attn_decode_pw_rope
     * where the persistent-warp kernel runs (head dim a multiple of 64, a KV group a whole KV head);
     * elsewhere kiln_gpu_rope_kv_write runs in front. Fused, q's rows keep their unrotated q and k (the
     * caches get the same bits either way). NULL: none. */
    const kiln_gpu_rope_params *rope;
    kiln_devptr rope_pos, rope_slots;
} kiln_gpu_attn;
kiln_status kiln_gpu_attention(kiln_gpu *g, kiln_rt_stream *s, kiln_dtype act, const kiln_gpu_attn *a);
/* What the paged kernels (KV write, attention) need the KV cache's block size and head dim to be multiples of,
 * for a cache of kv: 8 (a value row's 8-slot runs and a key's x = 8 elements are 16-byte accesses), 16 for FP8
 * (the attention's 16-token tiles, x = 16) */
static inline int kiln_gpu_kv_multiple(kiln_dtype kv) {
    return kv == KILN_DTYPE_FP8_E4M3 || kv == KILN_DTYPE_FP8_E5M2 ? 16 : 8;
}

/* Per-row sampling parameters, on the device [n_rows] (48 bytes each). */
typedef struct kiln_gpu_sample_params {
    float temperature, top_p, min_p, repetition, presence, frequency;
    int32_t top_k, pad;
    uint64_t seed, step;
} kiln_gpu_sample_params;

/* Penalties and bans in place on logits [n_rows, V] f32 (sampler.h steps
 * 1-2). Token lists are CSR: ids + offsets [n_rows + 1]; any may be 0. */
kiln_status kiln_gpu_sample_penalties(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr logits, int n_rows, int V,
                                      kiln_devptr params, kiln_devptr prompt_ids, kiln_devptr prompt_off,
                                      kiln_devptr out_ids, kiln_devptr out_off, kiln_devptr banned_ids,
                                      kiln_devptr banned_off);
/* tokens [n_rows] int32 (sampler.h steps 3-6); logprobs [n_rows] f32 or 0. */
kiln_status kiln_gpu_sample(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr tokens, kiln_devptr logprobs,
                            kiln_devptr logits, int n_rows, int V, kiln_devptr params);
/* kiln_gpu_sample for rows the caller knows are all greedy (temperature <= 0
 * in every row of params, penalties and bans already applied or none): the
 * same tokens (argmax, lowest index on ties), the logprobs within fp32
 * rounding, each row split over blocks (a thread-block cluster, or chunks of
 * 4096 logits whose last block merges: kernel_src/sample_argmax.cu) as
 * kiln_gpu_params.sample_cluster says; else kiln_gpu_sample itself (params is
 * only read there). */
kiln_status kiln_gpu_sample_greedy(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr tokens, kiln_devptr logprobs,
                                   kiln_devptr logits, int n_rows, int V, kiln_devptr params);
/* Tests and benchmarks: set kiln_gpu_params.sample_cluster's value (0: off,
 * KILN_SAMPLE_CLUSTER_SPLIT or _AUTO: the split kernel); returns the previous one. */
int kiln_gpu_set_sample_cluster(kiln_gpu *g, int cl);
/* The cluster size kiln_gpu_sample_greedy launches now for n_rows rows on this device (0: kiln_sample;
 * KILN_SAMPLE_CLUSTER_SPLIT: the split kernel). */
int kiln_gpu_sample_cluster(const kiln_gpu *g, int n_rows);

#endif /* KILN_OPS_GPU_H */
