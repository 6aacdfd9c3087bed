/*
 * spec.c -- drafters for speculative decoding: n-gram (prompt lookup) and a
 * draft model run greedily through its own executor and KV tables (from the
 * engine's one block manager). Verification lives in engine.c
 * (process_outputs) and sampler.c (kiln_sampler_verify).
 * Ownership: borrows the engine. Thread-safety: stepping thread only.
 */
#include "engine_internal.h"

#include <stdlib.h>

/* Propose up to k tokens: find the latest earlier occurrence of the longest
 * suffix n-gram (nmax down to nmin) of tokens[0, n) and return what followed
 * it. Returns the number proposed (0 when nothing matches). */
int kiln_spec_ngram_propose(const int32_t *tokens, int n, int k, int nmin, int nmax, int32_t *out) {
    if (k <= 0 || n < 2) return 0;
    if (nmin < 1) nmin = 1;
    for (int g = KILN_MIN(nmax, n - 1); g >= nmin; g--) {
        const int32_t *suffix = tokens + n - g;
        /* latest match that ends before the suffix itself */
        for (int start = n - g - 1; start >= 0; start--) {
            if (memcmp(tokens + start, suffix, sizeof(int32_t) * (size_t)g)) continue;
            int from = start + g, m = 0;
            while (m < k && from + m < n) {
                out[m] = tokens[from + m];
                m++;
            }
            if (m > 0) return m;
        }
    }
    return 0;
}

kiln_status kiln_batch_buf_init(kiln_batch_buf *b, int max_tokens, int max_seqs, int max_blocks) {
    memset(b, 0, sizeof *b);
    b->max_blocks = max_blocks;
    b->tokens = malloc(sizeof(int32_t) * (size_t)max_tokens);
    b->pos = malloc(sizeof(int32_t) * (size_t)max_tokens);
    b->slots = malloc(sizeof(int32_t) * (size_t)max_tokens);
    b->qstart = malloc(sizeof(int32_t) * (size_t)(max_seqs + 1));
    b->ctx = malloc(sizeof(int32_t) * (size_t)max_seqs);
    b->out = malloc(sizeof(int32_t) * (size_t)max_seqs);
    b->tables = calloc((size_t)max_seqs * (size_t)max_blocks, sizeof(int32_t));
    b->cross_tables = calloc((size_t)max_seqs * (size_t)max_blocks, sizeof(int32_t));
    b->cross_ctx = calloc((size_t)max_seqs, sizeof(int32_t));
    if (!b->tokens || !b->pos || !b->slots || !b->qstart || !b->ctx || !b->out || !b->tables || !b->cross_tables ||
        !b->cross_ctx) {
        kiln_batch_buf_free(b);
        return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory for batch buffers");
    }
    return KILN_OK;
}

void kiln_batch_buf_free(kiln_batch_buf *b) {
    free(b->tokens);
    free(b->pos);
    free(b->slots);
    free(b->qstart);
    free(b->ctx);
    free(b->out);
    free(b->tables);
    free(b->cross_tables);
    free(b->cross_ctx);
    memset(b, 0, sizeof *b);
}

/* Feed tokens [from, to) of r (its draft table), logits for the last; the
 * verifier's table and computed length go along for cross attention. */
static void dbatch_add(kiln_engine *e, kiln_batch_buf *b, const kiln_req *r, int from, int to) {
    int s = b->nseq++;
    const kiln_kv_table *t = &r->dkv;
    const int32_t *toks = r->tokens;
    memcpy(b->cross_tables + (size_t)s * (size_t)b->max_blocks, r->kv.blocks, sizeof(int32_t) * (size_t)r->kv.n_blocks);
    b->cross_ctx[s] = r->n_computed;
    for (int p = from; p < to; p++) {
        int i = b->ntok++;
        b->tokens[i] = toks[p];
        b->pos[i] = p;
        b->slots[i] = kiln_kv_slot(&e->kv, t, p);
    }
    b->qstart[s + 1] = b->ntok;
    b->ctx[s] = to;
    memcpy(b->tables + (size_t)s * (size_t)b->max_blocks, t->blocks, sizeof(int32_t) * (size_t)t->n_blocks);
    b->out[b->nout++] = b->ntok - 1;
    if (to - from > b->max_q) b->max_q = to - from;
    if (to > b->max_ctx) b->max_ctx = to;
}

kiln_status kiln_spec_draft_propose(kiln_engine *e, kiln_req **seqs, const int32_t *k, int n, int32_t *drafts,
                                    int stride) {
    kiln_status st = KILN_OK;
    kiln_batch_buf *b = &e->draft_b;
    int kmax = 0;
    for (int i = 0; i < n; i++) kmax = KILN_MAX(kmax, k[i]);
    /* the sequence as the draft sees it: tokens, then its own proposals */
    for (int j = 0; j < kmax; j++) {
        b->ntok = b->nseq = b->nout = b->max_q = b->max_ctx = 0;
        b->qstart[0] = 0;
        int *idx = e->draft_idx, m = 0;
        for (int i = 0; i < n; i++) {
            kiln_req *r = seqs[i];
            if (k[i] <= j) continue;
            int nt = r->n_tokens;
            /* scratch continuation: tokens then drafts so far (r->tokens has room) */
            for (int q = 0; q < j; q++) r->tokens[nt + q] = drafts[i * stride + q];
            int from = j == 0 ? KILN_MIN(r->d_computed, nt - 1) : nt - 1 + j;
            dbatch_add(e, b, r, from, nt + j);
            idx[m++] = i;
        }
        if (!m) break;
        kiln_batch batch = {
            .n_tokens = b->ntok, .n_seqs = b->nseq, .n_out = b->nout, .tokens = b->tokens, .positions = b->pos,
            .qstart = b->qstart, .ctx_len = b->ctx, .block_tables = b->tables, .max_blocks = b->max_blocks,
            .slots = b->slots, .out_rows = b->out, .max_q_len = b->max_q, .max_ctx_len = b->max_ctx,
            .cross_tables = b->cross_tables, .cross_ctx = b->cross_ctx,
        };
        const float *logits = NULL;
        KILN_TRY(e->draft_exec->vt->forward(e->draft_exec, &batch, &logits));
        int V = e->vocab_size;
        int stride_l = e->draft_mf.program->slots[e->draft_mf.program->logits_slot].width;
        for (int q = 0; q < m; q++) {
            int i = idx[q];
            const float *row = logits + (size_t)q * (size_t)stride_l;
            int32_t best = 0;
            for (int v = 1; v < V; v++)
                if (row[v] > row[best]) best = v;
            drafts[i * stride + j] = best;
            seqs[i]->d_computed = seqs[i]->n_tokens + j;
        }
    }
fail:
    return st;
}
