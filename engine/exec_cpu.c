/*
 * exec_cpu.c -- the CPU executor: weights as fp32/bf16/fp16 in host memory
 * (memory-mapped where a weight is one whole tensor), fp32 activations, the
 * paged KV cache in host memory (f32, bf16, fp16 or FP8 with per-layer or
 * per-head scales), and one loop over the program calling the reference ops
 * of ops_cpu.c. FP8 calibration runs forwards on a temporary f32 cache and
 * records the largest |k| and |v| written.
 * Ownership: owns its weights (copies), caches and slot buffers; borrows the
 * model files. Thread-safety: one thread drives it; ops use the pool.
 */
#include "exec.h"

#include "comm.h"
#include "ops_cpu.h"
#include "profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct cpu_weight {
    const void *data;
    void *owned;
    kiln_dtype dtype;
    int64_t rows, cols;
} cpu_weight;

typedef struct exec_cpu {
    kiln_exec base;
    const kiln_model_files *mf;
    const kiln_program *p;
    kiln_exec_config cfg;
    kiln_pool *pool;
    cpu_weight *w;
    float **slot;            /* [n_slots] -> [rows_max, width]                */
    void **kcache, **vcache; /* [n_kv_layers]                                 */
    kiln_kv_layout *layouts; /* [n_kv_layers] one per layer (its FP8 scales) */
    float *scales;           /* [n_kv_layers, 2, n_kv_heads] FP8 scales       */
    /* calibration (kv_calibrate): temporary f32 caches and what they saw */
    bool calib;
    void **ckc, **cvc;       /* [n_kv_layers]                                 */
    kiln_kv_layout clayout;
    float *amax;             /* [n_kv_layers, 2, n_kv_heads]                  */
    float *inv_freq;
    float mscale;
    int32_t *dyn_len;        /* [max_tokens] dynamic-rope sequence lengths    */
    float *samp_row;         /* [vocab] sampling scratch                      */
    void *samp_work;
    int32_t *samp_scratch;   /* [vocab], zero between calls                   */
    /* pipelined decode (cpu_launch_sample): up to two steps' tokens, oldest
     * at pend_head */
    int32_t *pend_tok[2], *feed_tok;
    float *pend_lp[2];
    int pend_n[2], pend_head, n_pend;
    uint64_t fail_at;        /* tests: $KILN_DEBUG_FAIL_AFTER_STEPS forward
                                passes succeed, then a device fault       */
    kiln_profile prof;
} exec_cpu;

size_t kiln_kv_bytes_per_block(const kiln_program *p, int block_size, kiln_dtype kv_dtype) {
    return (size_t)p->n_kv_layers * 2 * (size_t)block_size * (size_t)p->n_kv_heads * (size_t)p->head_dim *
           kiln_dtype_size(kv_dtype);
}

/* ------------------------------------------------------------- weights */

static kiln_status load_weight(exec_cpu *x, int i) {
    kiln_status st = KILN_OK;
    const kiln_weight_desc *d = &x->p->weights[i];
    cpu_weight *w = &x->w[i];
    w->rows = d->rows;
    w->cols = d->cols;
    if (x->mf->dummy) {
        /* random weights: norms 1, matrices N(0, 0.02) (Box-Muller on Philox) */
        size_t n = (size_t)(d->rows * d->cols);
        uint16_t *buf = malloc(n * 2);
        KILN_CHECK_ALLOC(buf);
        uint64_t key = x->cfg.seed ^ kiln_hash64(d->id, strlen(d->id), 0);
        for (size_t k = 0; k < n; k += 2) {
            uint32_t r[4];
            kiln_philox4x32(key, 0, k, r);
            float u1 = (kiln_u32_to_unit(r[0]) + 1e-7f), u2 = kiln_u32_to_unit(r[1]);
            float rad = sqrtf(-2.0f * logf(u1));
            float a = d->ndim == 1 ? 1.0f : 0.02f * rad * cosf(6.2831853f * u2);
            float b = d->ndim == 1 ? 1.0f : 0.02f * rad * sinf(6.2831853f * u2);
            buf[k] = kiln_f32_to_bf16(a);
            if (k + 1 < n) buf[k + 1] = kiln_f32_to_bf16(b);
        }
        w->owned = buf;
        w->data = buf;
        w->dtype = KILN_DTYPE_BF16;
        return KILN_OK;
    }
    const kiln_checkpoint *ck = &x->mf->ck;
    if (d->n_parts == 1) {
        const kiln_weight_part *q = &d->parts[0];
        const kiln_tensor_info *t = kiln_checkpoint_find(ck, q->tensor);
        KILN_CHECK_INTERNAL(t);
        /* zero copy from the mmap, unless the data section leaves the tensor misaligned for its
         * element type (the format does not require padding): the CPU ops read W through typed pointers */
        if (q->r_lo == 0 && q->r_n == t->shape[0] && q->c_lo == 0 && (q->ndim == 1 || q->c_n == t->shape[1]) &&
            (uintptr_t)t->data % kiln_dtype_size(t->dtype) == 0) {
            w->data = t->data;
            w->dtype = t->dtype;
            return KILN_OK;
        }
    }
    kiln_dtype dt = kiln_checkpoint_find(ck, d->parts[0].tensor)->dtype;
    for (int j = 1; j < d->n_parts; j++)
        if (kiln_checkpoint_find(ck, d->parts[j].tensor)->dtype != dt) dt = KILN_DTYPE_F32;
    size_t es = kiln_dtype_size(dt);
    char *buf = malloc((size_t)(d->rows * d->cols) * es);
    KILN_CHECK_ALLOC(buf);
    char *o = buf;
    for (int j = 0; j < d->n_parts; j++) {
        const kiln_weight_part *q = &d->parts[j];
        const kiln_tensor_info *t = kiln_checkpoint_find(ck, q->tensor);
        int64_t tcols = q->ndim == 2 ? t->shape[1] : 1;
        size_t tes = kiln_dtype_size(t->dtype);
        for (int64_t r = 0; r < q->r_n; r++) {
            const char *src = (const char *)t->data + ((size_t)((q->r_lo + r) * tcols + q->c_lo)) * tes;
            if (t->dtype == dt)
                memcpy(o, src, (size_t)q->c_n * es);
            else
                kiln_to_f32((float *)o, src, t->dtype, (size_t)q->c_n);
            o += (size_t)q->c_n * es;
        }
    }
    w->owned = buf;
    w->data = buf;
    w->dtype = dt;
fail:
    return st;
}

/* ------------------------------------------------------------- kv cache */

/* amax[layer] = max(amax, |k|, |v|) over the rows written this step. */
static void record_amax(exec_cpu *x, int layer, const float *k, const float *v, int64_t stride, const int32_t *slots,
                        int64_t T) {
    int nkv = x->p->n_kv_heads, hd = x->p->head_dim;
    float *ak = x->amax + (size_t)layer * 2 * (size_t)nkv, *av = ak + nkv;
    for (int64_t t = 0; t < T; t++) {
        if (slots[t] < 0) continue;
        for (int h = 0; h < nkv; h++)
            for (int d = 0; d < hd; d++) {
                float a = fabsf(k[t * stride + h * hd + d]), b = fabsf(v[t * stride + h * hd + d]);
                if (a > ak[h] || a != a) ak[h] = a; /* NaN sticks: it makes the scale invalid */
                if (b > av[h] || b != b) av[h] = b;
            }
    }
}

static void free_calib(exec_cpu *x) {
    if (x->ckc)
        for (int i = 0; i < x->p->n_kv_layers; i++) free(x->ckc[i]);
    if (x->cvc)
        for (int i = 0; i < x->p->n_kv_layers; i++) free(x->cvc[i]);
    free(x->ckc);
    free(x->cvc);
    x->ckc = x->cvc = NULL;
    x->calib = false;
}

static kiln_status cpu_kv_calibrate(kiln_exec *base, int n_tokens) {
    exec_cpu *x = (exec_cpu *)base;
    kiln_status st = KILN_OK;
    const kiln_program *p = x->p;
    free_calib(x);
    if (n_tokens <= 0) return KILN_OK;
    int nb = KILN_DIV_UP(n_tokens, x->cfg.block_size);
    size_t bytes = kiln_kv_layout_init(&x->clayout, nb, x->cfg.block_size, p->n_kv_heads, p->head_dim, KILN_DTYPE_F32);
    x->ckc = calloc((size_t)p->n_kv_layers, sizeof(void *));
    x->cvc = calloc((size_t)p->n_kv_layers, sizeof(void *));
    KILN_CHECK_ALLOC(x->ckc);
    KILN_CHECK_ALLOC(x->cvc);
    for (int i = 0; i < p->n_kv_layers; i++) {
        x->ckc[i] = calloc(1, bytes);
        x->cvc[i] = calloc(1, bytes);
        KILN_CHECK(x->ckc[i] && x->cvc[i], KILN_ERR_OUT_OF_MEMORY, "out of host memory for the calibration cache");
    }
    memset(x->amax, 0, sizeof(float) * (size_t)p->n_kv_layers * 2 * (size_t)p->n_kv_heads);
    x->calib = true;
    return KILN_OK;
fail:
    free_calib(x);
    return st;
}

static void cpu_kv_amax(kiln_exec *base, float *amax) {
    exec_cpu *x = (exec_cpu *)base;
    kiln_kv_merge_amax(x->mf, x->amax, amax);
}

static kiln_status cpu_set_kv_scales(kiln_exec *base, const float *scales) {
    exec_cpu *x = (exec_cpu *)base;
    const kiln_program *p = x->p;
    int G = kiln_kv_n_global_heads(x->mf), nkv = p->n_kv_heads;
    for (int l = 0; l < p->n_kv_layers; l++)
        for (int w = 0; w < 2; w++)
            for (int h = 0; h < nkv; h++) {
                float s = scales[((size_t)l * 2 + (size_t)w) * (size_t)G + (size_t)kiln_kv_global_head(p, G, h)];
                if (!(s > 0 && s < INFINITY))
                    return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "KV cache layer %d: %s scale %g of head %d is not a "
                                     "positive finite number", l, w ? "value" : "key", (double)s, h);
                x->scales[((size_t)l * 2 + (size_t)w) * (size_t)nkv + (size_t)h] = s;
            }
    for (int l = 0; l < p->n_kv_layers; l++) {
        kiln_kv_layout *L = &x->layouts[l];
        L->head_scales = x->scales + (size_t)l * 2 * (size_t)nkv;
        L->k_scale = kiln_kv_scale(L, 0, 0);
        L->v_scale = kiln_kv_scale(L, 1, 0);
    }
    return KILN_OK;
}

/* -------------------------------------------------------------- forward */

static int64_t rows_of(const kiln_program *p, int slot, const kiln_batch *b) {
    return p->slots[slot].per_out ? b->n_out : b->n_tokens;
}

static kiln_status cpu_forward(kiln_exec *base, const kiln_batch *b, const float **logits) {
    exec_cpu *x = (exec_cpu *)base;
    const kiln_program *p = x->p;
    kiln_status st = KILN_OK;
    KILN_CHECK(!x->fail_at || base->n_forward < x->fail_at, KILN_ERR_DEVICE,
               "injected device fault after %llu forward passes (KILN_DEBUG_FAIL_AFTER_STEPS)",
               (unsigned long long)x->fail_at);
    KILN_CHECK(b->n_tokens >= 1 && b->n_tokens <= x->cfg.max_tokens && b->n_out <= x->cfg.max_out &&
                   b->n_seqs <= x->cfg.max_seqs,
               KILN_ERR_INTERNAL, "batch of %d tokens / %d outputs / %d seqs exceeds the plan (%d / %d / %d)",
               b->n_tokens, b->n_out, b->n_seqs, x->cfg.max_tokens, x->cfg.max_out, x->cfg.max_seqs);
    kiln_rope_params rp = {p->head_dim, p->rot_dim, p->rope_interleaved, x->inv_freq, x->mscale, NULL, 0, 0, 0};
    if (!strcmp(p->rope.type, "dynamic")) {
        for (int s = 0; s < b->n_seqs; s++)
            for (int t = b->qstart[s]; t < b->qstart[s + 1]; t++) x->dyn_len[t] = b->ctx_len[s];
        rp.dyn_seq_len = x->dyn_len;
        rp.dyn_max = p->rope.original_max_position > 0 ? p->rope.original_max_position
                                                       : x->mf->cfg.max_position_embeddings;
        rp.dyn_base = p->rope.theta;
        rp.dyn_factor = p->rope.factor;
    }
    double t_op = x->prof.on ? kiln_now_sec() : 0;
    const bool prof_decode = b->max_q_len == 1 && b->n_tokens == b->n_seqs;
    for (int i = 0; i < p->n_ops; i++) {
        const kiln_op *o = &p->ops[i];
        if (x->prof.on && i) {
            double t = kiln_now_sec();
            kiln_profile_add(&x->prof, p, i - 1, (t - t_op) * 1e3, prof_decode);
            t_op = t;
        }
        float *D = o->dst >= 0 ? x->slot[o->dst] : NULL;
        float *S = o->src >= 0 ? x->slot[o->src] : NULL;
        float *S2 = o->src2 >= 0 ? x->slot[o->src2] : NULL;
        const cpu_weight *W = o->w >= 0 ? &x->w[o->w] : NULL;
        int64_t dw = o->dst >= 0 ? p->slots[o->dst].width : 0;
        int64_t sw = o->src >= 0 ? p->slots[o->src].width : 0;
        int64_t rows = o->src >= 0 ? rows_of(p, o->src, b) : (o->dst >= 0 ? rows_of(p, o->dst, b) : 0);
        switch (o->kind) {
        case KILN_OP_EMBED:
            kiln_cpu_embed(D, b->tokens, b->n_tokens, W->data, W->dtype, W->rows, W->cols, p->vocab_start);
            break;
        case KILN_OP_RMSNORM: kiln_cpu_rmsnorm(D, S, W->data, W->dtype, rows, dw, o->eps); break;
        case KILN_OP_ADD_RMSNORM: kiln_cpu_add_rmsnorm(D, S2, S, W->data, W->dtype, rows, dw, o->eps); break;
        case KILN_OP_ADD: kiln_cpu_add(D, S, S2, rows * dw); break;
        case KILN_OP_SCALE: kiln_cpu_scale(D, S, o->scale, rows * dw); break;
        case KILN_OP_GEMM: {
            const cpu_weight *B = o->bias >= 0 ? &x->w[o->bias] : NULL;
            kiln_cpu_gemm(x->pool, D + o->dst_col, dw, S, W->data, W->dtype, B ? B->data : NULL,
                          B ? B->dtype : KILN_DTYPE_F32, rows, W->rows, W->cols);
            break;
        }
        case KILN_OP_ROPE: kiln_cpu_rope(S, sw, b->positions, b->n_tokens, o->n_heads, o->n_kv_heads, &rp); break;
        case KILN_OP_ROPE_KV_WRITE:
            kiln_cpu_rope(S, sw, b->positions, b->n_tokens, o->n_heads, o->n_kv_heads, &rp);
            /* fall through */
        case KILN_OP_KV_WRITE: {
            const float *k = S + (int64_t)o->n_heads * o->head_dim;
            const float *v = k + (int64_t)o->n_kv_heads * o->head_dim;
            if (x->calib) {
                kiln_cpu_kv_write(x->ckc[o->kv_layer], x->cvc[o->kv_layer], &x->clayout, k, v, sw, b->slots,
                                  b->n_tokens);
                record_amax(x, o->kv_layer, k, v, sw, b->slots, b->n_tokens);
            } else {
                kiln_cpu_kv_write(x->kcache[o->kv_layer], x->vcache[o->kv_layer], &x->layouts[o->kv_layer], k, v, sw,
                                  b->slots, b->n_tokens);
            }
            break;
        }
        case KILN_OP_ATTENTION:
            kiln_cpu_attention(x->pool, D, S, sw, x->calib ? x->ckc[o->kv_layer] : x->kcache[o->kv_layer],
                               x->calib ? x->cvc[o->kv_layer] : x->vcache[o->kv_layer],
                               x->calib ? &x->clayout : &x->layouts[o->kv_layer], o->n_heads, b->qstart, b->ctx_len,
                               b->n_seqs, b->block_tables, b->max_blocks, o->scale, o->window);
            break;
        case KILN_OP_SILU_MUL: kiln_cpu_silu_mul(D, S, rows, dw); break;
        case KILN_OP_GELU_MUL: kiln_cpu_gelu_mul(D, S, rows, dw); break;
        case KILN_OP_GATHER_LAST: kiln_cpu_gather_rows(D, S, b->out_rows, b->n_out, dw); break;
        case KILN_OP_CROSS_ATTENTION: {
            KILN_CHECK(base->cross && b->cross_tables && b->cross_ctx, KILN_ERR_INTERNAL,
                       "cross_attention without a verifier cache");
            const void *kc, *vc;
            const kiln_kv_layout *xl;
            base->cross->vt->kv_layer(base->cross, o->kv_layer, &kc, &vc, &xl);
            KILN_CHECK(xl->n_kv_heads == o->n_kv_heads && xl->head_dim == o->head_dim, KILN_ERR_INVALID_ARGUMENT,
                       "the drafter expects %d kv heads of %d in the verifier's cache, which has %d of %d",
                       o->n_kv_heads, o->head_dim, xl->n_kv_heads, xl->head_dim);
            kiln_cpu_cross_attention(x->pool, D, S, sw, b->positions, &rp, o->pos_offset, kc, vc, xl, o->n_heads,
                                     b->qstart, b->cross_ctx, b->n_seqs, b->cross_tables, b->max_blocks, o->scale);
            break;
        }
        case KILN_OP_ALL_REDUCE:
            if (x->cfg.comm) KILN_TRY(kiln_comm_all_reduce_f32(x->cfg.comm, S, (size_t)(rows * sw)));
            break;
        case KILN_OP_ALL_GATHER:
            if (x->cfg.comm)
                KILN_TRY(kiln_comm_all_gather_cols_f32(x->cfg.comm, S, D, (size_t)rows, (size_t)sw));
            else
                memcpy(D, S, sizeof(float) * (size_t)(rows * sw));
            break;
        default: KILN_CHECK(false, KILN_ERR_INTERNAL, "op kind %d has no CPU variant", (int)o->kind);
        }
    }
    if (x->prof.on) {
        kiln_profile_add(&x->prof, p, p->n_ops - 1, (kiln_now_sec() - t_op) * 1e3, prof_decode);
        kiln_profile_step(&x->prof, prof_decode);
    }
    if (logits) *logits = x->slot[p->logits_slot]; /* NULL: a tensor-parallel rank > 0 */
    base->n_forward++;
fail:
    return st;
}

/* "Device" sampling on the CPU backend: the same sampler.h semantics, run
 * inside the executor, so the engine's device-sampling path is exercised
 * without a GPU. */
static kiln_status cpu_forward_sample(kiln_exec *base, const kiln_batch *b, const kiln_sample_req *rows,
                                      int32_t *tokens, float *logprobs) {
    exec_cpu *x = (exec_cpu *)base;
    const float *logits = NULL;
    kiln_status st = cpu_forward(base, b, &logits);
    if (st) return st;
    int V = x->p->vocab_size;
    int64_t stride = x->p->slots[x->p->logits_slot].width;
    for (int i = 0; i < b->n_out; i++) {
        const kiln_sample_req *q = &rows[i];
        float *row = x->samp_row;
        memcpy(row, logits + (size_t)i * (size_t)stride, sizeof(float) * (size_t)V);
        kiln_sampler_apply_penalties(row, V, q->prompt, q->n_prompt, q->output, q->n_output, q->repetition,
                                     q->presence, q->frequency, x->samp_scratch);
        for (int k = 0; k < q->n_banned; k++)
            if (q->banned[k] >= 0 && q->banned[k] < V) row[q->banned[k]] = -INFINITY;
        tokens[i] = kiln_sampler_sample(row, V, &q->p, x->samp_work);
        logprobs[i] = kiln_sampler_logprobs(row, V, tokens[i], 0, NULL);
    }
    return KILN_OK;
}

/* Pipelined decode on the CPU backend: a launch runs the step at once and
 * keeps its tokens until collected, so the engine's pipelined path is
 * tested without a GPU (nothing overlaps here). */
static kiln_status cpu_launch_sample(kiln_exec *base, const kiln_batch *b, const kiln_sample_req *rows,
                                     const int32_t *feed) {
    exec_cpu *x = (exec_cpu *)base;
    kiln_status st = KILN_OK;
    KILN_TRY(kiln_exec_launch_check(x->n_pend, b, feed));
    for (int i = 0; i < b->n_out && x->n_pend; i++)
        KILN_CHECK(!rows[i].n_prompt && !rows[i].n_output && !rows[i].n_banned, KILN_ERR_INTERNAL,
                   "penalties or bans with a sampled step outstanding");
    const int k = (x->pend_head + x->n_pend) % 2, prev = (x->pend_head + x->n_pend + 1) % 2;
    kiln_batch fb = *b;
    if (feed) {
        for (int i = 0; i < b->n_seqs; i++) {
            KILN_CHECK(feed[i] >= 0 && feed[i] < x->pend_n[prev], KILN_ERR_INTERNAL, "fed row %d of %d", feed[i],
                       x->pend_n[prev]);
            x->feed_tok[i] = x->pend_tok[prev][feed[i]];
        }
        fb.tokens = x->feed_tok;
    }
    KILN_TRY(cpu_forward_sample(base, &fb, rows, x->pend_tok[k], x->pend_lp[k]));
    x->pend_n[k] = b->n_out;
    x->n_pend++;
fail:
    return st;
}

static kiln_status cpu_collect_sample(kiln_exec *base, int32_t *tokens, float *logprobs) {
    exec_cpu *x = (exec_cpu *)base;
    kiln_status st = KILN_OK;
    KILN_CHECK(x->n_pend > 0, KILN_ERR_INTERNAL, "no sampled step is outstanding");
    const int k = x->pend_head;
    if (tokens) memcpy(tokens, x->pend_tok[k], sizeof(int32_t) * (size_t)x->pend_n[k]);
    if (logprobs) memcpy(logprobs, x->pend_lp[k], sizeof(float) * (size_t)x->pend_n[k]);
    x->pend_head = (k + 1) % 2;
    x->n_pend--;
fail:
    return st;
}

static void cpu_destroy(kiln_exec *base) {
    exec_cpu *x = (exec_cpu *)base;
    if (!x) return;
    kiln_profile_report(&x->prof, "cpu");
    kiln_profile_free(&x->prof);
    if (x->w)
        for (int i = 0; i < x->p->n_weights; i++) free(x->w[i].owned);
    free(x->w);
    if (x->slot)
        for (int i = 0; i < x->p->n_slots; i++) free(x->slot[i]);
    free(x->slot);
    if (x->kcache)
        for (int i = 0; i < x->p->n_kv_layers; i++) {
            free(x->kcache[i]);
            free(x->vcache[i]);
        }
    free(x->kcache);
    free(x->vcache);
    free(x->layouts);
    free(x->scales);
    free(x->amax);
    free_calib(x);
    free(x->inv_freq);
    free(x->dyn_len);
    free(x->samp_row);
    free(x->samp_work);
    free(x->samp_scratch);
    for (int k = 0; k < 2; k++) {
        free(x->pend_tok[k]);
        free(x->pend_lp[k]);
    }
    free(x->feed_tok);
    kiln_pool_destroy(x->pool);
    free(x);
}

static void cpu_kv_layer(kiln_exec *base, int layer, const void **k, const void **v, const kiln_kv_layout **l) {
    exec_cpu *x = (exec_cpu *)base;
    *k = x->kcache[layer];
    *v = x->vcache[layer];
    *l = &x->layouts[layer];
}

static const kiln_exec_vt cpu_vt = {cpu_forward,      cpu_forward_sample, cpu_destroy,       cpu_kv_layer,
                                    cpu_kv_calibrate, cpu_kv_amax,        cpu_set_kv_scales, cpu_launch_sample,
                                    cpu_collect_sample, false};

kiln_status kiln_exec_cpu_create(const kiln_model_files *mf, const kiln_exec_config *cfg, kiln_exec **out) {
    kiln_status st = KILN_OK;
    const kiln_program *p = mf->program;
    exec_cpu *x = calloc(1, sizeof *x);
    KILN_CHECK_ALLOC(x);
    x->base.vt = &cpu_vt;
    x->base.device = "cpu";
    x->mf = mf;
    x->p = p;
    x->cfg = *cfg;
    const char *fail_env = getenv("KILN_DEBUG_FAIL_AFTER_STEPS");
    if (fail_env && *fail_env) x->fail_at = strtoull(fail_env, NULL, 10);
    x->prof.on = kiln_profile_enabled();
    KILN_CHECK(p->tp_size == 1 || (cfg->comm && kiln_comm_size(cfg->comm) == p->tp_size &&
                                    kiln_comm_rank(cfg->comm) == p->tp_rank),
               KILN_ERR_INTERNAL, "rank %d of %d has no matching communicator", p->tp_rank, p->tp_size);
    KILN_TRY(kiln_pool_create(cfg->n_threads, &x->pool));
    /* weights */
    x->w = calloc((size_t)p->n_weights, sizeof *x->w);
    KILN_CHECK_ALLOC(x->w);
    for (int i = 0; i < p->n_weights; i++) {
        KILN_TRY(load_weight(x, i));
        x->base.weight_bytes += (size_t)(x->w[i].rows * x->w[i].cols) * kiln_dtype_size(x->w[i].dtype);
    }
    /* KV cache */
    kiln_dtype kvd = cfg->kv_dtype == KILN_DTYPE_INVALID ? KILN_DTYPE_F32 : cfg->kv_dtype;
    size_t per_block = kiln_kv_bytes_per_block(p, cfg->block_size, kvd);
    int nb = cfg->num_kv_blocks;
    if (nb <= 0) {
        size_t budget = cfg->kv_cache_bytes ? cfg->kv_cache_bytes : (size_t)256 << 20;
        nb = (int)KILN_MIN(budget / per_block, (size_t)INT32_MAX / (size_t)cfg->block_size);
    }
    KILN_CHECK(nb >= 1, KILN_ERR_OUT_OF_MEMORY,
               "the KV cache budget holds no block (%zu bytes per block of %d tokens); raise --kv-cache-size", per_block,
               cfg->block_size);
    x->layouts = calloc((size_t)p->n_kv_layers, sizeof *x->layouts);
    x->scales = calloc((size_t)p->n_kv_layers * 2 * (size_t)p->n_kv_heads, sizeof(float));
    x->amax = calloc((size_t)p->n_kv_layers * 2 * (size_t)p->n_kv_heads, sizeof(float));
    KILN_CHECK(x->layouts && x->scales && x->amax, KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    for (int l = 0; l < p->n_kv_layers; l++) {
        kiln_kv_layout_init(&x->layouts[l], nb, cfg->block_size, p->n_kv_heads, p->head_dim, kvd);
        x->layouts[l].k_scale = cfg->k_scale > 0 ? cfg->k_scale : 1.0f;
        x->layouts[l].v_scale = cfg->v_scale > 0 ? cfg->v_scale : 1.0f;
    }
    size_t layer_bytes = (size_t)nb * (size_t)cfg->block_size * (size_t)p->n_kv_heads * (size_t)p->head_dim *
                         kiln_dtype_size(kvd);
    x->kcache = calloc((size_t)p->n_kv_layers, sizeof(void *));
    x->vcache = calloc((size_t)p->n_kv_layers, sizeof(void *));
    KILN_CHECK_ALLOC(x->kcache);
    KILN_CHECK_ALLOC(x->vcache);
    for (int l = 0; l < p->n_kv_layers; l++) {
        x->kcache[l] = calloc(1, layer_bytes);
        x->vcache[l] = calloc(1, layer_bytes);
        KILN_CHECK(x->kcache[l] && x->vcache[l], KILN_ERR_OUT_OF_MEMORY,
                   "out of host memory for the KV cache (%zu bytes per layer)", layer_bytes);
    }
    x->base.num_kv_blocks = nb;
    x->base.kv_bytes_per_block = per_block;
    x->base.kv_dtype = kvd;
    x->base.act_dtype = KILN_DTYPE_F32;
    /* activations, planned once for the worst-case step */
    x->slot = calloc((size_t)p->n_slots, sizeof(float *));
    KILN_CHECK_ALLOC(x->slot);
    for (int i = 0; i < p->n_slots; i++) {
        int64_t rows = p->slots[i].per_out ? cfg->max_out : cfg->max_tokens;
        x->slot[i] = calloc((size_t)(rows * p->slots[i].width), sizeof(float));
        KILN_CHECK(x->slot[i], KILN_ERR_OUT_OF_MEMORY, "out of host memory for activation slot '%s' [%lld, %lld]",
                   p->slots[i].name, (long long)rows, (long long)p->slots[i].width);
    }
    x->inv_freq = calloc((size_t)p->rot_dim / 2, sizeof(float));
    x->dyn_len = calloc((size_t)cfg->max_tokens, sizeof(int32_t));
    KILN_CHECK_ALLOC(x->inv_freq);
    KILN_CHECK_ALLOC(x->dyn_len);
    KILN_TRY(kiln_rope_inv_freq(&p->rope, p->rot_dim, x->inv_freq, &x->mscale));
    x->samp_row = malloc(sizeof(float) * (size_t)p->vocab_size);
    x->samp_work = malloc(kiln_sampler_work_bytes(p->vocab_size));
    x->samp_scratch = calloc((size_t)p->vocab_size, sizeof(int32_t));
    KILN_CHECK(x->samp_row && x->samp_work && x->samp_scratch, KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    for (int k = 0; k < 2; k++) {
        x->pend_tok[k] = calloc((size_t)cfg->max_out, sizeof(int32_t));
        x->pend_lp[k] = calloc((size_t)cfg->max_out, sizeof(float));
        KILN_CHECK(x->pend_tok[k] && x->pend_lp[k], KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    x->feed_tok = calloc((size_t)cfg->max_out, sizeof(int32_t));
    KILN_CHECK_ALLOC(x->feed_tok);
    *out = &x->base;
    return KILN_OK;
fail:
    cpu_destroy(&x->base);
    return st;
}
