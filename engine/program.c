/*
 * program.c -- validation of a policy's plan into an immutable layer
 * program: weight slices per tensor-parallel rank, slot/weight/shape
 * consistency of every op, data flow (no slot read before it is written),
 * checks against the checkpoint, and the `kiln explain` listing.
 * Ownership: the program owns all its strings. Thread-safety: immutable.
 */
#include "program.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>

static const char *const op_names[KILN_OP_COUNT] = {
    [KILN_OP_EMBED] = "embed",          [KILN_OP_RMSNORM] = "rmsnorm",
    [KILN_OP_ADD_RMSNORM] = "add_rmsnorm", [KILN_OP_ADD] = "add",
    [KILN_OP_SCALE] = "scale",          [KILN_OP_GEMM] = "gemm",
    [KILN_OP_ROPE] = "rope",            [KILN_OP_KV_WRITE] = "kv_write",
    [KILN_OP_ROPE_KV_WRITE] = "rope_kv_write", [KILN_OP_ATTENTION] = "attention",
    [KILN_OP_SILU_MUL] = "silu_mul",    [KILN_OP_GELU_MUL] = "gelu_mul",
    [KILN_OP_GATHER_LAST] = "gather_last", [KILN_OP_ALL_REDUCE] = "all_reduce",
    [KILN_OP_ALL_GATHER] = "all_gather",
    [KILN_OP_CROSS_ATTENTION] = "cross_attention",
};

const char *kiln_op_kind_name(kiln_op_kind k) { return (k >= 0 && k < KILN_OP_COUNT) ? op_names[k] : "?"; }

const char *const *kiln_op_variants(kiln_op_kind k) {
    static const char *const generic[] = {"auto", "reference", NULL};
    static const char *const gemm[] = {"auto", "reference", "cublaslt", NULL};
    static const char *const attn[] = {"auto", "reference", "paged", "split_k", NULL};
    switch (k) {
    case KILN_OP_GEMM: return gemm;
    case KILN_OP_ATTENTION: return attn;
    default: return generic;
    }
}

const char *kiln_shard_name(kiln_shard_kind s) {
    static const char *n[] = {"replicated", "column", "row", "vocab", "kv_heads"};
    return (s >= 0 && s <= KILN_SHARD_KV_HEADS) ? n[s] : "?";
}

void kiln_program_free(kiln_program *p) {
    if (!p) return;
    for (int i = 0; i < p->n_ops; i++) free(p->ops[i].where);
    free(p->ops);
    for (int i = 0; i < p->n_slots; i++) free(p->slots[i].name);
    free(p->slots);
    for (int i = 0; i < p->n_weights; i++) {
        kiln_weight_desc *w = &p->weights[i];
        for (int j = 0; j < w->n_parts; j++) free(w->parts[j].tensor);
        free(w->id);
        free(w->where);
    }
    free(p->weights);
    for (int i = 0; i < p->n_kernels; i++) {
        free(p->kernels[i].name);
        free(p->kernels[i].source);
        free(p->kernels[i].entry);
        free(p->kernels[i].where);
    }
    free(p->kernels);
    free(p->kv_k_scales);
    free(p->kv_v_scales);
    free(p->policy_name);
    free(p->policy_file);
    free(p);
}

/* ---------------------------------------------------------- weight slices */

static kiln_status slice_part(const kiln_program *p, kiln_weight_desc *w, int j) {
    kiln_status st = KILN_OK;
    kiln_weight_part *q = &w->parts[j];
    int tp = p->tp_size, rank = p->tp_rank;
    const char *wh = w->where;
    KILN_CHECK(q->row0 >= 0 && q->nrows > 0 && q->row0 + q->nrows <= q->shape[0], KILN_ERR_POLICY,
               "%s: weight '%s' part %d: rows {%lld, %lld} fall outside tensor '%s' (%lld rows)", wh, w->id, j + 1,
               (long long)q->row0, (long long)q->nrows, q->tensor, (long long)q->shape[0]);
    q->r_lo = q->row0;
    q->r_n = q->nrows;
    q->c_lo = 0;
    q->c_n = q->ndim == 2 ? q->shape[1] : 1;
    switch (q->shard) {
    case KILN_SHARD_REPLICATED: break;
    case KILN_SHARD_COLUMN:
    case KILN_SHARD_VOCAB:
        KILN_CHECK(q->nrows % (tp * q->unit) == 0, KILN_ERR_POLICY,
                   "%s: weight '%s' part %d (%s): shard rule '%s' does not divide: %lld rows into %d ranks of "
                   "%lld-row units",
                   wh, w->id, j + 1, q->tensor, kiln_shard_name(q->shard), (long long)q->nrows, tp,
                   (long long)q->unit);
        q->r_n = q->nrows / tp;
        q->r_lo = q->row0 + rank * q->r_n;
        break;
    case KILN_SHARD_KV_HEADS: {
        KILN_CHECK(q->nrows % q->unit == 0, KILN_ERR_POLICY,
                   "%s: weight '%s' part %d (%s): %lld rows are not whole heads of %lld", wh, w->id, j + 1, q->tensor,
                   (long long)q->nrows, (long long)q->unit);
        int64_t heads = q->nrows / q->unit;
        if (heads >= tp) {
            KILN_CHECK(heads % tp == 0, KILN_ERR_POLICY,
                       "%s: weight '%s' part %d (%s): shard rule 'kv_heads' does not divide: %lld heads into %d ranks",
                       wh, w->id, j + 1, q->tensor, (long long)heads, tp);
            q->r_n = q->nrows / tp;
            q->r_lo = q->row0 + rank * q->r_n;
        } else {
            KILN_CHECK(tp % heads == 0, KILN_ERR_POLICY,
                       "%s: weight '%s' part %d (%s): %d ranks cannot share %lld heads evenly", wh, w->id, j + 1,
                       q->tensor, tp, (long long)heads);
            int64_t head = (int64_t)rank * heads / tp;
            q->r_n = q->unit;
            q->r_lo = q->row0 + head * q->unit;
        }
        break;
    }
    case KILN_SHARD_ROW:
        KILN_CHECK(q->ndim == 2, KILN_ERR_POLICY, "%s: weight '%s' part %d (%s): shard rule 'row' needs a matrix", wh,
                   w->id, j + 1, q->tensor);
        KILN_CHECK(q->shape[1] % (tp * q->unit) == 0, KILN_ERR_POLICY,
                   "%s: weight '%s' part %d (%s): shard rule 'row' does not divide: %lld columns into %d ranks of "
                   "%lld-column units",
                   wh, w->id, j + 1, q->tensor, (long long)q->shape[1], tp, (long long)q->unit);
        q->c_n = q->shape[1] / tp;
        q->c_lo = rank * q->c_n;
        break;
    }
fail:
    return st;
}

static kiln_status check_weights(kiln_program *p) {
    kiln_status st = KILN_OK;
    for (int i = 0; i < p->n_weights; i++) {
        kiln_weight_desc *w = &p->weights[i];
        for (int k = 0; k < i; k++)
            KILN_CHECK(strcmp(p->weights[k].id, w->id), KILN_ERR_POLICY, "%s: duplicate weight id '%s'", w->where,
                       w->id);
        w->ndim = w->parts[0].ndim;
        w->rows = 0;
        for (int j = 0; j < w->n_parts; j++) {
            KILN_TRY(slice_part(p, w, j));
            KILN_CHECK(w->parts[j].ndim == w->ndim, KILN_ERR_POLICY,
                       "%s: weight '%s': parts mix 1-D and 2-D tensors", w->where, w->id);
            KILN_CHECK(j == 0 || w->parts[j].c_n == w->parts[0].c_n, KILN_ERR_POLICY,
                       "%s: weight '%s': fused parts have different column counts (%lld vs %lld)", w->where, w->id,
                       (long long)w->parts[j].c_n, (long long)w->parts[0].c_n);
            w->rows += w->parts[j].r_n;
        }
        w->cols = w->parts[0].c_n;
    }
fail:
    return st;
}

/* ---------------------------------------------------------------- ops */

static kiln_status check_ops(kiln_program *p) {
    kiln_status st = KILN_OK;
    bool *written = calloc((size_t)p->n_slots, sizeof(bool));
    KILN_CHECK_ALLOC(written);
    for (int i = 0; i < p->n_slots; i++)
        for (int k = 0; k < i; k++)
            KILN_CHECK(strcmp(p->slots[i].name, p->slots[k].name), KILN_ERR_POLICY, "duplicate slot '%s'",
                       p->slots[i].name);
    KILN_CHECK(p->n_kv_layers >= 1 && p->n_kv_heads >= 1 && p->head_dim >= 1, KILN_ERR_POLICY,
               "%s: plan.kv must give positive layers, heads and head_dim", p->policy_file);
    KILN_CHECK(p->rot_dim >= 2 && p->rot_dim % 2 == 0 && p->rot_dim <= p->head_dim, KILN_ERR_POLICY,
               "%s: plan.rope.rot_dim = %d must be even and at most head_dim %d", p->policy_file, p->rot_dim,
               p->head_dim);
    KILN_CHECK(p->vocab_size >= 1 && p->vocab_local >= 1 && p->vocab_start >= 0 &&
                   p->vocab_start + p->vocab_local <= p->vocab_size,
               KILN_ERR_POLICY, "%s: plan.vocab is inconsistent (size %d, start %d, count %d)", p->policy_file,
               p->vocab_size, p->vocab_start, p->vocab_local);
    for (int i = 0; i < p->n_ops; i++) {
        kiln_op *o = &p->ops[i];
        const char *k = kiln_op_kind_name(o->kind), *wh = o->where;
        const kiln_slot_desc *D = o->dst >= 0 ? &p->slots[o->dst] : NULL;
        const kiln_slot_desc *S = o->src >= 0 ? &p->slots[o->src] : NULL;
        const kiln_slot_desc *S2 = o->src2 >= 0 ? &p->slots[o->src2] : NULL;
        const kiln_weight_desc *W = o->w >= 0 ? &p->weights[o->w] : NULL;
        /* data flow */
        KILN_CHECK(!S || written[o->src], KILN_ERR_POLICY, "%s: op %d '%s' reads slot '%s' before anything writes it",
                   wh, i, k, S ? S->name : "");
        KILN_CHECK(!S2 || written[o->src2], KILN_ERR_POLICY,
                   "%s: op %d '%s' reads slot '%s' before anything writes it", wh, i, k, S2 ? S2->name : "");
        switch (o->kind) {
        case KILN_OP_EMBED:
            KILN_CHECK(W->ndim == 2 && W->cols == D->width && W->rows == p->vocab_local, KILN_ERR_POLICY,
                       "%s: embed: weight '%s' is [%lld, %lld] but slot '%s' is %lld wide and vocab_local is %d", wh,
                       W->id, (long long)W->rows, (long long)W->cols, D->name, (long long)D->width, p->vocab_local);
            KILN_CHECK(!D->per_out, KILN_ERR_POLICY, "%s: embed must write a per-token slot", wh);
            break;
        case KILN_OP_RMSNORM:
        case KILN_OP_ADD_RMSNORM:
            KILN_CHECK(W->ndim == 1 && W->rows == D->width && S->width == D->width &&
                           (!S2 || S2->width == D->width),
                       KILN_ERR_POLICY, "%s: %s: weight '%s' (%lld) and slots '%s' (%lld), '%s' (%lld) disagree", wh,
                       k, W->id, (long long)W->rows, S->name, (long long)S->width, D->name, (long long)D->width);
            KILN_CHECK(o->eps > 0 && o->eps < 1, KILN_ERR_POLICY, "%s: %s: eps %g out of range", wh, k, o->eps);
            break;
        case KILN_OP_ADD:
            KILN_CHECK(S->width == D->width && S2->width == D->width, KILN_ERR_POLICY,
                       "%s: add: slots '%s', '%s', '%s' have different widths", wh, D->name, S->name, S2->name);
            break;
        case KILN_OP_SCALE:
            KILN_CHECK(S->width == D->width, KILN_ERR_POLICY, "%s: scale: slot widths differ", wh);
            break;
        case KILN_OP_GEMM: {
            KILN_CHECK(W->ndim == 2, KILN_ERR_POLICY, "%s: gemm: weight '%s' is not a matrix", wh, W->id);
            KILN_CHECK(W->cols == S->width, KILN_ERR_POLICY,
                       "%s: gemm: weight '%s' has %lld input features but slot '%s' is %lld wide", wh, W->id,
                       (long long)W->cols, S->name, (long long)S->width);
            KILN_CHECK(o->dst_col >= 0 && o->dst_col + W->rows <= D->width, KILN_ERR_POLICY,
                       "%s: gemm: weight '%s' writes columns [%lld, %lld) but slot '%s' is %lld wide", wh, W->id,
                       (long long)o->dst_col, (long long)(o->dst_col + W->rows), D->name, (long long)D->width);
            KILN_CHECK(S->per_out == D->per_out, KILN_ERR_POLICY, "%s: gemm: slots '%s' and '%s' have different rows",
                       wh, S->name, D->name);
            if (o->bias >= 0) {
                const kiln_weight_desc *B = &p->weights[o->bias];
                KILN_CHECK(B->ndim == 1 && B->rows == W->rows, KILN_ERR_POLICY,
                           "%s: gemm: bias '%s' has %lld entries for %lld outputs", wh, B->id, (long long)B->rows,
                           (long long)W->rows);
            }
            KILN_CHECK(o->dst != o->src, KILN_ERR_POLICY, "%s: gemm cannot write its own input slot", wh);
            break;
        }
        case KILN_OP_ROPE:
        case KILN_OP_KV_WRITE:
        case KILN_OP_ROPE_KV_WRITE:
        case KILN_OP_ATTENTION:
            KILN_CHECK(o->n_heads > 0 && o->n_kv_heads > 0 && o->n_heads % o->n_kv_heads == 0, KILN_ERR_POLICY,
                       "%s: %s: heads %d must be a positive multiple of kv_heads %d", wh, k, o->n_heads,
                       o->n_kv_heads);
            KILN_CHECK(o->head_dim == p->head_dim && o->n_kv_heads == p->n_kv_heads, KILN_ERR_POLICY,
                       "%s: %s: head_dim %d / kv_heads %d differ from plan.kv (%d / %d)", wh, k, o->head_dim,
                       o->n_kv_heads, p->head_dim, p->n_kv_heads);
            KILN_CHECK(S->width == (int64_t)(o->n_heads + 2 * o->n_kv_heads) * o->head_dim, KILN_ERR_POLICY,
                       "%s: %s: slot '%s' is %lld wide; q|k|v of %d + 2 x %d heads of %d need %lld", wh, k, S->name,
                       (long long)S->width, o->n_heads, o->n_kv_heads, o->head_dim,
                       (long long)(o->n_heads + 2 * o->n_kv_heads) * o->head_dim);
            KILN_CHECK(o->kind == KILN_OP_ROPE || (o->kv_layer >= 0 && o->kv_layer < p->n_kv_layers),
                       KILN_ERR_POLICY, "%s: %s: kv_layer %d outside plan.kv.layers (%d)", wh, k, o->kv_layer,
                       p->n_kv_layers);
            if (o->kind == KILN_OP_ATTENTION) {
                KILN_CHECK(D->width == (int64_t)o->n_heads * o->head_dim, KILN_ERR_POLICY,
                           "%s: attention: output slot '%s' must be heads x head_dim = %d wide", wh, D->name,
                           o->n_heads * o->head_dim);
                if (o->scale == 0) o->scale = 1.0f / sqrtf((float)o->head_dim);
                KILN_CHECK(o->window >= 0, KILN_ERR_POLICY, "%s: attention: window must be >= 0", wh);
            }
            break;
        case KILN_OP_SILU_MUL:
        case KILN_OP_GELU_MUL:
            KILN_CHECK(S->width == 2 * D->width, KILN_ERR_POLICY,
                       "%s: %s: input slot '%s' (%lld) must be twice as wide as '%s' (%lld)", wh, k, S->name,
                       (long long)S->width, D->name, (long long)D->width);
            break;
        case KILN_OP_GATHER_LAST:
            KILN_CHECK(!S->per_out && D->per_out && S->width == D->width, KILN_ERR_POLICY,
                       "%s: gather_last: needs a per-token input and a per-output slot of the same width", wh);
            break;
        case KILN_OP_CROSS_ATTENTION:
            KILN_CHECK(p->cross_kv_heads > 0 && p->cross_head_dim > 0, KILN_ERR_POLICY,
                       "%s: cross_attention needs plan.cross = {kv_heads, head_dim} (the verifier's cache)", wh);
            KILN_CHECK(o->n_kv_heads == p->cross_kv_heads && o->head_dim == p->cross_head_dim &&
                           o->n_heads % o->n_kv_heads == 0,
                       KILN_ERR_POLICY, "%s: cross_attention heads %d / kv_heads %d / head_dim %d disagree with plan.cross",
                       wh, o->n_heads, o->n_kv_heads, o->head_dim);
            KILN_CHECK(S->width == (int64_t)o->n_heads * o->head_dim && D->width == S->width, KILN_ERR_POLICY,
                       "%s: cross_attention: slots '%s' and '%s' must be heads x head_dim = %d wide", wh, S->name,
                       D->name, o->n_heads * o->head_dim);
            KILN_CHECK(p->rot_dim <= o->head_dim, KILN_ERR_POLICY, "%s: cross_attention: rope wider than head_dim", wh);
            if (o->scale == 0) o->scale = 1.0f / sqrtf((float)o->head_dim);
            break;
        case KILN_OP_ALL_REDUCE: break;
        case KILN_OP_ALL_GATHER:
            KILN_CHECK(D->width == S->width * p->tp_size && D->per_out == S->per_out, KILN_ERR_POLICY,
                       "%s: all_gather: output '%s' must be %d x '%s'", wh, D->name, p->tp_size, S->name);
            break;
        default: break;
        }
        if (o->dst >= 0) written[o->dst] = true;
        if (o->kind == KILN_OP_ADD_RMSNORM) written[o->src2] = true;
    }
    {
        const kiln_slot_desc *L = &p->slots[p->logits_slot];
        KILN_CHECK(L->per_out && L->width == p->vocab_size && written[p->logits_slot], KILN_ERR_POLICY,
                   "%s: plan.logits slot '%s' must be a per-output slot of vocab_size (%d) written by the program",
                   p->policy_file, L->name, p->vocab_size);
    }
fail:
    free(written);
    return st;
}

kiln_status kiln_program_validate(kiln_program *p);
kiln_status kiln_program_validate(kiln_program *p) {
    kiln_status st = KILN_OK;
    KILN_TRY(check_weights(p));
    KILN_TRY(check_ops(p));
    for (int i = 0; i < p->n_kernels; i++)
        for (int k = 0; k < i; k++)
            KILN_CHECK(strcmp(p->kernels[i].name, p->kernels[k].name), KILN_ERR_POLICY, "%s: duplicate kernel '%s'",
                       p->kernels[i].where, p->kernels[i].name);
fail:
    return st;
}

kiln_status kiln_program_check_checkpoint(const kiln_program *p, const kiln_checkpoint *ck) {
    kiln_status st = KILN_OK;
    for (int i = 0; i < p->n_weights; i++) {
        const kiln_weight_desc *w = &p->weights[i];
        for (int j = 0; j < w->n_parts; j++) {
            const kiln_weight_part *q = &w->parts[j];
            st = kiln_checkpoint_expect(ck, q->tensor, q->ndim, q->shape, NULL);
            if (st) {
                kiln_error_context("weight '%s' (policy %s)", w->id, w->where);
                return st;
            }
        }
    }
    return st;
}

/* ------------------------------------------------------------- listing */

static const char *sname(const kiln_program *p, int s) { return s >= 0 ? p->slots[s].name : "-"; }
static const char *wname(const kiln_program *p, int w) { return w >= 0 ? p->weights[w].id : "-"; }

kiln_status kiln_program_describe(const kiln_program *p, kiln_buf *b) {
    kiln_status st = KILN_OK;
    KILN_TRY(kiln_buf_printf(b, "plan: policy %s (%s), tp rank %d of %d, kv cache %s\n", p->policy_name,
                             p->policy_file, p->tp_rank, p->tp_size, p->kv_cache_dtype));
    KILN_TRY(kiln_buf_printf(b, "  rope: %s theta=%g rot_dim=%d %s", p->rope.type, p->rope.theta, p->rot_dim,
                             p->rope_interleaved ? "interleaved" : "rotate-half"));
    if (strcmp(p->rope.type, "default")) KILN_TRY(kiln_buf_printf(b, " factor=%g", p->rope.factor));
    KILN_TRY(kiln_buf_printf(b, "\n  kv cache: %d layers x %d kv heads x head_dim %d\n", p->n_kv_layers,
                             p->n_kv_heads, p->head_dim));
    if (strcmp(p->kv_scales, "auto")) { /* listed only when the plan chose (keeps the goldens) */
        KILN_TRY(kiln_buf_printf(b, "  kv scales: %s", p->kv_scales));
        for (int i = 0; i < p->n_kv_scales; i++)
            KILN_TRY(kiln_buf_printf(b, " %sk=%g v=%g", i ? "| " : "", p->kv_k_scales[i], p->kv_v_scales[i]));
        KILN_TRY(kiln_buf_puts(b, "\n"));
    }
    KILN_TRY(kiln_buf_printf(b, "  vocab: %d (this rank: [%d, %d))\n", p->vocab_size, p->vocab_start,
                             p->vocab_start + p->vocab_local));
    KILN_TRY(kiln_buf_printf(b, "weights (%d):\n", p->n_weights));
    for (int i = 0; i < p->n_weights; i++) {
        const kiln_weight_desc *w = &p->weights[i];
        char shape[48];
        if (w->ndim == 2)
            snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)w->rows, (long long)w->cols);
        else
            snprintf(shape, sizeof shape, "[%lld]", (long long)w->rows);
        KILN_TRY(kiln_buf_printf(b, "  w%-3d %-20s %-14s %-10s <-", i, w->id, shape, kiln_shard_name(w->shard)));
        for (int j = 0; j < w->n_parts; j++) {
            const kiln_weight_part *q = &w->parts[j];
            KILN_TRY(kiln_buf_printf(b, "%s %s", j ? " +" : "", q->tensor));
            if (q->r_lo != 0 || q->r_n != q->shape[0])
                KILN_TRY(kiln_buf_printf(b, "[%lld:%lld]", (long long)q->r_lo, (long long)(q->r_lo + q->r_n)));
            if (q->ndim == 2 && (q->c_lo != 0 || q->c_n != q->shape[1]))
                KILN_TRY(kiln_buf_printf(b, "[:, %lld:%lld]", (long long)q->c_lo, (long long)(q->c_lo + q->c_n)));
        }
        KILN_TRY(kiln_buf_puts(b, "\n"));
    }
    KILN_TRY(kiln_buf_printf(b, "slots (%d):\n", p->n_slots));
    for (int i = 0; i < p->n_slots; i++)
        KILN_TRY(kiln_buf_printf(b, "  s%-3d %-12s [%s, %lld]\n", i, p->slots[i].name,
                                 p->slots[i].per_out ? "n_out" : "n_tokens", (long long)p->slots[i].width));
    if (p->n_kernels) {
        KILN_TRY(kiln_buf_printf(b, "custom kernels (%d):\n", p->n_kernels));
        for (int i = 0; i < p->n_kernels; i++)
            KILN_TRY(kiln_buf_printf(b, "  %s: entry %s, replaces %s (%s)\n", p->kernels[i].name, p->kernels[i].entry,
                                     kiln_op_kind_name(p->kernels[i].replaces), p->kernels[i].where));
    }
    KILN_TRY(kiln_buf_printf(b, "program (%d ops, logits in %s):\n", p->n_ops, sname(p, p->logits_slot)));
    for (int i = 0; i < p->n_ops; i++) {
        const kiln_op *o = &p->ops[i];
        char lay[8] = "";
        if (o->layer >= 0) snprintf(lay, sizeof lay, "L%d", o->layer);
        char var[48] = "";
        if (o->custom >= 0)
            snprintf(var, sizeof var, " [custom:%s]", p->kernels[o->custom].name);
        else if (o->variant > 0)
            snprintf(var, sizeof var, " [%s]", kiln_op_variants(o->kind)[o->variant]);
        KILN_TRY(kiln_buf_printf(b, "  %04d %-4s %-14s", i, lay, kiln_op_kind_name(o->kind)));
        switch (o->kind) {
        case KILN_OP_EMBED: KILN_TRY(kiln_buf_printf(b, "%s = %s[ids]", sname(p, o->dst), wname(p, o->w))); break;
        case KILN_OP_RMSNORM:
            KILN_TRY(kiln_buf_printf(b, "%s = rmsnorm(%s) * %s  eps=%g", sname(p, o->dst), sname(p, o->src),
                                     wname(p, o->w), o->eps));
            break;
        case KILN_OP_ADD_RMSNORM:
            KILN_TRY(kiln_buf_printf(b, "%s += %s; %s = rmsnorm(%s) * %s  eps=%g", sname(p, o->src2),
                                     sname(p, o->src), sname(p, o->dst), sname(p, o->src2), wname(p, o->w), o->eps));
            break;
        case KILN_OP_ADD:
            KILN_TRY(kiln_buf_printf(b, "%s = %s + %s", sname(p, o->dst), sname(p, o->src), sname(p, o->src2)));
            break;
        case KILN_OP_SCALE:
            KILN_TRY(kiln_buf_printf(b, "%s = %s * %g", sname(p, o->dst), sname(p, o->src), o->scale));
            break;
        case KILN_OP_GEMM: {
            const kiln_weight_desc *W = &p->weights[o->w];
            if (o->dst_col || W->rows != p->slots[o->dst].width)
                KILN_TRY(kiln_buf_printf(b, "%s[:, %lld:%lld]", sname(p, o->dst), (long long)o->dst_col,
                                         (long long)(o->dst_col + W->rows)));
            else
                KILN_TRY(kiln_buf_puts(b, sname(p, o->dst)));
            KILN_TRY(kiln_buf_printf(b, " = %s @ %s^T", sname(p, o->src), W->id));
            if (o->bias >= 0) KILN_TRY(kiln_buf_printf(b, " + %s", wname(p, o->bias)));
            break;
        }
        case KILN_OP_ROPE:
            KILN_TRY(kiln_buf_printf(b, "rope(%s) q %d heads, k %d heads, head_dim %d", sname(p, o->src), o->n_heads,
                                     o->n_kv_heads, o->head_dim));
            break;
        case KILN_OP_KV_WRITE:
            KILN_TRY(kiln_buf_printf(b, "cache[%d] <- k, v of %s (%d kv heads)", o->kv_layer, sname(p, o->src),
                                     o->n_kv_heads));
            break;
        case KILN_OP_ROPE_KV_WRITE:
            KILN_TRY(kiln_buf_printf(b, "rope(%s); cache[%d] <- k, v  (%d q / %d kv heads, head_dim %d)",
                                     sname(p, o->src), o->kv_layer, o->n_heads, o->n_kv_heads, o->head_dim));
            break;
        case KILN_OP_ATTENTION:
            KILN_TRY(kiln_buf_printf(b, "%s = attention(q of %s, cache[%d])  %d/%d heads scale=%.6g", sname(p, o->dst),
                                     sname(p, o->src), o->kv_layer, o->n_heads, o->n_kv_heads, o->scale));
            if (o->window) KILN_TRY(kiln_buf_printf(b, " window=%d", o->window));
            break;
        case KILN_OP_SILU_MUL:
        case KILN_OP_GELU_MUL:
            KILN_TRY(kiln_buf_printf(b, "%s = %s(%s[:, :half]) * %s[:, half:]", sname(p, o->dst),
                                     o->kind == KILN_OP_SILU_MUL ? "silu" : "gelu", sname(p, o->src),
                                     sname(p, o->src)));
            break;
        case KILN_OP_GATHER_LAST:
            KILN_TRY(kiln_buf_printf(b, "%s = %s[out_rows]", sname(p, o->dst), sname(p, o->src)));
            break;
        case KILN_OP_CROSS_ATTENTION:
            KILN_TRY(kiln_buf_printf(b, "%s = cross_attention(rope(%s) at pos%+d, verifier cache[%d])  %d/%d heads",
                                     sname(p, o->dst), sname(p, o->src), o->pos_offset, o->kv_layer, o->n_heads,
                                     o->n_kv_heads));
            break;
        case KILN_OP_ALL_REDUCE: KILN_TRY(kiln_buf_printf(b, "all_reduce(%s)", sname(p, o->src))); break;
        case KILN_OP_ALL_GATHER:
            KILN_TRY(kiln_buf_printf(b, "%s = all_gather(%s)", sname(p, o->dst), sname(p, o->src)));
            break;
        default: break;
        }
        KILN_TRY(kiln_buf_printf(b, "%s\n", var));
    }
fail:
    return st;
}
