// label: multigpu
/* test_gpu_tp.c -- tensor parallelism on 2, 4 or 8 GPUs (NCCL): all-reduce
 * and all-gather across ranks; the one-shot all-reduce over peer memory
 * (kernel_src/allreduce.cu) bit for bit against host sums on 2 (and every
 * GPU of the machine) ranks: bf16, fp16 and fp32, odd sizes, repeated calls,
 * a captured CUDA graph replayed 100 times; TP=2 (and 4 and 8 where the
 * machine has the GPUs) greedy tokens equal TP=1 on the tiny GQA
 * model and on a Llama-3-8B-shaped random model for 64 tokens, up to the
 * first step whose TP=1 top-2 margin is within bf16 noise, and TP=2 with the
 * one-shot all-reduce equals TP=2 with NCCL's the same way; a failing rank
 * stops every rank with one clear error. */
#include "comm.h"
#include "cuda/ops_gpu.h"
#include "engine_internal.h"
#include "kiln_rt.h"
#include "kt_engine.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct coll {
    int rank;
    uint8_t *id;
    kiln_status st;
    int bad;
} coll;

static void *coll_rank(void *a) {
    coll *c = a;
    kiln_rt_device *d = NULL;
    kiln_rt_comm *cm = NULL;
    kiln_rt_stream *s = NULL;
    enum { N = 1 << 20 };
    float *h = malloc(sizeof(float) * N * 2);
    kiln_devptr buf = 0, all = 0;
    c->st = kiln_rt_device_open(c->rank, &d);
    if (!c->st) c->st = kiln_rt_comm_create(d, c->id, 2, c->rank, &cm);
    if (!c->st) c->st = kiln_rt_stream_create(d, &s);
    if (!c->st) c->st = kiln_rt_malloc(d, sizeof(float) * N, &buf);
    if (!c->st) c->st = kiln_rt_malloc(d, sizeof(float) * N * 2, &all);
    for (int i = 0; i < N; i++) h[i] = (float)((i * 7 + c->rank * 13) % 101) * 0.25f;
    if (!c->st) c->st = kiln_rt_memcpy_htod(buf, h, sizeof(float) * N, s);
    if (!c->st) c->st = kiln_rt_all_gather(cm, buf, all, N, KILN_DTYPE_F32, s);
    if (!c->st) c->st = kiln_rt_all_reduce_sum(cm, buf, N, KILN_DTYPE_F32, s);
    if (!c->st) c->st = kiln_rt_memcpy_dtoh(h, buf, sizeof(float) * N, s);
    if (!c->st) c->st = kiln_rt_memcpy_dtoh(h + N, all, sizeof(float) * N, s); /* first half: rank 0's */
    if (!c->st) c->st = kiln_rt_stream_sync(s);
    for (int i = 0; i < N && !c->st; i++) {
        float want = (float)((i * 7) % 101) * 0.25f + (float)((i * 7 + 13) % 101) * 0.25f;
        if (h[i] != want || h[N + i] != (float)((i * 7) % 101) * 0.25f) c->bad++;
    }
    free(h);
    if (cm) kiln_rt_comm_destroy(cm);
    if (s) kiln_rt_stream_destroy(s);
    if (buf) kiln_rt_free(d, buf);
    if (all) kiln_rt_free(d, all);
    if (d) kiln_rt_device_close(d);
    return NULL;
}

KT_TEST(test_collectives) {
    int n = 0;
    KT_OK(kiln_rt_init());
    KT_OK(kiln_rt_device_count(&n));
    KT_REQUIRE(n >= 2);
    uint8_t id[KILN_RT_NCCL_ID_BYTES];
    KT_OK(kiln_rt_nccl_get_id(id));
    coll c[2] = {{0, id, 0, 0}, {1, id, 0, 0}};
    pthread_t th[2];
    for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, coll_rank, &c[r]);
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) KT_CHECKF(c[r].st == KILN_OK && c[r].bad == 0, "rank %d: %s, %d wrong", r,
                                          kiln_status_name(c[r].st), c[r].bad);
}

/* ------------------------------------------- one-shot all-reduce (peer memory) */

typedef struct ar_group {
    int n;
    int push; /* the exchange: 0 pull, 1 push */
    pthread_barrier_t bar;
    uint8_t handles[KILN_RT_P2P_MAX_RANKS * KILN_RT_P2P_HANDLE_BYTES];
    bool set_ok[KILN_RT_P2P_MAX_RANKS];
} ar_group;

typedef struct ar_rank {
    ar_group *g;
    int rank;
    kiln_status st;
    char err[512];
    long bad, checked;
    char first_bad[256];
} ar_rank;

/* rank r's input element i for call `seed`: a value in [-4, 4) */
static float ar_value(int r, uint32_t seed, size_t i) {
    uint64_t h = ((uint64_t)seed << 40) ^ ((uint64_t)r << 32) ^ (uint64_t)i;
    h ^= h >> 33, h *= 0xff51afd7ed558ccdull, h ^= h >> 33, h *= 0xc4ceb9fe1a85ec53ull, h ^= h >> 33;
    return (float)((double)(h >> 40) / 16777216.0 * 8.0 - 4.0);
}

/* This rank's input (dt bytes) and the expected sum: the ranks' inputs in
 * dt, summed in fp32 in rank order, rounded once to dt. */
static void ar_make(int n_ranks, int rank, uint32_t seed, size_t n, kiln_dtype dt, void *in, void *want) {
    float *f = malloc(sizeof(float) * n), *acc = calloc(n, sizeof(float));
    void *tmp = malloc(n * 4);
    for (int r = 0; r < n_ranks; r++) {
        for (size_t i = 0; i < n; i++) f[i] = ar_value(r, seed, i);
        kiln_from_f32(tmp, dt, f, n);
        if (r == rank) memcpy(in, tmp, n * kiln_dtype_size(dt));
        kiln_to_f32(f, tmp, dt, n);
        for (size_t i = 0; i < n; i++) acc[i] += f[i];
    }
    kiln_from_f32(want, dt, acc, n);
    free(f), free(acc), free(tmp);
}

/* ar_make with signed zeros: element i % 5 == 0 is -0.0 on every rank, and
 * (fp32) element i % 7 == 0 of rank 0 the word 0x80008000 (the push
 * exchange's empty pattern, a denormal). Both exchanges sum from +0.0 (so
 * -0.0 alone sums to +0.0); the push exchange takes that word as -0.0
 * (kernel_src/allreduce.cu), the pull exchange as it is. */
static void ar_make_zeros(int n_ranks, int rank, uint32_t seed, size_t n, kiln_dtype dt, bool push, void *in,
                          void *want) {
    const size_t es = kiln_dtype_size(dt);
    float *f = malloc(sizeof(float) * n), *acc = calloc(n, sizeof(float));
    uint8_t *tmp = malloc(n * 4);
    for (int r = 0; r < n_ranks; r++) {
        for (size_t i = 0; i < n; i++) f[i] = i % 5 == 0 ? -0.0f : ar_value(r, seed, i);
        kiln_from_f32(tmp, dt, f, n);
        for (size_t i = 0; dt == KILN_DTYPE_F32 && r == 0 && i < n; i += 7) {
            const uint32_t wbits = 0x80008000u;
            memcpy(tmp + i * 4, &wbits, 4);
        }
        if (r == rank) memcpy(in, tmp, n * es);
        for (size_t i = 0; push && i < n; i++) {
            if (es == 2) {
                uint16_t h;
                memcpy(&h, tmp + i * 2, 2);
                if (h == 0x8000u) h = 0, memcpy(tmp + i * 2, &h, 2);
            } else {
                uint32_t wd;
                memcpy(&wd, tmp + i * 4, 4);
                if (wd == 0x80008000u) wd = 0x80000000u, memcpy(tmp + i * 4, &wd, 4);
            }
        }
        kiln_to_f32(f, tmp, dt, n);
        for (size_t i = 0; i < n; i++) acc[i] += f[i];
    }
    kiln_from_f32(want, dt, acc, n);
    free(f), free(acc), free(tmp);
}

static void ar_check(ar_rank *a, const void *got, const void *want, size_t n, kiln_dtype dt, const char *what) {
    size_t es = kiln_dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
        a->checked++;
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es)) {
            if (!a->bad) {
                float g, w;
                kiln_to_f32(&g, (const char *)got + i * es, dt, 1);
                kiln_to_f32(&w, (const char *)want + i * es, dt, 1);
                snprintf(a->first_bad, sizeof a->first_bad, "%s: %s n=%zu element %zu is %g, want %g", what,
                         kiln_dtype_name(dt), n, i, (double)g, (double)w);
            }
            a->bad++;
        }
    }
}

#define AR_TRY(expr, label)                                                                                            \
    do {                                                                                                               \
        if ((a->st = (expr)) != KILN_OK) {                                                                             \
            snprintf(a->err, sizeof a->err, "%s: %s", #expr, kiln_last_error());                                       \
            goto label;                                                                                                \
        }                                                                                                              \
    } while (0)

static void *ar_rank_main(void *arg) {
    ar_rank *a = arg;
    ar_group *g = a->g;
    kiln_rt_device *d = NULL;
    kiln_rt_kernels *k = NULL;
    kiln_rt_stream *s = NULL;
    kiln_rt_p2p *p = NULL;
    kiln_rt_graph *gr = NULL;
    const size_t cap = KILN_RT_P2P_MAX_BYTES_DEFAULT;
    kiln_devptr io = 0, io2 = 0, src = 0, src2 = 0;
    void *in = malloc(cap), *want = malloc(cap), *got = malloc(cap), *in2 = malloc(cap), *want2 = malloc(cap);
    bool peers_ok = false;
    AR_TRY(kiln_rt_device_open(a->rank, &d), done);
    AR_TRY(kiln_rt_kernels_create(d, NULL, &k), done);
    AR_TRY(kiln_rt_stream_create(d, &s), done);
    AR_TRY(kiln_rt_p2p_create(d, k, g->n, a->rank, 0, g->push, &p), done);
    kiln_rt_p2p_handle(p, g->handles + (size_t)a->rank * KILN_RT_P2P_HANDLE_BYTES);
    AR_TRY(kiln_rt_malloc(d, cap, &io), done);
    AR_TRY(kiln_rt_malloc(d, cap, &io2), done);
    AR_TRY(kiln_rt_malloc(d, cap, &src), done);
    AR_TRY(kiln_rt_malloc(d, cap, &src2), done);
done:
    /* every rank reaches both barriers, failed or not; kernels run only when
     * every rank has its peers */
    pthread_barrier_wait(&g->bar);
    if (!a->st) {
        a->st = kiln_rt_p2p_set_peers(p, g->handles);
        if (a->st) snprintf(a->err, sizeof a->err, "set_peers: %s", kiln_last_error());
    }
    g->set_ok[a->rank] = !a->st;
    pthread_barrier_wait(&g->bar);
    peers_ok = true;
    for (int r = 0; r < g->n; r++) peers_ok &= g->set_ok[r];
    if (!peers_ok) goto out;

    /* what fits: the size limit, alignment */
    const size_t maxb = kiln_rt_p2p_max_bytes(p);
    if (!kiln_rt_p2p_fits(p, io, maxb / 4, KILN_DTYPE_F32) || kiln_rt_p2p_fits(p, io, maxb / 4 + 1, KILN_DTYPE_F32) ||
        kiln_rt_p2p_fits(p, io + 2, 8, KILN_DTYPE_BF16) || kiln_rt_p2p_fits(p, io, 0, KILN_DTYPE_BF16) ||
        kiln_rt_p2p_fits(p, io, 8, KILN_DTYPE_FP8_E4M3)) {
        snprintf(a->first_bad, sizeof a->first_bad, "kiln_rt_p2p_fits is wrong (max %zu bytes)", maxb);
        a->bad++;
    }

    /* eager calls: sizes around the 16-byte vectors, several blocks, the
     * largest message; each size three times (the data halves alternate) */
    static const kiln_dtype dts[3] = {KILN_DTYPE_BF16, KILN_DTYPE_F16, KILN_DTYPE_F32};
    static const size_t sizes[] = {1, 3, 7, 8, 9, 255, 1000, 4096, 4097, 12345, 65536, 100003, 0 /* largest */};
    uint32_t seed = 1;
    for (int di = 0; di < 3; di++) {
        kiln_dtype dt = dts[di];
        size_t es = kiln_dtype_size(dt);
        for (size_t si = 0; si < KILN_ARRAY_LEN(sizes); si++) {
            size_t n = sizes[si] ? sizes[si] : maxb / es;
            if (n * es > maxb) continue;
            for (int rep = 0; rep < 3; rep++, seed++) {
                ar_make(g->n, a->rank, seed, n, dt, in, want);
                AR_TRY(kiln_rt_memcpy_htod(io, in, n * es, s), out);
                AR_TRY(kiln_rt_p2p_all_reduce_sum(p, io, n, dt, s), out);
                AR_TRY(kiln_rt_memcpy_dtoh(got, io, n * es, s), out);
                AR_TRY(kiln_rt_stream_sync(s), out);
                ar_check(a, got, want, n, dt, "eager");
            }
        }
    }

    /* signed zeros and the push exchange's empty pattern among the inputs */
    for (int di = 0; di < 3; di++) {
        const kiln_dtype dt = dts[di];
        const size_t n = 4099, es = kiln_dtype_size(dt);
        for (int rep = 0; rep < 3; rep++, seed++) {
            ar_make_zeros(g->n, a->rank, seed, n, dt, g->push, in, want);
            AR_TRY(kiln_rt_memcpy_htod(io, in, n * es, s), out);
            AR_TRY(kiln_rt_p2p_all_reduce_sum(p, io, n, dt, s), out);
            AR_TRY(kiln_rt_memcpy_dtoh(got, io, n * es, s), out);
            AR_TRY(kiln_rt_stream_sync(s), out);
            ar_check(a, got, want, n, dt, "signed zeros");
        }
    }

    /* the row-parallel batch-1 GEMV with the push all-reduce + add + RMSNorm as
     * its epilogue (kernel_src/gemv.cu AR=1) against the host: each rank's x_r @
     * W_r^T rounded to dt, summed in rank order, rounded (io); residual += io
     * (rounded); out = rmsnorm(residual) * w; N 4096 (16-byte row vectors a
     * block) and 5000 (element stores); alternating with plain all-reduces */
    if (g->push) {
        kiln_gpu_params gp = {.max_sample_rows = 1, .vocab = 16, .gemv_max_m = 1, .gemv_ar = 1};
        kiln_gpu *gg = NULL;
        AR_TRY(kiln_gpu_create(d, &gp, &gg), out);
        static const int gN[] = {4096, 5000};
        const int K = 512;
        for (int di = 0; di < 2; di++)
            for (int ni = 0; ni < 2; ni++, seed += 4) {
                const kiln_dtype dt = di ? KILN_DTYPE_F16 : KILN_DTYPE_BF16;
                const int N = gN[ni];
                const size_t es = 2;
                if (!kiln_gpu_gemm_ar_norm_ok(gg, p, dt, 1, N, K)) {
                    snprintf(a->first_bad, sizeof a->first_bad, "gemm_ar_norm_ok false for N %d", N);
                    a->bad++;
                    continue;
                }
                float *xs = malloc(sizeof(float) * (size_t)K), *ws = malloc(sizeof(float) * (size_t)N * K),
                      *y = malloc(sizeof(float) * (size_t)N), *sum = calloc((size_t)N, sizeof(float)),
                      *res = malloc(sizeof(float) * (size_t)N), *nwv = malloc(sizeof(float) * (size_t)N),
                      *fo = malloc(sizeof(float) * (size_t)N);
                uint8_t *tmp = malloc((size_t)N * K * es);
                kiln_devptr dx = 0, dw = 0, dres = 0, dnw = 0, dout = 0, dio = 0;
                for (int r = 0; r < g->n; r++) { /* every rank's product, as the GEMV stores it */
                    for (int i = 0; i < K; i++) xs[i] = ar_value(r, seed, (size_t)i);
                    for (size_t i = 0; i < (size_t)N * K; i++) ws[i] = ar_value(r, seed + 1, i) / 64.0f;
                    kiln_from_f32(tmp, dt, xs, (size_t)K), kiln_to_f32(xs, tmp, dt, (size_t)K);
                    if (r == a->rank) {
                        AR_TRY(kiln_rt_malloc(d, (size_t)K * es, &dx), gfail);
                        AR_TRY(kiln_rt_memcpy_htod(dx, tmp, (size_t)K * es, s), gfail);
                    }
                    kiln_from_f32(tmp, dt, ws, (size_t)N * K), kiln_to_f32(ws, tmp, dt, (size_t)N * K);
                    if (r == a->rank) {
                        AR_TRY(kiln_rt_malloc(d, (size_t)N * K * es, &dw), gfail);
                        AR_TRY(kiln_rt_memcpy_htod(dw, tmp, (size_t)N * K * es, s), gfail);
                    }
                    for (int n = 0; n < N; n++) {
                        double acc = 0;
                        for (int c = 0; c < K; c++) acc += (double)xs[c] * ws[(size_t)n * K + c];
                        y[n] = (float)acc;
                    }
                    kiln_from_f32(tmp, dt, y, (size_t)N), kiln_to_f32(y, tmp, dt, (size_t)N);
                    for (int n = 0; n < N; n++) sum[n] += y[n];
                }
                kiln_from_f32(tmp, dt, sum, (size_t)N), kiln_to_f32(sum, tmp, dt, (size_t)N); /* io */
                for (int n = 0; n < N; n++) res[n] = ar_value(97, seed, (size_t)n), nwv[n] = ar_value(96, seed, (size_t)n) / 4.0f;
                kiln_from_f32(tmp, dt, res, (size_t)N), kiln_to_f32(res, tmp, dt, (size_t)N);
                AR_TRY(kiln_rt_malloc(d, (size_t)N * es, &dres), gfail);
                AR_TRY(kiln_rt_memcpy_htod(dres, tmp, (size_t)N * es, s), gfail);
                kiln_from_f32(tmp, dt, nwv, (size_t)N), kiln_to_f32(nwv, tmp, dt, (size_t)N);
                AR_TRY(kiln_rt_malloc(d, (size_t)N * es, &dnw), gfail);
                AR_TRY(kiln_rt_memcpy_htod(dnw, tmp, (size_t)N * es, s), gfail);
                AR_TRY(kiln_rt_malloc(d, (size_t)N * es, &dout), gfail);
                AR_TRY(kiln_rt_malloc(d, (size_t)N * es, &dio), gfail);
                AR_TRY(kiln_gpu_gemm_ar_norm(gg, s, p, dio, dx, dw, dt, N, K, dres, dnw, dout, 1e-5f), gfail);
                for (int n = 0; n < N; n++) res[n] += sum[n];
                kiln_from_f32(tmp, dt, res, (size_t)N), kiln_to_f32(res, tmp, dt, (size_t)N);
                double ss = 0;
                for (int n = 0; n < N; n++) ss += (double)res[n] * res[n];
                const float inv = (float)(1.0 / sqrt(ss / N + 1e-5));
                for (int n = 0; n < N; n++) fo[n] = res[n] * inv * nwv[n];
                const kiln_devptr dev3[3] = {dio, dres, dout};
                const float *ref3[3] = {sum, res, fo};
                static const char *what3[3] = {"io", "residual", "out"};
                for (int v = 0; v < 3; v++) {
                    AR_TRY(kiln_rt_memcpy_dtoh(tmp, dev3[v], (size_t)N * es, s), gfail);
                    AR_TRY(kiln_rt_stream_sync(s), gfail);
                    kiln_to_f32(y, tmp, dt, (size_t)N);
                    for (int n = 0; n < N; n++) {
                        const float tol = (dt == KILN_DTYPE_BF16 ? 2e-2f : 4e-3f) * fabsf(ref3[v][n]) + 2e-2f;
                        a->checked++;
                        if (!(fabsf(y[n] - ref3[v][n]) <= tol)) {
                            if (!a->bad)
                                snprintf(a->first_bad, sizeof a->first_bad, "gemv + all-reduce + norm %s N %d: %s[%d] is %g, want %g",
                                         kiln_dtype_name(dt), N, what3[v], n, (double)y[n], (double)ref3[v][n]);
                            a->bad++;
                        }
                    }
                }
                ar_make(g->n, a->rank, seed + 3, 4097, dt, in, want); /* a plain all-reduce between */
                AR_TRY(kiln_rt_memcpy_htod(io, in, 4097 * es, s), gfail);
                AR_TRY(kiln_rt_p2p_all_reduce_sum(p, io, 4097, dt, s), gfail);
                AR_TRY(kiln_rt_memcpy_dtoh(got, io, 4097 * es, s), gfail);
                AR_TRY(kiln_rt_stream_sync(s), gfail);
                ar_check(a, got, want, 4097, dt, "all-reduce between fused GEMVs");
            gfail:
                kiln_rt_free(d, dx), kiln_rt_free(d, dw), kiln_rt_free(d, dres), kiln_rt_free(d, dnw),
                    kiln_rt_free(d, dout), kiln_rt_free(d, dio);
                free(xs), free(ws), free(y), free(sum), free(res), free(nwv), free(fo), free(tmp);
                if (a->st) break;
            }
        kiln_gpu_destroy(gg);
        if (a->st) goto out;
    }

    /* the push all-gather: out [rows, R * width] = every rank's [rows, width]
     * side by side in rank order (bit for bit), alternating with all-reduces
     * (one epoch, one set of slots); the pull exchange has none */
    if (!g->push) {
        if (kiln_rt_p2p_fits_gather(p, src, io2, 1, 1024, KILN_DTYPE_F32)) {
            snprintf(a->first_bad, sizeof a->first_bad, "kiln_rt_p2p_fits_gather is true for the pull exchange");
            a->bad++;
        }
    } else {
        static const size_t grows[] = {1, 3, 2}, gwidths[] = {64128, 1000, 8};
        for (int di = 0; di < 3; di++)
            for (size_t gi = 0; gi < KILN_ARRAY_LEN(grows); gi++, seed += 2) {
                const kiln_dtype dt = dts[di];
                const size_t es = kiln_dtype_size(dt), rows = grows[gi], width = gwidths[gi], n = rows * width;
                if (n * (size_t)g->n * es > cap || !kiln_rt_p2p_fits_gather(p, src, io2, rows, width, dt)) continue;
                float *f = malloc(sizeof(float) * n);
                uint8_t *bits = malloc(n * es);
                for (int r = 0; r < g->n; r++) {
                    for (size_t i = 0; i < n; i++) f[i] = ar_value(r, seed, i);
                    kiln_from_f32(bits, dt, f, n);
                    if (r == a->rank) memcpy(in, bits, n * es);
                    for (size_t row = 0; row < rows; row++)
                        memcpy((uint8_t *)want + ((row * (size_t)g->n + (size_t)r) * width) * es,
                               bits + row * width * es, width * es);
                }
                free(f), free(bits);
                AR_TRY(kiln_rt_memcpy_htod(src, in, n * es, s), out);
                AR_TRY(kiln_rt_p2p_all_gather(p, src, io2, rows, width, dt, s), out);
                AR_TRY(kiln_rt_memcpy_dtoh(got, io2, n * (size_t)g->n * es, s), out);
                AR_TRY(kiln_rt_stream_sync(s), out);
                ar_check(a, got, want, n * (size_t)g->n, dt, "all-gather");
                ar_make(g->n, a->rank, seed + 1, 4097, dt, in, want); /* a plain all-reduce between */
                AR_TRY(kiln_rt_memcpy_htod(io, in, 4097 * es, s), out);
                AR_TRY(kiln_rt_p2p_all_reduce_sum(p, io, 4097, dt, s), out);
                AR_TRY(kiln_rt_memcpy_dtoh(got, io, 4097 * es, s), out);
                AR_TRY(kiln_rt_stream_sync(s), out);
                ar_check(a, got, want, 4097, dt, "all-reduce between all-gathers");
            }
    }

    /* the all-reduce fused with the residual add + RMSNorm after it: io is
     * the plain all-reduce's result and the residual its exact sum (bit for
     * bit); out within a unit in the last place of the host's norm (the sum
     * of squares is taken in another order). Alternating with a plain
     * all-reduce, so both share the epoch and the data halves. */
    {
        static const kiln_dtype ndts[2] = {KILN_DTYPE_BF16, KILN_DTYPE_F16};
        static const int nrows[] = {1, 3, 32, 64}, ndims[] = {4096, 1000, 8192};
        kiln_devptr res = src, w = src2, o = io2;
        for (int di = 0; di < 2; di++)
            for (size_t ri = 0; ri < KILN_ARRAY_LEN(nrows); ri++)
                for (size_t ci = 0; ci < KILN_ARRAY_LEN(ndims); ci++, seed += 3) {
                    const kiln_dtype dt = ndts[di];
                    const size_t es = kiln_dtype_size(dt);
                    const int rows = nrows[ri], dim = ndims[ci];
                    const size_t n = (size_t)rows * (size_t)dim;
                    if (!kiln_rt_p2p_fits_norm(p, io, res, o, w, rows, dim, dt)) continue;
                    float *f = malloc(sizeof(float) * n * 4);
                    float *fr = f + n, *fw = fr + n, *fs = fw + n;
                    ar_make(g->n, a->rank, seed, n, dt, in, want);
                    for (size_t i = 0; i < n; i++) fr[i] = ar_value(99, seed, i);
                    for (int i = 0; i < dim; i++) fw[i] = ar_value(98, seed, (size_t)i) / 4.0f;
                    kiln_from_f32(in2, dt, fr, n); /* residual in dt */
                    kiln_to_f32(fr, in2, dt, n);
                    AR_TRY(kiln_rt_memcpy_htod(res, in2, n * es, s), out);
                    kiln_from_f32(in2, dt, fw, (size_t)dim);
                    kiln_to_f32(fw, in2, dt, (size_t)dim);
                    AR_TRY(kiln_rt_memcpy_htod(w, in2, (size_t)dim * es, s), out);
                    AR_TRY(kiln_rt_memcpy_htod(io, in, n * es, s), out);
                    AR_TRY(kiln_rt_p2p_all_reduce_add_rmsnorm(p, io, res, o, w, rows, dim, 1e-5f, dt, s), out);
                    AR_TRY(kiln_rt_memcpy_dtoh(got, io, n * es, s), out);
                    AR_TRY(kiln_rt_stream_sync(s), out);
                    ar_check(a, got, want, n, dt, "fused all-reduce, io");
                    /* residual = dt(residual + dt(sum)) */
                    kiln_to_f32(fs, want, dt, n);
                    for (size_t i = 0; i < n; i++) fr[i] += fs[i];
                    kiln_from_f32(want2, dt, fr, n);
                    kiln_to_f32(fr, want2, dt, n);
                    AR_TRY(kiln_rt_memcpy_dtoh(got, res, n * es, s), out);
                    AR_TRY(kiln_rt_stream_sync(s), out);
                    ar_check(a, got, want2, n, dt, "fused all-reduce, residual");
                    AR_TRY(kiln_rt_memcpy_dtoh(got, o, n * es, s), out);
                    AR_TRY(kiln_rt_stream_sync(s), out);
                    kiln_to_f32(fs, got, dt, n);
                    for (int r = 0; r < rows; r++) {
                        double ss = 0;
                        for (int i = 0; i < dim; i++) ss += (double)fr[(size_t)r * dim + i] * fr[(size_t)r * dim + i];
                        float inv = (float)(1.0 / sqrt(ss / dim + 1e-5));
                        for (int i = 0; i < dim; i++) {
                            float ref = fr[(size_t)r * dim + i] * inv * fw[i], gv = fs[(size_t)r * dim + i];
                            float tol = (dt == KILN_DTYPE_BF16 ? 8e-3f : 1e-3f) * fabsf(ref) + 1e-6f;
                            a->checked++;
                            if (!(fabsf(gv - ref) <= tol)) {
                                if (!a->bad)
                                    snprintf(a->first_bad, sizeof a->first_bad,
                                             "fused all-reduce, out: %s rows %d dim %d [%d, %d] is %g, want %g",
                                             kiln_dtype_name(dt), rows, dim, r, i, (double)gv, (double)ref);
                                a->bad++;
                            }
                        }
                    }
                    free(f);
                    /* a plain all-reduce between fused ones */
                    ar_make(g->n, a->rank, seed + 1, 4097, dt, in, want);
                    AR_TRY(kiln_rt_memcpy_htod(io, in, 4097 * es, s), out);
                    AR_TRY(kiln_rt_p2p_all_reduce_sum(p, io, 4097, dt, s), out);
                    AR_TRY(kiln_rt_memcpy_dtoh(got, io, 4097 * es, s), out);
                    AR_TRY(kiln_rt_stream_sync(s), out);
                    ar_check(a, got, want, 4097, dt, "plain all-reduce between fused ones");
                }
    }

    /* a captured graph with two all-reduces of different grids, replayed
     * 100 times on fresh inputs */
    {
        const kiln_dtype dt = KILN_DTYPE_BF16;
        const size_t n1 = 4097, n2 = 100003, es = 2;
        AR_TRY(kiln_rt_graph_begin(s), out);
        kiln_status cs = kiln_rt_memcpy_dtod(io, src, n1 * es, s);
        if (!cs) cs = kiln_rt_p2p_all_reduce_sum(p, io, n1, dt, s);
        if (!cs) cs = kiln_rt_memcpy_dtod(io2, src2, n2 * es, s);
        if (!cs) cs = kiln_rt_p2p_all_reduce_sum(p, io2, n2, dt, s);
        if (cs) snprintf(a->err, sizeof a->err, "capture: %s", kiln_last_error());
        kiln_status es2 = kiln_rt_graph_end(s, &gr);
        if (!cs && es2) snprintf(a->err, sizeof a->err, "graph_end: %s", kiln_last_error());
        if ((a->st = cs ? cs : es2) != KILN_OK) goto out;
        for (int rep = 0; rep < 100; rep++, seed += 2) {
            ar_make(g->n, a->rank, seed, n1, dt, in, want);
            ar_make(g->n, a->rank, seed + 1, n2, dt, in2, want2);
            AR_TRY(kiln_rt_memcpy_htod(src, in, n1 * es, s), out);
            AR_TRY(kiln_rt_memcpy_htod(src2, in2, n2 * es, s), out);
            AR_TRY(kiln_rt_graph_launch(gr, s), out);
            AR_TRY(kiln_rt_memcpy_dtoh(got, io, n1 * es, s), out);
            AR_TRY(kiln_rt_stream_sync(s), out);
            ar_check(a, got, want, n1, dt, "graph replay, first");
            AR_TRY(kiln_rt_memcpy_dtoh(got, io2, n2 * es, s), out);
            AR_TRY(kiln_rt_stream_sync(s), out);
            ar_check(a, got, want2, n2, dt, "graph replay, second");
        }
    }
out:
    if (!a->st && d) a->st = kiln_rt_check_device(d);
    if (gr) kiln_rt_graph_destroy(gr);
    /* no rank frees its buffer while a peer may still read it */
    pthread_barrier_wait(&g->bar);
    kiln_rt_p2p_destroy(p);
    kiln_rt_free(d, io), kiln_rt_free(d, io2), kiln_rt_free(d, src), kiln_rt_free(d, src2);
    if (s) kiln_rt_stream_destroy(s);
    kiln_rt_kernels_destroy(k);
    if (d) kiln_rt_device_close(d);
    free(in), free(want), free(got), free(in2), free(want2);
    return NULL;
}

static void one_shot_ranks(int n, int push) {
    ar_group g = {.n = n, .push = push};
    ar_rank a[KILN_RT_P2P_MAX_RANKS];
    pthread_t th[KILN_RT_P2P_MAX_RANKS];
    pthread_barrier_init(&g.bar, NULL, (unsigned)n);
    for (int r = 0; r < n; r++) {
        a[r] = (ar_rank){.g = &g, .rank = r};
        pthread_create(&th[r], NULL, ar_rank_main, &a[r]);
    }
    for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&g.bar);
    for (int r = 0; r < n; r++) {
        const char *x = push ? "push" : "pull";
        fprintf(stderr, "  %s, %d ranks, rank %d: %ld elements checked, %ld wrong\n", x, n, r, a[r].checked,
                a[r].bad);
        KT_CHECKF(a[r].st == KILN_OK, "%s, %d ranks, rank %d: %s: %s", x, n, r, kiln_status_name(a[r].st), a[r].err);
        KT_CHECKF(a[r].bad == 0 && a[r].checked > 0, "%s, %d ranks, rank %d: %ld wrong; first: %s", x, n, r,
                  a[r].bad, a[r].first_bad);
    }
}

KT_TEST(test_one_shot_all_reduce) {
    int n = 0;
    KT_OK(kiln_rt_init());
    KT_OK(kiln_rt_device_count(&n));
    KT_REQUIRE(n >= 2);
    for (int push = 0; push < 2; push++) {
        one_shot_ranks(2, push);
        if (n > 2) one_shot_ranks(KILN_MIN(n, KILN_RT_P2P_MAX_RANKS), push);
    }
}

typedef struct run {
    int32_t ids[4][64];
    float margin[4][64]; /* top-1 minus top-2 logprob at each step */
    int n[4];
} run;

typedef struct ev_ctx {
    run *r;
    int i;
    int k;
} ev_ctx;

static int on_ev(void *u, const kiln_stream_event *ev) {
    ev_ctx *c = u;
    if (ev->token >= 0 && c->k < 64) {
        c->r->margin[c->i][c->k] = ev->n_top >= 2 ? ev->top[0].logprob - ev->top[1].logprob : INFINITY;
        c->k++;
    }
    return 0;
}

static kiln_status generate(const char *model, bool dummy, int tp, run *out) {
    kiln_engine_params p;
    kt_engine_params(&p, model, "cuda");
    p.tensor_parallel_size = tp;
    p.load_format = dummy ? "dummy" : "auto";
    p.max_model_len = 256;
    p.max_num_seqs = 8;
    p.gpu_memory_utilization = 0.5;
    kiln_engine *e = NULL;
    kiln_status st = kiln_engine_create(&p, &e);
    if (st) return st;
    kiln_request r[4];
    kiln_result res[4];
    static int32_t prompts[4][32];
    static ev_ctx ctx[4];
    for (int i = 0; i < 4; i++) {
        for (int k = 0; k < 32; k++) prompts[i][k] = 100 + (k * 37 + i * 101) % 400;
        kt_greedy_request(&r[i], prompts[i], 8 + 8 * i, 64);
        r[i].sampling.logprobs = 2; /* top-2: the margin of each greedy step */
        ctx[i] = (ev_ctx){out, i, 0};
        r[i].on_event = on_ev;
        r[i].user = &ctx[i];
    }
    st = kiln_engine_generate(e, r, 4, res);
    for (int i = 0; i < 4 && !st; i++) {
        out->n[i] = res[i].n_ids;
        memcpy(out->ids[i], res[i].ids, sizeof(int32_t) * (size_t)KILN_MIN(64, res[i].n_ids));
        kiln_result_free(&res[i]);
    }
    kiln_engine_destroy(e);
    return st;
}

/* b (TP=2) must follow the reference a (TP=1) until a reaches a step whose
 * top-2 margin is within bf16 noise (tol, in logits); the all-reduce adds
 * one rounding of the partial sums per layer, so a near tie may flip there. */
static void compare(const run *a, const run *b, const char *what, float tol) {
    for (int i = 0; i < 4; i++) {
        KT_CHECK(a->n[i] == 64 && b->n[i] == 64);
        int same = 0;
        while (same < 64 && a->ids[i][same] == b->ids[i][same]) same++;
        int noisy = 0;
        while (noisy < 64 && a->margin[i][noisy] >= tol) noisy++;
        fprintf(stderr, "  %s prompt %d: %d of 64 identical; first reference margin below %.2f at step %d\n", what, i,
                same, tol, noisy);
        KT_CHECKF(same >= noisy, "%s prompt %d: diverges from the reference at step %d, before a near tie (step %d)",
                  what, i, same, noisy);
    }
}

/* TP=2, and every larger power of two the machine has GPUs for (4, 8),
 * against TP=1 */
KT_TEST(test_tp_tiny_and_8b) {
    static run a, b;
    int n_dev = 0;
    KT_OK(kiln_rt_init());
    KT_OK(kiln_rt_device_count(&n_dev));
    KT_OK(generate(KT_MODEL("llama3-gqa"), false, 1, &a));
    for (int tp = 2; tp <= n_dev && tp <= 4; tp *= 2) { /* llama3-gqa has 4 heads */
        char what[64];
        snprintf(what, sizeof what, "llama3-gqa tp=%d", tp);
        KT_OK(generate(KT_MODEL("llama3-gqa"), false, tp, &b));
        compare(&a, &b, what, 0.15f); /* 2% of its largest logits (~7) */
    }
    KT_OK(generate("llama3-8b", true, 1, &a));
    for (int tp = 2; tp <= n_dev && tp <= 8; tp *= 2) {
        char what[64];
        snprintf(what, sizeof what, "llama3-8b dummy tp=%d", tp);
        KT_OK(generate("llama3-8b", true, tp, &b));
        compare(&a, &b, what, 0.02f);
    }
}

/* TP=2 with the one-shot all-reduce (the default), pull and push exchange
 * ($KILN_AR_PUSH), against TP=2 with NCCL's ($KILN_CUSTOM_ALLREDUCE=0) */
KT_TEST(test_tp_one_shot_vs_nccl) {
    static run a, b;
    int n_dev = 0;
    KT_OK(kiln_rt_init());
    KT_OK(kiln_rt_device_count(&n_dev));
    KT_REQUIRE(n_dev >= 2);
    static const struct {
        const char *model;
        bool dummy;
        float tol;
    } m[2] = {{KT_MODEL("llama3-gqa"), false, 0.15f}, {"llama3-8b", true, 0.02f}};
    for (int i = 0; i < 2; i++) {
        setenv("KILN_CUSTOM_ALLREDUCE", "0", 1);
        kiln_status st = generate(m[i].model, m[i].dummy, 2, &a);
        unsetenv("KILN_CUSTOM_ALLREDUCE");
        KT_OK(st);
        const char *name = strrchr(m[i].model, '/') ? strrchr(m[i].model, '/') + 1 : m[i].model;
        for (int push = 0; push < 2; push++) { /* the pull and the push exchange */
            setenv("KILN_AR_PUSH", push ? "1" : "0", 1);
            st = generate(m[i].model, m[i].dummy, 2, &b);
            unsetenv("KILN_AR_PUSH");
            KT_OK(st);
            char what[96];
            snprintf(what, sizeof what, "%s tp=2 one-shot (%s) vs NCCL", name, push ? "push" : "pull");
            compare(&a, &b, what, m[i].tol);
        }
    }
}

KT_TEST(test_tp_rank_failure_gpu) {
    char path[512];
    snprintf(path, sizeof path, "/tmp/kt_tp_fail_%d.lua", (int)getpid());
    const char *src = "local K = require('kiln')\nreturn function(facts)\n"
                      "  if facts.tp.rank == 1 then error('rank 1 ran out of memory') end\n"
                      "  return K.decoder(facts, {name = 'x', names = K.llama_names()}):finish()\nend\n";
    kiln_write_file_atomic(path, src, strlen(src));
    kiln_engine_params p;
    kt_engine_params(&p, KT_MODEL("llama3-gqa"), "cuda");
    p.tensor_parallel_size = 2;
    p.policy_file = path;
    kiln_engine *e = NULL;
    KT_ERR(kiln_engine_create(&p, &e), KILN_ERR_POLICY, "tensor-parallel rank 1 of 2 failed, every rank stopped");
    unlink(path);
}

KT_MAIN(KT_CASE(test_collectives), KT_CASE(test_one_shot_all_reduce), KT_CASE(test_tp_tiny_and_8b),
        KT_CASE(test_tp_one_shot_vs_nccl), KT_CASE(test_tp_rank_failure_gpu))
