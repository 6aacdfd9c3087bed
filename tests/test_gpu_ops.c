// label: gpu
/* test_gpu_ops.c -- every CUDA op variant against its CPU variant on fresh
 * random inputs over shape sweeps, outputs poisoned (NaN) first; cuBLASLt
 * GEMM; graph capture; and a final check that every registry kernel was
 * exercised. FP8: the device casts match the host reference conversions
 * bit for bit on every code and on crafted and random f32 inputs; the KV
 * write with per-layer and per-head scales matches the CPU write byte for
 * byte; attention (decode, split-K, prefill) over E4M3 / E5M2 caches with
 * per-head scales matches the CPU reference. Skips (77) without a GPU. */
#include "cuda/ops_gpu.h"
#include "kt.h"
#include "model.h"
#include "sampler.h"

#include <glob.h>
#include <stdlib.h>
#include <unistd.h>

static kiln_rt_device *dev;
static kiln_rt_stream *st;
static kiln_gpu *gpu;
static bool no_gpu;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next_u64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
/* N(0, 1) samples: 65536 Box-Muller values made once (their own generator),
 * drawn by one step of the test's stream -- the shape sweeps fill caches of
 * tens of millions of elements, where Box-Muller per element made the CPU
 * side of the attention tests take minutes */
static float gauss_tab[65536];
static float gauss(void) {
    static bool ready;
    if (!ready) {
        uint64_t r = 0x2545F4914F6CDD1Dull;
        for (int i = 0; i < 65536; i += 2) {
            float u[2];
            for (int k = 0; k < 2; k++) {
                r ^= r << 13, r ^= r >> 7, r ^= r << 17;
                u[k] = (float)((r >> 40) * (1.0 / 16777216.0));
            }
            float m = sqrtf(-2.0f * logf(u[0] + 1e-7f));
            gauss_tab[i] = m * cosf(6.2831853f * u[1]);
            gauss_tab[i + 1] = m * sinf(6.2831853f * u[1]);
        }
        ready = true;
    }
    return gauss_tab[next_u64() >> 48];
}

static void dump_used(void);

static bool setup(void) {
    if (gpu) return true;
    if (no_gpu) return false;
    int n = 0;
    if (kiln_rt_device_count(&n) != KILN_OK || n == 0) {
        no_gpu = true;
        return false;
    }
    /* cuBLASLt for every M here; test_gemv, test_gemm_tc and test_gemm_sk run the GEMV, gemm_tc and gemm_sk */
    kiln_gpu_params p = {.gemv_max_m = -1, .tcgemm_max_m = -1, .skgemm_max_m = -1};
    p.max_sample_rows = 64;
    p.vocab = 131072;
    if (kiln_rt_device_open(0, &dev) || kiln_rt_stream_create(dev, &st) || kiln_gpu_create(dev, &p, &gpu)) {
        fprintf(stderr, "  GPU setup failed: %s\n", kiln_last_error());
        no_gpu = true;
        return false;
    }
    if (getenv("KT_KERNELS_USED")) atexit(dump_used); /* the suite split over processes (test_every_kernel_tested) */
    return true;
}
#define NEED_GPU()                                                                                                     \
    do {                                                                                                               \
        if (!setup()) KT_SKIP("no CUDA GPU: %s", kiln_last_error());                                                    \
    } while (0)

/* device buffer helpers */
static kiln_devptr dmalloc(size_t bytes) {
    kiln_devptr p = 0;
    if (kiln_rt_malloc(dev, bytes, &p)) fprintf(stderr, "  alloc: %s\n", kiln_last_error());
    kiln_rt_memset8(p, 0xff, bytes, NULL); /* poison: NaN in f32, f16 and bf16 */
    return p;
}
static kiln_devptr dupload(const void *h, size_t bytes) {
    kiln_devptr p = dmalloc(bytes);
    kiln_rt_memcpy_htod(p, h, bytes, NULL);
    return p;
}
static void *ddown(kiln_devptr p, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    kiln_rt_stream_sync(st);
    kiln_rt_memcpy_dtoh(h, p, bytes, NULL);
    return h;
}
static void dfree(kiln_devptr p) { kiln_rt_free(dev, p); }

/* random activations: f32 values exactly representable in dt */
static float *rand_act(size_t n, kiln_dtype dt, float scale) {
    float *f = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) f[i] = gauss() * scale;
    void *tmp = malloc(n * kiln_dtype_size(dt) + 1);
    kiln_from_f32(tmp, dt, f, n);
    kiln_to_f32(f, tmp, dt, n);
    free(tmp);
    return f;
}
static kiln_devptr up_act(const float *f, size_t n, kiln_dtype dt) {
    void *tmp = malloc(n * kiln_dtype_size(dt) + 1);
    kiln_from_f32(tmp, dt, f, n);
    kiln_devptr p = dupload(tmp, n * kiln_dtype_size(dt));
    free(tmp);
    return p;
}
static float *down_act(kiln_devptr p, size_t n, kiln_dtype dt) {
    void *tmp = ddown(p, n * kiln_dtype_size(dt));
    float *f = malloc(sizeof(float) * (n ? n : 1));
    kiln_to_f32(f, tmp, dt, n);
    free(tmp);
    return f;
}

/* ||a - b|| / ||b||, and NaN-free; prints the first bad index */
static double rel_err(const float *got, const float *ref, size_t n, int *nan_count) {
    double num = 0, den = 0;
    *nan_count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) {
            (*nan_count)++;
            continue;
        }
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
static double tol_for(kiln_dtype dt) { return dt == KILN_DTYPE_F16 ? 3e-3 : dt == KILN_DTYPE_BF16 ? 1.2e-2 : 1e-5; }

#define CHECK_CLOSE(got, ref, n, dt, ...)                                                                              \
    do {                                                                                                               \
        int nan_ = 0;                                                                                                  \
        double e_ = rel_err((got), (ref), (n), &nan_);                                                                 \
        KT_CHECKF(nan_ == 0 && e_ <= tol_for(dt), "rel err %.3g, %d non-finite (tol %.1g) ", e_, nan_, tol_for(dt));  \
        if (nan_ || e_ > tol_for(dt)) {                                                                                \
            fprintf(stderr, "    case: ");                                                                            \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fprintf(stderr, "\n");                                                                                     \
        }                                                                                                              \
    } while (0)

static const kiln_dtype acts[] = {KILN_DTYPE_BF16, KILN_DTYPE_F16};

/* The elementwise ops' two kernel sets (engine/cuda/ops_gpu.c: the wide
 * kernels from elem_wide_min rows / tokens up): the rmsnorm, rope and KV
 * tests run every case twice, pass 0 with the kernels of rmsnorm.cu and
 * rope_kv.cu at every size (elem_wide_min 0: never wide), pass 1 with those
 * of rmsnorm_wide.cu and rope_kv_wide.cu at every size (1: always); then
 * the configured threshold is restored. */
static const char *const elem_pass[] = {"", " (wide)", " (tile)", " (dec)", " (pipe)"};

/* ------------------------------------------------------------ elementwise */

KT_TEST(test_embed) {
    NEED_GPU();
    for (size_t a = 0; a < 2; a++) {
        kiln_dtype dt = acts[a];
        int T = 37, H = 256, V = 800;
        int64_t start = 100;
        float *w = rand_act((size_t)V * H, dt, 1.0f);
        int32_t ids[37];
        for (int t = 0; t < T; t++) ids[t] = (int32_t)(next_u64() % 1000);
        ids[0] = 50;  /* below the shard */
        ids[1] = 950; /* above */
        float *ref = malloc(sizeof(float) * (size_t)T * H);
        kiln_cpu_embed(ref, ids, T, w, KILN_DTYPE_F32, V, H, start);
        kiln_devptr dw = up_act(w, (size_t)V * H, dt), dids = dupload(ids, sizeof ids),
                    dout = dmalloc((size_t)T * H * 2);
        KT_OK(kiln_gpu_embed(gpu, st, dout, dt, dids, T, dw, dt, V, H, start));
        float *got = down_act(dout, (size_t)T * H, dt);
        CHECK_CLOSE(got, ref, (size_t)T * H, dt, "embed %s", kiln_dtype_name(dt));
        free(w), free(ref), free(got);
        dfree(dw), dfree(dids), dfree(dout);
    }
}

KT_TEST(test_rmsnorm) {
    NEED_GPU();
    /* the kernels' three shapes: a warp per row (128, 1000), a block per row
     * with 4 vectors per thread (2056, 4096, 5120), two passes (40960: 5
     * vectors per thread of 1024 in rmsnorm.cu, 10 of 512 in rmsnorm_wide.cu);
     * 300 rows: past the default wide threshold (256) */
    int rows_s[] = {1, 7, 64, 300}, dims[] = {128, 1000, 2056, 4096, 5120, 40960};
    for (int wide = 0; wide < 2; wide++) {
        int was = kiln_gpu_set_elem_wide_min(gpu, wide);
        for (size_t a = 0; a < 2; a++)
            for (int ri = 0; ri < 4; ri++)
                for (int di = 0; di < 6; di++) {
                    kiln_dtype dt = acts[a];
                    int rows = rows_s[ri], dim = dims[di];
                    size_t n = (size_t)rows * dim;
                    float *x = rand_act(n, dt, 2.0f), *w = rand_act((size_t)dim, dt, 1.0f);
                    float *res = rand_act(n, dt, 3.0f);
                    float *ref = malloc(sizeof(float) * n), *rres = malloc(sizeof(float) * n);
                    kiln_cpu_rmsnorm(ref, x, w, KILN_DTYPE_F32, rows, dim, 1e-5f);
                    kiln_devptr dx = up_act(x, n, dt), dw = up_act(w, (size_t)dim, dt), dout = dmalloc(n * 2);
                    KT_OK(kiln_gpu_rmsnorm(gpu, st, dout, dx, dw, dt, dt, rows, dim, 1e-5f));
                    float *got = down_act(dout, n, dt);
                    CHECK_CLOSE(got, ref, n, dt, "rmsnorm%s %s %dx%d", elem_pass[wide], kiln_dtype_name(dt), rows, dim);
                    free(got);
                    /* fused residual add: the GPU norms the residual as stored (rounded) */
                    memcpy(rres, res, sizeof(float) * n);
                    for (size_t i = 0; i < n; i++) rres[i] += x[i];
                    {
                        void *tmp = malloc(n * 2);
                        kiln_from_f32(tmp, dt, rres, n);
                        kiln_to_f32(rres, tmp, dt, n);
                        free(tmp);
                    }
                    kiln_cpu_rmsnorm(ref, rres, w, KILN_DTYPE_F32, rows, dim, 1e-5f);
                    kiln_devptr dres = up_act(res, n, dt);
                    kiln_rt_memset8(dout, 0xff, n * 2, NULL);
                    KT_OK(kiln_gpu_add_rmsnorm(gpu, st, dout, dres, dx, dw, dt, dt, rows, dim, 1e-5f));
                    got = down_act(dout, n, dt);
                    float *gres = down_act(dres, n, dt);
                    CHECK_CLOSE(got, ref, n, dt, "add_rmsnorm%s out %s %dx%d", elem_pass[wide], kiln_dtype_name(dt),
                                rows, dim);
                    CHECK_CLOSE(gres, rres, n, dt, "add_rmsnorm%s residual %s %dx%d", elem_pass[wide],
                                kiln_dtype_name(dt), rows, dim);
                    free(x), free(w), free(res), free(ref), free(rres), free(got), free(gres);
                    dfree(dx), dfree(dw), dfree(dout), dfree(dres);
                }
        kiln_gpu_set_elem_wide_min(gpu, was);
    }
}

KT_TEST(test_glu_add_gather_cast) {
    NEED_GPU();
    int Ts[] = {1, 33}, Is[] = {128, 14336};
    for (size_t a = 0; a < 2; a++)
        for (int ti = 0; ti < 2; ti++)
            for (int ii = 0; ii < 2; ii++)
                for (int gelu = 0; gelu < 2; gelu++) {
                    kiln_dtype dt = acts[a];
                    int T = Ts[ti], I = Is[ii];
                    size_t n = (size_t)T * I;
                    float *x = rand_act(2 * n, dt, 2.0f), *ref = malloc(sizeof(float) * n);
                    if (gelu) kiln_cpu_gelu_mul(ref, x, T, I);
                    else kiln_cpu_silu_mul(ref, x, T, I);
                    kiln_devptr dx = up_act(x, 2 * n, dt), dout = dmalloc(n * 2);
                    if (gelu) KT_OK(kiln_gpu_gelu_mul(gpu, st, dout, dx, dt, T, I));
                    else KT_OK(kiln_gpu_silu_mul(gpu, st, dout, dx, dt, T, I));
                    float *got = down_act(dout, n, dt);
                    CHECK_CLOSE(got, ref, n, dt, "%s %s T=%d I=%d", gelu ? "gelu" : "silu", kiln_dtype_name(dt), T, I);
                    free(x), free(ref), free(got);
                    dfree(dx), dfree(dout);
                }
    for (size_t a = 0; a < 2; a++) {
        kiln_dtype dt = acts[a];
        size_t n = 1000;
        float *x = rand_act(n, dt, 1), *y = rand_act(n, dt, 1), *ref = malloc(sizeof(float) * n);
        kiln_cpu_add(ref, x, y, (int64_t)n);
        kiln_devptr dx = up_act(x, n, dt), dy = up_act(y, n, dt), dout = dmalloc(n * 2);
        KT_OK(kiln_gpu_add(gpu, st, dout, dx, dy, dt, (int64_t)n));
        float *got = down_act(dout, n, dt);
        CHECK_CLOSE(got, ref, n, dt, "add");
        free(x), free(y), free(ref), free(got);
        dfree(dx), dfree(dy), dfree(dout);
    }
    /* gathers: exact copies, fp32 and bf16, with an odd dim */
    kiln_dtype gdt[] = {KILN_DTYPE_F32, KILN_DTYPE_BF16};
    for (int gi = 0; gi < 2; gi++) {
        int rows = 50, dim = 1001, n = 9;
        float *x = rand_act((size_t)rows * dim, gdt[gi], 1), *ref = malloc(sizeof(float) * (size_t)n * dim);
        int32_t idx[9], qstart[10] = {0};
        for (int i = 0; i < n; i++) idx[i] = (int32_t)(next_u64() % rows);
        kiln_cpu_gather_rows(ref, x, idx, n, dim);
        kiln_devptr dx = up_act(x, (size_t)rows * dim, gdt[gi]), di = dupload(idx, sizeof idx),
                    dout = dmalloc((size_t)n * dim * 4);
        KT_OK(kiln_gpu_gather_rows(gpu, st, dout, dx, gdt[gi], di, n, dim));
        float *got = down_act(dout, (size_t)n * dim, gdt[gi]);
        KT_CHECK(!memcmp(got, ref, sizeof(float) * (size_t)n * dim));
        free(got);
        for (int s = 0; s < n; s++) qstart[s + 1] = qstart[s] + 1 + (int)(next_u64() % 5);
        for (int s = 0; s < n; s++) idx[s] = qstart[s + 1] - 1;
        kiln_cpu_gather_rows(ref, x, idx, n, dim);
        kiln_devptr dq = dupload(qstart, sizeof qstart);
        kiln_rt_memset8(dout, 0xff, (size_t)n * dim * 4, NULL);
        KT_OK(kiln_gpu_gather_last(gpu, st, dout, dx, gdt[gi], dq, n, dim));
        got = down_act(dout, (size_t)n * dim, gdt[gi]);
        KT_CHECK(!memcmp(got, ref, sizeof(float) * (size_t)n * dim));
        free(x), free(ref), free(got);
        dfree(dx), dfree(di), dfree(dout), dfree(dq);
    }
    /* casts: bit-exact against the host conversions */
    kiln_dtype pairs[][2] = {{KILN_DTYPE_BF16, KILN_DTYPE_F32}, {KILN_DTYPE_F32, KILN_DTYPE_BF16},
                             {KILN_DTYPE_F32, KILN_DTYPE_F16}, {KILN_DTYPE_F16, KILN_DTYPE_F32}};
    for (int p = 0; p < 4; p++) {
        size_t n = 4099;
        float *x = malloc(sizeof(float) * n);
        for (size_t i = 0; i < n; i++) x[i] = gauss() * 100.0f;
        void *src = malloc(n * 4), *want = malloc(n * 4);
        kiln_from_f32(src, pairs[p][0], x, n);
        kiln_to_f32(x, src, pairs[p][0], n);
        kiln_from_f32(want, pairs[p][1], x, n);
        kiln_devptr ds = dupload(src, n * kiln_dtype_size(pairs[p][0])), dd = dmalloc(n * 4);
        KT_OK(kiln_gpu_cast(gpu, st, dd, pairs[p][1], ds, pairs[p][0], (int64_t)n));
        void *got = ddown(dd, n * kiln_dtype_size(pairs[p][1]));
        KT_CHECKF(!memcmp(got, want, n * kiln_dtype_size(pairs[p][1])), "cast %s -> %s",
                  kiln_dtype_name(pairs[p][0]), kiln_dtype_name(pairs[p][1]));
        free(x), free(src), free(want), free(got);
        dfree(ds), dfree(dd);
    }
}

/* ------------------------------------------------------------------ FP8 */

static uint8_t host_fp8(kiln_dtype t, float f) {
    return t == KILN_DTYPE_FP8_E4M3 ? kiln_f32_to_fp8_e4m3(f) : kiln_f32_to_fp8_e5m2(f);
}
static float host_fp8_val(kiln_dtype t, uint8_t c) {
    return t == KILN_DTYPE_FP8_E4M3 ? kiln_fp8_e4m3_to_f32(c) : kiln_fp8_e5m2_to_f32(c);
}

KT_TEST(test_fp8_cast) {
    NEED_GPU();
    kiln_dtype fts[] = {KILN_DTYPE_FP8_E4M3, KILN_DTYPE_FP8_E5M2};
    for (int fi = 0; fi < 2; fi++) {
        kiln_dtype ft = fts[fi];
        /* fp8 -> f32: every code (NaN codes must give a NaN of the same sign) */
        uint8_t codes[256];
        for (int i = 0; i < 256; i++) codes[i] = (uint8_t)i;
        kiln_devptr dc = dupload(codes, 256), df = dmalloc(256 * 4);
        KT_OK(kiln_gpu_cast(gpu, st, df, KILN_DTYPE_F32, dc, ft, 256));
        float *got = ddown(df, 256 * 4);
        int bad = 0;
        for (int i = 0; i < 256; i++) {
            float want = host_fp8_val(ft, (uint8_t)i);
            bool ok = isnan(want) ? isnan(got[i]) && signbit(got[i]) == signbit(want)
                                  : !memcmp(&got[i], &want, 4);
            if (!ok && bad++ < 4) fprintf(stderr, "    %s code 0x%02x -> %g, host %g\n", kiln_dtype_name(ft), i,
                                          (double)got[i], (double)want);
        }
        KT_CHECKF(bad == 0, "%s -> f32: %d codes differ", kiln_dtype_name(ft), bad);
        free(got), dfree(dc), dfree(df);
        /* f32 -> fp8: every value, the midpoints between neighbours (ties to
         * even) and just off them, beyond the largest finite value, infinities,
         * NaN, signed zeros, the smallest subnormals and below, and random
         * f32 over 2^-30 .. 2^20 */
        size_t n = 0, cap = 256 * 6 + 64 + 65536;
        float *x = malloc(sizeof(float) * cap);
        for (int i = 0; i < 256; i++) {
            float a = host_fp8_val(ft, (uint8_t)i), b = host_fp8_val(ft, (uint8_t)(i + 1));
            x[n++] = a;
            if (isfinite(a) && isfinite(b) && (i & 0x7f) != 0x7f) {
                float m = (a + b) / 2;
                x[n++] = m;
                x[n++] = nextafterf(m, INFINITY);
                x[n++] = nextafterf(m, -INFINITY);
                x[n++] = nextafterf(a, b);
            }
        }
        const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 448.0f, 464.0f, 465.0f, 480.0f, 1e6f,
                                 -1e6f, 57344.0f, 61440.0f, 61441.0f, 1e30f, 3e38f, 1e-30f, -1e-30f,
                                 ldexpf(1, -10), ldexpf(1, -17), ldexpf(3, -11), ldexpf(3, -18), ldexpf(1, -149)};
        for (size_t i = 0; i < KILN_ARRAY_LEN(special); i++) x[n++] = special[i];
        for (int i = 0; i < 65536 - 64; i++) {
            uint64_t r = next_u64();
            float m = ldexpf((float)(r >> 40) / 16777216.0f + 0.5f, (int)((r >> 8) % 50) - 30);
            x[n++] = (r & 1) ? -m : m;
        }
        uint8_t *want = malloc(n);
        for (size_t i = 0; i < n; i++) want[i] = host_fp8(ft, x[i]);
        kiln_devptr dx = dupload(x, n * 4), dq = dmalloc(n);
        KT_OK(kiln_gpu_cast(gpu, st, dq, ft, dx, KILN_DTYPE_F32, (int64_t)n));
        uint8_t *gq = ddown(dq, n);
        bad = 0;
        for (size_t i = 0; i < n; i++)
            if (gq[i] != want[i] && bad++ < 4)
                fprintf(stderr, "    f32 %a -> %s 0x%02x, host 0x%02x\n", (double)x[i], kiln_dtype_name(ft), gq[i],
                        want[i]);
        KT_CHECKF(bad == 0, "f32 -> %s: %d of %zu values differ", kiln_dtype_name(ft), bad, n);
        free(x), free(want), free(gq), dfree(dx), dfree(dq);
    }
}

/* ------------------------------------------------------------ rope and kv */

static void make_inv_freq(int rot, bool llama3, float *inv, float *mscale) {
    kiln_rope_config rc;
    memset(&rc, 0, sizeof rc);
    snprintf(rc.type, sizeof rc.type, "%s", llama3 ? "llama3" : "default");
    rc.theta = 500000.0;
    rc.factor = 8.0;
    rc.low_freq_factor = 1.0;
    rc.high_freq_factor = 4.0;
    rc.original_max_position = 8192;
    kiln_rope_inv_freq(&rc, rot, inv, mscale);
}

KT_TEST(test_rope) {
    NEED_GPU();
    int hds[] = {64, 128};
    /* 24 cases of 45 tokens (dtype, head dim, interleaved, variant), then
     * four prefills of 32 q / 8 KV heads of 128, long enough (by the SM
     * count) that rope_kv_wide.cu's rope rows rotate several heads a thread
     * (engine/cuda/ops_gpu.c head_slots): bf16 rotate-half (8 columns a head,
     * 4 lanes sharing a column's cos / sin), fp16 half the dims rotated (4
     * columns, none shared), bf16 interleaved (16 columns, 2 lanes), fp16
     * dynamic NTK */
    const int n_sms = kiln_rt_device_get_info(dev)->n_sms, T_big = 3 * n_sms * 2048 / (40 * 8) + 45;
    for (int wide = 0; wide < 2; wide++) {
        int was = kiln_gpu_set_elem_wide_min(gpu, wide);
        for (int c = 0; c < 2 * 2 * 2 * 3 + 4; c++) {
            bool big = c >= 24;
            size_t a = big ? (size_t)(c & 1) : (size_t)(c / 12);
            int hi = big ? 1 : (c / 6) % 2, ilv = big ? c == 26 : (c / 3) % 2;
            int variant = big ? (c == 25 ? 1 : c == 27 ? 2 : 0) : c % 3; /* 0 default, 1 llama3 + partial, 2 dynamic NTK */
            kiln_dtype dt = acts[a];
            int hd = hds[hi], nq = big ? 32 : 4, nkv = big ? 8 : 2, T = big ? T_big : 45;
            int rot = variant == 1 ? hd / 2 : hd;
            int64_t stride = (int64_t)(nq + 2 * nkv) * hd + 8;
            float inv[128], ms = 1;
            make_inv_freq(rot, variant == 1, inv, &ms);
            int32_t *pos = malloc(sizeof(int32_t) * (size_t)T), *dyn = malloc(sizeof(int32_t) * (size_t)T);
            for (int t = 0; t < T; t++) {
                pos[t] = (int32_t)(next_u64() % (t < 5 ? 200000 : 9000));
                dyn[t] = pos[t] + 1 + (int32_t)(next_u64() % 5000);
            }
            kiln_rope_params rp = {hd, rot, ilv != 0, inv, ms, variant == 2 ? dyn : NULL, 4096, 10000.0, 2.0};
            size_t n = (size_t)T * stride;
            float *x = rand_act(n, dt, 1), *ref = malloc(sizeof(float) * n);
            memcpy(ref, x, sizeof(float) * n);
            kiln_cpu_rope(ref, stride, pos, T, nq, nkv, &rp);
            kiln_devptr dx = up_act(x, n, dt), dpos = dupload(pos, sizeof(int32_t) * (size_t)T),
                        dinv = dupload(inv, sizeof inv), ddyn = dupload(dyn, sizeof(int32_t) * (size_t)T);
            kiln_gpu_rope_params gp = {hd, rot, ilv != 0, dinv, ms, variant == 2 ? ddyn : 0, 4096, 10000.0f, 2.0f};
            KT_OK(kiln_gpu_rope(gpu, st, dx, dt, stride, dpos, T, nq, nkv, &gp));
            float *got = down_act(dx, n, dt);
            CHECK_CLOSE(got, ref, n, dt, "rope%s %s hd=%d ilv=%d variant=%d T=%d", elem_pass[wide],
                        kiln_dtype_name(dt), hd, ilv, variant, T);
            free(x), free(ref), free(got), free(pos), free(dyn);
            dfree(dx), dfree(dpos), dfree(dinv), dfree(ddyn);
        }
        kiln_gpu_set_elem_wide_min(gpu, was);
    }
}

/* fill a cache with the same random bytes on host and device */
static void *rand_bytes(size_t n) {
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(next_u64() >> 56) & 0x3f; /* small finite values in any dtype */
    return b;
}

/* One KV write (fused: rope + KV write) case against the CPU: nq q heads and
 * nkv KV heads of hd, a cache of block size bs in kvdt; slots a prefill run
 * from base with one skipped (-1) and a jump of a block after T / 2; FP8
 * with per-head scales when head_scales, else scalar ones; fused: rot dims
 * rotated, interleaved or not, dynamic NTK from token 16 on when dyn. */
typedef struct kv_case {
    kiln_dtype kvdt;
    int hd, bs, T, nq, nkv, base;
    bool fused, head_scales, ilv, dyn;
    int rot;
    bool scramble; /* slots: random distinct ones, every 7th token -1, tokens 19-34 slots 0-15 (an 8-slot run
                      from the middle of a 16-token chunk) */
} kv_case;

static void run_kv_case(const kv_case *c, int wide) {
    kiln_dtype kvdt = c->kvdt;
    kiln_dtype dt = kvdt == KILN_DTYPE_F16 ? KILN_DTYPE_F16 : KILN_DTYPE_BF16;
    int hd = c->hd, bs = c->bs, T = c->T, nq = c->nq, nkv = c->nkv, nb = (T + 40) / bs + 4, rot = c->rot;
    kiln_kv_layout l;
    size_t cbytes = kiln_kv_layout_init(&l, nb, bs, nkv, hd, kvdt);
    if (kiln_dtype_size(kvdt) == 1) l.k_scale = 0.5f, l.v_scale = 2.0f;
    /* per-head scales (device for the GPU, host for the CPU) */
    float hs[2 * 64];
    if (nkv > 64) {
        KT_CHECKF(false, "kv case with %d KV heads: the per-head scales hold 64", nkv);
        return;
    }
    for (int i = 0; i < 2 * nkv; i++) hs[i] = (const float[]){0.25f, 0.75f, 3.0f, 0.125f}[i % 4];
    kiln_devptr dhs = 0;
    kiln_kv_layout lc = l;
    if (kiln_dtype_size(kvdt) == 1 && c->head_scales) {
        dhs = dupload(hs, sizeof hs);
        l.head_scales = (const void *)(uintptr_t)dhs;
        lc.head_scales = hs;
    }
    int64_t stride = (int64_t)(nq + 2 * nkv) * hd;
    size_t n = (size_t)T * stride;
    float *x = rand_act(n, dt, 1.5f);
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)T), *pos = malloc(sizeof(int32_t) * (size_t)T);
    int32_t *dyn = malloc(sizeof(int32_t) * (size_t)T);
    for (int t = 0; t < T; t++) {
        slots[t] = c->base + t + (t > T / 2 ? bs : 0);
        pos[t] = t;
        dyn[t] = t + 1;
    }
    if (T > 3) slots[2] = -1;
    if (c->scramble) { /* a shuffle of the slots from bs on (the first cache block: the run below) */
        int ns = nb * bs - bs;
        int32_t *perm = malloc(sizeof(int32_t) * (size_t)ns);
        for (int i = 0; i < ns; i++) perm[i] = bs + i;
        for (int i = ns - 1; i > 0; i--) {
            int j = (int)(next_u64() % (uint64_t)(i + 1)), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        for (int t = 0; t < T; t++) slots[t] = t % 7 == 3 ? -1 : perm[t];
        for (int t = 19; t < 35 && t < T; t++) slots[t] = t - 19;
        free(perm);
    }
    void *kc = rand_bytes(cbytes), *vc = rand_bytes(cbytes);
    kiln_devptr dkc = dupload(kc, cbytes), dvc = dupload(vc, cbytes), dx = up_act(x, n, dt),
                ds = dupload(slots, sizeof(int32_t) * (size_t)T), dp = dupload(pos, sizeof(int32_t) * (size_t)T),
                ddyn = dupload(dyn, sizeof(int32_t) * (size_t)T);
    float inv[64], ms = 1;
    make_inv_freq(rot, true, inv, &ms);
    kiln_devptr dinv = dupload(inv, sizeof(float) * (size_t)rot / 2);
    kiln_status launched;
    if (c->fused) {
        kiln_rope_params rp = {hd, rot, c->ilv, inv, ms, c->dyn ? dyn : NULL, 16, 10000.0, 2.0};
        kiln_cpu_rope(x, stride, pos, T, nq, nkv, &rp);
        kiln_gpu_rope_params gp = {hd, rot, c->ilv, dinv, ms, c->dyn ? ddyn : 0, 16, 10000.0f, 2.0f};
        launched = kiln_gpu_rope_kv_write(gpu, st, dx, dt, stride, dp, T, nq, &gp, dkc, dvc, &l, ds);
        /* the CPU writes the bf16-rounded rotated values, like the GPU */
        void *tmp = malloc(n * 2);
        kiln_from_f32(tmp, dt, x, n);
        kiln_to_f32(x, tmp, dt, n);
        free(tmp);
    } else {
        launched = kiln_gpu_kv_write(gpu, st, dkc, dvc, &l, dx + (kiln_devptr)nq * hd * 2,
                                     dx + (kiln_devptr)(nq + nkv) * hd * 2, dt, stride, ds, T);
    }
    KT_CHECKF(launched == KILN_OK, "%s: %s", c->fused ? "rope_kv_write" : "kv_write", kiln_last_error());
    kiln_cpu_kv_write(kc, vc, &lc, x + (size_t)nq * hd, x + (size_t)(nq + nkv) * hd, stride, slots, T);
    void *gk = ddown(dkc, cbytes), *gv = ddown(dvc, cbytes);
    if (!c->fused) {
        KT_CHECKF(!memcmp(gk, kc, cbytes) && !memcmp(gv, vc, cbytes),
                  "kv_write%s %s hd=%d nkv=%d bs=%d T=%d base=%d%s scales=%d: caches differ", elem_pass[wide],
                  kiln_dtype_name(kvdt), hd, nkv, bs, T, c->base, c->scramble ? " scrambled" : "", c->head_scales);
    } else {
        /* rotated k may differ by one rounding step: compare values */
        size_t ne = cbytes / kiln_dtype_size(kvdt);
        float *a1 = malloc(sizeof(float) * ne), *b1 = malloc(sizeof(float) * ne);
        for (size_t i = 0; i < ne; i++) {
            a1[i] = kiln_cpu_kv_read(gk, &l, (int64_t)i, 1.0f);
            b1[i] = kiln_cpu_kv_read(kc, &l, (int64_t)i, 1.0f);
        }
        CHECK_CLOSE(a1, b1, ne, kiln_dtype_size(kvdt) == 1 ? KILN_DTYPE_BF16 : dt,
                    "rope_kv_write%s k %s hd=%d rot=%d ilv=%d dyn=%d nkv=%d bs=%d T=%d base=%d%s", elem_pass[wide],
                    kiln_dtype_name(kvdt), hd, rot, c->ilv, c->dyn, nkv, bs, T, c->base, c->scramble ? " scrambled" : "");
        KT_CHECKF(!memcmp(gv, vc, cbytes), "rope_kv_write%s v %s hd=%d nkv=%d bs=%d T=%d base=%d%s scales=%d",
                  elem_pass[wide], kiln_dtype_name(kvdt), hd, nkv, bs, T, c->base, c->scramble ? " scrambled" : "",
                  c->head_scales);
        float *gq = down_act(dx, n, dt);
        CHECK_CLOSE(gq, x, n, dt, "rope_kv_write%s qkv %s hd=%d rot=%d ilv=%d dyn=%d T=%d", elem_pass[wide],
                    kiln_dtype_name(kvdt), hd, rot, c->ilv, c->dyn, T);
        free(a1), free(b1), free(gq);
    }
    free(x), free(slots), free(pos), free(dyn), free(kc), free(vc), free(gk), free(gv);
    dfree(dkc), dfree(dvc), dfree(dx), dfree(ds), dfree(dp), dfree(ddyn), dfree(dinv);
    if (dhs) dfree(dhs);
}

KT_TEST(test_kv_write_and_fused_rope) {
    NEED_GPU();
    kiln_dtype kvs[] = {KILN_DTYPE_BF16, KILN_DTYPE_F16, KILN_DTYPE_FP8_E5M2, KILN_DTYPE_FP8_E4M3};
    int hds[] = {64, 128}, bss[] = {16, 32}, Ts[] = {1, 37, 300};
    /* prefills of 32 q / 8 KV heads of 128 long enough (by the SM count) that
     * rope_kv_wide.cu's rope rows rotate several q heads a thread: bf16 from
     * slot 0, FP8 E4M3 with per-head scales from slot 3 (value runs across
     * cache blocks), the plain KV write, fp16 interleaved with dynamic NTK */
    const int n_sms = kiln_rt_device_get_info(dev)->n_sms, T_big = 3 * n_sms * 2048 / (32 * 8) + 37;
    const kv_case big[] = {
        {KILN_DTYPE_BF16, 128, 16, T_big, 32, 8, 0, true, false, false, false, 128, false},
        {KILN_DTYPE_FP8_E4M3, 128, 16, T_big, 32, 8, 3, true, true, false, false, 128, false},
        {KILN_DTYPE_BF16, 128, 16, T_big, 32, 8, 0, false, false, false, false, 128, false},
        {KILN_DTYPE_F16, 128, 16, T_big, 32, 8, 0, true, false, true, true, 128, false},
    };
    /* five passes: rope_kv.cu (decode sizes), rope_kv_wide.cu's KV blocks
     * ($KILN_KV_TILE=0), its tiles ($KILN_KV_TILE=1), rope_kv.cu's decode
     * kernel kiln_rope_kv_write_dec (fused cases; $KILN_ROPE_DEC_MAX), the
     * default ($KILN_KV_TILE=2: the plain KV write into a 16-bit cache
     * through its cp.async pipeline, into FP8 through the tiles; rope + KV
     * write through the KV blocks), each forced at every T */
    for (int wide = 0; wide < 5; wide++) {
        int was = kiln_gpu_set_elem_wide_min(gpu, wide == 1 || wide == 2 || wide == 4 ? 1 : 0);
        int was_tile = kiln_gpu_set_kv_tile(gpu, wide == 2 ? 1 : wide == 4 ? 2 : 0);
        int was_dec = kiln_gpu_set_rope_dec_max(gpu, wide == 3 ? 1 << 30 : 0);
        for (int ki = 0; ki < 4; ki++)
            for (int hi = 0; hi < 2; hi++)
                for (int bi = 0; bi < 2; bi++)
                    for (int ti = 0; ti < 3; ti++)
                        for (int fused = 0; fused < 2; fused++) {
                            kv_case c;
                            memset(&c, 0, sizeof c);
                            c.kvdt = kvs[ki], c.hd = hds[hi], c.bs = bss[bi], c.T = Ts[ti], c.nq = 4;
                            /* bs 32: 6 KV heads at hd 64, 12 at hd 128: several key blocks
                             * (KH = 4 heads) and value blocks of rope_kv_wide.cu per token
                             * range, the last one partial; more than one V staging group of
                             * rope_kv.cu in its fused kernel (VT_BUDGET) at hd 128 */
                            c.nkv = bi == 1 ? (hi == 1 ? 12 : 6) : 2;
                            /* a prefill run of contiguous slots, with one skipped and a
                             * jump; T = 300 starts at slot 0 (aligned 8-slot runs: vector
                             * stores of the values), the others anywhere in a block */
                            c.base = ti == 2 ? 0 : (int)(next_u64() % 7);
                            c.fused = fused != 0;
                            /* FP8 with T = 37: per-head scales */
                            c.head_scales = ti == 1;
                            /* fused: fp16 interleaved (GPT-J), bs 32 half the head dims
                             * rotated, FP8 E5M2 with dynamic NTK (past dyn_max 16 from
                             * token 16 on) */
                            c.ilv = fused && kvs[ki] == KILN_DTYPE_F16;
                            c.rot = bi == 1 ? c.hd / 2 : c.hd;
                            c.dyn = fused && kvs[ki] == KILN_DTYPE_FP8_E5M2;
                            run_kv_case(&c, wide);
                        }
        for (size_t i = 0; i < KILN_ARRAY_LEN(big); i++) run_kv_case(&big[i], wide);
        if (wide == 4) {
            /* the pipeline with several units a block (more than its 12 blocks an SM of 16 tokens x
             * 256 / hd heads): 32 KV heads, the last chunk partial; slots from 0 (every unit whole),
             * from 3 (none: the per-token stores), head dim 64 (4 heads a unit), bs 32, fp16 */
            const kv_case pipe[] = {
                {KILN_DTYPE_BF16, 128, 16, 4133, 4, 32, 0, false, false, false, false, 128, false},
                {KILN_DTYPE_F16, 128, 32, 4133, 4, 32, 3, false, false, false, false, 128, false},
                {KILN_DTYPE_BF16, 64, 32, 4133, 4, 32, 0, false, false, false, false, 64, false},
            };
            for (size_t i = 0; i < KILN_ARRAY_LEN(pipe); i++) run_kv_case(&pipe[i], wide);
        }
        /* scrambled slots (see kv_case), 300 tokens (the last chunk of 16
         * partial), 3 KV heads (a tile block of rope_kv_wide.cu has a warp
         * past the heads), every cache dtype, plain and fused */
        for (int ki = 0; ki < 4; ki++)
            for (int fused = 0; fused < 2; fused++) {
                kv_case c;
                memset(&c, 0, sizeof c);
                c.kvdt = kvs[ki], c.hd = 128, c.bs = 16, c.T = 300, c.nq = 4, c.nkv = 3, c.base = 0;
                c.fused = fused != 0, c.head_scales = ki == 3, c.ilv = fused && kvs[ki] == KILN_DTYPE_F16;
                c.rot = 128, c.scramble = true;
                run_kv_case(&c, wide);
            }
        kiln_gpu_set_elem_wide_min(gpu, was);
        kiln_gpu_set_kv_tile(gpu, was_tile);
        kiln_gpu_set_rope_dec_max(gpu, was_dec);
    }
}

/* -------------------------------------------------------------- attention */

typedef struct attn_case {
    kiln_dtype dt;
    kiln_dtype kv; /* 0: dt; FP8: per-head scales (E4M3) or none (E5M2) */
    int hd, nq, nkv, bs, window, force;
    int n_seqs;
    int q_len[8], ctx[8];
    int both; /* prefill: run the current and the first kernel (prefill_v1) against one reference, and bound
                 every output row's error too */
    int graph_ctx; /* > 0: the launch's max_ctx_len (as a decode graph captured for the model's longest
                      context passes it) instead of the longest ctx[] */
} attn_case;

/* worst relative L2 error of one hd-long output row (rows with a tiny
 * reference norm are measured against 1e-3) */
static double worst_row_err(const float *got, const float *ref, size_t rows, int hd) {
    double w = 0;
    for (size_t r = 0; r < rows; r++) {
        double num = 0, den = 0;
        for (int i = 0; i < hd; i++) {
            double d = (double)got[r * hd + i] - ref[r * hd + i];
            num += d * d;
            den += (double)ref[r * hd + i] * ref[r * hd + i];
        }
        double e = sqrt(num / (den > 1e-6 ? den : 1e-6));
        if (!(e <= w)) w = e;
    }
    return w;
}

/* prefill_kernel of run_attention's first pass: 4 (attn_prefill) in the sweeps, whose long contexts would
 * otherwise take attn_prefill_wg2 by default on an H200; test_attention_prefill_wg: 3 (attn_prefill_wg2) */
static int attn_kernel = 4;

static void run_attention(const attn_case *c) {
    kiln_kv_layout l;
    int max_ctx = 0, T = 0, max_q = 0;
    for (int s = 0; s < c->n_seqs; s++) {
        max_ctx = KILN_MAX(max_ctx, c->ctx[s]);
        max_q = KILN_MAX(max_q, c->q_len[s]);
        T += c->q_len[s];
    }
    int max_blocks = (max_ctx + c->bs - 1) / c->bs, nb = max_blocks * c->n_seqs + 3;
    kiln_dtype kvdt = c->kv ? c->kv : c->dt;
    const int launch_ctx = KILN_MAX(max_ctx, c->graph_ctx);
    if (getenv("KT_VERBOSE"))
        fprintf(stderr, "  attention %s kv %s hd=%d nq=%d nkv=%d bs=%d window=%d force=%d seqs=%d max_q=%d max_ctx=%d (launch %d)\n",
                kiln_dtype_name(c->dt), kiln_dtype_name(kvdt), c->hd, c->nq, c->nkv, c->bs, c->window, c->force,
                c->n_seqs, max_q, max_ctx, launch_ctx);
    size_t cbytes = kiln_kv_layout_init(&l, nb, c->bs, c->nkv, c->hd, kvdt);
    size_t ne = cbytes / kiln_dtype_size(kvdt);
    float *kf = NULL, *vf = NULL;
    void *kc = malloc(cbytes), *vc = malloc(cbytes);
    float hs[2 * 16];
    kiln_devptr dhs = 0;
    kiln_kv_layout lc = l; /* the CPU's copy (host scales) */
    if (kiln_dtype_size(kvdt) == 1 && c->nkv > 16) {
        KT_CHECKF(false, "fp8 attention case with %d KV heads: the per-head scales hold 16", c->nkv);
        free(kc), free(vc);
        return;
    }
    if (kiln_dtype_size(kvdt) == 1) {
        /* what a real cache holds: fp8(value / scale) of N(0, 1) values for
         * scales around 1/50 (E4M3) or 1 (E5M2), plus 3% codes drawn from
         * every finite code (extremes, subnormals, zeros of both signs) */
        for (int h = 0; h < c->nkv; h++) {
            hs[h] = kvdt == KILN_DTYPE_FP8_E4M3 ? 0.02f * (1.0f + 0.5f * (float)h) : 1.0f;
            hs[c->nkv + h] = kvdt == KILN_DTYPE_FP8_E4M3 ? 0.03f / (1.0f + 0.25f * (float)h) : 1.0f;
        }
        /* the codes of 65536 gauss() values, made once per case (a conversion
         * per element is too slow for caches of tens of millions of bytes) */
        uint8_t *ctab = malloc(65536);
        for (int i = 0; i < 65536; i++)
            ctab[i] = host_fp8(kvdt, gauss() / (kvdt == KILN_DTYPE_FP8_E4M3 ? 0.025f : 1.0f));
        for (int w = 0; w < 2; w++) {
            uint8_t *cb = w ? vc : kc;
            for (size_t i = 0; i < ne; i++) {
                uint64_t r = next_u64();
                uint8_t code = (uint8_t)(r >> 56);
                float val = (r & 31) == 0 ? host_fp8_val(kvdt, code) : NAN;
                if ((r & 31) == 0 && isfinite(val) && fabsf(val) <= (kvdt == KILN_DTYPE_FP8_E4M3 ? 448.0f : 4096.0f))
                    cb[i] = code;
                else
                    cb[i] = ctab[(r >> 24) & 0xffff];
            }
        }
        free(ctab);
        if (kvdt == KILN_DTYPE_FP8_E4M3) {
            dhs = dupload(hs, sizeof(float) * 2 * (size_t)c->nkv);
            l.head_scales = (const void *)(uintptr_t)dhs;
            lc.head_scales = hs;
        }
    } else {
        kf = rand_act(ne, c->dt, 1.0f), vf = rand_act(ne, c->dt, 1.0f);
        kiln_from_f32(kc, c->dt, kf, ne);
        kiln_from_f32(vc, c->dt, vf, ne);
        lc = l;
    }
    /* shuffled block ids; unused table entries are garbage */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)nb), *bt = malloc(sizeof(int32_t) * (size_t)(max_blocks * c->n_seqs + 1));
    for (int i = 0; i < nb; i++) perm[i] = i;
    for (int i = nb - 1; i > 0; i--) {
        int j = (int)(next_u64() % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int32_t qstart[9] = {0}, ctx_len[8];
    for (int s = 0; s < c->n_seqs; s++) {
        qstart[s + 1] = qstart[s] + c->q_len[s];
        ctx_len[s] = c->ctx[s];
        for (int b = 0; b < max_blocks; b++)
            bt[s * max_blocks + b] = b * c->bs < c->ctx[s] ? perm[s * max_blocks + b] : 0x7fffffff;
    }
    int64_t q_stride = (int64_t)(c->nq + 2 * c->nkv) * c->hd;
    float *q = rand_act((size_t)T * q_stride, c->dt, 1.0f);
    float *ref = malloc(sizeof(float) * (size_t)T * c->nq * c->hd);
    float scale = 1.0f / sqrtf((float)c->hd);
    static kiln_pool *ref_pool; /* the reference on every CPU: caches of up to 8 x 3001 tokens */
    if (!ref_pool && kiln_pool_create(0, &ref_pool) != KILN_OK) ref_pool = NULL;
    kiln_cpu_attention(ref_pool, ref, q, q_stride, kc, vc, &lc, c->nq, qstart, ctx_len, c->n_seqs, bt, max_blocks,
                       scale, c->window);
    kiln_devptr dkc = dupload(kc, cbytes), dvc = dupload(vc, cbytes), dq = up_act(q, (size_t)T * q_stride, c->dt),
                dqs = dupload(qstart, sizeof qstart), dcl = dupload(ctx_len, sizeof ctx_len),
                dbt = dupload(bt, sizeof(int32_t) * (size_t)(max_blocks * c->n_seqs)),
                dout = dmalloc((size_t)T * c->nq * c->hd * 2);
    for (int v1 = 0; v1 < (c->both ? 2 : 1); v1++) {
        const char *which = v1 ? " (prefill v1)" : attn_kernel == 3 ? " (prefill wg2)" : attn_kernel == 5 ? " (prefill wg2p)" : "";
        kiln_gpu_attn a = {dout, dq, q_stride, dkc, dvc, &l, c->nq, dqs, dcl, dbt, c->n_seqs, max_blocks, scale,
                           c->window, max_q, launch_ctx, c->force, v1 ? 1 : attn_kernel, NULL, 0, 0};
        KT_OK(kiln_rt_memset8(dout, 0xff, (size_t)T * c->nq * c->hd * 2, st)); /* NaNs where nothing is written */
        KT_OK(kiln_gpu_attention(gpu, st, c->dt, &a));
        float *got = down_act(dout, (size_t)T * c->nq * c->hd, c->dt);
        CHECK_CLOSE(got, ref, (size_t)T * c->nq * c->hd, c->dt,
                    "attention%s %s kv %s hd=%d nq=%d nkv=%d bs=%d window=%d force=%d seqs=%d launch ctx %d "
                    "(q,ctx)=(%d,%d)(%d,%d)..",
                    which, kiln_dtype_name(c->dt), kiln_dtype_name(kvdt), c->hd, c->nq, c->nkv, c->bs, c->window,
                    c->force, c->n_seqs, launch_ctx, c->q_len[0], c->ctx[0], c->q_len[c->n_seqs - 1],
                    c->ctx[c->n_seqs - 1]);
        if (c->both) {
            double w = worst_row_err(got, ref, (size_t)T * c->nq, c->hd);
            KT_CHECKF(w <= 10 * tol_for(c->dt), "worst row rel err %.3g (tol %.2g)%s hd=%d nq=%d nkv=%d bs=%d window=%d",
                      w, 10 * tol_for(c->dt), which, c->hd, c->nq, c->nkv, c->bs, c->window);
        }
        free(got);
    }
    free(kf), free(vf), free(kc), free(vc), free(perm), free(bt), free(q), free(ref);
    dfree(dkc), dfree(dvc), dfree(dq), dfree(dqs), dfree(dcl), dfree(dbt), dfree(dout);
    if (dhs) dfree(dhs);
}

/* A decode step's rope + KV write handed to the attention (kiln_gpu_attn.rope): the fused kernel
 * (kiln_attn_decode_rope) against kiln_gpu_rope_kv_write followed by the plain attention on copies of the
 * same inputs -- output and both caches bit for bit -- and the output against the CPU (kiln_cpu_rope,
 * kiln_cpu_kv_write, kiln_cpu_attention). Head dims 64 / 128 / 96 fuse, 80 takes the rope kernel in front
 * (as does the persistent-warp kernel when forced, pw = 1); contexts that put the step's token first, last
 * and mid-tile, forced / adaptive splits (the step's tile in a later partition), windows, a skipped slot;
 * pw > 0: the persistent-warp kernel (kiln_attn_decode_pw_rope where an item is a whole KV head and the head
 * dim a multiple of 64, else the rope kernel in front) with pw items a warp. */
static void run_attention_rope(kiln_dtype dt, int hd, int nq, int nkv, int bs, int window, int force, int graph_ctx,
                               int pw, bool skip_slot) {
    int n = 1 + (int)(next_u64() % 8), ctx[8], max_ctx = 0;
    static const int ctxs[] = {1, 15, 16, 17, 33, 100, 1000, 3001};
    for (int i = 0; i < n; i++) ctx[i] = ctxs[next_u64() % 8], max_ctx = KILN_MAX(max_ctx, ctx[i]);
    int max_blocks = (max_ctx + bs - 1) / bs, nb = max_blocks * n + 3;
    kiln_kv_layout l;
    size_t cbytes = kiln_kv_layout_init(&l, nb, bs, nkv, hd, dt), ne = cbytes / 2;
    float *kf = rand_act(ne, dt, 1.0f), *vf = rand_act(ne, dt, 1.0f);
    void *kc = malloc(cbytes), *vc = malloc(cbytes);
    kiln_from_f32(kc, dt, kf, ne), kiln_from_f32(vc, dt, vf, ne);
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)nb), *bt = malloc(sizeof(int32_t) * (size_t)(max_blocks * n));
    for (int i = 0; i < nb; i++) perm[i] = i;
    for (int i = nb - 1; i > 0; i--) {
        int j = (int)(next_u64() % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int32_t qstart[9] = {0}, pos[8], slots[8];
    for (int i = 0; i < n; i++) {
        qstart[i + 1] = i + 1;
        for (int b = 0; b < max_blocks; b++) bt[i * max_blocks + b] = b * bs < ctx[i] ? perm[i * max_blocks + b] : 0x7fffffff;
        pos[i] = ctx[i] - 1;
        slots[i] = bt[i * max_blocks + pos[i] / bs] * bs + pos[i] % bs;
    }
    if (skip_slot) slots[n - 1] = -1; /* not written: both read what the cache held */
    const int64_t stride = (int64_t)(nq + 2 * nkv) * hd + 8;
    float *qkv = rand_act((size_t)n * stride, dt, 1.0f), inv[128], ms = 1.0f;
    make_inv_freq(hd, true, inv, &ms);
    ms = (hd & 32) ? 1.25f : 1.0f; /* an attention factor on some cases */
    /* the CPU: rotate (rounded to dt as the GPU stores it), write, attend */
    float *ref_in = malloc(sizeof(float) * (size_t)n * stride), *ref = malloc(sizeof(float) * (size_t)n * nq * hd);
    memcpy(ref_in, qkv, sizeof(float) * (size_t)n * stride);
    kiln_rope_params crp = {hd, hd, false, inv, ms, NULL, 0, 0, 0};
    kiln_cpu_rope(ref_in, stride, pos, n, nq, nkv, &crp);
    void *tmp = malloc((size_t)n * stride * 2);
    kiln_from_f32(tmp, dt, ref_in, (size_t)n * stride), kiln_to_f32(ref_in, tmp, dt, (size_t)n * stride);
    void *kc_ref = malloc(cbytes), *vc_ref = malloc(cbytes);
    memcpy(kc_ref, kc, cbytes), memcpy(vc_ref, vc, cbytes);
    kiln_cpu_kv_write(kc_ref, vc_ref, &l, ref_in + (size_t)nq * hd, ref_in + (size_t)(nq + nkv) * hd, stride, slots, n);
    float scale = 1.0f / sqrtf((float)hd);
    static kiln_pool *pool;
    if (!pool && kiln_pool_create(0, &pool) != KILN_OK) pool = NULL;
    kiln_cpu_attention(pool, ref, ref_in, stride, kc_ref, vc_ref, &l, nq, qstart, ctx, n, bt, max_blocks, scale, window);
    kiln_devptr dqs = dupload(qstart, sizeof qstart), dcl = dupload(ctx, sizeof(int32_t) * (size_t)n),
                dbt = dupload(bt, sizeof(int32_t) * (size_t)(max_blocks * n)), dpos = dupload(pos, sizeof pos),
                dsl = dupload(slots, sizeof slots), dinv = dupload(inv, sizeof(float) * (size_t)hd / 2);
    kiln_gpu_rope_params grp = {hd, hd, false, dinv, ms, 0, 0, 0, 0};
    const int was_pw = kiln_gpu_set_decode_pw(gpu, pw ? 2 : 0, pw), was_rope = kiln_gpu_set_decode_rope(gpu, 1);
    void *res[2][3]; /* [unfused, fused][out, k cache, v cache] */
    for (int fused = 0; fused < 2; fused++) {
        kiln_devptr dq = up_act(qkv, (size_t)n * stride, dt), dkc = dupload(kc, cbytes), dvc = dupload(vc, cbytes),
                    dout = dmalloc((size_t)n * nq * hd * 2);
        KT_OK(kiln_rt_memset8(dout, 0xff, (size_t)n * nq * hd * 2, st));
        kiln_gpu_attn a = {dout, dq, stride, dkc, dvc, &l, nq, dqs, dcl, dbt, n, max_blocks, scale, window, 1,
                           KILN_MAX(max_ctx, graph_ctx), force, 0, NULL, 0, 0};
        if (fused) a.rope = &grp, a.rope_pos = dpos, a.rope_slots = dsl;
        else KT_OK(kiln_gpu_rope_kv_write(gpu, st, dq, dt, stride, dpos, n, nq, &grp, dkc, dvc, &l, dsl));
        KT_OK(kiln_gpu_attention(gpu, st, dt, &a));
        res[fused][0] = ddown(dout, (size_t)n * nq * hd * 2);
        res[fused][1] = ddown(dkc, cbytes), res[fused][2] = ddown(dvc, cbytes);
        dfree(dq), dfree(dkc), dfree(dvc), dfree(dout);
    }
    kiln_gpu_set_decode_pw(gpu, was_pw, 0), kiln_gpu_set_decode_rope(gpu, was_rope);
    char what[200];
    snprintf(what, sizeof what, "attention + rope %s hd=%d nq=%d nkv=%d bs=%d window=%d force=%d seqs=%d launch ctx %d pw=%d skip=%d",
             kiln_dtype_name(dt), hd, nq, nkv, bs, window, force, n, KILN_MAX(max_ctx, graph_ctx), pw, skip_slot);
    KT_CHECKF(!memcmp(res[0][0], res[1][0], (size_t)n * nq * hd * 2), "%s: the output differs from rope_kv_write + attention", what);
    KT_CHECKF(!memcmp(res[0][1], res[1][1], cbytes), "%s: the key cache differs", what);
    KT_CHECKF(!memcmp(res[0][2], res[1][2], cbytes), "%s: the value cache differs", what);
    float *got = malloc(sizeof(float) * (size_t)n * nq * hd);
    kiln_to_f32(got, res[1][0], dt, (size_t)n * nq * hd);
    CHECK_CLOSE(got, ref, (size_t)n * nq * hd, dt, "%s (against the CPU)", what);
    for (int f = 0; f < 2; f++)
        for (int k = 0; k < 3; k++) free(res[f][k]);
    free(got), free(kf), free(vf), free(kc), free(vc), free(perm), free(bt), free(qkv), free(ref_in), free(ref), free(tmp),
        free(kc_ref), free(vc_ref);
    dfree(dqs), dfree(dcl), dfree(dbt), dfree(dpos), dfree(dsl), dfree(dinv);
}

KT_TEST(test_attention_decode_rope) {
    NEED_GPU();
    static const int hds[] = {64, 128, 96, 80}, gqa[][2] = {{8, 8}, {32, 8}, {32, 4}}, forces[] = {0, -1, 256, 64};
    /* twice over (other random contexts): a missing fence between the step's key / value stores and the
     * tile loads that read them back showed only in some draws (short partitions: the step's tile among
     * a warp's first loads) */
    for (int rep = 0; rep < 2; rep++)
    for (int a = 0; a < 2; a++)
        for (int hi = 0; hi < 4; hi++)
            for (int gi = 0; gi < 3; gi++)
                for (int fi = 0; fi < 4; fi++) {
                    const int bs = hi == 3 ? 32 : 16, w = (fi + gi) % 3 == 2 ? 64 : 0;
                    run_attention_rope(acts[a], hds[hi], gqa[gi][0], gqa[gi][1], bs, w, forces[fi], 0, 0, fi == 1);
                    if (fi == 0) run_attention_rope(acts[a], hds[hi], gqa[gi][0], gqa[gi][1], bs, w, 0, 8192, 0, false);
                    if (fi == 0) /* the persistent-warp kernel, 1 and 3 items a warp */
                        run_attention_rope(acts[a], hds[hi], gqa[gi][0], gqa[gi][1], bs, w, 0, 0, 1 + 2 * rep, a == 1);
                }
    KT_CHECK(kiln_rt_kernels_was_used(kiln_gpu_kernels(gpu), "attn_decode_rope"));
    KT_CHECK(kiln_rt_kernels_was_used(kiln_gpu_kernels(gpu), "attn_decode_pw_rope"));
}

/* Decode attention against the CPU over head dims, GQA ratios, contexts
 * that end mid-block, forced / forbidden / automatic splits and windows. */
static void attention_decode_sweep(void) {
    int hds[] = {64, 128, 72}, gqa[][2] = {{8, 8}, {16, 4}, {32, 4}}, ctxs[] = {1, 15, 16, 17, 100, 1000, 3001};
    int forces[] = {0, -1, 256, 64};
    for (int a = 0; a < 2; a++)
        for (int hi = 0; hi < 3; hi++)
            for (int gi = 0; gi < 3; gi++)
                for (int fi = 0; fi < 4; fi++)
                    for (int w = 0; w < 2; w++) {
                        attn_case c = {acts[a], 0, hds[hi], gqa[gi][0], gqa[gi][1], hi == 2 ? 32 : 16, w ? 64 : 0,
                                       forces[fi], 0, {0}, {0}, 0, 0};
                        c.n_seqs = 1 + (int)(next_u64() % 8);
                        for (int s = 0; s < c.n_seqs; s++) {
                            c.q_len[s] = 1;
                            c.ctx[s] = ctxs[next_u64() % 7];
                        }
                        c.ctx[0] = ctxs[(hi * 3 + gi + fi) % 7];
                        run_attention(&c);
                        /* as a decode graph launches it: max_ctx_len the model's (8192), the contexts
                         * short (small batches split each context adaptively: ops_gpu.c decode_partition) */
                        if (fi == 0) {
                            c.graph_ctx = 8192;
                            run_attention(&c);
                        }
                    }
}


/* (with the split's partitions combined by kiln_attn_reduce at every batch size; the default fuses the
 * combination into the attention kernel for the fixed-partition split of 16-bit caches, which
 * test_attention_decode_fused covers at every batch size) */
KT_TEST(test_attention_decode) {
    NEED_GPU();
    const int was = kiln_gpu_set_decode_fused_reduce(gpu, 0);
    attention_decode_sweep();
    kiln_gpu_set_decode_fused_reduce(gpu, was);
}

/* The same with 2 warps a decode block ($KILN_DECODE_WARPS=2: half the
 * shared memory, twice the blocks resident), 16-bit caches. */
KT_TEST(test_attention_decode_2warps) {
    NEED_GPU();
    int was = kiln_gpu_set_decode_warps(gpu, 2);
    attention_decode_sweep();
    kiln_gpu_set_decode_warps(gpu, was);
}

/* The same through the persistent-warp kernel (kiln_attn_decode_pw, wherever no split is planned) with 1, 3
 * and 32 items (sequence x KV group) a warp: a warp's ring streams from one item into the next (its query
 * rows riding with the item's first tile), an item's tiles start after the window's start, items of a
 * single tile follow each other. */
KT_TEST(test_attention_decode_pw) {
    NEED_GPU();
    const int ks[] = {1, 3, 32};
    int was = 0;
    for (int i = 0; i < 3; i++) {
        const int w = kiln_gpu_set_decode_pw(gpu, 2, ks[i]);
        if (i == 0) was = w;
        attention_decode_sweep();
    }
    kiln_gpu_set_decode_pw(gpu, was, 0);
}

/* The same with the split's partitions combined by the attention kernel's last block of each (sequence, KV
 * group) ($KILN_DECODE_FUSED_REDUCE=1: arrival counters, no kiln_attn_reduce launch), over 16-bit caches with
 * 4 and 2 warps and over FP8 caches; every case reuses the counters the previous one left (they must be
 * back at zero, or some group never combines and its output stays NaN). */
KT_TEST(test_attention_decode_fused) {
    NEED_GPU();
    const int was = kiln_gpu_set_decode_fused_reduce(gpu, 1);
    attention_decode_sweep();
    const int ww = kiln_gpu_set_decode_warps(gpu, 2);
    attention_decode_sweep();
    kiln_gpu_set_decode_warps(gpu, ww);
    kiln_dtype kvs[] = {KILN_DTYPE_FP8_E4M3, KILN_DTYPE_FP8_E5M2};
    int ctxs[] = {1, 15, 16, 17, 100, 1000, 3001}, forces[] = {0, 256, 64};
    for (int k = 0; k < 2; k++)
        for (int gi = 0; gi < 2; gi++)
            for (int fi = 0; fi < 3; fi++) {
                attn_case c = {acts[(k + gi) & 1], kvs[k], 128, 32, gi ? 2 : 8, 16, fi == 2 ? 64 : 0, forces[fi], 0,
                               {0}, {0}, 0, 0};
                c.n_seqs = 1 + (int)(next_u64() % 8);
                for (int s = 0; s < c.n_seqs; s++) c.q_len[s] = 1, c.ctx[s] = ctxs[next_u64() % 7];
                c.ctx[0] = 3001;
                run_attention(&c);
                run_attention(&c); /* the same launch again: the counters it left */
            }
    kiln_gpu_set_decode_fused_reduce(gpu, was);
}

KT_TEST(test_attention_prefill) {
    NEED_GPU();
    int hds[] = {64, 128, 72}, gqa[][2] = {{8, 8}, {16, 4}, {32, 4}};
    for (int a = 0; a < 2; a++)
        for (int hi = 0; hi < 3; hi++)
            for (int gi = 0; gi < 3; gi++)
                for (int w = 0; w < 2; w++) {
                    attn_case c = {acts[a], 0, hds[hi], gqa[gi][0], gqa[gi][1], hi == 2 ? 32 : 16, w ? 100 : 0, 0, 0,
                                   {0}, {0}, 1, 0};
                    c.n_seqs = 1 + (int)(next_u64() % 6);
                    for (int s = 0; s < c.n_seqs; s++) {
                        c.q_len[s] = 1 + (int)(next_u64() % 300);
                        c.ctx[s] = c.q_len[s] + (s % 2 ? (int)(next_u64() % 400) : 0); /* cached prefix on odd seqs */
                    }
                    run_attention(&c);
                }
}

/* One prefill case of a shape sweep: up to 3 sequences of up to 700 prompt
 * tokens, cached prefixes on alternate sequences (by i), the first prompt
 * over several 128-row blocks; edge: a prompt of 512 on 256 cached tokens
 * (query tiles and KV tiles end together). */
static void run_prefill_shape(kiln_dtype act, int hd, int nq, int nkv, int bs, int window, int i, bool edge) {
    attn_case c = {act, 0, hd, nq, nkv, bs, window, 0, 0, {0}, {0}, 1, 0};
    c.n_seqs = 1 + (int)(next_u64() % 3);
    for (int s = 0; s < c.n_seqs; s++) {
        c.q_len[s] = 1 + (int)(next_u64() % 700);
        c.ctx[s] = c.q_len[s] + ((s + i) % 2 ? (int)(next_u64() % 900) : 0);
    }
    c.q_len[0] = 300 + (int)(next_u64() % 500); /* several 128-row blocks */
    c.ctx[0] = c.q_len[0] + (i % 3 == 1 ? 0 : (int)(next_u64() % 1000));
    if (edge) c.q_len[0] = 512, c.ctx[0] = 768;
    run_attention(&c);
}

/* Prefill shapes for the paths of kernel_src/attn_prefill.cu: head dims
 * whose Q / K rows are padded instead of swizzled (16, 32, 96), 120 (K
 * zero-padded to 128, an odd last 8-dim tile of V), GROUP 2 / 4 / 16 (an
 * m16 tile spanning two heads), block sizes 8, 24 (tiles straddling blocks
 * mid-block) and 64, prompts over several 128-row blocks with and without
 * cached prefixes, windows; each case on both prefill kernels. */
KT_TEST(test_attention_prefill_shapes) {
    NEED_GPU();
    struct {
        int hd, nq, nkv, bs, window;
    } sh[] = {{16, 4, 4, 16, 0},  {32, 8, 4, 8, 0},    {96, 16, 8, 24, 0},  {120, 8, 2, 64, 0},
              {128, 32, 2, 16, 0}, {64, 32, 2, 32, 37}, {128, 8, 8, 16, 300}, {64, 4, 1, 16, 0},
              {128, 8, 2, 16, 0},  {72, 16, 2, 8, 129}};
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < (int)(sizeof sh / sizeof sh[0]); i++)
            run_prefill_shape(acts[a], sh[i].hd, sh[i].nq, sh[i].nkv, sh[i].bs, sh[i].window, i, false);
}

/* the device runs the sm_90a kernels (compute capability 9.0) */
static bool sm90_device(void) {
    const kiln_rt_device_info *di = kiln_rt_device_get_info(dev);
    return di->cc_major == 9 && di->cc_minor == 0;
}

/* The wgmma prefill kernel (kernel_src/attn_prefill_wg.cu's warp-specialized
 * kiln_attn_prefill_wg2, sm_90 only: $KILN_PREFILL_KERNEL=wg2, prefill_kernel
 * 3) against the CPU and the first kernel: the sweep
 * of test_attention_prefill at head dims 64 and 128 (prompts and chunks
 * continuing cached context that end mid-block, GQA 1 / 4 / 8, windows),
 * then longer prompts over several 128-row blocks and 128-token KV tiles:
 * GROUP 2 / 16, block sizes 8, 32 and 64, windows, a context ending exactly
 * on a tile edge; both activation dtypes, outputs poisoned with NaNs. All
 * of it twice: kiln_attn_prefill_wg2, then its persistent form
 * kiln_attn_prefill_wg2p (prefill_kernel 5: one block an SM walking the
 * work items, fewer and more items than SMs). */
KT_TEST(test_attention_prefill_wg) {
    NEED_GPU();
    const kiln_rt_device_info *di = kiln_rt_device_get_info(dev);
    if (!sm90_device()) KT_SKIP("attn_prefill_wg2 needs sm_90 (this GPU is %s)", di->arch);
    for (attn_kernel = 3; attn_kernel <= 5; attn_kernel += 2) { /* wg2, then its persistent form (wg2p) */
        int hds[] = {64, 128}, gqa[][2] = {{8, 8}, {16, 4}, {32, 4}};
        for (int a = 0; a < 2; a++)
            for (int hi = 0; hi < 2; hi++)
                for (int gi = 0; gi < 3; gi++)
                    for (int w = 0; w < 2; w++) {
                        attn_case c = {acts[a], 0, hds[hi], gqa[gi][0], gqa[gi][1], 16, w ? 100 : 0, 0, 0, {0}, {0}, 1, 0};
                        c.n_seqs = 1 + (int)(next_u64() % 6);
                        for (int s = 0; s < c.n_seqs; s++) {
                            c.q_len[s] = 1 + (int)(next_u64() % 300);
                            c.ctx[s] = c.q_len[s] + (s % 2 ? (int)(next_u64() % 400) : 0); /* cached prefix on odd seqs */
                        }
                        run_attention(&c);
                    }
        struct {
            int hd, nq, nkv, bs, window;
        } sh[] = {{128, 32, 2, 16, 0}, {64, 32, 2, 32, 37}, {128, 8, 8, 16, 300}, {64, 4, 1, 16, 0},
                  {128, 8, 4, 8, 0},   {64, 16, 8, 64, 129}, {128, 32, 8, 32, 0}, {128, 16, 16, 16, 1000}};
        for (int a = 0; a < 2; a++)
            for (int i = 0; i < (int)(sizeof sh / sizeof sh[0]); i++) /* i == 6: tiles and blocks end together */
                run_prefill_shape(acts[a], sh[i].hd, sh[i].nq, sh[i].nkv, sh[i].bs, sh[i].window, i, i == 6);
        /* long enough that wg2's three stages are each reused several times (11 KV tiles), and one KV
         * tile in all (one stage, no loop) */
        for (int i = 0; i < 2; i++) {
            attn_case c = {acts[i], 0, 128, 32, 8, 16, 0, 0, 0, {0}, {0}, 1, 0};
            c.n_seqs = 2;
            c.q_len[0] = i ? 1300 : 70, c.ctx[0] = i ? 1400 : 100;
            c.q_len[1] = i ? 37 : 128, c.ctx[1] = i ? 1337 : 128;
            run_attention(&c);
        }
    }
    attn_kernel = 4;
}

/* Attention over FP8 caches: decode (one pass, split-K forced and by
 * heuristic), prefill with cached prefixes, both activation dtypes, head
 * dims 16 / 64 / 128, GQA groups 1..8 (16 and every decode pipeline depth
 * at head dim 128), block sizes 16 and 32, windows. */
KT_TEST(test_attention_fp8) {
    NEED_GPU();
    kiln_dtype kvs[] = {KILN_DTYPE_FP8_E4M3, KILN_DTYPE_FP8_E5M2};
    int hds[] = {64, 128, 16}, gqa[][2] = {{8, 8}, {16, 4}, {32, 4}, {16, 2}};
    int ctxs[] = {1, 15, 16, 17, 100, 1000, 3001}, forces[] = {0, -1, 256};
    for (int k = 0; k < 2; k++)
        for (int a = 0; a < 2; a++)
            for (int hi = 0; hi < 3; hi++)
                for (int gi = 0; gi < 4; gi++) {
                    for (int fi = 0; fi < 3; fi++) { /* decode */
                        attn_case c = {acts[a], kvs[k], hds[hi], gqa[gi][0], gqa[gi][1], (gi & 1) ? 32 : 16,
                                       (fi == 1) ? 64 : 0, forces[fi], 0, {0}, {0}, 0, 0};
                        c.n_seqs = 1 + (int)(next_u64() % 8);
                        for (int s = 0; s < c.n_seqs; s++) c.q_len[s] = 1, c.ctx[s] = ctxs[next_u64() % 7];
                        c.ctx[0] = ctxs[(hi * 3 + gi + fi + k) % 7];
                        run_attention(&c);
                    }
                    for (int w = 0; w < 2; w++) { /* prefill over cached context */
                        attn_case c = {acts[a], kvs[k], hds[hi], gqa[gi][0], gqa[gi][1], (gi & 1) ? 16 : 32,
                                       w ? 100 : 0, 0, 0, {0}, {0}, 0, 0};
                        c.n_seqs = 1 + (int)(next_u64() % 6);
                        for (int s = 0; s < c.n_seqs; s++) {
                            c.q_len[s] = 1 + (int)(next_u64() % 300);
                            c.ctx[s] = c.q_len[s] + (s % 2 ? (int)(next_u64() % 400) : 0);
                        }
                        run_attention(&c);
                    }
                }
    /* FP8 decode at every pipeline depth ($KILN_DECODE_STAGES: 4 to 8 tile
     * slots a warp, out-of-range values clamped), GROUP 16 (two 8-head column
     * tiles of the swapped MMAs) and 8, one pass, split-K forced and by
     * heuristic, contexts ending mid-tile */
    {
        const char *was = getenv("KILN_DECODE_STAGES");
        char *saved = was ? strdup(was) : NULL;
        const char *depths[] = {"4", "5", "6", "7", "8", "3", "99"};
        for (int di = 0; di < 7; di++) {
            setenv("KILN_DECODE_STAGES", depths[di], 1);
            for (int k = 0; k < 2; k++) {
                attn_case c = {acts[(di + k) & 1], kvs[k], 128, 32, (di + k) % 2 ? 2 : 4, 16, di == 2 ? 64 : 0,
                               di % 3 == 1 ? 256 : 0, 0, {0}, {0}, 0, 0};
                c.n_seqs = 1 + (int)(next_u64() % 8);
                for (int s = 0; s < c.n_seqs; s++) c.q_len[s] = 1, c.ctx[s] = ctxs[next_u64() % 7];
                c.ctx[0] = 3001 - di;
                run_attention(&c);
            }
        }
        if (saved) setenv("KILN_DECODE_STAGES", saved, 1);
        else unsetenv("KILN_DECODE_STAGES");
        free(saved);
    }
    /* E5M2 with no scales at all (NULL head_scales, k_scale = v_scale = 1) is
     * accepted; E4M3 with host-only scalar scales is refused (the kernels read
     * scales from the device) */
    kiln_kv_layout l;
    kiln_kv_layout_init(&l, 4, 16, 2, 64, KILN_DTYPE_FP8_E4M3);
    l.k_scale = 0.5f;
    kiln_gpu_attn at = {0};
    at.l = &l, at.nq = 2, at.n_seqs = 1, at.max_q_len = 1, at.max_ctx_len = 1;
    KT_ERR(kiln_gpu_attention(gpu, st, KILN_DTYPE_BF16, &at), KILN_ERR_INVALID_ARGUMENT, "head_scales");
}

/* --------------------------------------------------------------- sampling */

static int kt_cmp_desc(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* Sampler semantics in double, used only to measure how close a choice is
 * to a boundary (the margin) when the GPU and the CPU sampler disagree. */
static int ref_sample(const float *logits, int V, const kiln_gpu_sample_params *p, float *margin) {
    *margin = INFINITY;
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (p->temperature <= 0) return best;
    double *e = malloc(sizeof(double) * (size_t)V), Z = 0;
    float inv_t = 1.0f / p->temperature, mx = logits[best] * inv_t;
    for (int i = 0; i < V; i++) {
        e[i] = expf(logits[i] * inv_t - mx);
        Z += e[i];
    }
    double t = 0;
    double *srt = malloc(sizeof(double) * (size_t)V);
    memcpy(srt, e, sizeof(double) * (size_t)V);
    qsort(srt, (size_t)V, sizeof(double), kt_cmp_desc);
    if (p->top_k > 0 && p->top_k < V) t = fmax(t, srt[p->top_k - 1]);
    if (p->top_p > 0 && p->top_p < 1) {
        double acc = 0;
        for (int i = 0; i < V; i++) {
            acc += srt[i];
            if (acc >= p->top_p * Z) {
                t = fmax(t, srt[i]);
                break;
            }
        }
    }
    if (p->min_p > 0) t = fmax(t, p->min_p);
    double kept = 0;
    for (int i = 0; i < V; i++)
        if (e[i] >= t) kept += e[i];
    uint32_t r[4];
    kiln_philox4x32(p->seed, p->step, 0, r);
    double target = kiln_u32_to_unit(r[0]) * kept, acc = 0;
    int tok = -1;
    for (int i = 0; i < V; i++)
        if (e[i] >= t) {
            acc += e[i];
            if (acc > target) {
                tok = i;
                *margin = (float)(fmin(acc - target, target - (acc - e[i])) / kept);
                break;
            }
        }
    free(e), free(srt);
    return tok;
}
KT_TEST(test_sampling) {
    NEED_GPU();
    /* 1003: rows not 16-byte aligned (kiln_sample's scalar path) */
    int Vs[] = {1000, 1003, 131072};
    for (int vi = 0; vi < 3; vi++) {
        int V = Vs[vi], R = 24;
        float *logits = malloc(sizeof(float) * (size_t)V * R);
        kiln_gpu_sample_params prm[24];
        memset(prm, 0, sizeof prm);
        for (int r = 0; r < R; r++) {
            float sc = 1.0f + (float)(r % 4);
            for (int i = 0; i < V; i++) logits[(size_t)r * V + i] = gauss() * sc;
            kiln_gpu_sample_params *p = &prm[r];
            p->temperature = r % 6 == 0 ? 0.0f : 0.3f + 0.2f * (float)(r % 5);
            p->top_p = r % 3 == 0 ? 1.0f : 0.5f + 0.1f * (float)(r % 5);
            p->top_k = r % 4 == 1 ? 0 : 1 + (int)(next_u64() % 200);
            p->min_p = r % 5 == 2 ? 0.05f : 0.0f;
            p->repetition = r % 2 ? 1.3f : 1.0f;
            p->presence = r % 3 == 1 ? 0.5f : 0.0f;
            p->frequency = r % 3 == 2 ? 0.25f : 0.0f;
            p->seed = next_u64();
            p->step = (uint64_t)r * 7;
        }
        if (V > 1000) logits[5 * V + 77] = logits[5 * V + 78] = 1e4f; /* greedy tie: the lower index wins */
        /* penalties: prompt and output ids with duplicates and one out of range */
        int32_t poff[25] = {0}, ooff[25] = {0}, boff[25] = {0};
        int32_t pids[24 * 20], oids[24 * 20], bids[24 * 2];
        int np = 0, no = 0, nbn = 0;
        for (int r = 0; r < R; r++) {
            for (int k = 0; k < 12; k++) pids[np++] = (int32_t)(next_u64() % 50);
            pids[np++] = -3;
            for (int k = 0; k < 15; k++) oids[no++] = (int32_t)(next_u64() % 60);
            bids[nbn++] = (int32_t)(next_u64() % V);
            poff[r + 1] = np, ooff[r + 1] = no, boff[r + 1] = nbn;
        }
        float *ref = malloc(sizeof(float) * (size_t)V * R);
        memcpy(ref, logits, sizeof(float) * (size_t)V * R);
        int32_t *scratch = calloc((size_t)V, sizeof(int32_t));
        for (int r = 0; r < R; r++) {
            float *l = ref + (size_t)r * V;
            kiln_sampler_apply_penalties(l, V, pids + poff[r], poff[r + 1] - poff[r], oids + ooff[r],
                                         ooff[r + 1] - ooff[r], prm[r].repetition, prm[r].presence, prm[r].frequency,
                                         scratch);
            for (int i = boff[r]; i < boff[r + 1]; i++) l[bids[i]] = -INFINITY;
        }
        free(scratch);
        kiln_devptr dl = dupload(logits, sizeof(float) * (size_t)V * R), dp = dupload(prm, sizeof prm),
                    dpi = dupload(pids, sizeof(int32_t) * (size_t)np), dpo = dupload(poff, sizeof poff),
                    doi = dupload(oids, sizeof(int32_t) * (size_t)no), doo = dupload(ooff, sizeof ooff),
                    dbi = dupload(bids, sizeof(int32_t) * (size_t)nbn), dbo = dupload(boff, sizeof boff),
                    dtok = dmalloc(4 * (size_t)R), dlp = dmalloc(4 * (size_t)R);
        KT_OK(kiln_gpu_sample_penalties(gpu, st, dl, R, V, dp, dpi, dpo, doi, doo, dbi, dbo));
        float *gl = ddown(dl, sizeof(float) * (size_t)V * R);
        KT_CHECKF(!memcmp(gl, ref, sizeof(float) * (size_t)V * R), "penalties differ (V=%d)", V);
        KT_OK(kiln_gpu_sample(gpu, st, dtok, dlp, dl, R, V, dp));
        int32_t *tok = ddown(dtok, 4 * (size_t)R);
        float *lp = ddown(dlp, 4 * (size_t)R);
        int mismatches = 0;
        for (int r = 0; r < R; r++) {
            float margin;
            (void)ref_sample(ref + (size_t)r * V, V, &prm[r], &margin);
            /* the CPU sampler (engine/sampler.c) is the reference */
            kiln_sample_row row = {prm[r].temperature, prm[r].top_p, prm[r].top_k, prm[r].min_p, prm[r].seed,
                                   prm[r].step};
            float *lr = malloc(sizeof(float) * (size_t)V);
            void *work = malloc(kiln_sampler_work_bytes(V));
            memcpy(lr, ref + (size_t)r * V, sizeof(float) * (size_t)V);
            int want = kiln_sampler_sample(lr, V, &row, work);
            free(lr), free(work);
            if (tok[r] != want) {
                /* only a choice within rounding of a boundary may differ */
                KT_CHECKF(margin < 1e-5f, "row %d V=%d: GPU token %d, CPU %d (margin %.3g, T=%.2f k=%d p=%.2f minp=%.2f)",
                          r, V, tok[r], want, margin, prm[r].temperature, prm[r].top_k, prm[r].top_p, prm[r].min_p);
                mismatches++;
            }
            if (prm[r].temperature == 0) KT_CHECK(tok[r] == want);
            double mx = -INFINITY, sum = 0;
            const float *l = ref + (size_t)r * V;
            for (int i = 0; i < V; i++) mx = fmax(mx, l[i]);
            for (int i = 0; i < V; i++) sum += exp(l[i] - mx);
            double want_lp = l[tok[r]] - mx - log(sum);
            KT_CHECKF(fabs(lp[r] - want_lp) < 1e-3 + 1e-4 * fabs(want_lp), "row %d logprob %f vs %f", r, lp[r],
                      want_lp);
        }
        if (V > 1000 && prm[5].temperature == 0) KT_CHECK(tok[5] == 77);
        KT_CHECK(mismatches <= 1);
        /* determinism: same inputs, same tokens */
        kiln_rt_memcpy_htod(dl, ref, sizeof(float) * (size_t)V * R, NULL);
        KT_OK(kiln_gpu_sample(gpu, st, dtok, 0, dl, R, V, dp));
        int32_t *tok2 = ddown(dtok, 4 * (size_t)R);
        KT_CHECK(!memcmp(tok, tok2, 4 * (size_t)R));
        free(logits), free(ref), free(gl), free(tok), free(lp), free(tok2);
        dfree(dl), dfree(dp), dfree(dpi), dfree(dpo), dfree(doi), dfree(doo), dfree(dbi), dfree(dbo), dfree(dtok),
            dfree(dlp);
    }
}

/* Greedy rows through kiln_gpu_sample_greedy: the cluster kernel
 * (kernel_src/sample_argmax.cu) at every cluster size (1 runs on any GPU;
 * 2 / 4 / 8 on sm_90, kiln_sample before) and the general kernel (0) against
 * the CPU sampler and a double-precision argmax / log-softmax: the same
 * tokens (ties: the lowest index), logprobs within fp32 rounding of
 * kiln_sample's, the same bits on a second run. */
KT_TEST(test_sampling_greedy) {
    NEED_GPU();
    /* 1003: rows not 16-byte aligned (scalar loads); 128256: Llama 3's vocabulary */
    const int Vs[] = {1000, 1003, 131072, 128256};
    /* KILN_SAMPLE_CLUSTER_AUTO: the split kernel, as KILN_SAMPLE_CLUSTER_SPLIT */
    const int cls[] = {0, 1, 2, 4, 8, KILN_SAMPLE_CLUSTER_AUTO, KILN_SAMPLE_CLUSTER_SPLIT};
    const int was = kiln_gpu_set_sample_cluster(gpu, 8);
    fprintf(stderr, "  greedy sampling: cluster of %d on this GPU (0: kiln_sample)\n", kiln_gpu_sample_cluster(gpu, 1));
    for (int vi = 0; vi < 4; vi++) {
        const int V = Vs[vi], R = 40;
        float *logits = malloc(sizeof(float) * (size_t)V * R);
        kiln_gpu_sample_params prm[40];
        memset(prm, 0, sizeof prm);
        for (int r = 0; r < R; r++) {
            float sc = 1.0f + (float)(r % 4);
            float *l = logits + (size_t)r * V;
            for (int i = 0; i < V; i++) l[i] = gauss() * sc;
            prm[r].temperature = r % 3 ? 0.0f : -1.0f; /* both greedy */
            prm[r].top_k = (int)(next_u64() % 100), prm[r].top_p = 0.9f, prm[r].repetition = 1.0f;
            prm[r].seed = next_u64();
        }
        /* ties: adjacent, across chunks, first and last index, all equal; -inf (bans) */
        float *l;
        l = logits + 1 * (size_t)V, l[77] = l[78] = 1e4f;
        l = logits + 2 * (size_t)V, l[V / 4] = l[V / 2] = l[3 * V / 4] = l[V - 1] = 1e4f;
        l = logits + 3 * (size_t)V, l[V - 1] = 1e4f;
        l = logits + 4 * (size_t)V, l[0] = 1e4f;
        l = logits + 5 * (size_t)V, l[0] = l[V - 1] = 1e4f;
        l = logits + 6 * (size_t)V;
        for (int i = 0; i < V; i++) l[i] = 0.5f;
        l = logits + 7 * (size_t)V;
        for (int i = 0; i < V; i += 3) l[i] = -INFINITY;
        l = logits + 8 * (size_t)V;
        for (int i = 0; i < V; i++) l[i] = i == V / 3 ? 2.0f : -INFINITY;
        l = logits + 9 * (size_t)V; /* a tie at every chunk start of every cluster size */
        for (int c = 2; c <= 8; c *= 2)
            for (int k = 1; k < c; k++) l[(((V + 3) / 4 + c - 1) / c) * 4 * k] = 1e4f;
        l = logits + 10 * (size_t)V; /* a tie at every chunk start of the split kernel (4096 logits) */
        for (int i = 4096; i < V; i += 4096) l[i] = 1e4f;
        int32_t want[40];
        double want_lp[40];
        void *work = malloc(kiln_sampler_work_bytes(V));
        float *lr = malloc(sizeof(float) * (size_t)V);
        for (int r = 0; r < R; r++) {
            const float *lw = logits + (size_t)r * V;
            memcpy(lr, lw, sizeof(float) * (size_t)V);
            kiln_sample_row row = {0.0f, 1.0f, 0, 0.0f, prm[r].seed, 0};
            want[r] = kiln_sampler_sample(lr, V, &row, work);
            int best = 0;
            for (int i = 1; i < V; i++)
                if (lw[i] > lw[best]) best = i;
            KT_CHECKF(best == want[r], "row %d V=%d: CPU sampler %d, argmax %d", r, V, want[r], best);
            double mx = lw[best], sum = 0;
            for (int i = 0; i < V; i++) sum += exp((double)lw[i] - mx);
            want_lp[r] = lw[want[r]] - mx - log(sum);
        }
        free(work), free(lr);
        KT_CHECK(want[1] == 77 && want[2] == V / 4 && want[3] == V - 1 && want[4] == 0 && want[5] == 0 &&
                 want[6] == 0 && want[8] == V / 3);
        /* the rows from one float in: a base not 16-byte aligned (scalar loads at every V) */
        kiln_devptr dl = dmalloc(sizeof(float) * ((size_t)V * R + 4)), dp = dupload(prm, sizeof prm),
                    dtok = dmalloc(4 * (size_t)R), dlp = dmalloc(4 * (size_t)R);
        float *ref_lp = NULL;
        for (int shift = 0; shift < 2; shift++) {
            kiln_devptr dls = dl + (kiln_devptr)(4 * shift);
            KT_OK(kiln_rt_memcpy_htod(dls, logits, sizeof(float) * (size_t)V * R, NULL));
            for (int ci = 0; ci < 7; ci++) {
                kiln_gpu_set_sample_cluster(gpu, cls[ci]);
                const int nrs[] = {1, 24, R}; /* one row, some, every row */
                for (int ni = 0; ni < 3; ni++) {
                    const int nr = nrs[ni];
                    KT_OK(kiln_rt_memset8(dtok, 0xff, 4 * (size_t)R, NULL));
                    KT_OK(kiln_gpu_sample_greedy(gpu, st, dtok, dlp, dls, nr, V, dp));
                    int32_t *tok = ddown(dtok, 4 * (size_t)R);
                    float *lp = ddown(dlp, 4 * (size_t)R);
                    for (int r = 0; r < nr; r++) {
                        KT_CHECKF(tok[r] == want[r], "V=%d cluster %d shift %d row %d: token %d, CPU %d", V, cls[ci],
                                  shift, r, tok[r], want[r]);
                        if (r == 6 || r == 7 || r == 8 || r == 2 || r == 1 || r == 3 || r == 4 || r == 5 || r == 9) {
                            KT_CHECKF(fabs(lp[r] - want_lp[r]) < 1e-5 + 1e-6 * fabs(want_lp[r]),
                                      "V=%d cluster %d row %d: logprob %.9g vs %.9g", V, cls[ci], r, lp[r], want_lp[r]);
                        } else {
                            KT_CHECKF(fabs(lp[r] - want_lp[r]) < 1e-4 + 1e-5 * fabs(want_lp[r]),
                                      "V=%d cluster %d row %d: logprob %.9g vs %.9g", V, cls[ci], r, lp[r], want_lp[r]);
                        }
                        /* within fp32 rounding of kiln_sample's */
                        if (ref_lp && nr == R)
                            KT_CHECKF(fabsf(lp[r] - ref_lp[r]) <= 4e-6f * fmaxf(1.0f, fabsf(ref_lp[r])),
                                      "V=%d cluster %d row %d: logprob %.9g, kiln_sample's %.9g", V, cls[ci], r, lp[r],
                                      ref_lp[r]);
                    }
                    if (nr == R && ci == 0 && shift == 0) ref_lp = lp, lp = NULL;
                    if (nr == R) {
                        /* determinism, and tokens alone */
                        KT_OK(kiln_gpu_sample_greedy(gpu, st, dtok, dlp, dls, nr, V, dp));
                        int32_t *tok2 = ddown(dtok, 4 * (size_t)R);
                        float *lp2 = ddown(dlp, 4 * (size_t)R);
                        KT_CHECK(!memcmp(tok, tok2, 4 * (size_t)nr));
                        KT_CHECK(!memcmp(lp ? lp : ref_lp, lp2, 4 * (size_t)nr));
                        KT_OK(kiln_rt_memset8(dtok, 0xff, 4 * (size_t)R, NULL));
                        KT_OK(kiln_gpu_sample_greedy(gpu, st, dtok, 0, dls, nr, V, dp));
                        free(tok2);
                        tok2 = ddown(dtok, 4 * (size_t)R);
                        KT_CHECK(!memcmp(tok, tok2, 4 * (size_t)nr));
                        free(tok2), free(lp2);
                    }
                    free(tok), free(lp);
                }
            }
        }
        free(ref_lp), free(logits);
        dfree(dl), dfree(dp), dfree(dtok), dfree(dlp);
    }
    kiln_gpu_set_sample_cluster(gpu, was);
    KT_CHECK(kiln_rt_check_device(dev) == KILN_OK);
}

/* ------------------------------------------------------- GEMM and graphs */

static bool gemv_tested; /* test_gemv runs it on its own kiln_gpu */

/* One case of the gate/up GEMM with the SiLU-and-mul epilogue
 * (kiln_gpu_gemm_silu on gv: the GEMV's or gemm_sk's) against the CPU:
 * x [M, K] @ W [2I, K]^T (+ bias) then silu_mul, out [M, I] at row stride
 * I + 3; with pair, also bit for bit against the same GEMM's plain output
 * followed by kiln_gpu_silu_mul. what names the kernel's tiling. */
static void silu_gemm_case(kiln_gpu *gv, kiln_dtype dt, int M, int I, int K, bool bias, bool pair, const char *what) {
    const int N = 2 * I, ldo = I + 3;
    float *x = rand_act((size_t)M * K, dt, 1), *w = rand_act((size_t)N * K, dt, 0.05f), *b = rand_act((size_t)N, dt, 1),
          *gu = malloc(sizeof(float) * (size_t)M * N), *ref = calloc((size_t)M * ldo, sizeof(float));
    kiln_cpu_gemm(NULL, gu, N, x, w, KILN_DTYPE_F32, bias ? b : NULL, KILN_DTYPE_F32, M, N, K);
    for (int m = 0; m < M; m++) kiln_cpu_silu_mul(ref + (size_t)m * ldo, gu + (size_t)m * N, 1, I);
    kiln_devptr dx = up_act(x, (size_t)M * K, dt), dw = up_act(w, (size_t)N * K, dt), db = up_act(b, (size_t)N, dt),
                dgu = dmalloc((size_t)M * N * 2), dtwo = dmalloc((size_t)M * ldo * 2), dout = dmalloc((size_t)M * ldo * 2);
    KT_OK(kiln_rt_memset8(dtwo, 0, (size_t)M * ldo * 2, st));
    KT_OK(kiln_rt_memset8(dout, 0, (size_t)M * ldo * 2, st));
    KT_OK(kiln_gpu_gemm_silu(gv, st, dout, ldo, dx, dw, dt, bias ? db : 0, M, N, K));
    if (pair) KT_OK(kiln_gpu_gemm(gv, st, dgu, N, dt, dx, dw, dt, bias ? db : 0, M, N, K));
    /* dtwo packed [M, I] (silu_mul's rows 16-byte aligned) */
    if (pair) KT_OK(kiln_gpu_silu_mul(gv, st, dtwo, dgu, dt, M, I));
    float *got = down_act(dout, (size_t)M * ldo, dt), *two = down_act(dtwo, (size_t)M * ldo, dt);
    for (int m = 0; pair && m < M; m++)
        KT_CHECKF(!memcmp(got + (size_t)m * ldo, two + (size_t)m * I, sizeof(float) * (size_t)I),
                  "%s %s M=%d I=%d K=%d row %d: not the bits of the plain GEMM and silu_mul", what,
                  kiln_dtype_name(dt), M, I, K, m);
    CHECK_CLOSE(got, ref, (size_t)M * ldo, dt, "%s %s M=%d I=%d K=%d", what, kiln_dtype_name(dt), M, I, K);
    free(x), free(w), free(b), free(gu), free(ref), free(got), free(two);
    dfree(dx), dfree(dw), dfree(db), dfree(dgu), dfree(dtwo), dfree(dout);
}

/* silu_gemm_case over both activation dtypes, the n_m row counts of Ms, I
 * 384 / 1001 (odd: no whole 16-byte vectors), K 512 / 4104 / 40, bias on
 * alternate cases; the bit comparison (pair) where bits allows it and I is
 * whole 16-byte vectors (kiln_gpu_silu_mul's unit) */
static void silu_gemm_sweep(kiln_gpu *gv, const int *Ms, int n_m, bool bits, const char *what) {
    static const int Is[] = {384, 1001}, Ks[] = {512, 4104, 40};
    for (int a = 0; a < 2; a++)
        for (int mi = 0; mi < n_m; mi++)
            for (int ii = 0; ii < 2; ii++)
                for (int ki = 0; ki < 3; ki++) {
                    const kiln_dtype dt = acts[a];
                    const int M = Ms[mi], I = Is[ii], K = Ks[ki], bias = (mi + ki) & 1;
                    KT_REQUIRE(kiln_gpu_gemm_silu_ok(gv, dt, M, 2 * I, K));
                    silu_gemm_case(gv, dt, M, I, K, bias, bits && I % 8 == 0, what);
                }
}

/* the small-M GEMV kernel (kernel_src/gemv.cu), on its own kiln_gpu with it
 * enabled, in its tilings (K split 1, 2 and 4; rule -1: the knobs as given -- before, the default rule's
 * tiling by shape ran in every pass), then in the default rule's tilings: M 1..8, odd N, K not a multiple of
 * the unrolled stride, an output row stride, bias, fp32 or act output */
KT_TEST(test_gemv) {
    NEED_GPU();
    static const int tiles[][3] = {{KILN_GEMV_ROWS_DEFAULT, KILN_GEMV_UNROLL_DEFAULT, KILN_GEMV_KSPLIT_DEFAULT},
                                   {1, 2, 1}, {4, 4, 1}, {2, 8, 1}, {1, 4, 2}, {2, 4, 2}, {4, 2, 2}, {1, 2, 2},
                                   {2, 4, 4}, {1, 2, 4}, {0, 0, 0}};
    for (int ti = 0; ti < (int)KILN_ARRAY_LEN(tiles); ti++) {
    kiln_gpu_params gp = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = 8, .skx_m1 = -1, .gemv_rows = tiles[ti][0],
                          .gemv_unroll = tiles[ti][1], .gemv_ksplit = tiles[ti][2], .gemv_rule = tiles[ti][0] ? -1 : 0};
    kiln_gpu *gv = NULL;
    KT_OK(kiln_gpu_create(dev, &gp, &gv));
    int Ms[] = {1, 2, 3, 8}, Ns[] = {384, 1001}, Ks[] = {512, 4104, 40};
    for (int a = 0; a < 2; a++)
        for (int mi = 0; mi < 4; mi++)
            for (int ni = 0; ni < 2; ni++)
                for (int ki = 0; ki < 3; ki++)
                    for (int f32out = 0; f32out < 2; f32out++) {
                        kiln_dtype dt = acts[a], odt = f32out ? KILN_DTYPE_F32 : dt;
                        int M = Ms[mi], N = Ns[ni], K = Ks[ki], ldo = N + 5, bias = (mi + ni) & 1;
                        float *x = rand_act((size_t)M * K, dt, 1), *w = rand_act((size_t)N * K, dt, 0.05f),
                              *b = rand_act((size_t)N, odt, 1), *ref = malloc(sizeof(float) * (size_t)M * ldo);
                        for (int i = 0; i < M * ldo; i++) ref[i] = NAN;
                        kiln_cpu_gemm(NULL, ref, ldo, x, w, KILN_DTYPE_F32, bias ? b : NULL, KILN_DTYPE_F32, M, N, K);
                        kiln_devptr dx = up_act(x, (size_t)M * K, dt), dw = up_act(w, (size_t)N * K, dt),
                                    db = up_act(b, (size_t)N, odt), dout = dmalloc((size_t)M * ldo * 4);
                        KT_OK(kiln_gpu_gemm(gv, st, dout, ldo, odt, dx, dw, dt, bias ? db : 0, M, N, K));
                        float *got = down_act(dout, (size_t)M * ldo, odt);
                        for (int m = 0; m < M; m++) /* the stride's gap is not compared */
                            for (int n = N; n < ldo; n++) got[m * ldo + n] = ref[m * ldo + n] = 0;
                        CHECK_CLOSE(got, ref, (size_t)M * ldo, dt, "gemv %s M=%d N=%d K=%d out=%s rows %d unroll %d ksplit %d",
                                    kiln_dtype_name(dt), M, N, K, kiln_dtype_name(odt), tiles[ti][0], tiles[ti][1],
                                    tiles[ti][2]);
                        free(x), free(w), free(b), free(ref), free(got);
                        dfree(dx), dfree(dw), dfree(db), dfree(dout);
                    }
    gemv_tested = kiln_rt_kernels_was_used(kiln_gpu_kernels(gv), "gemv");
    KT_CHECK(gemv_tested);
    kiln_gpu_destroy(gv);
    }
    /* the gate/up GEMV with the SiLU-and-mul as its epilogue (GLU=1), in each
     * K split (warps per output) x unroll: close to the CPU's gemm + silu_mul,
     * and with K split 1 the same bits as the plain GEMV followed by
     * kiln_gpu_silu_mul (K split 2 sums in another fp32 order); an output row
     * stride, bias, M 1..8, odd I, K not a multiple of the unrolled stride and
     * K of 5 vectors (the second warp of a K split 2 group takes none) */
    static const int glu_tiles[][2] = {{1, 2}, {1, 4}, {1, 8}, {2, 2}, {2, 4}, {2, 8}};
    for (int ti = 0; ti < 6; ti++) {
        const int ksplit = glu_tiles[ti][0], unroll = glu_tiles[ti][1];
        /* the plain GEMV of the bit comparison sums K in one warp as the GLU GEMV with K split 1 does:
         * K split 1 for every shape (rule -1 = 0: the knobs as given, not the tiling by shape) */
        kiln_gpu_params gp = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = 8, .skx_m1 = -1, .gemv_silu = 1,
                              .gemv_silu_ksplit = ksplit, .gemv_silu_unroll = unroll, .gemv_ksplit = 1,
                              .gemv_rule = -1};
        kiln_gpu *gv = NULL;
        KT_OK(kiln_gpu_create(dev, &gp, &gv));
        static const int Ms[] = {1, 3, 8};
        char what[64];
        snprintf(what, sizeof what, "gemv+silu ksplit %d unroll %d", ksplit, unroll);
        silu_gemm_sweep(gv, Ms, 3, ksplit == 1, what); /* the same bits with K split 1 */
        kiln_gpu_destroy(gv);
    }
}

static bool gemv_rope_tested; /* test_gemv_rope runs it on its own kiln_gpu */
static bool gemv_ar_tested; /* test_all_reduce_one_rank runs it on its own kiln_gpu */

/* The batch-1 qkv GEMV with rope and the KV-cache write as its epilogue
 * (kernel_src/gemv.cu ROPE=1) against the CPU: gemm (+ bias), rounded to act
 * as the GEMV stores it, kiln_cpu_rope, rounded again, kiln_cpu_kv_write into
 * caches that start with the same random bytes; a warp a row pair or a row, K
 * split 1 / 2 / 4; bf16 / fp16, head dims 64 /
 * 128, GQA and MHA, positions 0 / 7 / 1000 (mscale 1 and 1.25), a slot in
 * the middle of a block, slot 0 and a skipped token (-1). */
KT_TEST(test_gemv_rope) {
    NEED_GPU();
    kiln_gpu_params gp = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = 1, .gemv_rope = 1};
    kiln_gpu *gv = NULL;
    KT_OK(kiln_gpu_create(dev, &gp, &gv));
    static const int hds[] = {64, 128}, heads[][2] = {{8, 2}, {4, 4}}, Ks[] = {512, 4104}, poss[] = {0, 7, 1000},
                     slotv[] = {21, 0, -1};
    for (int rr = 1; rr <= 2; rr++) /* rows a warp: a row (the pair meets in shared memory) or the pair */
    for (int ks = 1; ks <= 4; ks *= 2) /* warps a row (pair) (the default picks by the grid) */
    for (int a = 0; a < 2; a++)
        for (int hi = 0; hi < 2; hi++)
            for (int gi = 0; gi < 2; gi++)
                for (int ki = 0; ki < 2; ki++)
                    for (int pi = 0; pi < 3; pi++) {
                        const kiln_dtype dt = acts[a];
                        kiln_gpu_set_gemv_rope_ksplit(gv, ks);
                        kiln_gpu_set_gemv_rope_rows(gv, rr);
                        const int hd = hds[hi], nq = heads[gi][0], nkv = heads[gi][1], K = Ks[ki], bs = 16, nb = 4;
                        const int N = (nq + 2 * nkv) * hd, bias = (hi + pi) & 1;
                        int32_t pos = poss[pi], slot = slotv[pi];
                        kiln_kv_layout l;
                        size_t cbytes = kiln_kv_layout_init(&l, nb, bs, nkv, hd, dt);
                        float *x = rand_act((size_t)K, dt, 1), *w = rand_act((size_t)N * K, dt, 0.05f),
                              *b = rand_act((size_t)N, dt, 1), *ref = malloc(sizeof(float) * (size_t)N);
                        kiln_cpu_gemm(NULL, ref, N, x, w, KILN_DTYPE_F32, bias ? b : NULL, KILN_DTYPE_F32, 1, N, K);
                        void *tmp = malloc((size_t)N * 2);
                        kiln_from_f32(tmp, dt, ref, (size_t)N), kiln_to_f32(ref, tmp, dt, (size_t)N);
                        float inv[128], ms = 1;
                        make_inv_freq(hd, true, inv, &ms);
                        ms = pi == 2 ? 1.25f : 1.0f;
                        kiln_rope_params rp = {hd, hd, false, inv, ms, NULL, 0, 0, 0};
                        kiln_cpu_rope(ref, N, &pos, 1, nq, nkv, &rp);
                        kiln_from_f32(tmp, dt, ref, (size_t)N), kiln_to_f32(ref, tmp, dt, (size_t)N);
                        void *kc = rand_bytes(cbytes), *vc = rand_bytes(cbytes);
                        kiln_devptr dkc = dupload(kc, cbytes), dvc = dupload(vc, cbytes);
                        kiln_cpu_kv_write(kc, vc, &l, ref + (size_t)nq * hd, ref + (size_t)(nq + nkv) * hd, N, &slot, 1);
                        kiln_devptr dx = up_act(x, (size_t)K, dt), dw = up_act(w, (size_t)N * K, dt),
                                    db = up_act(b, (size_t)N, dt), dout = dmalloc((size_t)N * 2),
                                    dp = dupload(&pos, sizeof pos), ds = dupload(&slot, sizeof slot),
                                    dinv = dupload(inv, sizeof(float) * (size_t)hd / 2);
                        kiln_gpu_rope_params grp = {hd, hd, false, dinv, ms, 0, 0, 0, 0};
                        KT_REQUIRE(kiln_gpu_gemm_rope_kv_ok(gv, dt, 1, N, K, nq, &grp, &l));
                        KT_OK(kiln_gpu_gemm_rope_kv(gv, st, dout, dx, dw, dt, bias ? db : 0, N, K, nq, dp, &grp, dkc,
                                                    dvc, &l, ds));
                        float *got = down_act(dout, (size_t)N, dt);
                        CHECK_CLOSE(got, ref, (size_t)N, dt,
                                    "gemv+rope %s hd=%d nq=%d nkv=%d K=%d pos=%d ksplit=%d rows=%d: qkv",
                                    kiln_dtype_name(dt), hd, nq, nkv, K, pos, ks, rr);
                        void *gk = ddown(dkc, cbytes), *gvv = ddown(dvc, cbytes);
                        size_t ne = cbytes / 2;
                        float *a1 = malloc(sizeof(float) * ne * 4), *b1 = a1 + ne, *a2 = b1 + ne, *b2 = a2 + ne;
                        for (size_t i = 0; i < ne; i++) {
                            a1[i] = kiln_cpu_kv_read(gk, &l, (int64_t)i, 1.0f);
                            b1[i] = kiln_cpu_kv_read(kc, &l, (int64_t)i, 1.0f);
                            a2[i] = kiln_cpu_kv_read(gvv, &l, (int64_t)i, 1.0f), b2[i] = kiln_cpu_kv_read(vc, &l, (int64_t)i, 1.0f);
                        }
                        CHECK_CLOSE(a1, b1, ne, dt, "gemv+rope %s hd=%d nq=%d nkv=%d slot=%d: key cache",
                                    kiln_dtype_name(dt), hd, nq, nkv, slot);
                        CHECK_CLOSE(a2, b2, ne, dt, "gemv+rope %s hd=%d nq=%d nkv=%d slot=%d: value cache",
                                    kiln_dtype_name(dt), hd, nq, nkv, slot);
                        if (slot < 0) /* nothing written: the caches keep their bytes */
                            KT_CHECKF(!memcmp(gk, kc, cbytes) && !memcmp(gvv, vc, cbytes),
                                      "gemv+rope %s hd=%d: a skipped slot changed the caches", kiln_dtype_name(dt), hd);
                        free(x), free(w), free(b), free(ref), free(tmp), free(kc), free(vc), free(got), free(gk),
                            free(gvv), free(a1);
                        dfree(dkc), dfree(dvc), dfree(dx), dfree(dw), dfree(db), dfree(dout), dfree(dp), dfree(ds),
                            dfree(dinv);
                    }
    gemv_rope_tested = kiln_rt_kernels_was_used(kiln_gpu_kernels(gv), "gemv_rope");
    KT_CHECK(gemv_rope_tested);
    kiln_gpu_destroy(gv);
}

/* x rounded to dt, in place */
static void round_to(float *x, size_t n, kiln_dtype dt) {
    void *tmp = malloc(n * kiln_dtype_size(dt) + 1);
    kiln_from_f32(tmp, dt, x, n), kiln_to_f32(x, tmp, dt, n);
    free(tmp);
}

/* The batch-1 residual add + RMSNorm folded into the GEMVs around it (kernel_src/gemv.cu NOUT / NIN;
 * ops_gpu.h kiln_gpu_gemv_add_ss, kiln_gpu_norm_in). The producer: the new residual h bit for bit as
 * kiln_gpu_gemm + kiln_gpu_add_rmsnorm leave it, xw = h * w rounded to dt bit for bit, n_part partial
 * sums of squares adding up to h's (no stray writes past them). The plain, SiLU and rope GEMVs of xw
 * with 1 / rms(h) as their scale: against the CPU doing the same (the dot products of xw in double times
 * 1 / rms, rounded where the kernels round; SiLU-and-mul, rope and the cache write after) within a
 * quarter of the usual tolerance, and against the unfused kernels (the norm kernel's output into the
 * same GEMVs) within it. Producer tilings (W rows a warp, loads in flight, K split) 2/4/2 (Llama-3-8B's
 * o and down), 1/4/1, 4/2/4, 1/2/2; H 512 and 1000 (a partial last block); producer K 1000 / 512; its bias
 * on alternate cases; bf16 / fp16; then the producer through gemm_skx's one-row form (NOUT; H 512 / 1024, K
 * 1024 / 14336: a cluster of 2). */
static bool skx_nout_tested; /* test_gemv_norm ran gemm_skx's NOUT form */
KT_TEST(test_gemv_norm) {
    NEED_GPU();
    static const int tiles[][3] = {{2, 4, 2}, {1, 4, 1}, {4, 2, 4}, {1, 2, 2}};
    enum { N1 = 384, I = 256, HD = 128, NQ = 4, NKV = 2, BS = 16, NB = 2 };
    const float eps = 1e-5f;
    for (int ti = 0; ti < 5; ti++) {
        /* (ti 4: the producer through gemm_skx's one-row form, $KILN_SKX_M1, without and with a cluster) */
        const int tj = ti < 4 ? ti : 0;
        kiln_gpu_params gp = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = 1, .gemv_silu = 1, .gemv_rope = 1,
                              .gemv_norm = 2, .gemv_rows = tiles[tj][0], .gemv_unroll = tiles[tj][1],
                              .gemv_ksplit = tiles[tj][2], .gemv_rule = -1, .skx_m1 = ti == 4 ? 1 : -1};
        kiln_gpu *gv = NULL;
        KT_OK(kiln_gpu_create(dev, &gp, &gv));
        for (int a = 0; a < 2; a++)
            for (int hi = 0; hi < 2; hi++) {
                const kiln_dtype dt = acts[a];
                const size_t es = kiln_dtype_size(dt);
                const int H = ti == 4 ? (hi ? 1024 : 512) : hi ? 1000 : 512,
                          K0 = ti == 4 ? (hi ? 14336 : 1024) : hi ? 512 : 1000, bias = (ti + hi) & 1,
                          NR = (NQ + 2 * NKV) * HD;
                char what[96];
                snprintf(what, sizeof what, "gemv norm %s H=%d K0=%d tiling %d/%d/%d%s", kiln_dtype_name(dt), H, K0,
                         tiles[tj][0], tiles[tj][1], tiles[tj][2], ti == 4 ? " gemm_skx" : "");
                int n_part = 0;
                KT_REQUIRE(kiln_gpu_gemv_add_ss_ok(gv, dt, 1, H, K0, &n_part));
                KT_REQUIRE(kiln_gpu_nin_ok(gv, KILN_GPU_NIN_PLAIN, dt, 1, N1, H) &&
                           kiln_gpu_nin_ok(gv, KILN_GPU_NIN_SILU, dt, 1, 2 * I, H) &&
                           kiln_gpu_nin_ok(gv, KILN_GPU_NIN_ROPE, dt, 1, NR, H));
                float *res = rand_act((size_t)H, dt, 1), *x0 = rand_act((size_t)K0, dt, 1),
                      *w0 = rand_act((size_t)H * K0, dt, 0.05f), *b0 = rand_act((size_t)H, dt, 1),
                      *nw = rand_act((size_t)H, dt, 1), *w1 = rand_act((size_t)N1 * H, dt, 0.05f),
                      *wg = rand_act((size_t)2 * I * H, dt, 0.05f), *wq = rand_act((size_t)NR * H, dt, 0.05f),
                      *b1 = rand_act((size_t)N1, dt, 1);
                kiln_devptr dres_a = up_act(res, (size_t)H, dt), dres_b = up_act(res, (size_t)H, dt),
                            dx0 = up_act(x0, (size_t)K0, dt), dw0 = up_act(w0, (size_t)H * K0, dt),
                            db0 = up_act(b0, (size_t)H, dt), dnw = up_act(nw, (size_t)H, dt),
                            dw1 = up_act(w1, (size_t)N1 * H, dt), dwg = up_act(wg, (size_t)2 * I * H, dt),
                            dwq = up_act(wq, (size_t)NR * H, dt), db1 = up_act(b1, (size_t)N1, dt),
                            dout0 = dmalloc((size_t)H * es), dnorm = dmalloc((size_t)H * es),
                            dxw = dmalloc((size_t)H * es), dpart = dmalloc(4 * KILN_GPU_NORM_MAX_PARTS),
                            d1a = dmalloc(N1 * es), d1b = dmalloc(N1 * es), dga = dmalloc(I * es),
                            dgb = dmalloc(I * es), dqa = dmalloc((size_t)NR * es), dqb = dmalloc((size_t)NR * es);
                /* unfused: GEMV, add + RMSNorm, the consumers of the norm's output */
                KT_OK(kiln_gpu_gemm(gv, st, dout0, 0, dt, dx0, dw0, dt, bias ? db0 : 0, 1, H, K0));
                KT_OK(kiln_gpu_add_rmsnorm(gv, st, dnorm, dres_a, dout0, dnw, dt, dt, 1, H, eps));
                KT_OK(kiln_gpu_gemm(gv, st, d1a, 0, dt, dnorm, dw1, dt, bias ? db1 : 0, 1, N1, H));
                KT_OK(kiln_gpu_gemm_silu(gv, st, dga, 0, dnorm, dwg, dt, 0, 1, 2 * I, H));
                /* folded */
                KT_OK(kiln_gpu_gemv_add_ss(gv, st, dres_b, dpart, dxw, dnw, dx0, dw0, dt, bias ? db0 : 0, H, K0));
                const kiln_gpu_norm_in ni = {.part = dpart, .n_part = n_part, .eps = eps};
                KT_OK(kiln_gpu_gemm_nin(gv, st, d1b, 0, dxw, dw1, dt, bias ? db1 : 0, N1, H, &ni));
                KT_OK(kiln_gpu_gemm_silu_nin(gv, st, dgb, 0, dxw, dwg, dt, 0, 1, 2 * I, H, &ni));
                /* the rope consumer: q, k, v heads at position 21 into slot 5 of caches that start alike */
                kiln_kv_layout l;
                size_t cbytes = kiln_kv_layout_init(&l, NB, BS, NKV, HD, dt);
                void *kc = rand_bytes(cbytes), *vc = rand_bytes(cbytes);
                kiln_devptr kca = dupload(kc, cbytes), vca = dupload(vc, cbytes), kcb = dupload(kc, cbytes),
                            vcb = dupload(vc, cbytes);
                float inv[HD / 2], ms = 1;
                make_inv_freq(HD, true, inv, &ms);
                int32_t pos = 21, slot = 5;
                kiln_devptr dp = dupload(&pos, sizeof pos), ds = dupload(&slot, sizeof slot),
                            dinv = dupload(inv, sizeof inv);
                kiln_gpu_rope_params grp = {HD, HD, false, dinv, 1.0f, 0, 0, 0, 0};
                KT_REQUIRE(kiln_gpu_gemm_rope_kv_ok(gv, dt, 1, NR, H, NQ, &grp, &l));
                KT_OK(kiln_gpu_gemm_rope_kv(gv, st, dqa, dnorm, dwq, dt, 0, NR, H, NQ, dp, &grp, kca, vca, &l, ds));
                KT_OK(kiln_gpu_gemm_rope_kv_nin(gv, st, dqb, dxw, dwq, dt, 0, 1, NR, H, NQ, dp, &grp, kcb, vcb, &l,
                                                ds, &ni));

                /* the producer */
                void *ra = ddown(dres_a, (size_t)H * es), *rb = ddown(dres_b, (size_t)H * es);
                KT_CHECKF(!memcmp(ra, rb, (size_t)H * es), "%s: the residual is not add_rmsnorm's", what);
                float *h = down_act(dres_b, (size_t)H, dt), *xw = down_act(dxw, (size_t)H, dt),
                      *exw = malloc(sizeof(float) * (size_t)H);
                for (int i = 0; i < H; i++) exw[i] = h[i] * nw[i];
                round_to(exw, (size_t)H, dt);
                KT_CHECKF(!memcmp(xw, exw, sizeof(float) * (size_t)H), "%s: h * w is not the residual times the weight",
                          what);
                float *part = ddown(dpart, 4 * KILN_GPU_NORM_MAX_PARTS);
                double ss = 0, ps = 0;
                for (int i = 0; i < H; i++) ss += (double)h[i] * h[i];
                int finite = 1, stray = 0;
                for (int i = 0; i < n_part; i++) finite &= isfinite(part[i]) != 0, ps += part[i];
                for (int i = n_part; i < KILN_GPU_NORM_MAX_PARTS; i++) stray |= !isnan(part[i]);
                KT_CHECKF(finite && fabs(ps - ss) <= 1e-5 * ss, "%s: partials sum %.9g, h's squares %.9g", what, ps,
                          ss);
                KT_CHECKF(!stray, "%s: a partial written past the %d blocks", what, n_part);

                /* the consumers on the CPU: r * (xw . W) rounded where the kernels round */
                const double r = 1.0 / sqrt(ss / H + eps);
                float *e1 = malloc(sizeof(float) * N1), *egu = malloc(sizeof(float) * 2 * I),
                      *eg = malloc(sizeof(float) * I), *eq = malloc(sizeof(float) * (size_t)NR);
                struct {
                    float *out;
                    const float *w, *b;
                    int n;
                } dots[] = {{e1, w1, bias ? b1 : NULL, N1}, {egu, wg, NULL, 2 * I}, {eq, wq, NULL, NR}};
                for (int d = 0; d < 3; d++) {
                    for (int n = 0; n < dots[d].n; n++) {
                        double acc = 0;
                        for (int k = 0; k < H; k++) acc += (double)xw[k] * dots[d].w[(size_t)n * H + k];
                        dots[d].out[n] = (float)(acc * r + (dots[d].b ? dots[d].b[n] : 0));
                    }
                    round_to(dots[d].out, (size_t)dots[d].n, dt);
                }
                kiln_cpu_silu_mul(eg, egu, 1, I);
                kiln_rope_params rp = {HD, HD, false, inv, 1.0f, NULL, 0, 0, 0};
                kiln_cpu_rope(eq, NR, &pos, 1, NQ, NKV, &rp);
                round_to(eq, (size_t)NR, dt);
                kiln_cpu_kv_write(kc, vc, &l, eq + (size_t)NQ * HD, eq + (size_t)(NQ + NKV) * HD, NR, &slot, 1);
                float *g1 = down_act(d1b, N1, dt), *u1 = down_act(d1a, N1, dt), *gg = down_act(dgb, I, dt),
                      *ug = down_act(dga, I, dt), *gq = down_act(dqb, (size_t)NR, dt),
                      *uq = down_act(dqa, (size_t)NR, dt);
                struct {
                    const float *got, *emu, *unfused;
                    size_t n;
                    const char *name;
                } cmp[] = {{g1, e1, u1, N1, "plain"}, {gg, eg, ug, I, "silu"}, {gq, eq, uq, (size_t)NR, "rope"}};
                for (int c = 0; c < 3; c++) {
                    int nn = 0;
                    const double e = rel_err(cmp[c].got, cmp[c].emu, cmp[c].n, &nn);
                    KT_CHECKF(!nn && e <= tol_for(dt) / 4, "%s, %s: rel err %.3g against the CPU's r * (xw . W)",
                              what, cmp[c].name, e);
                    CHECK_CLOSE(cmp[c].got, cmp[c].unfused, cmp[c].n, dt, "%s, %s against the unfused kernels", what,
                                cmp[c].name);
                }
                void *gk = ddown(kcb, cbytes), *gvv = ddown(vcb, cbytes);
                const size_t ne = cbytes / es;
                float *a1 = malloc(sizeof(float) * ne * 4), *c1 = a1 + ne, *a2 = c1 + ne, *c2 = a2 + ne;
                for (size_t i = 0; i < ne; i++) {
                    a1[i] = kiln_cpu_kv_read(gk, &l, (int64_t)i, 1.0f), c1[i] = kiln_cpu_kv_read(kc, &l, (int64_t)i, 1.0f);
                    a2[i] = kiln_cpu_kv_read(gvv, &l, (int64_t)i, 1.0f), c2[i] = kiln_cpu_kv_read(vc, &l, (int64_t)i, 1.0f);
                }
                CHECK_CLOSE(a1, c1, ne, dt, "%s: key cache", what);
                CHECK_CLOSE(a2, c2, ne, dt, "%s: value cache", what);
                free(res), free(x0), free(w0), free(b0), free(nw), free(w1), free(wg), free(wq), free(b1), free(kc),
                    free(vc), free(ra), free(rb), free(h), free(xw), free(exw), free(part), free(e1), free(egu),
                    free(eg), free(eq), free(g1), free(u1), free(gg), free(ug), free(gq), free(uq), free(gk),
                    free(gvv), free(a1);
                dfree(dres_a), dfree(dres_b), dfree(dx0), dfree(dw0), dfree(db0), dfree(dnw), dfree(dw1), dfree(dwg),
                    dfree(dwq), dfree(db1), dfree(dout0), dfree(dnorm), dfree(dxw), dfree(dpart), dfree(d1a),
                    dfree(d1b), dfree(dga), dfree(dgb), dfree(dqa), dfree(dqb), dfree(kca), dfree(vca), dfree(kcb),
                    dfree(vcb), dfree(dp), dfree(ds), dfree(dinv);
            }
        if (ti == 4) {
            skx_nout_tested = kiln_rt_kernels_was_used(kiln_gpu_kernels(gv), "gemm_skx");
            KT_CHECKF(skx_nout_tested, "gemm_skx's one-row form did not run");
        }
        kiln_gpu_destroy(gv);
    }
}

static bool sk_rope_tested; /* test_gemm_sk_rope runs gemm_sk_rope on its own kiln_gpu's */
static bool sk_rope_wg_tested; /* ... and gemm_sk_rope_wg (sm_90) */

/* The qkv GEMM of M = 2..32 rows with rope and the KV-cache write through
 * gemm_sk's ROPE epilogue (kiln_gpu_gemm_rope_kv_m with skgemm_rope on)
 * against the CPU: gemm (+ bias) rounded to act as the plain GEMM stores it,
 * kiln_cpu_rope at pos[m] of each row, rounded again, kiln_cpu_kv_write at
 * slots[m] into caches that start with the same random bytes. bf16 / fp16,
 * head dim 128, GQA (32, 8) and MHA (8, 8), K one chunk multiple and not
 * (4104), bias on / off, positions 0 / 1000 / others (mscale 1 and 1.25),
 * skipped rows (slot -1); splits 1, 3 and automatic with 4 warps a block,
 * 2 with 8 (RT 1); on sm_90 also the warpgroup-MMA kernel (gemm_sk_rope_wg)
 * at splits 1, 3 and automatic. The output has a poisoned row past M and every cache
 * element of a slot no row writes must keep its bytes (no stray writes). */
KT_TEST(test_gemm_sk_rope) {
    NEED_GPU();
    static const struct { int warps, split, wg; } cf[] = {{4, 1, -1}, {4, 3, -1}, {8, 2, -1}, {0, 0, -1},
                                                          {4, 1, 1},  {4, 3, 1},  {4, 0, 1}};
    enum { NCF = 7, MAXR = 32, BS = 16, NB = 4 };
    kiln_gpu *gs[NCF] = {0};
    for (int c = 0; c < NCF; c++) {
        kiln_gpu_params gp = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = -1, .tcgemm_max_m = -1,
                              .skgemm_max_m = 32, .skgemm_warps = cf[c].warps, .skgemm_split = cf[c].split,
                              .skgemm_wg = cf[c].wg};
        KT_OK(kiln_gpu_create(dev, &gp, &gs[c]));
        kiln_gpu_set_skgemm_rope(gs[c], 1);
    }
    kiln_pool *pool = NULL;
    KT_OK(kiln_pool_create(8, &pool));
    static const int Ms[] = {2, 5, 17, 32}, heads[][2] = {{32, 8}, {8, 8}}, Ks[] = {512, 4104};
    const int hd = 128;
    int32_t pos[MAXR], slots[MAXR];
    for (int m = 0; m < MAXR; m++) {
        pos[m] = m % 3 == 0 ? 0 : m % 3 == 1 ? 1000 : 7 + 13 * m;
        slots[m] = m % 4 == 3 ? -1 : (m * 37 + 5) % (NB * BS); /* distinct: 37 is odd, NB * BS = 64 */
    }
    float inv[64], ms = 1;
    make_inv_freq(hd, true, inv, &ms);
    kiln_devptr dinv = dupload(inv, sizeof inv), dp = dupload(pos, sizeof pos), ds = dupload(slots, sizeof slots);
    for (int a = 0; a < 2; a++)
        for (int gi = 0; gi < 2; gi++)
            for (int ki = 0; ki < 2; ki++) {
                const kiln_dtype dt = acts[a];
                const int nq = heads[gi][0], nkv = heads[gi][1], K = Ks[ki], N = (nq + 2 * nkv) * hd;
                const int bias = (gi + ki) & 1;
                ms = (a + ki) & 1 ? 1.25f : 1.0f;
                kiln_kv_layout l;
                const size_t cbytes = kiln_kv_layout_init(&l, NB, BS, nkv, hd, dt), ne = cbytes / 2;
                float *x = rand_act((size_t)MAXR * K, dt, 1), *w = rand_act((size_t)N * K, dt, 0.05f),
                      *b = rand_act((size_t)N, dt, 1), *g32 = malloc(sizeof(float) * (size_t)MAXR * N),
                      *ref = malloc(sizeof(float) * (size_t)MAXR * N);
                kiln_cpu_gemm(pool, g32, N, x, w, KILN_DTYPE_F32, bias ? b : NULL, KILN_DTYPE_F32, MAXR, N, K);
                void *tmp = malloc((size_t)MAXR * N * 2);
                kiln_from_f32(tmp, dt, g32, (size_t)MAXR * N), kiln_to_f32(g32, tmp, dt, (size_t)MAXR * N);
                kiln_devptr dx = up_act(x, (size_t)MAXR * K, dt), dw = up_act(w, (size_t)N * K, dt),
                            db = up_act(b, (size_t)N, dt);
                kiln_gpu_rope_params grp = {hd, hd, false, dinv, ms, 0, 0, 0, 0};
                for (int mi = 0; mi < 4; mi++) {
                    const int M = Ms[mi];
                    /* the reference: the first M rows, rotated, rounded, written */
                    memcpy(ref, g32, sizeof(float) * (size_t)M * N);
                    kiln_rope_params rp = {hd, hd, false, inv, ms, NULL, 0, 0, 0};
                    kiln_cpu_rope(ref, N, pos, M, nq, nkv, &rp);
                    kiln_from_f32(tmp, dt, ref, (size_t)M * N), kiln_to_f32(ref, tmp, dt, (size_t)M * N);
                    void *kc0 = rand_bytes(cbytes), *vc0 = rand_bytes(cbytes);
                    void *kc = malloc(cbytes), *vc = malloc(cbytes);
                    memcpy(kc, kc0, cbytes), memcpy(vc, vc0, cbytes);
                    kiln_cpu_kv_write(kc, vc, &l, ref + (size_t)nq * hd, ref + (size_t)(nq + nkv) * hd, N, slots, M);
                    /* the cache elements of slots some row writes (key [b, nkv, hd / x, bs, x], value
                     * [b, nkv, hd, bs]) */
                    bool wk[NB * BS] = {0};
                    for (int m = 0; m < M; m++)
                        if (slots[m] >= 0) wk[slots[m]] = true;
                    float *a1 = malloc(sizeof(float) * ne * 4), *b1 = a1 + ne, *a2 = b1 + ne, *b2 = a2 + ne;
                    for (int c = 0; c < NCF; c++) {
                        char what[160];
                        snprintf(what, sizeof what, "gemm_sk+rope %s M=%d nq=%d nkv=%d K=%d bias=%d warps %d split %d wg %d",
                                 kiln_dtype_name(dt), M, nq, nkv, K, bias, cf[c].warps, cf[c].split, cf[c].wg);
                        KT_REQUIRE(kiln_gpu_gemm_rope_kv_ok(gs[c], dt, M, N, K, nq, &grp, &l));
                        kiln_devptr dkc = dupload(kc0, cbytes), dvc = dupload(vc0, cbytes),
                                    dout = dmalloc((size_t)(M + 1) * N * 2); /* a poisoned row past M */
                        KT_OK(kiln_gpu_gemm_rope_kv_m(gs[c], st, dout, dx, dw, dt, bias ? db : 0, M, N, K, nq, dp,
                                                      &grp, dkc, dvc, &l, ds));
                        float *got = down_act(dout, (size_t)(M + 1) * N, dt);
                        CHECK_CLOSE(got, ref, (size_t)M * N, dt, "%s: qkv", what);
                        int stray = 0;
                        for (int j = 0; j < N; j++) stray += !isnan(got[(size_t)M * N + j]);
                        uint16_t *gk = ddown(dkc, cbytes), *gv = ddown(dvc, cbytes);
                        const uint16_t *k0 = kc0, *v0 = vc0;
                        for (size_t i = 0; i < ne; i++) {
                            const size_t kb = i / ((size_t)nkv * hd * BS); /* the block, both layouts */
                            const int ko = (int)(i / (size_t)l.x % BS), vo = (int)(i % BS);
                            if (!wk[kb * BS + ko]) stray += gk[i] != k0[i];
                            if (!wk[kb * BS + vo]) stray += gv[i] != v0[i];
                            a1[i] = kiln_cpu_kv_read(gk, &l, (int64_t)i, 1.0f);
                            b1[i] = kiln_cpu_kv_read(kc, &l, (int64_t)i, 1.0f);
                            a2[i] = kiln_cpu_kv_read(gv, &l, (int64_t)i, 1.0f);
                            b2[i] = kiln_cpu_kv_read(vc, &l, (int64_t)i, 1.0f);
                        }
                        CHECK_CLOSE(a1, b1, ne, dt, "%s: key cache", what);
                        CHECK_CLOSE(a2, b2, ne, dt, "%s: value cache", what);
                        KT_CHECKF(stray == 0, "%d writes outside out[M, N] and the rows' slots: %s", stray, what);
                        free(got), free(gk), free(gv);
                        dfree(dkc), dfree(dvc), dfree(dout);
                    }
                    free(a1), free(kc0), free(vc0), free(kc), free(vc);
                }
                free(x), free(w), free(b), free(g32), free(ref), free(tmp);
                dfree(dx), dfree(dw), dfree(db);
            }
    /* the predicate: off by the knob, M past 32 or 1 (the GEMV's, off here), head dim 64 */
    {
        kiln_kv_layout l, l64;
        kiln_kv_layout_init(&l, NB, BS, 8, hd, KILN_DTYPE_BF16);
        kiln_kv_layout_init(&l64, NB, BS, 8, 64, KILN_DTYPE_BF16);
        kiln_gpu_rope_params grp = {hd, hd, false, dinv, 1, 0, 0, 0, 0}, g64 = {64, 64, false, dinv, 1, 0, 0, 0, 0};
        const int N = 48 * hd;
        KT_CHECK(!kiln_gpu_gemm_rope_kv_ok(gs[0], KILN_DTYPE_BF16, 33, N, 4096, 32, &grp, &l));
        KT_CHECK(!kiln_gpu_gemm_rope_kv_ok(gs[0], KILN_DTYPE_BF16, 1, N, 4096, 32, &grp, &l));
        KT_CHECK(!kiln_gpu_gemm_rope_kv_ok(gs[0], KILN_DTYPE_BF16, 8, 48 * 64, 4096, 32, &g64, &l64));
        KT_CHECK(kiln_gpu_set_skgemm_rope(gs[0], 0) == 32);
        KT_CHECK(!kiln_gpu_gemm_rope_kv_ok(gs[0], KILN_DTYPE_BF16, 8, N, 4096, 32, &grp, &l));
        KT_CHECK(kiln_gpu_set_skgemm_rope(gs[0], 16) == 0); /* the default's limit: 16 rows, not 17 */
        KT_CHECK(kiln_gpu_gemm_rope_kv_ok(gs[0], KILN_DTYPE_BF16, 16, N, 4096, 32, &grp, &l));
        KT_CHECK(!kiln_gpu_gemm_rope_kv_ok(gs[0], KILN_DTYPE_BF16, 17, N, 4096, 32, &grp, &l));
        kiln_gpu_set_skgemm_rope(gs[0], 1);
        KT_CHECK(kiln_gpu_gemm_rope_kv_ok(gs[0], KILN_DTYPE_BF16, 8, N, 4096, 32, &grp, &l));
    }
    sk_rope_tested = sk_rope_wg_tested = true;
    for (int c = 0; c < NCF; c++) {
        const bool wg = cf[c].wg > 0 && sm90_device();
        const bool used = kiln_rt_kernels_was_used(kiln_gpu_kernels(gs[c]), wg ? "gemm_sk_rope_wg" : "gemm_sk_rope");
        KT_CHECKF(used, "gemm_sk_rope%s did not run in configuration %d", wg ? "_wg" : "", c);
        if (wg)
            sk_rope_wg_tested = sk_rope_wg_tested && used;
        else
            sk_rope_tested = sk_rope_tested && used;
        kiln_gpu_destroy(gs[c]);
    }
    KT_CHECK(sk_rope_tested);
    sk_rope_wg_tested = sk_rope_wg_tested && sm90_device();
    dfree(dinv), dfree(dp), dfree(ds);
    kiln_pool_destroy(pool);
}

/* test_gemm_tc runs the tensor-core GEMM and its split-K reduction on its own kiln_gpu's */
static bool tc_tested, tc_reduce_tested;

/* One tensor-core GEMM case: out has M + 1 rows of stride ldo, poisoned
 * (NaN); its first M rows, columns < N, must match ref (row stride N, no
 * bias) + b[n] when b, and the stride's gap and the extra row must still be
 * poison (no write outside out[M, N]). */
static void tc_case(kiln_gpu *g, kiln_dtype dt, kiln_dtype odt, kiln_devptr dx, kiln_devptr dw, const float *b,
                    const float *ref, int M, int N, int K, int ldo, const char *what) {
    size_t n = (size_t)(M + 1) * (size_t)ldo;
    kiln_devptr dout = dmalloc(n * 4), db = b ? up_act(b, (size_t)N, odt) : 0;
    KT_OK(kiln_gpu_gemm(g, st, dout, ldo, odt, dx, dw, dt, db, M, N, K));
    float *got = down_act(dout, n, odt), *cmp = malloc(sizeof(float) * (size_t)M * N),
          *expect = malloc(sizeof(float) * (size_t)M * N);
    int stray = 0;
    for (int m = 0; m <= M; m++)
        for (int j = 0; j < ldo; j++) {
            float v = got[(size_t)m * ldo + j];
            if (m < M && j < N) {
                cmp[(size_t)m * N + j] = v;
                expect[(size_t)m * N + j] = ref[(size_t)m * N + j] + (b ? b[j] : 0.0f);
            } else if (!isnan(v)) stray++;
        }
    CHECK_CLOSE(cmp, expect, (size_t)M * N, dt, "gemm %s M=%d N=%d K=%d ldo=%d out=%s bias=%d %s", kiln_dtype_name(dt),
                M, N, K, ldo, kiln_dtype_name(odt), b != NULL, what);
    KT_CHECKF(stray == 0, "%d writes outside out[M, N]: %s M=%d N=%d K=%d ldo=%d %s", stray, kiln_dtype_name(dt), M, N,
              K, ldo, what);
    free(got), free(cmp), free(expect);
    dfree(dout);
    if (db) dfree(db);
}

/* The small-shape sweep of a small-M GEMM on tg: each N x K of NK, bf16 and
 * fp16, every M of Ms, act and fp32 out (all_outs) or one output type per
 * dtype (fewer compiles), bias on every third case, ldo > N on odd cases;
 * references: one CPU GEMM of 64 rows per shape. */
static void gemm_small_sweep(kiln_gpu *tg, kiln_pool *pool, const int (*NK)[2], size_t n_nk, const int *Ms, size_t n_m,
                             bool all_outs, const char *what) {
    for (size_t si = 0; si < n_nk; si++)
        for (int a = 0; a < 2; a++) {
            kiln_dtype dt = acts[a];
            int N = NK[si][0], K = NK[si][1];
            float *x = rand_act((size_t)64 * K, dt, 1), *w = rand_act((size_t)N * K, dt, 0.05f),
                  *ref = malloc(sizeof(float) * (size_t)64 * N);
            kiln_cpu_gemm(pool, ref, N, x, w, KILN_DTYPE_F32, NULL, KILN_DTYPE_F32, 64, N, K);
            kiln_devptr dx = up_act(x, (size_t)64 * K, dt), dw = up_act(w, (size_t)N * K, dt);
            for (size_t mi = 0; mi < n_m; mi++)
                for (int f32out = 0; f32out < 2; f32out++) {
                    if (!all_outs && f32out != a) continue;
                    kiln_dtype odt = f32out ? KILN_DTYPE_F32 : dt;
                    int M = Ms[mi], ldo = (M + (int)si) & 1 ? N + 5 : N;
                    float *b = (M + f32out) % 3 ? NULL : rand_act((size_t)N, odt, 1);
                    tc_case(tg, dt, odt, dx, dw, b, ref, M, N, K, ldo, what);
                    free(b);
                }
            free(x), free(w), free(ref);
            dfree(dx), dfree(dw);
        }
}

/* The four Llama-3-8B projections (bf16 with bf16 out, and o in fp16 with
 * fp32 out) on tg at every M of Ms, qkv with a bias, ldo > N at M = 31. */
static void gemm_llama_shapes(kiln_gpu *tg, kiln_pool *pool, const int *Ms, size_t n_m, const char *prefix) {
    static const struct { const char *name; int N, K; kiln_dtype dt, odt; } sh[] = {
        {"qkv", 6144, 4096, KILN_DTYPE_BF16, KILN_DTYPE_BF16},     {"o", 4096, 4096, KILN_DTYPE_BF16, KILN_DTYPE_BF16},
        {"gate_up", 28672, 4096, KILN_DTYPE_BF16, KILN_DTYPE_BF16}, {"down", 4096, 14336, KILN_DTYPE_BF16, KILN_DTYPE_BF16},
        {"o fp16", 4096, 4096, KILN_DTYPE_F16, KILN_DTYPE_F32},
    };
    for (size_t si = 0; si < KILN_ARRAY_LEN(sh); si++) {
        int N = sh[si].N, K = sh[si].K;
        kiln_dtype dt = sh[si].dt, odt = sh[si].odt;
        float *x = rand_act((size_t)64 * K, dt, 1), *w = rand_act((size_t)N * K, dt, 0.02f),
              *ref = malloc(sizeof(float) * (size_t)64 * N), *b = rand_act((size_t)N, odt, 1);
        kiln_cpu_gemm(pool, ref, N, x, w, KILN_DTYPE_F32, NULL, KILN_DTYPE_F32, 64, N, K);
        kiln_devptr dx = up_act(x, (size_t)64 * K, dt), dw = up_act(w, (size_t)N * K, dt);
        char what[64];
        snprintf(what, sizeof what, "%s%s", prefix, sh[si].name);
        for (size_t mi = 0; mi < n_m; mi++) {
            int M = Ms[mi];
            tc_case(tg, dt, odt, dx, dw, si == 0 ? b : NULL, ref, M, N, K, M == 31 ? N + 64 : N, what);
        }
        free(x), free(w), free(ref), free(b);
        dfree(dx), dfree(dw);
    }
}

/* the tensor-core GEMM (kernel_src/gemm_tc.cu) for M 2..64 on kiln_gpu's
 * with it enabled: small shapes (odd N, K not a multiple of the 64-wide
 * chunk, tiny K) in five tilings (warps a block, warps along K, 16-row tiles
 * per warp, stages, forced or automatic split-K, prefetch on or off), bf16 and fp16,
 * act or fp32 out, bias, ldo > N; then the four Llama-3-8B projections in
 * the default tiling (the references: one CPU GEMM of 64 rows per shape) */
KT_TEST(test_gemm_tc) {
    NEED_GPU();
    static const struct { int warps, wk, rt, stages, split, pf; } tl[] = {
        {0, 0, 0, 0, 0, 0}, /* the defaults: split-K where the shape needs it */
        {8, 2, 1, 3, 1, -1},
        {4, 4, 2, 1, 7, 0},
        {4, 1, 4, 1, 0, 0},
        {8, 4, 2, 2, 0, 0},
    };
    static const int Ms[] = {2, 3, 8, 16, 31, 32, 64};
    kiln_pool *pool = NULL;
    KT_OK(kiln_pool_create(8, &pool));
    for (size_t ti = 0; ti < KILN_ARRAY_LEN(tl); ti++) {
        kiln_gpu_params gp = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = -1, .tcgemm_max_m = 64, .skx_max_m = -1, .skgemm_max_m = -1,
                              .tcgemm_warps = tl[ti].warps,
                              .tcgemm_warps_k = tl[ti].wk, .tcgemm_tiles = tl[ti].rt, .tcgemm_stages = tl[ti].stages,
                              .tcgemm_split = tl[ti].split, .tcgemm_prefetch_mb = tl[ti].pf};
        kiln_gpu *tg = NULL;
        KT_OK(kiln_gpu_create(dev, &gp, &tg));
        char what[128];
        snprintf(what, sizeof what, "warps %d wk %d rt %d stages %d split %d pf %d", tl[ti].warps, tl[ti].wk,
                 tl[ti].rt, tl[ti].stages, tl[ti].split, tl[ti].pf);
        static const int NK[][2] = {{200, 512}, {4104, 320}, {1001, 136}, {384, 72}, {24, 8}};
        /* past the default tiling, one output type per dtype (fewer compiles) */
        gemm_small_sweep(tg, pool, NK, KILN_ARRAY_LEN(NK), Ms, KILN_ARRAY_LEN(Ms), ti == 0, what);
        bool used = kiln_rt_kernels_was_used(kiln_gpu_kernels(tg), "gemm_tc");
        KT_CHECKF(used, "gemm_tc did not run in %s", what);
        tc_tested = ti == 0 ? used : tc_tested && used;
        tc_reduce_tested = tc_reduce_tested || kiln_rt_kernels_was_used(kiln_gpu_kernels(tg), "gemm_tc_reduce");
        kiln_gpu_destroy(tg);
    }
    KT_CHECK(tc_tested && tc_reduce_tested);

    /* Llama-3-8B: qkv, o, gate_up, down in the default tiling */
    kiln_gpu_params gp = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = -1, .tcgemm_max_m = 64, .skx_max_m = -1, .skgemm_max_m = -1};
    kiln_gpu *tg = NULL;
    KT_OK(kiln_gpu_create(dev, &gp, &tg));
    gemm_llama_shapes(tg, pool, Ms, KILN_ARRAY_LEN(Ms), "gemm_tc ");
    kiln_gpu_destroy(tg);
    kiln_pool_destroy(pool);
}

/* test_gemm_sk: the cluster split-K GEMM ran in every tiling (and its warpgroup-MMA kernels, on sm_90) */
static bool sk_tested, sk_wg_tested, sk_tma_tested;

/* the cluster split-K tensor-core GEMM (kernel_src/gemm_sk.cu) for M 2..64 on
 * kiln_gpu's with it enabled: small shapes (odd N, K not a multiple of the
 * 64-wide chunk, tiny K, K long enough for 8 slices) in five tilings (warps a
 * block, 16-row tiles a warp, stages, forced or automatic split-K up to a
 * cluster of 8), bf16 and fp16, act or fp32 out, bias, ldo > N, outputs
 * poisoned; on sm_90 the warpgroup-MMA kernel (gemm_sk_wg) and the one fed
 * by TMA (gemm_sk_tma) in four tilings each too (TMA: six, up to 16 stages); then the four Llama-3-8B
 * projections in the default tiling, with (sm_90) both warpgroup kernels
 * and without */
KT_TEST(test_gemm_sk) {
    NEED_GPU();
    static const struct { int warps, rt, stages, split, wg; } tl[] = {
        {0, 0, 0, 0, -1}, {8, 1, 6, 1, -1}, {4, 4, 2, 3, -1}, {4, 1, 3, 8, -1}, {8, 2, 8, 2, -1},
        {0, 0, 0, 0, 1},  {4, 1, 3, 8, 1},  {4, 4, 2, 3, 1},  {4, 2, 6, 1, 1},
        {0, 0, 0, 0, 2},  {4, 1, 3, 8, 2},  {4, 4, 2, 3, 2},  {4, 2, 8, 1, 2},  {4, 1, 16, 2, 2}, {4, 2, 12, 2, 2},
    };
    const bool sm90 = sm90_device();
    sk_wg_tested = sk_tma_tested = sm90;
    static const int Ms[] = {2, 3, 8, 9, 16, 31, 32, 64};
    /* the small sweep's shapes: odd N, K not a multiple of the 64-wide chunk, tiny K, K long enough for 8 slices */
    static const int NK[][2] = {{200, 512}, {4104, 320}, {1001, 136}, {384, 72}, {24, 8}, {640, 2056}};
    kiln_pool *pool = NULL;
    KT_OK(kiln_pool_create(8, &pool));
    for (size_t ti = 0; ti < KILN_ARRAY_LEN(tl); ti++) {
        kiln_gpu_params gp = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = -1, .tcgemm_max_m = -1,
                              .skgemm_max_m = 64, .skx_max_m = -1, .skgemm_max_weight_mb = -1, .skgemm_warps = tl[ti].warps, .skgemm_tiles = tl[ti].rt,
                              .skgemm_stages = tl[ti].stages, .skgemm_split = tl[ti].split, .skgemm_wg = tl[ti].wg};
        if (tl[ti].wg > 0 && !sm90) continue;
        kiln_gpu *tg = NULL;
        KT_OK(kiln_gpu_create(dev, &gp, &tg));
        char what[128];
        snprintf(what, sizeof what, "gemm_sk warps %d rt %d stages %d split %d wg %d", tl[ti].warps, tl[ti].rt,
                 tl[ti].stages, tl[ti].split, tl[ti].wg);
        gemm_small_sweep(tg, pool, NK, KILN_ARRAY_LEN(NK), Ms, KILN_ARRAY_LEN(Ms), ti == 0, what);
        const char *kern = tl[ti].wg == 2 ? "gemm_sk_tma" : tl[ti].wg > 0 ? "gemm_sk_wg" : "gemm_sk";
        bool used = kiln_rt_kernels_was_used(kiln_gpu_kernels(tg), kern);
        KT_CHECKF(used, "%s did not run in %s", kern, what);
        if (tl[ti].wg == 2)
            sk_tma_tested = sk_tma_tested && used;
        else if (tl[ti].wg > 0)
            sk_wg_tested = sk_wg_tested && used;
        else
            sk_tested = ti == 0 ? used : sk_tested && used;
        kiln_gpu_destroy(tg);
    }
    KT_CHECK(sk_tested);
    KT_CHECK(sk_wg_tested || !sm90);
    KT_CHECK(sk_tma_tested || !sm90);

    kiln_gpu *tg = NULL;
    for (int wg = 1; wg <= 2 && sm90; wg++) { /* the Llama-3-8B projections on the warpgroup MMA */
        kiln_gpu_params gw = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = -1, .tcgemm_max_m = -1,
                              .skgemm_max_m = 64, .skx_max_m = -1, .skgemm_max_weight_mb = -1, .skgemm_wg = wg};
        KT_OK(kiln_gpu_create(dev, &gw, &tg));
        gemm_llama_shapes(tg, pool, Ms, KILN_ARRAY_LEN(Ms), wg == 2 ? "gemm_sk_tma " : "gemm_sk_wg ");
        kiln_gpu_destroy(tg);
        tg = NULL;
    }
    if (sm90) { /* ... and as the engine plans them at 17..64 rows (gemm_sk_tma's own tiles, 16 stages or what fits,
                 * split <= 2: o, qkv and down, the gate/up plain here; every weight, so o and qkv at 33..64 too) */
        static const int M32[] = {17, 24, 31, 32, 40, 64};
        kiln_gpu_params ga = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = -1, .tcgemm_max_m = -1, .skx_max_m = -1,
                              .skgemm_max_weight_mb = -1};
        KT_OK(kiln_gpu_create(dev, &ga, &tg));
        gemm_llama_shapes(tg, pool, M32, KILN_ARRAY_LEN(M32), "gemm_sk_tma (engine plan) ");
        KT_CHECK(kiln_rt_kernels_was_used(kiln_gpu_kernels(tg), "gemm_sk_tma"));
        kiln_gpu_destroy(tg);
        tg = NULL;
    }
    kiln_gpu_params gp = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = -1, .tcgemm_max_m = -1, .skgemm_max_m = 64, .skx_max_m = -1,
                          .skgemm_max_weight_mb = -1, .skgemm_wg = -1};
    KT_OK(kiln_gpu_create(dev, &gp, &tg));
    gemm_llama_shapes(tg, pool, Ms, KILN_ARRAY_LEN(Ms), "gemm_sk ");

    /* the timing records (kiln_gpu_set_skgemm_profile) leave the result alone
     * and hold one sane record a block: exit after entry on the global clock,
     * the clock64 marks in order, the K chunks of each row block's slices
     * summing to K's */
    {
        const int N = 1001, K = 2056, M = 16, maxb = 512, nchunks = (K + 63) / 64;
        kiln_dtype dt = KILN_DTYPE_BF16;
        float *x = rand_act((size_t)64 * K, dt, 1), *w = rand_act((size_t)N * K, dt, 0.05f),
              *ref = malloc(sizeof(float) * (size_t)64 * N);
        kiln_cpu_gemm(pool, ref, N, x, w, KILN_DTYPE_F32, NULL, KILN_DTYPE_F32, 64, N, K);
        kiln_devptr dx = up_act(x, (size_t)64 * K, dt), dw = up_act(w, (size_t)N * K, dt),
                    dp = dmalloc((size_t)maxb * KILN_SKGEMM_PROF_N * 8);
        kiln_gpu_set_skgemm_profile(tg, dp, maxb);
        tc_case(tg, dt, dt, dx, dw, NULL, ref, M, N, K, N, "gemm_sk with timing records");
        int nb = kiln_gpu_set_skgemm_profile(tg, 0, 0);
        KT_CHECKF(nb > 0 && nb <= maxb, "%d profiled blocks", nb);
        if (nb > 0 && nb <= maxb) {
            uint64_t *h = malloc((size_t)nb * KILN_SKGEMM_PROF_N * 8);
            KT_OK(kiln_rt_memcpy_dtoh(h, dp, (size_t)nb * KILN_SKGEMM_PROF_N * 8, NULL));
            const int tiles = (N + 127) / 128, split = nb / tiles;
            KT_CHECKF(split >= 1 && tiles * split == nb, "%d blocks for %d row blocks", nb, tiles);
            for (int t = 0; t < tiles && split >= 1; t++) {
                uint64_t chunks = 0;
                for (int y = 0; y < split; y++) {
                    const uint64_t *r = h + ((size_t)y * tiles + t) * KILN_SKGEMM_PROF_N;
                    KT_CHECKF(r[1] >= r[0] && r[0] > 0, "block (%d, %d): globaltimer %llu .. %llu", t, y,
                              (unsigned long long)r[0], (unsigned long long)r[1]);
                    KT_CHECKF(r[2] <= r[3] && r[3] <= r[4] && r[4] <= r[5] && r[5] <= r[6],
                              "block (%d, %d): clock marks out of order", t, y);
                    KT_CHECKF(r[9] == (uint64_t)y, "block (%d, %d): slice %llu", t, y, (unsigned long long)r[9]);
                    chunks += r[8];
                }
                KT_CHECKF(chunks == (uint64_t)nchunks, "row block %d: %llu chunks over its slices, K has %d", t,
                          (unsigned long long)chunks, nchunks);
            }
            free(h);
        }
        free(x), free(w), free(ref);
        dfree(dx), dfree(dw), dfree(dp);
    }
    kiln_gpu_destroy(tg);
    kiln_pool_destroy(pool);
}

/* test_gemm_skx: gemm_skx ran */
static bool skx_tested;

/* gemm_skx (kernel_src/gemm_skx.cu: x in registers, W through warp-private
 * rings) for M 2..32 on a kiln_gpu with it on and the other small-M GEMMs off:
 * shapes kiln_skx_plan serves in every kind -- no K split (208 x 512 in
 * 64-column slots, 64 x 1024, 1024 x 2048), clusters of 2 and 4 (96 x 8192)
 * on sm_90 -- and one it does not (200 x 512: cuBLASLt), bf16 and fp16, act
 * or fp32 out, bias, ldo > N, outputs poisoned; then the Llama-3-8B
 * projections (o and qkv through clusters of 2 at 17..32 rows, down through
 * 4 at 9..16); the same bits from two launches of the o projection at 32
 * rows; then one row through it (MAXM 8) in place of the GEMV. */
KT_TEST(test_gemm_skx) {
    NEED_GPU();
    static const int Ms[] = {2, 3, 8, 9, 16, 17, 31, 32};
    kiln_pool *pool = NULL;
    KT_OK(kiln_pool_create(8, &pool));
    kiln_gpu_params gp = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = -1, .tcgemm_max_m = -1,
                          .skgemm_max_m = -1, .skx_max_m = 32};
    kiln_gpu *tg = NULL;
    KT_OK(kiln_gpu_create(dev, &gp, &tg));
    static const int NK[][2] = {{208, 512}, {64, 1024}, {1024, 2048}, {96, 8192}, {200, 512}};
    gemm_small_sweep(tg, pool, NK, KILN_ARRAY_LEN(NK), Ms, KILN_ARRAY_LEN(Ms), true, "gemm_skx");
    skx_tested = kiln_rt_kernels_was_used(kiln_gpu_kernels(tg), "gemm_skx");
    KT_CHECK(skx_tested);
    gemm_llama_shapes(tg, pool, Ms, KILN_ARRAY_LEN(Ms), "gemm_skx ");
    {
        const int M = 32, N = 4096, K = 4096;
        const kiln_dtype dt = KILN_DTYPE_BF16;
        float *x = rand_act((size_t)M * K, dt, 1), *w = rand_act((size_t)N * K, dt, 0.02f);
        kiln_devptr dx = up_act(x, (size_t)M * K, dt), dw = up_act(w, (size_t)N * K, dt),
                    o1 = dmalloc((size_t)M * N * 2), o2 = dmalloc((size_t)M * N * 2);
        KT_OK(kiln_gpu_gemm(tg, st, o1, N, dt, dx, dw, dt, 0, M, N, K));
        KT_OK(kiln_gpu_gemm(tg, st, o2, N, dt, dx, dw, dt, 0, M, N, K));
        void *h1 = ddown(o1, (size_t)M * N * 2), *h2 = ddown(o2, (size_t)M * N * 2);
        KT_CHECKF(!memcmp(h1, h2, (size_t)M * N * 2), "gemm_skx: two launches of o at M = 32 differ");
        free(x), free(w), free(h1), free(h2);
        dfree(dx), dfree(dw), dfree(o1), dfree(o2);
    }
    kiln_gpu_destroy(tg);
    /* one row (MAXM 8) in place of the GEMV */
    static const int Mh[] = {1};
    kiln_gpu_params hp = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = 1, .tcgemm_max_m = -1,
                          .skgemm_max_m = -1, .skx_max_m = 32, .skx_m1 = 1};
    tg = NULL;
    KT_OK(kiln_gpu_create(dev, &hp, &tg));
    gemm_small_sweep(tg, pool, NK, KILN_ARRAY_LEN(NK), Mh, KILN_ARRAY_LEN(Mh), true, "gemm_skx one row");
    gemm_llama_shapes(tg, pool, Mh, KILN_ARRAY_LEN(Mh), "gemm_skx one row ");
    kiln_gpu_destroy(tg);
    kiln_pool_destroy(pool);
}

/* gemm_sk with the SiLU-and-mul as its epilogue (GLU=1, kiln_gpu_gemm_silu
 * where the GEMV does not serve M): close to the CPU's gemm + silu_mul, and
 * at a forced split the same bits as the plain gemm_sk of [gate | up] (same
 * tiling and split) followed by kiln_gpu_silu_mul; M 2..64, odd I, K not a
 * multiple of the chunk and of one chunk, bias, an output row stride */
KT_TEST(test_silu_gemm_sk) {
    NEED_GPU();
    static const struct { int split, wg; } cf[] = {{1, -1}, {3, -1}, {0, -1}, {3, 1}, {0, 1}, {3, 2}, {0, 2}}; /* wg: sm_90 */
    for (size_t ci = 0; ci < KILN_ARRAY_LEN(cf); ci++) {
        if (cf[ci].wg > 0 && !sm90_device()) continue;
        kiln_gpu_params gp = {.max_sample_rows = 4, .vocab = 1024, .gemv_max_m = -1, .tcgemm_max_m = -1,
                              .skgemm_max_m = 64, .skx_max_m = -1, .skgemm_max_weight_mb = -1, .skgemm_silu = 1,
                              .skgemm_split = cf[ci].split, .skgemm_wg = cf[ci].wg};
        kiln_gpu *gv = NULL;
        KT_OK(kiln_gpu_create(dev, &gp, &gv));
        static const int Ms[] = {2, 5, 8, 16, 31, 32, 33, 64};
        char what[64];
        snprintf(what, sizeof what, "gemm_sk+silu split %d wg %d", cf[ci].split, cf[ci].wg);
        silu_gemm_sweep(gv, Ms, (int)KILN_ARRAY_LEN(Ms), cf[ci].split > 0, what); /* the same bits at a forced split */
        const char *kern = cf[ci].wg == 2 ? "gemm_sk_tma" : "gemm_sk_wg";
        if (cf[ci].wg > 0) KT_CHECKF(kiln_rt_kernels_was_used(kiln_gpu_kernels(gv), kern), "%s did not run: %s", kern, what);
        kiln_gpu_destroy(gv);
    }
}

KT_TEST(test_gemm) {
    NEED_GPU();
    int Ms[] = {1, 7, 64, 300};
    for (int a = 0; a < 2; a++)
        for (int mi = 0; mi < 4; mi++)
            for (int bias = 0; bias < 2; bias++)
                for (int f32out = 0; f32out < 2; f32out++) {
                    kiln_dtype dt = acts[a], odt = f32out ? KILN_DTYPE_F32 : dt;
                    int M = Ms[mi], N = 384, K = 512;
                    float *x = rand_act((size_t)M * K, dt, 1), *w = rand_act((size_t)N * K, dt, 0.05f),
                          *b = rand_act((size_t)N, odt, 1), *ref = malloc(sizeof(float) * (size_t)M * N);
                    kiln_cpu_gemm(NULL, ref, N, x, w, KILN_DTYPE_F32, bias ? b : NULL, KILN_DTYPE_F32, M, N, K);
                    kiln_devptr dx = up_act(x, (size_t)M * K, dt), dw = up_act(w, (size_t)N * K, dt),
                                db = up_act(b, (size_t)N, odt), dout = dmalloc((size_t)M * N * 4);
                    KT_OK(kiln_gpu_gemm(gpu, st, dout, 0, odt, dx, dw, dt, bias ? db : 0, M, N, K));
                    float *got = down_act(dout, (size_t)M * N, odt);
                    CHECK_CLOSE(got, ref, (size_t)M * N, dt, "gemm %s M=%d bias=%d out=%s", kiln_dtype_name(dt), M, bias,
                                kiln_dtype_name(odt));
                    free(x), free(w), free(b), free(ref), free(got);
                    dfree(dx), dfree(dw), dfree(db), dfree(dout);
                }
    int before = kiln_rt_blas_n_algos(kiln_gpu_blas(gpu));
    /* same bucket again: no new heuristic call */
    kiln_devptr dx = dmalloc(64 * 512 * 2), dw = dmalloc(384 * 512 * 2), dout = dmalloc(64 * 384 * 2);
    kiln_rt_memset8(dx, 0, 64 * 512 * 2, NULL);
    kiln_rt_memset8(dw, 0, 384 * 512 * 2, NULL);
    KT_OK(kiln_gpu_gemm(gpu, st, dout, 0, KILN_DTYPE_BF16, dx, dw, KILN_DTYPE_BF16, 0, 60, 384, 512));
    KT_OK(kiln_gpu_gemm(gpu, st, dout, 0, KILN_DTYPE_BF16, dx, dw, KILN_DTYPE_BF16, 0, 64, 384, 512));
    KT_CHECK(kiln_rt_blas_n_algos(kiln_gpu_blas(gpu)) == before);
    dfree(dx), dfree(dw), dfree(dout);
}

/* kiln_gpu_step_feed (kernel_src/embed.cu): a metadata block read from pinned host memory, the fed
 * tokens gathered (a count that ends mid 16-byte unit; none); bytes past the block untouched; a size
 * that is not a multiple of 16 refused. */
KT_TEST(test_step_feed) {
    NEED_GPU();
    const size_t n = 64 * 1024 + 256, tok_off = 1024, feed_off = 256;
    int32_t *h = NULL;
    KT_OK(kiln_rt_host_alloc(dev, n, (void **)&h));
    int32_t res_h[16];
    for (int i = 0; i < 16; i++) res_h[i] = 1000 + 7 * i;
    kiln_devptr res = dupload(res_h, sizeof res_h), dm = dmalloc(n + 256);
    static const int counts[] = {5, 0, 8, 1};
    for (int ci = 0; ci < 4; ci++) {
        const int nf = counts[ci];
        for (size_t i = 0; i < n / 4; i++) h[i] = (int32_t)(i * 2654435761u + (unsigned)ci);
        for (int i = 0; i < nf; i++) h[feed_off / 4 + (size_t)i] = (i * 5 + 3) % 16;
        KT_OK(kiln_rt_memset8(dm, 0xab, n + 256, NULL));
        KT_OK(kiln_gpu_step_feed(gpu, st, dm, h, n, tok_off, feed_off, nf, res));
        int32_t *got = ddown(dm, n + 256);
        size_t bad = 0;
        for (size_t i = 0; i < n / 4; i++) {
            const size_t k = i - tok_off / 4;
            const int32_t want = i >= tok_off / 4 && k < (size_t)nf ? res_h[(k * 5 + 3) % 16] : h[i];
            bad += got[i] != want;
        }
        for (size_t i = n / 4; i < (n + 256) / 4; i++) bad += got[i] != (int32_t)0xabababab;
        KT_CHECKF(bad == 0, "step_feed with %d fed tokens: %zu words wrong", nf, bad);
        free(got);
    }
    KT_CHECK(kiln_gpu_step_feed(gpu, st, dm, h, n - 4, tok_off, feed_off, 0, res) == KILN_ERR_INVALID_ARGUMENT);
    KT_OK(kiln_rt_stream_sync(st));
    kiln_rt_host_free(dev, h);
    dfree(res), dfree(dm);
    KT_CHECK(kiln_rt_check_device(dev) == KILN_OK);
}

KT_TEST(test_graph_replay) {
    NEED_GPU();
    kiln_dtype dt = KILN_DTYPE_BF16;
    int rows = 16, dim = 1024;
    size_t n = (size_t)rows * dim;
    float *x = rand_act(2 * n, dt, 1), *w = rand_act((size_t)dim, dt, 1), *ref = malloc(sizeof(float) * n);
    kiln_devptr dx = up_act(x, 2 * n, dt), dw = up_act(w, (size_t)dim, dt), dmid = dmalloc(n * 2), dout = dmalloc(n * 2);
    /* warm the kernels (no compiles during capture) */
    KT_OK(kiln_gpu_silu_mul(gpu, st, dmid, dx, dt, rows, dim));
    KT_OK(kiln_gpu_rmsnorm(gpu, st, dout, dmid, dw, dt, dt, rows, dim, 1e-6f));
    KT_OK(kiln_rt_stream_sync(st));
    kiln_rt_memset8(dout, 0xff, n * 2, NULL);
    kiln_rt_graph *g = NULL;
    KT_OK(kiln_rt_graph_begin(st));
    KT_OK(kiln_gpu_silu_mul(gpu, st, dmid, dx, dt, rows, dim));
    KT_OK(kiln_gpu_rmsnorm(gpu, st, dout, dmid, dw, dt, dt, rows, dim, 1e-6f));
    KT_OK(kiln_rt_graph_end(st, &g));
    for (int rep = 0; rep < 3; rep++) KT_OK(kiln_rt_graph_launch(g, st));
    float *mid = malloc(sizeof(float) * n);
    kiln_cpu_silu_mul(mid, x, rows, dim);
    void *tmp = malloc(n * 2);
    kiln_from_f32(tmp, dt, mid, n);
    kiln_to_f32(mid, tmp, dt, n);
    kiln_cpu_rmsnorm(ref, mid, w, KILN_DTYPE_F32, rows, dim, 1e-6f);
    float *got = down_act(dout, n, dt);
    CHECK_CLOSE(got, ref, n, dt, "graph replay");
    kiln_rt_graph_destroy(g);
    free(x), free(w), free(ref), free(mid), free(tmp), free(got);
    dfree(dx), dfree(dw), dfree(dmid), dfree(dout);
}

/* The one-shot all-reduce (kernel_src/allreduce.cu) on a group of one rank:
 * the sum is the input, eager over sizes around the 16-byte vectors and
 * grids of several blocks, and in a graph replayed 20 times on fresh inputs
 * (the epoch and data halves advance); the pull and the push exchange.
 * Two or more ranks: test_gpu_tp. */
KT_TEST(test_all_reduce_one_rank) {
    NEED_GPU();
    for (int push = 0; push < 2; push++) { /* both exchanges */
        kiln_rt_p2p *p = NULL;
        KT_OK(kiln_rt_p2p_create(dev, kiln_gpu_kernels(gpu), 1, 0, 0, push, &p));
        uint8_t h[KILN_RT_P2P_HANDLE_BYTES];
        kiln_rt_p2p_handle(p, h);
        KT_OK(kiln_rt_p2p_set_peers(p, h));
        static const kiln_dtype dts[3] = {KILN_DTYPE_BF16, KILN_DTYPE_F16, KILN_DTYPE_F32};
        static const size_t sizes[] = {1, 7, 8, 9, 4097, 100003};
        for (int di = 0; di < 3; di++)
            for (size_t si = 0; si < KILN_ARRAY_LEN(sizes); si++)
                for (int rep = 0; rep < 2; rep++) {
                    kiln_dtype dt = dts[di];
                    size_t n = sizes[si];
                    KT_CHECK(kiln_rt_p2p_fits(p, 256, n, dt));
                    float *x = rand_act(n, dt, 1);
                    kiln_devptr d = up_act(x, n, dt);
                    KT_OK(kiln_rt_p2p_all_reduce_sum(p, d, n, dt, st));
                    KT_OK(kiln_rt_stream_sync(st));
                    float *got = down_act(d, n, dt);
                    size_t bad = 0;
                    for (size_t i = 0; i < n; i++) bad += got[i] != x[i];
                    KT_CHECKF(!bad, "%s n=%zu: %zu of %zu differ", kiln_dtype_name(dt), n, bad, n);
                    free(x), free(got);
                    dfree(d);
                }
        const size_t n = 100003;
        const kiln_dtype dt = KILN_DTYPE_BF16;
        kiln_devptr src = dmalloc(n * 2), io = dmalloc(n * 2);
        kiln_rt_graph *g = NULL;
        KT_OK(kiln_rt_graph_begin(st));
        KT_OK(kiln_rt_memcpy_dtod(io, src, n * 2, st));
        KT_OK(kiln_rt_p2p_all_reduce_sum(p, io, n, dt, st));
        KT_OK(kiln_rt_p2p_all_reduce_sum(p, io, 9, dt, st)); /* another grid */
        KT_OK(kiln_rt_graph_end(st, &g));
        for (int rep = 0; rep < 20; rep++) {
            float *x = rand_act(n, dt, 1);
            void *tmp = malloc(n * 2);
            kiln_from_f32(tmp, dt, x, n);
            KT_OK(kiln_rt_memcpy_htod(src, tmp, n * 2, st));
            KT_OK(kiln_rt_graph_launch(g, st));
            float *got = down_act(io, n, dt);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) bad += got[i] != x[i];
            KT_CHECKF(!bad, "graph replay %d: %zu of %zu differ", rep, bad, n);
            free(x), free(tmp), free(got);
        }
        kiln_rt_graph_destroy(g);
        if (push) { /* the GEMV with the push all-reduce + add + RMSNorm on one rank: GEMV, add, norm */
            kiln_gpu_params gp = {.max_sample_rows = 1, .vocab = 16, .gemv_max_m = 1, .gemv_ar = 1};
            kiln_gpu *gv = NULL;
            KT_OK(kiln_gpu_create(dev, &gp, &gv));
            static const int Ns[] = {4096, 5000};
            for (int ni = 0; ni < 2; ni++) {
                const int N = Ns[ni], K = 520;
                KT_REQUIRE(kiln_gpu_gemm_ar_norm_ok(gv, p, dt, 1, N, K));
                float *x = rand_act((size_t)K, dt, 1), *w = rand_act((size_t)N * K, dt, 0.05f),
                      *res = rand_act((size_t)N, dt, 1), *nw = rand_act((size_t)N, dt, 1),
                      *y = malloc(sizeof(float) * (size_t)N), *o = malloc(sizeof(float) * (size_t)N);
                kiln_devptr dx = up_act(x, (size_t)K, dt), dw = up_act(w, (size_t)N * K, dt),
                            dres = up_act(res, (size_t)N, dt), dnw = up_act(nw, (size_t)N, dt),
                            dio = dmalloc((size_t)N * 2), dout = dmalloc((size_t)N * 2);
                KT_OK(kiln_gpu_gemm_ar_norm(gv, st, p, dio, dx, dw, dt, N, K, dres, dnw, dout, 1e-5f));
                kiln_cpu_gemm(NULL, y, N, x, w, KILN_DTYPE_F32, NULL, KILN_DTYPE_F32, 1, N, K);
                void *tmp = malloc((size_t)N * 2);
                kiln_from_f32(tmp, dt, y, (size_t)N), kiln_to_f32(y, tmp, dt, (size_t)N);
                float *gio = down_act(dio, (size_t)N, dt), *gres = down_act(dres, (size_t)N, dt),
                      *gout = down_act(dout, (size_t)N, dt);
                CHECK_CLOSE(gio, y, (size_t)N, dt, "gemv + all-reduce + norm, one rank, N %d: io", N);
                double ss = 0;
                for (int j = 0; j < N; j++) res[j] += y[j];
                kiln_from_f32(tmp, dt, res, (size_t)N), kiln_to_f32(res, tmp, dt, (size_t)N);
                for (int j = 0; j < N; j++) ss += (double)res[j] * res[j];
                for (int j = 0; j < N; j++) o[j] = res[j] * (float)(1.0 / sqrt(ss / N + 1e-5)) * nw[j];
                CHECK_CLOSE(gres, res, (size_t)N, dt, "gemv + all-reduce + norm, one rank, N %d: residual", N);
                CHECK_CLOSE(gout, o, (size_t)N, dt, "gemv + all-reduce + norm, one rank, N %d: out", N);
                free(x), free(w), free(res), free(nw), free(y), free(o), free(tmp), free(gio), free(gres), free(gout);
                dfree(dx), dfree(dw), dfree(dres), dfree(dnw), dfree(dio), dfree(dout);
            }
            gemv_ar_tested = kiln_rt_kernels_was_used(kiln_gpu_kernels(gv), "gemv_ar_norm");
            KT_CHECK(gemv_ar_tested);
            kiln_gpu_destroy(gv);
        }
        /* the push all-gather of one rank: out = send, rows of a width whose bytes are whole vectors */
        if (push) {
            const size_t rows = 3, width = 1000;
            KT_CHECK(kiln_rt_p2p_fits_gather(p, src, io, rows, width, dt));
            KT_CHECK(!kiln_rt_p2p_fits_gather(p, src, io, rows, 1001, dt)); /* 2002 bytes a row */
            float *x = rand_act(rows * width, dt, 1);
            kiln_devptr d = up_act(x, rows * width, dt);
            KT_OK(kiln_rt_p2p_all_gather(p, d, io, rows, width, dt, st));
            float *got = down_act(io, rows * width, dt);
            size_t bad = 0;
            for (size_t i = 0; i < rows * width; i++) bad += got[i] != x[i];
            KT_CHECKF(!bad, "all-gather of one rank: %zu of %zu differ", bad, rows * width);
            free(x), free(got);
            dfree(d);
        } else {
            KT_CHECK(!kiln_rt_p2p_fits_gather(p, src, io, 1, 1000, dt));
        }
        dfree(src), dfree(io);
        kiln_rt_p2p_destroy(p);
    }
}

/* Whether this process launched registry kernel `name`: the shared kiln_gpu's
 * record, or the flags of the tests that run it on a kiln_gpu of their own */
static bool used_here(const char *name) {
    return kiln_rt_kernels_was_used(kiln_gpu_kernels(gpu), name) || (!strcmp(name, "gemv") && gemv_tested) ||
           (!strcmp(name, "gemv_rope") && gemv_rope_tested) || (!strcmp(name, "gemm_sk_rope") && sk_rope_tested) ||
           (!strcmp(name, "gemv_ar_norm") && gemv_ar_tested) || (!strcmp(name, "gemm_tc") && tc_tested) ||
           (!strcmp(name, "gemm_sk") && sk_tested) || (!strcmp(name, "gemm_sk_wg") && sk_wg_tested) ||
           (!strcmp(name, "gemm_sk_tma") && sk_tma_tested) || (!strcmp(name, "gemm_skx") && skx_tested) ||
           (!strcmp(name, "gemm_sk_rope_wg") && sk_rope_wg_tested) ||
           (!strcmp(name, "gemm_tc_reduce") && tc_reduce_tested);
}
/* kernels this device never launches: the sm_90a ones elsewhere */
static bool exempt_here(const char *name) {
    return !sm90_device() && (!strcmp(name, "gemm_sk_wg") || !strcmp(name, "gemm_sk_tma") ||
                              !strcmp(name, "gemm_sk_rope_wg") || !strcmp(name, "attn_prefill_wg2") ||
                              !strcmp(name, "attn_prefill_wg2p"));
}

/* $KT_KERNELS_USED=PREFIX: the suite split over processes (case filters run in
 * parallel, then `test_gpu_ops every_kernel_tested` alone, all with the same
 * PREFIX). Each process writes the registry kernels it launched to
 * PREFIX.<pid> as it exits, and test_every_kernel_tested also counts those
 * listed in every PREFIX.* file. */
static void dump_used(void) {
    const char *pre = getenv("KT_KERNELS_USED");
    if (!pre || !*pre || !gpu) return;
    char path[4096];
    snprintf(path, sizeof path, "%s.%ld", pre, (long)getpid());
    FILE *f = fopen(path, "w");
    if (!f) return;
    int n = 0;
    const kiln_jit_kernel_def *reg = kiln_jit_registry(&n);
    for (int i = 0; i < n; i++)
        if (used_here(reg[i].name)) fprintf(f, "%s\n", reg[i].name);
    fclose(f);
}
/* whether a file PREFIX.* lists kernel `name` */
static bool used_elsewhere(const char *name) {
    const char *pre = getenv("KT_KERNELS_USED");
    if (!pre || !*pre) return false;
    char pat[4096];
    snprintf(pat, sizeof pat, "%s.*", pre);
    glob_t g;
    bool found = false;
    if (glob(pat, 0, NULL, &g) != 0) return false;
    for (size_t i = 0; i < g.gl_pathc && !found; i++) {
        FILE *f = fopen(g.gl_pathv[i], "r");
        char line[256];
        while (f && !found && fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = 0;
            found = !strcmp(line, name);
        }
        if (f) fclose(f);
    }
    globfree(&g);
    return found;
}

/* last: a registry kernel no test launched fails the suite */
KT_TEST(test_every_kernel_tested) {
    NEED_GPU();
    int n = 0;
    const kiln_jit_kernel_def *reg = kiln_jit_registry(&n);
    for (int i = 0; i < n; i++)
        KT_CHECKF(used_here(reg[i].name) || exempt_here(reg[i].name) || used_elsewhere(reg[i].name),
                  "registry kernel %s has no GPU test", reg[i].name);
    KT_CHECK(kiln_rt_check_device(dev) == KILN_OK);
}

KT_MAIN(KT_CASE(test_embed), KT_CASE(test_rmsnorm), KT_CASE(test_glu_add_gather_cast), KT_CASE(test_rope),
        KT_CASE(test_kv_write_and_fused_rope), KT_CASE(test_fp8_cast), KT_CASE(test_attention_decode),
        KT_CASE(test_attention_decode_2warps),
        KT_CASE(test_attention_decode_fused), KT_CASE(test_attention_decode_pw), KT_CASE(test_attention_decode_rope),
        KT_CASE(test_attention_prefill), KT_CASE(test_attention_prefill_shapes),
        KT_CASE(test_attention_prefill_wg), KT_CASE(test_attention_fp8), KT_CASE(test_sampling), KT_CASE(test_sampling_greedy),
        KT_CASE(test_gemv),
        KT_CASE(test_gemv_rope), KT_CASE(test_gemv_norm), KT_CASE(test_gemm_sk_rope), KT_CASE(test_gemm_tc), KT_CASE(test_gemm_sk),
        KT_CASE(test_gemm_skx), KT_CASE(test_silu_gemm_sk),
        KT_CASE(test_gemm), KT_CASE(test_step_feed), KT_CASE(test_graph_replay),
        KT_CASE(test_all_reduce_one_rank), KT_CASE(test_every_kernel_tested))
