/*
 * bench_kernels.c -- speed of the CUDA kernels, cuBLASLt GEMMs and the JIT,
 * as fractions of ceilings measured in the same run (device-to-device copy
 * bandwidth counting bytes read + written; cuBLASLt bf16 8192^3).
 * Events around batches of launches (input sets rotated when one set would
 * fit in L2), warm-up first, median over batches.
 * Usage: bench_kernels [--quick] [--graph] [filter]
 *   --graph: each batch of calls captured in a CUDA graph and replayed (as the engine's decode steps run)
 *   $KILN_BENCH_PDL_EARLY=1: the GEMM rows through the kernels' PDL_EARLY=1 copies (the engine's setting in
 *   decode steps of up to KILN_PDL_EARLY_MAX_SEQS sequences)
 */
#include "cuda/ops_gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static kiln_rt_device *dev;
static kiln_rt_stream *st;
static kiln_gpu *gpu;
static kiln_rt_event *e0, *e1;
static double copy_bw, gemm_rate; /* bytes/s, flop/s */
static bool quick;
static const char *filter;

#define CK(expr)                                                                                                       \
    do {                                                                                                               \
        if ((expr) != KILN_OK) {                                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, kiln_last_error());                          \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static uint64_t rs = 88172645463325252ull;
static float gauss(void) {
    float a = 0;
    for (int i = 0; i < 4; i++) {
        rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
        a += (float)((rs >> 40) * (1.0 / 16777216.0)) - 0.5f;
    }
    return a * 1.7f;
}

/* n random elements of dt on the device: slices of a random pool (8M
 * elements per dtype, filled once on the host) copied at random offsets, so
 * big buffers cost device copies rather than host generation. */
#define POOL_N ((size_t)8 << 20)
static kiln_devptr pools[KILN_DTYPE_COUNT];
static kiln_devptr drand(size_t n, kiln_dtype dt, float scale) {
    size_t es = kiln_dtype_size(dt);
    if (!pools[dt]) {
        float *f = malloc(sizeof(float) * POOL_N);
        void *h = malloc(POOL_N * es);
        for (size_t i = 0; i < POOL_N; i++) f[i] = gauss();
        kiln_from_f32(h, dt, f, POOL_N);
        CK(kiln_rt_malloc(dev, POOL_N * es, &pools[dt]));
        CK(kiln_rt_memcpy_htod(pools[dt], h, POOL_N * es, NULL));
        free(f);
        free(h);
    }
    (void)scale;
    kiln_devptr p;
    CK(kiln_rt_malloc(dev, n * es, &p));
    for (size_t off = 0; off < n;) {
        rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
        size_t start = (size_t)(rs % (POOL_N / 2));
        size_t m = KILN_MIN(n - off, POOL_N / 2);
        CK(kiln_rt_memcpy_dtod(p + off * es, pools[dt] + start * es, m * es, NULL));
        off += m;
    }
    return p;
}

static int cmpf(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

typedef void (*op_fn)(void *ctx, int set);

/* --graph: time_op captures a batch's `per` calls in a CUDA graph once and
 * times its replays (the host's launch cost out of the measurement, as in
 * the engine's decode graphs) */
static bool use_graph;

/* median seconds per call: batches of `per` calls over rotating sets */
static double time_op(op_fn fn, void *ctx, int n_sets, int per, int batches) {
    for (int i = 0; i < 3; i++) fn(ctx, i % n_sets);
    CK(kiln_rt_stream_sync(st));
    float ms[64];
    if (batches > 64) batches = 64;
    if (quick && batches > 5) batches = 5;
    kiln_rt_graph *gr = NULL;
    if (use_graph) {
        CK(kiln_rt_graph_begin(st));
        for (int i = 0; i < per; i++) fn(ctx, i % n_sets);
        CK(kiln_rt_graph_end(st, &gr));
        CK(kiln_rt_graph_launch(gr, st)); /* its first replay uploads it: not timed */
        CK(kiln_rt_stream_sync(st));
    }
    for (int b = 0; b < batches; b++) {
        CK(kiln_rt_event_record(e0, st));
        if (gr) CK(kiln_rt_graph_launch(gr, st));
        else
            for (int i = 0; i < per; i++) fn(ctx, (b * per + i) % n_sets);
        CK(kiln_rt_event_record(e1, st));
        CK(kiln_rt_event_sync(e1));
        CK(kiln_rt_event_elapsed_ms(e0, e1, &ms[b]));
        ms[b] /= (float)per;
    }
    if (gr) kiln_rt_graph_destroy(gr);
    qsort(ms, (size_t)batches, sizeof(float), cmpf);
    return ms[batches / 2] * 1e-3;
}

static bool want(const char *name) { return !filter || strstr(name, filter); }

static void row_bw(const char *name, const char *shape, double sec, double bytes, double target) {
    double frac = bytes / sec / copy_bw;
    printf("%-22s %-34s %9.1f us %8.0f GB/s %6.1f%% of copy  target %3.0f%% %s\n", name, shape, sec * 1e6,
           bytes / sec / 1e9, frac * 100, target * 100, target <= 0 ? "" : frac >= target ? "ok" : "MISS");
    fflush(stdout);
}
static void row_flops(const char *name, const char *shape, double sec, double flops, double target_frac,
                      double target_abs) {
    double rate = flops / sec;
    bool ok = target_abs > 0 ? rate >= target_abs : rate >= target_frac * gemm_rate;
    printf("%-22s %-34s %9.1f us %8.1f TFLOP/s %5.1f%% of gemm  %s\n", name, shape, sec * 1e6, rate / 1e12,
           rate / gemm_rate * 100, (target_abs > 0 || target_frac > 0) ? (ok ? "ok" : "MISS") : "");
    fflush(stdout);
}

/* ---------------------------------------------------------------- ceilings */

typedef struct copy_ctx { kiln_devptr a, b; size_t n; } copy_ctx;
static void op_copy(void *vc, int set) {
    copy_ctx *c = vc;
    (void)set;
    CK(kiln_rt_memcpy_dtod(c->b, c->a, c->n, st));
}

typedef struct gemm_ctx {
    kiln_devptr x[4], w[4], out;
    int M, N, K;
    kiln_dtype odt;
    kiln_gpu *g; /* NULL: the default kiln_gpu (cuBLASLt) */
} gemm_ctx;
static void op_gemm(void *vc, int set) {
    gemm_ctx *c = vc;
    CK(kiln_gpu_gemm(c->g ? c->g : gpu, st, c->out, 0, c->odt, c->x[set], c->w[set], KILN_DTYPE_BF16, 0, c->M, c->N,
                     c->K));
}

/* gate/up at small M: the GEMV then kiln_gpu_silu_mul (into out + N elements),
 * or the GEMV with the SiLU-and-mul as its epilogue (kernel_src/gemv.cu GLU=1) */
static void op_gemm_then_silu(void *vc, int set) {
    gemm_ctx *c = vc;
    op_gemm(vc, set);
    CK(kiln_gpu_silu_mul(c->g, st, c->out + (kiln_devptr)((size_t)c->M * c->N * 2), c->out, KILN_DTYPE_BF16, c->M,
                         c->N / 2));
}
static void op_gemm_silu(void *vc, int set) {
    gemm_ctx *c = vc;
    CK(kiln_gpu_gemm_silu(c->g, st, c->out, 0, c->x[set], c->w[set], KILN_DTYPE_BF16, 0, c->M, c->N, c->K));
}

/* cuMemcpyDtoD of the bytes an elementwise row moves (n read + n written),
 * rotating over 4 sets so L2 does not flatter: what the copy engine itself
 * reaches at that size, against the 2 GiB ceiling (the fixed cost of a
 * launch, ramp and tail weighs on a 33.5 MB move as on a kernel) */
typedef struct copy_sets { kiln_devptr a, b; size_t n; } copy_sets;
static void op_copy_set(void *vc, int set) {
    copy_sets *c = vc;
    CK(kiln_rt_memcpy_dtod(c->b + (kiln_devptr)(set * c->n), c->a + (kiln_devptr)(set * c->n), c->n, st));
}
static void bench_copy_sizes(void) {
    const size_t moved[] = {(size_t)4096 * 2048 * 2 * 2, (size_t)4096 * 4096 * 2 * 2, (size_t)4096 * 8192 * 2 * 2};
    for (int i = 0; i < 3; i++) {
        copy_sets c = {0, 0, moved[i] / 2};
        CK(kiln_rt_malloc(dev, 4 * c.n, &c.a));
        CK(kiln_rt_malloc(dev, 4 * c.n, &c.b));
        CK(kiln_rt_memset8(c.a, 1, 4 * c.n, NULL));
        double t = time_op(op_copy_set, &c, 4, 20, 25);
        char shape[64];
        snprintf(shape, sizeof shape, "%.1f MB moved (as a row above)", (double)moved[i] / 1e6);
        row_bw("copy (cuMemcpyDtoD)", shape, t, (double)moved[i], 0);
        kiln_rt_free(dev, c.a), kiln_rt_free(dev, c.b);
    }
}

static void ceilings(void) {
    const bool was_graph = use_graph; /* the ceilings as plain launches (a copy node in a graph ran ~35% slower, s118) */
    use_graph = false;
    copy_ctx c = {0, 0, (size_t)2 << 30};
    CK(kiln_rt_malloc(dev, c.n, &c.a));
    CK(kiln_rt_malloc(dev, c.n, &c.b));
    CK(kiln_rt_memset8(c.a, 1, c.n, NULL));
    double t = time_op(op_copy, &c, 1, 3, 15);
    copy_bw = 2.0 * (double)c.n / t;
    kiln_rt_free(dev, c.a);
    kiln_rt_free(dev, c.b);
    gemm_ctx g = {{0}, {0}, 0, 8192, 8192, 8192, KILN_DTYPE_BF16, NULL};
    g.x[0] = drand((size_t)8192 * 8192, KILN_DTYPE_BF16, 1);
    g.w[0] = drand((size_t)8192 * 8192, KILN_DTYPE_BF16, 1);
    CK(kiln_rt_malloc(dev, (size_t)8192 * 8192 * 2, &g.out));
    t = time_op(op_gemm, &g, 1, 3, 10);
    gemm_rate = 2.0 * 8192.0 * 8192.0 * 8192.0 / t;
    kiln_rt_free(dev, g.x[0]);
    kiln_rt_free(dev, g.w[0]);
    kiln_rt_free(dev, g.out);
    printf("ceilings: D2D copy %.0f GB/s (read+write, 2 GiB), cuBLASLt bf16 8192^3 %.1f TFLOP/s\n", copy_bw / 1e9,
           gemm_rate / 1e12);
    use_graph = was_graph;
}

/* --------------------------------------------------------------- attention */

typedef struct attn_ctx {
    kiln_gpu_attn a;
    kiln_kv_layout l;
} attn_ctx;
static int attn_kernel; /* prefill rows: kiln_gpu_attn.prefill_kernel (0: "attn prefill", the default choice; 1:
                          "attn prefill v1", 3: "attn prefill wg2", 4: "attn prefill v2", 5: "attn prefill wg2p") */
static void op_attn(void *vc, int set) {
    attn_ctx *c = vc;
    (void)set;
    CK(kiln_gpu_attention(gpu, st, KILN_DTYPE_BF16, &c->a));
}

/* Llama-3-8B heads: 32 q / 8 kv, head dim 128, block 16; bf16 or FP8 KV
 * (FP8: random codes of N(0, 1) values, per-head scales on the device) */
static void bench_attention(int batch, int ctx, int q_len, double target, bool prefill, kiln_dtype kvdt) {
    const int nq = 32, nkv = 8, hd = 128, bs = 16;
    int mb = (ctx + bs - 1) / bs, nb = mb * batch;
    attn_ctx c;
    memset(&c, 0, sizeof c);
    size_t cbytes = kiln_kv_layout_init(&c.l, nb, bs, nkv, hd, kvdt);
    size_t kes = kiln_dtype_size(kvdt);
    kiln_devptr kc = drand(cbytes / kes, kvdt, 1), vc = drand(cbytes / kes, kvdt, 1), dsc = 0;
    if (kes == 1) {
        float sc[16];
        for (int i = 0; i < 16; i++) sc[i] = 0.05f;
        CK(kiln_rt_malloc(dev, sizeof sc, &dsc));
        CK(kiln_rt_memcpy_htod(dsc, sc, sizeof sc, NULL));
        c.l.head_scales = (const void *)(uintptr_t)dsc;
    }
    int T = batch * q_len;
    int64_t qs = (int64_t)(nq + 2 * nkv) * hd;
    kiln_devptr q = drand((size_t)T * qs, KILN_DTYPE_BF16, 1), out;
    CK(kiln_rt_malloc(dev, (size_t)T * nq * hd * 2, &out));
    int32_t *qstart = malloc(sizeof(int32_t) * (size_t)(batch + 1)), *cl = malloc(sizeof(int32_t) * (size_t)batch),
            *bt = malloc(sizeof(int32_t) * (size_t)nb);
    for (int s = 0; s <= batch; s++) qstart[s] = s * q_len;
    for (int s = 0; s < batch; s++) cl[s] = ctx;
    for (int i = 0; i < nb; i++) bt[i] = (int32_t)((i * 7919) % nb); /* scattered blocks */
    kiln_devptr dqs, dcl, dbt;
    CK(kiln_rt_malloc(dev, 4 * (size_t)(batch + 1), &dqs));
    CK(kiln_rt_malloc(dev, 4 * (size_t)batch, &dcl));
    CK(kiln_rt_malloc(dev, 4 * (size_t)nb, &dbt));
    CK(kiln_rt_memcpy_htod(dqs, qstart, 4 * (size_t)(batch + 1), NULL));
    CK(kiln_rt_memcpy_htod(dcl, cl, 4 * (size_t)batch, NULL));
    CK(kiln_rt_memcpy_htod(dbt, bt, 4 * (size_t)nb, NULL));
    kiln_gpu_attn a = {out, q, qs, kc, vc, &c.l, nq, dqs, dcl, dbt, batch, mb, 1.0f / sqrtf(128.0f), 0, q_len, ctx, 0, 0, NULL, 0, 0};
    c.a = a;
    c.a.l = &c.l;
    c.a.prefill_kernel = attn_kernel;
    double t = time_op(op_attn, &c, 1, prefill ? 3 : 10, 20);
    char shape[64], name[32];
    if (prefill) {
        snprintf(shape, sizeof shape, "causal %dx%d hd128 gqa4", batch, q_len);
        snprintf(name, sizeof name, "attn prefill%s%s", kes == 1 ? " fp8" : "",
                 attn_kernel == 1   ? " v1"
                 : attn_kernel == 3 ? " wg2"
                 : attn_kernel == 4 ? " v2"
                 : attn_kernel == 5 ? " wg2p"
                                    : "");
        double flops = (double)batch * nq * ((double)q_len * (q_len + 1) / 2) * hd * 4;
        row_flops(name, shape, t, flops, 0, target);
    } else {
        snprintf(shape, sizeof shape, "b%d ctx%d 32q/8kv hd128%s", batch, ctx,
                 kes == 1 ? (kvdt == KILN_DTYPE_FP8_E4M3 ? " e4m3" : " e5m2") : "");
        snprintf(name, sizeof name, "attn decode%s", kes == 1 ? " fp8" : "");
        /* the KV bytes the cache dtype makes it read, plus q and out */
        double bytes = (double)batch * ctx * nkv * hd * 2 * (double)kes + (double)T * nq * hd * 2 * 2;
        row_bw(name, shape, t, bytes, target);
    }
    kiln_rt_free(dev, kc), kiln_rt_free(dev, vc), kiln_rt_free(dev, q), kiln_rt_free(dev, out);
    if (dsc) kiln_rt_free(dev, dsc);
    kiln_rt_free(dev, dqs), kiln_rt_free(dev, dcl), kiln_rt_free(dev, dbt);
    free(qstart), free(cl), free(bt);
}

/* ------------------------------------------------------------- elementwise */

#define NSETS 4
typedef struct ew_ctx {
    int kind, T, D;
    kiln_devptr x[NSETS], y[NSETS], w, out[NSETS], pos, slots, inv, kc, vc;
    kiln_kv_layout l;
} ew_ctx;

static void op_ew(void *vc, int s) {
    ew_ctx *c = vc;
    const kiln_dtype b = KILN_DTYPE_BF16;
    kiln_gpu_rope_params rp = {128, 128, false, c->inv, 1.0f, 0, 0, 0, 0};
    switch (c->kind) {
    case 0: CK(kiln_gpu_rmsnorm(gpu, st, c->out[s], c->x[s], c->w, b, b, c->T, c->D, 1e-5f)); break;
    case 1: CK(kiln_gpu_add_rmsnorm(gpu, st, c->out[s], c->y[s], c->x[s], c->w, b, b, c->T, c->D, 1e-5f)); break;
    case 2: CK(kiln_gpu_silu_mul(gpu, st, c->out[s], c->x[s], b, c->T, c->D)); break;
    case 3: CK(kiln_gpu_rope(gpu, st, c->x[s], b, 6144, c->pos, c->T, 32, 8, &rp)); break;
    case 4:
        CK(kiln_gpu_kv_write(gpu, st, c->kc, c->vc, &c->l, c->x[s] + 4096 * 2, c->x[s] + 5120 * 2, b, 6144, c->slots,
                             c->T));
        break;
    case 8: /* 32 KV heads: rows [q 4096 | k 4096 | v 4096] */
        CK(kiln_gpu_kv_write(gpu, st, c->kc, c->vc, &c->l, c->x[s] + 4096 * 2, c->x[s] + 8192 * 2, b, 12288, c->slots,
                             c->T));
        break;
    case 5:
    case 6:
    case 7: CK(kiln_gpu_rope_kv_write(gpu, st, c->x[s], b, 6144, c->pos, c->T, 32, &rp, c->kc, c->vc, &c->l, c->slots)); break;
    }
}

/* T = 4096 (prefill; target 80% of copy) and decode-sized T (launch
 * latency; no target, the data sits in L2). Every op but silu_mul twice,
 * one row each: the kernels decode takes (rmsnorm.cu, rope_kv.cu; row
 * "rmsnorm") and the wide ones (rmsnorm_wide.cu, rope_kv_wide.cu; row
 * "rmsnorm wide"), forced at every T (engine/cuda/ops_gpu.c picks the wide
 * ones from $KILN_ELEM_WIDE_MIN, default 1024, tokens up). The KV writes
 * (kv_write, rope_kv_write) a third row, "tile": rope_kv_wide.cu's tile
 * kernels (the engine's default; the "wide" rows are its KV blocks,
 * $KILN_KV_TILE=0), and the plain KV write a fourth, "pipe": its cp.async
 * pipeline (the default, $KILN_KV_TILE=2; the "tile" rows are mode 1). A
 * filter naming an op gives all its rows; "wide" the wide rows only, "tile"
 * the tile rows. */
static void bench_elementwise(int T) {
    /* 6: slots shifted by 5 (runs cross cache blocks; value stores element by
     * element); 7: an FP8 E4M3 cache with per-head scales; 8: the KV write of
     * 32 KV heads (4096-wide K and V rows: the "4096 tokens x 4096",
     * Llama-2-7B's heads; 4 is Llama-3-8B's 8 heads, a quarter of the bytes) */
    static const char *names[] = {"rmsnorm",       "add_rmsnorm",   "silu_mul",      "rope",    "kv_write",
                                  "rope_kv_write", "rope_kv_write", "rope_kv_write", "kv_write"};
    for (int kind = 0; kind < 9; kind++)
        for (int wide = 0; wide < (kind == 2 ? 1 : kind == 4 || kind == 8 ? 4 : kind >= 4 ? 3 : 2); wide++) {
            char name[32];
            snprintf(name, sizeof name, "%s%s", names[kind], wide == 3 ? " pipe" : wide == 2 ? " tile" : wide ? " wide" : "");
            if (!want(names[kind]) && !want(name) && !(filter && !strcmp(filter, "elementwise"))) continue;
            ew_ctx c;
            memset(&c, 0, sizeof c);
            c.kind = kind;
            c.T = T;
            c.D = kind == 2 ? 14336 : 4096;
            size_t xn = kind == 2   ? (size_t)T * 2 * 14336
                        : kind == 8 ? (size_t)T * 12288
                        : kind >= 3 ? (size_t)T * 6144
                                    : (size_t)T * 4096;
            size_t on = kind == 2 ? (size_t)T * 14336 : (size_t)T * 4096;
            for (int s = 0; s < NSETS; s++) {
                c.x[s] = drand(xn, KILN_DTYPE_BF16, 1);
                if (kind <= 2) CK(kiln_rt_malloc(dev, on * 2, &c.out[s]));
                if (kind == 1) c.y[s] = drand(on, KILN_DTYPE_BF16, 1);
            }
            c.w = drand(4096, KILN_DTYPE_BF16, 1);
            int32_t *pos = malloc(4 * (size_t)T);
            for (int t = 0; t < T; t++) pos[t] = t;
            CK(kiln_rt_malloc(dev, 4 * (size_t)T, &c.pos));
            CK(kiln_rt_malloc(dev, 4 * (size_t)T, &c.slots));
            CK(kiln_rt_memcpy_htod(c.pos, pos, 4 * (size_t)T, NULL));
            if (kind == 6)
                for (int t = 0; t < T; t++) pos[t] = t + 5;
            CK(kiln_rt_memcpy_htod(c.slots, pos, 4 * (size_t)T, NULL));
            float inv[64];
            for (int i = 0; i < 64; i++) inv[i] = 1.0f / powf(500000.0f, (float)(2 * i) / 128.0f);
            CK(kiln_rt_malloc(dev, sizeof inv, &c.inv));
            CK(kiln_rt_memcpy_htod(c.inv, inv, sizeof inv, NULL));
            size_t cb = kiln_kv_layout_init(&c.l, T / 16 + 2, 16, kind == 8 ? 32 : 8, 128,
                                            kind == 7 ? KILN_DTYPE_FP8_E4M3 : KILN_DTYPE_BF16);
            CK(kiln_rt_malloc(dev, cb, &c.kc));
            CK(kiln_rt_malloc(dev, cb, &c.vc));
            kiln_devptr hsc = 0;
            if (kind == 7) {
                float hs[16];
                for (int i = 0; i < 16; i++) hs[i] = 0.05f + 0.01f * (float)i;
                CK(kiln_rt_malloc(dev, sizeof hs, &hsc));
                CK(kiln_rt_memcpy_htod(hsc, hs, sizeof hs, NULL));
                c.l.head_scales = (const void *)(uintptr_t)hsc;
            }
            int was = kiln_gpu_set_elem_wide_min(gpu, wide ? 1 : 0); /* 0: never wide, 1: always */
            int was_tile = kiln_gpu_set_kv_tile(gpu, wide == 3 ? 2 : wide == 2 ? 1 : 0); /* KV writes: pipeline, tiles or KV blocks */
            double t = time_op(op_ew, &c, NSETS, 20, 25);
            kiln_gpu_set_elem_wide_min(gpu, was);
            kiln_gpu_set_kv_tile(gpu, was_tile);
            double bytes = 0;
            char shape[64];
            switch (kind) {
            case 0: bytes = 2.0 * on * 2; snprintf(shape, sizeof shape, "%dx4096 bf16", T); break;
            case 1: bytes = 4.0 * on * 2; snprintf(shape, sizeof shape, "%dx4096 bf16 (+residual)", T); break;
            case 2: bytes = 3.0 * on * 2; snprintf(shape, sizeof shape, "%dx14336 bf16", T); break;
            case 3: bytes = 2.0 * T * 5120 * 2; snprintf(shape, sizeof shape, "%d tok, 32q+8k heads hd128", T); break;
            case 4: bytes = 2.0 * T * 2048 * 2; snprintf(shape, sizeof shape, "%d tok, 8 kv heads hd128", T); break;
            case 5:
            case 6:
                bytes = 2.0 * T * 5120 * 2 + 2.0 * T * 2048 * 2 - T * 1024 * 2;
                snprintf(shape, sizeof shape, "%d tok, 32q/8kv hd128%s", T, kind == 6 ? " slots+5" : "");
                break;
            case 8: bytes = 2.0 * T * 8192 * 2; snprintf(shape, sizeof shape, "%d tok, 32 kv heads hd128", T); break;
            case 7: /* the caches take one byte an element */
                bytes = 2.0 * T * 5120 * 2 + T * 1024 * 2 + 2.0 * T * 1024;
                snprintf(shape, sizeof shape, "%d tok, 32q/8kv hd128 fp8 e4m3", T);
                break;
            }
            row_bw(name, shape, t, bytes, T == 4096 ? 0.80 : 0);
            for (int s = 0; s < NSETS; s++)
                kiln_rt_free(dev, c.x[s]), kiln_rt_free(dev, c.out[s]), kiln_rt_free(dev, c.y[s]);
            kiln_rt_free(dev, c.w), kiln_rt_free(dev, c.pos), kiln_rt_free(dev, c.slots), kiln_rt_free(dev, c.inv);
            kiln_rt_free(dev, c.kc), kiln_rt_free(dev, c.vc);
            if (hsc) kiln_rt_free(dev, hsc);
            free(pos);
        }
}

/* The wide rope and rope + KV write (kernel_src/rope_kv_wide.cu) at 4096
 * tokens in each tiling of their rope rows (heads per thread, hs head
 * slots), launched directly (kiln_gpu_* picks 4 at this size). Same bytes
 * as the rows above. */
typedef struct tile_ctx {
    ew_ctx c;
    kiln_rt_func *f;
    int kind, hs, nbr, hg;
    unsigned grid;
} tile_ctx;
static void op_tile(void *vc, int s) {
    tile_ctx *t = vc;
    ew_ctx *c = &t->c;
    int T = c->T, nq = 32, nkv = 8, hd = 128, rot = 128, z = 0, bs = 16;
    int64_t stride = 6144;
    float ms = 1.0f, zf = 0.0f, one = 1.0f;
    kiln_devptr none = 0;
    if (t->kind == 0) {
        void *a[] = {&c->x[s], &stride, &c->pos, &T, &nq, &nkv, &hd, &rot, &c->inv, &ms, &none, &z, &zf, &zf, &t->hs};
        CK(kiln_rt_launch(t->f, (kiln_rt_dim3){t->grid, 1, 1}, (kiln_rt_dim3){128, 1, 1}, 0, st, a));
    } else {
        void *a[] = {&c->x[s], &stride, &c->pos, &T,     &nq,     &nkv,  &hd,    &rot,   &c->inv, &ms, &none, &z, &zf,
                     &zf,      &c->kc,  &c->vc,  &c->slots, &bs, &one, &one, &t->hs, &none, &t->nbr, &t->hg};
        /* KV blocks of hg heads: 64 bytes of slots, 16 key rows of 272 bytes and 16 value rows of 260 per head */
        unsigned smem = (unsigned)(64 + t->hg * 16 * (272 + 260));
        CK(kiln_rt_launch(t->f, (kiln_rt_dim3){t->grid, 1, 1}, (kiln_rt_dim3){128, 1, 1}, smem, st, a));
    }
}

static void bench_elementwise_tilings(void) {
    const int T = 4096;
    kiln_rt_kernels *k = kiln_gpu_kernels(gpu);
    for (int kind = 0; kind < 2; kind++) {
        tile_ctx t;
        memset(&t, 0, sizeof t);
        t.kind = kind;
        ew_ctx *c = &t.c;
        c->T = T, c->D = 4096;
        for (int s = 0; s < NSETS; s++) c->x[s] = drand((size_t)T * 6144, KILN_DTYPE_BF16, 1);
        int32_t *pos = malloc(4 * (size_t)T);
        for (int i = 0; i < T; i++) pos[i] = i;
        CK(kiln_rt_malloc(dev, 4 * (size_t)T, &c->pos));
        CK(kiln_rt_malloc(dev, 4 * (size_t)T, &c->slots));
        CK(kiln_rt_memcpy_htod(c->pos, pos, 4 * (size_t)T, NULL));
        CK(kiln_rt_memcpy_htod(c->slots, pos, 4 * (size_t)T, NULL));
        float inv[64];
        for (int i = 0; i < 64; i++) inv[i] = 1.0f / powf(500000.0f, (float)(2 * i) / 128.0f);
        CK(kiln_rt_malloc(dev, sizeof inv, &c->inv));
        CK(kiln_rt_memcpy_htod(c->inv, inv, sizeof inv, NULL));
        size_t cb = kiln_kv_layout_init(&c->l, T / 16 + 1, 16, 8, 128, KILN_DTYPE_BF16);
        CK(kiln_rt_malloc(dev, cb, &c->kc));
        CK(kiln_rt_malloc(dev, cb, &c->vc));
        static const char *names[] = {"rope_wide", "rope_kv_write_wide"};
        static const char *defs[] = {"ACT=bf16 INTERLEAVED=0", "ACT=bf16 INTERLEAVED=0 KV=bf16"};
        CK(kiln_rt_kernels_get(k, names[kind], defs[kind], &t.f));
        double bytes = kind == 0 ? 2.0 * T * 5120 * 2 : 2.0 * T * 5120 * 2 + 2.0 * T * 2048 * 2 - T * 1024 * 2;
        for (int v = 1; v <= 4; v++) {
            char name[48], shape[64];
            int nh = kind ? 32 : 40;      /* rope rows: q and k heads (rope), q heads (fused) */
            t.hs = (nh + v - 1) / v;      /* v heads a thread, rounded to 4 slots as the host does */
            t.hs = (t.hs + 3) / 4 * 4;
            t.nbr = (T * t.hs * 8 + 127) / 128; /* 8 columns of hd 128 */
            t.hg = 4;                     /* KV blocks: 16 tokens, 4 of the 8 KV heads */
            t.grid = (unsigned)(t.nbr + (kind ? (T / 16) * 2 : 0));
            snprintf(shape, sizeof shape, "%d tok, %d heads a thread", T, v);
            snprintf(name, sizeof name, "%s tiling", names[kind]);
            row_bw(name, shape, time_op(op_tile, &t, NSETS, 20, 25), bytes, 0);
        }
        for (int s = 0; s < NSETS; s++) kiln_rt_free(dev, c->x[s]);
        kiln_rt_free(dev, c->pos), kiln_rt_free(dev, c->slots), kiln_rt_free(dev, c->inv);
        kiln_rt_free(dev, c->kc), kiln_rt_free(dev, c->vc);
        free(pos);
    }
}

/* -------------------------------------------------------------------- GEMM */

/* a kiln_gpu for the GEMM rows; $KILN_BENCH_PDL_EARLY=1 hands out its kernels' PDL_EARLY=1 copies (the
 * early trigger the engine takes in small decode steps: each launch's successor is placed as soon as this
 * one's blocks all run, and issues its weight loads under this launch where the SMs have room) */
static void gemm_gpu_create(const kiln_gpu_params *gp, kiln_gpu **out) {
    CK(kiln_gpu_create(dev, gp, out));
    const char *e = getenv("KILN_BENCH_PDL_EARLY");
    if (e && atoi(e) > 0) kiln_rt_kernels_set_pdl_early(kiln_gpu_kernels(*out), true);
}

/* gemm rows (weight bytes) at M = 8, 16, 32, 64 (quick: 16 and 32) through a
 * kiln_gpu made with gp (a tiling of gemm_sk or gemm_tc), named label */
static void small_m_rows(gemm_ctx *g, int sets, double wbytes, const char *shape_name, const kiln_gpu_params *gp,
                         const char *label, bool quick) {
    kiln_gpu *gk = NULL;
    gemm_gpu_create(gp, &gk);
    g->g = gk;
    static const int Mt[] = {8, 16, 32, 64};
    for (int mi = 0; mi < 4; mi++) {
        g->M = Mt[mi];
        if (quick && g->M != 16 && g->M != 32) continue;
        double t = time_op(op_gemm, g, sets, 20, 20);
        char shape[80];
        snprintf(shape, sizeof shape, "%s M=%d N=%d K=%d", shape_name, g->M, g->N, g->K);
        row_bw(label, shape, t, wbytes, 0.85);
    }
    g->g = NULL;
    kiln_gpu_destroy(gk);
}

/* sk_only (`bench_kernels gemm_sk`): cuBLASLt at M <= 64 and the cluster
 * split-K GEMM's rows, nothing else; quick (`gemm_sk_quick`): of those, the
 * four projections at M = 16 and 32, gemm_sk's default beside its
 * warpgroup-MMA kernels (gemm_sk_wg, and gemm_sk_tma fed by TMA; sm_90) in
 * several tilings */
static bool sk_quick;
/* lt_only (`bench_kernels gemm_lt`): cuBLASLt alone at M = 16 .. 256 (the
 * decode batches), each as weight bytes and as flops (KILN_GEMM_BUCKETS
 * and KILN_LOG_LEVEL=debug show the tuning's buckets and choices) */
static bool lt_only;
/* `bench_kernels gemm_rows`: cuBLASLt's rows, then kiln's default path at M = 1, 8, 16, 32 (the GEMV, gemm_sk,
 * gemm_sk_tma as the engine picks them) and with gemm_skx on where it serves, no tiling tables; `gemm_m1`: those rows at M = 1 only */
static bool rows_only;
static bool m1_only;
static const char *only_shape; /* `gemm_rows_o` (or _qkv, _gate_up, _down): that shape's rows only */
static void bench_gemm(bool sk_only) {
    static const struct { const char *name; int N, K; } shapes[] = {
        {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
    int Ms_all[] = {1, 8, 16, 32, 64, 4096}, Ms_lt[] = {16, 32, 64, 128, 256};
    const int *Ms = lt_only ? Ms_lt : Ms_all;
    const size_t n_ms = lt_only ? KILN_ARRAY_LEN(Ms_lt) : KILN_ARRAY_LEN(Ms_all);
    for (size_t si = 0; si < 4; si++) {
        if (only_shape && strcmp(only_shape, shapes[si].name)) continue;
        gemm_ctx g;
        memset(&g, 0, sizeof g);
        g.N = shapes[si].N;
        g.K = shapes[si].K;
        g.odt = KILN_DTYPE_BF16;
        size_t wbytes = (size_t)g.N * g.K * 2;
        int sets = wbytes * 2 > (size_t)120 << 20 ? 1 : NSETS; /* rotate when weights would sit in L2 */
        for (int s = 0; s < sets; s++) {
            g.w[s] = drand((size_t)g.N * g.K, KILN_DTYPE_BF16, 0.02f);
            g.x[s] = drand((size_t)4096 * g.K, KILN_DTYPE_BF16, 1);
        }
        CK(kiln_rt_malloc(dev, (size_t)4096 * g.N * 2, &g.out));
        for (size_t mi = 0; mi < n_ms; mi++) {
            g.M = Ms[mi];
            if (sk_only && !lt_only && (g.M == 1 || g.M > 64)) continue;
            if (sk_quick && g.M != 16 && g.M != 32) continue;
            if (m1_only && g.M != 1) continue;
            double t = time_op(op_gemm, &g, sets, g.M == 4096 ? 5 : 20, 20);
            char shape[64];
            snprintf(shape, sizeof shape, "%s M=%d N=%d K=%d", shapes[si].name, g.M, g.N, g.K);
            if (g.M <= 64 || lt_only) row_bw("gemm (weight bytes)", shape, t, (double)wbytes, g.M <= 32 ? 0.85 : 0);
            if (g.M > 64) row_flops("gemm", shape, t, 2.0 * g.M * g.N * g.K, lt_only ? 0 : 0.80, 0);
        }
        if (rows_only) { /* kiln's default path (every knob at its default) */
            kiln_gpu_params dp = {.max_sample_rows = 1, .vocab = 16};
            kiln_gpu *gk = NULL;
            gemm_gpu_create(&dp, &gk);
            g.g = gk;
            static const int Mk[] = {1, 8, 16, 32, 64}; /* (64: the -b 64 decode step, no target) */
            for (int mi = 0; mi < (int)KILN_ARRAY_LEN(Mk); mi++) {
                g.M = Mk[mi];
                if (m1_only && g.M != 1) continue;
                double t = time_op(op_gemm, &g, sets, 20, 20);
                char shape[80];
                snprintf(shape, sizeof shape, "%s M=%d N=%d K=%d", shapes[si].name, g.M, g.N, g.K);
                row_bw("kiln default (weights)", shape, t, (double)wbytes, g.M <= 32 ? 0.85 : 0);
            }
            g.g = NULL;
            kiln_gpu_destroy(gk);
            /* ... with gemm_skx on (x in registers, warp-private rings) where kiln_skx_plan serves the shape */
            /* (at M = 1 in place of the GEMV) */
            kiln_gpu_params xp = {.max_sample_rows = 1, .vocab = 16, .skx_max_m = 32, .skx_m1 = 1};
            gemm_gpu_create(&xp, &gk);
            g.g = gk;
            const kiln_rt_device_info *di = kiln_rt_device_get_info(dev);
            static const int Mx[] = {1, 8, 16, 32};
            for (int mi = 0; mi < (int)KILN_ARRAY_LEN(Mx); mi++) {
                g.M = Mx[mi];
                if (m1_only && g.M != 1) continue;
                const kiln_skx_shape p = kiln_skx_plan(di->n_sms, di->smem_per_block_optin, di->cc_major, g.M, g.N, g.K);
                if (!p.ok) continue;
                double t = time_op(op_gemm, &g, sets, 20, 20);
                char shape[80], name[96];
                snprintf(shape, sizeof shape, "%s M=%d N=%d K=%d", shapes[si].name, g.M, g.N, g.K);
                snprintf(name, sizeof name, "kiln gemm_skx cl %d rt %d slots %d (weights)", p.cl, p.rt, p.s);
                row_bw(name, shape, t, (double)wbytes, 0.85);
            }
            g.g = NULL;
            kiln_gpu_destroy(gk);
        }
        if (lt_only || rows_only) {
            for (int s = 0; s < sets; s++) kiln_rt_free(dev, g.w[s]), kiln_rt_free(dev, g.x[s]);
            kiln_rt_free(dev, g.out);
            continue;
        }
        /* the cluster split-K GEMM (kernel_src/gemm_sk.cu) at M 8..64, beside
         * cuBLASLt: its default and one knob changed at a time */
        typedef struct { const char *name; int warps, rt, stages, split, wg; } sk_tiling;
        static const sk_tiling sk[] = {
            {"default", 0, 0, 0, 0, -1}, {"split 1", 0, 0, 0, 1, -1},  {"split 2", 0, 0, 0, 2, -1},
            {"split 4", 0, 0, 0, 4, -1}, {"split 8", 0, 0, 0, 8, -1},  {"stages 3", 0, 0, 3, 0, -1},
            {"stages 6", 0, 0, 6, 0, -1}, {"warps 8 rt 1", 8, 1, 0, 0, -1}, {"rt 4", 0, 4, 0, 0, -1},
            {"wgmma", 0, 0, 0, 0, 1}, {"wgmma stages 4", 0, 0, 4, 0, 1}, {"wgmma rt 4", 0, 4, 0, 0, 1}};
        static const sk_tiling skq[] = {{"default", 0, 0, 0, 0, -1},      {"wgmma", 0, 0, 0, 0, 1},
                                        {"wgmma stages 4", 0, 0, 4, 0, 1}, {"wgmma rt 4", 0, 4, 0, 0, 1},
                                        {"tma", 0, 0, 0, 0, 2},            {"tma stages 4", 0, 0, 4, 0, 2},
                                        {"tma stages 6", 0, 0, 6, 0, 2},   {"tma stages 8", 0, 0, 8, 0, 2},
                                        {"tma rt 4", 0, 4, 0, 0, 2},       {"tma rt 4 stages 4", 0, 4, 4, 0, 2},
                                        {"tma rt 1 stages 6", 0, 1, 6, 0, 2},
                                        {"tma rt 1 split 2 stages 8", 0, 1, 8, 2, 2},
                                        {"tma rt 1 split 2 stages 12", 0, 1, 12, 2, 2},
                                        {"tma rt 1 split 2 stages 16", 0, 1, 16, 2, 2},
                                        {"tma rt 2 split 2 stages 12", 0, 2, 12, 2, 2},
                                        {"tma rt 1 split 4 stages 8", 0, 1, 8, 4, 2},
                                        {"tma rt 1 split 1 stages 16", 0, 1, 16, 1, 2},
                                        /* rings that leave an SM room for a second block (the next launch's) */
                                        {"tma rt 1 split 2 stages 6", 0, 1, 6, 2, 2},
                                        {"tma rt 1 split 2 stages 9", 0, 1, 9, 2, 2},
                                        {"tma rt 2 split 2 stages 5", 0, 2, 5, 2, 2},
                                        {"tma rt 1 split 1 stages 8", 0, 1, 8, 1, 2}};
        const sk_tiling *tab = sk_quick ? skq : sk;
        const size_t n_tab = sk_quick ? KILN_ARRAY_LEN(skq) : KILN_ARRAY_LEN(sk);
        for (size_t ti = 0; ti < n_tab; ti++) {
            kiln_gpu_params gp = {.max_sample_rows = 1, .vocab = 16, .gemv_max_m = -1, .tcgemm_max_m = -1,
                                  .skgemm_max_m = 64, .skx_max_m = -1, .skgemm_max_weight_mb = -1, .skgemm_warps = tab[ti].warps,
                                  .skgemm_tiles = tab[ti].rt, .skgemm_stages = tab[ti].stages,
                                  .skgemm_split = tab[ti].split, .skgemm_wg = tab[ti].wg};
            char name[64];
            snprintf(name, sizeof name, "gemm_sk %s (weight bytes)", tab[ti].name);
            small_m_rows(&g, sets, (double)wbytes, shapes[si].name, &gp, name, sk_quick);
        }
        if (sk_only) {
            for (int s = 0; s < sets; s++) kiln_rt_free(dev, g.w[s]), kiln_rt_free(dev, g.x[s]);
            kiln_rt_free(dev, g.out);
            continue;
        }
        /* the same small-M shapes through kernel_src/gemv.cu, beside
         * cuBLASLt, in each tiling (W rows per warp, loads in flight) */
        static const int tiles[][3] = {{2, 4, 1}, {1, 4, 1}, {1, 8, 1}, {2, 8, 1}, {4, 4, 1}, {4, 2, 1},
                                       {1, 4, 2}, {1, 2, 2}, {2, 4, 2}};
        for (size_t ti = 0; ti < KILN_ARRAY_LEN(tiles); ti++) {
            kiln_gpu_params gp = {.max_sample_rows = 1, .vocab = 16, .gemv_max_m = 8, .gemv_rows = tiles[ti][0],
                                  .gemv_unroll = tiles[ti][1], .gemv_ksplit = tiles[ti][2]};
            kiln_gpu *gv = NULL;
            CK(kiln_gpu_create(dev, &gp, &gv));
            g.g = gv;
            int Mv[] = {1, 4, 8};
            for (int mi = 0; mi < 3; mi++) {
                g.M = Mv[mi];
                double t = time_op(op_gemm, &g, sets, 20, 20);
                char shape[80], name[64];
                snprintf(shape, sizeof shape, "%s M=%d N=%d K=%d", shapes[si].name, g.M, g.N, g.K);
                snprintf(name, sizeof name, "gemv rows %d unroll %d ksplit %d (weight bytes)", tiles[ti][0],
                         tiles[ti][1], tiles[ti][2]);
                row_bw(name, shape, t, (double)wbytes, 0.85);
            }
            g.g = NULL;
            kiln_gpu_destroy(gv);
        }
        if (!strcmp(shapes[si].name, "gate_up")) {
            /* its SiLU-and-mul at M = 1: two kernels (the GEMV in its default
             * tiling) or one, in each K split (warps per output) x unroll; on
             * one GPU (I = N / 2 = 14336) and the tensor-parallel-2 shard (the
             * first half of W: I = 7168) */
            static const int glu[][2] = {{0, 0}, {1, 2}, {1, 4}, {1, 8}, {2, 2}, {2, 4}, {2, 8}};
            kiln_gpu *gv[KILN_ARRAY_LEN(glu)];
            for (size_t ti = 0; ti < KILN_ARRAY_LEN(glu); ti++) {
                kiln_gpu_params gp = {.max_sample_rows = 1, .vocab = 16, .gemv_max_m = 8, .gemv_silu = 1,
                                      .gemv_silu_ksplit = glu[ti][0], .gemv_silu_unroll = glu[ti][1]};
                CK(kiln_gpu_create(dev, &gp, &gv[ti]));
            }
            const int N0 = g.N;
            g.M = 1;
            for (int half = 0; half < 2; half++) {
                g.N = half ? N0 / 2 : N0;
                double wb = (double)g.N * g.K * 2;
                char shape[80], name[80];
                snprintf(shape, sizeof shape, "%s M=1 N=%d K=%d", shapes[si].name, g.N, g.K);
                for (size_t ti = 0; ti < KILN_ARRAY_LEN(glu); ti++) {
                    g.g = gv[ti];
                    if (!ti) {
                        row_bw("gemv + silu_mul, two kernels (weight bytes)", shape,
                               time_op(op_gemm_then_silu, &g, sets, 20, 20), wb, 0.85);
                        continue;
                    }
                    snprintf(name, sizeof name, "gemv with silu epilogue ksplit %d unroll %d (weight bytes)",
                             glu[ti][0], glu[ti][1]);
                    row_bw(name, shape, time_op(op_gemm_silu, &g, sets, 20, 20), wb, 0.85);
                }
            }
            g.N = N0;
            g.g = NULL;
            for (size_t ti = 0; ti < KILN_ARRAY_LEN(glu); ti++) kiln_gpu_destroy(gv[ti]);
        }
        /* the tensor-core GEMM (kernel_src/gemm_tc.cu) at M 8..64, beside
         * cuBLASLt, in its default tiling and variations of one knob each
         * (warps along K, 16-row tiles per warp, warps a block, split-K, L2
         * prefetch) */
        static const struct { const char *name; int warps, wk, rt, split, pf; } tc[] = {
            {"default", 0, 0, 0, 0, 0}, {"no prefetch", 0, 0, 0, 0, -1}, {"wk 1", 0, 1, 0, 0, 0},
            {"wk 2", 0, 2, 0, 0, 0},    {"wk 4", 0, 4, 0, 0, 0},         {"rt 1", 0, 0, 1, 0, 0},
            {"warps 4", 4, 0, 0, 0, 0}, {"split 1", 0, 0, 0, 1, 0}};
        for (size_t ti = 0; ti < KILN_ARRAY_LEN(tc); ti++) {
            kiln_gpu_params gp = {.max_sample_rows = 1, .vocab = 16, .gemv_max_m = -1, .tcgemm_max_m = 64, .skx_max_m = -1, .skgemm_max_m = -1,
                                  .tcgemm_warps = tc[ti].warps,
                                  .tcgemm_warps_k = tc[ti].wk, .tcgemm_tiles = tc[ti].rt, .tcgemm_split = tc[ti].split,
                                  .tcgemm_prefetch_mb = tc[ti].pf};
            char name[64];
            snprintf(name, sizeof name, "gemm_tc %s (weight bytes)", tc[ti].name);
            small_m_rows(&g, sets, (double)wbytes, shapes[si].name, &gp, name, false);
        }
        for (int s = 0; s < sets; s++) kiln_rt_free(dev, g.w[s]), kiln_rt_free(dev, g.x[s]);
        kiln_rt_free(dev, g.out);
    }
}

/* `bench_kernels gemm_mid`: cuBLASLt on the four Llama-3-8B projections at
 * the batch sizes of -b 64 .. -b 256 decode steps (M = 64, 128, 256, 512):
 * TFLOP/s against the 8192^3 ceiling (at M = 256 a step's projections are
 * 3.84 TFLOP: compute-bound on the H200) */
static void bench_gemm_mid(void) {
    /* `bench_kernels "gemm_mid NAME"`: only the shapes whose name holds NAME */
    const char *only = filter && filter[8] == ' ' ? filter + 9 : NULL;
    /* the LM head as the engine runs it (fp32 logits) and with bf16 output: at
     * -b 256 it took 0.91 ms a step (~296 TFLOP/s, eager profile, 2026-11-30) */
    static const struct { const char *name; int N, K; kiln_dtype odt; } shapes[] = {
        {"qkv", 6144, 4096, KILN_DTYPE_BF16},        {"o", 4096, 4096, KILN_DTYPE_BF16},
        {"gate_up", 28672, 4096, KILN_DTYPE_BF16},   {"down", 4096, 14336, KILN_DTYPE_BF16},
        {"lm_head f32", 128256, 4096, KILN_DTYPE_F32}, {"lm_head bf16", 128256, 4096, KILN_DTYPE_BF16}};
    for (size_t si = 0; si < KILN_ARRAY_LEN(shapes); si++) {
        if (only && !strstr(shapes[si].name, only)) continue;
        gemm_ctx g;
        memset(&g, 0, sizeof g);
        g.N = shapes[si].N, g.K = shapes[si].K, g.odt = shapes[si].odt;
        const size_t wbytes = (size_t)g.N * g.K * 2;
        const int sets = wbytes * 2 > (size_t)120 << 20 ? 1 : NSETS;
        for (int q = 0; q < sets; q++) {
            g.w[q] = drand((size_t)g.N * g.K, KILN_DTYPE_BF16, 0.02f);
            g.x[q] = drand((size_t)512 * g.K, KILN_DTYPE_BF16, 1);
        }
        CK(kiln_rt_malloc(dev, (size_t)512 * g.N * kiln_dtype_size(g.odt), &g.out));
        static const int Mm[] = {64, 128, 256, 512};
        for (size_t mi = 0; mi < KILN_ARRAY_LEN(Mm); mi++) {
            char shape[80];
            g.M = Mm[mi];
            snprintf(shape, sizeof shape, "%s M=%d N=%d K=%d", shapes[si].name, g.M, g.N, g.K);
            row_flops("gemm", shape, time_op(op_gemm, &g, sets, 10, 20), 2.0 * g.M * g.N * g.K, 0, 0);
        }
        for (int q = 0; q < sets; q++) kiln_rt_free(dev, g.w[q]), kiln_rt_free(dev, g.x[q]);
        kiln_rt_free(dev, g.out);
    }
}

/* `bench_kernels gemm_sk_silu`: the gate/up projection with SiLU-and-mul at
 * M = 8, 16, 32, one GPU (I = 14336) and the TP 2 shard (I = 7168):
 * cuBLASLt then silu_mul (two kernels) beside gemm_sk with the SiLU epilogue
 * (one kernel), and gemm_sk_tma's (4 stages; sm_90); weight bytes over the
 * time of both. */
static void bench_gemm_sk_silu(void) {
    kiln_gpu_params bp = {.max_sample_rows = 1, .vocab = 16, .gemv_max_m = -1, .tcgemm_max_m = -1, .skgemm_max_m = -1};
    kiln_gpu_params sp = {.max_sample_rows = 1, .vocab = 16, .gemv_max_m = -1, .tcgemm_max_m = -1, .skgemm_max_m = 64, .skx_max_m = -1,
                          .skgemm_max_weight_mb = -1, .skgemm_silu = 1};
    kiln_gpu_params tp = sp;
    tp.skgemm_wg = 2, tp.skgemm_stages = 4;
    kiln_gpu *gb = NULL, *gs = NULL, *gt = NULL;
    CK(kiln_gpu_create(dev, &bp, &gb));
    CK(kiln_gpu_create(dev, &sp, &gs));
    CK(kiln_gpu_create(dev, &tp, &gt));
    for (int half = 0; half < 2; half++) {
        gemm_ctx g;
        memset(&g, 0, sizeof g);
        g.N = 28672 >> half, g.K = 4096, g.odt = KILN_DTYPE_BF16;
        const double wb = (double)g.N * g.K * 2;
        const int sets = wb * 2 > (double)(120 << 20) ? 1 : NSETS;
        for (int q = 0; q < sets; q++) {
            g.w[q] = drand((size_t)g.N * g.K, KILN_DTYPE_BF16, 0.02f);
            g.x[q] = drand((size_t)64 * g.K, KILN_DTYPE_BF16, 1);
        }
        CK(kiln_rt_malloc(dev, (size_t)64 * g.N * 2 * 2, &g.out));
        int Mt[] = {8, 16, 32};
        for (int mi = 0; mi < 3; mi++) {
            char shape[80];
            g.M = Mt[mi];
            snprintf(shape, sizeof shape, "gate_up M=%d N=%d K=%d", g.M, g.N, g.K);
            g.g = gb;
            row_bw("cuBLASLt + silu_mul (weight bytes)", shape, time_op(op_gemm_then_silu, &g, sets, 20, 20), wb, 0.85);
            g.g = gs;
            row_bw("gemm_sk with silu epilogue (weight bytes)", shape, time_op(op_gemm_silu, &g, sets, 20, 20), wb, 0.85);
            g.g = gt;
            row_bw("gemm_sk_tma stages 4 with silu epilogue (weight bytes)", shape,
                   time_op(op_gemm_silu, &g, sets, 20, 20), wb, 0.85);
        }
        g.g = NULL;
        for (int q = 0; q < sets; q++) kiln_rt_free(dev, g.w[q]), kiln_rt_free(dev, g.x[q]);
        kiln_rt_free(dev, g.out);
    }
    kiln_gpu_destroy(gb);
    kiln_gpu_destroy(gs);
    kiln_gpu_destroy(gt);
}

/* gemm_sk's timing records of one launch (nb blocks, KILN_SKGEMM_PROF_N u64 each: kernel_src/gemm_sk.cu): the first
 * entry, last exit and last entry (global ns), per block the mean and max cycles of the wait, the first stage, a K
 * chunk and the reduction (or stores), the SM clock from the records, the SMs used and the blocks of the busiest */
typedef struct sk_prof_stats {
    uint64_t g0, g1, s1;
    double mw, mf, ml, mr, xw, xf, xl, xr, clk;
    int sms, busiest;
} sk_prof_stats;
static sk_prof_stats sk_prof_collect(const uint64_t *h, int nb) {
    sk_prof_stats q = {.g0 = UINT64_MAX};
    double cyc = 0, ns = 0;
    static int per_sm[1024];
    memset(per_sm, 0, sizeof per_sm);
    for (int b = 0; b < nb; b++) {
        const uint64_t *r = h + (size_t)b * KILN_SKGEMM_PROF_N;
        q.g0 = r[0] < q.g0 ? r[0] : q.g0, q.g1 = r[1] > q.g1 ? r[1] : q.g1, q.s1 = r[0] > q.s1 ? r[0] : q.s1;
        cyc += (double)(r[6] - r[2]), ns += (double)(r[1] - r[0]);
        const double w = (double)(r[3] - r[2]), f = (double)(r[4] - r[3]),
                     l = (double)(r[5] - r[4]) / (double)(r[8] > 1 ? r[8] - 1 : 1), red = (double)(r[6] - r[5]);
        q.mw += w / nb, q.mf += f / nb, q.ml += l / nb, q.mr += red / nb;
        q.xw = w > q.xw ? w : q.xw, q.xf = f > q.xf ? f : q.xf, q.xl = l > q.xl ? l : q.xl, q.xr = red > q.xr ? red : q.xr;
        const int sm = (int)(r[7] & 1023);
        if (!per_sm[sm]++) q.sms++;
        if (per_sm[sm] > q.busiest) q.busiest = per_sm[sm];
    }
    q.clk = ns > 0 ? cyc / ns * 1e9 : 0;
    return q;
}

/* `bench_kernels gemm_sk_prof`: where a gemm_sk launch's time goes, from the
 * kernel's own timing records (kiln_gpu_set_skgemm_profile; the second of two
 * launches back to back), for qkv, o and
 * down at M = 8, 16, 32 (default tiling; stages 4 at M = 32 too): the launch's
 * time (events, as the gemm rows), its span on the GPU's clock (first block
 * in to last block out), the spread of block starts, and per block (clock64
 * cycles, mean / max): waiting on the previous kernel, the first stage's
 * arrival, the loop per K chunk, the reduction (or stores); blocks a busiest
 * SM and SMs used. At M = 32 also with 4, 5 and 6 stages (the split follows
 * the occupancy check). */
static void bench_gemm_sk_prof(void) {
    static const struct { const char *name; int N, K; } shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"down", 4096, 14336}};
    const int maxb = 2048;
    kiln_devptr prof;
    CK(kiln_rt_malloc(dev, (size_t)2 * maxb * KILN_SKGEMM_PROF_N * 8, &prof));
    uint64_t *h = malloc((size_t)maxb * KILN_SKGEMM_PROF_N * 8);
    for (size_t si = 0; si < KILN_ARRAY_LEN(shapes); si++) {
        gemm_ctx g;
        memset(&g, 0, sizeof g);
        g.N = shapes[si].N, g.K = shapes[si].K, g.odt = KILN_DTYPE_BF16;
        double wbytes = (double)g.N * g.K * 2;
        for (int q = 0; q < NSETS; q++) {
            g.w[q] = drand((size_t)g.N * g.K, KILN_DTYPE_BF16, 0.02f);
            g.x[q] = drand((size_t)64 * g.K, KILN_DTYPE_BF16, 1);
        }
        CK(kiln_rt_malloc(dev, (size_t)64 * g.N * 2, &g.out));
        for (int cfg = 0; cfg < 6; cfg++) {
            /* M = 32 at 3 (default), 4, 5, 6 stages: bytes in flight against blocks an SM */
            static const int Mc[] = {8, 16, 32, 32, 32, 32}, Sc[] = {0, 0, 0, 4, 5, 6};
            kiln_gpu_params gp = {.max_sample_rows = 1, .vocab = 16, .gemv_max_m = -1, .tcgemm_max_m = -1,
                                  .skgemm_max_m = 64, .skx_max_m = -1, .skgemm_max_weight_mb = -1, .skgemm_stages = Sc[cfg]};
            kiln_gpu *gs = NULL;
            CK(kiln_gpu_create(dev, &gp, &gs));
            g.g = gs, g.M = Mc[cfg];
            double t = time_op(op_gemm, &g, NSETS, 20, 20);
            /* two launches back to back, each with its own records: the
             * second's (after a launch of its own kind, as in a stream) */
            const kiln_devptr prof2 = prof + (kiln_devptr)maxb * KILN_SKGEMM_PROF_N * 8;
            kiln_gpu_set_skgemm_profile(gs, prof, maxb);
            op_gemm(&g, 1);
            kiln_gpu_set_skgemm_profile(gs, prof2, maxb);
            op_gemm(&g, 0);
            CK(kiln_rt_stream_sync(st));
            int nb = kiln_gpu_set_skgemm_profile(gs, 0, 0);
            if (nb > 0) {
                CK(kiln_rt_memcpy_dtoh(h, prof2, (size_t)nb * KILN_SKGEMM_PROF_N * 8, NULL));
                const sk_prof_stats q = sk_prof_collect(h, nb);
                char stg[16];
                snprintf(stg, sizeof stg, "%d", Sc[cfg]);
                printf("gemm_sk prof %-5s M=%-2d stages %s: %6.1f us (%4.1f%% of copy), span %6.1f us, starts over %5.1f us, %d "
                       "blocks on %d SMs (busiest %d); cycles a block, mean/max: wait %.0f/%.0f, first stage %.0f/%.0f, "
                       "per chunk %.0f/%.0f (%d chunks), reduce %.0f/%.0f\n",
                       shapes[si].name, g.M, Sc[cfg] ? stg : "default", t * 1e6, wbytes / t / copy_bw * 100,
                       (double)(q.g1 - q.g0) * 1e-3, (double)(q.s1 - q.g0) * 1e-3, nb, q.sms, q.busiest, q.mw, q.xw,
                       q.mf, q.xf, q.ml, q.xl, (int)h[8], q.mr, q.xr);
                fflush(stdout);
            }
            g.g = NULL;
            kiln_gpu_destroy(gs);
        }
        for (int q = 0; q < NSETS; q++) kiln_rt_free(dev, g.w[q]), kiln_rt_free(dev, g.x[q]);
        kiln_rt_free(dev, g.out);
    }
    free(h);
    kiln_rt_free(dev, prof);
}

/* `bench_kernels gemm_tma_prof`: the engine's own gemm_sk_tma launches at the decode steps' row counts
 * (every knob at its default: the gate/up with its SiLU epilogue, down, qkv, o at M = 32 and 64), from the
 * kernel's timing records (the second of two launches back to back, as in a stream): the launch's time (events),
 * its span on the GPU's clock, block starts and ends (ns after the first start: median / 90th percentile / max),
 * per block (cycles, mean / max) the wait on the previous kernel, the first stage's arrival and the K loop per
 * chunk, and the W bytes a block's chunk loop moves a microsecond across the GPU (the steady rate) */
static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
/* one gemm_tma_prof line from nb timing records h */
static void tma_prof_line(const char *name, int M, const char *after, double t, double wbytes, const uint64_t *h,
                          int nb, uint64_t *t0s, uint64_t *t1s) {
    const sk_prof_stats q = sk_prof_collect(h, nb);
    for (int b = 0; b < nb; b++) {
        const uint64_t *r = h + (size_t)b * KILN_SKGEMM_PROF_N;
        t0s[b] = r[0] - q.g0, t1s[b] = r[1] - q.g0;
    }
    qsort(t0s, (size_t)nb, 8, cmp_u64), qsort(t1s, (size_t)nb, 8, cmp_u64);
    const int chunks = (int)h[8];
    /* a chunk: the block's share of W (N / blocks rows x 64 columns of 2 bytes) */
    const double chunk_w = wbytes / nb / (chunks > 0 ? chunks : 1), clk = q.clk;
    printf("gemm_tma prof %-12s M=%d%s: %6.1f us (%4.1f%% of copy), span %6.1f us, %d blocks on %d SMs (busiest %d), "
           "starts p50/p90/max %.1f/%.1f/%.1f us, ends min/p10/p50/p90/max %.1f/%.1f/%.1f/%.1f/%.1f us; cycles a "
           "block mean/max: wait %.0f/%.0f, first stage %.0f/%.0f, per chunk %.0f/%.0f (%d chunks: %.0f GB/s "
           "over the blocks at the mean, SM clock %.2f GHz)\n",
           name, M, after, t * 1e6, wbytes / t / copy_bw * 100, t1s[nb - 1] * 1e-3, nb, q.sms, q.busiest,
           t0s[nb / 2] * 1e-3, t0s[nb * 9 / 10] * 1e-3, t0s[nb - 1] * 1e-3, t1s[0] * 1e-3, t1s[nb / 10] * 1e-3,
           t1s[nb / 2] * 1e-3, t1s[nb * 9 / 10] * 1e-3, t1s[nb - 1] * 1e-3, q.mw, q.xw, q.mf, q.xf, q.ml, q.xl, chunks,
           clk > 0 ? chunk_w * nb / (q.ml / clk) * 1e-9 : 0.0, clk * 1e-9);
    fflush(stdout);
}
static void bench_gemm_tma_prof(void) {
    static const struct { const char *name; int N, K, glu; } shapes[] = {
        {"gate_up+silu", 28672, 4096, 1}, {"down", 4096, 14336, 0}, {"qkv", 6144, 4096, 0}, {"o", 4096, 4096, 0}};
    const int maxb = 2048, H = 4096;
    kiln_devptr prof;
    CK(kiln_rt_malloc(dev, (size_t)2 * maxb * KILN_SKGEMM_PROF_N * 8, &prof));
    uint64_t *h = malloc((size_t)maxb * KILN_SKGEMM_PROF_N * 8), *t0s = malloc(8 * (size_t)maxb),
             *t1s = malloc(8 * (size_t)maxb);
    kiln_gpu_params dp = {.max_sample_rows = 1, .vocab = 16};
    kiln_gpu *gk = NULL;
    CK(kiln_gpu_create(dev, &dp, &gk));
    /* the engine's predecessor of a K = hidden projection: the 64-row add + RMSNorm writing its x */
    const kiln_devptr res = drand((size_t)64 * H, KILN_DTYPE_BF16, 1), dlt = drand((size_t)64 * H, KILN_DTYPE_BF16, 1),
                      nw = drand((size_t)H, KILN_DTYPE_BF16, 1);
    for (size_t si = 0; si < KILN_ARRAY_LEN(shapes); si++) {
        gemm_ctx g;
        memset(&g, 0, sizeof g);
        g.N = shapes[si].N, g.K = shapes[si].K, g.odt = KILN_DTYPE_BF16, g.g = gk;
        const double wbytes = (double)g.N * g.K * 2;
        for (int q = 0; q < NSETS; q++) {
            g.w[q] = drand((size_t)g.N * g.K, KILN_DTYPE_BF16, 0.02f);
            g.x[q] = drand((size_t)64 * g.K, KILN_DTYPE_BF16, 1);
        }
        CK(kiln_rt_malloc(dev, (size_t)64 * g.N * 2, &g.out));
        void (*op)(void *, int) = shapes[si].glu ? op_gemm_silu : op_gemm;
        static const int Ms[] = {32, 64};
        for (int mi = 0; mi < 2; mi++) {
            g.M = Ms[mi];
            const double t = time_op(op, &g, NSETS, 20, 20);
            /* the second of two launches back to back, then (K = hidden) one right after an add + RMSNorm */
            for (int after = 0; after < (g.K == H ? 2 : 1); after++) {
                const kiln_devptr prof2 = prof + (kiln_devptr)maxb * KILN_SKGEMM_PROF_N * 8;
                if (!after) {
                    kiln_gpu_set_skgemm_profile(gk, prof, maxb);
                    op(&g, 1);
                } else
                    CK(kiln_gpu_add_rmsnorm(gk, st, g.x[0], res, dlt, nw, KILN_DTYPE_BF16, KILN_DTYPE_BF16, g.M, H, 1e-5f));
                kiln_gpu_set_skgemm_profile(gk, prof2, maxb);
                op(&g, 0);
                CK(kiln_rt_stream_sync(st));
                const int nb = kiln_gpu_set_skgemm_profile(gk, 0, 0);
                if (nb <= 0) {
                    printf("gemm_tma prof %-12s M=%d: %6.1f us (%4.1f%% of copy), not through gemm_sk\n", shapes[si].name,
                           g.M, t * 1e6, wbytes / t / copy_bw * 100);
                    break;
                }
                CK(kiln_rt_memcpy_dtoh(h, prof2, (size_t)nb * KILN_SKGEMM_PROF_N * 8, NULL));
                tma_prof_line(shapes[si].name, g.M, after ? " after add+rmsnorm" : "", t, wbytes, h, nb, t0s, t1s);
            }
        }
        for (int q = 0; q < NSETS; q++) kiln_rt_free(dev, g.w[q]), kiln_rt_free(dev, g.x[q]);
        kiln_rt_free(dev, g.out);
    }
    kiln_rt_free(dev, res), kiln_rt_free(dev, dlt), kiln_rt_free(dev, nw);
    kiln_gpu_destroy(gk);
    free(h), free(t0s), free(t1s);
    kiln_rt_free(dev, prof);
}

/* ---------------------------------------------------------------- sampling */

typedef struct samp_ctx { kiln_devptr logits, params, tokens, logprobs; int R, V; bool greedy; } samp_ctx;
static void op_sample(void *vc, int s) {
    samp_ctx *c = vc;
    (void)s;
    if (c->greedy) CK(kiln_gpu_sample_greedy(gpu, st, c->tokens, c->logprobs, c->logits, c->R, c->V, c->params));
    else CK(kiln_gpu_sample(gpu, st, c->tokens, c->logprobs, c->logits, c->R, c->V, c->params));
}

/* the engine's call: the step's rows over the Llama-3 vocabulary, tokens and
 * their logprobs. Greedy rows as the engine runs them (kiln_gpu_sample_greedy:
 * each row over a cluster of 8 blocks on sm_90, or $KILN_SAMPLE_CLUSTER), over
 * clusters of 4, and through the general kernel (kiln_sample, "1 block");
 * one sampling setting at 64 rows. */
static void bench_sampling(void) {
    /* rows, mode (1: sampling), cluster (-1: kiln_gpu_sample; 0: as configured) */
    static const int rows[][3] = {{1, 0, 0},   {1, 0, 4},   {1, 0, -1},  {1, 0, KILN_SAMPLE_CLUSTER_SPLIT},
                                  {32, 0, 0},  {32, 0, 4},  {32, 0, -1}, {32, 0, KILN_SAMPLE_CLUSTER_SPLIT},
                                  {64, 0, 0},  {64, 0, -1}, {64, 0, KILN_SAMPLE_CLUSTER_SPLIT},
                                  {256, 0, -1}, {256, 0, KILN_SAMPLE_CLUSTER_SPLIT}, {64, 1, -1}};
    for (int ri = 0; ri < (int)(sizeof rows / sizeof rows[0]); ri++) {
        const int mode = rows[ri][1], cl = rows[ri][2];
        samp_ctx c = {0, 0, 0, 0, rows[ri][0], 128256, cl >= 0};
        c.logits = drand((size_t)c.R * c.V, KILN_DTYPE_F32, 3);
        kiln_gpu_sample_params p[256];
        memset(p, 0, sizeof p);
        for (int r = 0; r < 256; r++) {
            p[r].temperature = mode ? 0.8f : 0.0f;
            p[r].top_p = mode ? 0.9f : 1.0f;
            p[r].top_k = mode ? 50 : 0;
            p[r].repetition = 1;
            p[r].seed = (uint64_t)r;
        }
        CK(kiln_rt_malloc(dev, sizeof p, &c.params));
        CK(kiln_rt_malloc(dev, 4 * 256, &c.tokens));
        CK(kiln_rt_malloc(dev, 4 * 256, &c.logprobs));
        CK(kiln_rt_memcpy_htod(c.params, p, sizeof p, NULL));
        const int was = cl > 0 ? kiln_gpu_set_sample_cluster(gpu, cl) : 0;
        const int used = cl >= 0 ? kiln_gpu_sample_cluster(gpu, c.R) : 0;
        double t = time_op(op_sample, &c, 1, 5, 10);
        if (cl > 0) kiln_gpu_set_sample_cluster(gpu, was);
        char what[64], how[24];
        if (used == KILN_SAMPLE_CLUSTER_SPLIT) snprintf(how, sizeof how, "split");
        else if (used) snprintf(how, sizeof how, "cluster %d", used);
        else snprintf(how, sizeof how, "1 block");
        snprintf(what, sizeof what, "%d x 128256 %s, logprobs [%s]", c.R, mode ? "T=0.8 top-k 50 top-p 0.9" : "greedy",
                 how);
        printf("%-22s %-44s %9.1f us\n", "sample", what, t * 1e6);
        kiln_rt_free(dev, c.logits), kiln_rt_free(dev, c.params), kiln_rt_free(dev, c.tokens);
        kiln_rt_free(dev, c.logprobs);
    }
}

/* --------------------------------------------------------------------- JIT */

static void bench_jit(void) {
    char dir[] = "/tmp/kiln-bench-jit-XXXXXX";
    if (!mkdtemp(dir)) return;
    kiln_jit_model m = {KILN_DTYPE_BF16, KILN_DTYPE_BF16, 128, 32, 8, 16, false, false, false, false, 0, 0};
    /* as the engine loads it (kiln_gpu_prepare): on sm_90+ also the PDL_EARLY=1 copies that small
     * decode steps run */
    m.pdl_early = kiln_rt_kernels_pdl(kiln_gpu_kernels(gpu)) && KILN_PDL_EARLY_MAX_SEQS_DEFAULT > 0;
    static kiln_jit_spec_list l;
    CK(kiln_jit_model_specs(&m, &l));
    kiln_jit_options o = {kiln_rt_device_get_info(dev)->arch, dir, NULL, false, 0};
    double t[2];
    for (int pass = 0; pass < 2; pass++) {
        kiln_rt_kernels *k = NULL;
        double t0 = kiln_now_sec();
        CK(kiln_rt_kernels_create(dev, &o, &k));
        CK(kiln_rt_kernels_prepare(k, l.specs, l.n));
        t[pass] = kiln_now_sec() - t0;
        kiln_rt_kernels_destroy(k);
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("%-22s %-34s %9.0f ms  target < 10000 ms %s\n", "jit cold", "Llama-3-8B kernel set", t[0] * 1e3,
           t[0] < 10 ? "ok" : "MISS");
    printf("%-22s %-34s %9.1f ms  target < 200 ms %s  (%d specs, %ld CPUs, incl. module load)\n", "jit warm",
           "Llama-3-8B kernel set", t[1] * 1e3, t[1] < 0.2 ? "ok" : "MISS", l.n, ncpu);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "cannot remove %s\n", dir);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--graph")) use_graph = true;
        else filter = argv[i];
    }
    CK(kiln_rt_device_open(0, &dev));
    CK(kiln_rt_stream_create(dev, &st));
    CK(kiln_rt_event_create(dev, true, &e0));
    CK(kiln_rt_event_create(dev, true, &e1));
    /* the gemm rows are cuBLASLt; the gemv, gemm_tc and gemm_sk rows set their own */
    kiln_gpu_params gp = {.gemv_max_m = -1, .tcgemm_max_m = -1, .skgemm_max_m = -1};
    gp.max_sample_rows = 256;
    gp.vocab = 128256;
    CK(kiln_gpu_create(dev, &gp, &gpu));
    const kiln_rt_device_info *di = kiln_rt_device_get_info(dev);
    printf("device: %s (%s, %d SMs, L2 %d MiB)\n", di->name, di->arch, di->n_sms, di->l2_bytes >> 20);
    if (want("jit")) bench_jit();
    ceilings();
    const kiln_dtype bf = KILN_DTYPE_BF16, e4 = KILN_DTYPE_FP8_E4M3, e5 = KILN_DTYPE_FP8_E5M2;
    if (want("decode")) {
        bench_attention(64, 1024, 1, 0.75, false, bf);
        bench_attention(64, 4096, 1, 0.85, false, bf);
        bench_attention(64, 8192, 1, 0.85, false, bf);
        bench_attention(1, 32768, 1, 0.70, false, bf);
        bench_attention(8, 4096, 1, 0, false, bf);
    }
    if (want("decode-short")) { /* the engine's decode steps: -b 32 / 64 at 128 + 256 tokens, -b 1 ($KILN_DECODE_WARPS) */
        bench_attention(32, 256, 1, 0, false, bf);
        bench_attention(64, 256, 1, 0, false, bf);
        bench_attention(64, 384, 1, 0, false, bf);
        bench_attention(64, 512, 1, 0, false, bf); /* where 2 warps stop paying (KILN_DECODE_W2_MAX_CTX) */
        bench_attention(64, 768, 1, 0, false, bf);
        bench_attention(1, 384, 1, 0, false, bf);
    }
    if (want("decode-large")) { /* -b 64 .. 256 decode steps at short contexts (the engine's -s 128 -o 256 runs) */
        bench_attention(256, 128, 1, 0, false, bf);
        bench_attention(256, 192, 1, 0, false, bf);
        bench_attention(256, 256, 1, 0, false, bf);
        bench_attention(256, 384, 1, 0, false, bf);
        bench_attention(128, 256, 1, 0, false, bf);
        bench_attention(64, 192, 1, 0, false, bf);
        bench_attention(64, 256, 1, 0, false, bf);
        bench_attention(32, 192, 1, 0, false, bf);
    }
    if (want("decode fp8")) { /* issue 7: >= 85% of copy bandwidth on the FP8 bytes at b64 ctx4096 */
        bench_attention(64, 4096, 1, 0.85, false, e4);
        bench_attention(64, 4096, 1, 0.85, false, e5);
        bench_attention(64, 1024, 1, 0, false, e4);
        bench_attention(64, 8192, 1, 0, false, e4);
        bench_attention(256, 2048, 1, 0, false, e4);
        bench_attention(256, 2048, 1, 0, false, bf);
        bench_attention(1, 32768, 1, 0, false, e4);
        bench_attention(8, 4096, 1, 0, false, e4);
        bench_attention(64, 1024, 1, 0, false, e5);
        bench_attention(1, 32768, 1, 0, false, e5);
        bench_attention(8, 4096, 1, 0, false, e5);
    }
    if (want("prefill")) { /* the default choice, attn_prefill ("v2"), the warp-specialized wgmma one on sm_90
                              ("wg2") and its persistent form ("wg2p"), the first one ("v1"); v2 and wg2 rows on
                              sm_90 only (elsewhere the default choice is v2) */
        const int kernels[5] = {0, 4, 3, 5, 1};
        for (int k = 0; k < 5; k++) {
            attn_kernel = kernels[k];
            if (attn_kernel >= 2 && !(di->cc_major == 9 && di->cc_minor == 0)) continue; /* sm_90 only */
            bench_attention(8, 2048, 2048, attn_kernel == 1 ? 0 : 300e12, true, bf);
            bench_attention(1, 8192, 8192, 0, true, bf);
            bench_attention(32, 512, 512, 0, true, bf);
        }
    }
    attn_kernel = 0;
    if (want("prefill fp8")) bench_attention(8, 2048, 2048, 0, true, e4);
    bench_elementwise(4096);
    if (want("elementwise") || want("copy")) bench_copy_sizes();
    if (want("elementwise") || want("tiling")) bench_elementwise_tilings();
    if (want("decode-shape")) { /* `bench_kernels decode-shape`: elementwise ops at decode batch sizes */
        char *f = (char *)filter;
        filter = NULL;
        bench_elementwise(1), bench_elementwise(32), bench_elementwise(64), bench_elementwise(256);
        filter = f;
    }
    if (filter && !strncmp(filter, "gemm_mid", 8)) bench_gemm_mid();
    else if (filter && !strcmp(filter, "gemm_sk_prof")) bench_gemm_sk_prof();
    else if (filter && !strcmp(filter, "gemm_tma_prof")) bench_gemm_tma_prof();
    else if (filter && !strcmp(filter, "gemm_sk_silu")) bench_gemm_sk_silu();
    else if (filter && !strcmp(filter, "gemm_sk_quick")) sk_quick = true, bench_gemm(true);
    else if (filter && !strncmp(filter, "gemm_sk_quick_", 14)) sk_quick = true, only_shape = filter + 14, bench_gemm(true);
    else if (filter && !strcmp(filter, "gemm_sk")) bench_gemm(true);
    else if (filter && !strcmp(filter, "gemm_lt")) lt_only = true, bench_gemm(true);
    else if (filter && !strcmp(filter, "gemm_rows")) rows_only = true, bench_gemm(false);
    else if (filter && !strncmp(filter, "gemm_rows_", 10)) rows_only = true, only_shape = filter + 10, bench_gemm(false);
    else if (filter && !strcmp(filter, "gemm_m1")) rows_only = m1_only = true, bench_gemm(false);
    else if (want("gemm")) bench_gemm(false);
    if (want("sample")) bench_sampling();
    kiln_gpu_destroy(gpu);
    return 0;
}
