/*
 * blas.c -- the cuBLASLt GEMM variant: out[M, N] = x[M, K] @ W[N, K]^T
 * (+ bias[N]), row-major, bf16/fp16 inputs, fp32 accumulation, output
 * bf16 / fp16 / fp32.
 *
 * Row-major out is column-major out^T [N, M] = W^T-op(A = W as K x N, ld K,
 * transposed) * (B = x as K x M, ld K). The algorithm is chosen once per
 * bucket (N, K, dtypes, bias, and M rounded up: up to 256 to the engine's
 * decode-graph batch sizes, 8, multiples of 8 to 32, of 16 to 128, of 32 to
 * 256, beyond that, or everywhere with KILN_GEMM_BUCKETS=0, to a power of
 * two) and cached; descriptors are cached per exact shape, where the
 * bucket's algorithm is checked once (cublasLtMatmulAlgoCheck) and replaced
 * by the exact shape's heuristic choice if it does not fit. No heuristic
 * call on the steady-state path. Unless KILN_GEMM_AUTOTUNE=0, a bucket's
 * algorithm is picked by timing the heuristic's top candidates (cuBLASLt 13
 * offers at most 8) once on the first shape that lands in it (not while a
 * graph is being captured). Power-of-two buckets timed the -b 256 graph's
 * GEMMs at M = 160, -b 64's at 48: fine buckets, measured 2026-12-01, -b 128
 * +3%, -b 256 +1-2%, for ~0.4 s more start-up tuning.
 *
 * A candidate that sums its K split in a second kernel (fp32 or output-type
 * partials in the workspace) is charged $KILN_GEMM_REDUCE_PENALTY_US
 * (default KILN_GEMM_REDUCE_PENALTY_US_DEFAULT) more a run at M <= 64:
 * timed alone the two kernels run back to back, but in a decode graph the
 * extra kernel boundary costs more, and the timing at -b 32 picked a split-2
 * qkv or a split-6 down now and then (within 1% alone), each time 1.5-3.5%
 * slower in the engine (2026-12-01, remote.sh s77 / s78). Timing from HBM
 * instead of back to back (an L2 flush before each run: a 33-50 MB
 * projection sits in the 50 MB L2) was tried the same day and picked the
 * same or equally fast algorithms.
 *
 * Ownership: the handle owns its descriptors; the workspace is borrowed.
 * Thread-safety: one thread at a time per handle.
 */
#include "rt_internal.h"

#include <stdlib.h>

#define BLAS_SLOTS 4096 /* power of two */
#define TUNE_CANDS 8    /* candidates timed: cuBLASLt 13's heuristic offers at most 8 */

typedef struct gemm_key {
    int64_t M, N, K, ldo;
    int in_dt, out_dt, bias;
} gemm_key;

typedef struct gemm_entry {
    bool used;
    gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
} gemm_entry;

struct kiln_rt_blas {
    kiln_rt_device *dev;
    cublasLtHandle_t h;
    kiln_devptr ws;
    size_t ws_bytes;
    gemm_entry *shapes;  /* exact shapes  [BLAS_SLOTS] */
    gemm_entry *buckets; /* algo per bucket [BLAS_SLOTS] */
    int n_shapes, n_algos;
    bool tune;
    bool fine;      /* decode-graph sized M buckets up to 256 (kiln_rt_gemm_bucket_m) */
    float reduce_penalty_ms; /* added to the time of a candidate with a separate split-K reduction kernel */
    int tune_passes;         /* timing passes over the candidates ($KILN_GEMM_AUTOTUNE_PASSES, 1..4) */
    CUevent ev[2];
};

static uint64_t key_hash(const gemm_key *k) { return kiln_hash64(k, sizeof *k, 7); }

static void entry_free(gemm_entry *e) {
    if (!e->used) return;
    if (e->op) kiln_lt.cublasLtMatmulDescDestroy(e->op);
    if (e->a) kiln_lt.cublasLtMatrixLayoutDestroy(e->a);
    if (e->b) kiln_lt.cublasLtMatrixLayoutDestroy(e->b);
    if (e->c) kiln_lt.cublasLtMatrixLayoutDestroy(e->c);
    memset(e, 0, sizeof *e);
}

static gemm_entry *lookup(gemm_entry *tab, const gemm_key *k, bool *found) {
    uint64_t h = key_hash(k);
    for (int i = 0; i < BLAS_SLOTS; i++) {
        gemm_entry *e = &tab[(h + (uint64_t)i) & (BLAS_SLOTS - 1)];
        if (!e->used) {
            *found = false;
            return e;
        }
        if (!memcmp(&e->key, k, sizeof *k)) {
            *found = true;
            return e;
        }
    }
    *found = false;
    return NULL;
}

kiln_status kiln_rt_blas_create(kiln_rt_device *d, kiln_devptr workspace, size_t workspace_bytes, kiln_rt_blas **out) {
    kiln_status st = KILN_OK;
    kiln_rt_blas *b = calloc(1, sizeof *b);
    KILN_CHECK_ALLOC(b);
    b->dev = d;
    b->ws = workspace;
    b->ws_bytes = workspace ? workspace_bytes : 0;
    b->shapes = calloc(BLAS_SLOTS, sizeof *b->shapes);
    b->buckets = calloc(BLAS_SLOTS, sizeof *b->buckets);
    KILN_CHECK(b->shapes && b->buckets, KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    KILN_TRY(kiln_rt_load_cublaslt());
    KILN_TRY(kiln_rt_device_make_current(d));
    KILN_CHECK_LT(kiln_lt.cublasLtCreate(&b->h));
    {
        const char *t = getenv("KILN_GEMM_AUTOTUNE");
        b->tune = !(t && !strcmp(t, "0"));
        const char *rp = getenv("KILN_GEMM_REDUCE_PENALTY_US");
        char *end = NULL;
        const double pen = rp && *rp ? strtod(rp, &end) : -1; /* not a number >= 0: the default */
        b->reduce_penalty_ms = (float)(end && !*end && pen >= 0 ? pen : KILN_GEMM_REDUCE_PENALTY_US_DEFAULT) * 1e-3f;
        const char *tp = getenv("KILN_GEMM_AUTOTUNE_PASSES");
        b->tune_passes = tp && *tp ? atoi(tp) : KILN_GEMM_AUTOTUNE_PASSES_DEFAULT;
        if (b->tune_passes < 1 || b->tune_passes > 4) b->tune_passes = KILN_GEMM_AUTOTUNE_PASSES_DEFAULT;
        const char *f = getenv("KILN_GEMM_BUCKETS");
        b->fine = f && (!strcmp(f, "0") || !strcmp(f, "1")) ? atoi(f) : KILN_GEMM_BUCKETS_DEFAULT;
        if (b->tune) {
            KILN_CHECK_CU(kiln_cu.cuEventCreate(&b->ev[0], CU_EVENT_DEFAULT));
            KILN_CHECK_CU(kiln_cu.cuEventCreate(&b->ev[1], CU_EVENT_DEFAULT));
        }
    }
    *out = b;
    return KILN_OK;
fail:
    kiln_rt_blas_destroy(b);
    return st;
}

void kiln_rt_blas_destroy(kiln_rt_blas *b) {
    if (!b) return;
    for (int i = 0; b->shapes && i < BLAS_SLOTS; i++) entry_free(&b->shapes[i]);
    for (int i = 0; b->buckets && i < BLAS_SLOTS; i++) entry_free(&b->buckets[i]);
    if (b->h) kiln_lt.cublasLtDestroy(b->h);
    if (b->ev[0]) kiln_cu.cuEventDestroy(b->ev[0]);
    if (b->ev[1]) kiln_cu.cuEventDestroy(b->ev[1]);
    free(b->shapes);
    free(b->buckets);
    free(b);
}

int kiln_rt_blas_n_algos(const kiln_rt_blas *b) { return b->n_algos; }

static cudaDataType_t cuda_type(kiln_dtype t) {
    switch (t) {
    case KILN_DTYPE_BF16: return CUDA_R_16BF;
    case KILN_DTYPE_F16: return CUDA_R_16F;
    default: return CUDA_R_32F;
    }
}

/* Descriptors for one exact shape. */
static kiln_status make_descs(gemm_entry *e, const gemm_key *k) {
    kiln_status st = KILN_OK;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cudaDataType_t in = cuda_type((kiln_dtype)k->in_dt), outt = cuda_type((kiln_dtype)k->out_dt);
    e->used = true;
    e->key = *k;
    KILN_CHECK_LT(kiln_lt.cublasLtMatmulDescCreate(&e->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    KILN_CHECK_LT(kiln_lt.cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    KILN_CHECK_LT(kiln_lt.cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (k->bias) {
        cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
        KILN_CHECK_LT(kiln_lt.cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
        KILN_CHECK_LT(
            kiln_lt.cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &outt, sizeof outt));
    }
    KILN_CHECK_LT(kiln_lt.cublasLtMatrixLayoutCreate(&e->a, in, (uint64_t)k->K, (uint64_t)k->N, k->K));
    KILN_CHECK_LT(kiln_lt.cublasLtMatrixLayoutCreate(&e->b, in, (uint64_t)k->K, (uint64_t)k->M, k->K));
    KILN_CHECK_LT(kiln_lt.cublasLtMatrixLayoutCreate(&e->c, outt, (uint64_t)k->N, (uint64_t)k->M, k->ldo));
fail:
    return st;
}

/* The K split of algorithm a and whether its parts are summed by a separate
 * kernel (fp32 or output-type partials in the workspace) */
static int algo_split(const cublasLtMatmulAlgo_t *a, bool *sep) {
    int32_t sk = 1;
    uint32_t sch = 0;
    size_t wr = 0;
    kiln_lt.cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof sk, &wr);
    kiln_lt.cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &sch, sizeof sch, &wr);
    *sep = sk > 1 && (sch & (CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE));
    return sk;
}

/* The heuristic's choice for e's shape; with `exact` (descriptors of the
 * shape being run, with its pointers) and tuning on, the fastest of the top
 * candidates, each timed on that shape. */
static kiln_status heuristic(kiln_rt_blas *b, gemm_entry *e, cublasLtMatmulAlgo_t *algo, gemm_entry *exact,
                             CUstream s, const void *ptrs[3]) {
    kiln_status st = KILN_OK;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res[TUNE_CANDS];
    int n = 0;
    size_t ws = b->ws_bytes;
    memset(res, 0, sizeof res);
    KILN_CHECK_LT(kiln_lt.cublasLtMatmulPreferenceCreate(&pref));
    KILN_CHECK_LT(kiln_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                               sizeof ws));
    KILN_CHECK_LT(kiln_lt.cublasLtMatmulAlgoGetHeuristic(b->h, e->op, e->a, e->b, e->c, e->c, pref,
                                                         exact && b->tune ? TUNE_CANDS : 1, res, &n));
    KILN_CHECK(n > 0, KILN_ERR_UNSUPPORTED, "cuBLASLt has no algorithm for this GEMM");
    *algo = res[0].algo;
    b->n_algos++;
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    if (n > 1 && exact && kiln_cu.cuStreamIsCapturing(s, &cap) == CUDA_SUCCESS && cap == CU_STREAM_CAPTURE_STATUS_NONE) {
        float best = 1e30f, first = 0, tmin[TUNE_CANDS];
        int pick = 0;
        bool usable[TUNE_CANDS];
        const float alpha = 1.0f, beta = 0.0f;
        for (int i = 0; i < n; i++) {
            cublasLtMatmulHeuristicResult_t chk;
            memset(&chk, 0, sizeof chk);
            tmin[i] = 1e30f;
            usable[i] = kiln_lt.cublasLtMatmulAlgoCheck(b->h, exact->op, exact->a, exact->b, exact->c, exact->c,
                                                        &res[i].algo, &chk) == CUBLAS_STATUS_SUCCESS &&
                        chk.workspaceSize <= b->ws_bytes;
        }
        /* each pass times every usable candidate once (3 runs after a warm-up); a candidate's time is its best pass */
        for (int pass = 0; pass < b->tune_passes; pass++)
            for (int i = 0; i < n; i++) {
                if (!usable[i]) continue;
                float ms = 0;
                bool ok = true;
                for (int rep = 0; rep < 4 && ok; rep++) { /* rep 0 warms up */
                    if (rep == 1) kiln_cu.cuEventRecord(b->ev[0], s);
                    ok = kiln_lt.cublasLtMatmul(b->h, exact->op, &alpha, ptrs[1], exact->a, ptrs[0], exact->b, &beta,
                                                ptrs[2], exact->c, (void *)ptrs[2], exact->c, &res[i].algo,
                                                (void *)(uintptr_t)b->ws, b->ws_bytes, s) == CUBLAS_STATUS_SUCCESS;
                }
                kiln_cu.cuEventRecord(b->ev[1], s);
                if (!ok || kiln_cu.cuEventSynchronize(b->ev[1]) != CUDA_SUCCESS ||
                    kiln_cu.cuEventElapsedTime(&ms, b->ev[0], b->ev[1]) != CUDA_SUCCESS) {
                    usable[i] = false;
                    continue;
                }
                if (ms < tmin[i]) tmin[i] = ms;
            }
        for (int i = 0; i < n; i++) {
            if (!usable[i]) continue;
            float ms = tmin[i];
            bool sep = false;
            const int sk = algo_split(&res[i].algo, &sep);
            KILN_DEBUG("GEMM %lldx%lldx%lld candidate %d: %.1f us, split %d%s", (long long)exact->key.M,
                       (long long)exact->key.N, (long long)exact->key.K, i, ms * 1e3f / 3, sk,
                       sep ? " + reduction kernel" : "");
            if (sep && exact->key.M <= 64) ms += 3 * b->reduce_penalty_ms; /* ms: 3 runs */
            if (i == 0) first = ms;
            if (ms < best) {
                best = ms;
                pick = i;
                *algo = res[i].algo;
            }
        }
        bool psep = false;
        const int psk = algo_split(algo, &psep);
        KILN_DEBUG("GEMM %lldx%lldx%lld (bucket M %lld): autotune took candidate %d of %d (split %d%s), %.1f us (the "
                   "heuristic's first %.1f us)",
                   (long long)exact->key.M, (long long)exact->key.N, (long long)exact->key.K, (long long)e->key.M, pick,
                   n, psk, psep ? " + reduction kernel" : "", best * 1e3f / 3, first * 1e3f / 3);
    }
fail:
    if (pref) kiln_lt.cublasLtMatmulPreferenceDestroy(pref);
    return st;
}

kiln_status kiln_rt_gemm(kiln_rt_blas *b, kiln_rt_stream *s, kiln_devptr out, int64_t ldo, kiln_dtype out_dt,
                         kiln_devptr x, kiln_devptr w, kiln_dtype in_dt, kiln_devptr bias, int64_t M, int64_t N,
                         int64_t K) {
    kiln_status st = KILN_OK;
    KILN_CHECK(in_dt == KILN_DTYPE_BF16 || in_dt == KILN_DTYPE_F16, KILN_ERR_UNSUPPORTED,
               "cuBLASLt GEMM: inputs must be bf16 or fp16, not %s", kiln_dtype_name(in_dt));
    KILN_CHECK(out_dt == in_dt || out_dt == KILN_DTYPE_F32, KILN_ERR_UNSUPPORTED,
               "cuBLASLt GEMM: output must be %s or fp32", kiln_dtype_name(in_dt));
    KILN_CHECK(ldo == 0 || ldo >= N, KILN_ERR_INVALID_ARGUMENT, "GEMM output stride %lld < N %lld", (long long)ldo,
               (long long)N);
    KILN_CHECK(M > 0 && N > 0 && K > 0, KILN_ERR_INVALID_ARGUMENT, "GEMM shape %lldx%lldx%lld", (long long)M,
               (long long)N, (long long)K);
    gemm_key key;
    memset(&key, 0, sizeof key);
    key.M = M;
    key.N = N;
    key.K = K;
    key.ldo = ldo > 0 ? ldo : N;
    key.in_dt = in_dt;
    key.out_dt = out_dt;
    key.bias = bias != 0;
    bool found = false;
    gemm_entry *e = lookup(b->shapes, &key, &found);
    if (!e) { /* table full: start over (descriptors only; algorithms stay) */
        for (int i = 0; i < BLAS_SLOTS; i++) entry_free(&b->shapes[i]);
        e = lookup(b->shapes, &key, &found);
    }
    if (!found) {
        const void *ptrs[3] = {(const void *)(uintptr_t)x, (const void *)(uintptr_t)w, (const void *)(uintptr_t)out};
        KILN_TRY(make_descs(e, &key));
        if (bias)
            KILN_CHECK_LT(
                kiln_lt.cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        gemm_key bk = key;
        bk.M = kiln_rt_gemm_bucket_m(M, b->fine); /* fine: see the file's comment */
        bool bfound = false;
        gemm_entry *be = lookup(b->buckets, &bk, &bfound);
        KILN_CHECK(be != NULL, KILN_ERR_LIMIT, "too many GEMM shape buckets");
        if (!bfound) {
            KILN_TRY(make_descs(be, &bk));
            KILN_TRY(heuristic(b, be, &be->algo, e, kiln__stream(s), ptrs));
        }
        cublasLtMatmulHeuristicResult_t chk;
        memset(&chk, 0, sizeof chk);
        cublasStatus_t r = kiln_lt.cublasLtMatmulAlgoCheck(b->h, e->op, e->a, e->b, e->c, e->c, &be->algo, &chk);
        if (r == CUBLAS_STATUS_SUCCESS && chk.workspaceSize <= b->ws_bytes) e->algo = be->algo;
        else KILN_TRY(heuristic(b, e, &e->algo, NULL, NULL, NULL));
    }
    if (bias) KILN_CHECK_LT(kiln_lt.cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    {
        const float alpha = 1.0f, beta = 0.0f;
        KILN_CHECK_LT(kiln_lt.cublasLtMatmul(b->h, e->op, &alpha, (const void *)(uintptr_t)w, e->a,
                                             (const void *)(uintptr_t)x, e->b, &beta, (const void *)(uintptr_t)out,
                                             e->c, (void *)(uintptr_t)out, e->c, &e->algo, (void *)(uintptr_t)b->ws,
                                             b->ws_bytes, kiln__stream(s)));
    }
fail:
    if (st) kiln_error_context("GEMM %lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
    return st;
}
