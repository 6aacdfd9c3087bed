/*
 * ops_gpu.c -- launch wrappers of the CUDA op variants (see ops_gpu.h):
 * pick the specialization, size grids and shared memory, check arguments,
 * and launch through the per-device kernel set or cuBLASLt.
 *
 * Ownership: kiln_gpu owns its kernel set, cuBLASLt handle and the device
 * workspace (attention split-K partials, sampling scratch, penalty counts
 * that are kept zero between calls). Thread-safety: one thread at a time.
 */
#include "ops_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kiln_gpu {
    kiln_rt_device *dev;
    kiln_rt_kernels *k;
    kiln_rt_blas *blas;
    kiln_rt_mempool *pool;
    kiln_devptr blas_ws, ws, sample_ws, counts;
    kiln_devptr sa_part, sa_counters; /* kiln_sample_argmax_split: [max_rows, vocab / SA_CHUNK] records, [max_rows] zeros */
    size_t blas_ws_bytes, ws_bytes;
    int max_rows, vocab;
    int gemv_max_m, gemv_rows, gemv_unroll, gemv_ksplit, gemv_rule, gemv_rope, gemv_ar, gemv_silu, gemv_silu_ksplit, gemv_silu_unroll;
    int gemv_norm; /* the add + RMSNorm folded into batch-1 GEMVs ($KILN_GEMV_NORM) */
    int gemv_rope_unroll, gemv_rope_ksplit, gemv_rope_rows; /* the rope GEMV's tiling ($KILN_GEMV_ROPE_UNROLL / _KSPLIT / _ROWS) */
    int tc_max_m, tc_warps, tc_wk, tc_rt, tc_stages, tc_split, tc_prefetch_mb; /* gemm_tc knobs */
    int sk_max_m, sk_max_mb, sk_max_mb32, sk_warps, sk_rt, sk_stages, sk_split, sk_silu; /* gemm_sk knobs */
    int skx_max_m; /* gemm_skx for 2 <= M <= this ($KILN_SKX_MAX_M, <= 32; 0 never) */
    int skx_m1;     /* ... plain one-row GEMMs through it in place of the GEMV ($KILN_SKX_M1) */
    int sk_wg; /* gemm_sk on the warpgroup MMA on sm_90 ($KILN_SKGEMM_WG): 1 kernel_src/gemm_sk_wg.cu, 2 fed by TMA
                * (kernel_src/gemm_sk_tma.cu; the rope epilogue stays on gemm_sk_wg) */
    int sk_tma;            /* gemm_sk's plain and SiLU epilogues through gemm_sk_tma from this MAXM on (sm_90; 0 never) */
    int sk_tma_stages;     /* ... its stages there: plain, */
    int sk_tma_glu_stages; /* SiLU-and-mul ($KILN_SKGEMM_TMA, _STAGES, _GLU_STAGES) */
    int sk_rope_stages; /* its stages when set ($KILN_SKGEMM_ROPE_STAGES, 2..8; 0: as the other gemm_sk launches) */
    int sk_rope; /* the qkv GEMM with rope + KV write through gemm_sk for 2 <= M <= sk_rope (<= 32; 0: never;
                    $KILN_SKGEMM_ROPE) */
    struct { int N, K, maxm, epi, split; } sk_fit[16]; /* gemm_sk splits that fit one wave, by shape and
                                                          epilogue (sk_epilogue) */
    kiln_devptr sk_prof; /* gemm_sk's timing records (kiln_gpu_set_skgemm_profile), 0: none */
    int sk_prof_blocks, sk_prof_last;
    int n_sk_fit;
    int elem_wide_min; /* rows / tokens from which the elementwise ops take their wide kernels (0: never) */
    bool decode_adaptive; /* $KILN_DECODE_ADAPTIVE (default 1): decode_partition */
    bool prefill_persist; /* wg2 in its persistent form where no kernel is asked for ($KILN_PREFILL_PERSIST) */
    int decode_warps;     /* warps of a decode-attention block, 16-bit caches (2|4, 0: by the grid;
                             kiln_gpu_params.decode_warps) */
    int decode_fused;     /* split decode attention combines its partitions in its last block ($KILN_DECODE_FUSED_REDUCE: 1 on, 2 from 2 sequences, 3 the fixed-partition split of 16-bit caches only) */
    kiln_devptr attn_counters; /* [KILN_ATTN_COUNTERS] int, zero between launches: its arrival counters */
    int rope_dec_max;     /* rope + KV write of at most this many tokens: kiln_rope_kv_write_dec (kiln_gpu_params) */
    int decode_pw;        /* the persistent-warp decode attention (kiln_attn_decode_pw), 16-bit caches: 0 never, 1 by
                             the grid (decode_pw_plan), 2 wherever no split is planned ($KILN_DECODE_PW) */
    int decode_pw_k;      /* its items a warp when set (1..32; $KILN_DECODE_PW_ITEMS; 0: by the grid) */
    int decode_pw_warps;  /* its warps a block (1..4; $KILN_DECODE_PW_WARPS, default 4) */
    int decode_pw_stages; /* its tile slots a warp (2..6; $KILN_DECODE_PW_STAGES, default 3) */
    bool decode_rope;     /* kiln_gpu_attn.rope fused into kiln_attn_decode_rope where it can ($KILN_DECODE_ROPE) */
    int kv_tile;          /* $KILN_KV_TILE (default KILN_KV_TILE_DEFAULT): the wide KV writes in tiles (1 both; 2 kv_write
                             only, through its cp.async pipeline where that applies) */
    int sample_cl;        /* kiln_gpu_sample_greedy's cluster size (1|2|4|8; 0: kiln_sample) */
};

/* logits a block of kiln_sample_argmax_split takes (kernel_src/sample_argmax.cu SNT * SPT * 4) */
#define SA_CHUNK 4096

/* A tuning knob: the parameter when set (non-zero), else $env when set,
 * else the default. */
static int knob(int param, const char *env, int def) {
    if (param) return param;
    const char *v = getenv(env);
    return v && *v ? atoi(v) : def;
}

/* The rows up to which the qkv GEMM takes gemm_sk's rope + KV write epilogue, from
 * $KILN_SKGEMM_ROPE / kiln_gpu_set_skgemm_rope: 1 means all it serves (32), 2..32 that many, else none */
static int sk_rope_rows(int v) { return v == 1 ? 32 : v >= 2 ? KILN_MIN(v, 32) : 0; }
static void tc_knobs(kiln_gpu *g, const kiln_gpu_params *p);
/* The MAXM bucket of the tensor-core GEMMs (gemm_tc, gemm_sk) for M <= 64 */
static int mma_maxm(int M) { return M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : 64; }
/* does gemm_sk_tma take gemm_sk's plain and SiLU launches of bucket maxm by default ($KILN_SKGEMM_TMA, sm_90)? */
static bool sk_tma_at(const kiln_gpu *g, int maxm) {
    const kiln_rt_device_info *di = kiln_rt_device_get_info(g->dev);
    return g->sk_tma > 0 && maxm >= g->sk_tma && di->cc_major == 9 && di->cc_minor == 0;
}

kiln_status kiln_gpu_create(kiln_rt_device *d, const kiln_gpu_params *p, kiln_gpu **out) {
    kiln_status st = KILN_OK;
    kiln_gpu *g = calloc(1, sizeof *g);
    KILN_CHECK_ALLOC(g);
    g->dev = d;
    g->ws_bytes = p && p->workspace_bytes ? p->workspace_bytes : (size_t)64 << 20;
    g->blas_ws_bytes = p && p->blas_workspace ? p->blas_workspace : (size_t)32 << 20;
    g->max_rows = p && p->max_sample_rows > 0 ? p->max_sample_rows : 256;
    g->vocab = p && p->vocab > 0 ? p->vocab : 131072;
    g->gemv_max_m = knob(p ? p->gemv_max_m : 0, "KILN_GEMV_MAX_M", KILN_GEMV_MAX_M_DEFAULT);
    if (g->gemv_max_m < 0) g->gemv_max_m = 0;
    if (g->gemv_max_m > 8) g->gemv_max_m = 8; /* kernel_src/gemv.cu MAXM */
    g->gemv_rows = knob(p ? p->gemv_rows : 0, "KILN_GEMV_ROWS", KILN_GEMV_ROWS_DEFAULT);
    if (g->gemv_rows != 1 && g->gemv_rows != 2 && g->gemv_rows != 4) g->gemv_rows = KILN_GEMV_ROWS_DEFAULT;
    g->gemv_unroll = knob(p ? p->gemv_unroll : 0, "KILN_GEMV_UNROLL", KILN_GEMV_UNROLL_DEFAULT);
    if (g->gemv_unroll != 2 && g->gemv_unroll != 4 && g->gemv_unroll != 8) g->gemv_unroll = KILN_GEMV_UNROLL_DEFAULT;
    if (g->gemv_rows * g->gemv_unroll > 16) g->gemv_unroll = 16 / g->gemv_rows; /* registers (no spills) */
    g->gemv_ksplit = knob(p ? p->gemv_ksplit : 0, "KILN_GEMV_KSPLIT", KILN_GEMV_KSPLIT_DEFAULT);
    if (g->gemv_ksplit != 1 && g->gemv_ksplit != 2 && g->gemv_ksplit != 4) g->gemv_ksplit = KILN_GEMV_KSPLIT_DEFAULT;
    g->gemv_rule = knob(p ? p->gemv_rule : 0, "KILN_GEMV_RULE", KILN_GEMV_RULE_DEFAULT);
    if (g->gemv_rule < 0 || g->gemv_rule > 6) g->gemv_rule = 0;
    g->gemv_silu = knob(p ? p->gemv_silu : 0, "KILN_GEMV_SILU", KILN_GEMV_SILU_DEFAULT) > 0;
    g->gemv_rope = knob(p ? p->gemv_rope : 0, "KILN_GEMV_ROPE", KILN_GEMV_ROPE_DEFAULT) > 0;
    g->gemv_rope_unroll = knob(0, "KILN_GEMV_ROPE_UNROLL", KILN_GEMV_ROPE_UNROLL);
    if (g->gemv_rope_unroll != 2 && g->gemv_rope_unroll != 4 && g->gemv_rope_unroll != 8)
        g->gemv_rope_unroll = KILN_GEMV_ROPE_UNROLL;
    g->gemv_rope_ksplit = knob(0, "KILN_GEMV_ROPE_KSPLIT", 0); /* 0: by the grid */
    if (g->gemv_rope_ksplit != 1 && g->gemv_rope_ksplit != 2 && g->gemv_rope_ksplit != 4) g->gemv_rope_ksplit = 0;
    g->gemv_rope_rows = knob(0, "KILN_GEMV_ROPE_ROWS", KILN_GEMV_ROPE_ROWS);
    if (g->gemv_rope_rows != 1 && g->gemv_rope_rows != 2) g->gemv_rope_rows = KILN_GEMV_ROPE_ROWS;
    g->gemv_ar = knob(p ? p->gemv_ar : 0, "KILN_GEMV_AR", KILN_GEMV_AR_DEFAULT) > 0;
    g->gemv_norm = KILN_MAX(0, knob(p ? p->gemv_norm : 0, "KILN_GEMV_NORM", KILN_GEMV_NORM_DEFAULT));
    g->gemv_silu_ksplit = knob(p ? p->gemv_silu_ksplit : 0, "KILN_GEMV_SILU_KSPLIT", KILN_GEMV_SILU_KSPLIT_DEFAULT);
    if (g->gemv_silu_ksplit != 1 && g->gemv_silu_ksplit != 2) g->gemv_silu_ksplit = KILN_GEMV_SILU_KSPLIT_DEFAULT;
    g->gemv_silu_unroll = knob(p ? p->gemv_silu_unroll : 0, "KILN_GEMV_SILU_UNROLL", KILN_GEMV_SILU_UNROLL_DEFAULT);
    if (g->gemv_silu_unroll != 2 && g->gemv_silu_unroll != 4 && g->gemv_silu_unroll != 8)
        g->gemv_silu_unroll = KILN_GEMV_SILU_UNROLL_DEFAULT;
    tc_knobs(g, p);
    g->sk_wg = KILN_MAX(0, KILN_MIN(2, knob(p ? p->skgemm_wg : 0, "KILN_SKGEMM_WG", KILN_SKGEMM_WG_DEFAULT)));
    g->sk_tma = knob(0, "KILN_SKGEMM_TMA", KILN_SKGEMM_TMA_DEFAULT);
    g->sk_tma = g->sk_tma <= 0 ? 0 : g->sk_tma == 1 ? 32 : g->sk_tma; /* 1: from MAXM 32 */
    const kiln_rt_device_info *sdi = kiln_rt_device_get_info(d);
    int def_max_m = 0, def_mb32 = 0; /* the defaults for the kernel that takes 17..64 rows here */
    kiln_skgemm_default_limits(sdi->cc_major, sdi->cc_minor, g->sk_tma, g->sk_wg, &def_max_m, &def_mb32);
    g->sk_max_m = knob(p ? p->skgemm_max_m : 0, "KILN_SKGEMM_MAX_M", def_max_m);
    g->sk_max_m = KILN_MAX(0, KILN_MIN(g->sk_max_m, 64)); /* MAXM buckets 8..64 */
    g->skx_max_m = KILN_MAX(0, KILN_MIN(32, knob(p ? p->skx_max_m : 0, "KILN_SKX_MAX_M", KILN_SKX_MAX_M_DEFAULT)));
    g->skx_m1 = knob(p ? p->skx_m1 : 0, "KILN_SKX_M1", KILN_SKX_M1_DEFAULT) > 0;
    g->sk_warps = knob(p ? p->skgemm_warps : 0, "KILN_SKGEMM_WARPS", KILN_SKGEMM_WARPS_DEFAULT);
    if (g->sk_warps != 4 && g->sk_warps != 8) g->sk_warps = KILN_SKGEMM_WARPS_DEFAULT;
    g->sk_rt = knob(p ? p->skgemm_tiles : 0, "KILN_SKGEMM_TILES", 0); /* 0: by MAXM */
    if (g->sk_rt != 1 && g->sk_rt != 2 && g->sk_rt != 4) g->sk_rt = 0;
    g->sk_silu = knob(p ? p->skgemm_silu : 0, "KILN_SKGEMM_SILU", KILN_SKGEMM_SILU_DEFAULT) > 0;
    g->sk_max_mb = knob(p ? p->skgemm_max_weight_mb : 0, "KILN_SKGEMM_MAX_WEIGHT_MB", KILN_SKGEMM_MAX_WEIGHT_MB_DEFAULT);
    g->sk_max_mb32 = knob(0, "KILN_SKGEMM_MAX_WEIGHT_MB_M32", def_mb32);
    g->sk_stages = knob(p ? p->skgemm_stages : 0, "KILN_SKGEMM_STAGES", 0); /* 0: by MAXM */
    if (g->sk_stages < 2 || g->sk_stages > 16) g->sk_stages = 0; /* (above 8: gemm_sk_tma only, sk_gemm) */
    g->sk_split = knob(p ? p->skgemm_split : 0, "KILN_SKGEMM_SPLIT", 0); /* 0: auto */
    if (g->sk_split < 0 || g->sk_split > 8) g->sk_split = 0;
    g->sk_rope = sk_rope_rows(knob(0, "KILN_SKGEMM_ROPE", KILN_SKGEMM_ROPE_DEFAULT));
    g->sk_rope_stages = knob(0, "KILN_SKGEMM_ROPE_STAGES", 0);
    if (g->sk_rope_stages < 2 || g->sk_rope_stages > 8) g->sk_rope_stages = 0;
    g->sk_tma_stages = KILN_MAX(2, KILN_MIN(16, knob(0, "KILN_SKGEMM_TMA_STAGES", KILN_SKGEMM_TMA_STAGES_DEFAULT)));
    g->sk_tma_glu_stages =
        KILN_MAX(2, KILN_MIN(8, knob(0, "KILN_SKGEMM_TMA_GLU_STAGES", KILN_SKGEMM_TMA_GLU_STAGES_DEFAULT)));
    g->prefill_persist = knob(0, "KILN_PREFILL_PERSIST", KILN_PREFILL_PERSIST_DEFAULT) > 0;
    g->elem_wide_min = knob(p ? p->elem_wide_min : 0, "KILN_ELEM_WIDE_MIN", KILN_ELEM_WIDE_MIN_DEFAULT);
    if (g->elem_wide_min < 0) g->elem_wide_min = 0;
    g->decode_adaptive = knob(0, "KILN_DECODE_ADAPTIVE", 1) > 0;
    g->rope_dec_max = knob(p ? p->rope_dec_max : 0, "KILN_ROPE_DEC_MAX", KILN_ROPE_DEC_MAX_DEFAULT);
    if (g->rope_dec_max < 0) g->rope_dec_max = 0;
    g->decode_warps = knob(p ? p->decode_warps : 0, "KILN_DECODE_WARPS", 0);
    if (g->decode_warps != 2 && g->decode_warps != 4) g->decode_warps = 0; /* by the grid */
    g->decode_fused = knob(0, "KILN_DECODE_FUSED_REDUCE", KILN_DECODE_FUSED_REDUCE_DEFAULT);
    kiln_gpu_set_decode_pw(g, knob(0, "KILN_DECODE_PW", KILN_DECODE_PW_DEFAULT), knob(0, "KILN_DECODE_PW_ITEMS", 0));
    g->decode_pw_warps = KILN_MAX(1, KILN_MIN(4, knob(0, "KILN_DECODE_PW_WARPS", 4)));
    g->decode_pw_stages = KILN_MAX(2, KILN_MIN(6, knob(0, "KILN_DECODE_PW_STAGES", 3)));
    g->decode_rope = knob(0, "KILN_DECODE_ROPE", KILN_DECODE_ROPE_DEFAULT) > 0;
    g->kv_tile = knob(0, "KILN_KV_TILE", KILN_KV_TILE_DEFAULT);
    if (g->kv_tile < 0 || g->kv_tile > 2) g->kv_tile = KILN_KV_TILE_DEFAULT;
    kiln_gpu_set_sample_cluster(g, knob(p ? p->sample_cluster : 0, "KILN_SAMPLE_CLUSTER", KILN_SAMPLE_CLUSTER_DEFAULT));
    size_t sample_bytes = (size_t)g->max_rows * (size_t)g->vocab * 4;
    const size_t sa_part_bytes = (size_t)g->max_rows * (size_t)((g->vocab + SA_CHUNK - 1) / SA_CHUNK) * 16,
                 sa_cnt_bytes = 4 * (size_t)g->max_rows;
    size_t total = g->ws_bytes + g->blas_ws_bytes + 2 * sample_bytes + 4 * KILN_ATTN_COUNTERS + sa_part_bytes +
                   sa_cnt_bytes + 7 * 256;
    KILN_TRY(kiln_rt_pool_create(d, "workspace", total, &g->pool));
    KILN_TRY(kiln_rt_pool_alloc(g->pool, g->blas_ws_bytes, 256, &g->blas_ws));
    KILN_TRY(kiln_rt_pool_alloc(g->pool, g->ws_bytes, 256, &g->ws));
    KILN_TRY(kiln_rt_pool_alloc(g->pool, sample_bytes, 256, &g->sample_ws));
    KILN_TRY(kiln_rt_pool_alloc(g->pool, sample_bytes, 256, &g->counts));
    KILN_TRY(kiln_rt_memset8(g->counts, 0, sample_bytes, NULL));
    KILN_TRY(kiln_rt_pool_alloc(g->pool, 4 * KILN_ATTN_COUNTERS, 256, &g->attn_counters));
    KILN_TRY(kiln_rt_memset8(g->attn_counters, 0, 4 * KILN_ATTN_COUNTERS, NULL));
    KILN_TRY(kiln_rt_pool_alloc(g->pool, sa_part_bytes, 256, &g->sa_part));
    KILN_TRY(kiln_rt_pool_alloc(g->pool, sa_cnt_bytes, 256, &g->sa_counters));
    KILN_TRY(kiln_rt_memset8(g->sa_counters, 0, sa_cnt_bytes, NULL));

    KILN_TRY(kiln_rt_kernels_create(d, p ? p->jit : NULL, &g->k));
    KILN_TRY(kiln_rt_blas_create(d, g->blas_ws, g->blas_ws_bytes, &g->blas));
    *out = g;
    return KILN_OK;
fail:
    kiln_gpu_destroy(g);
    return st;
}

void kiln_gpu_destroy(kiln_gpu *g) {
    if (!g) return;
    kiln_rt_blas_destroy(g->blas);
    kiln_rt_kernels_destroy(g->k);
    kiln_rt_pool_destroy(g->pool);
    free(g);
}

kiln_rt_kernels *kiln_gpu_kernels(kiln_gpu *g) { return g->k; }
kiln_rt_blas *kiln_gpu_blas(kiln_gpu *g) { return g->blas; }
kiln_rt_device *kiln_gpu_device(kiln_gpu *g) { return g->dev; }

int kiln_gpu_set_skgemm_profile(kiln_gpu *g, kiln_devptr buf, int max_blocks) {
    g->sk_prof = buf;
    g->sk_prof_blocks = buf ? max_blocks : 0;
    int last = g->sk_prof_last;
    g->sk_prof_last = 0;
    return last;
}

int kiln_gpu_set_elem_wide_min(kiln_gpu *g, int n) {
    int was = g->elem_wide_min;
    g->elem_wide_min = n > 0 ? n : 0;
    return was;
}

int kiln_gpu_set_rope_dec_max(kiln_gpu *g, int n) {
    int was = g->rope_dec_max;
    g->rope_dec_max = n > 0 ? n : 0;
    return was;
}

int kiln_gpu_set_decode_warps(kiln_gpu *g, int n) {
    int was = g->decode_warps;
    g->decode_warps = n == 2 || n == 4 ? n : 0;
    return was;
}

int kiln_gpu_set_decode_pw(kiln_gpu *g, int mode, int items_per_warp) {
    int was = g->decode_pw;
    g->decode_pw = mode >= 0 && mode <= 2 ? mode : KILN_DECODE_PW_DEFAULT;
    g->decode_pw_k = items_per_warp >= 1 && items_per_warp <= 32 ? items_per_warp : 0;
    return was;
}

int kiln_gpu_set_decode_rope(kiln_gpu *g, int on) {
    int was = g->decode_rope;
    g->decode_rope = on > 0;
    return was;
}

int kiln_gpu_set_decode_fused_reduce(kiln_gpu *g, int on) {
    int was = g->decode_fused;
    g->decode_fused = on > 0 ? on : 0;
    return was;
}

int kiln_gpu_set_skgemm_rope(kiln_gpu *g, int on) {
    int was = g->sk_rope;
    g->sk_rope = sk_rope_rows(on);
    return was;
}

int kiln_gpu_set_gemv_rope_ksplit(kiln_gpu *g, int ks) {
    int was = g->gemv_rope_ksplit;
    g->gemv_rope_ksplit = ks == 1 || ks == 2 || ks == 4 ? ks : 0;
    return was;
}

int kiln_gpu_set_gemv_rope_rows(kiln_gpu *g, int rows) {
    int was = g->gemv_rope_rows;
    g->gemv_rope_rows = rows == 1 || rows == 2 ? rows : KILN_GEMV_ROPE_ROWS;
    return was;
}

int kiln_gpu_set_kv_tile(kiln_gpu *g, int mode) {
    int was = g->kv_tile;
    g->kv_tile = mode >= 0 && mode <= 2 ? mode : KILN_KV_TILE_DEFAULT;
    return was;
}

kiln_status kiln_gpu_prepare(kiln_gpu *g, const kiln_jit_model *m) {
    kiln_status st = KILN_OK;
    kiln_jit_spec_list *l = calloc(1, sizeof *l); /* (~37 KiB: not on a thread's stack) */
    KILN_CHECK(l, KILN_ERR_OUT_OF_MEMORY, "out of memory listing the model's kernels");
    KILN_TRY(kiln_jit_model_specs(m, l));
    if (l->dropped)
        KILN_WARN("the model's kernel warm set is full (%d specializations); the others (%d asked for) compile on "
                  "first use", l->n, l->dropped);
    KILN_TRY(kiln_rt_kernels_prepare(g->k, l->specs, l->n));
fail:
    free(l);
    return st;
}

/* ---------------------------------------------------------------- helpers */

static const char *dt(kiln_dtype t) { return kiln_dtype_name(t); }
static bool act_ok(kiln_dtype t) { return t == KILN_DTYPE_BF16 || t == KILN_DTYPE_F16 || t == KILN_DTYPE_F32; }
static int vec_elems(kiln_dtype t) { return (int)(16 / kiln_dtype_size(t)); }
static unsigned grid_for(int64_t n_items, int threads) {
    int64_t b = (n_items + threads - 1) / threads;
    if (b > 132 * 16) b = 132 * 16; /* grid-stride loops beyond this */
    return (unsigned)(b > 0 ? b : 1);
}

#define LAUNCH(f, gx, gy, gz, bx, smem, s, ...)                                                \
    do {                                                                                       \
        void *args_[] = {__VA_ARGS__};                                                         \
        KILN_TRY(kiln_rt_launch((f), (kiln_rt_dim3){(gx), (gy), (gz)}, (kiln_rt_dim3){(bx), 1, 1}, (smem), (s), \
                                args_));                                                       \
    } while (0)

static kiln_status get(kiln_gpu *g, const char *name, kiln_rt_func **f, const char *fmt, ...) KILN_PRINTF(4, 5);
static kiln_status get(kiln_gpu *g, const char *name, kiln_rt_func **f, const char *fmt, ...) {
    char defs[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(defs, sizeof defs, fmt, ap);
    va_end(ap);
    return kiln_rt_kernels_get(g->k, name, defs, f);
}

/* -------------------------------------------------------------------- ops */

kiln_status kiln_gpu_embed(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_dtype act, kiln_devptr ids, int T,
                           kiln_devptr w, kiln_dtype wdt, int64_t V_local, int H, int64_t vocab_start) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK(act_ok(act) && act_ok(wdt), KILN_ERR_UNSUPPORTED, "embed: %s from %s", dt(act), dt(wdt));
    KILN_TRY(get(g, "embed", &f, "ACT=%s W=%s", dt(act), dt(wdt)));
    LAUNCH(f, (unsigned)T, 1, 1, 256, 0, s, &out, &ids, &T, &w, &V_local, &H, &vocab_start);
fail:
    return st;
}

/* n rows / tokens take the wide elementwise kernels (kernel_src/rmsnorm_wide.cu,
 * rope_kv_wide.cu: prefill); fewer keep those of rmsnorm.cu and rope_kv.cu,
 * which decode launches (elem2 measured faster at 4096 tokens, but decode
 * steps were 6-7% slower with them) */
static bool wide(const kiln_gpu *g, int n) { return g->elem_wide_min > 0 && n >= g->elem_wide_min; }

/* rmsnorm / add_rmsnorm: a warp per row up to MAXW (4) vectors per lane; else
 * a block per row, MAXB (4) vectors per thread, up to the kernels'
 * __launch_bounds__ (1024 threads in kernel_src/rmsnorm.cu, RMS_THREADS = 512
 * in rmsnorm_wide.cu, which elem_wide_min rows and more take); longer rows
 * in two passes with that many threads */
static kiln_status norm(kiln_gpu *g, kiln_rt_stream *s, bool add, kiln_devptr out, kiln_devptr residual,
                        kiln_devptr x, kiln_devptr w, kiln_dtype act, kiln_dtype wdt, int rows, int dim, float eps) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK(act_ok(act) && act_ok(wdt), KILN_ERR_UNSUPPORTED, "rmsnorm: %s with %s weights", dt(act), dt(wdt));
    int ve = vec_elems(act), nv = dim / ve;
    KILN_CHECK(dim % ve == 0, KILN_ERR_UNSUPPORTED, "rmsnorm: dim %d is not a multiple of %d", dim, ve);
    const bool wd = wide(g, rows);
    unsigned grid, threads;
    if (nv <= 32 * 4) {
        threads = 256;
        grid = (unsigned)((rows + 7) / 8);
    } else {
        threads = (unsigned)KILN_MIN(wd ? 512 : 1024, ((nv + 3) / 4 + 31) / 32 * 32);
        grid = (unsigned)rows;
    }
    const char *name = wd ? (add ? "add_rmsnorm_wide" : "rmsnorm_wide") : (add ? "add_rmsnorm" : "rmsnorm");
    KILN_TRY(get(g, name, &f, "ACT=%s W=%s", dt(act), dt(wdt)));
    if (add) LAUNCH(f, grid, 1, 1, threads, 0, s, &out, &residual, &x, &w, &rows, &dim, &eps);
    else LAUNCH(f, grid, 1, 1, threads, 0, s, &out, &x, &w, &rows, &dim, &eps);
fail:
    return st;
}

kiln_status kiln_gpu_rmsnorm(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_devptr w,
                             kiln_dtype act, kiln_dtype wdt, int rows, int dim, float eps) {
    return norm(g, s, false, out, 0, x, w, act, wdt, rows, dim, eps);
}

kiln_status kiln_gpu_add_rmsnorm(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr residual, kiln_devptr x,
                                 kiln_devptr w, kiln_dtype act, kiln_dtype wdt, int rows, int dim, float eps) {
    return norm(g, s, true, out, residual, x, w, act, wdt, rows, dim, eps);
}

/* The tensor-core small-M GEMM (kernel_src/gemm_tc.cu): knobs read once by kiln_gpu_create
 * (param, else env, else default; 0 for tiles, stages and warps along K means
 * "by M / by shape"), and the launch. */
static void tc_knobs(kiln_gpu *g, const kiln_gpu_params *p) {
    g->tc_max_m = knob(p ? p->tcgemm_max_m : 0, "KILN_TCGEMM_MAX_M", KILN_TCGEMM_MAX_M_DEFAULT);
    g->tc_max_m = KILN_MAX(0, KILN_MIN(g->tc_max_m, 64)); /* MAXM buckets 8..64 */
    g->tc_warps = knob(p ? p->tcgemm_warps : 0, "KILN_TCGEMM_WARPS", KILN_TCGEMM_WARPS_DEFAULT);
    if (g->tc_warps != 4 && g->tc_warps != 8) g->tc_warps = KILN_TCGEMM_WARPS_DEFAULT;
    g->tc_wk = knob(p ? p->tcgemm_warps_k : 0, "KILN_TCGEMM_WARPS_K", 0); /* 0: default */
    if (g->tc_wk != 1 && g->tc_wk != 2 && g->tc_wk != 4) g->tc_wk = 0;
    g->tc_rt = knob(p ? p->tcgemm_tiles : 0, "KILN_TCGEMM_TILES", 0); /* 0: by MAXM */
    if (g->tc_rt != 1 && g->tc_rt != 2 && g->tc_rt != 4) g->tc_rt = 0;
    g->tc_stages = knob(p ? p->tcgemm_stages : 0, "KILN_TCGEMM_STAGES", 0); /* 0: by MAXM */
    if (g->tc_stages < 0 || g->tc_stages > 4) g->tc_stages = 0;
    g->tc_split = knob(p ? p->tcgemm_split : 0, "KILN_TCGEMM_SPLIT", 0); /* 0: auto */
    if (g->tc_split < 0) g->tc_split = 0;
    g->tc_prefetch_mb = knob(p ? p->tcgemm_prefetch_mb : 0, "KILN_TCGEMM_PREFETCH_MB", KILN_TCGEMM_PREFETCH_MB_DEFAULT);
    if (g->tc_prefetch_mb < 0) g->tc_prefetch_mb = 0;
}

/* The most W chunks in flight per warp that compile without spills on sm_90
 * (`kiln kernels`: 128 registers, 16 warps an SM), 0: none. */
static int tc_max_stages(int maxm, int rt) {
    if (rt == 1) return maxm >= 64 ? 3 : 4;
    if (rt == 2) return maxm >= 64 ? 1 : 2;
    return maxm <= 16 ? 1 : 0; /* rt 4 */
}

/* Shared memory of a kernel_src/gemm_tc.cu tiling (its SMEM_BYTES; 48 KiB at most). */
static int tc_smem(int maxm, int warps, int wk, int rt, int stages) {
    int x = (stages + 1) * wk * maxm * 128, red = (wk - 1) * (warps / wk) * rt * (maxm / 8) * 4 * 32 * 4;
    return KILN_MAX(x, red);
}

static kiln_status tc_gemm(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, int64_t ld, kiln_dtype out_dt,
                           kiln_devptr x, kiln_devptr w, kiln_dtype in_dt, kiln_devptr bias, int M, int N, int K) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f, *fr = NULL;
    const int n_sms = kiln_rt_device_get_info(g->dev)->n_sms;
    int maxm = mma_maxm(M);
    int warps = g->tc_warps;
    int rt = g->tc_rt ? g->tc_rt : KILN_TCGEMM_TILES_DEFAULT(maxm);
    if (!tc_max_stages(maxm, rt)) rt = 1;
    int stages = g->tc_stages ? g->tc_stages : KILN_TCGEMM_STAGES_DEFAULT(maxm);
    stages = KILN_MIN(stages, tc_max_stages(maxm, rt));
    int nchunks = (K + 63) / 64;
    /* blocks an SM holds: 16 warps (128 registers a thread; v2's shared
     * memory is at most 48 KiB a block, 4 blocks within the SM's 228 KiB) */
    int slots = n_sms * (16 / warps);
    int wk = g->tc_wk ? g->tc_wk : KILN_TCGEMM_WARPS_K_DEFAULT;
    if (!wk) {
        /* warps along K by shape: the fewest that fill the SMs with at most
         * 2 K slices (fp32 partials of [split, M, N] through L2 and the
         * reduction), within the shared memory of the x ring */
        for (wk = 1; wk < 4; wk *= 2) {
            int t = (N + warps / wk * rt * 16 - 1) / (warps / wk * rt * 16);
            if (slots / t <= 2 || tc_smem(maxm, warps, wk * 2, rt, stages) > 48 * 1024 || wk * 2 > warps) break;
        }
    }
    while (wk > 1 && tc_smem(maxm, warps, wk, rt, stages) > 48 * 1024) wk /= 2;
    while (tc_smem(maxm, warps, wk, rt, stages) > 48 * 1024) stages--;
    /* a block: warps / wk along N (rt 16-row tiles each) by wk along K */
    int bn = warps / wk * rt * 16, tiles = (N + bn - 1) / bn;
    int split = g->tc_split;
    if (!split) {
        /* as many blocks as the SMs hold at once (one wave, no tail) */
        split = KILN_MAX(1, slots / tiles);
    }
    /* >= 2 chunks per warp, the fp32 partials [split, M, N] within the workspace */
    split = KILN_MIN(KILN_MIN(split, 1024), KILN_MAX(1, nchunks / (2 * wk)));
    split = (int)KILN_MIN((int64_t)split, (int64_t)(g->ws_bytes / ((size_t)M * (size_t)N * 4)));
    split = KILN_MAX(split, 1);
    int cps = (nchunks + split - 1) / split;
    split = (nchunks + cps - 1) / cps; /* no empty slices */
    /* L2 prefetch, per warp, of the chunks after its register stages: as
     * many as the budget allows over the blocks that can be resident */
    int64_t resident = KILN_MIN((int64_t)tiles * split, (int64_t)slots);
    int64_t step = resident * wk * bn * 128; /* bytes of one chunk of every warp */
    int pf = (int)KILN_MIN((int64_t)g->tc_prefetch_mb * (1 << 20) / step, (int64_t)nchunks);
#define TC_DEFS "ACT=%s OUT=%s MAXM=%d WARPS=%d WK=%d RT=%d STAGES=%d" /* the reduction shares the module */
    KILN_TRY(get(g, "gemm_tc", &f, TC_DEFS, dt(in_dt), dt(out_dt), maxm, warps, wk, rt, stages));
    if (split > 1) KILN_TRY(get(g, "gemm_tc_reduce", &fr, TC_DEFS, dt(in_dt), dt(out_dt), maxm, warps, wk, rt, stages));
#undef TC_DEFS
    kiln_devptr part = g->ws;
    LAUNCH(f, (unsigned)tiles, (unsigned)split, 1, (unsigned)(warps * 32), 0, s, &out, &ld, &part, &x, &w, &bias, &M,
           &N, &K, &cps, &pf);
    if (split > 1) LAUNCH(fr, (unsigned)((N + 255) / 256), (unsigned)M, 1, 256, 0, s, &out, &ld, &part, &bias, &M, &N, &split);
fail:
    return st;
}

/* gemm_sk's epilogues: none, the SiLU-and-mul (GLU=1), rope + KV write (kiln_gemm_sk_rope) */
typedef enum { SK_PLAIN, SK_GLU, SK_ROPE } sk_epilogue;
/* gemm_sk's ROPE epilogue's arguments (kiln_gpu_gemm_rope_kv_m) */
typedef struct sk_rope_args {
    int nq, nkv, bs, hd;
    kiln_devptr pos, inv_freq, kc, vc, slots;
    float mscale;
} sk_rope_args;

/* The cluster split-K GEMM (kernel_src/gemm_sk.cu): the tiling from the
 * knobs, the stages, split and shared memory from kiln_skgemm_plan, the
 * automatic split checked against the occupancy calculator once a shape and
 * remembered (sk_fit). epi: the epilogue (SK_ROPE: kiln_gemm_sk_rope with ra's
 * arguments; a block one head: RT = head_dim / (16 WARPS)). */
static kiln_status sk_gemm(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, int64_t ld, kiln_dtype out_dt,
                           kiln_devptr x, kiln_devptr w, kiln_dtype in_dt, kiln_devptr bias, int M, int N, int K,
                           sk_epilogue epi, const sk_rope_args *ra) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    const kiln_rt_device_info *di = kiln_rt_device_get_info(g->dev);
    const int maxm = mma_maxm(M);
    /* the warpgroup MMA variant (sm_90 only, compiled for sm_90a): one warpgroup a block, its ring on a
     * 1024-byte boundary (slack bytes more shared memory, in the plan's p.smem) */
    const bool sm90 = di->cc_major == 9 && di->cc_minor == 0;
    /* gemm_sk_tma: everywhere but the rope epilogue ($KILN_SKGEMM_WG=2), or from MAXM sk_tma on in its own stages */
    const bool tma_auto = epi != SK_ROPE && g->sk_wg != 2 && sk_tma_at(g, maxm);
    const bool tma = tma_auto || (sm90 && epi != SK_ROPE && g->sk_wg == 2), wg = tma || (g->sk_wg && sm90);
    /* gemm_sk_tma: + the producer warp, + its mbarriers past the ring */
    const int slack = tma ? KILN_SKGEMM_TMA_SLACK : wg ? KILN_SKGEMM_WG_SLACK : 0;
    /* GLU: 2 tiles a warp (gate, up); ROPE: BN = the head dim */
    const int warps = wg ? 4 : g->sk_warps, threads = warps * 32 + (tma ? 32 : 0), rt = epi == SK_ROPE  ? ra->hd / (16 * warps)
                                        : epi == SK_GLU ? 2
                                        : g->sk_rt      ? g->sk_rt
                                        : tma_auto      ? kiln_skgemm_tma_tiles(di->n_sms, N)
                                                        : KILN_SKGEMM_TILES_DEFAULT(maxm);
    const int stages = KILN_MIN(tma ? 16 : 8, epi == SK_ROPE && g->sk_rope_stages ? g->sk_rope_stages
                                              : g->sk_stages ? g->sk_stages
                                              : tma_auto ? (epi == SK_GLU ? g->sk_tma_glu_stages : g->sk_tma_stages)
                                                         : KILN_SKGEMM_STAGES_DEFAULT(maxm));
    int want = g->sk_split, fit = -1;
    for (int i = 0; i < g->n_sk_fit && !want; i++)
        if (g->sk_fit[i].N == N && g->sk_fit[i].K == K && g->sk_fit[i].maxm == maxm && g->sk_fit[i].epi == (int)epi)
            fit = want = g->sk_fit[i].split;
    /* gemm_sk_tma's plain GEMMs: clusters of at most KILN_SKGEMM_TMA_MAX_SPLIT (larger ones cost more at launch than
     * their split gains: bench/RESULTS.md, twenty-fourth and twenty-seventh sessions) */
    kiln_skgemm_shape p = kiln_skgemm_plan_capped(di->n_sms, di->smem_per_sm, di->smem_per_block_optin, di->cc_major, N,
                                                  K, maxm, warps, rt, stages, want, slack,
                                                  tma_auto && epi == SK_PLAIN ? KILN_SKGEMM_TMA_MAX_SPLIT : 8);
#define SK_GET(pl)                                                                                                  \
    if (epi == SK_ROPE)                                                                                             \
        KILN_TRY(get(g, wg ? "gemm_sk_rope_wg" : "gemm_sk_rope", &f, "ACT=%s MAXM=%d WARPS=%d STAGES=%d CL=%d ROPE=1 HD=%d KV=%s", dt(in_dt),   \
                     maxm, warps, (pl).stages, (pl).split, ra->hd, dt(in_dt)));                                      \
    else                                                                                                            \
        KILN_TRY(get(g, tma ? "gemm_sk_tma" : wg ? "gemm_sk_wg" : "gemm_sk", &f, "ACT=%s OUT=%s MAXM=%d WARPS=%d RT=%d STAGES=%d CL=%d GLU=%d", dt(in_dt),      \
                     dt(out_dt), maxm, warps, rt, (pl).stages, (pl).split, epi == SK_GLU))
    SK_GET(p);
    if (!want && p.split > 1) {
        /* the automatic split, lowered until the driver's occupancy
         * calculator runs every cluster (one row block's K slices) at once:
         * a cluster's blocks share a GPC, so a split that fills the SMs on
         * paper can leave a few clusters for a second wave (measured: qkv at
         * M = 32 with 5 slices of 80 KiB, 41% of copy against 61% with 4) */
        for (;;) {
            int n = 0;
            /* a failed query keeps the split (the launch reports real errors) */
            if (kiln_rt_func_max_clusters(f, (kiln_rt_dim3){(unsigned)p.tiles, (unsigned)p.split, 1},
                                          (kiln_rt_dim3){(unsigned)threads, 1, 1}, (unsigned)p.smem, &n) ||
                n >= p.tiles || p.split == 1)
                break;
            p = kiln_skgemm_plan(di->n_sms, di->smem_per_sm, di->smem_per_block_optin, di->cc_major, N, K, maxm, warps,
                                 rt, stages, p.split - 1, slack);
            SK_GET(p);
        }
    }
#undef SK_GET
    if (!g->sk_split && fit < 0 && g->n_sk_fit < (int)KILN_ARRAY_LEN(g->sk_fit)) {
        g->sk_fit[g->n_sk_fit++] = (__typeof__(g->sk_fit[0])){N, K, maxm, (int)epi, p.split};
        /* (once a shape: KILN_LOG_LEVEL=debug shows the plan each run settled on) */
        KILN_DEBUG("gemm_sk%s %dx%d at MAXM %d (%s): %d row tiles of %d, K split %d, %d stages, %d bytes of shared memory",
                   tma ? "_tma" : wg ? "_wg" : "", N, K, maxm, epi == SK_GLU ? "SiLU" : epi == SK_ROPE ? "rope" : "plain",
                   p.tiles, warps * rt * 16, p.split, p.stages, p.smem);
    }
    int cps = p.cps;
    kiln_devptr prof = g->sk_prof && p.tiles * p.split <= g->sk_prof_blocks ? g->sk_prof : 0;
    g->sk_prof_last = prof ? p.tiles * p.split : 0;
    if (epi == SK_ROPE) {
        sk_rope_args a = *ra; /* LAUNCH takes the arguments' addresses: a writable copy */
        LAUNCH(f, (unsigned)p.tiles, (unsigned)p.split, 1, (unsigned)(warps * 32), (unsigned)p.smem, s, &out,
               &ld, &x, &w, &bias, &M, &N, &K, &cps, &prof, &a.nq, &a.nkv, &a.pos, &a.inv_freq, &a.mscale, &a.kc, &a.vc,
               &a.slots, &a.bs);
    } else if (tma) {
        /* W [N, K] in 64-row boxes, x [M, K] in one box of maxm rows (rows >= M read as zeros) */
        kiln_rt_tmap wm, xm;
        KILN_TRY(kiln_rt_tmap_2d(&wm, w, in_dt, N, K, K, 64, 64));
        KILN_TRY(kiln_rt_tmap_2d(&xm, x, in_dt, M, K, K, maxm, 64));
        LAUNCH(f, (unsigned)p.tiles, (unsigned)p.split, 1, (unsigned)threads, (unsigned)p.smem, s, &out, &ld, &x, &w,
               &bias, &M, &N, &K, &cps, &prof, &wm, &xm);
    } else {
        LAUNCH(f, (unsigned)p.tiles, (unsigned)p.split, 1, (unsigned)(warps * 32), (unsigned)p.smem, s, &out,
               &ld, &x, &w, &bias, &M, &N, &K, &cps, &prof);
    }
fail:
    return st;
}

/* x stationary in registers, W through warp-private rings (kernel_src/gemm_skx.cu) in p's shape (kiln_skx_plan) */
static kiln_status skx_gemm(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, int64_t ld, kiln_dtype out_dt,
                            kiln_devptr x, kiln_devptr w, kiln_dtype in_dt, kiln_devptr bias, int M, int N, int K,
                            const kiln_skx_shape *p, kiln_devptr residual, kiln_devptr ss_out, kiln_devptr nw) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_TRY(get(g, "gemm_skx", &f, "ACT=%s OUT=%s MAXM=%d WARPS=%d KW=%d SK=%d SLOTS=%d RT=%d CL=%d%s", dt(in_dt),
                 dt(out_dt), p->maxm, p->warps, p->kw, p->sk, p->s, p->rt, p->cl, residual ? " NOUT=1" : ""));
    LAUNCH(f, (unsigned)p->tiles, (unsigned)p->cl, 1, (unsigned)(p->warps * 32), (unsigned)p->smem, s,
           &out, &ld, &x, &w, &bias, &M, &N, &K, &residual, &ss_out, &nw);
fail:
    return st;
}

/* The GEMV tiling (W rows a warp group, loads in flight, warps splitting K)
 * for an N x K weight under g's rule (KILN_GEMV_RULE): 0 the knobs as given;
 * 1 rows 2 unroll 4 K split 2; 2 rows 1 unroll 2 K split 2; 3 by shape (N <=
 * 4096: 2 / 4 / 2; N >= 16384: 1 / 4 / 2; else 1 / 2 / 2); 4 as 3 with K
 * split 1 where K <= 2048; 5 as 3 with K split 4 where N <= 4096; 6 as 3 with 1 / 2 / 4 there.
 * From bench_kernels' M = 1 rows on the H200
 * (2026-11-30): qkv best 1 / 2 / 2, o and down 2 / 4 / 2. */
static void gemv_tiling(const kiln_gpu *g, int64_t N, int64_t K, int *rows, int *unroll, int *ks) {
    *rows = g->gemv_rows, *unroll = g->gemv_unroll, *ks = g->gemv_ksplit;
    const int rule = g->gemv_rule;
    switch (rule) {
    case 1: *rows = 2, *unroll = 4, *ks = 2; break;
    case 2: *rows = 1, *unroll = 2, *ks = 2; break;
    case 3:
    case 4:
    case 5:
    case 6: {
        static const int t3[3][3] = KILN_GEMV_RULE3_TILINGS;
        const int *t = t3[N <= 4096 ? 0 : N >= 16384 ? 1 : 2];
        *rows = t[0], *unroll = t[1], *ks = t[2];
        if (rule == 4 && K <= 2048) *ks = 1;
        if (rule == 5 && N <= 4096) *ks = 4;                          /* 2 / 4 / 4 */
        if (rule == 6 && N <= 4096) *rows = 1, *unroll = 2, *ks = 4; /* 1 / 2 / 4 */
        break;
    }
    default: break;
    }
}

/* does the GEMV serve M rows of this shape? */
static bool gemv_serves(const kiln_gpu *g, kiln_dtype in_dt, int64_t M, int64_t N, int64_t K) {
    return M >= 1 && M <= g->gemv_max_m && (in_dt == KILN_DTYPE_BF16 || in_dt == KILN_DTYPE_F16) &&
           K % vec_elems(in_dt) == 0 && N <= INT32_MAX && K <= INT32_MAX;
}

/* NIN's launch arguments (kernel_src/gemv.cu): none, or the partials, their count, eps */
typedef struct nin_args {
    kiln_devptr part;
    int n;
    float eps;
} nin_args;
static nin_args nin_of(const kiln_gpu_norm_in *ni) {
    nin_args a = {0, 0, 0.0f};
    if (ni) a.part = ni->part, a.n = ni->n_part, a.eps = ni->eps;
    return a;
}

bool kiln_gpu_nin_ok(const kiln_gpu *g, kiln_gpu_nin_kind kind, kiln_dtype act, int64_t M, int64_t N, int64_t K) {
    if (!g->gemv_norm || M != 1 || !gemv_serves(g, act, M, N, K)) return false;
    switch (kind) {
    case KILN_GPU_NIN_PLAIN: return g->gemv_norm >= 2;
    case KILN_GPU_NIN_SILU: return g->gemv_silu && N % 2 == 0;
    case KILN_GPU_NIN_ROPE: return g->gemv_rope;
    }
    return false;
}

/* May the `what` launch take ni (NULL: nothing to check)? The kind's shape (kiln_gpu_nin_ok), then the
 * partials: 16-byte vectors (kernel_src/gemv.cu nin_rrms), 1..KILN_GPU_NORM_MAX_PARTS of them. */
static kiln_status nin_ready(const kiln_gpu *g, const kiln_gpu_norm_in *ni, kiln_gpu_nin_kind kind, const char *what,
                             kiln_dtype act, int64_t M, int64_t N, int64_t K) {
    if (!ni) return KILN_OK;
    if (!kiln_gpu_nin_ok(g, kind, act, M, N, K))
        return KILN_FAIL(KILN_ERR_INTERNAL, "%s of a normalised row: M %lld, N %lld, K %lld, %s (off, or not a "
                         "batch-1 GEMV)", what, (long long)M, (long long)N, (long long)K, dt(act));
    if (ni->part % 16 || ni->n_part < 1 || ni->n_part > KILN_GPU_NORM_MAX_PARTS)
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "%s of a normalised row: partials at %#llx, %d of them (16-byte "
                         "aligned, 1..%d)", what, (unsigned long long)ni->part, ni->n_part, KILN_GPU_NORM_MAX_PARTS);
    return KILN_OK;
}

/* the GEMV's blocks for an N x K weight (kiln_gpu_gemm's plain launch) */
static int gemv_blocks(const kiln_gpu *g, int64_t N, int64_t K) {
    int rows, unroll, ks;
    gemv_tiling(g, N, K, &rows, &unroll, &ks);
    const int per_block = rows * 8 / ks; /* ROWS x WARPS 8 / KSPLIT rows a block */
    return (int)((N + per_block - 1) / per_block);
}

/* gemm_skx's plan for M rows of an N x K weight on g's device (p.ok where it serves) */
static kiln_skx_shape skx_plan(const kiln_gpu *g, int64_t M, int64_t N, int64_t K) {
    const kiln_rt_device_info *di = kiln_rt_device_get_info(g->dev);
    return kiln_skx_plan(di->n_sms, di->smem_per_block_optin, di->cc_major, (int)M, N, K);
}
/* ... its one-row form in place of the GEMV ($KILN_SKX_M1) */
static kiln_skx_shape skx_m1_plan(const kiln_gpu *g, kiln_dtype act, int64_t N, int64_t K) {
    kiln_skx_shape p = {0};
    if (!g->skx_m1 || g->skx_max_m < 1 || (act != KILN_DTYPE_BF16 && act != KILN_DTYPE_F16) || K % 8 ||
        N > INT32_MAX || K > INT32_MAX)
        return p;
    return skx_plan(g, 1, N, K);
}

bool kiln_gpu_gemv_add_ss_ok(const kiln_gpu *g, kiln_dtype act, int64_t M, int64_t N, int64_t K, int *n_part) {
    if (!g->gemv_norm || M != 1 || !gemv_serves(g, act, M, N, K)) return false;
    const kiln_skx_shape p = skx_m1_plan(g, act, N, K);
    const int nb = p.ok ? p.tiles * p.cl : gemv_blocks(g, N, K);
    if (n_part) *n_part = nb;
    return nb <= KILN_GPU_NORM_MAX_PARTS;
}

/* the plain GEMV: out (or, add_ss: the residual, out = h * nw and the blocks' sums of squares) */
static kiln_status gemv_plain(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, int64_t ldo, kiln_dtype out_dt,
                              kiln_devptr x, kiln_devptr w, kiln_dtype in_dt, kiln_devptr bias, int64_t M, int64_t N,
                              int64_t K, kiln_devptr residual, kiln_devptr ss_out, kiln_devptr nw,
                              const kiln_gpu_norm_in *ni) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    int maxm = M == 1 ? 1 : M == 2 ? 2 : M <= 4 ? 4 : 8;
    int rows, unroll, ks;
    gemv_tiling(g, N, K, &rows, &unroll, &ks);
    KILN_TRY(get(g, "gemv", &f, "ACT=%s OUT=%s MAXM=%d ROWS=%d UNROLL=%d GLU=0 KSPLIT=%d%s%s", dt(in_dt), dt(out_dt),
                 maxm, rows, unroll, ks, ni ? " NIN=1" : "", residual ? " NOUT=1" : ""));
    {
        int64_t ld = ldo ? ldo : N;
        int m = (int)M, n = (int)N, k = (int)K;
        nin_args na = nin_of(ni);
        unsigned blocks = (unsigned)gemv_blocks(g, N, K);
        LAUNCH(f, blocks, 1, 1, 256, 0, s, &out, &ld, &x, &w, &bias, &m, &n, &k, &residual, &ss_out, &nw, &na.part,
               &na.n, &na.eps);
    }
fail:
    return st;
}

kiln_status kiln_gpu_gemv_add_ss(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr residual, kiln_devptr ss_out,
                                 kiln_devptr xw, kiln_devptr nw, kiln_devptr x, kiln_devptr w, kiln_dtype act,
                                 kiln_devptr bias, int64_t N, int64_t K) {
    kiln_status st = KILN_OK;
    KILN_CHECK(kiln_gpu_gemv_add_ss_ok(g, act, 1, N, K, NULL), KILN_ERR_INTERNAL,
               "GEMV adding into the residual: N %lld, K %lld, %s (off, or not a batch-1 GEMV of at most %d blocks)",
               (long long)N, (long long)K, dt(act), KILN_GPU_NORM_MAX_PARTS);
    {
        const kiln_skx_shape p = skx_m1_plan(g, act, N, K);
        if (p.ok) {
            KILN_CHECK((x | w) % 16 == 0, KILN_ERR_INVALID_ARGUMENT,
                       "GEMM adding into the residual (gemm_skx): x %#llx, W %#llx not 16-byte aligned",
                       (unsigned long long)x, (unsigned long long)w);
            return skx_gemm(g, s, xw, N, act, x, w, act, bias, 1, (int)N, (int)K, &p, residual, ss_out, nw);
        }
    }
    return gemv_plain(g, s, xw, 0, act, x, w, act, bias, 1, N, K, residual, ss_out, nw, NULL);
fail:
    return st;
}

kiln_status kiln_gpu_gemm_nin(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, int64_t ldo, kiln_devptr x,
                              kiln_devptr w, kiln_dtype act, kiln_devptr bias, int64_t N, int64_t K,
                              const kiln_gpu_norm_in *ni) {
    kiln_status st = KILN_OK;
    KILN_CHECK(kiln_gpu_nin_ok(g, KILN_GPU_NIN_PLAIN, act, 1, N, K), KILN_ERR_INTERNAL,
               "GEMV of a normalised row: N %lld, K %lld, %s (off, or not a batch-1 GEMV)", (long long)N, (long long)K,
               dt(act));
    KILN_TRY(nin_ready(g, ni, KILN_GPU_NIN_PLAIN, "GEMV", act, 1, N, K));
    return gemv_plain(g, s, out, ldo, act, x, w, act, bias, 1, N, K, 0, 0, 0, ni);
fail:
    return st;
}

kiln_status kiln_gpu_gemm(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, int64_t ldo, kiln_dtype out_dt,
                          kiln_devptr x, kiln_devptr w, kiln_dtype in_dt, kiln_devptr bias, int64_t M, int64_t N,
                          int64_t K) {
    /* what the tensor-core GEMMs take: 16-bit in, act or fp32 out, 8-element
     * K steps, 16-byte aligned operands, 32-bit sizes (and M >= 2 but for gemm_skx's one-row form) */
    const bool mma_io = (in_dt == KILN_DTYPE_BF16 || in_dt == KILN_DTYPE_F16) && act_ok(out_dt) && K % 8 == 0 &&
                        (x | w) % 16 == 0 && N <= INT32_MAX && K <= INT32_MAX;
    const bool mma_ok = M >= 2 && mma_io;
    if (mma_io && M >= 1 && M <= g->skx_max_m && (M == 1 ? g->skx_m1 : !gemv_serves(g, in_dt, M, N, K))) {
        const kiln_skx_shape p = skx_plan(g, M, N, K);
        if (p.ok)
            return skx_gemm(g, s, out, ldo ? ldo : N, out_dt, x, w, in_dt, bias, (int)M, (int)N, (int)K, &p, 0, 0, 0);
    }
    if (gemv_serves(g, in_dt, M, N, K))
        return gemv_plain(g, s, out, ldo, out_dt, x, w, in_dt, bias, M, N, K, 0, 0, 0, NULL);
    if (mma_ok && M <= g->sk_max_m && kiln_skgemm_weight_ok((int)M, N * K * 2, g->sk_max_mb, g->sk_max_mb32))
        return sk_gemm(g, s, out, ldo ? ldo : N, out_dt, x, w, in_dt, bias, (int)M, (int)N, (int)K, SK_PLAIN, NULL);
    if (mma_ok && M <= g->tc_max_m)
        return tc_gemm(g, s, out, ldo ? ldo : N, out_dt, x, w, in_dt, bias, (int)M, (int)N, (int)K);
    return kiln_rt_gemm(g->blas, s, out, ldo, out_dt, x, w, in_dt, bias, M, N, K);
}

/* the gate/up GEMM with SiLU through kernel_src/gemm_sk.cu (GLU=1): where asked ($KILN_SKGEMM_SILU), and
 * wherever sk_gemm takes gemm_sk_tma for it (sm_90, MAXM >= $KILN_SKGEMM_TMA) */
static bool sk_silu_ok(const kiln_gpu *g, kiln_dtype in_dt, int64_t M, int64_t N, int64_t K) {
    return M >= 2 && M <= g->sk_max_m && (g->sk_silu || sk_tma_at(g, mma_maxm((int)M))) &&
           (in_dt == KILN_DTYPE_BF16 || in_dt == KILN_DTYPE_F16) && K % 8 == 0 && N % 2 == 0 && N <= INT32_MAX &&
           K <= INT32_MAX;
}

bool kiln_gpu_gemm_silu_ok(const kiln_gpu *g, kiln_dtype in_dt, int64_t M, int64_t N, int64_t K) {
    return (g->gemv_silu && M >= 1 && M <= g->gemv_max_m && (in_dt == KILN_DTYPE_BF16 || in_dt == KILN_DTYPE_F16) &&
            K % vec_elems(in_dt) == 0 && N % 2 == 0 && N <= INT32_MAX && K <= INT32_MAX) ||
           sk_silu_ok(g, in_dt, M, N, K);
}

kiln_status kiln_gpu_gemm_silu(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, int64_t ldo, kiln_devptr x,
                               kiln_devptr w, kiln_dtype in_dt, kiln_devptr bias, int64_t M, int64_t N, int64_t K) {
    return kiln_gpu_gemm_silu_nin(g, s, out, ldo, x, w, in_dt, bias, M, N, K, NULL);
}

kiln_status kiln_gpu_gemm_silu_nin(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, int64_t ldo, kiln_devptr x,
                                   kiln_devptr w, kiln_dtype in_dt, kiln_devptr bias, int64_t M, int64_t N, int64_t K,
                                   const kiln_gpu_norm_in *ni) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_TRY(nin_ready(g, ni, KILN_GPU_NIN_SILU, "gate/up GEMV with SiLU", in_dt, M, N, K));
    KILN_CHECK(kiln_gpu_gemm_silu_ok(g, in_dt, M, N, K), KILN_ERR_INTERNAL,
               "gate/up GEMV with SiLU: M %lld, N %lld, K %lld, %s (off, or not a small-M GEMV)", (long long)M,
               (long long)N, (long long)K, dt(in_dt));
    if (!(g->gemv_silu && M <= g->gemv_max_m)) { /* gemm_sk with the SiLU epilogue */
        KILN_CHECK((x | w) % 16 == 0, KILN_ERR_INVALID_ARGUMENT,
                   "gate/up GEMM with SiLU: x and W must be 16-byte aligned (x %#llx, W %#llx)", (unsigned long long)x,
                   (unsigned long long)w);
        return sk_gemm(g, s, out, ldo ? ldo : N / 2, in_dt, x, w, in_dt, bias, (int)M, (int)N, (int)K, SK_GLU, NULL);
    }
    {
        int maxm = M == 1 ? 1 : M == 2 ? 2 : M <= 4 ? 4 : 8;
        int ks = g->gemv_silu_ksplit;
        KILN_TRY(get(g, "gemv", &f, "ACT=%s OUT=%s MAXM=%d ROWS=2 UNROLL=%d GLU=1 KSPLIT=%d%s", dt(in_dt), dt(in_dt),
                     maxm, g->gemv_silu_unroll, ks, ni ? " NIN=1" : ""));
        int64_t ld = ldo ? ldo : N / 2;
        int m = (int)M, n = (int)N, k = (int)K;
        int per_block = 8 / ks; /* a gate/up row pair a group of ks warps, WARPS 8 */
        unsigned blocks = (unsigned)((N / 2 + per_block - 1) / per_block);
        kiln_devptr none = 0; /* NOUT's residual, sums of squares and norm weight */
        nin_args na = nin_of(ni);
        LAUNCH(f, blocks, 1, 1, 256, 0, s, &out, &ld, &x, &w, &bias, &m, &n, &k, &none, &none, &none, &na.part,
               &na.n, &na.eps);
    }
fail:
    return st;
}

/* kiln_gpu_gemm_ar_norm_ok, with the push exchange's launch arguments */
static bool gemm_ar_norm_args(const kiln_gpu *g, const kiln_rt_p2p *p, kiln_dtype act, int64_t M, int64_t N, int64_t K,
                              kiln_devptr bufs[KILN_RT_P2P_MAX_RANKS], int *rank, int *nr, int64_t *sb, int64_t *to) {
    size_t mm = 0;
    const int ve = vec_elems(act);
    return g->gemv_ar && M == 1 && M <= g->gemv_max_m && (act == KILN_DTYPE_BF16 || act == KILN_DTYPE_F16) &&
           K % ve == 0 && K <= INT32_MAX && N % ve == 0 && N / ve <= 4 * 256 &&
           kiln_rt_p2p_push_args(p, bufs, rank, nr, sb, to, &mm) && (size_t)N * 2 <= mm;
}

bool kiln_gpu_gemm_ar_norm_ok(const kiln_gpu *g, const kiln_rt_p2p *p, kiln_dtype act, int64_t M, int64_t N,
                              int64_t K) {
    kiln_devptr bufs[KILN_RT_P2P_MAX_RANKS];
    int rank, nr;
    int64_t sb, to;
    return gemm_ar_norm_args(g, p, act, M, N, K, bufs, &rank, &nr, &sb, &to);
}

kiln_status kiln_gpu_gemm_ar_norm(kiln_gpu *g, kiln_rt_stream *s, kiln_rt_p2p *p, kiln_devptr io, kiln_devptr x,
                                  kiln_devptr w, kiln_dtype act, int64_t N, int64_t K, kiln_devptr residual,
                                  kiln_devptr nw, kiln_devptr nout, float eps) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    kiln_devptr b[KILN_RT_P2P_MAX_RANKS];
    int rank = 0, nr = 0;
    int64_t sb = 0, to = 0;
    KILN_CHECK(gemm_ar_norm_args(g, p, act, 1, N, K, b, &rank, &nr, &sb, &to), KILN_ERR_INTERNAL,
               "GEMV with the all-reduce + add + RMSNorm: N %lld, K %lld, %s (off, or not its shape)", (long long)N,
               (long long)K, dt(act));
    {
        int rows, unroll, ks;
        gemv_tiling(g, N, K, &rows, &unroll, &ks);
        KILN_TRY(get(g, "gemv_ar_norm", &f, "ACT=%s ROWS=%d UNROLL=%d KSPLIT=%d AR=1", dt(act), rows, unroll, ks));
        const int per_block = rows * 8 / ks;
        int n = (int)N, k = (int)K;
        LAUNCH(f, (unsigned)((N + per_block - 1) / per_block), 1, 1, 256, 0, s, &io, &x, &w, &n, &k, &residual, &nw,
               &nout, &eps, &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7], &rank, &nr, &sb, &to);
    }
fail:
    return st;
}

/* What both rope epilogues need: a 16-bit act with a cache of it, rotate-half over the whole head without
 * dynamic NTK, and N the q, k and v heads of the cache's head dim */
static bool rope_epilogue_ok(kiln_dtype act, int64_t N, int nq, const kiln_gpu_rope_params *rp,
                             const kiln_kv_layout *l) {
    const int hd = rp->head_dim;
    return (act == KILN_DTYPE_BF16 || act == KILN_DTYPE_F16) && l->dtype == act && !rp->interleaved &&
           rp->rot_dim == hd && !rp->dyn_seq_len && l->head_dim == hd && nq >= 0 &&
           N == (int64_t)(nq + 2 * l->n_kv_heads) * hd;
}
/* the qkv GEMM of 2 <= M <= sk_rope (at most 32) rows with rope + KV write
 * through kernel_src/gemm_sk.cu ROPE=1: a block is one head (head dim 128 =
 * BN of 4 warps x 2 tiles or 8 x 1); no weight-size limit (it replaces the
 * GEMM and the rope kernel, whatever the plain GEMM takes) */
static bool sk_rope_ok(const kiln_gpu *g, kiln_dtype act, int64_t M, int64_t N, int64_t K, int nq,
                       const kiln_gpu_rope_params *rp, const kiln_kv_layout *l) {
    return M >= 2 && M <= g->sk_rope && rope_epilogue_ok(act, N, nq, rp, l) && rp->head_dim == 128 &&
           l->n_kv_heads > 0 && K % 8 == 0 && N <= INT32_MAX && K <= INT32_MAX;
}

bool kiln_gpu_gemm_rope_kv_ok(const kiln_gpu *g, kiln_dtype act, int64_t M, int64_t N, int64_t K, int nq,
                              const kiln_gpu_rope_params *rp, const kiln_kv_layout *l) {
    const int hd = rp->head_dim;
    return (g->gemv_rope && M == 1 && M <= g->gemv_max_m && rope_epilogue_ok(act, N, nq, rp, l) &&
            (hd == 64 || hd == 96 || hd == 128 || hd == 256) && K % vec_elems(act) == 0 && K <= INT32_MAX) ||
           sk_rope_ok(g, act, M, N, K, nq, rp, l);
}

kiln_status kiln_gpu_gemm_rope_kv(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_devptr w,
                                  kiln_dtype act, kiln_devptr bias, int64_t N, int64_t K, int nq, kiln_devptr pos,
                                  const kiln_gpu_rope_params *rp, kiln_devptr kcache, kiln_devptr vcache,
                                  const kiln_kv_layout *l, kiln_devptr slots) {
    return kiln_gpu_gemm_rope_kv_m(g, s, out, x, w, act, bias, 1, N, K, nq, pos, rp, kcache, vcache, l, slots);
}

kiln_status kiln_gpu_gemm_rope_kv_m(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_devptr w,
                                    kiln_dtype act, kiln_devptr bias, int64_t M, int64_t N, int64_t K, int nq,
                                    kiln_devptr pos, const kiln_gpu_rope_params *rp, kiln_devptr kcache,
                                    kiln_devptr vcache, const kiln_kv_layout *l, kiln_devptr slots) {
    return kiln_gpu_gemm_rope_kv_nin(g, s, out, x, w, act, bias, M, N, K, nq, pos, rp, kcache, vcache, l, slots, NULL);
}

kiln_status kiln_gpu_gemm_rope_kv_nin(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_devptr w,
                                      kiln_dtype act, kiln_devptr bias, int64_t M, int64_t N, int64_t K, int nq,
                                      kiln_devptr pos, const kiln_gpu_rope_params *rp, kiln_devptr kcache,
                                      kiln_devptr vcache, const kiln_kv_layout *l, kiln_devptr slots,
                                      const kiln_gpu_norm_in *ni) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_TRY(nin_ready(g, ni, KILN_GPU_NIN_ROPE, "qkv GEMV with rope", act, M, N, K));
    KILN_CHECK(kiln_gpu_gemm_rope_kv_ok(g, act, M, N, K, nq, rp, l), KILN_ERR_INTERNAL,
               "qkv GEMM with rope + KV write: M %lld, N %lld, K %lld, %s (off, or not its shape)", (long long)M,
               (long long)N, (long long)K, dt(act));
    if (M > 1) { /* gemm_sk's ROPE epilogue (sk_rope_ok) */
        KILN_CHECK((x | w) % 16 == 0, KILN_ERR_INVALID_ARGUMENT,
                   "qkv GEMM with rope + KV write: x and W must be 16-byte aligned (x %#llx, W %#llx)",
                   (unsigned long long)x, (unsigned long long)w);
        const sk_rope_args ra = {nq, l->n_kv_heads, l->block_size, rp->head_dim, pos, rp->inv_freq, kcache, vcache,
                                 slots, rp->mscale};
        return sk_gemm(g, s, out, N, act, x, w, act, bias, (int)M, (int)N, (int)K, SK_ROPE, &ra);
    }
    {
        /* a row pair a group of ks warps (WARPS 8): by default 1 where that still gives every SM two
         * blocks (H200, Llama-3-8B qkv N 6144, 384 blocks: -b 1 246.1 / 246.0 tok/s against 242.3 / 242.3
         * with 2, same call), else 2 (tensor-parallel shards, as measured before) */
        const kiln_rt_device_info *di = kiln_rt_device_get_info(g->dev);
        const int ks = g->gemv_rope_ksplit ? g->gemv_rope_ksplit : N / 2 / 8 >= 2 * di->n_sms ? 1 : 2;
        /* row pairs a block: WARPS / ks groups, a pair each (RR 2) or a row each (RR 1) */
        const int rr = g->gemv_rope_rows, per_block = rr == 2 ? 8 / ks : 8 / ks / 2;
        KILN_TRY(get(g, "gemv_rope", &f, "ACT=%s UNROLL=%d KSPLIT=%d ROPE=1 RR=%d HD=%d KV=%s%s", dt(act),
                     g->gemv_rope_unroll, ks, rr, rp->head_dim, dt(act), ni ? " NIN=1" : ""));
        int n = (int)N, k = (int)K, nkv = l->n_kv_heads, bs = l->block_size;
        float ms = rp->mscale;
        kiln_devptr inv = rp->inv_freq;
        unsigned blocks = (unsigned)((N / 2 + per_block - 1) / per_block);
        nin_args na = nin_of(ni);
        LAUNCH(f, blocks, 1, 1, 256, 0, s, &out, &x, &w, &bias, &n, &k, &nq, &nkv, &pos, &inv, &ms, &kcache, &vcache,
               &slots, &bs, &na.part, &na.n, &na.eps);
    }
fail:
    return st;
}

static kiln_status glu(kiln_gpu *g, kiln_rt_stream *s, const char *name, kiln_devptr out, kiln_devptr x,
                       kiln_dtype act, int T, int I) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK(act_ok(act) && I % vec_elems(act) == 0, KILN_ERR_UNSUPPORTED, "%s: %s with I = %d", name, dt(act), I);
    KILN_TRY(get(g, name, &f, "ACT=%s", dt(act)));
    int64_t n = (int64_t)T * (I / vec_elems(act));
    LAUNCH(f, grid_for(n, 256), 1, 1, 256, 0, s, &out, &x, &T, &I);
fail:
    return st;
}

kiln_status kiln_gpu_silu_mul(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_dtype act, int T,
                              int I) {
    return glu(g, s, "silu_mul", out, x, act, T, I);
}
kiln_status kiln_gpu_gelu_mul(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_dtype act, int T,
                              int I) {
    return glu(g, s, "gelu_mul", out, x, act, T, I);
}

kiln_status kiln_gpu_add(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr a, kiln_devptr b,
                         kiln_dtype act, int64_t n) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK(act_ok(act), KILN_ERR_UNSUPPORTED, "add: %s", dt(act));
    KILN_TRY(get(g, "add", &f, "ACT=%s", dt(act)));
    LAUNCH(f, grid_for(n, 256), 1, 1, 256, 0, s, &out, &a, &b, &n);
fail:
    return st;
}

kiln_status kiln_gpu_step_feed(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr dmeta, const void *hmeta, size_t n,
                               size_t tok_off, size_t feed_off, int n_feed, kiln_devptr res) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK(n % 16 == 0 && tok_off % 16 == 0 && feed_off % 16 == 0 && dmeta % 16 == 0 &&
                   (uintptr_t)hmeta % 16 == 0 && n_feed >= 0 && (!n_feed || (tok_off + 4 * (size_t)n_feed <= n &&
                                                                             feed_off + 4 * (size_t)n_feed <= n)),
               KILN_ERR_INVALID_ARGUMENT, "step_feed: %zu bytes, tokens at %zu, feed at %zu, %d fed", n, tok_off,
               feed_off, n_feed);
    if (!n) return KILN_OK;
    KILN_TRY(kiln_rt_kernels_get(g->k, "step_feed", "", &f));
    int64_t units = (int64_t)(n / 16), nn = (int64_t)n, to = (int64_t)tok_off, fo = (int64_t)feed_off;
    const unsigned blocks = (unsigned)KILN_MAX(1, KILN_MIN((units + 255) / 256, 264));
    LAUNCH(f, blocks, 1, 1, 256, 0, s, &dmeta, &hmeta, &nn, &to, &fo, &n_feed, &res);
fail:
    return st;
}

kiln_status kiln_gpu_gather_rows(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_dtype t,
                                 kiln_devptr rows, int n, int dim) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK(act_ok(t), KILN_ERR_UNSUPPORTED, "gather_rows: %s", dt(t));
    KILN_TRY(get(g, "gather_rows", &f, "ACT=%s", dt(t)));
    LAUNCH(f, (unsigned)n, 1, 1, 256, 0, s, &out, &x, &rows, &n, &dim);
fail:
    return st;
}

kiln_status kiln_gpu_gather_last(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr out, kiln_devptr x, kiln_dtype t,
                                 kiln_devptr qstart, int n_seqs, int dim) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK(act_ok(t), KILN_ERR_UNSUPPORTED, "gather_last: %s", dt(t));
    KILN_TRY(get(g, "gather_last", &f, "ACT=%s", dt(t)));
    LAUNCH(f, (unsigned)n_seqs, 1, 1, 256, 0, s, &out, &x, &qstart, &n_seqs, &dim);
fail:
    return st;
}

static bool fp8(kiln_dtype t) { return t == KILN_DTYPE_FP8_E4M3 || t == KILN_DTYPE_FP8_E5M2; }

kiln_status kiln_gpu_cast(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr dst, kiln_dtype dst_dt, kiln_devptr src,
                          kiln_dtype src_dt, int64_t n) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK((act_ok(dst_dt) || fp8(dst_dt)) && (act_ok(src_dt) || fp8(src_dt)), KILN_ERR_UNSUPPORTED,
               "cast %s -> %s", dt(src_dt), dt(dst_dt));
    KILN_TRY(get(g, "cast", &f, "DST=%s SRC=%s", dt(dst_dt), dt(src_dt)));
    LAUNCH(f, grid_for(n, 256), 1, 1, 256, 0, s, &dst, &src, &n);
fail:
    return st;
}

/* ------------------------------------------------------------ rope and kv */

static int tokens_per_block(int T, int n_sms) {
    int tt = 16;
    while (tt > 1 && (T + tt - 1) / tt < 2 * n_sms) tt /= 2;
    return tt;
}

/* kernel_src/rope_kv.cu kv_body: V staging of one group of nh heads
 * (VT_STRIDE 18 elements per dim, groups of at most VT_BUDGET 40960 bytes) */
static unsigned kv_smem(int nh, int hd, kiln_dtype act) {
    int row = hd * 18 * (int)kiln_dtype_size(act), hg = KILN_MAX(1, 40960 / row);
    return (unsigned)(KILN_MIN(nh, hg) * row);
}

/* The wide kernels (kernel_src/rope_kv_wide.cu): block size of every launch
 * (RKV_THREADS), heads per thread in flight of the rope rows (RI), most KV
 * heads of a KV block (KH) */
#define RKV_THREADS 128
#define ROPE_RI 4
#define KV_KH 4

/* Head slots of the rope rows over nh heads of cols 16-byte columns (one
 * thread per token, column and slot): as many heads per thread (up to
 * ROPE_RI, all loads in flight) as it takes to bring the thread count
 * within what the SMs hold at once (2048 threads each), so small batches
 * get one head per thread and the shortest path, and prefills few threads
 * with many bytes in flight and cos/sin computed once for several heads. */
static int head_slots(int T, int nh, int cols, int n_sms) {
    int64_t cap = (int64_t)n_sms * 2048, want = (int64_t)T * nh * cols;
    int items = (int)KILN_MIN((int64_t)ROPE_RI, KILN_MAX((int64_t)1, (want + cap - 1) / cap));
    int hs = (nh + items - 1) / items;
    /* 8 or 16 columns: a multiple of 32 / cols slots, so each warp is one
     * token and the lanes of a column share its cos / sin (rope_rows) */
    if (cols == 8 || cols == 16) hs = (hs + 32 / cols - 1) / (32 / cols) * (32 / cols);
    return hs;
}

/* blocks of RKV_THREADS for n threads */
static int64_t rkv_blocks(int64_t n) { return (n + RKV_THREADS - 1) / RKV_THREADS; }

/* KV blocks (kernel_src/rope_kv_wide.cu kv_block): 16 tokens and hg KV
 * heads, hg as large as KV_KH and 40 KiB of shared memory allow; its shared
 * memory (16 slots, then 16 key rows of hd * act + 16 bytes and 16 value
 * rows of hd * act + 4 bytes per head) */
static int kv_heads_per_block(int nkv, int hd, kiln_dtype act) {
    int per_head = 16 * (2 * hd * (int)kiln_dtype_size(act) + 20);
    return KILN_MAX(1, KILN_MIN(KILN_MIN(nkv, KV_KH), (40960 - 64) / per_head));
}
static unsigned kv_block_smem(int hg, int hd, kiln_dtype act) {
    return (unsigned)(64 + hg * 16 * (2 * hd * (int)kiln_dtype_size(act) + 20));
}
static int64_t kv_blocks(int T, int nkv, int hg) { return (int64_t)((T + 15) / 16) * ((nkv + hg - 1) / hg); }

/* Tile blocks (kernel_src/rope_kv_wide.cu kv_tile): a warp per 16 tokens
 * and KV head, KV_TILE_WARPS heads a block (RKV_THREADS threads); shared
 * memory: the fused kernel's cos / sin table (16 x rot / 2 float2), then per
 * warp 128 bytes (slots, token list), 16 value rows of hd * act + 4 bytes
 * and (fused) 16 key rows of hd * act + 16 (42 KiB fused, 17 KiB plain at
 * head dim 128 in bf16). At most KV_TILE_SMEM_MAX (within a block's opt-in
 * limit on every GPU from sm_80 on: 99 KiB on sm_86 / sm_89), else the KV
 * blocks run. */
#define KV_TILE_WARPS 4
#define KV_TILE_SMEM_MAX (96 * 1024)
static int64_t kv_tile_smem(bool rope, int rot, int hd, kiln_dtype act) {
    int64_t row = (int64_t)hd * (int64_t)kiln_dtype_size(act);
    int64_t warp = 128 + 16 * (row + 4) + (rope ? 16 * (row + 16) : 0);
    return (rope ? 16 * (int64_t)(rot / 2) * 8 : 0) + KV_TILE_WARPS * warp;
}
static int64_t kv_tile_blocks(int T, int nkv) {
    return (int64_t)((T + 15) / 16) * ((nkv + KV_TILE_WARPS - 1) / KV_TILE_WARPS);
}
static bool kv_tile_ok(const kiln_gpu *g, const kiln_kv_layout *l, bool rope, int rot, kiln_dtype act) {
    return (g->kv_tile == 1 || (g->kv_tile == 2 && !rope)) && l->n_kv_heads > 0 && l->block_size > 0 &&
           kv_tile_smem(rope, rot, l->head_dim, act) <= KV_TILE_SMEM_MAX;
}

/* The plain KV write's cp.async pipeline (kernel_src/rope_kv_wide.cu
 * kiln_kv_write_pipe; $KILN_KV_TILE 2, the default): 16-bit rows and cache,
 * head_dim a power of two in [32, 256]; units of 16 tokens x 256 / head_dim
 * KV heads; KV_PIPE_NS stages of 16 KiB, their slots and first slots; at
 * most KV_PIPE_BPS blocks an SM (3 fit at once; the probe's best grid was
 * four times that, a block storing ~2.6 units). 4096 tokens: 84.6% of copy
 * against the tiles' 75.0% at 32 KV heads, 65.0 against 58.0% at 8 (RESULTS,
 * twenty-third session). Elsewhere (FP8, other head dims) the tiles. */
#define KV_PIPE_NS 4
#define KV_PIPE_SMEM (KV_PIPE_NS * (16384 + 68))
#define KV_PIPE_BPS 12
static bool kv_pipe_ok(const kiln_gpu *g, const kiln_kv_layout *l, kiln_dtype act) {
    const int hd = l->head_dim;
    return g->kv_tile == 2 && kiln_dtype_size(act) == 2 && kiln_dtype_size(l->dtype) == 2 && hd >= 32 && hd <= 256 &&
           (hd & (hd - 1)) == 0 && l->n_kv_heads > 0 && l->block_size > 0;
}

/* What the wide kernels need beyond check_rope / check_kv (else the others
 * run): a KV head of a KV block within its 40 KiB of shared memory, and
 * fewer blocks than their 32-bit thread indices reach */
static bool kv_wide_ok(const kiln_kv_layout *l, kiln_dtype act) {
    return l->n_kv_heads > 0 && l->block_size > 0 && kv_block_smem(1, l->head_dim, act) <= 40960;
}
static bool blocks_ok(int64_t blocks) { return blocks > 0 && blocks < INT32_MAX / RKV_THREADS; }

/* 16-byte columns of the rotated part of a head (rope rows) */
static int rope_cols(const kiln_gpu_rope_params *rp, kiln_dtype act) {
    int ve = vec_elems(act);
    return rp->interleaved ? rp->rot_dim / ve : rp->rot_dim / (2 * ve);
}

static kiln_status check_rope(const kiln_gpu_rope_params *rp, kiln_dtype act) {
    int ve = vec_elems(act);
    if (rp->rot_dim <= 0 || rp->rot_dim > rp->head_dim || rp->rot_dim % (rp->interleaved ? ve : 2 * ve))
        return KILN_FAIL(KILN_ERR_UNSUPPORTED, "rope: rot_dim %d (head_dim %d) must be a multiple of %d", rp->rot_dim,
                         rp->head_dim, rp->interleaved ? ve : 2 * ve);
    if (rp->head_dim % ve) return KILN_FAIL(KILN_ERR_UNSUPPORTED, "rope: head_dim %d", rp->head_dim);
    return KILN_OK;
}

static kiln_status check_kv(const kiln_kv_layout *l, kiln_dtype act) {
    if (l->dtype != KILN_DTYPE_BF16 && l->dtype != KILN_DTYPE_F16 && l->dtype != KILN_DTYPE_FP8_E5M2 &&
        l->dtype != KILN_DTYPE_FP8_E4M3)
        return KILN_FAIL(KILN_ERR_UNSUPPORTED, "GPU KV cache dtype %s", dt(l->dtype));
    if (l->x != (int)(16 / kiln_dtype_size(l->dtype)) || l->head_dim % l->x || l->head_dim % vec_elems(act))
        return KILN_FAIL(KILN_ERR_UNSUPPORTED, "GPU KV cache needs head_dim %d to be a multiple of %d", l->head_dim,
                         l->x);
    if (l->block_size % kiln_gpu_kv_multiple(l->dtype))
        return KILN_FAIL(KILN_ERR_UNSUPPORTED, "GPU KV cache needs block_size %d to be a multiple of %d",
                         l->block_size, kiln_gpu_kv_multiple(l->dtype));
    return KILN_OK;
}

/* The wide launches (arguments checked and sized by the callers below):
 * rope rows of hs head slots (nb blocks); KV blocks of hg heads (nb
 * blocks); both, the first nbr blocks rope rows of the q heads. */
static kiln_status rope_wide(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr qkv, kiln_dtype act, int64_t row_stride,
                             kiln_devptr pos, int T, int nq, int nkv, const kiln_gpu_rope_params *rp, int hs,
                             int64_t nb) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_TRY(get(g, "rope_wide", &f, "ACT=%s INTERLEAVED=%d", dt(act), rp->interleaved ? 1 : 0));
    int hd = rp->head_dim, rot = rp->rot_dim, dmax = rp->dyn_max;
    kiln_devptr inv = rp->inv_freq, dyn = rp->dyn_seq_len;
    float ms = rp->mscale, db = rp->dyn_base, df = rp->dyn_factor;
    LAUNCH(f, (unsigned)nb, 1, 1, RKV_THREADS, 0, s, &qkv, &row_stride, &pos, &T, &nq, &nkv, &hd, &rot, &inv, &ms,
           &dyn, &dmax, &db, &df, &hs);
fail:
    return st;
}

static kiln_status kv_write_wide(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr kcache, kiln_devptr vcache,
                                 const kiln_kv_layout *l, kiln_devptr k, kiln_devptr v, kiln_dtype act,
                                 int64_t row_stride, kiln_devptr slots, int T, int hg, int64_t nb) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_TRY(get(g, "kv_write_wide", &f, "ACT=%s KV=%s", dt(act), dt(l->dtype)));
    int nkv = l->n_kv_heads, hd = l->head_dim, bs = l->block_size;
    float ks = l->k_scale, vs = l->v_scale;
    kiln_devptr hsc = (kiln_devptr)(uintptr_t)l->head_scales;
    LAUNCH(f, (unsigned)nb, 1, 1, RKV_THREADS, kv_block_smem(hg, hd, act), s, &kcache, &vcache, &k, &v, &row_stride,
           &slots, &T, &nkv, &hd, &bs, &ks, &vs, &hg, &hsc);
fail:
    return st;
}

static kiln_status rope_kv_write_wide(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr qkv, kiln_dtype act,
                                      int64_t row_stride, kiln_devptr pos, int T, int nq,
                                      const kiln_gpu_rope_params *rp, kiln_devptr kcache, kiln_devptr vcache,
                                      const kiln_kv_layout *l, kiln_devptr slots, int hs, int hg, int nbr,
                                      int64_t nb) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_TRY(get(g, "rope_kv_write_wide", &f, "ACT=%s INTERLEAVED=%d KV=%s", dt(act), rp->interleaved ? 1 : 0,
                 dt(l->dtype)));
    int nkv = l->n_kv_heads, hd = l->head_dim, rot = rp->rot_dim, dmax = rp->dyn_max, bs = l->block_size;
    kiln_devptr inv = rp->inv_freq, dyn = rp->dyn_seq_len;
    float ms = rp->mscale, db = rp->dyn_base, df = rp->dyn_factor, ks = l->k_scale, vs = l->v_scale;
    kiln_devptr hsc = (kiln_devptr)(uintptr_t)l->head_scales;
    LAUNCH(f, (unsigned)nb, 1, 1, RKV_THREADS, kv_block_smem(hg, hd, act), s, &qkv, &row_stride, &pos, &T, &nq, &nkv,
           &hd, &rot, &inv, &ms, &dyn, &dmax, &db, &df, &kcache, &vcache, &slots, &bs, &ks, &vs, &hs, &hsc, &nbr,
           &hg);
fail:
    return st;
}

static kiln_status kv_write_tile(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr kcache, kiln_devptr vcache,
                                 const kiln_kv_layout *l, kiln_devptr k, kiln_devptr v, kiln_dtype act,
                                 int64_t row_stride, kiln_devptr slots, int T, int64_t nb) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_TRY(get(g, "kv_write_tile", &f, "ACT=%s KV=%s", dt(act), dt(l->dtype)));
    int nkv = l->n_kv_heads, hd = l->head_dim, bs = l->block_size;
    float ks = l->k_scale, vs = l->v_scale;
    kiln_devptr hsc = (kiln_devptr)(uintptr_t)l->head_scales;
    LAUNCH(f, (unsigned)nb, 1, 1, RKV_THREADS, (unsigned)kv_tile_smem(false, 0, hd, act), s, &kcache, &vcache, &k,
           &v, &row_stride, &slots, &T, &nkv, &hd, &bs, &ks, &vs, &hsc);
fail:
    return st;
}

static kiln_status kv_write_pipe(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr kcache, kiln_devptr vcache,
                                 const kiln_kv_layout *l, kiln_devptr k, kiln_devptr v, kiln_dtype act,
                                 int64_t row_stride, kiln_devptr slots, int T) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_TRY(get(g, "kv_write_pipe", &f, "ACT=%s KV=%s", dt(act), dt(l->dtype)));
    int nkv = l->n_kv_heads, hd = l->head_dim, bs = l->block_size;
    const int n_sms = kiln_rt_device_get_info(g->dev)->n_sms;
    /* the kernel's nunits (16-token chunks x groups of HU = 256 / head_dim KV heads): a grid of more blocks
     * would leave some without a unit */
    const int64_t units = (int64_t)((T + 15) / 16) * ((nkv + 256 / hd - 1) / (256 / hd));
    const int64_t grid = KILN_MIN(units, (int64_t)KV_PIPE_BPS * n_sms);
    LAUNCH(f, (unsigned)grid, 1, 1, 256, KV_PIPE_SMEM, s, &kcache, &vcache, &k, &v, &row_stride, &slots, &T, &nkv, &hd,
           &bs);
fail:
    return st;
}

static kiln_status rope_kv_write_tile(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr qkv, kiln_dtype act,
                                      int64_t row_stride, kiln_devptr pos, int T, int nq,
                                      const kiln_gpu_rope_params *rp, kiln_devptr kcache, kiln_devptr vcache,
                                      const kiln_kv_layout *l, kiln_devptr slots, int hs, int nbr, int64_t nb) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_TRY(get(g, "rope_kv_write_tile", &f, "ACT=%s INTERLEAVED=%d KV=%s", dt(act), rp->interleaved ? 1 : 0,
                 dt(l->dtype)));
    int nkv = l->n_kv_heads, hd = l->head_dim, rot = rp->rot_dim, dmax = rp->dyn_max, bs = l->block_size;
    kiln_devptr inv = rp->inv_freq, dyn = rp->dyn_seq_len;
    float ms = rp->mscale, db = rp->dyn_base, df = rp->dyn_factor, ks = l->k_scale, vs = l->v_scale;
    kiln_devptr hsc = (kiln_devptr)(uintptr_t)l->head_scales;
    LAUNCH(f, (unsigned)nb, 1, 1, RKV_THREADS, (unsigned)kv_tile_smem(true, rot, hd, act), s, &qkv, &row_stride, &pos,
           &T, &nq, &nkv, &hd, &rot, &inv, &ms, &dyn, &dmax, &db, &df, &kcache, &vcache, &slots, &bs, &ks, &vs, &hs,
           &hsc, &nbr);
fail:
    return st;
}

kiln_status kiln_gpu_rope(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr qkv, kiln_dtype act, int64_t row_stride,
                          kiln_devptr pos, int T, int nq, int nkv, const kiln_gpu_rope_params *rp) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK(act_ok(act), KILN_ERR_UNSUPPORTED, "rope: %s", dt(act));
    KILN_TRY(check_rope(rp, act));
    if (wide(g, T) && nq + nkv > 0) {
        int vpr = rope_cols(rp, act), hs = head_slots(T, nq + nkv, vpr, kiln_rt_device_get_info(g->dev)->n_sms);
        int64_t nb = rkv_blocks((int64_t)T * hs * vpr);
        if (blocks_ok(nb)) return rope_wide(g, s, qkv, act, row_stride, pos, T, nq, nkv, rp, hs, nb);
    }
    KILN_TRY(get(g, "rope", &f, "ACT=%s INTERLEAVED=%d", dt(act), rp->interleaved ? 1 : 0));
    int tt = tokens_per_block(T, kiln_rt_device_get_info(g->dev)->n_sms);
    unsigned smem = (unsigned)(tt * rp->rot_dim / 2 * 8);
    int hd = rp->head_dim, rot = rp->rot_dim, dmax = rp->dyn_max;
    kiln_devptr inv = rp->inv_freq, dyn = rp->dyn_seq_len;
    float ms = rp->mscale, db = rp->dyn_base, df = rp->dyn_factor;
    LAUNCH(f, (unsigned)((T + tt - 1) / tt), 1, 1, 256, smem, s, &qkv, &row_stride, &pos, &T, &nq, &nkv, &hd, &rot,
           &inv, &ms, &dyn, &dmax, &db, &df, &tt);
fail:
    return st;
}

kiln_status kiln_gpu_kv_write(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr kcache, kiln_devptr vcache,
                              const kiln_kv_layout *l, kiln_devptr k, kiln_devptr v, kiln_dtype act, int64_t row_stride,
                              kiln_devptr slots, int T) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK(act_ok(act), KILN_ERR_UNSUPPORTED, "kv_write: %s", dt(act));
    KILN_TRY(check_kv(l, act));
    if (wide(g, T) && kv_pipe_ok(g, l, act)) return kv_write_pipe(g, s, kcache, vcache, l, k, v, act, row_stride, slots, T);
    if (wide(g, T) && kv_tile_ok(g, l, false, 0, act)) {
        int64_t nb = kv_tile_blocks(T, l->n_kv_heads);
        if (blocks_ok(nb)) return kv_write_tile(g, s, kcache, vcache, l, k, v, act, row_stride, slots, T, nb);
    }
    if (wide(g, T) && kv_wide_ok(l, act)) {
        int hg = kv_heads_per_block(l->n_kv_heads, l->head_dim, act);
        int64_t nb = kv_blocks(T, l->n_kv_heads, hg);
        if (blocks_ok(nb)) return kv_write_wide(g, s, kcache, vcache, l, k, v, act, row_stride, slots, T, hg, nb);
    }
    KILN_TRY(get(g, "kv_write", &f, "ACT=%s KV=%s", dt(act), dt(l->dtype)));
    int tt = KILN_MIN(16, KILN_MAX(1, T)); /* at most 16 (kv_body); heads split over the grid's y */
    unsigned smem = kv_smem(1, l->head_dim, act); /* one head per block (grid y) */
    int nkv = l->n_kv_heads, hd = l->head_dim, bs = l->block_size;
    float ks = l->k_scale, vs = l->v_scale;
    kiln_devptr hs = (kiln_devptr)(uintptr_t)l->head_scales;
    LAUNCH(f, (unsigned)((T + tt - 1) / tt), (unsigned)nkv, 1, 128, smem, s, &kcache, &vcache, &k, &v, &row_stride,
           &slots, &T, &nkv, &hd, &bs, &ks, &vs, &tt, &hs);
fail:
    return st;
}

kiln_status kiln_gpu_rope_kv_write(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr qkv, kiln_dtype act,
                                   int64_t row_stride, kiln_devptr pos, int T, int nq, const kiln_gpu_rope_params *rp,
                                   kiln_devptr kcache, kiln_devptr vcache, const kiln_kv_layout *l, kiln_devptr slots) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK(act_ok(act), KILN_ERR_UNSUPPORTED, "rope_kv_write: %s", dt(act));
    KILN_TRY(check_rope(rp, act));
    KILN_TRY(check_kv(l, act));
    KILN_CHECK(rp->head_dim == l->head_dim, KILN_ERR_INVALID_ARGUMENT, "rope_kv_write: head_dim mismatch");
    if (T <= g->rope_dec_max) {
        /* kernel_src/rope_kv.cu kiln_rope_kv_write_dec: a block a token, a
         * thread an item (rotated q / k vector pair or vector, key vector
         * past rot_dim, value vector) */
        const int ve = vec_elems(act);
        int hd = rp->head_dim, rot = rp->rot_dim; /* LAUNCH takes their addresses */
        const int per = (rp->interleaved ? rot / ve : rot / 2 / ve) + (hd - rot) / ve;
        const int items = (nq + l->n_kv_heads) * per + l->n_kv_heads * (hd / ve);
        if (items <= 1024) {
            KILN_TRY(get(g, "rope_kv_write_dec", &f, "ACT=%s INTERLEAVED=%d KV=%s", dt(act), rp->interleaved ? 1 : 0,
                         dt(l->dtype)));
            int nkv = l->n_kv_heads, bs = l->block_size, dmax = rp->dyn_max;
            kiln_devptr inv = rp->inv_freq, dyn = rp->dyn_seq_len, hs = (kiln_devptr)(uintptr_t)l->head_scales;
            float ms = rp->mscale, db = rp->dyn_base, df = rp->dyn_factor, ks = l->k_scale, vs = l->v_scale;
            LAUNCH(f, (unsigned)T, 1, 1, (unsigned)((items + 31) / 32 * 32), 0, s, &qkv, &row_stride, &pos, &T, &nq,
                   &nkv, &hd, &rot, &inv, &ms, &dyn, &dmax, &db, &df, &kcache, &vcache, &slots, &bs, &ks, &vs, &hs);
            return KILN_OK;
        }
    }
    if (wide(g, T) && kv_tile_ok(g, l, true, rp->rot_dim, act)) {
        /* rope rows over the q heads; tile blocks (k rotated; k and v into
         * the cache) */
        int vpr = rope_cols(rp, act);
        int hs = nq > 0 ? head_slots(T, nq, vpr, kiln_rt_device_get_info(g->dev)->n_sms) : 1;
        int64_t nbr = nq > 0 ? rkv_blocks((int64_t)T * hs * vpr) : 0, nb = nbr + kv_tile_blocks(T, l->n_kv_heads);
        if (blocks_ok(nb))
            return rope_kv_write_tile(g, s, qkv, act, row_stride, pos, T, nq, rp, kcache, vcache, l, slots, hs,
                                      (int)nbr, nb);
    }
    if (wide(g, T) && kv_wide_ok(l, act)) {
        /* rope rows over the q heads; KV blocks (k rotated; k and v into the
         * cache) */
        int vpr = rope_cols(rp, act);
        int hs = nq > 0 ? head_slots(T, nq, vpr, kiln_rt_device_get_info(g->dev)->n_sms) : 1;
        int hg = kv_heads_per_block(l->n_kv_heads, l->head_dim, act);
        int64_t nbr = nq > 0 ? rkv_blocks((int64_t)T * hs * vpr) : 0, nb = nbr + kv_blocks(T, l->n_kv_heads, hg);
        if (blocks_ok(nb))
            return rope_kv_write_wide(g, s, qkv, act, row_stride, pos, T, nq, rp, kcache, vcache, l, slots, hs, hg,
                                      (int)nbr, nb);
    }
    KILN_TRY(get(g, "rope_kv_write", &f, "ACT=%s INTERLEAVED=%d KV=%s", dt(act), rp->interleaved ? 1 : 0,
                 dt(l->dtype)));
    int tt = tokens_per_block(T, kiln_rt_device_get_info(g->dev)->n_sms);
    unsigned smem = KILN_MAX((unsigned)(tt * rp->rot_dim / 2 * 8), kv_smem(l->n_kv_heads, l->head_dim, act));
    int nkv = l->n_kv_heads, hd = l->head_dim, rot = rp->rot_dim, dmax = rp->dyn_max, bs = l->block_size;
    kiln_devptr inv = rp->inv_freq, dyn = rp->dyn_seq_len;
    float ms = rp->mscale, db = rp->dyn_base, df = rp->dyn_factor, ks = l->k_scale, vs = l->v_scale;
    kiln_devptr hs = (kiln_devptr)(uintptr_t)l->head_scales;
    LAUNCH(f, (unsigned)((T + tt - 1) / tt), 1, 1, 256, smem, s, &qkv, &row_stride, &pos, &T, &nq, &nkv, &hd, &rot,
           &inv, &ms, &dyn, &dmax, &db, &df, &kcache, &vcache, &slots, &bs, &ks, &vs, &tt, &hs);
fail:
    return st;
}

/* -------------------------------------------------------------- attention */

/* kernel_src/attn_common.cuh TILE_BYTES (16 tokens of K and V) */
static int tile_bytes(int hd, bool kv8) { return kv8 ? hd * 32 : ((hd + 15) / 16 * 2) * 256 + hd * 32; }
/* The decode kernel's dynamic shared memory for `stages` tile slots a warp
 * (kernel_src/attn_decode.cu: nw warps; the warps' merge reuses it). */
static unsigned decode_smem(int nw, int stages, int tb, int hd) {
    return (unsigned)KILN_MAX(nw * stages * tb, (nw * 16 * 2 + nw * 16 * hd) * 4);
}
/* Blocks of a decode kernel (nw warps of `regs` registers, smem bytes)
 * resident on an SM: by shared memory (1 KiB reserved a block), by registers
 * (allocated per warp in units of 256 of the 64K) and at most 16. */
static int decode_blocks_per_sm(int regs, int nw, const kiln_rt_device_info *di, unsigned smem) {
    int by_regs = regs > 0 ? 65536 / (nw * ((regs * 32 + 255) / 256 * 256)) : 16;
    int by_smem = di->smem_per_sm / ((int)smem + 1024);
    return KILN_MAX(1, KILN_MIN(16, KILN_MIN(by_regs, by_smem)));
}
/* The decode split-K: partitions of P tokens (0: one pass) when the base
 * blocks (sequences x head groups) would not fill the slots (blocks resident
 * at once): 16-bit caches take at least enough partitions to fill them, FP8
 * ones at most as many as fill one wave (more would start a second, mostly
 * empty wave). force_partition > 0 forces P, < 0 forbids splitting.
 * 16-bit caches whose base blocks fill under a quarter of the slots (small
 * batches) split adaptively instead (P = -1, kernel_src/attn_decode.cu
 * part_size): each sequence's own context in *n_parts parts of 64-token
 * multiples, as many parts as fill the slots. max_ctx_len is the longest
 * context the launch may see (a captured graph's: the model's), so a fixed P
 * from it left a batch-1 step at a few hundred tokens one partition of 256+
 * per head group: 8 blocks on 132 SMs. $KILN_DECODE_ADAPTIVE=0: the fixed P
 * always. */
static int decode_partition_fixed(const kiln_gpu_attn *a, int base, int slots, bool kv8) {
    if (a->force_partition > 0) return (a->force_partition + 63) / 64 * 64;
    if (a->force_partition < 0 || base >= slots || a->max_ctx_len <= 512) return 0;
    int want = kv8 ? slots / base : (slots + base - 1) / base;
    /* 16-bit caches: two parts for base blocks filling over half the slots make more blocks than slots (a
     * second wave: no more parallelism at any context) and, at a captured graph's max_ctx_len (the model's),
     * an always-empty second part and a reduction launch at short contexts: kiln bench -b 32 -s 128 -o 256
     * --max-model-len 8192, H200, 2026-12-01: split 5,874 / 5,882 tok/s, no split 6,011 / 6,029 */
    if (want < (kv8 ? 2 : 3)) return 0;
    int P = (a->max_ctx_len + want - 1) / want;
    P = KILN_MAX(256, (P + 63) / 64 * 64);
    return P >= a->max_ctx_len ? 0 : P;
}
/* 16-bit caches: the fixed P, or -1 with *n_parts for the adaptive split */
static int decode_partition(const kiln_gpu_attn *a, int base, int slots, bool adaptive, int *n_parts) {
    int P = decode_partition_fixed(a, base, slots, false);
    if (!adaptive || a->force_partition || base >= slots || a->max_ctx_len <= 64) return P;
    int want = (slots + base - 1) / base;
    if (want < 4) return P;
    *n_parts = KILN_MIN(want, (a->max_ctx_len + 63) / 64);
    return -1;
}
/* A slot of kiln_attn_decode_pw's ring: a K + V tile, then the group's query rows (kernel_src/attn_decode.cu
 * PW_SLOT) */
static int pw_slot_bytes(int hd, int grp, kiln_dtype act) {
    return (tile_bytes(hd, false) + grp * hd * (int)kiln_dtype_size(act) + 127) / 128 * 128;
}
/* kiln_attn_decode_pw's grid: the items (sequence x KV group) dealt to the warps that are resident at once,
 * as evenly as whole items go (k a warp, at most 32), or g->decode_pw_k a warp when set. Returns false
 * where it does not apply: mode 1 (the default) takes it only when the items fill 90% of the resident
 * warps (bench_kernels decode-large, H200, 2026-12-01, % of copy, kiln_attn_decode against it: b256
 * ctx128 57.0 / 74.2, ctx192 67.5 / 79.9, ctx256 78.4 / 83.5, b128 ctx256 78.3 / 89.3, but b64 ctx256
 * 75.5 / 62.5 with half the warps idle). Those are grids no split is ever planned for (ops_gpu.c
 * decode_partition: base >= slots), so a decode graph and an eager step take the same kernel. */
static bool decode_pw_plan(kiln_gpu *g, kiln_rt_func *f, const kiln_rt_device_info *di, int items, int nw,
                           unsigned smem, int *blocks) {
    if ((int)smem > di->smem_per_block_optin) return false;
    kiln_rt_func_attrs fa = {0};
    if (kiln_rt_func_get_attrs(f, &fa) != KILN_OK) fa.regs = 0;
    const int64_t resident = (int64_t)di->n_sms * decode_blocks_per_sm(fa.regs, nw, di, smem) * nw;
    int k = g->decode_pw_k;
    if (!k) {
        if (g->decode_pw == 1 && (int64_t)items * 10 < resident * 9) return false;
        k = (int)((items + resident - 1) / resident);
        k = KILN_MIN(k, 32);
    }
    const int64_t tw = (items + k - 1) / k;
    *blocks = (int)((tw + nw - 1) / nw);
    return true;
}
/* The FP8 decode pipeline: the kernel takes as many tile slots a warp (4 to
 * 8) as the launch's shared memory holds. $KILN_DECODE_STAGES fixes the
 * count; otherwise 4 (three blocks an SM at head dim 128) unless 6 (two
 * blocks) is estimated 5% faster by a lock-step model of the grid: waves x
 * the longest block's tokens x blocks sharing an SM (so grids that leave the
 * last wave of three blocks an SM mostly empty take two). Sets the stages
 * and the split. */
static void decode_fp8_plan(kiln_rt_func *f, const kiln_rt_device_info *di, const kiln_gpu_attn *a, int hd, int base,
                            int *stages, int *P) {
    const int tb = tile_bytes(hd, true);
    kiln_rt_func_attrs fa = {0};
    if (kiln_rt_func_get_attrs(f, &fa) != KILN_OK) fa.regs = 0; /* unknown: smem decides */
    int cand[2] = {4, 6}, nc = 2, env = knob(0, "KILN_DECODE_STAGES", 0);
    if (env) cand[0] = KILN_MAX(4, KILN_MIN(8, env)), nc = 1;
    double best = 0;
    for (int i = 0; i < nc; i++) {
        int st = cand[i];
        while (st > 4 && (int)decode_smem(4, st, tb, hd) > di->smem_per_block_optin) st--;
        int occ = decode_blocks_per_sm(fa.regs, 4, di, decode_smem(4, st, tb, hd)), slots = di->n_sms * occ;
        int p = decode_partition_fixed(a, base, slots, true);
        int64_t blocks = (int64_t)base * (p ? (a->max_ctx_len + p - 1) / p : 1);
        double est = (double)((blocks + slots - 1) / slots) * (p ? p : a->max_ctx_len) * occ;
        if (i == 0 || est < 0.95 * best) *stages = st, *P = p, best = est;
    }
}

/* kiln_gpu_attn.prefill_kernel as the choices below read it: 2 (the first wgmma kernel, kiln_attn_prefill_wg,
 * since removed) counts as 0, the default choice */
static int prefill_choice(const kiln_gpu_attn *a) { return a->prefill_kernel == 2 ? 0 : a->prefill_kernel; }
/* $KILN_PREFILL_KERNEL as the choices below read it: "wg" (that removed kernel) counts as unset */
static const char *prefill_env(void) {
    const char *v = getenv("KILN_PREFILL_KERNEL");
    return v && strcmp(v, "wg") ? v : NULL;
}
/* kernel_src/attn_prefill.cu (kiln_attn_prefill) serves 16-bit caches with
 * head_dim <= 128 (its P2_OK) where the wgmma kernel does not run (prefill_kernel
 * 4 or $KILN_PREFILL_KERNEL=v2 ask for it); everything else, and
 * $KILN_PREFILL_KERNEL=v1, runs kiln_attn_prefill_v1 */
static bool prefill_v2(const kiln_gpu_attn *a, bool kv8, int hd) {
    const int pk = prefill_choice(a);
    if (kv8 || hd > 128 || pk == 1) return false;
    const char *v = prefill_env();
    return pk || !(v && !strcmp(v, "v1"));
}
/* its dynamic shared memory (P2_Q_BYTES + 2 * P2_STAGE_BYTES): Q [128 rows]
 * and 2 stages of K [64 tokens], each ceil16(hd) / 8 chunks of 16 bytes a
 * row, and V [hd dims of 64 tokens] */
static unsigned prefill_smem(int hd) {
    int kch = (hd + 15) / 16 * 2;
    return (unsigned)(kch * 16 * (128 + 2 * 64) + 2 * hd * 128);
}
/* the dynamic shared memory of kernel_src/attn_prefill_wg.cu's kiln_attn_prefill_wg2 (W2_SMEM): 1024 bytes of
 * alignment slack, Q [128 rows] and 3 stages of K and V [128 tokens], hd 16-bit elements a row (token) or
 * column; the kernel adds 96 bytes of static shared memory (its mbarriers) */
static unsigned prefill_wg2_smem(int hd) { return (unsigned)(1024 + (128 + 3 * 2 * 128) * hd * 2); }
/* kiln_attn_prefill_wg2 (wgmma: sm_90a; 384 threads: a producer warpgroup, two consumer warpgroups) on
 * sm_90 with a 16-bit cache and head_dim 64 or 128, when asked for ($KILN_PREFILL_KERNEL=wg2, or
 * prefill_kernel 3), and by default where the longest context is at least KILN_PREFILL_WG2_MIN_CTX tokens
 * (its pipeline pays off over long key ranges: H200, bench_kernels prefill, 8 x 2048 285.1 TFLOP/s against
 * 219.7 for attn_prefill, 1 x 8192 334.6 against 280.3, but 32 x 512 170.2 against 182.6) */
static bool prefill_wg2(const kiln_gpu_attn *a, const kiln_rt_device_info *di, bool kv8, int hd) {
    if (kv8 || (hd != 64 && hd != 128) || di->cc_major != 9 || di->cc_minor != 0 ||
        (int)prefill_wg2_smem(hd) + 128 > di->smem_per_block_optin)
        return false;
    const int pk = prefill_choice(a);
    if (pk) return pk == 3 || pk == 5;
    const char *v = prefill_env();
    if (v && *v) return !strcmp(v, "wg2") || !strcmp(v, "wg2p");
    return a->max_ctx_len >= KILN_PREFILL_WG2_MIN_CTX;
}

/* ... in its persistent form (kiln_attn_prefill_wg2p: one block an SM walking the work items): prefill_kernel 5,
 * $KILN_PREFILL_KERNEL=wg2p, or g->prefill_persist ($KILN_PREFILL_PERSIST, read at kiln_gpu_create) where wg2 runs */
static bool prefill_wg2_persist(const kiln_gpu *g, const kiln_gpu_attn *a) {
    const int pk = prefill_choice(a);
    if (pk) return pk == 5;
    const char *v = prefill_env();
    if (v && *v) return !strcmp(v, "wg2p");
    return g->prefill_persist;
}

/* a->rope by its own kernel in front of the attention (where the decode kernels do not take it) */
static kiln_status attn_rope_in_front(kiln_gpu *g, kiln_rt_stream *s, kiln_dtype act, const kiln_gpu_attn *a) {
    return kiln_gpu_rope_kv_write(g, s, a->q, act, a->q_stride, a->rope_pos, a->n_seqs, a->nq, a->rope, a->kcache,
                                  a->vcache, a->l, a->rope_slots);
}

kiln_status kiln_gpu_attention(kiln_gpu *g, kiln_rt_stream *s, kiln_dtype act, const kiln_gpu_attn *a) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f, *fr;
    const kiln_kv_layout *l = a->l;
    const bool kv8 = fp8(l->dtype);
    KILN_CHECK(act == KILN_DTYPE_BF16 || act == KILN_DTYPE_F16, KILN_ERR_UNSUPPORTED,
               "GPU attention needs bf16 or fp16 activations, not %s", dt(act));
    KILN_CHECK(l->dtype == act || kv8, KILN_ERR_UNSUPPORTED, "GPU attention needs the KV cache in %s or FP8, not %s",
               dt(act), dt(l->dtype));
    const int kvm = kiln_gpu_kv_multiple(l->dtype); /* (x, a key's 16 bytes, is the same number) */
    KILN_CHECK(l->x == kvm && l->head_dim % kvm == 0 && l->block_size % kvm == 0, KILN_ERR_UNSUPPORTED,
               "GPU attention%s needs head_dim and block_size multiples of %d (got %d, %d)",
               kv8 ? " over an FP8 cache" : "", kvm, l->head_dim, l->block_size);
    KILN_CHECK(a->nq % l->n_kv_heads == 0, KILN_ERR_INVALID_ARGUMENT, "%d query heads, %d KV heads", a->nq,
               l->n_kv_heads);
    if (a->n_seqs <= 0) return KILN_OK;
    int hd = l->head_dim, grp = kiln_jit_attn_group(a->nq, l->n_kv_heads), nkv = l->n_kv_heads;
    const kiln_rt_device_info *di = kiln_rt_device_get_info(g->dev);
    const int n_sms = di->n_sms;
    char defs[128];
    snprintf(defs, sizeof defs, "ACT=%s BLOCK_SIZE=%d GROUP=%d HEAD_DIM=%d KV=%s", dt(act), l->block_size, grp, hd,
             dt(l->dtype));
    kiln_devptr kvs = kv8 ? (kiln_devptr)(uintptr_t)l->head_scales : 0;
    KILN_CHECK(!kv8 || kvs || (l->k_scale == 1.0f && l->v_scale == 1.0f), KILN_ERR_INVALID_ARGUMENT,
               "GPU attention over an FP8 cache reads its scales from the device (layout.head_scales), not k_scale / "
               "v_scale");
    int nq = a->nq, n_seqs = a->n_seqs, maxb = a->max_blocks, window = a->window;
    float scale = a->scale;
    kiln_devptr out = a->out, q = a->q, kc = a->kcache, vc = a->vcache, qs = a->qstart, cl = a->ctx_len,
                bt = a->block_tables;
    int64_t qst = a->q_stride;
    const kiln_gpu_rope_params *rp = a->rope;
    KILN_CHECK(!rp || a->max_q_len <= 1, KILN_ERR_INVALID_ARGUMENT, "attention with a rope: decode steps only");
    /* the rope fused into the decode kernel (kiln_gpu_attn.rope): kiln_attn_decode_rope, or kiln_attn_decode_pw_rope
     * (pw_fuse below) */
    bool fuse = rp && g->decode_rope && !kv8 && l->dtype == act && l->x == 8 && hd % 32 == 0 && rp->head_dim == hd &&
                rp->rot_dim == hd && !rp->interleaved && !rp->dyn_seq_len;
    if (rp) KILN_TRY(check_rope(rp, act));
    if (a->max_q_len <= 1) {
        /* 16-bit caches: 3 stages (kernel_src/attn_decode.cu STAGES) for each
         * of nw warps (the block's size: 4 blocks an SM at head dim 128 with
         * 2 warps, 2 with 4), split for those slots. By default 4 warps,
         * except 2 where the blocks would not fit one wave of 2 an SM and no
         * context exceeds KILN_DECODE_W2_MAX_CTX (H200, bench_kernels
         * decode-short, b64: 2 warps 25.1 / 33.3 / 41.1 us at 256 / 384 / 512
         * tokens against 26.1 / 33.8 / 42.7 with 4, but 72.6 against 55.9 at
         * 768; -b 32: 4 warps 1.4% faster). A captured
         * graph's max_ctx_len is the model's, so graphs take 4 warps.
         * $KILN_DECODE_WARPS=2|4 fixes it. FP8 caches: 4 warps */
        int base = n_seqs * (nq / grp), stages = 3, P = 0, n_parts = 1;
        const int nw = kv8                                ? 4
                       : g->decode_warps                  ? g->decode_warps
                       : base > 2 * n_sms && a->max_ctx_len <= KILN_DECODE_W2_MAX_CTX ? 2
                                                          : 4;
        KILN_TRY(kiln_rt_kernels_get(g->k, "attn_decode", defs, &f));
        if (kv8) decode_fp8_plan(f, di, a, hd, base, &stages, &P);
        else P = decode_partition(a, base, (nw == 4 ? 2 : 4) * n_sms, g->decode_adaptive, &n_parts);
        if (!kv8 && P == 0 && g->decode_pw) {
            /* the rope fused here too where an item (sequence x KV group) is a whole KV head */
            const bool pw_fuse = fuse && grp == nq / nkv && hd % 64 == 0;
            kiln_rt_func *fp;
            KILN_TRY(kiln_rt_kernels_get(g->k, pw_fuse ? "attn_decode_pw_rope" : "attn_decode_pw", defs, &fp));
            int blocks = 0, pw_nw = g->decode_pw_warps;
            unsigned pw_smem = (unsigned)(pw_nw * g->decode_pw_stages * pw_slot_bytes(hd, grp, act));
            if (decode_pw_plan(g, fp, di, base, pw_nw, pw_smem, &blocks)) {
                if (pw_fuse) {
                    kiln_devptr rpos = a->rope_pos, rsl = a->rope_slots, inv = rp->inv_freq;
                    float ms = rp->mscale;
                    LAUNCH(fp, (unsigned)blocks, 1, 1, (unsigned)(32 * pw_nw), pw_smem, s, &out, &q, &qst, &kc, &vc,
                           &qs, &cl, &bt, &maxb, &n_seqs, &nq, &nkv, &scale, &window, &rpos, &inv, &ms, &rsl);
                    return KILN_OK;
                }
                if (rp) KILN_TRY(attn_rope_in_front(g, s, act, a));
                LAUNCH(fp, (unsigned)blocks, 1, 1, (unsigned)(32 * pw_nw), pw_smem, s, &out, &q, &qst, &kc, &vc, &qs,
                       &cl, &bt, &maxb, &n_seqs, &nq, &nkv, &scale, &window);
                return KILN_OK;
            }
        }
        if (P > 0) n_parts = (a->max_ctx_len + P - 1) / P;
        unsigned smem = decode_smem(nw, stages, tile_bytes(hd, kv8), hd);
        kiln_devptr part_o = 0, part_ml = 0, counters = 0;
        if (P) {
            size_t need_o = (size_t)n_seqs * nq * n_parts * hd * 4, need_ml = (size_t)n_seqs * nq * n_parts * 2 * 4;
            if (need_o + need_ml + 256 > g->ws_bytes) P = 0, n_parts = 1; /* no room: one pass */
            else {
                part_o = g->ws;
                part_ml = g->ws + (need_o + 255) / 256 * 256;
                /* the partitions combined by the attention kernel's last block of each (sequence, KV group) */
                if ((g->decode_fused == 1 || (g->decode_fused == 2 && n_seqs >= 2) ||
                     (g->decode_fused == 3 && P > 0 && !kv8)) &&
                    (int64_t)n_seqs * (nq / grp) <= KILN_ATTN_COUNTERS)
                    counters = g->attn_counters;
            }
        }
        if (fuse && (int)smem + hd * 4 > di->smem_per_block_optin) fuse = false;
        if (rp && !fuse) KILN_TRY(attn_rope_in_front(g, s, act, a));
        if (fuse) { /* kernel_src/attn_decode.cu kiln_attn_decode_rope: the cos / sin table past the tiles */
            KILN_TRY(kiln_rt_kernels_get(g->k, "attn_decode_rope", defs, &f));
            kiln_devptr rpos = a->rope_pos, rsl = a->rope_slots, inv = rp->inv_freq;
            float ms = rp->mscale;
            LAUNCH(f, (unsigned)(nq / grp), (unsigned)n_seqs, (unsigned)n_parts, (unsigned)(32 * nw),
                   smem + (unsigned)hd * 4, s, &out, &q, &qst, &kc, &vc, &qs, &cl, &bt, &maxb, &n_seqs, &nq, &nkv,
                   &scale, &window, &P, &n_parts, &part_o, &part_ml, &counters, &rpos, &inv, &ms, &rsl);
        } else
            LAUNCH(f, (unsigned)(nq / grp), (unsigned)n_seqs, (unsigned)n_parts, (unsigned)(32 * nw), smem, s, &out,
                   &q, &qst, &kc, &vc, &qs, &cl, &bt, &maxb, &n_seqs, &nq, &nkv, &scale, &window, &P, &n_parts,
                   &part_o, &part_ml, &kvs, &counters);
        if (P && !counters) {
            KILN_TRY(kiln_rt_kernels_get(g->k, "attn_reduce", defs, &fr));
            /* a warp a query head, 4 to a block (kernel_src/attn_decode.cu kiln_attn_reduce) */
            LAUNCH(fr, (unsigned)((nq + 3) / 4), (unsigned)n_seqs, 1, 128, 0, s, &out, &part_o, &part_ml, &qs, &cl, &nq,
                   &n_parts, &P);
        }
    } else if (prefill_wg2(a, di, kv8, hd)) {
        int tt = 128 / grp; /* kernel_src/attn_prefill_wg.cu WG_BM / GROUP */
        int gx = (a->max_q_len + tt - 1) / tt;
        if (prefill_wg2_persist(g, a)) { /* one block an SM over the gx x n_seqs x nq / grp work items */
            KILN_TRY(kiln_rt_kernels_get(g->k, "attn_prefill_wg2p", defs, &f));
            const int64_t items = (int64_t)gx * n_seqs * (nq / grp);
            LAUNCH(f, (unsigned)KILN_MIN(items, (int64_t)di->n_sms), 1, 1, 384, prefill_wg2_smem(hd), s, &out, &q, &qst,
                   &kc, &vc, &qs, &cl, &bt, &maxb, &n_seqs, &nq, &nkv, &scale, &window, &kvs, &gx);
        } else {
            KILN_TRY(kiln_rt_kernels_get(g->k, "attn_prefill_wg2", defs, &f));
            LAUNCH(f, (unsigned)gx, (unsigned)n_seqs, (unsigned)(nq / grp), 384, prefill_wg2_smem(hd), s, &out, &q,
                   &qst, &kc, &vc, &qs, &cl, &bt, &maxb, &n_seqs, &nq, &nkv, &scale, &window, &kvs);
        }
    } else if (prefill_v2(a, kv8, hd)) {
        KILN_TRY(kiln_rt_kernels_get(g->k, "attn_prefill", defs, &f));
        int tt = 128 / grp; /* kernel_src/attn_prefill.cu P2_BM / GROUP */
        LAUNCH(f, (unsigned)((a->max_q_len + tt - 1) / tt), (unsigned)n_seqs, (unsigned)(nq / grp), 128,
               prefill_smem(hd), s, &out, &q, &qst, &kc, &vc, &qs, &cl, &bt, &maxb, &n_seqs, &nq, &nkv, &scale,
               &window, &kvs);
    } else {
        KILN_TRY(kiln_rt_kernels_get(g->k, "attn_prefill_v1", defs, &f));
        int tt = 64 / grp; /* kernel_src/attn_prefill_v1.cuh V1_BM / GROUP */
        unsigned smem = (unsigned)(2 * 4 * tile_bytes(hd, kv8));
        LAUNCH(f, (unsigned)((a->max_q_len + tt - 1) / tt), (unsigned)n_seqs, (unsigned)(nq / grp), 128, smem, s, &out,
               &q, &qst, &kc, &vc, &qs, &cl, &bt, &maxb, &n_seqs, &nq, &nkv, &scale, &window, &kvs);
    }
fail:
    return st;
}

/* --------------------------------------------------------------- sampling */

kiln_status kiln_gpu_sample_penalties(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr logits, int n_rows, int V,
                                      kiln_devptr params, kiln_devptr prompt_ids, kiln_devptr prompt_off,
                                      kiln_devptr out_ids, kiln_devptr out_off, kiln_devptr banned_ids,
                                      kiln_devptr banned_off) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK(n_rows <= g->max_rows && V <= g->vocab, KILN_ERR_LIMIT,
               "sampling %d rows of %d exceeds the workspace (%d rows of %d)", n_rows, V, g->max_rows, g->vocab);
    KILN_TRY(kiln_rt_kernels_get(g->k, "sample_penalties", "", &f));
    kiln_devptr counts = g->counts;
    LAUNCH(f, (unsigned)n_rows, 1, 1, 1024, 0, s, &logits, &V, &params, &prompt_ids, &prompt_off, &out_ids, &out_off,
           &banned_ids, &banned_off, &counts);
fail:
    return st;
}

kiln_status kiln_gpu_sample(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr tokens, kiln_devptr logprobs,
                            kiln_devptr logits, int n_rows, int V, kiln_devptr params) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    KILN_CHECK(n_rows <= g->max_rows && V <= g->vocab, KILN_ERR_LIMIT,
               "sampling %d rows of %d exceeds the workspace (%d rows of %d)", n_rows, V, g->max_rows, g->vocab);
    KILN_TRY(kiln_rt_kernels_get(g->k, "sample", "", &f));
    kiln_devptr ws = g->sample_ws;
    LAUNCH(f, (unsigned)n_rows, 1, 1, 1024, 0, s, &tokens, &logprobs, &logits, &V, &params, &ws);
fail:
    return st;
}

int kiln_gpu_set_sample_cluster(kiln_gpu *g, int cl) {
    int was = g->sample_cl;
    g->sample_cl = cl == KILN_SAMPLE_CLUSTER_SPLIT  ? KILN_SAMPLE_CLUSTER_SPLIT
                   : cl <= 0                         ? 0
                   : cl >= KILN_SAMPLE_CLUSTER_AUTO ? KILN_SAMPLE_CLUSTER_AUTO
                   : cl >= 8                        ? 8
                   : cl >= 4                        ? 4
                   : cl >= 2                        ? 2
                                                    : 1;
    return was;
}

int kiln_gpu_sample_cluster(const kiln_gpu *g, int n_rows) {
    const kiln_rt_device_info *di = kiln_rt_device_get_info(g->dev);
    int cl = g->sample_cl;
    /* the split kernel at every row count (runtime/kiln_rt.h KILN_SAMPLE_CLUSTER_AUTO) */
    if (cl == KILN_SAMPLE_CLUSTER_AUTO || cl == KILN_SAMPLE_CLUSTER_SPLIT) return KILN_SAMPLE_CLUSTER_SPLIT;
    return cl > 1 && di->cc_major < 9 ? 0 : cl;
}

kiln_status kiln_gpu_sample_greedy(kiln_gpu *g, kiln_rt_stream *s, kiln_devptr tokens, kiln_devptr logprobs,
                                   kiln_devptr logits, int n_rows, int V, kiln_devptr params) {
    kiln_status st = KILN_OK;
    kiln_rt_func *f;
    const int cl = kiln_gpu_sample_cluster(g, n_rows);
    if (!cl) return kiln_gpu_sample(g, s, tokens, logprobs, logits, n_rows, V, params);
    KILN_CHECK(n_rows >= 0 && n_rows <= 65535 && V >= 1, KILN_ERR_LIMIT, "greedy sampling of %d rows of %d", n_rows,
               V);
    if (cl == KILN_SAMPLE_CLUSTER_SPLIT) {
        KILN_CHECK(n_rows <= g->max_rows && V <= g->vocab, KILN_ERR_LIMIT,
                   "greedy sampling of %d rows of %d exceeds the workspace (%d rows of %d)", n_rows, V, g->max_rows,
                   g->vocab);
        if (n_rows == 0) return KILN_OK;
        KILN_TRY(kiln_rt_kernels_get(g->k, "sample_argmax_split", "", &f));
        kiln_devptr part = g->sa_part, cnt = g->sa_counters;
        LAUNCH(f, (unsigned)((V + SA_CHUNK - 1) / SA_CHUNK), (unsigned)n_rows, 1, 256, 0, s, &tokens, &logprobs,
               &logits, &V, &part, &cnt);
        return KILN_OK;
    }
    KILN_TRY(get(g, "sample_argmax", &f, "CL=%d", cl));
    LAUNCH(f, (unsigned)cl, (unsigned)n_rows, 1, 1024, 0, s, &tokens, &logprobs, &logits, &V);
fail:
    return st;
}
