/*
 * eval.c -- numerics checks shared by the tests and bench/fp8_accuracy: one
 * sequence straight through the executor (prefill, then teacher-forced or
 * greedy single-token decode steps, logits kept), and the two distances
 * they report (relative L2 of logits, KL of next-token distributions).
 * Not part of the public API.
 * Ownership: the caller's buffers. Thread-safety: the engine must not be
 * stepping (this drives its executor and KV manager directly).
 */
#include "engine_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

kiln_status kiln_eval_sequence(kiln_engine *e, const int32_t *prompt, int np, const int32_t *feed, int steps,
                               float *logits, int32_t *chosen, FILE *progress) {
    kiln_status st = KILN_OK;
    int V = e->vocab_size, total = np + steps;
    kiln_kv_table t = {0};
    int32_t *toks = NULL, *pos = NULL, *slots = NULL, *tables = NULL;
    KILN_TRY(kiln_kv_table_init(&e->kv, &t));
    if (!kiln_kv_grow(&e->kv, &t, total)) {
        kiln_kv_table_fini(&e->kv, &t);
        return KILN_FAIL(KILN_ERR_LIMIT, "eval: %d tokens do not fit in the KV cache", total);
    }
    toks = malloc(sizeof(int32_t) * (size_t)total);
    pos = malloc(sizeof(int32_t) * (size_t)total);
    slots = malloc(sizeof(int32_t) * (size_t)total);
    tables = calloc((size_t)e->kv.max_blocks_per_seq, sizeof(int32_t));
    KILN_CHECK(toks && pos && slots && tables, KILN_ERR_OUT_OF_MEMORY, "eval: out of host memory");
    memcpy(tables, t.blocks, sizeof(int32_t) * (size_t)t.n_blocks);
    memcpy(toks, prompt, sizeof(int32_t) * (size_t)np);
    for (int i = 0; i < total; i++) {
        pos[i] = i;
        slots[i] = kiln_kv_slot(&e->kv, &t, i);
    }
    for (int k = 0; k <= steps; k++) {
        int p0 = k == 0 ? 0 : np + k - 1, n = k == 0 ? np : 1;
        int32_t qstart[2] = {0, n}, ctx[1] = {p0 + n}, out_row[1] = {n - 1};
        kiln_batch b = {.n_tokens = n, .n_seqs = 1, .n_out = 1, .tokens = toks + p0, .positions = pos + p0,
                        .qstart = qstart, .ctx_len = ctx, .block_tables = tables,
                        .max_blocks = e->kv.max_blocks_per_seq, .slots = slots + p0, .out_rows = out_row,
                        .max_q_len = n, .max_ctx_len = p0 + n};
        const float *lg = NULL;
        KILN_TRY(e->exec->vt->forward(e->exec, &b, &lg));
        memcpy(logits + (size_t)k * (size_t)V, lg, sizeof(float) * (size_t)V);
        if (k < steps) {
            int32_t tok = 0;
            if (feed) tok = feed[k];
            else
                for (int i = 1; i < V; i++)
                    if (lg[i] > lg[tok]) tok = i;
            chosen[k] = tok;
            toks[np + k] = tok;
        }
        if (progress) fprintf(progress, "\r  step %d/%d", k, steps);
    }
    if (progress) fprintf(progress, "\n");
fail:
    kiln_kv_table_fini(&e->kv, &t);
    free(toks), free(pos), free(slots), free(tables);
    return st;
}

double kiln_logits_rel_l2(const float *got, const float *ref, int n) {
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        num += isfinite(got[i]) ? d * d : INFINITY;
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num / den);
}

double kiln_logits_kl(const float *ref, const float *got, int V) {
    double mr = -INFINITY, mg = -INFINITY, zr = 0, zg = 0;
    for (int i = 0; i < V; i++) mr = fmax(mr, ref[i]), mg = fmax(mg, got[i]);
    for (int i = 0; i < V; i++) zr += exp(ref[i] - mr), zg += exp(got[i] - mg);
    double lzr = log(zr) + mr, lzg = log(zg) + mg, kl = 0;
    for (int i = 0; i < V; i++) {
        double lp = ref[i] - lzr, lq = got[i] - lzg;
        kl += exp(lp) * (lp - lq);
    }
    return kl;
}
