/*
 * ops_cpu.c -- CPU reference variants of every op kind (see ops_cpu.h).
 * Ownership: callers own all buffers. Thread-safety: pure functions; the
 * GEMM and attention split work across the given pool.
 */
#include "ops_cpu.h"

#include "model.h"

#include <math.h>
#include <stdlib.h>

static inline float load_w(const void *w, kiln_dtype t, int64_t i) {
    switch (t) {
    case KILN_DTYPE_BF16: return kiln_bf16_to_f32(((const uint16_t *)w)[i]);
    case KILN_DTYPE_F16: return kiln_f16_to_f32(((const uint16_t *)w)[i]);
    case KILN_DTYPE_F32: return ((const float *)w)[i];
    default: return NAN;
    }
}

void kiln_cpu_embed(float *out, const int32_t *ids, int64_t T, const void *w, kiln_dtype wdt, int64_t V_local,
                    int64_t H, int64_t vocab_start) {
    for (int64_t t = 0; t < T; t++) {
        int64_t r = (int64_t)ids[t] - vocab_start;
        if (r < 0 || r >= V_local) {
            memset(out + t * H, 0, (size_t)H * sizeof(float));
            continue;
        }
        kiln_to_f32(out + t * H, (const char *)w + (size_t)(r * H) * kiln_dtype_size(wdt), wdt, (size_t)H);
    }
}

static void rmsnorm_row(float *out, const float *x, const void *w, kiln_dtype wdt, int64_t dim, float eps) {
    double ss = 0; /* accumulate in double: the reference should not be the noisy side */
    for (int64_t i = 0; i < dim; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
    for (int64_t i = 0; i < dim; i++) out[i] = x[i] * r * load_w(w, wdt, i);
}

void kiln_cpu_rmsnorm(float *out, const float *x, const void *w, kiln_dtype wdt, int64_t rows, int64_t dim,
                      float eps) {
    for (int64_t r = 0; r < rows; r++) rmsnorm_row(out + r * dim, x + r * dim, w, wdt, dim, eps);
}

void kiln_cpu_add_rmsnorm(float *out, float *residual, const float *x, const void *w, kiln_dtype wdt,
                          int64_t rows, int64_t dim, float eps) {
    for (int64_t r = 0; r < rows; r++) {
        float *res = residual + r * dim;
        const float *xr = x + r * dim;
        for (int64_t i = 0; i < dim; i++) res[i] += xr[i];
        rmsnorm_row(out + r * dim, res, w, wdt, dim, eps);
    }
}

/* ------------------------------------------------------------------ GEMM */

#define GEMM_NB 8 /* weight rows converted and reused per task */

typedef struct gemm_ctx {
    float *out;
    int64_t ldo;
    const float *x;
    const void *w;
    kiln_dtype wdt;
    const void *bias;
    kiln_dtype bdt;
    int64_t M, N, K;
} gemm_ctx;

static inline float dot(const float *a, const float *b, int64_t K) {
    float acc[8] = {0};
    int64_t k = 0;
    for (; k + 8 <= K; k += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[k + j] * b[k + j];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; k < K; k++) s += a[k] * b[k];
    return s;
}

static void gemm_task(void *vctx, int64_t task) {
    gemm_ctx *c = vctx;
    int64_t n0 = task * GEMM_NB, n1 = KILN_MIN(n0 + GEMM_NB, c->N);
    size_t es = kiln_dtype_size(c->wdt);
    float *wf = NULL;
    if (c->wdt != KILN_DTYPE_F32) {
        wf = malloc(sizeof(float) * (size_t)(GEMM_NB * c->K));
        if (!wf) return; /* caller checks for NaN-free output in tests; OOM here is unrecoverable */
        kiln_to_f32(wf, (const char *)c->w + (size_t)(n0 * c->K) * es, c->wdt, (size_t)((n1 - n0) * c->K));
    }
    const float *W = wf ? wf : (const float *)c->w + n0 * c->K;
    for (int64_t m = 0; m < c->M; m++) {
        const float *xr = c->x + m * c->K;
        float *o = c->out + m * c->ldo;
        for (int64_t n = n0; n < n1; n++) {
            float s = dot(xr, W + (n - n0) * c->K, c->K);
            if (c->bias) s += load_w(c->bias, c->bdt, n);
            o[n] = s;
        }
    }
    free(wf);
}

void kiln_cpu_gemm(kiln_pool *pool, float *out, int64_t ldo, const float *x, const void *w, kiln_dtype wdt,
                   const void *bias, kiln_dtype bdt, int64_t M, int64_t N, int64_t K) {
    gemm_ctx c = {out, ldo, x, w, wdt, bias, bdt, M, N, K};
    kiln_pool_for(pool, KILN_DIV_UP(N, GEMM_NB), gemm_task, &c);
}

void kiln_cpu_add(float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void kiln_cpu_scale(float *out, const float *x, float s, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * s;
}

void kiln_cpu_silu_mul(float *out, const float *x, int64_t T, int64_t I) {
    for (int64_t t = 0; t < T; t++) {
        const float *g = x + t * 2 * I, *u = g + I;
        float *o = out + t * I;
        for (int64_t i = 0; i < I; i++) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
}

void kiln_cpu_gelu_mul(float *out, const float *x, int64_t T, int64_t I) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int64_t t = 0; t < T; t++) {
        const float *g = x + t * 2 * I, *u = g + I;
        float *o = out + t * I;
        for (int64_t i = 0; i < I; i++) {
            float v = g[i];
            o[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v))) * u[i];
        }
    }
}

void kiln_cpu_gather_rows(float *out, const float *x, const int32_t *rows, int64_t n, int64_t dim) {
    for (int64_t i = 0; i < n; i++) memcpy(out + i * dim, x + (int64_t)rows[i] * dim, sizeof(float) * (size_t)dim);
}

/* ------------------------------------------------------------------ rope */

kiln_status kiln_rope_inv_freq(const kiln_rope_config *rc, int rot_dim, float *inv_freq, float *mscale) {
    int half = rot_dim / 2;
    *mscale = 1.0f;
    for (int i = 0; i < half; i++) {
        /* torch: 1.0 / (base ** (arange(0, dim, 2).float() / dim)) in fp32 */
        float e = (float)(2 * i) / (float)rot_dim;
        inv_freq[i] = 1.0f / powf((float)rc->theta, e);
    }
    if (!strcmp(rc->type, "default") || !strcmp(rc->type, "dynamic")) return KILN_OK;
    if (!strcmp(rc->type, "linear")) {
        for (int i = 0; i < half; i++) inv_freq[i] /= (float)rc->factor;
        return KILN_OK;
    }
    if (!strcmp(rc->type, "llama3")) {
        double factor = rc->factor, lo = rc->low_freq_factor, hi = rc->high_freq_factor;
        double old_len = rc->original_max_position;
        double lo_wl = old_len / lo, hi_wl = old_len / hi;
        for (int i = 0; i < half; i++) {
            float f = inv_freq[i];
            float wl = 2.0f * (float)M_PI / f;
            float scaled = wl > (float)lo_wl ? f / (float)factor : f;
            float smooth = ((float)old_len / wl - (float)lo) / (float)(hi - lo);
            float smoothed = (1.0f - smooth) * scaled / (float)factor + smooth * scaled;
            bool medium = !(wl < (float)hi_wl) && !(wl > (float)lo_wl);
            inv_freq[i] = medium ? smoothed : scaled;
        }
        return KILN_OK;
    }
    return KILN_FAIL(KILN_ERR_UNSUPPORTED, "rope scaling type \"%s\" is not supported", rc->type);
}

void kiln_rope_dynamic_inv_freq(double base, double factor, int max_pos, int rot_dim, int seq_len, float *inv_freq) {
    /* HF _compute_dynamic_ntk_parameters */
    double b = base * pow((factor * seq_len / max_pos) - (factor - 1), (double)rot_dim / (rot_dim - 2));
    for (int i = 0; i < rot_dim / 2; i++) {
        float e = (float)(2 * i) / (float)rot_dim;
        inv_freq[i] = 1.0f / powf((float)b, e);
    }
}

static void rope_head(float *h, float p, const float *inv_freq, const kiln_rope_params *rp) {
    int half = rp->rot_dim / 2;
    for (int i = 0; i < half; i++) {
        float ang = p * inv_freq[i];
        float c = cosf(ang) * rp->mscale, s = sinf(ang) * rp->mscale;
        int a = rp->interleaved ? 2 * i : i, b = rp->interleaved ? 2 * i + 1 : i + half;
        float x0 = h[a], x1 = h[b];
        h[a] = x0 * c - x1 * s;
        h[b] = x1 * c + x0 * s;
    }
}

void kiln_cpu_rope(float *qkv, int64_t row_stride, const int32_t *pos, int64_t T, int nq, int nkv,
                   const kiln_rope_params *rp) {
    float dyn[512];
    for (int64_t t = 0; t < T; t++) {
        const float *inv = rp->inv_freq;
        if (rp->dyn_seq_len && rp->dyn_seq_len[t] > rp->dyn_max && rp->rot_dim / 2 <= 512) {
            kiln_rope_dynamic_inv_freq(rp->dyn_base, rp->dyn_factor, rp->dyn_max, rp->rot_dim, rp->dyn_seq_len[t],
                                       dyn);
            inv = dyn;
        }
        float *row = qkv + t * row_stride;
        for (int h = 0; h < nq + nkv; h++) rope_head(row + (int64_t)h * rp->head_dim, (float)pos[t], inv, rp);
    }
}

/* -------------------------------------------------------------- kv cache */

size_t kiln_kv_layout_init(kiln_kv_layout *l, int num_blocks, int block_size, int n_kv_heads, int head_dim,
                           kiln_dtype dtype) {
    memset(l, 0, sizeof *l);
    l->num_blocks = num_blocks;
    l->block_size = block_size;
    l->n_kv_heads = n_kv_heads;
    l->head_dim = head_dim;
    l->dtype = dtype;
    l->x = (int)(16 / kiln_dtype_size(dtype));
    if (head_dim % l->x) l->x = 1; /* odd head dims: no vectorised key layout */
    l->k_scale = l->v_scale = 1.0f;
    return (size_t)num_blocks * (size_t)block_size * (size_t)n_kv_heads * (size_t)head_dim * kiln_dtype_size(dtype);
}

static inline void kv_store(void *cache, kiln_dtype t, int64_t idx, float v, float scale) {
    switch (t) {
    case KILN_DTYPE_F32: ((float *)cache)[idx] = v; break;
    case KILN_DTYPE_BF16: ((uint16_t *)cache)[idx] = kiln_f32_to_bf16(v); break;
    case KILN_DTYPE_F16: ((uint16_t *)cache)[idx] = kiln_f32_to_f16(v); break;
    case KILN_DTYPE_FP8_E4M3: ((uint8_t *)cache)[idx] = kiln_f32_to_fp8_e4m3(v / scale); break;
    case KILN_DTYPE_FP8_E5M2: ((uint8_t *)cache)[idx] = kiln_f32_to_fp8_e5m2(v / scale); break;
    default: break;
    }
}

float kiln_cpu_kv_read(const void *cache, const kiln_kv_layout *l, int64_t idx, float scale) {
    switch (l->dtype) {
    case KILN_DTYPE_F32: return ((const float *)cache)[idx];
    case KILN_DTYPE_BF16: return kiln_bf16_to_f32(((const uint16_t *)cache)[idx]);
    case KILN_DTYPE_F16: return kiln_f16_to_f32(((const uint16_t *)cache)[idx]);
    case KILN_DTYPE_FP8_E4M3: return kiln_fp8_e4m3_to_f32(((const uint8_t *)cache)[idx]) * scale;
    case KILN_DTYPE_FP8_E5M2: return kiln_fp8_e5m2_to_f32(((const uint8_t *)cache)[idx]) * scale;
    default: return NAN;
    }
}

void kiln_cpu_kv_write(void *kcache, void *vcache, const kiln_kv_layout *l, const float *k, const float *v,
                       int64_t row_stride, const int32_t *slots, int64_t T) {
    for (int64_t t = 0; t < T; t++) {
        if (slots[t] < 0) continue;
        const float *kr = k + t * row_stride, *vr = v + t * row_stride;
        for (int h = 0; h < l->n_kv_heads; h++)
            for (int d = 0; d < l->head_dim; d++) {
                kv_store(kcache, l->dtype, kiln_kv_key_index(l, slots[t], h, d), kr[h * l->head_dim + d], l->k_scale);
                kv_store(vcache, l->dtype, kiln_kv_value_index(l, slots[t], h, d), vr[h * l->head_dim + d],
                         l->v_scale);
            }
    }
}

typedef struct attn_ctx {
    float *out;
    const float *q;
    int64_t q_stride;
    const void *kc, *vc;
    const kiln_kv_layout *l;
    int nq;
    const int32_t *qstart, *ctx_len, *bt;
    int n_seqs, max_blocks;
    float scale;
    int window;
    int64_t T;
    const int32_t *tok_seq; /* [T] sequence of each token */
} attn_ctx;

static void attn_task(void *vctx, int64_t item) {
    attn_ctx *c = vctx;
    const kiln_kv_layout *l = c->l;
    int64_t t = item / c->nq;
    int h = (int)(item % c->nq);
    int s = c->tok_seq[t];
    int q_len = c->qstart[s + 1] - c->qstart[s];
    int pos = c->ctx_len[s] - q_len + (int)(t - c->qstart[s]);
    int kvh = h / (c->nq / l->n_kv_heads);
    int hd = l->head_dim;
    int lo = c->window > 0 ? KILN_MAX(0, pos - c->window + 1) : 0;
    const float *q = c->q + t * c->q_stride + (int64_t)h * hd;
    float *o = c->out + t * (int64_t)c->nq * hd + (int64_t)h * hd;
    const int32_t *bt = c->bt + (int64_t)s * c->max_blocks;
    int n = pos + 1 - lo;
    float *scores = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!scores) return;
    float mx = -INFINITY;
    for (int j = lo; j <= pos; j++) {
        int64_t slot = (int64_t)bt[j / l->block_size] * l->block_size + j % l->block_size;
        double acc = 0;
        for (int d = 0; d < hd; d++)
            acc += (double)q[d] * kiln_cpu_kv_read(c->kc, l, kiln_kv_key_index(l, slot, kvh, d), l->k_scale);
        float sc = (float)acc * c->scale;
        scores[j - lo] = sc;
        if (sc > mx) mx = sc;
    }
    double sum = 0;
    for (int j = 0; j < n; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    for (int d = 0; d < hd; d++) o[d] = 0;
    for (int j = lo; j <= pos; j++) {
        int64_t slot = (int64_t)bt[j / l->block_size] * l->block_size + j % l->block_size;
        float p = (float)(scores[j - lo] / sum);
        for (int d = 0; d < hd; d++)
            o[d] += p * kiln_cpu_kv_read(c->vc, l, kiln_kv_value_index(l, slot, kvh, d), l->v_scale);
    }
    free(scores);
}

void kiln_cpu_attention(kiln_pool *pool, float *out, const float *q, int64_t q_stride, const void *kcache,
                        const void *vcache, const kiln_kv_layout *l, int nq, const int32_t *qstart,
                        const int32_t *ctx_len, int n_seqs, const int32_t *block_tables, int max_blocks,
                        float scale, int window) {
    int64_t T = qstart[n_seqs];
    int32_t *tok_seq = malloc(sizeof(int32_t) * (size_t)(T > 0 ? T : 1));
    if (!tok_seq) return;
    for (int s = 0; s < n_seqs; s++)
        for (int t = qstart[s]; t < qstart[s + 1]; t++) tok_seq[t] = s;
    attn_ctx c = {out, q, q_stride, kcache, vcache, l, nq, qstart, ctx_len, block_tables, n_seqs, max_blocks,
                  scale, window, T, tok_seq};
    kiln_pool_for(pool, T * nq, attn_task, &c);
    free(tok_seq);
}

typedef struct xattn_ctx {
    float *out;
    const float *q;
    int64_t q_stride;
    const int32_t *pos;
    const kiln_rope_params *rp;
    int pos_offset;
    const void *kc, *vc;
    const kiln_kv_layout *l;
    int nq;
    const int32_t *qstart, *ctx, *bt, *tok_seq;
    int max_blocks;
    float scale;
} xattn_ctx;

static void xattn_task(void *vctx, int64_t item) {
    xattn_ctx *c = vctx;
    const kiln_kv_layout *l = c->l;
    int64_t t = item / c->nq;
    int h = (int)(item % c->nq);
    int s = c->tok_seq[t], hd = l->head_dim;
    float *o = c->out + t * (int64_t)c->nq * hd + (int64_t)h * hd;
    int n = c->ctx[s];
    if (c->qstart[s + 1] - c->qstart[s] != 1 || n <= 0) {
        for (int d = 0; d < hd; d++) o[d] = 0;
        return;
    }
    float qh[1024];
    if (hd > 1024) return;
    memcpy(qh, c->q + t * c->q_stride + (int64_t)h * hd, sizeof(float) * (size_t)hd);
    kiln_rope_params rp = *c->rp;
    rp.head_dim = hd;
    rope_head(qh, (float)(c->pos[t] + c->pos_offset), rp.inv_freq, &rp);
    int kvh = h / (c->nq / l->n_kv_heads);
    const int32_t *bt = c->bt + (int64_t)s * c->max_blocks;
    float *scores = malloc(sizeof(float) * (size_t)n);
    if (!scores) return;
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        int64_t slot = (int64_t)bt[j / l->block_size] * l->block_size + j % l->block_size;
        double acc = 0;
        for (int d = 0; d < hd; d++)
            acc += (double)qh[d] * kiln_cpu_kv_read(c->kc, l, kiln_kv_key_index(l, slot, kvh, d), l->k_scale);
        scores[j] = (float)acc * c->scale;
        if (scores[j] > mx) mx = scores[j];
    }
    double sum = 0;
    for (int j = 0; j < n; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    for (int d = 0; d < hd; d++) o[d] = 0;
    for (int j = 0; j < n; j++) {
        int64_t slot = (int64_t)bt[j / l->block_size] * l->block_size + j % l->block_size;
        float p = (float)(scores[j] / sum);
        for (int d = 0; d < hd; d++)
            o[d] += p * kiln_cpu_kv_read(c->vc, l, kiln_kv_value_index(l, slot, kvh, d), l->v_scale);
    }
    free(scores);
}

void kiln_cpu_cross_attention(kiln_pool *pool, float *out, const float *q, int64_t q_stride, const int32_t *pos,
                              const kiln_rope_params *rp, int pos_offset, const void *kcache, const void *vcache,
                              const kiln_kv_layout *l, int nq, const int32_t *qstart, const int32_t *cross_ctx,
                              int n_seqs, const int32_t *cross_tables, int max_blocks, float scale) {
    int64_t T = qstart[n_seqs];
    int32_t *tok_seq = malloc(sizeof(int32_t) * (size_t)(T > 0 ? T : 1));
    if (!tok_seq) return;
    for (int s = 0; s < n_seqs; s++)
        for (int t = qstart[s]; t < qstart[s + 1]; t++) tok_seq[t] = s;
    xattn_ctx c = {out, q, q_stride, pos, rp, pos_offset, kcache, vcache, l, nq, qstart, cross_ctx, cross_tables,
                   tok_seq, max_blocks, scale};
    kiln_pool_for(pool, T * nq, xattn_task, &c);
    free(tok_seq);
}
